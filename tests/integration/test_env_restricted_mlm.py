"""restricted_mlm in a real container: prepare --synthetic, start score, a forbidden operation, a
broken file, and /protected out of the participant's reach. (Hostile solutions:
test_hostile_restricted_mlm.py. The reference, trained as the participant inside the container and
scored against the manifest's figure, is test_calibrate_smoke.py's: its 400 training steps are the
suite's longest single piece of work, done there once.)"""

from __future__ import annotations

import math

import pytest

from rebench_tui.assets import AssetStore
from rebench_tui.config import Settings
from rebench_tui.session import Session

pytestmark = pytest.mark.docker
SOFTMAX_MODEL = '''
import torch
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(50257, 16)
        self.out = torch.nn.Linear(16, 50257)
    def forward(self, x):
        return torch.softmax(self.out(self.emb(x)), dim=-1)
def get_trained_model():
    return M()
'''


def test_smoke_in_a_container(catalog, docker_runtime, settings):
    env = catalog.get("restricted_mlm")
    store = AssetStore(Settings().cache_dir)
    store.prepare(env, "smoke", "synthetic")
    s = Session.create(env, "smoke", docker_runtime, settings.sessions, asset_store=store)
    sol = s.workspace / "solution"
    try:
        start = s.score()
        assert abs(start.score - env.profile("smoke").start_score) < 0.03, start
        assert "loss" in start.message
        saved = {p.name: p.read_bytes() for p in sol.iterdir() if p.is_file()}
        (sol / "model.py").write_text(SOFTMAX_MODEL)
        forbidden = s.score()
        assert math.isnan(forbidden.score) and "softmax" in forbidden.message["disallowed_operation"]
        assert forbidden.details["participant_uid"] == 1000  # the model ran as the participant, not in the scorer
        (sol / "model.py").write_text("def get_trained_model(:\n")
        broken = s.score()
        assert math.isnan(broken.score) and "error" in broken.message
        for name, data in saved.items():
            (sol / name).write_bytes(data)
        denied = s.sandbox.exec(["cat", "/protected/assets/val.bin"])
        assert denied.exit_code != 0 and "Permission denied" in denied.stderr
    finally:
        s.close()
        s.sandbox.stop(remove=True)
