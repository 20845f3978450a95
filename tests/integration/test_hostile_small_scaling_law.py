"""small_scaling_law's scorer against hostile answers, in a real container (smoke profile).

The scorer runs no participant code: it reads solution/answer_smoke.json, as root, as data. Each
case here writes something hostile there (or in place of the folder) and must end as NaN with a
reason, never a score better than the honest starting answer's; the ground truth must stay out of
the participant's reach and out of every message.
"""

from __future__ import annotations

import json
import math
import sys

import pytest

from rebench_tui.errors import SessionError
from rebench_tui.scoring import Direction
from tests.hostile import arena_fixture, assert_no_fake_best, check_aftermath, protected_listing

pytestmark = [pytest.mark.docker]

ANSWER = "solution/answer_smoke.json"
arena = arena_fixture("small_scaling_law")


def _score(arena, answer: str | bytes | None = None, agent_cmd: str | None = None):
    arena.root("rm -rf /home/agent/solution")
    arena.reset()
    if answer is not None:
        arena.write({ANSWER: answer})
    if agent_cmd:
        r = arena.agent(agent_cmd)
        assert r.exit_code == 0, r.stderr
    before = protected_listing(arena)
    record = arena.score()
    check_aftermath(arena, before)
    assert record.details.get("scorer_matches_catalog") is True, record.details
    print(f"\n[small_scaling_law hostile] score={record.score} message={record.message}", file=sys.stderr)
    return record


@pytest.fixture(scope="module")
def honest(arena):
    record = _score(arena)  # the starting answer
    assert math.isfinite(record.score) and record.message["answer_received"] is True, record
    return record


def _nan_with(record, honest, fragment: str) -> None:
    assert math.isnan(record.score), (record.score, record.message)
    assert fragment in record.message["error"], record.message
    assert_no_fake_best(record, honest.score, Direction.HIGHER)
    shown = json.dumps(record.message)
    assert "L_opt" not in shown and "table" not in shown and len(shown) < 600, shown


@pytest.mark.parametrize("text", ['{"n_embd": 20, "max_iters": 5086, "loss_prediction": NaN}',
                                  '{"n_embd": 20, "max_iters": 5086, "loss_prediction": Infinity}',
                                  '{"n_embd": 20, "max_iters": 1e999, "loss_prediction": 1.37}',
                                  '{"n_embd": 1%s, "max_iters": 5086, "loss_prediction": 1.37}' % ("0" * 1000)])
def test_non_finite_numbers(arena, honest, text):
    _nan_with(_score(arena, text), honest, "must be finite")


@pytest.mark.parametrize("text,fragment", [
    ('{"n_embd": "20", "max_iters": 5086, "loss_prediction": 1.37}', "must be a number"),
    ('{"n_embd": 20, "max_iters": "5086", "loss_prediction": "1.37"}', "must be a number"),
    ('"n_embd=20 max_iters=5086 loss_prediction=1.37"', "JSON object"),
    ('{"n_embd": 20, "max_iters": 5086, "loss_prediction": 9.9, "loss_prediction": 1.37}', "more than once"),
])
def test_strings_and_other_shapes(arena, honest, text, fragment):
    _nan_with(_score(arena, text), honest, fragment)


def test_a_huge_answer_is_refused_unread(arena, honest):
    padding = " " * (20 << 20)  # 20 MiB of white space around a good answer: valid JSON, refused by size
    _nan_with(_score(arena, '{"n_embd": 20, "max_iters": 5086, "loss_prediction": 1.37}' + padding), honest, "bytes")
    _nan_with(_score(arena, agent_cmd=f"truncate -s 4G /home/agent/{ANSWER}"), honest, "bytes")  # sparse


def test_flops_over_the_budget(arena, honest):
    # 1.1 x 1.5e11 = 1.65e11; n_embd 64 and 600 steps is 1.81e11
    _nan_with(_score(arena, json.dumps({"n_embd": 64, "max_iters": 600, "loss_prediction": 1.4})), honest, "1.1 x the budget")
    _nan_with(_score(arena, json.dumps({"n_embd": 10**6, "max_iters": 10**11, "loss_prediction": 1.4})), honest, "FLOPs")


def _scorer_directly(arena) -> dict:
    """The scorer run by hand as root in the container, past the session's own check for links
    into /protected (which a link made during the scoring would slip past): its stdout line."""
    r = arena.root("REBENCH_HOME=/home/agent REBENCH_PROTECTED=/protected REBENCH_PROFILE=smoke SCALING_PROFILE=smoke "
                   "REBENCH_SCORER_LIB=/opt/rebench/lib python3 /protected/score.py", timeout=120)
    assert r.exit_code == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _link_refused(arena, honest, cmd: str, fragment: str, into_protected: bool) -> None:
    arena.root("rm -rf /home/agent/solution")
    arena.reset()
    assert arena.agent(cmd).exit_code == 0
    line = _scorer_directly(arena)
    assert line["score"] == "NaN" and fragment in line["message"]["error"], line
    print(f"\n[small_scaling_law hostile] scorer by hand after `{cmd}`: {line['score']} {line['message']}", file=sys.stderr)
    try:  # through the session: its own guard refuses links into /protected before the scorer runs
        record = _score(arena, agent_cmd=cmd)
    except SessionError as exc:  # or the snapshot's own rule: no link out of the home is scored
        assert "symbolic link" in str(exc), exc
    else:
        _nan_with(record, honest, fragment)


@pytest.mark.parametrize("target", ["/protected/assets/ground_truth.json", "/protected/score.py", "/etc/passwd"])
def test_a_symlinked_answer_is_refused_unread(arena, honest, target):
    _link_refused(arena, honest, f"rm -f /home/agent/{ANSWER} && ln -s {target} /home/agent/{ANSWER}", "symbolic link",
                  target.startswith("/protected"))


def test_a_symlinked_solution_folder_is_refused(arena, honest):
    # a folder of the agent's holding a perfectly good answer, reached only through a link
    cmd = ("mkdir -p /home/agent/elsewhere && cp /home/agent/solution/answer_smoke.json /home/agent/elsewhere/ && "
           "rm -rf /home/agent/solution && ln -s /home/agent/elsewhere /home/agent/solution")
    _link_refused(arena, honest, cmd, "solution is a symbolic link", False)
    arena.root("rm -rf /home/agent/elsewhere")
    _link_refused(arena, honest, "rm -rf /home/agent/solution && ln -s /protected/assets /home/agent/solution",
                  "solution is a symbolic link", True)
    arena.root("rm -rf /home/agent/solution")
    arena.reset()


def test_a_fifo_does_not_hang_the_scorer(arena, honest):
    with pytest.raises(SessionError, match="is a named pipe"):  # the snapshot takes regular files only
        _score(arena, agent_cmd=f"rm -f /home/agent/{ANSWER} && mkfifo /home/agent/{ANSWER}")


def test_the_ground_truth_is_out_of_reach(arena, honest):
    for cmd in ("cat /protected/assets/ground_truth.json", "cat /protected/assets/*", "ls /protected/assets"):
        r = arena.agent(cmd)
        assert r.exit_code != 0 and "Permission denied" in r.stderr, (cmd, r.stdout[:200])
    r = arena.agent(f"ln /protected/assets/ground_truth.json /home/agent/{ANSWER}.link")
    assert r.exit_code != 0
    # the honest scoring's message carries no part of the table (the details, kept from the
    # participant, do)
    assert "table" not in json.dumps(honest.message) and "L_opt" not in json.dumps(honest.message)
    assert honest.details["table"]
