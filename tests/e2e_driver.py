"""One whole session through the real app under Textual's Pilot, in a real container, timed.

    python -m tests.e2e_driver ENV [--profile gpu|smoke] [--reference DEST=SRC ...] [--bare N]
                               [--sessions-dir DIR] [--out DIR] [--shell 'COMMANDS'] [--keep]

What a participant does, in order, with the keys they would press: start (the workstation picks
the host, the GPU mode and the profile as `rebench-tui start` does), read the instructions, score
the starting solution (``s``), put the reference solution in place (``--reference``: files of the
environment folder copied over the participant's, as they would edit them) and score it, open the
shell (``t``; its commands are recorded), write a note (``n``), pause and resume (``p``), submit
(``x``), quit (``q``); then ``rebench-tui verify`` and ``rebench-tui export --format inspect`` on the
record, and the export read back with Inspect's own reader.

Measured beside it, in the same run: start-to-ready (engine chosen, container ready, screen up),
each scoring's round trip from key press to the row on screen, the same scorer over a raw
``docker exec`` of the supervisor (no app), and with ``--bare N`` the same scorer on this machine
outside any container (``N`` times each on the starting and the reference solution; the same
supervisor as root, the participant's side as uid 1000). With a gpu profile, also what
``nvidia-smi`` shows inside the container and, on the host, which container's processes hold the
GPU while a scoring runs.

Only what cannot happen without a terminal is stood in for: the shell key's ``docker exec -it``
gets its keystrokes from ``--shell`` through a pipe (``-i``), as tests/integration/test_command_capture.py
does, and the app's terminal suspend is a no-op. Every step is logged with its time; a failed step
is recorded and the rest still run. Writes ``<out>/<env>-<profile>-e2e.log`` and ``...-e2e.json``;
exits 1 if any step failed. scripts/gpu-e2e runs it on a GPU machine; tests/tui/test_e2e_driver.py
runs it here on the smoke profile.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SIZE = (140, 42)


class Log:
    """Timestamped lines to stdout and a file; the JSON summary beside them."""

    def __init__(self, path: Path) -> None:
        self.t0 = time.monotonic()
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = path.open("w", encoding="utf-8")

    def __call__(self, msg: str) -> None:
        line = f"[{time.monotonic() - self.t0:7.1f}s] {msg}"
        print(line, flush=True)
        self.fh.write(line + "\n")
        self.fh.flush()


@dataclass
class Run:
    env_id: str
    profile: str | None
    log: Log
    facts: dict[str, Any] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def step(self, name: str, fatal: bool = False) -> "_Step":
        """A timed step; a failure is recorded and the run goes on, unless ``fatal`` (nothing after
        it can run without it: the run stops there, said so)."""
        return _Step(self, name, fatal)

    def check(self, ok: bool, what: str) -> bool:
        self.log(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            self.failures.append(what)
        return ok


class StopRun(Exception):
    """A step the rest depends on failed: the run ends there (its failure is already recorded)."""


class _Step:
    def __init__(self, run: Run, name: str, fatal: bool = False) -> None:
        self.run, self.name, self.fatal = run, name, fatal

    def __enter__(self) -> "_Step":
        self.t = time.monotonic()
        self.run.log(f"== {self.name}")
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        dt = time.monotonic() - self.t
        self.run.facts.setdefault("step_s", {})[self.name] = round(dt, 2)
        if exc is not None:
            self.run.log(f"FAIL  {self.name} raised {kind.__name__}: {exc}")
            self.run.log("".join(traceback.format_exception(kind, exc, tb))[-3000:])
            self.run.failures.append(f"{self.name}: {kind.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        else:
            self.run.log(f"   {self.name}: {dt:.1f} s")
        if exc is not None and self.fatal and not isinstance(exc, StopRun):
            raise StopRun(f"{self.name} failed: {kind.__name__}: {exc}") from exc
        return exc is not None and not isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError, StopRun))


def _score_fact(label: str, solution: str, rec: Any, round_trip_s: float | None) -> dict[str, Any]:
    return {"label": label, "solution": solution, "score": rec.score if rec is not None else None,
            "valid": rec is not None and rec.valid,
            "scorer_s": round(rec.duration_s, 3) if rec is not None else None,
            "round_trip_s": None if round_trip_s is None else round(round_trip_s, 3),
            "message": rec.message if rec is not None else None,
            "attempt": None if rec is None else (rec.details.get("attempt") or {}).get("fingerprint", "")[:12]}


# -- things measured beside the app ------------------------------------------------------------

def _supervised(python: str, supervisor: str, argv: list[str], *, state_dir: str, timeout: float | None,
                env: dict[str, str] | None = None, prefix: list[str] | None = None) -> dict[str, Any]:
    """Run ``argv`` under the project's supervisor as the workstation does (as root, a fresh
    status nonce), either here or behind ``prefix`` (a raw ``docker exec``); returns the status,
    the parsed score and the wall time."""
    from rebench_tui.runtime.supervision import StatusFilter, exec_nonce, supervisor_argv
    from rebench_tui.scoring import parse_scorer_output

    nonce = exec_nonce()
    cmd = supervisor_argv(python, supervisor, f"e2e{os.getpid()}", argv, user="root", workdir=None,
                          timeout=timeout, state_dir=state_dir)
    if prefix is not None:
        full = [*prefix[:-1], "-e", f"REBENCH_EXEC_NONCE={nonce}", prefix[-1], *cmd]
        run_env = None
    else:
        full = cmd
        run_env = {**(env or os.environ), "REBENCH_EXEC_NONCE": nonce}
    t = time.monotonic()
    p = subprocess.run(full, capture_output=True, env=run_env, timeout=(timeout or 600) + 60)
    wall = time.monotonic() - t
    sink = StatusFilter(None, nonce=nonce)
    sink.feed("stdout", p.stdout)
    sink.feed("stderr", p.stderr)
    sink.finish()
    res = sink.result(p.returncode, wall)
    parsed = parse_scorer_output(res.result, res.stdout, res.stderr, res.exit_code, timed_out=res.timed_out)
    return {"score": parsed.score, "valid": math.isfinite(parsed.score), "wall_s": round(wall, 3),
            "scorer_s": round(res.duration_s, 3), "exit": res.exit_code, "message": parsed.message,
            "stderr_tail": res.stderr[-600:] if not math.isfinite(parsed.score) else ""}


def _host_nvidia_smi() -> str | None:
    for cand in (shutil.which("nvidia-smi"), "/usr/local/nvidia/bin/nvidia-smi", "/usr/bin/nvidia-smi"):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


class GpuHolders:
    """Samples the host's ``nvidia-smi --query-compute-apps`` while a scoring runs, and names the
    container each process lives in (from /proc/PID/cgroup)."""

    def __init__(self, smi: str) -> None:
        self.smi = smi
        self.seen: dict[tuple, dict[str, Any]] = {}
        self.samples = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    @staticmethod
    def container_of(pid: str) -> str | None:
        try:
            text = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            return None
        m = re.search(r"([0-9a-f]{64})", text)
        return m.group(1) if m else "(host: no container)"

    def _loop(self) -> None:
        while not self._stop.is_set():
            p = subprocess.run([self.smi, "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
                               capture_output=True, text=True)
            self.samples += 1
            if p.returncode != 0:
                self.errors.append(p.stderr.strip()[:200])
            for line in p.stdout.splitlines():
                parts = [x.strip() for x in line.split(",")]
                if len(parts) >= 3:
                    key = (parts[0], parts[1])
                    self.seen[key] = {"pid": parts[0], "process": parts[1], "memory": parts[2],
                                      "container": self.container_of(parts[0])}
            self._stop.wait(0.5)

    def __enter__(self) -> "GpuHolders":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def _bare_scorings(run: Run, session: Any, env: Any, profile: Any, reference: dict[str, Path], n: int, work: Path) -> None:
    """The same scorer on this machine outside any container, on the starting and the reference
    solution: a home and a protected folder laid out as the container has them (prepared assets
    linked in), the supervisor as root, the participant's processes as uid 1000."""
    from rebench_tui.runtime.base import ASSETS_DIR, SCORER_LIB, SECRETS_FILE, STARTING_SOLUTION_DIR

    probe = subprocess.run(["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", sys.executable, "-c", "pass"],
                           capture_output=True, text=True)
    if probe.returncode != 0:  # only scorers that run the participant's code need it; theirs fail, said why
        run.log(f"   note: uid 1000 cannot run {sys.executable} ({probe.stderr.strip()[-200:]}): a scorer that runs the "
                "participant's code as uid 1000 fails here; use an interpreter outside root-only folders")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    work.chmod(0o755)
    lib = work / "lib"
    shutil.copytree(SCORER_LIB, lib, ignore=shutil.ignore_patterns("__pycache__"))
    prot = work / "protected"
    shutil.copytree(env.protected_dir, prot, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(env.solution_dir, prot / STARTING_SOLUTION_DIR)
    assets = (session.meta.metadata.get("assets") or {}).get("folder")
    if assets and (Path(assets) / "protected").is_dir():
        (prot / ASSETS_DIR).symlink_to(Path(assets) / "protected")
    subprocess.run(["chmod", "-R", "a+rX", str(lib)], check=True)
    secrets = getattr(session.sandbox, "spec").secrets
    if secrets:  # as the container has them: <protected>/secrets.env, root's alone (scorers start their own proxy from it)
        (prot / SECRETS_FILE).write_text("".join(f"{k}={v}\n" for k, v in secrets.items()))
        (prot / SECRETS_FILE).chmod(0o600)
    state = work / "state"
    state.mkdir(mode=0o700)
    homes = {"start": {}, **({"reference": reference} if reference else {})}
    results: list[dict[str, Any]] = []
    with _host_services(run, profile, prot, secrets, work):
        _bare_homes(run, env, profile, homes, work, prot, lib, state, assets, n, results)
    run.facts["bare"] = results


def _bare_homes(run: Run, env: Any, profile: Any, homes: dict, work: Path, prot: Path, lib: Path, state: Path,
                assets: str | None, n: int, results: list) -> None:
    from rebench_tui.runtime.base import ASSETS_DIR, SUPERVISOR

    for label, files in homes.items():
        home = work / f"home-{label}"
        shutil.copytree(env.solution_dir, home / "solution")
        for dest, src in files.items():
            (home / dest).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, home / dest)
        if assets and (Path(assets) / "workspace").is_dir():
            (home / ASSETS_DIR).symlink_to(Path(assets) / "workspace")
        subprocess.run(["chown", "-R", "1000:1000", str(home)], check=False)
        if label == "start" and (setup := _start_setup(env, profile)) is not None:
            _bare_setup(run, env, setup, home)
        home.chmod(0o755)
        base_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the app's own packages stay out
        environ = {**base_env, **profile.env, "REBENCH_HOME": str(home), "REBENCH_PROTECTED": str(prot),
                   "REBENCH_PROFILE": profile.name, "REBENCH_ISOLATED": "0", "REBENCH_SCORER_LIB": str(lib)}
        for i in range(n):
            r = _supervised(sys.executable, str(SUPERVISOR), [sys.executable, str(prot / env.manifest.score.scorer)],
                            state_dir=str(state), timeout=profile.score_timeout, env=environ)
            r["label"] = f"{label} {i + 1}"
            r["solution"] = label
            results.append(r)
            run.log(f"   bare {label} {i + 1}: score {r['score']:.4f}, scorer {r['scorer_s']:.1f} s, wall {r['wall_s']:.1f} s"
                    + (f" {r['message']} {r['stderr_tail']}" if not r["valid"] else ""))
            run.check(r["valid"], f"bare-device scorer on the {label} solution gives a finite score")


def _start_setup(env: Any, profile: Any) -> Any:
    """How the environment puts its starting solution in place before a scoring (its calibration's
    ``start``: files and a command, e.g. the base model saved where the scorer looks), from this
    profile or, where it says none, another profile of the same environment; None if nothing."""
    for name in [profile.name, *env.profile_names]:
        cal = env.profile(name).calibration
        if cal is not None and (cal.start.files or cal.start.command):
            return cal.start
    return None


def _bare_setup(run: Run, env: Any, setup: Any, home: Path) -> None:
    """The same starting set-up in a bare-machine home: its files copied, its command run as uid 1000."""
    from rebench_tui.calibrate import copy_setup_files

    copy_setup_files(env, setup, home)
    subprocess.run(["chown", "-R", "1000:1000", str(home)], check=False)
    if setup.command:
        argv = [sys.executable if setup.command[0] == "python3" else setup.command[0], *setup.command[1:]]
        p = subprocess.run(["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups", *argv], cwd=home / setup.workdir,
                           capture_output=True, text=True, timeout=setup.timeout, env={**os.environ, "HOME": str(home)})
        run.log(f"   bare start set-up `{' '.join(setup.command)}`: exit {p.returncode} {p.stderr.strip()[-300:]}")


@contextlib.contextmanager
def _host_services(run: Run, profile: Any, prot: Path, secrets: dict[str, str], work: Path):
    """The profile's services (a stand-in judge or model, the key-adding proxy) on this machine's
    loopback while the bare scorer runs, as the container has them; stopped afterwards."""
    from rebench_tui.runtime.local import host_argv

    procs = []
    env = {**os.environ, **profile.env, **secrets, "REBENCH_PROTECTED": str(prot)}
    for i, cmd in enumerate(profile.services):
        argv = host_argv(cmd, str(prot), str(work))
        procs.append(subprocess.Popen(argv, env=env, stdout=(work / f"service-{i}.log").open("w"), stderr=subprocess.STDOUT))
        run.log(f"   bare service {i}: {' '.join(argv[1:])}")
    time.sleep(2.0 if procs else 0)  # each binds its port at once; a second is plenty
    try:
        yield
    finally:
        for p in procs:
            p.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(5)


# -- the session ---------------------------------------------------------------------------------

async def drive(run: Run, args: argparse.Namespace) -> None:
    from textual.widgets import Input, Markdown

    from rebench_tui import workstation
    from rebench_tui.assets import AssetStore
    from rebench_tui.catalog import Rehearsal
    from rebench_tui.config import Settings
    from rebench_tui.runtime.docker_setup import STATE_DIR
    from rebench_tui.session import Session
    from rebench_tui.store import Store
    from rebench_tui.tui import app as app_module
    from rebench_tui.tui.app import RebenchApp
    from rebench_tui.tui.screens.dialogs import NoteScreen, QuitScreen, SubmitScreen
    from rebench_tui.tui.widgets.score_history import ScoreTable

    log = run.log
    settings = Settings()
    settings.sessions_dir = Path(args.sessions_dir)
    if args.environments:
        settings.environments_dir = Path(args.environments)
    env = workstation.catalog(settings).get(run.env_id)
    reference = {dest: (env.path / src) for dest, src in (r.split("=", 1) for r in args.reference)}
    t_start = time.monotonic()

    with run.step("start: choose the engine, GPU mode and profile", fatal=True):
        choice = workstation.choose(env, settings, profile=run.profile, gpus=args.gpus, say=lambda m: log(f"   note: {m}"))
        sup = choice.runtime.gpu_support()
        run.profile = choice.profile
        run.facts.update(profile=choice.profile, host=choice.runtime.host, gpu_mode=sup.mode, gpu_why=sup.why)
        log(f"   profile {choice.profile} on {choice.runtime.kind} at {choice.runtime.host}; GPU mode {sup.mode}: {sup.why}")
        if args.expect_profile:
            run.check(choice.profile == args.expect_profile, f"the workstation chose the {args.expect_profile} profile")
    rehearsal = Rehearsal(args.gpus if env.profile(run.profile).gpus else None, args.stand_ins)
    profile = rehearsal.apply(env.profile(run.profile))
    gpu = profile.gpus > 0
    if rehearsal != Rehearsal():
        log(f"   rehearsal: {profile.gpus} GPU(s) of the profile's {env.profile(run.profile).gpus}"
            + (f"; stand-ins: {profile.standins.why}" if args.stand_ins and profile.standins else ""))

    with run.step("start: session and container", fatal=True):
        secrets = workstation.resolve_secrets(env, run.profile, settings, required=not args.stand_ins)
        session = Session.create(env, run.profile, choice.runtime, settings.sessions, store=Store(settings.sessions),
                                 progress=lambda m: log(f"   … {m}"), asset_store=AssetStore(settings.cache_dir), secrets=secrets,
                                 rehearsal=rehearsal)
        run.facts.update(rehearsal={"gpus": profile.gpus, "profile_gpus": env.profile(run.profile).gpus,
                                    "standins": args.stand_ins, "setting": session.meta.setting})
        desc = session.sandbox.describe()
        run.facts.update(session=session.id, container=desc.get("container"), sandbox=desc,
                         container_ready_s=round(time.monotonic() - t_start, 2))
        log(f"   session {session.id}, container {desc.get('container_name')}, GPUs held: {desc.get('gpu_devices')}")
        if gpu:
            run.check(bool(desc.get("gpu_devices")), "the container holds a GPU (device request or device node)")

    container = session.sandbox.container
    docker_prefix = ["docker", *([] if choice.runtime.base_url is None else ["-H", choice.runtime.base_url]),
                     "exec", "-u", "root", "-w", session.sandbox.home, container.id]
    app = RebenchApp(session, tick_s=0.5)
    typed: dict[str, Any] = {}

    def shell_run(argv, env=None, cwd=None):  # the shell key's `docker exec -it`, keystrokes through a pipe
        argv = ["-i" if a == "-it" else a for a in argv]
        p = subprocess.run(argv, input=args.shell.encode(), capture_output=True, env=env, cwd=cwd, timeout=300)
        typed.update(rc=p.returncode, out=p.stdout.decode(errors="replace")[-3000:], err=p.stderr.decode(errors="replace")[-1000:])
        return p

    solution = "start"  # which solution the home holds now

    async def score(pilot: Any, label: str, around: Any = None) -> Any:
        before = len(session.history)
        t = time.monotonic()
        with (around or contextlib.nullcontext()):
            await pilot.press("s")
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()
        rt = time.monotonic() - t
        rec = session.history[-1] if len(session.history) > before else None
        fact = _score_fact(label, solution, rec, rt)
        run.facts.setdefault("scores", []).append(fact)
        shown = app.query_one(ScoreTable).row_count
        log(f"   {label}: score {fact['score']}, scorer {fact['scorer_s']} s, key press to row {rt:.2f} s, rows on screen {shown}")
        run.check(rec is not None and rec.valid, f"{label}: a finite score ({None if rec is None else rec.message})")
        run.check(shown == len(session.history), f"{label}: the score table shows every scoring")
        return rec

    try:
        async with app.run_test(size=SIZE) as pilot:
            with run.step("screen up"):
                await pilot.pause()
                await app.workers.wait_for_complete()  # the file recorder and command capture are running
                run.facts["screen_ready_s"] = round(time.monotonic() - t_start, 2)
                log(f"   start-to-ready: container {run.facts['container_ready_s']} s, screen {run.facts['screen_ready_s']} s")

            with run.step("instructions"):
                md = app.query_one("#instructions", Markdown)
                first = next(line for line in env.instructions.splitlines() if line.strip())
                run.check(first.lstrip("# ").strip() in md.source, "the instructions are on screen")
                got = session.sandbox.exec(["cat", "instructions.txt"])
                run.check(got.stdout == env.instructions, "~/instructions.txt in the container is the environment's text")
                status = str(app.query_one("#status").render())
                run.check(f"· {run.profile} ·" in status and f"GPUs {profile.gpus}" in status, f"status line: {status[:160]}")

            if gpu:
                with run.step("GPU inside the container"):
                    smi = session.sandbox.exec(["nvidia-smi", "-L"], timeout=60)
                    torch_check = session.sandbox.exec(
                        ["python3", "-c", "import torch, triton; print(torch.__version__, triton.__version__, "
                                          "torch.cuda.is_available(), torch.cuda.get_device_name(0))"], timeout=120)
                    run.facts["in_container"] = {"nvidia_smi_L": smi.stdout.strip(), "torch": torch_check.stdout.strip(),
                                                 "errors": (smi.stderr + torch_check.stderr)[-800:]}
                    log(f"   nvidia-smi -L as agent: {smi.stdout.strip()} {smi.stderr.strip()[-300:]}")
                    log(f"   torch as agent: {torch_check.stdout.strip()} {torch_check.stderr.strip()[-500:]}")
                    run.check(smi.exit_code == 0 and "GPU 0" in smi.stdout, "nvidia-smi inside lists the GPU")
                    run.check(torch_check.exit_code == 0 and " True " in f" {torch_check.stdout} ", "torch sees CUDA inside, as agent")

            with run.step("score the starting solution"):
                start_setup = _start_setup(env, profile)
                if start_setup is not None:  # the starting state as the environment defines it (e.g. the base model saved)
                    from rebench_tui.calibrate import put_in_place

                    info = put_in_place(session, env, start_setup, "start", progress=lambda m: log(f"   … {m}"))
                    run.facts["start_setup"] = info
                await score(pilot, "start 1")
                for i in range(args.rescore_start):
                    await score(pilot, f"start {i + 2}")

            if reference:
                with run.step("score the reference solution"):
                    for dest, src in reference.items():
                        target = session.workspace / dest
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy(src, target)
                        with contextlib.suppress(OSError):
                            os.chown(target, 1000, 1000)  # as if the participant had written it
                        log(f"   {dest} <- {src.relative_to(ROOT) if src.is_relative_to(ROOT) else src}")
                    solution = "reference"
                    smi = _host_nvidia_smi() if gpu else None
                    h = GpuHolders(smi) if smi else None
                    await score(pilot, "reference 1", h)
                    files = [r["content"]["content"][1] for r in _rows(session) if r["content"].get("type") == "log"
                             and (r["content"].get("attributes") or {}).get("title") == "file"]
                    run.check(all(any(f.get("path") == dest for f in files) for dest in reference),
                              "the file recorder put the changed files in the record before the scoring")
                    if h is not None:
                        seen = list(h.seen.values())
                        # the scorer runs in the scoring's room: a container of its own, made from the session's
                        room = str(((session.history[-1].details or {}).get("room") or {}).get("container") or "") \
                            if session.history else ""
                        ours = {container.id[:12], room[:12]} - {""}
                        run.facts["gpu_holders"] = {"samples": h.samples, "processes": seen, "errors": h.errors[:3],
                                                    "session_container": container.id, "scoring_room": room}
                        for s in seen:
                            mine = (s["container"] or "")[:12] in ours
                            log(f"   nvidia-smi on the host: pid {s['pid']} {s['process']} {s['memory']} in container "
                                f"{(s['container'] or '?')[:12]}{' (this session or its scoring room)' if mine else ''}")
                        if not seen:
                            log(f"   nvidia-smi on the host listed no compute processes in {h.samples} samples {h.errors[:1]}")
                        run.check(any((s["container"] or "")[:12] in ours for s in seen),
                                  "nvidia-smi on the host shows this session's scoring room (or its container) holding the GPU")

            if args.hostile_ticker:
                with run.step("a hostile participant process through a scoring (the freeze and the room hold)"):
                    await _ticker_scoring(run, session, container, score, pilot, solution)

            if args.raw_exec:
                with run.step("the same scorer over a raw docker exec (no app)"):
                    r = _supervised(session.sandbox.python, session.sandbox.supervisor,
                                    [session.sandbox.python, f"{session.sandbox.protected}/{env.manifest.score.scorer}"],
                                    state_dir=STATE_DIR, timeout=profile.score_timeout, prefix=docker_prefix)
                    r["solution"] = solution
                    run.facts["raw_exec"] = r
                    log(f"   raw docker exec: score {r['score']:.4f}, scorer {r['scorer_s']:.2f} s, wall {r['wall_s']:.2f} s "
                        + (f"{r['message']} {r['stderr_tail']}" if not r["valid"] else ""))
                    run.check(r["valid"], "the scorer over a raw docker exec gives a finite score")

            with run.step("shell: a command typed there is recorded"):
                app.suspend = lambda: contextlib.nullcontext()  # no terminal to hand over under Pilot
                real, app_module.subprocess = app_module.subprocess, SimpleNamespace(run=shell_run)
                try:
                    await pilot.press("t")
                    await pilot.pause()
                finally:
                    app_module.subprocess = real
                await app.workers.wait_for_complete()
                for _ in range(40):  # the capture daemon's rows for the shell's exit
                    session.collect_commands()
                    acts = _actions(session)
                    if any(a == "exit" for a in acts):
                        break
                    await asyncio.sleep(0.25)
                acts = _actions(session)
                run.facts["shell"] = {"exit": typed.get("rc"), "commands": acts, "output_tail": typed.get("out", "")[-800:]}
                log(f"   shell exit {typed.get('rc')}; recorded commands: {acts}")
                wanted = [c.strip() for c in args.shell.splitlines() if c.strip()]
                run.check(all(c in acts for c in wanted), "every command typed in the shell is in the record")

            with run.step("note"):
                await pilot.press("n")
                await pilot.pause()
                assert isinstance(app.screen, NoteScreen)
                app.screen.query_one(Input).value = args.note
                await pilot.press("enter")
                await pilot.pause()
                run.check(any(args.note in json.dumps(r) for r in _rows(session)), "the note is in the audit log")

            with run.step("pause and resume"):
                await pilot.press("p")
                await pilot.pause()
                paused = not session.wclock.running
                await asyncio.sleep(1.0)
                await pilot.press("p")
                await pilot.pause()
                run.check(paused and session.wclock.running and len(session.meta.pauses) >= 1,
                          f"the clock paused and resumed ({len(session.meta.pauses)} pause(s) recorded)")

            with run.step("submit: the final scoring"):
                await pilot.press("x")
                await pilot.pause()
                assert isinstance(app.screen, SubmitScreen)
                app.screen.query_one(Input).value = "e2e submission"
                await pilot.press("enter")
                t = time.monotonic()
                await pilot.pause()
                await app.workers.wait_for_complete()
                await pilot.pause()
                rec = next((r for r in reversed(session.history) if not r.recount), None)  # not the recount after it
                fact = _score_fact("final (submit)", solution, rec, time.monotonic() - t)
                run.facts.setdefault("scores", []).append(fact)
                log(f"   final: score {fact['score']}, scorer {fact['scorer_s']} s; finished {session.finished}")
                run.check(session.finished and rec is not None and rec.valid, "submitted: finished with a finite final score")
                final = session.final()
                run.facts["counts"] = None if final is None else {"score": final.score, "n": final.n, "attempt": final.attempt}
                same = [x for x in run.facts["scores"][:-1] if x["solution"] == solution and x["valid"]]
                if same and rec is not None:  # the shell, the note and the pause changed none of the scored files
                    run.check(fact["attempt"] == same[-1]["attempt"],
                              f"the final scoring is a re-score of the {solution} attempt (same files: same fingerprint)")

            with run.step("quit"):
                await pilot.press("q")
                await pilot.pause()
                if isinstance(app.screen, QuitScreen):
                    await pilot.press("enter")
                    await pilot.pause()
    finally:
        if session.lock.held:
            session.close()

    run.facts["session_folder"] = str(session.folder)
    if gpu and session.finished:
        session.sandbox.container.reload()
        run.check(session.sandbox.container.status != "running",
                  f"the finished session's container no longer holds its GPU ({session.sandbox.container.status})")
    _after(run, args, session)
    if args.bare:
        with run.step(f"the same scorer on this machine, no container ({args.bare} each)"):
            _bare_scorings(run, session, env, profile, reference, args.bare, Path(args.bare_dir))
    _compare(run)
    if not args.keep:
        with run.step("stop and remove the container"):
            session.sandbox.stop(remove=True)


# A participant's process that a freeze made of signals would not hold: it ignores SIGTSTP, sends
# itself SIGCONT on every tick, and stops and restarts every other process it can see (the attack
# that once lengthened the scorer's measured hand-over). Started like a command of the participant's
# own shell: a `docker exec` as agent, not under the app's supervisor.
TICKER = ("trap '' TSTP; while :; do date +%s.%N >> /tmp/e2e-ticks; kill -CONT $$; "
          "for p in $(ps -u agent -o pid=); do [ $p != $$ ] && kill -STOP $p 2>/dev/null && kill -CONT $p 2>/dev/null; done; "
          "sleep 0.02; done")


async def _ticker_scoring(run: Run, session: Any, container: Any, score: Any, pilot: Any, solution: str) -> None:
    honest = [s for s in run.facts.get("scores", []) if s["solution"] == solution and s["valid"]]
    container.exec_run(["sh", "-c", "rm -f /tmp/e2e-ticks"], user="agent")
    container.exec_run(["sh", "-c", TICKER], user="agent", workdir=session.sandbox.home, detach=True)
    await asyncio.sleep(1.0)
    rec = await score(pilot, f"{solution} with a hostile ticker")
    container.exec_run(["sh", "-c", "pkill -f e2e-ticks"], user="root")
    ticks = [float(t) for t in container.exec_run(["cat", "/tmp/e2e-ticks"]).output.split()]
    if rec is None:
        return
    # frozen from before the snapshot to after the scorer's end, as the record says (the wall clock
    # of this machine, which the container shares): a tick between the two is one the freeze missed
    room = (rec.details or {}).get("room") or {}
    begun, ended = room["frozen_at_ms"] / 1000, room["thawed_at_ms"] / 1000
    inside = [t for t in ticks if begun < t < ended]
    near = [b - a for a, b in zip(ticks, ticks[1:]) if b > begun and a < ended]
    run.facts["ticker"] = {"ticks": len(ticks), "during_scoring": len(inside), "frozen_window_s": round(ended - begun, 2),
                           "longest_gap_s": round(max(near, default=0.0), 2), "score": rec.score,
                           "honest": [s["score"] for s in honest]}
    run.log(f"   ticker: {len(ticks)} ticks in all, {len(inside)} in the {ended - begun:.2f} s the container was frozen "
            f"(snapshot, room and scorer; longest gap between ticks {max(near, default=0.0):.2f} s); score {rec.score:.4f} "
            f"beside the honest {_fmt([s['score'] for s in honest])}")
    run.check(len(ticks) > 5 and not inside, "the participant's container was frozen through the scoring (no tick inside it)")
    if honest:
        run.check(rec.fingerprint == session.history[-2].fingerprint if len(session.history) > 1 else True,
                  "the same files: a re-score of the same attempt")


def _rows(session: Any) -> list[dict[str, Any]]:
    from rebench_tui.trajectory.audit import read_entries

    return read_entries(session.folder / "audit.jsonl")


def _actions(session: Any) -> list[str]:
    return [r["content"]["action"]["args"].get("command", "") for r in _rows(session) if r["content"].get("type") == "action"]


def _after(run: Run, args: argparse.Namespace, session: Any) -> None:
    from click.testing import CliRunner

    from rebench_tui.cli import main

    cli = CliRunner()
    with run.step("rebench-tui verify"):
        res = cli.invoke(main, ["verify", session.id, "--sessions-dir", args.sessions_dir])
        run.log("   " + res.output.strip().replace("\n", "\n   "))
        run.facts["verify"] = {"exit": res.exit_code}
        run.check(res.exit_code == 0 and "verified" in res.output, "verify passes")
    with run.step("rebench-tui export --format inspect, read back"):
        out = Path(args.out) / f"{session.id}.eval"
        res = cli.invoke(main, ["export", session.id, "--format", "inspect", "-o", str(out), "--sessions-dir", args.sessions_dir])
        run.log("   " + res.output.strip().replace("\n", "\n   "))
        run.check(res.exit_code == 0 and out.is_file(), f"export wrote {out.name}")
        from inspect_ai.log import read_eval_log

        log = read_eval_log(str(out))
        sample = log.samples[0] if log.samples else None
        kinds: dict[str, int] = {}
        for ev in (sample.events if sample else []):
            kinds[ev.event] = kinds.get(ev.event, 0) + 1
        scores = {} if sample is None or not sample.scores else {k: v.value for k, v in sample.scores.items()}
        run.facts["export"] = {"file": out.name, "bytes": out.stat().st_size, "status": log.status, "samples": len(log.samples or []),
                               "events": kinds, "scores": scores}
        run.log(f"   read back: status {log.status}, {len(log.samples or [])} sample(s), events {kinds}, scores {scores}")
        run.check(log.status == "success" and sample is not None and kinds.get("tool", 0) >= 1 and kinds.get("score", 0) >= 1,
                  "the export reads back with Inspect's reader: a finished sample with its commands and scores")


def _compare(run: Run) -> None:
    """Side by side: the same scorer on the same solution in the container (through the app and
    over a raw docker exec) and on this machine outside any container."""
    scores = run.facts.get("scores", [])
    raw = run.facts.get("raw_exec") or {}
    rows = []
    for sol in dict.fromkeys([s["solution"] for s in scores] + [b["solution"] for b in run.facts.get("bare", [])]):
        rows.append({"solution": sol,
                     "container_app": [s["score"] for s in scores if s["solution"] == sol and s["valid"]],
                     "container_raw_exec": [raw["score"]] if raw.get("valid") and raw.get("solution") == sol else [],
                     "bare": [b["score"] for b in run.facts.get("bare", []) if b["solution"] == sol and b["valid"]]})
    run.facts["side_by_side"] = rows
    run.log("== side by side (the same scorer on the same solution)")
    for r in rows:
        run.log(f"   {r['solution']:<9} in the container through the app: {_fmt(r['container_app'])} | "
                f"raw docker exec: {_fmt(r['container_raw_exec'])} | no container: {_fmt(r['bare'])}")
    for s in scores:
        if s.get("round_trip_s") is not None and s.get("scorer_s") is not None:
            run.log(f"   round trip {s['label']}: key press to row {s['round_trip_s']:.2f} s, of which the scorer {s['scorer_s']:.2f} s")
    if raw:
        run.log(f"   round trip raw docker exec: {raw['wall_s']:.2f} s, of which the scorer {raw['scorer_s']:.2f} s")


def _fmt(xs: list[float]) -> str:
    return "-" if not xs else " / ".join(f"{x:.4f}" for x in xs)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("env")
    p.add_argument("--profile", choices=["gpu", "smoke"], default=None, help="default: as `rebench-tui start` chooses")
    p.add_argument("--expect-profile", choices=["gpu", "smoke"], default=None, help="fail unless the workstation picks this one")
    p.add_argument("--reference", action="append", default=[], metavar="DEST=SRC",
                   help="copy SRC (relative to the environment folder, or absolute) over the home's DEST before the second scoring")
    p.add_argument("--rescore-start", type=int, default=0, help="extra scorings of the unchanged starting solution")
    p.add_argument("--bare", type=int, default=0, help="also run the scorer N times on each solution outside any container")
    p.add_argument("--bare-dir", default="/tmp/rebench-e2e-bare")
    p.add_argument("--no-raw-exec", dest="raw_exec", action="store_false")
    p.add_argument("--shell", default="echo e2e-shell-$(id -un)\nls solution\nexit\n", help="what is typed in the shell (one command a line)")
    p.add_argument("--note", default="e2e note: started, scored the start and the reference")
    p.add_argument("--sessions-dir", default="/tmp/rebench-e2e-sessions")
    p.add_argument("--environments", default=None, help="another environments folder (default: the checkout's)")
    p.add_argument("--out", default="/tmp/rebench-e2e", help="folder for the log, the JSON summary and the export")
    p.add_argument("--gpus", type=int, default=None, help="rehearse on fewer GPUs than the profile asks for (start --gpus)")
    p.add_argument("--stand-ins", action="store_true", help="stand-ins for the profile's outside services (start --stand-ins)")
    p.add_argument("--hostile-ticker", action="store_true",
                   help="score once more with a participant process running that signals everything it sees")
    p.add_argument("--keep", action="store_true", help="leave the container (default: removed at the end; records stay)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out)
    name = f"{args.env}-{args.profile or 'auto'}-e2e"
    run = Run(args.env, args.profile, Log(out / f"{name}.log"))
    run.log(f"e2e session of {args.env} ({args.profile or 'profile as start chooses'}) from {ROOT}, python {sys.version.split()[0]}")
    try:
        asyncio.run(drive(run, args))
    except StopRun as exc:
        run.log(f"STOP  {exc}: the steps after it cannot run")
    except Exception as exc:  # noqa: BLE001 - a step outside any `step` block: recorded like the others
        run.log(f"FAIL  the run stopped: {type(exc).__name__}: {exc}\n{traceback.format_exc()[-3000:]}")
        run.failures.append(f"stopped: {type(exc).__name__}: {exc}")
    run.facts.update(env=args.env, ok=not run.failures, failures=run.failures, total_s=round(time.monotonic() - run.log.t0, 1))
    (out / f"{name}.json").write_text(json.dumps(run.facts, indent=1, default=str))
    run.log(("PASSED" if not run.failures else f"FAILED ({len(run.failures)}): " + "; ".join(run.failures))
            + f" in {run.facts['total_s']} s; summary {out / (name + '.json')}")
    return 0 if not run.failures else 1


if __name__ == "__main__":
    sys.exit(main())
