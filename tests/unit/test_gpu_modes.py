"""How containers get GPUs: the mode each host gets and why, what a look at the host finds, and
GPU claims read back from containers in both modes (toolkit device requests, device nodes)."""

from __future__ import annotations

from types import SimpleNamespace

from rebench_tui.runtime.gpus import (NVIDIA_ROOT, HostView, claims, decide, held_by, parse_ldconfig, parse_look,
                                      parse_nvidia_smi, with_claims)

# `ldconfig -p` lines as the real tool prints them (format checked against this machine's own cache)
LDCONFIG = """\
1203 libs found in cache `/run/rebench-host/etc/ld.so.cache'
\tlibnvidia-ml.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-ml.so.1
\tlibnvidia-ml.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-ml.so
\tlibcuda.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so.1
\tlibcuda.so.1 (libc6) => /lib/i386-linux-gnu/libcuda.so.1
\tlibcuda.so (libc6,x86-64) => /lib/x86_64-linux-gnu/libcuda.so
\tlibnvidia-ptxjitcompiler.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1
\tlibnvidia-gpucomp.so.580.159.04 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-gpucomp.so.580.159.04
\tlibnvidia-egl-wayland.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnvidia-egl-wayland.so.1
\tlibz.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libz.so.1
"""

NODES = "node nvidia0\nnode nvidiactl\nnode nvidia-uvm\nnode nvidia-uvm-tools\n"


def look(text: str) -> HostView:
    return parse_look(text)


def test_ldconfig_lines_give_the_drivers_64_bit_sonames_only():
    libs = dict(parse_ldconfig(LDCONFIG.splitlines()))
    assert libs == {"libcuda.so.1": "/lib/x86_64-linux-gnu/libcuda.so.1",
                    "libnvidia-ml.so.1": "/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                    "libnvidia-ptxjitcompiler.so.1": "/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1",
                    "libnvidia-gpucomp.so.580.159.04": "/lib/x86_64-linux-gnu/libnvidia-gpucomp.so.580.159.04"}


def test_the_engines_toolkit_wins_in_auto_and_needs_no_look():
    s = decide("auto", True, None)
    assert s.mode == "toolkit" and s.usable and "nvidia runtime" in s.why


def test_auto_without_toolkit_passes_device_nodes_with_the_driver_dir():
    v = look(NODES + "driver_dir\ndriver_sub lib64\ndriver_sub bin\ndriver_libcuda lib64\ndriver_smi\n")
    s = decide("auto", False, v, driver_dir="/usr/local/nvidia", source="h200")
    assert s.mode == "devices" and s.usable
    assert "no nvidia runtime" in s.why and "/dev/nvidia0, /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools" in s.why
    assert "/usr/local/nvidia (mounted read-only" in s.why
    d = s.devices
    assert d.minors == (0,) and d.mounts == (("/usr/local/nvidia", NVIDIA_ROOT),) and d.has_smi
    assert d.devices([0]) == ["/dev/nvidia0:/dev/nvidia0:rwm", "/dev/nvidiactl:/dev/nvidiactl:rwm",
                              "/dev/nvidia-uvm:/dev/nvidia-uvm:rwm", "/dev/nvidia-uvm-tools:/dev/nvidia-uvm-tools:rwm"]


def test_without_driver_dir_the_libraries_come_one_by_one_from_ldconfig():
    ld = "".join(f"ld {line}\n" for line in LDCONFIG.splitlines())
    v = look(NODES + "node nvidia1\n" + ld + "tool nvidia-smi /usr/bin/nvidia-smi\n")
    s = decide("auto", False, v)
    assert s.mode == "devices" and s.devices.minors == (0, 1)
    mounts = dict((dst, src) for src, dst in s.devices.mounts)
    assert mounts[f"{NVIDIA_ROOT}/lib64/libcuda.so.1"] == "/lib/x86_64-linux-gnu/libcuda.so.1"
    assert mounts[f"{NVIDIA_ROOT}/bin/nvidia-smi"] == "/usr/bin/nvidia-smi"
    assert f"{NVIDIA_ROOT}/lib64/libz.so.1" not in mounts
    assert "4 libraries found with the host's `ldconfig -p`" in s.why
    # only the GPUs asked for get their own node; the shared ones always come
    assert s.devices.devices([1])[0] == "/dev/nvidia1:/dev/nvidia1:rwm" and len(s.devices.devices([1])) == 4


def test_what_is_missing_is_named_and_the_mode_follows_the_setting():
    bare = look("")
    auto = decide("auto", False, bare)
    assert auto.mode == "none" and not auto.usable and "no NVIDIA device nodes in /dev" in auto.why
    assert "nvidia-ctk" in auto.fix
    forced = decide("devices", False, bare, source="gpu-a")
    assert forced.mode == "devices" and not forced.usable
    assert "no /dev/nvidiaN device node" in forced.problem and "no libcuda.so.1" in forced.problem
    assert "hosts.toml: gpu-a" in forced.why
    nodes_no_driver = decide("auto", False, look(NODES))
    assert nodes_no_driver.mode == "none" and "device nodes but" in nodes_no_driver.why
    assert 'gpu_mode = "devices"' in nodes_no_driver.fix
    wrong_dir = decide("devices", False, look(NODES), driver_dir="/opt/nvidia")
    assert wrong_dir.problem == "driver_dir /opt/nvidia does not exist on the host"
    no_uvm = decide("devices", False, look("node nvidia0\nnode nvidiactl\ndriver_dir\ndriver_libcuda lib64\n"), driver_dir="/d")
    assert no_uvm.problem == "no /dev/nvidia-uvm" and "nvidia-modprobe" in no_uvm.fix


def test_toolkit_forced_without_the_runtime_and_none_forced():
    s = decide("toolkit", False, None, source="gpu-a")
    assert s.mode == "toolkit" and not s.usable and "no nvidia runtime" in s.problem and 'gpu_mode = "devices"' in s.fix
    assert decide("none", True, None).mode == "none"


def test_a_failed_look_is_said_not_guessed():
    s = decide("auto", False, HostView(error="the base image rebench/base:bookworm is not built on this engine yet"))
    assert s.mode == "none" and "could not look at the host's devices" in s.why and "images build base" in s.fix


SMI6 = """0, GPU-aaaa, NVIDIA H200, 143771, 4, 2
1, GPU-bbbb, NVIDIA H200, 143771, 0, [N/A]
"""


def test_claims_read_the_same_from_both_modes():
    toolkit = SimpleNamespace(name="rebench-a", attrs={"HostConfig": {"DeviceRequests": [
        {"Count": 0, "DeviceIDs": ["GPU-bbbb"], "Capabilities": [["gpu"]]}]}})
    devices = SimpleNamespace(name="rebench-b", attrs={"HostConfig": {"Devices": [
        {"PathOnHost": "/dev/nvidia2", "PathInContainer": "/dev/nvidia2", "CgroupPermissions": "rwm"},
        {"PathOnHost": "/dev/nvidiactl", "PathInContainer": "/dev/nvidiactl", "CgroupPermissions": "rwm"}]}})
    gpus = with_claims(parse_nvidia_smi(SMI6), claims([toolkit, devices]))
    assert [g.minor for g in gpus] == [2, None] and gpus[1].node == 1
    assert gpus[0].claimed_by == "rebench-b"       # index 0 is the GPU with minor number 2: /dev/nvidia2
    assert gpus[1].claimed_by == "rebench-a"
    assert held_by(devices.attrs) == ("devices", ["/dev/nvidia2"])
    assert held_by(toolkit.attrs) == ("toolkit", ["GPU-bbbb"])
    assert held_by({"HostConfig": {}}) == (None, [])
