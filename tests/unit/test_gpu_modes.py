"""How containers get GPUs: the mode each host gets and why, what a look at the host finds, and
GPU claims read back from containers in both modes (toolkit device requests, device nodes)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from rebench_tui.runtime.gpu_host import HostView, decide, parse_ldconfig, parse_look
from rebench_tui.runtime.gpus import NVIDIA_ROOT, claims, held_by, parse_nvidia_smi, with_claims

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

NVIDIA_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia"
HELP_QUERY_GPU = NVIDIA_FIXTURES / "h200-help-query-gpu.txt"   # `nvidia-smi --help-query-gpu`, driver 580.159.04
SMI_Q = NVIDIA_FIXTURES / "h200-q.txt"                          # `nvidia-smi -q`, the same machine

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


# QUERY_DEVICES's output: the query's rows, then the minor numbers from `nvidia-smi -q`'s lines
SMI6 = """0, GPU-aaaa, NVIDIA H200, 143771, 4
1, GPU-bbbb, NVIDIA H200, 143771, 0
#minor-numbers
GPU 00000000:19:00.0
    GPU UUID                              : GPU-aaaa
    Minor Number                          : 2
GPU 00000000:3B:00.0
    GPU UUID                              : GPU-bbbb
    Minor Number                          : N/A
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


def test_every_field_the_inventory_asks_for_is_one_a_real_driver_knows():
    """A field nvidia-smi does not know fails the whole query (exit 2): checked against the list a
    real driver printed (`nvidia-smi --help-query-gpu`, driver 580 on an H200, kept as a fixture)."""
    from rebench_tui.runtime.gpus import QUERY, QUERY_DEVICES, QUERY_FIELDS, query_fields_known

    known = query_fields_known(HELP_QUERY_GPU.read_text())
    assert {"index", "uuid", "name", "memory.total", "memory.used", "pci.bus_id"} <= known and len(known) > 100
    assert "minor_number" not in known  # the field the old inventory asked for
    asked = [a.split("=", 1)[1] for a in QUERY if a.startswith("--query-gpu=")][0].split(",")
    asked_devices = QUERY_DEVICES[-1].split("--query-gpu=", 1)[1].split()[0].split(",")
    assert asked == asked_devices == list(QUERY_FIELDS)
    assert set(asked) <= known, sorted(set(asked) - known)


def test_minor_numbers_come_from_a_real_drivers_q_output():
    """`nvidia-smi -q` as a real driver printed it (the H200 fixture): its GPU's UUID and minor number."""
    from rebench_tui.runtime.gpus import MINOR_MARK, parse_minor_numbers

    text = SMI_Q.read_text()
    minors = parse_minor_numbers(text)
    uuid = next(line.split(":", 1)[1].strip() for line in text.splitlines() if line.strip().startswith("GPU UUID"))
    assert minors == {uuid: 0}
    rows = f"0, {uuid}, NVIDIA H200, 143771, 0\n{MINOR_MARK}\n" + text
    assert [(g.index, g.minor, g.node) for g in parse_nvidia_smi(rows)] == [(0, 0, 0)]


def test_a_tool_behind_an_absolute_link_is_found_where_the_link_leads_on_the_host(tmp_path):
    """/usr/bin/nvidia-smi -> /usr/local/nvidia/bin/nvidia-smi on the host: the look follows the
    link inside the host's root (not the look container's own /usr/local) and reports the real file."""
    import subprocess

    from rebench_tui.runtime.gpu_host import LOOK_SCRIPT

    root = tmp_path / "host"
    real = root / "usr/local/nvidia/bin/nvidia-smi"
    real.parent.mkdir(parents=True)
    real.write_text("#!/bin/sh\n")
    real.chmod(0o755)
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/bin/nvidia-smi").symlink_to("/usr/local/nvidia/bin/nvidia-smi")
    (root / "dev").mkdir()
    out = subprocess.run(["sh", "-c", LOOK_SCRIPT, "look", "/dev", ""], capture_output=True, text=True,
                         env={"REBENCH_LOOK_ROOT": str(root), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}, check=True).stdout
    assert dict(parse_look(out).tools) == {"nvidia-smi": "/usr/local/nvidia/bin/nvidia-smi"}, out


def test_the_drivers_own_program_wins_over_a_wrapper_script_of_the_same_name(tmp_path):
    """A host whose /usr/bin/nvidia-smi is a wrapper script that finds the real one on its PATH (the
    H200 lent here: inside a container it printed "... leads back to this file: not found", exit
    127): the look reports the ELF program, wherever it comes in the search."""
    import shutil
    import subprocess

    from rebench_tui.runtime.gpu_host import LOOK_SCRIPT

    root = tmp_path / "host"
    (root / "usr/bin").mkdir(parents=True)
    (root / "usr/local/bin").mkdir(parents=True)
    (root / "dev").mkdir()
    wrapper = root / "usr/bin/nvidia-smi"
    wrapper.write_text("#!/bin/sh\nexec nvidia-smi \"$@\"\n")
    wrapper.chmod(0o755)
    shutil.copy("/bin/true", root / "usr/local/bin/nvidia-smi")  # an ELF program stands in for the driver's
    out = subprocess.run(["sh", "-c", LOOK_SCRIPT, "look", "/dev", ""], capture_output=True, text=True,
                         env={"REBENCH_LOOK_ROOT": str(root), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}, check=True).stdout
    assert dict(parse_look(out).tools) == {"nvidia-smi": "/usr/local/bin/nvidia-smi"}, out
    (root / "usr/local/bin/nvidia-smi").unlink()   # only the wrapper: better than nothing, and said as found
    out = subprocess.run(["sh", "-c", LOOK_SCRIPT, "look", "/dev", ""], capture_output=True, text=True,
                         env={"REBENCH_LOOK_ROOT": str(root), "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}, check=True).stdout
    assert dict(parse_look(out).tools) == {"nvidia-smi": "/usr/bin/nvidia-smi"}
