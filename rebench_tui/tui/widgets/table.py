"""A DataTable that draws a row again once it is measured.

DataTable measures new rows when its message queue runs empty, and caches each drawn row by its
count of changes, not by the column widths. A row drawn in between (on a busy machine) kept the
old, narrower columns: "re-score of 1" read "re-scor" until the next change to the table.
Every table of the app derives from this one.
"""

from __future__ import annotations

from textual.widgets import DataTable


class MeasuredTable(DataTable):
    def _update_dimensions(self, new_rows) -> None:  # DataTable's hook, run when its queue is empty
        widths = [c.content_width for c in self.ordered_columns]
        super()._update_dimensions(new_rows)
        if [c.content_width for c in self.ordered_columns] != widths:
            self._clear_caches()  # drawn rows are kept by change count: forget those of the old widths
            self.refresh()
