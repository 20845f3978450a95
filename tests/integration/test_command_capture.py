"""Command capture in a real container, through the shell key's own command line."""

from __future__ import annotations

import subprocess
import time

import pytest

from rebench_tui.session import Session
from rebench_tui.session.commands import OUTPUT_CAP
from rebench_tui.trajectory.audit import read_entries
from rebench_tui.trajectory.verify import verify

pytestmark = pytest.mark.docker


@pytest.fixture
def session(fixture_catalog, docker_runtime, settings):
    s = Session.create(fixture_catalog.get("toy_score"), "smoke", docker_runtime, settings.sessions)
    s.start_capture(interval=3600)  # collected explicitly below, as the app does after the shell key
    yield s
    if s.lock.held:
        s.close()
    s.sandbox.stop(remove=True)


def shell(s: Session, script: str) -> subprocess.CompletedProcess:
    """Run the shell key's command with typed input (-i instead of -it: no terminal here; script makes the pty)."""
    argv, env, cwd = s.sandbox.shell_command()
    argv = ["-i" if a == "-it" else a for a in argv]
    return subprocess.run(argv, input=script.encode(), capture_output=True, timeout=120, env=env, cwd=cwd)


def collect(s: Session) -> list[dict]:
    for _ in range(20):
        s.collect_commands()
        rows = read_entries(s.folder / "audit.jsonl")
        if any(r["content"].get("content", [None, {}])[1:2] and isinstance(r["content"]["content"][1], dict)
               and r["content"]["content"][1].get("event") == "shell_exit" for r in rows if r["content"]["type"] == "log"):
            return rows
        time.sleep(0.3)
    return read_entries(s.folder / "audit.jsonl")


def commands(rows):
    acts = {r["content"]["action"]["id"]: r["content"]["action"] for r in rows if r["content"]["type"] == "action"}
    obs = {r["content"]["observation"]["id"]: r["content"]["observation"] for r in rows if r["content"]["type"] == "observation"}
    return [(acts[i], obs[i]) for i in acts]


def events(rows, name):
    return [r["content"]["content"][1] for r in rows if r["content"]["type"] == "log" and len(r["content"]["content"]) > 1
            and isinstance(r["content"]["content"][1], dict) and r["content"]["content"][1].get("event") == name]


def test_commands_are_recorded_with_exit_status_directory_and_output(session):
    p = shell(session, "echo hello\ncd solution && cat answer.txt\nfalse\nseq 1 30000\nexit\n")
    assert p.returncode == 0, p.stderr
    rows = collect(session)
    got = commands(rows)
    assert [a["args"]["command"] for a, _ in got] == ["echo hello", "cd solution && cat answer.txt", "false", "seq 1 30000", "exit"]
    (hello, o1), (cat, o2), (false, o3), (seq, o4), _ = got
    assert hello["type"] == "run_bash" and o1["output"] == "hello\n" and o1["exit_status"] == 0 and o1["cwd"] == "/home/agent"
    assert o2["output"] == "10\n" and o2["cwd"] == "/home/agent"
    assert o3["exit_status"] == 1 and false["cwd"] == "/home/agent/solution"
    assert o4["truncated"] and o4["output_bytes"] > OUTPUT_CAP and "output capped" in o4["output"] and o4["output"].endswith("30000\n")
    assert o4["ended_at"] >= o4["started_at"]
    summaries = [r["content"]["content"][0] for r in rows if r["content"].get("attributes", {}).get("title") == "command"]
    assert any(s.startswith("$ echo hello  (exit 0") for s in summaries)  # the log row viewers show
    # the whole terminal is kept beside the record
    assert "hello" in next((session.folder / ".state" / "tty").glob("*.log")).read_text(errors="replace")
    session.close()
    assert verify(session.folder).ok


def test_history_tricks_and_removed_hooks_leave_a_visible_gap(session):
    script = (" echo hidden-by-leading-space\nset +o history\necho history-off\n"
              "trap - DEBUG; unset PROMPT_COMMAND\nsleep 1.5\necho after-hooks-removed\nls /home\nexit\n")
    shell(session, "export HISTCONTROL=ignorespace\n" + script)
    rows = collect(session)
    got = commands(rows)
    texts = [a["args"]["command"] for a, _ in got]
    assert "echo hidden-by-leading-space" in texts and "echo history-off" in texts  # recorded all the same
    off = next(o for a, o in got if a["args"]["command"] == "echo history-off")
    assert any("history did not record" in n for n in off["notes"])
    # after the hooks were removed: the long-running command is seen in the process table, and the
    # shell's exit notes unmarked terminal activity
    trap_cmd, trap_obs = next((a, o) for a, o in got if a["args"]["command"].startswith("trap - DEBUG"))
    assert any("switches the capture hooks off" in n for n in trap_obs["notes"])
    assert trap_obs["exit_status"] is None and "after-hooks-removed" in trap_obs["output"]
    gaps = events(rows, "command_gap")
    assert any(g.get("id") == trap_cmd["id"] and "sleep 1.5" in g["processes"] for g in gaps), gaps
    exit_row = events(rows, "shell_exit")[-1]
    assert "after the last recorded command" in exit_row["gap"]


def test_a_shell_without_hooks_is_reported(session, docker_runtime):
    c = session.sandbox.container
    proc = subprocess.Popen(["docker", "exec", "-i", "-u", "agent", c.id, "script", "-q", "-c", "bash --norc --noprofile", "/dev/null"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdin.write(b"sleep 3\nexit\n")
    proc.stdin.flush()
    proc.wait(timeout=60)
    rows = collect(session)
    gaps = events(rows, "command_gap")
    assert any("without capture hooks" in g["reason"] for g in gaps), gaps
    assert any(g.get("argv", [None])[0] == "sleep" for g in gaps), gaps


def test_resume_replays_nothing(session, docker_runtime):
    shell(session, "echo once\nexit\n")
    collect(session)
    session.close()
    again = Session.open(session.folder, session.env, docker_runtime)
    try:
        again.start_capture(interval=3600)
        again.collect_commands()
        shell(again, "echo twice\nexit\n")
        rows = collect(again)
    finally:
        again.close()
    texts = [a["args"]["command"] for a, _ in commands(rows)]
    assert texts.count("echo once") == 1 and texts.count("echo twice") == 1


def test_a_container_session_exports_step_by_step(session, tmp_path):
    """A session recorded in a real container exports to .eval, a Vivaria bundle and CSV."""
    import csv
    import json

    from inspect_ai.event import ScoreEvent, ToolEvent
    from inspect_ai.log import read_eval_log

    from rebench_tui.trajectory.entries import TraceEntry
    from rebench_tui.trajectory.export_csv import export_csv
    from rebench_tui.trajectory.export_inspect import export_inspect
    from rebench_tui.trajectory.export_vivaria import export_vivaria

    session.start_watching()
    session.score()
    shell(session, "echo 3 > solution/answer.txt\ncat solution/answer.txt\nexit\n")
    collect(session)
    session.score()
    session.submit("done")
    session.close()

    log = read_eval_log(str(export_inspect(session.folder, tmp_path / "run.eval")))
    sample = log.samples[0]
    scores = [e for e in sample.events if isinstance(e, ScoreEvent)]
    assert [e.score.value for e in scores if e.intermediate] == [10.0, 3.0, 3.0]
    assert [e for e in scores if not e.intermediate][0].score.value == 3.0
    tools = [e for e in sample.events if isinstance(e, ToolEvent)]
    assert [t.arguments["command"] for t in tools] == ["echo 3 > solution/answer.txt", "cat solution/answer.txt", "exit"]
    assert "3" in str(tools[1].result)
    assert {"HumanAgentState:instructions", "HumanAgentState:scorings", "HumanAgentState:answer"} <= set(sample.store)
    assert log.plan.steps[0].solver == "human_cli"

    bundle = export_vivaria(session.folder, tmp_path / "vivaria")
    rows = [json.loads(line) for line in (bundle / "trace_entries.jsonl").read_text().splitlines()]
    for row in rows:
        TraceEntry.model_validate(row)
    assert sum(r["content"]["type"] == "action" for r in rows) == 3

    out = export_csv(session.folder, tmp_path / "csv")
    folder = out if out.is_dir() else out.parent
    with open(folder / "commands.csv", newline="") as fh:
        assert [r["command"] for r in csv.DictReader(fh)] == ["echo 3 > solution/answer.txt", "cat solution/answer.txt", "exit"]
