"""The workstation screen's other keys: pause, note, submit, info, compare, help and quit, each
asking first where it should; and the command palette's words for the session's commands. A mixin
of :class:`~rebench_tui.tui.app.RebenchApp`."""

from __future__ import annotations

from textual import work
from textual.binding import Binding

from ..errors import RebenchError
from .finish_words import rule_sentence
from .screens.dialogs import HelpScreen, NoteScreen, QuitScreen, SubmitScreen

# The session's commands in the command palette, with what each does (quit is Textual's own entry,
# which goes through the same dialog).
PALETTE = {"score": "Run the protected scorer on the files as they are now", "cancel_score": "Cancel the running scoring",
           "pause": "Pause or resume the working clock", "note": "Write a note into the record",
           "shell": "Open a login shell in the container", "submit": "Submit: one last scoring, then the session finishes",
           "compare": "Compare with this environment's other sessions and agent runs",
           "info": "Show or hide the instructions, anchors and setting", "help": "The keys and where the records are"}


class SessionActions:
    """The keys besides scoring and the shell (mixed into the app: ``self`` is the app)."""

    def action_pause(self) -> None:
        s = self.session
        if s.finished:
            return
        self._command(s.pause if s.wclock.running else s.resume)

    def action_note(self) -> None:
        if self.session.finished:
            self.notify("This session is finished: its record ends with the finish row and takes nothing more.")
            return

        def done(text: str | None) -> None:
            if text and text.strip():
                self._command(self.session.note, text)

        self.push_screen(NoteScreen(), done)

    def action_submit(self) -> None:
        s = self.session
        if s.finished:
            self.notify("This session is already finished.")
            return
        if self._score_started is not None:
            self.notify("Wait for the running scoring to finish (or cancel it with c), then submit.", severity="warning")
            return

        def done(value: str | None) -> None:
            if value is not None:
                self._take_final(value)

        meta = self.session.meta
        self.push_screen(SubmitScreen(rule_sentence(meta.aggregation, meta.recount_runs, meta.timing)), done)

    def action_info(self) -> None:
        """Show or hide the info pane (instructions, anchors, setting): hidden by default below 140
        columns, shown by default above."""
        self.screen.toggle_class("-info-toggled")

    def action_compare(self) -> None:
        self.notify("Comparing with the other sessions of this environment…")
        self._compare_worker()

    @work(thread=True, exit_on_error=False, group="compare")
    def _compare_worker(self) -> None:
        """This environment's human sessions (this one included) and any agent runs in
        ``agent_runs`` ($REBENCH_AGENT_RUNS), computed off the screen's thread, then shown."""
        from ..compare.command import compare_beside_session
        from .screens.compare import CompareScreen

        s = self.session
        try:
            comparison = compare_beside_session(s.folder, s.env, s.meta.profile, self.agent_runs)
        except RebenchError as exc:
            self.call_from_thread(self.notify, f"Nothing to compare: {exc.what}", severity="warning")
            return
        self.call_from_thread(self.push_screen, CompareScreen(comparison))

    def action_help(self) -> None:
        keys = self.active_bindings
        lines = ["Keys", ""]
        for b in self.BINDINGS:
            if isinstance(b, Binding) and b.show or b.id == "cancel_score":
                shown = self.get_key_display(next((ab.binding for ab in keys.values() if ab.binding.id == b.id), b))
                lines.append(f"  {shown:<6} {PALETTE.get(b.id, 'Quit (asks first: pause the clock or keep it running)')}")
        lines += ["  ctrl+p the command palette, which lists these commands too",
                  "", "Remap keys in a keymap file (binding id = \"key\"); the ids are "
                  + ", ".join(b.id for b in self.BINDINGS if isinstance(b, Binding) and b.id) + ".",
                  "", f"Session folder: {self.session.folder}"]
        self.push_screen(HelpScreen("\n".join(lines)))

    def action_quit_confirm(self) -> None:
        def done(answer: str | None) -> None:
            if answer is None:
                return
            if self._score_started is not None:
                self._cancel.set()
            self.closed_with = answer
            self.exit()

        self.push_screen(QuitScreen(self.session.finished, self._score_started is not None), done)

    async def action_quit(self) -> None:  # the command palette's quit goes through the same dialog
        self.action_quit_confirm()
