"""nanogpt_chat_rl's scorer against hostile models, in a real container (smoke profile).

No participant code runs in this scorer: it reads ~/finetuned_model/model.pt and judges the
answers of the pristine model class through its own private judge. The hostile attempts here are
therefore files and squatters: non-finite weights, wrong shapes, a pickle that runs code, links to
what the participant may not read, a FIFO and an oversized file, and a judge of the participant's
own on the judge proxy's port. Each must end as NaN with a reason, or no better than the honest
base model (the starting score); nothing of the participant's may outlive a scoring, /protected
must be unchanged, and the pickle's code must never run.
"""

from __future__ import annotations

import json
import math
import time

import pytest

from rebench_tui.errors import SessionError
from rebench_tui.scoring import Direction
from tests.conftest import ROOT
from tests.hostile import Arena, assert_no_fake_best, check_aftermath, protected_listing

pytestmark = [pytest.mark.docker]

SECRET = "sk-chatrl-hostile-made-up-Q7w2"
SCORES: dict[str, float | str] = {}
LOAD = "import sys, dataclasses, os\nsys.path.insert(0, '/home/agent/solution')\nimport torch\n" \
       "from model import GPT, GPTConfig, load_model, save_model\nbase = load_model('/home/agent/assets/base_model')\n" \
       "cfg = dataclasses.asdict(base.cfg)\nos.makedirs('/home/agent/finetuned_model', exist_ok=True)\n" \
       "PATH = '/home/agent/finetuned_model/model.pt'\n"
MAKERS = {
    "nan_weights": LOAD + "with torch.no_grad():\n    base.tok.weight[0, 0] = float('nan')\nsave_model(base, '/home/agent/finetuned_model')\n",
    "wrong_shapes": LOAD + "wide = GPT(GPTConfig(**{**cfg, 'n_embd': cfg['n_embd'] * 2}))\n"
                           "torch.save({'config': cfg, 'state_dict': wide.state_dict()}, PATH)\n",
    "wrong_config": LOAD + "torch.save({'config': {**cfg, 'n_layer': cfg['n_layer'] + 1}, 'state_dict': base.state_dict()}, PATH)\n",
    "pickle_code": LOAD + "class Boom:\n    def __reduce__(self):\n"
                          "        return (os.system, ('id > /tmp/pwned_by_pickle; touch /home/agent/pwned_by_pickle',))\n"
                          "torch.save({'config': cfg, 'state_dict': base.state_dict(), 'extra': Boom()}, PATH)\n",
}
FAKE_JUDGE = r'''
import http.server, json, os, sys
open(f"/tmp/squatter.{sys.argv[1]}.pid", "w").write(str(os.getpid()))
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def _answer(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode(errors="replace")
        with open("/tmp/squatter.log", "a") as fh:
            fh.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": body[:2000]}) + "\n")
        data = json.dumps({"choices": [{"message": {"role": "assistant", "content": "A"}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    do_POST = do_GET = _answer
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


@pytest.fixture(scope="module")
def arena(tmp_path_factory, docker_client):
    """tests.hostile.arena_fixture's session, with the made-up judge key the smoke profile requires
    (and assets prepared again if the cached ones predate the prepare-time order seed)."""
    from rebench_tui.assets import AssetStore
    from rebench_tui.catalog import load_catalog
    from rebench_tui.config import Settings
    from rebench_tui.runtime.docker_runtime import DockerRuntime
    from rebench_tui.session import Session
    from tests.conftest import KNOWN_IMAGES

    client = docker_client  # conftest: skips without an engine, fails under REBENCH_REQUIRE_DOCKER=1
    settings = Settings(root=ROOT, sessions_dir=tmp_path_factory.mktemp("hostile-ncr") / "sessions")
    env = load_catalog(ROOT / "environments", KNOWN_IMAGES).get("nanogpt_chat_rl")
    store = AssetStore(Settings().cache_dir)
    st = store.prepare(env, "smoke", "synthetic")
    held = st.folder / "protected" / "heldout.json"
    if "order_seed" not in json.loads(held.read_text()):
        store.prepare(env, "smoke", "synthetic", force=True)
    rt = DockerRuntime(client, None, settings.images, settings.cache_dir, threads=settings.container_threads)
    s = Session.create(env, "smoke", rt, settings.sessions, asset_store=store, secrets={"JUDGE_API_KEY": SECRET})
    try:
        yield Arena(s, env)
    finally:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)


def reset(arena) -> None:
    arena.reset()
    arena.root("rm -rf /home/agent/finetuned_model /home/agent/pwned_by_pickle /tmp/pwned_by_pickle")


def scored(arena, name: str):
    """(record or None, refusal text or None), with the aftermath checked."""
    before = protected_listing(arena)
    try:
        record, refusal = arena.score(), None
    except SessionError as exc:
        record, refusal = None, str(exc)
    SCORES[name] = "refused" if record is None else record.score
    print(f"hostile {name}: " + (f"refused: {refusal.splitlines()[0]}" if record is None else
                                 f"score {record.score} message {record.message}"))
    check_aftermath(arena, before)
    if record is not None:
        assert record.details.get("scorer_matches_catalog") is True, record.details
    return record, refusal


@pytest.fixture(scope="module")
def honest(arena):
    reset(arena)
    r = arena.agent("cp -r /home/agent/assets/base_model /home/agent/finetuned_model")
    assert r.exit_code == 0, r.stderr
    record, _ = scored(arena, "honest (base model)")
    assert math.isfinite(record.score) and record.message["win_vs_base"] == 0.5, record
    return record.score


@pytest.mark.parametrize("name, reason", [("nan_weights", "non-finite"), ("wrong_shapes", "shapes"),
                                          ("wrong_config", "configuration"), ("pickle_code", "not a readable checkpoint")])
def test_hostile_checkpoint_ends_as_nan_with_a_reason(arena, honest, name, reason):
    reset(arena)
    arena.write({"make_model.py": MAKERS[name]})
    r = arena.agent("cd /home/agent && python3 make_model.py", timeout=120)
    assert r.exit_code == 0, r.stderr[-2000:]
    record, refusal = scored(arena, name)
    assert refusal is None
    assert math.isnan(record.score) and reason in record.message["error"], record.message
    if name == "pickle_code":  # the unpickler refused the call: nothing ran, as root or otherwise
        marker = arena.root("ls /tmp/pwned_by_pickle /home/agent/pwned_by_pickle 2>&1 || true").stdout
        assert "No such file" in marker and "pwned_by_pickle\n" not in marker.replace("No such file", ""), marker


def test_a_model_folder_linked_into_protected_is_refused(arena, honest):
    reset(arena)
    assert arena.agent("ln -s /protected/assets /home/agent/finetuned_model").exit_code == 0
    record, refusal = scored(arena, "link_into_protected")
    if record is not None:
        assert math.isnan(record.score) and record.message.get("error"), record.message
    else:
        assert "scoring refused" in refusal
    # a hard link to a held-out file cannot even be made
    r = arena.agent("ln /protected/assets/heldout.json /home/agent/held.json")
    assert r.exit_code != 0


def test_a_link_to_a_file_only_root_may_read_is_read_as_the_participant(arena, honest):
    """Not one of the runtime's guarded paths: the scorer itself must refuse to follow it as root."""
    reset(arena)
    r = arena.root("mkdir -p /opt/rootonly && chmod 700 /opt/rootonly && "
                   "cp /home/agent/assets/base_model/model.pt /opt/rootonly/model.pt && chmod 600 /opt/rootonly/model.pt")
    assert r.exit_code == 0, r.stderr
    assert arena.agent("mkdir -p /home/agent/finetuned_model && "
                       "ln -s /opt/rootonly/model.pt /home/agent/finetuned_model/model.pt").exit_code == 0
    record, refusal = scored(arena, "link_to_root_only_file")
    # the snapshot takes no link out of the home: the scoring is refused, naming it, before anything runs
    assert record is None and "finetuned_model/model.pt is a symbolic link out of your home" in refusal, refusal


@pytest.mark.parametrize("name, make, reason", [
    ("fifo", "mkfifo /home/agent/finetuned_model/model.pt", "not a regular file"),
    ("oversized", "truncate -s 200M /home/agent/finetuned_model/model.pt", "bytes"),
])
def test_special_and_oversized_files_are_refused_before_reading(arena, honest, name, make, reason):
    reset(arena)
    assert arena.agent(f"mkdir -p /home/agent/finetuned_model && {make}").exit_code == 0
    t0 = time.monotonic()
    record, refusal = scored(arena, name)
    if name == "fifo":  # the snapshot takes regular files only: refused, naming it, before anything runs
        assert record is None and "finetuned_model/model.pt is a named pipe" in refusal, refusal
    else:
        assert refusal is None
        assert math.isnan(record.score) and reason in record.message["error"], record.message
    assert time.monotonic() - t0 < 120


def test_a_judge_squatting_the_proxy_port_is_never_asked(arena, honest):
    """The proxy service is down (stopped here; or its port was taken before it started) and the
    participant's own judge, which always answers "A", listens on its port and the stand-in's."""
    reset(arena)
    assert arena.agent("cp -r /home/agent/assets/base_model /home/agent/finetuned_model").exit_code == 0
    r = arena.root("for f in /run/rebench-services/*.pid; do kill $(cat $f); done; sleep 1; "
                   "python3 -c \"import socket; s=socket.socket(); s.bind(('127.0.0.1', 8700)); print('free')\"")
    assert "free" in r.stdout, r.stdout + r.stderr
    arena.write({"squatter.py": FAKE_JUDGE})
    for port in (8700, 8701):  # long-lived, like a participant's tmux job (arena.agent's leftovers are ended)
        arena.session.sandbox.container.exec_run(["python3", "/home/agent/squatter.py", str(port)], user="agent",
                                                 detach=True, workdir="/home/agent")
    time.sleep(3)
    probe = arena.agent("python3 -c \"import urllib.request as u; r=u.build_opener(u.ProxyHandler({})).open("
                        "u.Request('http://127.0.0.1:8700/v1/chat/completions', data=b'{}', method='POST'), timeout=5); "
                        "print(r.read().decode())\"")
    assert '"A"' in probe.stdout, probe.stdout + probe.stderr  # the squatter answers on the proxy's port
    arena.agent("rm -f /tmp/squatter.log")
    before = protected_listing(arena)
    record = arena.score()
    log = arena.agent("cat /tmp/squatter.log 2>/dev/null || true").stdout
    arena.root("for f in /tmp/squatter.*.pid; do kill $(cat $f); done")  # the two squatters, by their ids
    time.sleep(0.5)
    check_aftermath(arena, before)
    SCORES["port_squatter"] = record.score
    print(f"hostile port_squatter: score {record.score} message {record.message}")
    assert log == "", log  # no held-out message, no answer, no token ever reached it
    assert_no_fake_best(record, honest, Direction.HIGHER)
    assert record.score == pytest.approx(honest, abs=1e-9), (record.score, honest)


def test_no_hostile_scoring_of_this_module_beats_honest(arena, honest):
    """Across every scoring the tests above made (refused, NaN, or a number): none above honest."""
    beat = {name: score for name, score in SCORES.items()
            if isinstance(score, float) and math.isfinite(score) and score > honest + 1e-9}
    assert not beat, f"hostile scorings above the honest {honest}: {beat}"
    assert SCORES.get("honest (base model)") == honest, SCORES
    print("nanogpt_chat_rl hostile scores:", SCORES)
