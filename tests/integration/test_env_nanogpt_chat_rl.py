"""nanogpt_chat_rl in a real container (smoke profile): the stand-in judge and the judge proxy run
as the profile's services with a made-up API key; no model, the base model, a reference trained
as the participant (its judge calls go through the proxy), a broken model; /protected, the key
and the stand-in are out of the participant's reach; the key is nowhere in the session folder."""

from __future__ import annotations

import math
import os
import shutil

import pytest

from rebench_tui.assets import AssetStore
from rebench_tui.config import Settings
from rebench_tui.session import Session
from tests.conftest import ROOT

pytestmark = pytest.mark.docker
REF = ROOT / "environments" / "nanogpt_chat_rl" / "reference"
SECRET = "sk-chatrl-made-up-Vd93kQ7pX"
DIRECT = """
import json, urllib.request, urllib.error
req = urllib.request.Request("http://127.0.0.1:8701/v1/chat/completions", data=b'{"messages": []}',
                             headers={"Content-Type": "application/json"}, method="POST")
try:
    urllib.request.build_opener(urllib.request.ProxyHandler({})).open(req, timeout=10)
    print("status 200")
except urllib.error.HTTPError as e:
    print("status", e.code)
"""


def every_file_bytes(folder):
    for root, _dirs, files in os.walk(folder):
        for name in files:
            with open(os.path.join(root, name), "rb") as fh:
                yield os.path.join(root, name), fh.read()


def test_smoke_in_a_container(catalog, docker_runtime, settings):
    env = catalog.get("nanogpt_chat_rl")
    smoke = env.profile("smoke")
    store = AssetStore(Settings().cache_dir)
    st = store.prepare(env, "smoke", "synthetic")
    if "order_seed" not in (st.folder / "protected" / "heldout.json").read_text():  # prepared by an older prepare.py
        store.prepare(env, "smoke", "synthetic", force=True)
    s = Session.create(env, "smoke", docker_runtime, settings.sessions, asset_store=store,
                       secrets={"JUDGE_API_KEY": SECRET})
    try:
        missing = s.score()
        assert math.isnan(missing.score) and "no model at" in missing.message["error"], missing
        r = s.sandbox.exec(["cp", "-r", "/home/agent/assets/base_model", "/home/agent/finetuned_model"])
        assert r.exit_code == 0, r.stderr
        start = s.score()
        assert abs(start.score - smoke.start_score) < 0.02, start
        assert start.message["win_vs_base"] == 0.5 and "win_vs_sft" in start.message
        # the participant's route: expert iteration with the judge, as agent, through the proxy
        shutil.copy(REF / "train_reference.py", s.workspace / "solution" / "train_reference.py")
        r = s.sandbox.exec(["python3", "train_reference.py"], workdir="/home/agent/solution", timeout=900)
        assert r.exit_code == 0, r.stderr[-2000:]
        ref = s.score()
        assert ref.score > start.score + 0.3, (start, ref)
        assert abs(ref.score - smoke.reference_score) < 0.2, ref  # the held-out split is drawn at prepare time
        (s.workspace / "finetuned_model" / "model.pt").write_bytes(b"\x00 not a checkpoint")
        broken = s.score()
        assert math.isnan(broken.score) and "not a readable checkpoint" in broken.message["error"], broken
        for path in ("/protected/assets/heldout.json", "/protected/assets/tokenizer.json", "/protected/secrets.env"):
            denied = s.sandbox.exec(["cat", path])
            assert denied.exit_code != 0 and "Permission denied" in denied.stderr, path
        env_out = s.sandbox.exec(["env"]).stdout
        assert SECRET not in env_out and "JUDGE_API_KEY" not in env_out and "JUDGE_PROXY_URL" in env_out
        ps = s.sandbox.exec(["sh", "-c", "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'"]).stdout
        assert SECRET not in ps
        direct = s.sandbox.exec(["python3", "-c", DIRECT])
        assert "status 401" in direct.stdout, direct.stdout + direct.stderr  # no way around the proxy
        s.close()
    finally:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)
    hits = [path for path, data in every_file_bytes(s.folder) if SECRET.encode() in data]
    assert hits == [], hits
