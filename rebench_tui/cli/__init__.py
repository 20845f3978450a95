"""`rebench-tui`: thin commands over the layers below, assembled here from one module per group
of the help (sessions, records, compare, study, environments). Importing this module imports no
command: each group's module, and what it needs (sessions, Docker, compare, the screen), is
loaded when one of its commands runs or shows its help (cli/group.py)."""

from __future__ import annotations

import click

from .common import CONTEXT
from .group import LazyGroup

# `rebench-tui --help` lists the commands in these groups, each with an example; a command not named
# here is listed under "Other".
HELP_GROUPS = (
    ("Sessions (a participant's)", ("start", "resume", "score", "finish", "stop"),
     "rebench-tui start triton_cumsum --time-limit 8h"),
    ("Records", ("sessions", "verify", "repair", "export", "compare"),
     "rebench-tui compare --env triton_cumsum"),
    ("Study (several participants, one collector)", ("study", "collector", "kiosk"),
     "rebench-tui study status https://collector.example:8765"),
    ("Environments and machines", ("list", "doctor", "prepare", "calibrate", "images", "hosts"),
     "rebench-tui doctor triton_cumsum"),
)

_S, _R, _C = "rebench_tui.cli.sessions", "rebench_tui.cli.records", "rebench_tui.cli.compare"
_T, _E = "rebench_tui.cli.study", "rebench_tui.cli.environments"
# name: (where the command is, the first sentence of its help as --help lists it; a test holds the two equal)
COMMANDS: dict[str, tuple[str, str]] = {
    "start": (f"{_S}:start", "Open ENV_ID in a new session and start the clock."),
    "resume": (f"{_S}:resume", "Reopen a session (default: the most recent unfinished one); the clock continues exactly."),
    "score": (f"{_S}:score", "Score a session once without the screen (the clock is left as it is)."),
    "finish": (f"{_S}:finish", "Take the final score and finish a session without the screen: at or after the time "
                               "limit it finishes as 'time_limit', before it as a submission."),
    "stop": (f"{_S}:stop", "Stop a session's container."),
    "sessions": (f"{_R}:sessions_cmd", "List sessions from the index (an unreadable index is rebuilt from the session "
                                       "folders by itself)."),
    "verify": (f"{_R}:verify_cmd", "Check sessions' records: hash chain, trace-entry contract, the session's state "
                                   "(finished, active, interrupted) against session.json, score log, final score, files."),
    "repair": (f"{_R}:repair_cmd", "Rebuild a session's session.json and score_log.csv from its audit log (the record "
                                   "of truth) where they are missing, damaged or disagree with it; says what it rebuilt."),
    "export": (f"{_R}:export", "Export sessions' records (SESSION ids or unique prefixes, or --all) to Inspect, "
                               "Vivaria or CSV."),
    "compare": (f"{_C}:compare", "Compare human sessions with agent runs: best-so-far score vs working time, finals, "
                                 "score@k."),
    "study": (f"{_T}:study", "A researcher's view of a study's collector."),
    "collector": (f"{_T}:collector", "The study collector: the service that witnesses every session's rows as they "
                                     "are written."),
    "kiosk": (f"{_T}:kiosk", "A study participant's login: start or resume their own session, nothing else (see "
                             "docs/study.md)."),
    "list": (f"{_E}:list_cmd", "Show the environments, their profiles' start and reference scores (the anchors), and "
                               "any problems in their folders."),
    "doctor": (f"{_E}:doctor", "Check that this machine (or --host) can run ENV_ID: engine, API, GPU mode, GPUs, "
                               "disk, assets, SSH keys, clock skew."),
    "prepare": (f"{_E}:prepare", "Build an environment's assets (models, data) into the cache."),
    "calibrate": (f"{_E}:calibrate", "Measure ENV_ID's anchors on this host: the starting and the reference solution "
                                     "through the real scorer, RUNS times each."),
    "images": (f"{_E}:images", "Base images (built without a registry)."),
    "hosts": (f"{_E}:hosts_cmd", "List the GPU hosts in the hosts file and what each has free."),
}


@click.group(cls=LazyGroup, lazy=COMMANDS, sections=HELP_GROUPS, context_settings=CONTEXT)
@click.version_option(package_name="rebench-tui")
def main() -> None:
    """A terminal workstation for human attempts at the RE-Bench environments."""


