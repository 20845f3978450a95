"""rebench-tui: a terminal workstation for human attempts at the RE-Bench environments.

Layers, inside out (see ../shared/spec/architecture.md in the project docs):
catalog -> runtime -> session -> trajectory -> store -> tui / cli.
Nothing outside ``rebench_tui.tui`` imports textual; ``tests/unit/test_layers.py`` enforces it.
"""

__version__ = "0.1.0"
