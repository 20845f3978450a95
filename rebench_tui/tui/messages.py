"""The one message from the session to the screen: a session event (``session.events``), posted
from whatever thread produced it. Failures of the screen's commands come back as Textual's own
worker state changes (``RebenchApp.on_worker_state_changed``)."""

from __future__ import annotations

from textual.message import Message

from ..session.events import SessionEvent


class SessionUpdate(Message):
    def __init__(self, event: SessionEvent) -> None:
        super().__init__()
        self.event = event
