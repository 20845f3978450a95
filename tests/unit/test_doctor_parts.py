"""The pure parts of `doctor` and GPU claiming: nvidia-smi rows, claims, engine time, SSH files."""

from __future__ import annotations

from datetime import datetime, timezone
from types import SimpleNamespace

import paramiko

from rebench_tui.doctor import _parse_engine_time, ssh_findings
from rebench_tui.runtime.gpus import BUSY_MEMORY, claims, parse_nvidia_smi, with_claims

SMI = """0, GPU-1111aaaa-0000-0000-0000-000000000000, NVIDIA H200, 143771, 4
1, GPU-2222bbbb-0000-0000-0000-000000000000, NVIDIA H200, 143771, 60211
2, GPU-3333cccc-0000-0000-0000-000000000000, NVIDIA H200, 143771, 0
"""


def test_nvidia_smi_rows_become_gpus_with_bytes():
    gpus = parse_nvidia_smi(SMI + "garbage line\n")
    assert [g.index for g in gpus] == [0, 1, 2]
    assert gpus[0].memory_total == 143771 * 1024**2
    assert gpus[1].memory_used > BUSY_MEMORY and not gpus[1].free
    assert gpus[0].free and gpus[2].free


def test_a_gpu_held_by_a_running_session_is_not_free():
    running = [SimpleNamespace(name="rebench-abc", attrs={"HostConfig": {"DeviceRequests": [
        {"Count": 0, "DeviceIDs": ["GPU-3333cccc-0000-0000-0000-000000000000"], "Capabilities": [["gpu"]]}]}}),
        SimpleNamespace(name="other", attrs={"HostConfig": {"DeviceRequests": None}})]
    gpus = with_claims(parse_nvidia_smi(SMI), claims(running))
    assert [g.index for g in gpus if g.free] == [0]
    assert gpus[2].busy_reason == "held by rebench-abc"


def test_engine_time_with_nanoseconds_and_zones():
    t = _parse_engine_time("2026-12-02T14:50:01.123456789Z")
    assert t == datetime(2026, 12, 2, 14, 50, 1, 123456, tzinfo=timezone.utc)
    assert _parse_engine_time("2026-12-02T16:50:01.5+02:00").timestamp() == t.replace(microsecond=500000).timestamp()
    assert _parse_engine_time("2026-12-02T14:50:01Z").tzinfo is not None


def test_ssh_checks_name_the_missing_known_host_and_key(tmp_path):
    found = {f.check: f for f in ssh_findings("ssh://me@gpu-7:2222", home=tmp_path)}
    assert found["ssh known_hosts"].status == "fail" and "ssh-keyscan -p 2222 gpu-7" in found["ssh known_hosts"].fix
    assert found["ssh key"].status == "fail" and "ssh-copy-id -p 2222 me@gpu-7" in found["ssh key"].fix


def test_ssh_checks_pass_with_a_known_host_and_a_key(tmp_path, monkeypatch):
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    ssh = tmp_path / ".ssh"
    ssh.mkdir()
    host_key = paramiko.RSAKey.generate(1024)
    (ssh / "known_hosts").write_text(f"[gpu-7]:2222 ssh-rsa {host_key.get_base64()}\n")
    host_key.write_private_key_file(str(ssh / "id_rsa"))
    found = {f.check: f for f in ssh_findings("ssh://me@gpu-7:2222", home=tmp_path)}
    assert found["ssh known_hosts"].status == "ok"
    assert found["ssh key"].status == "ok" and "id_rsa" in found["ssh key"].detail
