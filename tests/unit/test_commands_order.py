"""The command collector keeps a shell's commands in the order they ran, even when one command's
output reaches the terminal log later than the next command's end record (a loaded machine)."""

from __future__ import annotations

import json

from rebench_tui.session.commands import COMMANDS_LOG, TTY_DIR, CommandCollector


class Container:
    """The two files the collector reads in the sandbox, grown by the test as the daemon would."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {COMMANDS_LOG: b"", f"{TTY_DIR}/t1.log": b""}

    def record(self, **rec) -> None:
        self.files[COMMANDS_LOG] += (json.dumps(rec) + "\n").encode()

    def tty(self, data: bytes) -> None:
        self.files[f"{TTY_DIR}/t1.log"] += data

    def read(self, path: str, offset: int) -> bytes:
        return self.files.get(path, b"")[offset:]


def mark(kind: str, seq: int) -> bytes:
    return f"\x1b]7770;{kind};{seq}\x07".encode()


def commands(rows) -> list[str]:
    return [r["action"]["args"]["command"] for r in rows if r.get("type") == "action"]


def test_a_later_command_waits_behind_one_whose_output_is_late(tmp_path):
    """The race seen under load: the collector reads the terminal log again for each waiting
    command, so the log can grow between the first command's look (its end not there yet) and the
    second's (both there). The second must still be written after the first."""
    c = Container()
    col = CommandCollector(c.read, tmp_path / "commands.json", tmp_path / "tty")
    c.record(type="hello", pid=7, ttylog="t1")
    for seq, cmd in ((1, "echo first"), (2, "ls solution")):
        c.record(type="start", pid=7, seq=seq, cmd=cmd, cwd="/home/agent", ms=1000 * seq, src="history")
        c.record(type="end", pid=7, seq=seq, exit=0, ms=1000 * seq + 5)
    c.tty(mark("start", 1) + b"first\r\n")
    rest = mark("end", 1) + mark("start", 2) + b"solution.py\r\n" + mark("end", 2)
    reads = {"n": 0}
    real = c.read

    def read(path: str, offset: int) -> bytes:
        if path.endswith("t1.log"):
            reads["n"] += 1
            if reads["n"] == 3:  # the shell writes the rest while the collector is between two looks
                c.tty(rest)
        return real(path, offset)

    col.read = read
    rows = []
    for _ in range(3):
        rows += col.poll()
    assert commands(rows) == ["echo first", "ls solution"]
    outputs = [r["observation"]["output"] for r in rows if r.get("type") == "observation"]
    assert outputs == ["first\n", "solution.py\n"]


def test_a_command_whose_output_never_comes_is_written_after_its_wait_and_the_rest_follow(tmp_path):
    c = Container()
    col = CommandCollector(c.read, tmp_path / "commands.json", tmp_path / "tty")
    c.record(type="hello", pid=7, ttylog="t1")
    for seq, cmd in ((1, "true"), (2, "pwd")):
        c.record(type="start", pid=7, seq=seq, cmd=cmd, cwd="/", ms=seq, src="history")
        c.record(type="end", pid=7, seq=seq, exit=0, ms=seq + 1)
    c.tty(mark("start", 2) + b"/\r\n" + mark("end", 2))  # the first command's markers never arrive
    seen: list[str] = []
    for _ in range(10):
        seen += commands(col.poll())
    assert seen == ["true", "pwd"]
