#!/usr/bin/env python3
"""Command capture inside a container, run as root (standard library only).

    capture.py serve     read hook records from the FIFO, watch the participant's processes,
                         append everything to the root-only log (one JSON object a line)

Hook records (from /etc/profile.d/zz-rebench.sh, written by the participant's shells into a
FIFO they can write but not read), one header line each: ``hello PID TTYLOG``,
``start PID SEQ MS SRC NCWD NCMD`` followed by NCWD + NCMD bytes (the working directory, then
the command line) and a newline, ``end PID SEQ MS EXIT``, ``bye PID``. The daemon stamps each
with the time it arrived.

Process records: every 0.5 s it lists /proc. A new process of the participant (uid 1000)
whose parent is an interactive shell is logged with its command line and whether that shell
had a command open (hooks working) at the time. A shell with a terminal that never said hello
(started with --norc, or sh, or zsh) is logged once as ``unhooked_shell``. Shells younger than
GRACE_S seconds are still loading their startup files and are left alone; forks of a shell
that have not exec'd yet (subshells) are not commands. The host turns
uncovered processes into gap records, so disabling the hooks cannot drop commands silently.

Memory: at every look it also reads the container's cgroup memory events (``oom_kill`` in
``memory.events`` under cgroup v2, ``memory.oom_control`` under v1). When the count grows, the
kernel killed a process of the container for memory, and an ``oom`` record says how many, with
the processes that ended since the previous look. ``docker inspect``'s ``OOMKilled`` says only
whether the container's first process was the one killed, which a participant's is never.
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time

RUN = "/run/rebench-capture"
FIFO = f"{RUN}/hooks.fifo"
LOG_DIR = "/var/log/rebench"
LOG = f"{LOG_DIR}/commands.jsonl"
TTY_DIR = f"{LOG_DIR}/tty"
PIDFILE = f"{RUN}/capture.pid"
AGENT_UID = 1000
GRACE_S = 2.0
CLK_TCK = os.sysconf("SC_CLK_TCK")
SHELLS = {"bash", "sh", "dash", "zsh", "fish", "ksh", "tcsh", "csh"}
MEMORY_EVENTS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")  # cgroup v2, v1


def oom_kills() -> tuple[int, str] | None:
    """(processes the kernel killed for memory in this container so far, the file that says so)."""
    for path in MEMORY_EVENTS:
        try:
            with open(path, encoding="ascii") as fh:
                for line in fh:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill":
                        return int(value), path
        except (OSError, ValueError):
            continue
    return None


def now_ms() -> int:
    return int(time.time() * 1000)


def proc_info(pid: int) -> dict | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read().decode("utf-8", "replace")
        comm = raw[raw.index("(") + 1: raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2:].split()
        uid = os.stat(f"/proc/{pid}").st_uid
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            argv = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
    except (OSError, ValueError):
        return None
    return {"pid": pid, "comm": comm, "ppid": int(fields[1]), "tty": int(fields[4]), "uid": uid, "argv": argv,
            "start": int(fields[19])}


class Daemon:
    def __init__(self) -> None:
        self.out = open(LOG, "a", encoding="utf-8")
        self.shells: dict[int, dict] = {}  # pid -> {"open": seq or None, "ttylog": str}
        self.seen: set[tuple[int, int]] = set()  # (pid, start time) of processes already logged
        self.unhooked: set[int] = set()
        self.buf = b""
        self.procs: dict[int, dict] = {}  # the previous look's processes (to name those gone with an OOM kill)
        found = oom_kills()
        self.oom = None if found is None else found[0]

    def write(self, rec: dict) -> None:
        rec.setdefault("received", now_ms())
        self.out.write(json.dumps(rec, ensure_ascii=False) + "\n")
        self.out.flush()
        os.fsync(self.out.fileno())

    def hook_record(self, header: str, payload: bytes | None) -> None:
        parts = header.split()
        if not parts:
            return
        kind = parts[0]
        try:
            pid = int(parts[1])
        except (IndexError, ValueError):
            self.write({"type": "malformed", "line": header[:500]})
            return
        sh = self.shells.setdefault(pid, {"open": None, "ttylog": None})
        if kind == "hello":
            sh["ttylog"] = parts[2] if len(parts) > 2 and parts[2] != "-" else None
            self.write({"type": "hello", "pid": pid, "ttylog": sh["ttylog"]})
        elif kind == "start" and len(parts) >= 7 and payload is not None:
            n_cwd = int(parts[5])
            sh["open"] = parts[2]
            self.write({"type": "start", "pid": pid, "seq": int(parts[2]), "ms": int(parts[3]), "src": parts[4],
                        "cwd": payload[:n_cwd].decode("utf-8", "replace"), "cmd": payload[n_cwd:].decode("utf-8", "replace")})
        elif kind == "end" and len(parts) >= 5:
            sh["open"] = None
            self.write({"type": "end", "pid": pid, "seq": int(parts[2]), "ms": int(parts[3]), "exit": int(parts[4])})
        elif kind == "bye":
            self.write({"type": "bye", "pid": pid})
            self.shells.pop(pid, None)
        else:
            self.write({"type": "malformed", "line": header[:500]})

    def drain(self, fd: int) -> None:
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            self.buf += chunk
        while b"\n" in self.buf:
            header, rest = self.buf.split(b"\n", 1)
            text = header.decode("utf-8", "replace").strip()
            parts = text.split()
            payload = None
            if parts[:1] == ["start"]:
                try:
                    need = int(parts[5]) + int(parts[6])
                except (IndexError, ValueError):
                    self.write({"type": "malformed", "line": text[:500]})
                    self.buf = rest
                    continue
                if len(rest) < need + 1:
                    return  # the rest of this record has not arrived yet
                payload, rest = rest[:need], rest[need + 1:]
            self.buf = rest
            self.hook_record(text, payload)

    def check_memory(self, procs: dict[int, dict]) -> None:
        """An ``oom`` record when the cgroup's OOM-kill count grew since the last look."""
        found = oom_kills()
        if found is not None and self.oom is not None and found[0] > self.oom:
            gone = [{"pid": p["pid"], "uid": p["uid"], "argv": p["argv"][:20] or [p["comm"]]}
                    for pid, p in self.procs.items() if pid not in procs]
            self.write({"type": "oom", "oom_kill": found[0], "killed": found[0] - self.oom, "source": found[1],
                        "ended": gone[:20], "ended_total": len(gone)})
        if found is not None:
            self.oom = found[0]
        self.procs = procs

    def scan(self) -> None:
        procs = {}
        for name in os.listdir("/proc"):
            if name.isdigit():
                info = proc_info(int(name))
                if info is not None:
                    procs[info["pid"]] = info
        self.check_memory(procs)
        try:
            with open("/proc/uptime") as fh:
                uptime = float(fh.read().split()[0])
        except (OSError, ValueError):
            uptime = 0.0
        for pid in list(self.shells):
            if pid not in procs:
                self.shells.pop(pid, None)

        def is_shell(p: dict) -> bool:
            return p["uid"] == AGENT_UID and p["comm"] in SHELLS and p["tty"] != 0

        def young(p: dict) -> bool:
            return uptime - p["start"] / CLK_TCK < GRACE_S

        for info in procs.values():
            if info["uid"] != AGENT_UID:
                continue
            parent = procs.get(info["ppid"])
            fork_of_parent = parent is not None and info["comm"] == parent["comm"] and info["argv"] == parent["argv"]
            if is_shell(info) and not fork_of_parent and info["pid"] not in self.shells \
                    and info["pid"] not in self.unhooked and not young(info):
                self.unhooked.add(info["pid"])
                self.write({"type": "unhooked_shell", "pid": info["pid"], "argv": info["argv"][:20], "comm": info["comm"]})
            key = (info["pid"], info["start"], info["comm"])  # a fork that execs later is seen again
            if key in self.seen or parent is None or not is_shell(parent) or fork_of_parent:
                continue
            sh = self.shells.get(parent["pid"])
            if sh is None and young(parent):
                continue  # the shell is still loading its startup files (and its hooks)
            self.seen.add(key)
            covered = sh is not None and sh["open"] is not None
            self.write({"type": "proc", "pid": info["pid"], "shell": parent["pid"], "argv": info["argv"][:50],
                        "comm": info["comm"], "covered": covered, "seq": None if sh is None else sh["open"]})

    def serve(self) -> None:
        fd = os.open(FIFO, os.O_RDWR | os.O_NONBLOCK)  # read-write: never sees EOF when shells close it
        self.write({"type": "daemon_start", "pid": os.getpid(), "oom_kill": self.oom})
        while True:
            self.drain(fd)
            self.scan()
            time.sleep(0.25)


def setup() -> None:
    os.makedirs(RUN, exist_ok=True)
    os.chmod(RUN, 0o755)
    os.makedirs(TTY_DIR, exist_ok=True)
    os.chmod(LOG_DIR, 0o700)
    if not (os.path.exists(FIFO) and stat.S_ISFIFO(os.stat(FIFO).st_mode)):
        if os.path.exists(FIFO):
            os.unlink(FIFO)
        os.mkfifo(FIFO)
    os.chmod(FIFO, 0o622)  # the participant's shells write; only root reads


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] != "serve":
        print(__doc__, file=sys.stderr)
        return 2
    setup()
    try:
        with open(PIDFILE) as fh:
            old = int(fh.read().strip())
        if os.path.exists(f"/proc/{old}") and old != os.getpid():
            with open(f"/proc/{old}/cmdline", "rb") as fh:
                if b"capture.py" in fh.read():
                    return 0  # already running
    except (OSError, ValueError):
        pass
    with open(PIDFILE, "w") as fh:
        fh.write(str(os.getpid()))
    Daemon().serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
