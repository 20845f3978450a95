"""The kiosk: `rebench-tui kiosk` as a study participant's only entry point on a GPU host.

sshd runs it as a forced command for every login of a participant, under a service account
that owns the sessions folder. It reads what the participant asked for (``SSH_ORIGINAL_COMMAND``),
checks it against the study's kiosk file, and either starts or resumes that participant's own
session through the ordinary ``start``/``resume`` commands, or refuses with one line. The
participant's only shell is then the screen's shell key, inside their session's container.
See docs/study.md.

- ``request``: what the participant asked for, parsed (anything else is refused)
- ``policy``: the kiosk file (who may start which environment, where, with which settings)
- ``identity``: who the participant is (the forced command's ``--participant``, else sudo's user)
- ``plan``: the one thing to do for this participant, decided from the above and their sessions
- ``takeover``: a new login ends the app an earlier, dropped login of theirs left holding the session
"""
