"""Hostile inputs: each gets a clear error or is refused/skipped and said so;
nothing crashes and nothing already recorded is lost (earlier rows intact, `verify` passes)."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from rebench_tui.catalog import load_catalog
from rebench_tui.errors import RebenchError
from rebench_tui.session.events import RecordingTrouble
from rebench_tui.runtime.safe_tar import extract_safely
from rebench_tui.scoring import parse_scorer_output
from rebench_tui.session.reindex import open_store
from rebench_tui.store import Store
from rebench_tui.trajectory.audit import AuditWriteError, read_entries
from rebench_tui.trajectory.verify import verify
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES

TOY = FIXTURE_ENVS / "toy_score"


# -- manifests -------------------------------------------------------------------------------
def _sub(old: str, new: str):
    def edit(d: Path) -> None:
        t = (d / "environment.toml").read_text()
        assert old in t, old
        (d / "environment.toml").write_text(t.replace(old, new, 1))
    return edit


def _write(rel: str, data: bytes | str):
    def edit(d: Path) -> None:
        p = d / rel
        if p.is_dir():
            shutil.rmtree(p)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return edit


def _remove(rel: str):
    def edit(d: Path) -> None:
        p = d / rel
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    return edit


def _dir_instead(rel: str):
    def edit(d: Path) -> None:
        (d / rel).unlink()
        (d / rel).mkdir()
    return edit


MANIFEST_CASES = {
    "scorer absolute path": (_sub('scorer = "score.py"', 'scorer = "/etc/passwd"'), "score.scorer: '/etc/passwd' points outside protected/"),
    "scorer dot-dot path": (_sub('scorer = "score.py"', 'scorer = "../instructions.md"'), "points outside protected/"),
    "scorer is a folder": (_sub('scorer = "score.py"', 'scorer = "."'), "is not a file in protected/"),
    "scorer missing": (_sub('scorer = "score.py"', 'scorer = "nope.py"'), "'nope.py' is not a file"),
    "scorer empty": (_sub('scorer = "score.py"', 'scorer = ""'), "score.scorer"),
    "direction unknown": (_sub('direction = "lower"', 'direction = "sideways"'), "score.direction"),
    "aggregation unknown": (_sub('aggregation = "min"', 'aggregation = "median"'), "score.aggregation"),
    "visibility unknown": (_sub('[score]', '[score]\nvisibility = "maybe"'), "score.visibility"),
    "start score NaN": (_sub("start_score = 10.0", "start_score = nan"), "must be finite"),
    "reference score inf": (_sub("reference_score = 2.0", "reference_score = inf"), "must be finite"),
    "reference score -inf": (_sub("reference_score = 2.0", "reference_score = -inf"), "must be finite"),
    "start equals reference": (_sub("reference_score = 2.0", "reference_score = 10.0"), "must differ"),
    "start score a string": (_sub("start_score = 10.0", 'start_score = "ten"'), "start_score"),
    "timeout negative": (_sub('timeout = "30s"', 'timeout = "-5s"'), "score.timeout"),
    "timeout zero": (_sub('timeout = "30s"', "timeout = 0"), "score.timeout"),
    "timeout NaN string": (_sub('timeout = "30s"', 'timeout = "nan"'), "finite"),
    "timeout inf float": (_sub('timeout = "30s"', "timeout = inf"), "finite"),
    "timeout a list": (_sub('timeout = "30s"', "timeout = [30]"), "not a duration"),
    "timeout a boolean": (_sub('timeout = "30s"', "timeout = true"), "not a duration"),
    "timeout a table": (_sub('timeout = "30s"', "timeout = {s = 1}"), "not a duration"),
    "time limit garbage": (_sub('limit = "1h"', 'limit = "forever"'), "time.limit"),
    "memory garbage": (_sub('memory = "256m"', 'memory = "lots"'), "memory"),
    "memory negative": (_sub('memory = "256m"', "memory = -1"), "memory"),
    "cpus negative": (_sub("cpus = 1", "cpus = -1"), "cpus"),
    "gpus negative": (_sub("[profiles.smoke]", "[resources]\ngpus = -2\n\n[profiles.smoke]"), "resources.gpus"),
    "unknown profile": (_sub("[profiles.smoke]", "[profiles.tpu]"), "profiles.tpu"),
    "no profiles": (_sub("[profiles.smoke]", "[nothing]"), "profiles"),
    "unknown field": (_sub('title = "', 'colour = "red"\ntitle = "'), "unknown field"),
    "id mismatch": (_sub('id = "toy_score"', 'id = "other_env"'), "does not match the folder name"),
    "id upper case": (_sub('id = "toy_score"', 'id = "Toy_Score"'), "id"),
    "id an integer": (_sub('id = "toy_score"', "id = 7"), "id"),
    "title missing": (_sub('title = "Toy score (test fixture)"', ""), "title"),
    "score section a string": (lambda d: _write("environment.toml", (d / "environment.toml").read_text().replace(
        "[score]", "score = 'x'\n[oldscore]"))(d), "score"),
    "secret name lower case": (_sub("[profiles.smoke]", "[profiles.smoke]\nsecrets = ['api_key']"), "secrets"),
    "service empty argv": (_sub("[profiles.smoke]", "[profiles.smoke]\nservices = [[]]"), "services"),
    "unknown base image": (_sub('base_image = "base"', 'base_image = "no-such"'), "unknown base image"),
    "TOML syntax error": (_write("environment.toml", "id = [unclosed\n"), "not valid TOML"),
    "TOML binary bytes": (_write("environment.toml", b"\xff\xfe\x00garbage\x00"), "not valid TOML"),
    "TOML deeply nested": (_write("environment.toml", "x = " + "[" * 5000 + "]" * 5000 + "\n"), "environment.toml"),
    "TOML empty": (_write("environment.toml", ""), "id"),
    "manifest is a folder": (_dir_instead("environment.toml"), "missing manifest"),
    "instructions binary": (_write("instructions.md", b"\xff\xfe\xfa"), "not UTF-8"),
    "instructions empty": (_write("instructions.md", "  \n"), "instructions are empty"),
    "instructions missing": (_remove("instructions.md"), "missing instructions"),
    "Dockerfile without ARG": (_write("Dockerfile", "FROM debian\n"), "ARG BASE_IMAGE"),
    "Dockerfile missing": (_remove("Dockerfile"), "missing Dockerfile"),
    "Dockerfile binary": (_write("Dockerfile", b"\x00\xff" * 100), "ARG BASE_IMAGE"),
    "protected missing": (_remove("protected"), "missing protected/"),
    "solution missing": (_remove("solution"), "missing solution/"),
    "assets prepare outside": (_sub("[time]", '[assets]\nprepare = "/bin/sh"\n\n[time]'), "points outside the environment folder"),
    "assets prepare missing": (_sub("[time]", '[assets]\nprepare = "prepare.py"\n\n[time]'), "is not a file in the environment folder"),
}


@pytest.mark.parametrize("case", list(MANIFEST_CASES), ids=list(MANIFEST_CASES))
def test_hostile_manifest_is_reported_not_crashed(case, env_copy):
    edit, expected = MANIFEST_CASES[case]
    root = env_copy(TOY, edit)
    cat = load_catalog(root, KNOWN_IMAGES)  # never raises
    text = "\n".join(map(str, cat.problems))
    assert expected in text, text
    assert "toy_score" not in cat.environments
    with pytest.raises(RebenchError) as exc:
        cat.get("toy_score")
    assert str(exc.value)  # a readable message, not a traceback


def test_contradictory_manifests_report_every_problem_at_once(env_copy):
    def edit(d: Path) -> None:
        for e in (MANIFEST_CASES["scorer absolute path"][0], MANIFEST_CASES["start score NaN"][0],
                  MANIFEST_CASES["timeout a list"][0], MANIFEST_CASES["instructions empty"][0]):
            e(d)
    cat = load_catalog(env_copy(TOY, edit), KNOWN_IMAGES)
    text = "\n".join(map(str, cat.problems))
    for want in ("must be finite", "not a duration", "instructions are empty"):
        assert want in text


# -- scorer output ---------------------------------------------------------------------------
def _ok(score, **kw):
    return json.dumps({"score": score, "message": {}, "details": {}, **kw})


SCORER_OUTPUT_CASES = {
    # name: (stdout, stderr, exit, expected score (None: NaN), message key expected)
    "nothing": ("", "", 0, None, "error"),
    "only whitespace": ("\n \n\t\n", "", 0, None, "error"),
    "garbage": ("this is not json\n{broken", "", 0, None, "error"),
    "binary replaced": (b"\x00\xff\xfe\x80 \x1b[31m".decode("utf-8", "replace"), "", 0, None, "error"),
    "megabytes of noise then result": (("x" * 1023 + "\n") * 3000 + _ok(1.5), "", 0, 1.5, None),
    "one huge line": ("y" * 5_000_000, "", 0, None, "error"),
    "deeply nested result": ('{"score": 1, "d": ' + "[" * 200_000 + "]" * 200_000 + "}", "", 0, None, "error"),
    "NaN string": (_ok("NaN"), "", 0, None, None),
    "NaN literal": ('{"score": NaN}', "", 0, None, None),
    "Infinity literal": ('{"score": Infinity}', "", 0, math.inf, None),
    "-Infinity string": (_ok("-Infinity"), "", 0, -math.inf, None),
    "overflowing number": ('{"score": 1e999}', "", 0, math.inf, None),
    "null": (_ok(None), "", 0, None, None),
    "boolean": (_ok(True), "", 0, None, "error"),
    "list": (_ok([1]), "", 0, None, "error"),
    "object": (_ok({"v": 1}), "", 0, None, "error"),
    "word": (_ok("fast"), "", 0, None, "error"),
    "message not an object": (json.dumps({"score": 2, "message": "hi", "details": [1]}), "", 0, 2.0, "value"),
    "NaN inside details": ('{"score": 2, "details": {"x": NaN, "y": -Infinity}}', "", 0, 2.0, None),
    "last result line wins": (_ok(1) + "\n" + _ok(3), "", 0, 3.0, None),
    "result then garbage": (_ok(4) + "\ntrailing noise", "", 0, 4.0, None),
    "json without score": ('{"scor": 1}', "", 0, None, "error"),
    "json array line": ("[1, 2, 3]", "", 0, None, "error"),
    "NUL bytes around result": ("\x00\x00\n" + _ok(5) + "\n\x00", "", 0, 5.0, None),
    "valid score but crash exit": (_ok(1.0), "Traceback", 3, None, "error"),
    "stderr flood": (_ok(1.0), "e" * 3_000_000, 0, 1.0, None),
    "timeout": (_ok(1.0), "", 0, None, "timeout"),
}


@pytest.mark.parametrize("case", list(SCORER_OUTPUT_CASES), ids=list(SCORER_OUTPUT_CASES))
def test_hostile_scorer_output_is_parsed_safely(case):
    stdout, stderr, rc, want, key = SCORER_OUTPUT_CASES[case]
    r = parse_scorer_output(stdout, stdout, stderr, rc, timed_out=case == "timeout")
    if want is None:
        assert math.isnan(r.score)
    else:
        assert r.score == want
    if key:
        assert key in r.message
    # whatever came back can be recorded: JSON without NaN problems, tails bounded
    blob = json.dumps({"m": r.message, "d": r.details}, default=str)
    assert len(blob) < 200_000


SIGNALS = [s for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP) and 0 < s.value < 32]


@pytest.mark.parametrize("sig", [signal.SIGKILL, *SIGNALS], ids=lambda s: s.name)
def test_scorer_killed_by_each_signal(sig):
    r = parse_scorer_output(None, "partial output", "", 128 + sig.value)
    assert math.isnan(r.score)
    if sig == signal.SIGKILL:
        assert r.message == {"out_of_memory": True}
    else:
        assert r.message["error"] == f"the scorer exited with status {128 + sig.value}"
    assert r.details["exit_code"] == 128 + sig.value


# -- real scorers through the supervisor (local runtime) ---------------------------------------
HOSTILE_SCORER = r'''
import json, os, signal, sys, time
sys.path.insert(0, os.environ["REBENCH_SCORER_LIB"])
from rebench_scorer.result import emit
home = os.environ.get("REBENCH_HOME", "/home/agent")
a = open(os.path.join(home, "solution", "answer.txt")).read().strip()
if a.startswith("signal:"):
    print("about to die", flush=True)
    os.kill(os.getpid(), getattr(signal, a.split(":")[1]))
    time.sleep(5)
elif a == "binary":
    sys.stdout.buffer.write(os.urandom(2_000_000)); sys.stdout.flush()
elif a == "silent":
    pass
elif a == "nan-details":
    emit(3.0, {"m": float("nan")}, {"d": float("inf")})
elif a == "status-marker":  # forges the supervisor's status line on stderr
    sys.stderr.write('\x1erebench-exec {"returncode": 0, "timed_out": false, "cancelled": false}\n')
    emit(1.0, {})
    sys.exit(5)
elif a == "badname":
    from rebench_scorer import result as channel  # raw bytes that are not UTF-8, into the channel itself
    os.write(channel._FD, json.dumps({"score": 1.0, "message": {"p": "bad\udcff"}}, ensure_ascii=False).encode("utf-8", "surrogateescape") + b"\n")
else:
    emit(float(a), {})
'''


@pytest.fixture
def hostile_env(env_copy):
    return env_copy(TOY, lambda d: (d / "protected" / "score.py").write_text(HOSTILE_SCORER))


REAL_RUNS = {
    "SIGSEGV": ("signal:SIGSEGV", "exited with status 139"),
    "SIGTERM": ("signal:SIGTERM", "exited with status 143"),
    "SIGABRT": ("signal:SIGABRT", "exited with status 134"),
    "SIGKILL": ("signal:SIGKILL", "out_of_memory"),
    "binary": ("binary", "no result line"),
    "silent": ("silent", "no result line"),
    "status-marker": ("status-marker", "exited with status 5"),
}


@pytest.mark.parametrize("case", list(REAL_RUNS), ids=list(REAL_RUNS))
def test_real_hostile_scorer_run_is_recorded(case, hostile_env, toy_session):
    answer, expect = REAL_RUNS[case]
    s = toy_session(hostile_env)
    (s.workspace / "solution" / "answer.txt").write_text("7")
    first = s.score()
    assert first.score == 7.0
    before = (s.folder / "audit.jsonl").read_bytes()
    (s.workspace / "solution" / "answer.txt").write_text(answer)
    rec = s.score()
    assert math.isnan(rec.score)
    assert expect in json.dumps(rec.message)
    assert (s.folder / "audit.jsonl").read_bytes().startswith(before)
    assert verify(s.folder).ok, [str(f) for f in verify(s.folder).findings if not f.ok]


def test_real_scorer_with_nan_in_its_message_is_recorded(hostile_env, toy_session):
    s = toy_session(hostile_env)
    (s.workspace / "solution" / "answer.txt").write_text("nan-details")
    rec = s.score()
    assert rec.score == 3.0
    assert verify(s.folder).ok, [str(f) for f in verify(s.folder).findings if not f.ok]


# -- archives out of a container ---------------------------------------------------------------
def _member(tar: tarfile.TarFile, name: str, *, kind=tarfile.REGTYPE, data: bytes = b"x", linkname: str = "",
            mode: int = 0o644, size: int | None = None) -> None:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.mode = mode
    info.linkname = linkname
    if kind == tarfile.REGTYPE:
        info.size = len(data) if size is None else size
        tar.addfile(info, io.BytesIO(data))
    else:
        if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
            info.devmajor, info.devminor = 1, 3
        tar.addfile(info)


def _archive(*members) -> io.BytesIO:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _member(tar, "home/ok.txt", data=b"fine")
        for m in members:
            _member(tar, **m)
    buf.seek(0)
    return buf


TAR_CASES = {
    "dot-dot path": dict(name="home/../../escape.txt"),
    "absolute path": dict(name="/tmp/rebench-abs-escape.txt"),
    "symlink to /etc": dict(name="home/etc", kind=tarfile.SYMTYPE, linkname="/etc"),
    "symlink up and out": dict(name="home/up", kind=tarfile.SYMTYPE, linkname="../../../outside"),
    "hard link to /etc/passwd": dict(name="home/passwd", kind=tarfile.LNKTYPE, linkname="/etc/passwd"),
    "hard link up and out": dict(name="home/hl", kind=tarfile.LNKTYPE, linkname="../../outside.txt"),
    "character device": dict(name="home/null", kind=tarfile.CHRTYPE),
    "block device": dict(name="home/sda", kind=tarfile.BLKTYPE),
    "fifo": dict(name="home/pipe", kind=tarfile.FIFOTYPE),
}


@pytest.mark.parametrize("case", list(TAR_CASES), ids=list(TAR_CASES))
def test_unsafe_archive_members_are_skipped_and_named(case, tmp_path):
    dest = tmp_path / "out" / "dest"
    skipped = extract_safely(tarfile.open(fileobj=_archive(TAR_CASES[case])), dest)
    assert (dest / "home" / "ok.txt").read_bytes() == b"fine"  # the rest is kept
    assert len(skipped) == 1 and TAR_CASES[case]["name"].lstrip("/")[:8] in skipped[0] or TAR_CASES[case]["name"] in skipped[0]
    assert not (tmp_path / "out" / "escape.txt").exists() and not Path("/tmp/rebench-abs-escape.txt").exists()
    for p in dest.rglob("*"):  # nothing extracted points or resolves outside dest
        assert p.resolve().is_relative_to(dest.resolve()) or not p.is_symlink()
        assert not p.is_char_device() and not p.is_block_device() and not p.is_fifo()


def test_setuid_bits_are_dropped(tmp_path):
    skipped = extract_safely(tarfile.open(fileobj=_archive(dict(name="home/suid", mode=0o4755))), tmp_path)
    assert skipped == []
    assert not (tmp_path / "home" / "suid").stat().st_mode & 0o4000


def test_oversized_files_and_totals_are_skipped(tmp_path):
    arc = _archive(dict(name="home/big.bin", data=b"z" * 5000), dict(name="home/b2.bin", data=b"z" * 900),
                   dict(name="home/b3.bin", data=b"z" * 900))
    skipped = extract_safely(tarfile.open(fileobj=arc), tmp_path, max_file_bytes=1000, max_total_bytes=1500)
    assert any("big.bin" in s and "limit per file" in s for s in skipped)
    assert any("b3.bin" in s and "in all" in s for s in skipped)
    assert (tmp_path / "home" / "b2.bin").exists() and not (tmp_path / "home" / "big.bin").exists()


def test_truncated_archive_keeps_what_came(tmp_path):
    data = _archive(dict(name="home/second.txt", data=b"s" * 4096)).getvalue()
    skipped = extract_safely(tarfile.open(fileobj=io.BytesIO(data[:1024 + 512 + 100])), tmp_path)
    assert (tmp_path / "home" / "ok.txt").exists()
    assert skipped  # said so


@pytest.mark.parametrize("name", ["home/new\nline.txt", "home/" + "d/" * 200 + "deep.txt", "home/" + "n" * 255],
                         ids=["newline", "deep", "long-name"])
def test_odd_names_in_archives(name, tmp_path):
    skipped = extract_safely(tarfile.open(fileobj=_archive(dict(name=name))), tmp_path)
    assert skipped == [] and (tmp_path / name).exists()


class _FakeContainer:
    name = "fake"

    def __init__(self, data: bytes) -> None:
        self.data = data

    def get_archive(self, _path):
        return iter([self.data[i:i + 1000] for i in range(0, len(self.data), 1000)]), {}


def test_docker_copy_out_and_copy_home_refuse_links_out(tmp_path):
    from rebench_tui.cli.sessions import _copy_home
    from rebench_tui.runtime.docker_runtime import DockerSandbox

    evil = _archive(dict(name="home/etc", kind=tarfile.SYMTYPE, linkname="/etc"),
                    dict(name="home/../../x", data=b"x")).getvalue()
    sb = DockerSandbox.__new__(DockerSandbox)
    sb.runtime = type("R", (), {"generation": 0})()
    sb._generation, sb._container = 0, _FakeContainer(evil)
    skipped = sb.copy_out("/home/agent", tmp_path / "a")
    assert len(skipped) == 2 and (tmp_path / "a" / "home" / "ok.txt").exists()
    skipped = _copy_home(_FakeContainer(evil), tmp_path / "b")
    assert len(skipped) == 2 and not (tmp_path / "b" / "home" / "etc").exists()


# -- odd file names through the watcher, the audit log and the exports ----------------------------
ODD_NAMES = {
    "newline": b"new\nline.txt",
    "not UTF-8": b"bad\xff\xfe.txt",
    "latin-1 accent": b"caf\xe9.py",
    "long": b"l" * 250,
    "deep path": b"/".join([b"d" * 60] * 20) + b"/f.txt",
    "quotes and backslash": b'q"u\\o\'te.txt',
    "terminal escapes": b"\x1b[31mred\x07.txt",
    "right-to-left": "\u202eevil.txt".encode(),
}


@pytest.mark.parametrize("case", list(ODD_NAMES), ids=list(ODD_NAMES))
def test_odd_file_names_are_recorded_verified_and_exported(case, toy_session, tmp_path):
    from rebench_tui.trajectory.export_csv import export_csv
    from rebench_tui.trajectory.export_vivaria import export_vivaria

    s = toy_session()
    s.start_watching(interval=0.05)
    raw = os.fsencode(s.workspace) + b"/" + ODD_NAMES[case]
    os.makedirs(os.path.dirname(raw), exist_ok=True)
    with open(raw, "wb") as fh:
        fh.write(b"content\n")
    s.watcher.flush()
    rows = read_entries(s.folder / "audit.jsonl")
    paths = [r["content"]["content"][1].get("path") for r in rows if r["content"].get("attributes", {}).get("title") == "file"]
    assert os.fsdecode(ODD_NAMES[case].split(b"/")[-1]) in "".join(p or "" for p in paths)
    s.close()
    report = verify(s.folder)
    assert report.ok, [str(f) for f in report.findings if not f.ok]
    export_vivaria(s.folder, tmp_path / "viv")
    export_csv(s.folder, tmp_path / "csv")


# -- a full disk and a read-only folder ------------------------------------------------------------
def _mount_tmpfs(path: Path, size: str = "1m") -> None:
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount permission): {r.stderr.strip()}")


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    _mount_tmpfs(mnt)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(folder: Path) -> Path:
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    for block in (65536, 512, 1):
        try:
            while True:
                os.write(fd, b"\0" * block)
        except OSError:
            pass
    os.close(fd)
    return filler


def _session_on(disk: Path, fake_clock):
    from rebench_tui.runtime.local import LocalRuntime
    from rebench_tui.session import Session

    env = load_catalog(FIXTURE_ENVS, KNOWN_IMAGES).get("toy_score")
    return Session.create(env, "smoke", LocalRuntime(), disk / "sessions", clock=fake_clock, store=Store(disk / "sessions"))


def test_full_disk_gives_a_clear_error_and_loses_nothing(small_disk, fake_clock):
    s = _session_on(small_disk, fake_clock)
    try:
        (s.workspace / "solution" / "answer.txt").write_text("4")
        s.score()
        s.note("before the disk filled")
        before = (s.folder / "audit.jsonl").read_bytes()
        filler = _fill(small_disk)
        with pytest.raises(AuditWriteError) as exc:
            s.note("x" * 20000)
        assert exc.value.kept and exc.value.fix and "could not be written" in exc.value.what
        with pytest.raises(RebenchError):  # a scoring on a full disk: a clear error, no crash
            s.score()
        assert (s.folder / "audit.jsonl").read_bytes() == before  # cut back to whole lines
        assert verify(s.folder).ok
        filler.unlink()
        s.note("after space came back")
        notes = [r["content"]["content"][0] for r in read_entries(s.folder / "audit.jsonl") if r["content"]["type"] == "log"]
        assert "x" * 20000 in notes and "after space came back" in notes  # the waiting row was kept
        assert (s.folder / "audit.jsonl").read_bytes().startswith(before)
        s.close()  # the score-log row held back by the full disk is written now
    finally:
        if s.lock.held:
            s.lock.release()
    assert verify(s.folder).ok, [str(f) for f in verify(s.folder).findings if not f.ok]


def test_full_disk_during_session_json_save_keeps_the_old_file(small_disk, fake_clock):
    s = _session_on(small_disk, fake_clock)
    try:
        old = (s.folder / "session.json").read_text()
        filler = _fill(small_disk)
        s.meta.metadata["big"] = "y" * 50000
        with pytest.raises(RebenchError) as exc:
            s.core.save()
        assert "could not be written" in str(exc.value) and exc.value.kept
        assert (s.folder / "session.json").read_text() == old
        assert not list(s.folder.glob(".session.*"))  # no half temp file left
        filler.unlink()
    finally:
        s.lock.release()


def test_read_only_session_folder(small_disk, fake_clock):
    s = _session_on(small_disk, fake_clock)
    try:
        s.note("written while writable")
        before = (s.folder / "audit.jsonl").read_bytes()
        # A read-only bind of the session folder over itself (root ignores file modes; the app keeps
        # files open, so the whole tmpfs cannot be remounted read-only).
        r = subprocess.run(f"mount --bind {s.folder} {s.folder} && mount -o remount,bind,ro {s.folder}",
                           shell=True, capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot make a read-only bind mount here: {r.stderr.strip()}")
        try:
            with pytest.raises(AuditWriteError) as exc:
                s.note("while read-only")
            assert "Read-only" in str(exc.value) and exc.value.fix
            with pytest.raises(RebenchError):
                s.pause("read-only")
        finally:
            subprocess.run(["umount", str(s.folder)], check=True)
        assert (s.folder / "audit.jsonl").read_bytes().startswith(before)
        s.note("writable again")
    finally:
        s.lock.release()
    assert verify(s.folder).ok, [str(f) for f in verify(s.folder).findings if not f.ok]


def test_watcher_survives_a_full_disk(small_disk, fake_clock):
    s = _session_on(small_disk, fake_clock)
    errors = []
    s.subscribe(lambda ev: errors.append(ev) if isinstance(ev, RecordingTrouble) else None)
    try:
        s.start_watching(interval=0.05)
        filler = _fill(small_disk)
        (s.workspace / "solution" / "answer.txt").write_text("")  # truncating frees nothing much; an event
        s.watcher.flush()
        filler.unlink()
        (s.workspace / "after.txt").write_text("after")
        s.watcher.flush()
        assert s.watcher.alive
        s.close()
    finally:
        s.lock.release()
    names = [r["content"]["content"][1].get("path") for r in read_entries(s.folder / "audit.jsonl")
             if r["content"].get("attributes", {}).get("title") == "file"]
    assert "after.txt" in names
    assert verify(s.folder).ok


# -- the session index ------------------------------------------------------------------------------
CORRUPTIONS = {
    "garbage bytes": lambda p: p.write_bytes(b"this is not a database" * 100),
    "truncated": lambda p: p.write_bytes(p.read_bytes()[:1500]),
    "zeroed header": lambda p: p.write_bytes(b"\0" * 100 + p.read_bytes()[100:]),
    "random pages": lambda p: p.write_bytes(p.read_bytes()[:100] + os.urandom(len(p.read_bytes()) - 100)),
    "a folder": lambda p: (p.unlink(), p.mkdir()),
}


@pytest.mark.parametrize("case", list(CORRUPTIONS), ids=list(CORRUPTIONS))
def test_corrupted_index_is_rebuilt_from_the_audit_logs(case, toy_session, tmp_path):
    sessions = tmp_path / "sessions"
    s = toy_session()
    (s.workspace / "solution" / "answer.txt").write_text("3")
    s.score()
    s.close()
    s.store.close()
    db = sessions / "index.db"
    for extra in ("index.db-wal", "index.db-shm"):
        (sessions / extra).unlink(missing_ok=True)
    CORRUPTIONS[case](db)
    said = []
    store = open_store(sessions, say=said.append)
    rows = store.sessions()
    assert [r["id"] for r in rows] == [s.id] and rows[0]["final_score"] == 3.0 and rows[0]["n_scores"] == 1
    assert [x["score"] for x in store.scores(s.id)] == [3.0]
    assert said and "rebuilt" in said[0] and list(sessions.glob("index.db.corrupt-*"))
    assert verify(s.folder).ok  # the records were not touched


def test_sessions_rebuild_index_command(toy_session, tmp_path):
    from rebench_tui.cli import main

    s = toy_session()
    s.score()
    s.close()
    s.store.close()
    db = sqlite3.connect(tmp_path / "sessions" / "index.db")
    db.execute("delete from sessions")
    db.commit()
    db.close()
    result = CliRunner().invoke(main, ["sessions", "--rebuild-index", "--sessions-dir", str(tmp_path / "sessions")],
                                env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "rebuilt the session index" in result.output and s.id[:20] in result.output


def test_index_write_failure_does_not_stop_a_scoring(toy_session):
    s = toy_session()
    s.store.db.conn.close()  # every index write now fails
    rec = s.score()
    assert rec.score == 10.0 and s.store.broken
    assert verify(s.folder).ok
