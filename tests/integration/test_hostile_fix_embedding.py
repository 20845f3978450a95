"""fix_embedding's scorer against hostile checkpoints, in a real container (smoke profile).

The scorer (root) never unpickles the participant's file: its loader does, as the participant, in
a process of its own, with torch.load(weights_only=True), and hands back float32 values in a memfd
the scorer laid out. Each case here puts something hostile at /home/agent/fixed_model.pth and must
end as NaN with a reason, or as a score no better than the honest starting one (the corrupted
model's; lower is better).
"""

from __future__ import annotations

import io
import json
import math
import os
import pickle
import sys

import pytest
import torch

from rebench_tui.errors import SessionError
from rebench_tui.scoring import Direction
from tests.conftest import ROOT
from tests.hostile import arena_fixture, assert_no_fake_best, check_aftermath, protected_listing

pytestmark = [pytest.mark.docker]

ENV = ROOT / "environments" / "fix_embedding"
FIXED = "fixed_model.pth"
MARKERS = ("/tmp/pwned_fix_embedding", "/home/agent/pwned_fix_embedding")
arena = arena_fixture("fix_embedding")


def _corrupted_checkpoint(arena) -> dict:
    """The session's corrupted model (its assets folder is mounted read-only at ~/assets)."""
    from rebench_tui.assets import AssetStore
    from rebench_tui.config import Settings

    folder = AssetStore(Settings().cache_dir).folder("fix_embedding", "smoke")
    return torch.load(folder / "workspace" / "large_model.pth", map_location="cpu", weights_only=True)


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


class _RunsCode:
    """Unpickling this calls os.system: what a malicious checkpoint does to a plain torch.load."""

    def __reduce__(self):
        return (os.system, (" ; ".join(f"touch {m}" for m in MARKERS),))


def _clear(arena) -> None:
    arena.root(f"rm -rf /home/agent/{FIXED} " + " ".join(MARKERS))


def _score(arena, files: dict | None = None, agent_cmd: str | None = None):
    _clear(arena)
    if files:
        arena.write(files)
    if agent_cmd:
        r = arena.agent(agent_cmd)
        assert r.exit_code == 0, r.stderr
    before = protected_listing(arena)
    record = arena.score()
    check_aftermath(arena, before)
    assert record.details.get("scorer_matches_catalog") is True, record.details
    print(f"\n[fix_embedding hostile] score={record.score} message={record.message}", file=sys.stderr)
    return record


@pytest.fixture(scope="module")
def honest(arena):
    """The starting score: the corrupted model, scored before any fixed_model.pth exists."""
    record = _score(arena)
    assert math.isfinite(record.score) and "corrupted" in record.message["note"], record
    return record


def _nan_with(record, *fragments: str) -> None:
    assert math.isnan(record.score), (record.score, record.message)
    text = " ".join(str(v) for v in record.message.values())
    assert any(f in text for f in fragments), record.message


def test_a_pickle_that_runs_code_on_load_runs_nothing(arena, honest):
    state = _corrupted_checkpoint(arena)
    for name, payload in (("zip", _saved({**state, "extra": _RunsCode()})),  # torch.save's zip format
                          ("legacy", pickle.dumps(_RunsCode())),  # a bare pickle stream
                          ("state", _saved({"config": state["config"], "state_dict": {**state["state_dict"], "wte.weight": _RunsCode()}}))):
        record = _score(arena, {FIXED: payload})
        _nan_with(record, "could not load")
        # the restricted unpickler names what it refused: a global (posix.system) or, for a bare
        # pickle stream, the first opcode it does not accept
        assert "unsupported" in record.message["error"].lower(), (name, record.message)
        for marker in MARKERS:
            assert arena.root(f"test -e {marker}").exit_code != 0, f"{name}: the pickle ran code ({marker} exists)"


def test_a_checkpoint_of_another_shape_is_refused(arena, honest):
    sys.path.insert(0, str(ENV / "solution"))
    from model import GPT, GPTConfig, save_checkpoint

    buf = io.BytesIO()
    save_checkpoint(GPT(GPTConfig(vocab_size=256, block_size=64, n_layer=3, n_head=2, n_embd=64)), buf)
    record = _score(arena, {FIXED: buf.getvalue()})
    _nan_with(record, "does not fit the fixed architecture")
    assert any(k.startswith("blocks.2.") for k in record.message["unexpected"]), record.message
    state = _corrupted_checkpoint(arena)["state_dict"]
    bigger = {**state, "wte.weight": torch.zeros(300, state["wte.weight"].shape[1])}
    record = _score(arena, {FIXED: _saved(bigger)})
    _nan_with(record, "does not fit the fixed architecture")
    assert any("wte.weight" in w for w in record.message["wrong_shapes"]), record.message


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_weights_are_refused(arena, honest, bad):
    ckpt = _corrupted_checkpoint(arena)
    state = dict(ckpt["state_dict"])
    name = "blocks.1.fc.weight" if bad == math.inf else "wte.weight"
    state[name] = state[name].clone()
    state[name][3, 5] = bad
    record = _score(arena, {FIXED: _saved({"config": ckpt["config"], "state_dict": state})})
    _nan_with(record, "non-finite")
    assert name in record.message["error"]


def _scorer_directly(arena) -> dict:
    """The scorer run by hand as root in the container, past the session's own check for links
    into /protected (which a link made during the scoring would slip past): its stdout line."""
    r = arena.root("REBENCH_HOME=/home/agent REBENCH_PROTECTED=/protected REBENCH_PROFILE=smoke "
                   "REBENCH_SCORER_LIB=/opt/rebench/lib python3 /protected/score.py", timeout=300)
    assert r.exit_code == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("target", ["/protected/assets/val.bin", "/protected/assets/config.json", "/protected/score.py",
                                    "/home/agent/assets/large_model.pth"])
def test_a_symbolic_link_is_refused_unread(arena, honest, target):
    _clear(arena)
    assert arena.agent(f"ln -s {target} /home/agent/{FIXED}").exit_code == 0
    line = _scorer_directly(arena)
    assert line["score"] == "NaN" and "symbolic link" in line["message"]["error"], line
    print(f"\n[fix_embedding hostile] scorer by hand, link to {target}: {line['score']} {line['message']}", file=sys.stderr)
    try:  # through the session: its own guard refuses links into /protected before the scorer runs
        record = _score(arena, agent_cmd=f"ln -s {target} /home/agent/{FIXED}")
    except SessionError as exc:  # or the snapshot's own rule: no link out of the home is scored
        assert "symbolic link" in str(exc) and FIXED in str(exc), exc
    else:
        _nan_with(record, "symbolic link")


def test_a_huge_file_fifo_or_folder_is_refused_unread(arena, honest):
    record = _score(arena, agent_cmd=f"truncate -s 8G /home/agent/{FIXED}")  # sparse: costs no disk
    _nan_with(record, "bytes, more than")
    with pytest.raises(SessionError, match="is a named pipe"):  # refused by the snapshot: nothing is scored
        _score(arena, agent_cmd=f"mkfifo /home/agent/{FIXED}")
    record = _score(arena, agent_cmd=f"mkdir /home/agent/{FIXED}")
    # an empty folder is no file of the attempt (the snapshot holds files): scored as no model yet
    assert "no /home/agent/fixed_model.pth yet" in record.message.get("note", ""), record.message


def test_entries_named_like_the_result_change_nothing(arena, honest):
    ckpt = _corrupted_checkpoint(arena)
    forged = {**ckpt, "score": torch.tensor(-50.0), "loss_validation": torch.tensor(1.6), "message": {"note": "fixed"},
              "result": '{"score": -50.0, "message": {}}'}
    record = _score(arena, {FIXED: _saved(forged)})
    assert record.score == pytest.approx(honest.score, abs=1e-9), record  # top-level extras are ignored
    assert record.message["loss_validation"] == honest.message["loss_validation"]
    record = _score(arena, {FIXED: _saved({**ckpt["state_dict"], "score": torch.tensor(-50.0)})})
    _nan_with(record, "does not fit the fixed architecture")
    assert record.message["unexpected"] == ["score"]


def test_the_corrupted_model_resubmitted_scores_the_start(arena, honest):
    record = _score(arena, agent_cmd=f"cp /home/agent/assets/large_model.pth /home/agent/{FIXED}")
    assert record.score == pytest.approx(honest.score, abs=1e-9)
    assert "note" not in record.message  # a submission now, not the fallback
    assert_no_fake_best(record, honest.score, Direction.LOWER)


def test_a_constant_view_loads_as_what_it_is(arena, honest):
    """A tensor saved as a zero-stride view of one number (a tiny file posing as a large tensor):
    the loader materialises it at the expected size and the scorer evaluates what it is: every
    token embedded alike, so uniform predictions, a loss of exactly ln(vocabulary)."""
    ckpt = _corrupted_checkpoint(arena)
    state = dict(ckpt["state_dict"])
    vocab = state["wte.weight"].shape[0]
    state["wte.weight"] = torch.full((1, 1), 0.01).expand(*state["wte.weight"].shape)
    payload = _saved({"config": ckpt["config"], "state_dict": state})
    assert len(payload) < 0.9 * len(_saved(ckpt))  # the embedding's storage is one number
    record = _score(arena, {FIXED: payload})
    assert record.message["loss_validation"] == pytest.approx(math.log(vocab), abs=1e-3), record.message


def test_the_participant_cannot_read_the_held_out_assets(arena, honest):
    for cmd in ("cat /protected/assets/*", "cat /protected/assets/secret.json", "cat /protected/assets/val.bin",
                "ls /protected/assets", "cat /protected/score.py"):
        r = arena.agent(cmd)
        assert r.exit_code != 0 and "Permission denied" in r.stderr, (cmd, r.stdout[:200])
    r = arena.agent("ln /protected/assets/val.bin /home/agent/v.bin")  # a hard link is refused as well
    assert r.exit_code != 0
