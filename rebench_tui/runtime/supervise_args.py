"""The command supervisor's command line (a part of supervise.py, shipped and run beside it): the
grammar its docstring gives, parsed by hand (argparse costs a start too much). Standard library only.
"""

from __future__ import annotations


class Args:
    """The parsed command line (the grammar in the module docstring)."""

    def __init__(self) -> None:
        self.verb = ""
        self.token = self.state_dir = ""
        self.user = self.cwd = self.guard_links = self.freeze_owner_of = None
        self.swept_uid: int | None = None  # set by --freeze-owner-of: whose temporary files to sweep, since when
        self.swept_since = 0
        self.keep_status = False
        self.timeout: float | None = None
        self.forbid: list[str] = []
        self.argv: list[str] = []


USAGE = ("usage: supervise.py run --token T --state-dir D [options] -- ARGV... | cancel --token T --state-dir D"
         " | status --token T --state-dir D")


OPTIONS = {"--token": "token", "--state-dir": "state_dir", "--user": "user", "--cwd": "cwd", "--timeout": "timeout",
           "--guard-links": "guard_links", "--forbid": "forbid", "--freeze-owner-of": "freeze_owner_of"}


def parse(argv: list[str]) -> Args:
    a = Args()
    if not argv or argv[0] not in ("run", "cancel", "status"):
        raise SystemExit(USAGE)
    a.verb, rest = argv[0], argv[1:]
    i = 0
    while i < len(rest):
        opt = rest[i]
        if opt == "--":
            a.argv = rest[i + 1:]
            break
        if opt == "--keep-status":
            a.keep_status = True
            i += 1
            continue
        key, eq, val = opt.partition("=")
        if key not in OPTIONS:
            if a.verb == "run" and not opt.startswith("-"):  # ARGV without a "--" before it
                a.argv = rest[i:]
                break
            raise SystemExit(f"supervise.py: unknown option {opt!r}\n{USAGE}")
        if not eq:
            i += 1
            if i >= len(rest):
                raise SystemExit(f"supervise.py: {key} needs a value\n{USAGE}")
            val = rest[i]
        name = OPTIONS[key]
        if name == "forbid":
            a.forbid.append(val)
        elif name == "timeout":
            a.timeout = float(val)
        else:
            setattr(a, name, val)
        i += 1
    if not a.token or not a.state_dir or (a.verb == "run" and not a.argv):
        raise SystemExit(USAGE)
    return a
