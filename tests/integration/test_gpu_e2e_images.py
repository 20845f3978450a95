"""The GPU machine's path, minus the GPU: images with no /tmp, and scripts/gpu-e2e's image steps.

A GPU machine's root filesystem imported as an image (scripts/gpu-e2e does this where no registry
can be reached) comes without /tmp, and so can a user's own GPU image. Every scoring once died of
it in a tenth of a second. Here an image is made without /tmp from the CPU image, and (1) the
command supervisor runs a root command in it, as a scoring does, and (2) scripts/gpu-e2e builds
its images on it (``E2E_ROOT_IMAGE``, ``E2E_ONLY=images``), so the script cannot rot unseen on a
machine without a GPU.
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from rebench_tui.runtime.base import SUPERVISOR
from rebench_tui.runtime.supervision import supervisor_argv
from tests.conftest import ROOT

pytestmark = pytest.mark.docker

NO_TMP = "rebench-test/no-tmp:latest"


@pytest.fixture(scope="module")
def no_tmp_image(docker_client):
    """A machine's root as an image: python3 with torch and triton, no /tmp, no participant account
    (rebench/torch-cpu with /tmp, the agent account and the protected group taken out)."""
    from rebench_tui.config import Settings
    from rebench_tui.runtime.docker_runtime import DockerRuntime

    rt = DockerRuntime(docker_client, None, Settings(root=ROOT).images, Settings(root=ROOT).cache_dir)
    base = rt.builder(lambda _m: None).ensure("torch-cpu")
    dockerfile = (f"FROM {base}\nWORKDIR /\n"
                  "RUN userdel -r agent && groupdel protected && rm -rf /tmp /protected && ! test -e /tmp\n").encode()
    docker_client.images.build(fileobj=io.BytesIO(dockerfile), tag=NO_TMP, rm=True)
    yield NO_TMP
    for tag in (NO_TMP, "rebench-device/base:latest", "rebench-device/prepared:latest", "rebench-device/root:latest"):
        try:
            docker_client.images.remove(tag, force=True)
        except Exception:  # noqa: BLE001 - gone already, or still used by a container another test left
            pass


def test_a_root_command_runs_under_the_supervisor_in_an_image_without_tmp(docker_client, no_tmp_image):
    argv = supervisor_argv("python3", "/opt/sup/supervise.py", "tok", ["python3", "-c", "import os; print(os.environ['TMPDIR'])"],
                           user="root", workdir="/", timeout=60, state_dir="/root/state")
    script = "mkdir -p /root/state && chmod 700 /root/state && exec " + shlex.join(argv)
    out = docker_client.containers.run(no_tmp_image, ["sh", "-c", script], remove=True, network_mode="none", user="root",
                                       volumes={str(Path(SUPERVISOR).parent): {"bind": "/opt/sup", "mode": "ro"}},
                                       stderr=True)
    text = out.decode(errors="replace")
    tmpdir = next((line for line in text.splitlines() if "rebench-root-" in line and not line.startswith("\x1e")), "")
    # a private folder in the first of /tmp, /var/tmp, /dev/shm there is (the old code died looking for /tmp)
    assert tmpdir.startswith(("/var/tmp/rebench-root-", "/dev/shm/rebench-root-")), text
    assert '"returncode": 0' in text, text


@pytest.mark.slow
def test_gpu_e2e_builds_its_images_on_a_root_without_tmp(no_tmp_image, tmp_path):
    env = {**os.environ, "E2E_ROOT_IMAGE": no_tmp_image, "E2E_ONLY": "images", "PY": sys.executable,
           "OUT": str(tmp_path / "out"), "E2E_WORK": str(tmp_path / "work"), "XDG_CACHE_HOME_E2E": str(tmp_path / "cache")}
    p = subprocess.run(["bash", str(ROOT / "scripts" / "gpu-e2e"), "triton_cumsum"], env=env, capture_output=True,
                       text=True, timeout=600, cwd=ROOT)
    log = (tmp_path / "out" / "gpu-e2e.log").read_text()
    assert p.returncode == 0, log[-3000:]
    assert "using rebench-test/no-tmp:latest as the machine's root" in log
    assert "as agent: torch" in log and "app imports ok" in log and log.rstrip().endswith("PASSED"), log[-2000:]
