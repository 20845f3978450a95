"""The hosts file: validation with every problem named, labels and URLs for --host."""

from __future__ import annotations

import pytest

from rebench_tui.errors import RebenchError
from rebench_tui.hosts import load_hosts, resolve_host


def test_hosts_load_in_file_order(tmp_path):
    f = tmp_path / "hosts.toml"
    f.write_text('[[host]]\nlabel = "b"\nurl = "ssh://me@gpu-b:2222"\n\n[[host]]\nlabel = "a"\nurl = "tcp://10.0.0.1:2375"\nnote = "lab"\n')
    hosts = load_hosts(f)
    assert [h.label for h in hosts] == ["b", "a"] and hosts[1].note == "lab"
    assert resolve_host("a", hosts) == "tcp://10.0.0.1:2375"
    assert resolve_host("ssh://x@y", hosts) == "ssh://x@y"


def test_a_missing_file_means_no_hosts(tmp_path):
    assert load_hosts(tmp_path / "nope.toml") == []


def test_bad_entries_are_all_named(tmp_path):
    f = tmp_path / "hosts.toml"
    f.write_text('[[host]]\nlabel = "a"\nurl = "gpu-a"\n\n[[host]]\nlabel = "a b"\nurl = "ssh://x@y"\nport = 3\n')
    with pytest.raises(RebenchError) as exc:
        load_hosts(f)
    what = exc.value.what
    assert "host.0.url" in what and "ssh://" in what
    assert "host.1.label" in what and "host.1.port" in what


def test_duplicate_labels_and_bad_toml_are_refused(tmp_path):
    f = tmp_path / "hosts.toml"
    f.write_text('[[host]]\nlabel = "a"\nurl = "ssh://x@y"\n[[host]]\nlabel = "a"\nurl = "ssh://x@z"\n')
    with pytest.raises(RebenchError, match="used twice"):
        load_hosts(f)
    f.write_text("[[host]\n")
    with pytest.raises(RebenchError, match="not valid TOML"):
        load_hosts(f)


def test_an_unknown_label_lists_the_known_ones(tmp_path):
    f = tmp_path / "hosts.toml"
    f.write_text('[[host]]\nlabel = "gpu-a"\nurl = "ssh://x@y"\n')
    with pytest.raises(RebenchError) as exc:
        resolve_host("gpu-b", load_hosts(f))
    assert "gpu-a" in exc.value.fix


def test_gpu_settings_are_checked_and_the_local_engine_can_be_listed(tmp_path, monkeypatch):
    from rebench_tui.hosts import host_for_url

    f = tmp_path / "hosts.toml"
    f.write_text('[[host]]\nlabel = "box"\nurl = "unix:///var/run/docker.sock"\ngpu_mode = "devices"\n'
                 'driver_dir = "/usr/local/nvidia/"\nimages = { torch-cuda = "mine/cuda:1" }\n\n'
                 '[[host]]\nlabel = "far"\nurl = "ssh://me@gpu-b"\n')
    box, far = load_hosts(f)
    assert box.gpu_mode == "devices" and box.driver_dir == "/usr/local/nvidia" and box.device_dir == "/dev"
    assert box.images == {"torch-cuda": "mine/cuda:1"} and far.gpu_mode == "auto" and far.images == {}
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    assert host_for_url(None, [box, far]) is box                      # the local socket
    assert host_for_url("unix://var/run/docker.sock", [box, far]) is box
    assert host_for_url("ssh://me@gpu-b/", [box, far]) is far
    assert host_for_url("ssh://me@gpu-c", [box, far]) is None
    f.write_text('[[host]]\nlabel = "x"\nurl = "ssh://a@b"\ngpu_mode = "cdi"\ndriver_dir = "usr/lib"\n')
    with pytest.raises(RebenchError) as exc:
        load_hosts(f)
    assert "host.0.gpu_mode" in exc.value.what and "host.0.driver_dir: Value error, must be an absolute path" in exc.value.what
