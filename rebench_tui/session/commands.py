"""Command capture, host side: turns the container's capture records into audit rows.

The container's capture daemon (``runtime/capture/capture.py``) appends JSON records to a
root-only log; shells opened with the shell key also run under ``script``, whose terminal log
holds every byte the participant saw, with invisible markers around each command's output.
The collector reads both from where it left off (offsets persisted, so a resumed session
replays nothing), pairs each command's start and end, cuts its output from the terminal log
(capped, the cap noted), and writes per command an ``action`` row (``run_bash``), an
``observation`` row and a ``log`` row for viewers that hide actions. Records that show a
command ran without the hooks (a process started by a shell whose hooks were off, or a shell
that never loaded them) become ``command_gap`` rows.
"""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any, Callable

from ..safe_write import write_json
from ..trajectory.entries import log
from .oom import oom_rows

COMMANDS_LOG = "/var/log/rebench/commands.jsonl"
TTY_DIR = "/var/log/rebench/tty"
OUTPUT_CAP = 16 * 1024
MARK = re.compile(rb"\x1b\]7770;(start|end);(\d+)(?:;(-?\d+))?\x07")
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>]")
WAIT_POLLS = 5  # polls to wait for a command's output to reach the terminal log
EXITS = re.compile(r"\s*(exit|logout)\b")
HOOKS_OFF = re.compile(r"trap\s+(-\s+|'')?\s*DEBUG|PROMPT_COMMAND\s*=|unset\s+.*PROMPT_COMMAND|set\s+\+o\s+functrace")


def clean_output(raw: bytes) -> str:
    text = raw.decode("utf-8", "replace")
    text = ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "")
    return text


def _gap_rows(kind: Any, rec: dict[str, Any]) -> list[dict[str, Any]]:
    """The row for a record that shows commands ran unseen (or a record the hooks garbled); none for other kinds."""
    if kind == "proc":
        argv = " ".join(rec.get("argv") or [rec.get("comm", "?")])
        return [log(f"command ran without capture hooks in shell {rec.get('shell')}: {argv}",
                    {"event": "command_gap", "reason": "a process started by a shell whose capture hooks were off",
                     "pid": rec.get("pid"), "shell_pid": rec.get("shell"), "argv": rec.get("argv")}, title="command")]
    if kind == "unhooked_shell":
        return [log(f"a shell without capture hooks is running: {' '.join(rec.get('argv') or [])}",
                    {"event": "command_gap", "reason": "interactive shell without capture hooks (commands it runs "
                     "are still listed from the process table, without output)", "pid": rec.get("pid"),
                     "argv": rec.get("argv")}, title="command")]
    if kind == "oom":  # the kernel killed a process of the container for memory
        return oom_rows(rec)
    if kind == "malformed":
        return [log("malformed capture record", {"event": "command_gap", "reason": "malformed hook record",
                                                 "line": rec.get("line")}, title="command")]
    return []


class CommandCollector:
    """Reads capture records through ``read(path, offset) -> bytes`` (a root read in the sandbox)."""

    def __init__(self, read: Callable[[str, int], bytes], state_path: Path, tty_copy_dir: Path,
                 redact: Callable[[bytes], bytes] | None = None) -> None:
        self.read = read
        self.redact = redact or (lambda b: b)
        self.state_path = state_path
        self.tty_copy_dir = tty_copy_dir
        self.state: dict[str, Any] = {"offset": 0, "pending": {}, "shells": {}, "tty": {}, "waiting": []}
        if state_path.is_file():
            self.state.update(json.loads(state_path.read_text(encoding="utf-8")))
        self._trim_copies()

    def _trim_copies(self) -> None:
        """Cut the host copies of the terminal logs back to what the state has consumed: bytes past
        that (a crash, or a poll that failed half-way) are read again from the container."""
        if not self.tty_copy_dir.is_dir():
            return
        for path in self.tty_copy_dir.glob("*.log"):
            t = self.state["tty"].get(path.stem)
            size = 0 if t is None else int(t["copy"])
            if path.stat().st_size > size:
                with open(path, "r+b") as fh:
                    fh.truncate(size)

    # -- persistence ----------------------------------------------------------------------
    def _save(self) -> None:
        write_json(self.state_path, self.state, durable=False)

    # -- terminal logs --------------------------------------------------------------------
    def _tty(self, ttylog: str) -> dict[str, Any]:
        t = self.state["tty"].setdefault(ttylog, {"offset": 0, "copy": 0, "open": {}, "done": {}, "tail": "", "last_end": 0})
        data = self.read(f"{TTY_DIR}/{ttylog}.log", t["offset"])
        if data:
            t["offset"] += len(data)  # position in the container's log
            data = self.redact(data)  # the host copy never holds a secret; positions below are in the copy
            self.tty_copy_dir.mkdir(parents=True, exist_ok=True)
            with open(self.tty_copy_dir / f"{ttylog}.log", "ab") as fh:  # the full terminal log, kept host-side
                fh.write(data)
            base = t["copy"] - len(t["tail"])
            buf = t["tail"].encode("latin-1") + data
            consumed = 0
            for m in MARK.finditer(buf):
                kind, seq = m.group(1).decode(), m.group(2).decode()
                if kind == "start":
                    t["open"][seq] = {"from": base + m.end()}
                elif seq in t["open"]:
                    start = t["open"].pop(seq)["from"]
                    t["done"][seq] = [start, base + m.start()]
                t["last_end"] = base + m.end()
                consumed = m.end()
            rest = buf[consumed:]
            keep = rest[rest.rfind(b"\x1b"):] if b"\x1b" in rest[-64:] else b""  # a marker cut in half
            t["copy"] += len(data)
            t["tail"] = keep.decode("latin-1")
        return t

    def _output(self, ttylog: str, seq: str, open_ended: bool = False) -> tuple[str | None, int, bool]:
        t = self._tty(ttylog)
        span = t["done"].pop(str(seq), None)
        if span is None and open_ended and str(seq) in t["open"]:
            span = [t["open"].pop(str(seq))["from"], t["copy"]]  # the shell ended inside this command
        if span is None:
            return None, 0, False
        start, end = span
        path = self.tty_copy_dir / f"{ttylog}.log"
        with open(path, "rb") as fh:
            fh.seek(start)
            raw = fh.read(max(0, end - start))
        text = clean_output(raw)
        size = len(text.encode("utf-8"))
        if size > OUTPUT_CAP:
            head = text.encode("utf-8")[: OUTPUT_CAP // 2].decode("utf-8", "ignore")
            tail = text.encode("utf-8")[-OUTPUT_CAP // 2:].decode("utf-8", "ignore")
            text = f"{head}\n[… {size - OUTPUT_CAP} bytes cut: output capped at {OUTPUT_CAP} bytes; the full terminal log is kept …]\n{tail}"
            return text, size, True
        return text, size, False

    # -- records -> rows ------------------------------------------------------------------
    def _command_rows(self, start: dict[str, Any], end: dict[str, Any], output: str | None, size: int, cut: bool,
                      ttylog: str | None) -> list[dict[str, Any]]:
        cid = f"{start['pid']}-{start['seq']}"
        command = start["cmd"].strip("\n")
        cwd = start["cwd"]
        duration = max(0, end["ms"] - start["ms"]) / 1000
        action = {"type": "run_bash", "args": {"command": command}, "id": cid, "cwd": cwd, "started_at": start["ms"],
                  "shell_pid": start["pid"], "source": start["src"]}
        obs: dict[str, Any] = {"id": cid, "exit_status": end["exit"], "output": output, "output_bytes": size, "truncated": cut,
                               "started_at": start["ms"], "ended_at": end["ms"], "duration_s": duration, "cwd": cwd}
        notes = []
        procs = start.get("procs", [])
        if procs:
            obs["processes"] = [" ".join(a) for a in procs[:50]]
        if HOOKS_OFF.search(command):
            notes.append("this command switches the capture hooks off: later commands of this shell are only seen "
                         "in its terminal log and the process table")
        if start["src"] == "debug":
            notes.append("the shell's history did not record this line (history off, a leading space, or a repeat): "
                         "the text is bash's current simple command")
        if end["exit"] is None:
            notes.append("the shell exited" if EXITS.match(command) else "the shell exited before the command ended (no exit status)")
        elif output is None:
            notes.append("output not captured: this shell was not opened with the shell key" if ttylog is None
                         else "output not found in the terminal log")
        if notes:
            obs["notes"] = notes
        first = (output or "").strip().splitlines()[:3]
        summary = f"$ {command}  (exit {end['exit']}, {duration:.1f} s, in {cwd})"
        return [{"type": "action", "action": action}, {"type": "observation", "observation": obs},
                log(summary, {"event": "command", "id": cid, "command": command, "exit_status": end["exit"], "cwd": cwd,
                              "duration_s": duration, "output_head": first, "truncated": cut, **({"notes": notes} if notes else {})},
                    title="command")]

    def poll(self, commit: Callable[[Path, dict[str, Any], list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]]:
        """Read what is new; returns audit row contents in order (empty if nothing happened).

        All or nothing: if a read fails half-way (the link to a remote engine dropped), the state
        goes back to where it was and the next poll reads the same records again. With ``commit``,
        the rows and the new state are handed over together (the session writes both).
        """
        before = copy.deepcopy(self.state)
        try:
            rows, moved = self._poll()
        except BaseException:
            self.state = before
            self._trim_copies()
            raise
        if commit is not None:
            if rows or moved:
                commit(self.state_path, self.state, rows)
        elif rows or moved:
            self._save()
        return rows

    def _poll(self) -> tuple[list[dict[str, Any]], bool]:
        st = self.state
        data = self.read(COMMANDS_LOG, st["offset"])
        rows: list[dict[str, Any]] = []
        complete = data[: data.rfind(b"\n") + 1] if b"\n" in data else b""
        st["offset"] += len(complete)
        for raw in complete.splitlines():
            rows += self._record(raw)
        rows += self._flush(pid_only=None, count_try=True)
        return rows, bool(complete) or bool(st["waiting"])

    def _record(self, raw: bytes) -> list[dict[str, Any]]:
        """The rows one capture record makes (none where it only updates the state)."""
        try:
            rec = json.loads(raw)
        except ValueError:
            return [log("unreadable capture record", {"event": "command_gap", "reason": "unreadable record",
                                                      "raw": raw[:300].decode("utf-8", "replace")}, title="command")]
        st = self.state
        kind, pid = rec.get("type"), str(rec.get("pid"))
        if kind == "hello":
            st["shells"][pid] = {"ttylog": rec.get("ttylog")}
            return [log(f"shell {pid} started with capture hooks" + (" and a terminal log" if rec.get("ttylog") else ""),
                        {"event": "shell_hooked", "pid": rec["pid"], "ttylog": rec.get("ttylog")}, title="command")]
        if kind == "start":
            rec["ttylog"] = st["shells"].get(pid, {}).get("ttylog")
            st["pending"][f"{pid}-{rec['seq']}"] = rec
        elif kind == "end":
            start = st["pending"].pop(f"{pid}-{rec['seq']}", None)
            if start is None:
                return [log(f"end of an unknown command in shell {pid}", {"event": "command_gap", "record": rec},
                            title="command")]
            st["waiting"].append([start, rec, 0])
            return self._flush(pid_only=None)
        elif kind == "proc" and rec.get("covered"):
            key = f"{rec.get('shell')}-{rec.get('seq')}"
            if key in st["pending"]:
                st["pending"][key].setdefault("procs", []).append(rec.get("argv") or [rec.get("comm")])
        elif kind == "bye":
            return self._shell_exited(rec, pid)
        else:
            return _gap_rows(kind, rec)
        return []

    def _shell_exited(self, rec: dict[str, Any], pid: str) -> list[dict[str, Any]]:
        """A shell's ``bye``: its waiting commands, those it never ended, and its exit."""
        st = self.state
        rows = self._flush(pid_only=pid, final=True)
        for key in [k for k in st["pending"] if k.split("-")[0] == pid]:
            start = st["pending"].pop(key)
            ttylog = start.get("ttylog")
            output, size, cut = self._output(ttylog, str(start["seq"]), open_ended=True) if ttylog else (None, 0, False)
            rows += self._command_rows(start, {"ms": rec.get("received", start["ms"]), "exit": None}, output, size, cut, ttylog)
            if EXITS.match(start["cmd"]):
                continue  # `exit` ends the shell before any end record: nothing followed it
            rows.append(log(f"a command of shell {pid} never reported its end: what followed it ran without capture hooks",
                            {"event": "command_gap", "reason": "command without an end record until the shell exited",
                             "id": key, "processes": [" ".join(a) for a in start.get("procs", [])[:50]]}, title="command"))
        sh = st["shells"].pop(pid, {})
        note = self._trailing_activity(sh.get("ttylog"))
        rows.append(log(f"shell {pid} exited" + (f"; {note}" if note else ""),
                        {"event": "shell_exit", "pid": rec.get("pid"), **({"gap": note} if note else {})}, title="command"))
        return rows

    def _flush(self, pid_only: str | None, final: bool = False, count_try: bool = False) -> list[dict[str, Any]]:
        """Emit waiting commands whose output has reached the terminal log (all of a shell's, if final)."""
        rows: list[dict[str, Any]] = []
        still = []
        held: set[str] = set()  # shells with a command still waiting: their later commands wait behind it, in order
        for start, end, tries in self.state["waiting"]:
            pid = str(start["pid"])
            if (pid_only is not None and pid != pid_only) or pid in held:
                still.append([start, end, tries])
                continue
            ttylog = start.get("ttylog")
            output, size, cut = (None, 0, False)
            if ttylog:
                output, size, cut = self._output(ttylog, str(start["seq"]))
                if output is None and not final and tries < WAIT_POLLS:
                    still.append([start, end, tries + int(count_try)])
                    held.add(pid)
                    continue
            rows += self._command_rows(start, end, output, size, cut, ttylog)
        self.state["waiting"] = still
        return rows

    def _trailing_activity(self, ttylog: str | None) -> str | None:
        if not ttylog:
            return None
        t = self._tty(ttylog)
        path = self.tty_copy_dir / f"{ttylog}.log"
        if not path.is_file():
            return None
        with open(path, "rb") as fh:
            fh.seek(t["last_end"])
            after = clean_output(fh.read())
        lines = [line for line in after.splitlines() if line.strip()]
        if len(lines) > 3:  # more than a prompt, `exit` and `logout`: commands ran without markers
            return f"{len(lines)} lines of terminal output after the last recorded command (capture hooks may have been off); kept in the terminal log"
        return None
