"""The workstation screen's status line and info pane texts: the session's status (with the
sandbox, link and study witness warnings first), where its anchors come from, and whether it runs
in the paper's setting. A mixin of :class:`~rebench_tui.tui.app.RebenchApp`."""

from __future__ import annotations

from textual.widgets import Static

from ..catalog.setting import recorded_differences, setting_words


class StatusPanes:
    """The status line and the info pane's texts (mixed into the app: ``self`` is the app)."""

    def _anchors_text(self) -> str:
        """Where the start and reference scores that normalize this session come from."""
        a = self.session.anchors
        return f"anchors ({a.kind}): start {a.start:g}, reference {a.reference:g} — {a.summary}"

    def _setting_text(self) -> str:
        """Whether this session runs in the paper's setting, and where it does not (list -v has the why)."""
        record = self.session.meta.setting
        differs = recorded_differences(record)
        if not differs:
            return setting_words(record)
        return (f"setting: differs from the paper's in {len(differs)} — "
                + "; ".join(f"{d['name']}: {d['here']}" for d in differs) + " (rebench-tui list -v says why)")

    def _anchors_stale(self) -> bool:
        return bool(self.session.anchors.provenance.get("stale")) or self.session.anchors.kind == "uncalibrated"

    def _status_text(self, link_up: bool = True) -> str:
        s = self.session
        # the warnings come first: a narrow terminal cuts the line's end, never them
        warn = "" if s.sandbox.isolated else "⚠ "
        why = "" if s.sandbox.isolated else " · commands and the scorer run as you"
        link = "" if link_up else f"⚠ LINK DOWN to {s.sandbox.host}: reconnecting; the clock keeps running, records are kept · "
        seen = "" if self.witness is None else f" · {self.witness.words()}"
        return f"{link}{warn}{s.status_line()}{seen} · {s.meta.title} · session {s.id}{why}"

    def _show_witness(self) -> None:
        status = self.query_one("#status", Static)
        status.update(self._status_text(self._link_up))
        status.set_class(not self.witness.state().current, "witness-behind")

    def _show_link(self, up: bool) -> None:
        self._link_up = up
        status = self.query_one("#status", Static)
        status.update(self._status_text(up))
        status.set_class(not up, "link-down")
