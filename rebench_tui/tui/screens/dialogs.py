"""Modal dialogs: quit, submit, note, help. Each returns its answer through ``dismiss``."""

from __future__ import annotations

from typing import Generic, TypeVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

T = TypeVar("T")


class Dialog(ModalScreen[T], Generic[T]):
    """A framed box in the middle of the screen, the session dimmed but visible around it.

    Textual scopes a class's ``DEFAULT_CSS`` to that class: a selector that does not start with the
    class's own name is read as one inside it (``ModalScreen > Vertical`` became ``Dialog
    ModalScreen > Vertical``, which matches nothing). So every rule here starts with ``Dialog``,
    which the dialogs below are."""

    DEFAULT_CSS = """
    Dialog { align: center middle; }
    Dialog > Vertical { width: 76; max-width: 95%; height: auto; max-height: 90%; border: thick $primary;
                        background: $surface; padding: 1 2; }
    Dialog Label { width: 1fr; margin-bottom: 1; }
    Dialog #help-text { height: auto; max-height: 60vh; }
    Dialog Horizontal { height: auto; margin-top: 1; }
    Dialog Button { margin-right: 1; }
    """


class QuitScreen(Dialog[str | None]):
    """Answers "pause" (pause the clock, then quit), "keep" (quit, clock keeps running) or None."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="dialog.cancel")]

    def __init__(self, finished: bool, scoring: bool) -> None:
        super().__init__()
        self.finished = finished
        self.scoring = scoring

    def compose(self) -> ComposeResult:
        with Vertical():
            if self.finished:
                yield Label("Quit? The session is finished; its records are complete.")
            else:
                yield Label("Quit the app? The container and your files stay; `rebench-tui resume` reopens this session.")
                yield Label("Pausing stops the working clock until you resume. Keeping it running counts the time you are away.")
            if self.scoring:
                yield Label("[b]A scoring is running.[/b] Quitting cancels it; nothing recorded so far is lost.")
            with Horizontal():
                if self.finished:
                    yield Button("Quit", id="pause", variant="primary")
                else:
                    yield Button("Pause clock and quit", id="pause", variant="primary")
                    yield Button("Quit, clock keeps running", id="keep", variant="warning")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#pause", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)


class SubmitScreen(Dialog[str | None]):
    """Answers the submission text ("" allowed) or None to cancel."""

    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="dialog.cancel")]

    def __init__(self, rule: str = "") -> None:
        super().__init__()
        self.rule = rule  # the session's rule in one sentence (finish_words.rule_sentence)

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Submit and finish? One last scoring runs on your files as they are; then the session is "
                        "finished and scoring closes.")
            if self.rule:
                yield Label(self.rule, id="rule")
            yield Input(placeholder="optional submission note", id="submission")
            with Horizontal():
                yield Button("Submit and finish", id="submit", variant="error")
                yield Button("Cancel", id="cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self.query_one(Input).value if event.button.id == "submit" else None)


class NoteScreen(Dialog[str | None]):
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="dialog.cancel")]

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Note for the record (what you tried, a break, anything a reader should know). Enter saves.")
            yield Input(placeholder="note", id="note")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)


class HelpScreen(Dialog[None]):
    BINDINGS = [Binding("escape,q,question_mark", "dismiss(None)", "Close", id="dialog.close")]

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll(id="help-text"):  # a short terminal scrolls the text, the Close button stays
                yield Static(self.text, markup=False, id="help-body")
            yield Button("Close", id="close")

    def on_button_pressed(self, _event: Button.Pressed) -> None:
        self.dismiss(None)
