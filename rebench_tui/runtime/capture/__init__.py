"""Files installed into containers for command capture (stdlib Python and bash only)."""

from pathlib import Path

HERE = Path(__file__).resolve().parent
DAEMON = HERE / "capture.py"
HOOKS = HERE / "hooks.sh"
TASK = HERE / "task.py"  # the `task` command (/usr/local/bin/task in a container)
TASK_DIR = "/run/rebench-task"  # its spool folder in a container
