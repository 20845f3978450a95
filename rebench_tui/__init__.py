"""rebench-tui: a terminal workstation for human attempts at the RE-Bench environments.

How the package is layered (which package may import which) is written once, in
``docs/architecture.md``; the session folder's record format is in ``docs/records.md``.
Nothing outside ``rebench_tui.tui`` imports textual; ``tests/unit/test_layers.py`` enforces it.
"""

__version__ = "0.1.0"
