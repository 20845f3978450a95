"""The Textual screen over a session. It renders the session and owns no logic."""
