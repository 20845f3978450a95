"""Exports of real sessions (toy environment, local runtime, fake clock) to Inspect, Vivaria and CSV.

Timeline of the finished session, in fake-clock seconds from the start (working time in brackets):
  60 [60]    answer 8, scored                     -> attempt 1: 8
  120 [120]  plan.md created, answer nan, scored  -> attempt 2: NaN; a note
  120-125    command 1 (`ls -la`, exit 0)
  125 [125]  pause ("lunch"), 300 s
  425 [125]  resume
  455 [155]  command 2 (`python train.py`, exit 1, output cut); answer 5, scored -> attempt 3: 5;
            a command gap; command 3 (`sleep 1000`) starts and never ends
  465 [165]  submit "final": the final scoring (attempt 4: 5), the submission, the finish
The counting score (lower is better, rule min) is 5: scorings 3 and 4 scored the same files, so
they are re-scores of one attempt, which counts with their median (5).
"""

from __future__ import annotations

import csv
import json
import math
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from rebench_tui.catalog import load_catalog
from rebench_tui.cli import main
from rebench_tui.clock import FakeClock
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session
from rebench_tui.store import Store
from rebench_tui.trajectory.audit import read_entries
from rebench_tui.trajectory.entries import TraceEntry
from rebench_tui.trajectory.export_csv import export_csv
from rebench_tui.trajectory.export_inspect import SCORER, export_inspect
from rebench_tui.trajectory.export_vivaria import export_vivaria
from rebench_tui.trajectory.session_records import log_parts
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES

inspect_log = pytest.importorskip("inspect_ai.log")
from inspect_ai.event import InfoEvent, SampleInitEvent, SandboxEvent, ScoreEvent, ToolEvent  # noqa: E402

PAUSE_S = 300


def answer(s, text):
    (s.workspace / "solution" / "answer.txt").write_text(text + "\n")
    s.watcher.flush()


def command(s, clock, cid, cmd, seconds, exit_status, output, *, truncated=False, output_bytes=None):
    """What the command collector writes: an action, later its observation, and a log row."""
    start = int(clock.time() * 1000)
    cwd = str(s.workspace)
    s.audit.append({"type": "action", "action": {"type": "run_bash", "args": {"command": cmd}, "id": cid, "cwd": cwd,
                                                 "started_at": start}})
    clock.advance(seconds)
    end = int(clock.time() * 1000)
    size = output_bytes if output_bytes is not None else len(output.encode())
    s.audit.append({"type": "observation", "observation": {
        "id": cid, "exit_status": exit_status, "output": output, "output_bytes": size, "truncated": truncated,
        "started_at": start, "ended_at": end, "duration_s": seconds, "cwd": cwd}})
    s.audit.append({"type": "log", "content": [f"$ {cmd}  (exit {exit_status})", {
        "event": "command", "id": cid, "command": cmd, "exit_status": exit_status, "cwd": cwd, "duration_s": seconds}],
        "attributes": {"title": "command"}})
    return start, end


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished session for the module: its tests only read it (each export goes to its own tmp_path)."""
    fake_clock = FakeClock()
    sessions = tmp_path_factory.mktemp("finished") / "sessions"
    env = load_catalog(FIXTURE_ENVS, KNOWN_IMAGES).get("toy_score")
    s = Session.create(env, "smoke", LocalRuntime(), sessions, clock=fake_clock, store=Store(sessions))
    s.start_watching(interval=0.05)
    t0 = fake_clock.time()
    fake_clock.advance(60)
    answer(s, "8")
    s.score()
    fake_clock.advance(60)
    (s.workspace / "plan.md").write_text("# plan\n- try a smaller learning rate\n")
    answer(s, "nan")
    s.score()
    s.note("trying a smaller learning rate")
    c1 = command(s, fake_clock, "101-1", "ls -la", 5, 0, "total 8\nanswer.txt\n")
    s.pause("lunch")
    fake_clock.advance(PAUSE_S)
    s.resume()
    fake_clock.advance(25)
    c2 = command(s, fake_clock, "101-2", "python train.py", 5, 1, "Traceback ...\n[cut]\n", truncated=True,
                 output_bytes=40000)
    answer(s, "5")
    s.score()
    s.audit.append({"type": "log", "content": ["command ran without capture hooks in shell 102: make", {
        "event": "command_gap", "reason": "a process started by a shell whose capture hooks were off", "pid": 140,
        "shell_pid": 102, "argv": ["make"]}], "attributes": {"title": "command"}})
    s.audit.append({"type": "action", "action": {"type": "run_bash", "args": {"command": "sleep 1000"}, "id": "101-3",
                                                 "cwd": str(s.workspace), "started_at": int(fake_clock.time() * 1000)}})
    fake_clock.advance(10)
    s.submit("final")
    s.close()
    s.t0, s.commands = t0, (c1, c2)
    return s


@pytest.fixture
def unfinished(toy_session, fake_clock):
    s = toy_session()
    fake_clock.advance(30)
    (s.workspace / "solution" / "answer.txt").write_text("7\n")
    s.score()
    fake_clock.advance(15)
    return s


def audit_rows(s):
    return read_entries(s.folder / "audit.jsonl")


def file_rows(s):
    return [r for r in audit_rows(s) if log_parts(r)[0] == "file"]


# -- Inspect ---------------------------------------------------------------------------------

def test_inspect_export_loads_as_a_human_cli_baseline(finished, tmp_path):
    out = export_inspect(finished.folder, tmp_path / "x.eval")
    log = inspect_log.read_eval_log(str(out))
    assert log.status == "success" and log.eval.model == "none/none"
    assert log.eval.task == "rebench_toy_score" and log.eval.created.startswith("2026-01-01T00:00:00")
    assert log.plan.steps[0].solver == "human_cli" and log.plan.steps[0].params["intermediate_scoring"] is True
    (sample,) = log.samples
    instructions = (finished.workspace / "instructions.txt").read_text()
    assert sample.id == "rebench_toy_score/main" and sample.epoch == 1 and sample.input == instructions
    assert sample.target == "" and sample.uuid
    assert sample.metadata["task_family"] == "rebench_toy_score" and sample.metadata["task_name"] == "main"
    assert sample.metadata["instructions"] == instructions and sample.metadata["session_id"] == finished.id
    assert sample.metadata["runtime"] == "local" and sample.metadata["isolated"] is False

    ev = sample.events
    assert isinstance(ev[0], SampleInitEvent)
    assert all("working_time" in e.metadata for e in ev), [type(e).__name__ for e in ev if "working_time" not in (e.metadata or {})]

    scores = [e for e in ev if isinstance(e, ScoreEvent)]
    inter = [e for e in scores if e.intermediate]
    assert [e.score.value for e in inter][0] == 8 and math.isnan(inter[1].score.value)
    assert [e.score.value for e in inter][2:] == [5, 5]
    assert inter[1].metadata["vivaria_score"] == "NaN"
    assert json.loads(inter[0].score.explanation) == {"answer": 8.0}
    assert inter[0].score.metadata["secret_ok"] is True and inter[3].score.metadata["final"] is True
    assert [e.metadata["working_time"] for e in inter] == [60, 120, 155, 165]
    # Inspect's working_start counts the pause; the metadata's working time does not.
    assert inter[2].working_start == pytest.approx(455, abs=0.1)
    (final,) = [e for e in scores if not e.intermediate]
    assert final.score.value == 5 and final.score.answer == "final" and final.metadata["final_attempt"] == 3
    assert final.metadata["final_scorings"] == [3, 4] and final.score.metadata["counting"]["n"] == 2
    assert inter[3].score.metadata["attempt"]["source"] == "snapshot"  # what was scored: the frozen snapshot
    assert sample.scores[SCORER].value == 5
    assert log.results.scores[0].metrics["mean"].value == 5

    tools = [e for e in ev if isinstance(e, ToolEvent)]
    assert [(t.id, t.function, t.arguments) for t in tools] == [("101-1", "bash", {"command": "ls -la"}),
                                                               ("101-2", "bash", {"command": "python train.py"}),
                                                               ("101-3", "bash", {"command": "sleep 1000"})]
    assert tools[2].completed is None and tools[2].metadata["no_observation"] is True and tools[2].result == ""
    assert tools[0].result == "total 8\nanswer.txt\n" and tools[1].metadata["exit_status"] == 1
    (s1, e1), (s2, e2) = finished.commands
    assert tools[0].timestamp.timestamp() * 1000 == pytest.approx(s1) and tools[0].completed.timestamp() * 1000 == pytest.approx(e1)
    assert tools[1].truncated == (40000, len("Traceback ...\n[cut]\n")) and tools[1].metadata["working_time"] == 150

    sandbox = [e for e in ev if isinstance(e, SandboxEvent)]
    assert len(sandbox) == len(file_rows(finished)) >= 3
    assert all(e.action == "write_file" for e in sandbox)
    plan = [e for e in sandbox if e.file == "plan.md"]
    assert plan and plan[0].metadata["file_event"] == "created"
    diffs = [e.metadata.get("diff", "") for e in sandbox if e.file == "solution/answer.txt"]
    assert any("+5" in d and "-nan" in d for d in diffs), diffs

    infos = [e for e in ev if isinstance(e, InfoEvent)]
    notes = [e for e in infos if isinstance(e.data, dict) and "note" in e.data]
    assert [n.data for n in notes] == [{"note": "trying a smaller learning rate"}] and notes[0].source == "human_agent"
    clock = [e.data for e in infos if e.source == "human_agent" and isinstance(e.data, dict) and "action" in e.data]
    assert clock == [{"action": "start", "total_time": "0:00:00"}, {"action": "stop", "total_time": "0:02:05"},
                     {"action": "start", "total_time": "0:02:05"}, {"action": "stop", "total_time": "0:02:45"}]
    # the command's own log row is carried by its ToolEvent, not repeated as info
    assert not [e for e in infos if isinstance(e.data, dict) and e.data.get("event") == "command"]
    (gap,) = [e for e in infos if isinstance(e.data, dict) and e.data.get("event") == "command_gap"]
    assert gap.source == "rebench_tui" and gap.data["argv"] == ["make"] and gap.metadata["working_time"] == 155

    st = sample.store
    assert st["HumanAgentState:instructions"] == instructions
    assert [x["time"] for x in st["HumanAgentState:scorings"]] == [60, 120, 155, 165]
    assert math.isnan(st["HumanAgentState:scorings"][1]["scores"][0]["value"])
    assert st["HumanAgentState:answer"] == "final" and st["HumanAgentState:running_state"] is False
    assert st["HumanAgentState:accumulated_time"] == pytest.approx(165)
    assert "python train.py" in st["HumanAgentState:logs"]["rebench_commands.log"]
    from inspect_ai.agent._human.state import HumanAgentState

    state = sample.store_as(HumanAgentState)
    assert state.answer == "final" and len(state.scorings) == 4 and state.accumulated_time == pytest.approx(165)


def test_inspect_events_are_in_timestamp_order_when_a_command_spans_other_records(toy_session, fake_clock, tmp_path):
    """The command collector writes a command's action, observation and log rows when it ends;
    its ToolEvent carries the command's start. File changes, a scoring and a note made while it
    ran come between the two and must follow the ToolEvent in the export."""
    s = toy_session()
    s.start_watching(interval=0.05)
    fake_clock.advance(10)
    start = int(fake_clock.time() * 1000)
    fake_clock.advance(2)
    answer(s, "4")  # a file change while `python train.py` runs
    s.score()
    s.note("waiting for training")
    fake_clock.advance(3)
    end = int(fake_clock.time() * 1000)
    cwd = str(s.workspace)
    s.audit.append_many([  # what CommandCollector.poll writes, all at once, at the end
        {"type": "action", "action": {"type": "run_bash", "args": {"command": "python train.py"}, "id": "7-1", "cwd": cwd,
                                      "started_at": start}},
        {"type": "observation", "observation": {"id": "7-1", "exit_status": 0, "output": "done\n", "output_bytes": 5,
                                                "truncated": False, "started_at": start, "ended_at": end, "duration_s": 5,
                                                "cwd": cwd}},
        {"type": "log", "content": ["$ python train.py  (exit 0)", {"event": "command", "id": "7-1", "command": "python train.py",
                                                                    "exit_status": 0, "cwd": cwd, "duration_s": 5}],
         "attributes": {"title": "command"}}])
    s.close()
    ev = inspect_log.read_eval_log(str(export_inspect(s.folder, tmp_path / "o.eval"))).samples[0].events
    stamps = [e.timestamp for e in ev]
    assert stamps == sorted(stamps), [(type(e).__name__, e.timestamp.isoformat()) for e in ev]
    kinds = [type(e).__name__ for e in ev]
    (tool,) = [i for i, e in enumerate(ev) if isinstance(e, ToolEvent)]
    answer_change = [i for i, e in enumerate(ev) if isinstance(e, SandboxEvent) and e.file == "solution/answer.txt"]
    (scored,) = [i for i, e in enumerate(ev) if isinstance(e, ScoreEvent)]
    (noted,) = [i for i, e in enumerate(ev) if isinstance(e, InfoEvent) and isinstance(e.data, dict) and "note" in e.data]
    assert answer_change and tool < min(answer_change) and tool < scored < noted, kinds
    assert ev[tool].timestamp.timestamp() * 1000 == pytest.approx(start)
    assert isinstance(ev[0], SampleInitEvent)


def test_inspect_json_export_and_inspect_cli_dump(finished, tmp_path):
    out = export_inspect(finished.folder, tmp_path / "x.json", "json")
    log = inspect_log.read_eval_log(str(out))
    assert len(log.samples[0].events) > 10
    inspect_bin = __import__("shutil").which("inspect", path=str(__import__("pathlib").Path(sys.executable).parent))
    if inspect_bin:
        dumped = subprocess.run([inspect_bin, "log", "dump", str(export_inspect(finished.folder, tmp_path / "y.eval"))],
                                capture_output=True, text=True, timeout=120)
        assert dumped.returncode == 0, dumped.stderr
        assert '"human_cli"' in dumped.stdout


def test_an_unfinished_session_exports_as_started(unfinished, tmp_path):
    log = inspect_log.read_eval_log(str(export_inspect(unfinished.folder, tmp_path / "u.eval")))
    assert log.status == "started" and log.results is None
    (sample,) = log.samples
    assert sample.scores is None and sample.store["HumanAgentState:running_state"] is True
    scores = [e for e in sample.events if isinstance(e, ScoreEvent)]
    assert [(e.intermediate, e.score.value) for e in scores] == [(True, 7)]
    run = export_vivaria(unfinished.folder, tmp_path / "u-vivaria")
    row = json.loads((run / "run.json").read_text())
    assert row["completedAt"] is None and row["score"] is None and row["metadata"]["status"] == "active"
    out = export_csv(unfinished.folder, tmp_path / "u-csv")
    assert len(list(csv.DictReader(open(out / "scores.csv")))) == 1


# -- Vivaria ---------------------------------------------------------------------------------

def test_vivaria_bundle(finished, tmp_path):
    out = export_vivaria(finished.folder, tmp_path / "bundle")
    assert sorted(p.name for p in out.iterdir()) == ["run.json", "run_pauses.jsonl", "score_log.jsonl", "trace_entries.jsonl"]
    audit = audit_rows(finished)
    trace = [json.loads(line) for line in (out / "trace_entries.jsonl").read_text().splitlines()]
    assert len(trace) == len(audit)
    for got, orig in zip(trace, audit):
        TraceEntry.model_validate(got)
        assert not {"prevHash", "hash", "workingMs"} & got.keys()
        assert got == {k: v for k, v in orig.items() if k not in ("prevHash", "hash", "workingMs")}
    assert {r["content"]["type"] for r in trace} >= {"log", "action", "observation", "intermediateScore", "submission"}

    run = json.loads((out / "run.json").read_text())
    meta = json.loads((finished.folder / "session.json").read_text())
    assert run["id"] == meta["run_id"] and run["taskId"] == "rebench_toy_score/main" and run["taskVersion"] == "1.0.0"
    assert run["isInteractive"] is True and run["usageLimits"] == {"total_seconds": 3600}
    assert run["submission"] == "final" and run["score"] == 5 and run["startedAt"] == meta["started_at"]
    assert run["completedAt"] == meta["completed_at"] and run["metadata"]["export"]["audit_rows"] == len(audit)
    assert run["metadata"]["export"]["audit_last_hash"] == audit[-1]["hash"]

    pauses = [json.loads(line) for line in (out / "run_pauses.jsonl").read_text().splitlines()]
    start = int((finished.t0 + 125) * 1000)
    assert pauses == [{"runId": meta["run_id"], "agentBranchNumber": 0, "start": start, "end": start + PAUSE_S * 1000,
                       "reason": "pauseHook"}]

    log = [json.loads(line) for line in (out / "score_log.jsonl").read_text().splitlines()]
    assert [r["score"] for r in log] == [8.0, "NaN", 5.0, 5.0]
    scored = [r for r in audit if r["content"]["type"] == "intermediateScore"]
    assert [r["index"] for r in log] == [r["index"] for r in scored]
    assert [r["scoredAt"] for r in log] == [r["calledAt"] for r in scored]
    # Hand-computed working time: wall seconds since the start, less the 300 s pause once it ended.
    # calledAt may sit a few ms after the fake clock's time (rows written in the same ms are spread out).
    for r, wall_s, paused_s in zip(log, (60, 120, 455, 465), (0, 0, PAUSE_S, PAUSE_S)):
        assert 0 <= r["elapsedTime"] - (wall_s - paused_s) * 1000 < 20, (r, wall_s)
        assert r["elapsedTime"] == r["scoredAt"] - meta["started_at"] - paused_s * 1000


# -- CSV -------------------------------------------------------------------------------------

def test_csv_tables(finished, tmp_path):
    out = export_csv(finished.folder, tmp_path / "csv")
    # the score log is the session's own score_log.csv, byte for byte
    assert (out / "score_log.csv").read_text() == (finished.folder / "score_log.csv").read_text()
    rows = list(csv.DictReader(open(out / "scores.csv")))
    assert [float(r["working_s"]) for r in rows] == [60, 120, 155, 165]
    assert [r["score"] for r in rows] == ["8.0", "nan", "5.0", "5.0"]
    assert [r["valid"] for r in rows] == ["True", "False", "True", "True"]
    assert [float(r["normalized"]) for r in rows if r["valid"] == "True"] == [0.25, 0.625, 0.625]
    assert [r["counting_score"] for r in rows] == ["8.0", "8.0", "5.0", "5.0"]
    assert [r["is_final"] for r in rows] == ["False", "False", "True", "True"]  # the re-scores whose median counts
    assert [r["files_attempt"] for r in rows] == ["1", "2", "3", "3"]
    fps = [r["fingerprint"] for r in rows]
    assert all(len(f) == 64 for f in fps) and len(set(fps)) == 3 and fps[2] == fps[3]
    cmds = list(csv.DictReader(open(out / "commands.csv")))
    assert [c["id"] for c in cmds] == ["101-1", "101-2", "101-3"]
    assert [c["command"] for c in cmds] == ["ls -la", "python train.py", "sleep 1000"]
    assert [c["exit_status"] for c in cmds] == ["0", "1", ""] and [c["truncated"] for c in cmds] == ["False", "True", ""]
    assert cmds[2]["ended_at"] == "" and cmds[2]["duration_s"] == ""
    assert cmds[1]["output_bytes"] == "40000" and float(cmds[1]["duration_s"]) == 5
    assert int(cmds[0]["ended_at"]) - int(cmds[0]["started_at"]) == 5000 and cmds[0]["cwd"] == str(finished.workspace)


# -- CLI -------------------------------------------------------------------------------------

def test_cli_batch_export(finished, unfinished, tmp_path):
    sessions = unfinished.folder.parent
    shutil.copytree(finished.folder, sessions / finished.id)  # the two side by side; the shared one stays as it was
    out = tmp_path / "exports"
    r = CliRunner().invoke(main, ["export", "--all", "--format", "inspect", "-o", str(out), "--sessions-dir", str(sessions)])
    assert r.exit_code == 0, r.output
    assert "[1/2]" in r.output and "[2/2]" in r.output
    for s, status in ((finished, "success"), (unfinished, "started")):
        assert inspect_log.read_eval_log(str(out / f"{s.id}.eval")).status == status

    r = CliRunner().invoke(main, ["export", finished.id, unfinished.id[:-2], "--format", "vivaria", "-o", str(out),
                                  "--sessions-dir", str(sessions)])
    assert r.exit_code == 0, r.output
    assert (out / f"{finished.id}-vivaria" / "run.json").is_file() and (out / f"{unfinished.id}-vivaria" / "run.json").is_file()

    r = CliRunner().invoke(main, ["export", finished.id, "--format", "csv", "-o", str(out), "--sessions-dir", str(sessions)])
    assert r.exit_code == 0 and (out / f"{finished.id}-csv" / "commands.csv").is_file()

    r = CliRunner().invoke(main, ["export", finished.id, "-o", str(tmp_path / "one.json"), "--sessions-dir", str(sessions)])
    assert r.exit_code == 0 and inspect_log.read_eval_log(str(tmp_path / "one.json")).status == "success"

    r = CliRunner().invoke(main, ["export", "no-such-session", "--sessions-dir", str(sessions)])
    assert r.exit_code == 1 and "no session 'no-such-session'" in r.output
    r = CliRunner().invoke(main, ["export", "--sessions-dir", str(sessions)])
    assert r.exit_code == 2 and "--all" in r.output


def test_cli_names_the_missing_inspect_extra(finished, tmp_path):
    # A real interpreter in which inspect_ai cannot be imported (a None entry in sys.modules makes
    # `import inspect_ai` raise ImportError, as on a machine without the extra).
    code = ("import sys; sys.modules['inspect_ai'] = None; from rebench_tui.cli import main; "
            f"main(['export', {finished.id!r}, '-o', {str(tmp_path / 'x')!r}, '--sessions-dir', {str(finished.folder.parent)!r}])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1, p.stderr
    assert "pip install 'rebench-tui[inspect]'" in p.stderr
    assert not (tmp_path / "x").exists()


def test_a_cut_last_line_is_left_out_and_a_broken_row_stops_the_export(unfinished, tmp_path):
    from rebench_tui.errors import RebenchError

    path = unfinished.folder / "audit.jsonl"
    rows = path.read_text().splitlines(keepends=True)
    path.write_text("".join(rows) + rows[-1][:40])  # a row the app was still writing
    run = export_vivaria(unfinished.folder, tmp_path / "v")
    assert len((run / "trace_entries.jsonl").read_text().splitlines()) == len(rows)
    assert "incomplete" in json.loads((run / "run.json").read_text())["metadata"]["export"]["warnings"][0]
    log = inspect_log.read_eval_log(str(export_inspect(unfinished.folder, tmp_path / "u.eval")))
    assert "incomplete" in log.samples[0].metadata["export_warnings"][0]

    bad = json.loads(rows[1])
    bad["content"]["extra_key"] = 1  # content objects are strict
    path.write_text(rows[0] + json.dumps(bad) + "\n" + "".join(rows[2:]))
    with pytest.raises(RebenchError, match="row 2 breaks the trace-entry contract"):
        export_vivaria(unfinished.folder, tmp_path / "v2")
    assert not (tmp_path / "v2").exists()


@pytest.mark.parametrize("text", [
    '{"a":1}',
    '{"big":123456789012345678901234567890,"f":0.1,"g":1e-7,"h":-0.0,"i":1.7976931348623157e308}',
    '{"name":"caf\\u00e9 \\ud83d\\ude00 \\u2028","raw":"é😀"}',
    '{"odd":"bad\\udcff name.py"}',  # a lone surrogate: the Rust parser refuses it, the fallback reads it
    '{"dup":1,"dup":2}',
    '{"n":null,"t":true,"l":[1,[2,[3]]],"e":{}}',
])
def test_audit_lines_parse_exactly_as_the_standard_library_does(text):
    from rebench_tui.trajectory.session_records import _parse_line

    got = _parse_line(text.encode("utf-8"))
    want = json.loads(text)
    assert got == want and json.dumps(got) == json.dumps(want)
    assert [type(v) for v in got.values()] == [type(v) for v in want.values()]
