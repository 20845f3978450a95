"""`python -m rebench_tui.cli`: the same command line as `rebench-tui`."""

from . import main

main()
