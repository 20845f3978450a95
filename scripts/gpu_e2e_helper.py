"""The Python side of scripts/gpu-e2e (kept here so the shell script holds no embedded programs).

    python scripts/gpu_e2e_helper.py needs ENV            # "<gpus> <has assets> <has stand-ins> <secrets>"
    python scripts/gpu_e2e_helper.py prep-dockerfile      # the Dockerfile over the imported machine root
    python scripts/gpu_e2e_helper.py hosts-file LABEL     # hosts.toml for this machine's engine
    python scripts/gpu_e2e_helper.py smi-in-container     # nvidia-smi -L in a devices-mode container
    python scripts/gpu_e2e_helper.py summary OUT ENV...   # the drivers' JSON summaries as one

Run from the repository root (the checkout is imported from there).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# The imported root's own uid/gid 1000 (Ubuntu's `ubuntu`) would clash with images/base's agent;
# the system python3 finds the PyTorch venv's packages through a .pth file where there is one. A
# root taken without /tmp gets one (1777) as every program expects; the app copes without it too
# (the scorer's supervisor and the container's set-up make it), which its own tests check.
PREP_DOCKERFILE = """\
FROM rebench-device/root:latest
RUN set -e; cd /; [ -d /tmp ] || { mkdir -p /tmp; chmod 1777 /tmp; }; \\
    u=$(getent passwd 1000 | cut -d: -f1); if [ -n "$u" ]; then userdel -r "$u" 2>/dev/null || userdel "$u"; fi; \\
    g=$(getent group 1000 | cut -d: -f1); if [ -n "$g" ]; then groupdel "$g"; fi; \\
    sp=$(ls -d /opt/torch/.venv/lib/python3*/site-packages 2>/dev/null | head -1); \\
    if [ -n "$sp" ]; then d=$(python3 -c 'import site; print(site.getsitepackages()[0])'); \\
      mkdir -p "$d"; echo "$sp" > "$d/zz-device-torch.pth"; fi; \\
    python3 -c 'import torch, triton, numpy; print("system python3 sees torch", torch.__version__, "triton", triton.__version__)'
"""

HOSTS_FILE = """\
[[host]]
label = "{label}"
url = "unix:///var/run/docker.sock"
note = "a GPU machine without the NVIDIA container toolkit: GPUs go in as device nodes"
driver_dir = "/usr/local/nvidia"
images = {{ base = "rebench-device/base:latest", torch-cuda = "rebench-device/base:latest" }}
"""


def needs(env_id: str) -> str:
    from rebench_tui import workstation
    from rebench_tui.config import Settings

    env = workstation.catalog(Settings()).get(env_id)
    p = env.profile("gpu")
    return f"{p.gpus} {int(env.manifest.assets is not None)} {int(p.standins is not None)} {','.join(p.secrets) or '-'}"


def smi_in_container() -> int:
    from rebench_tui import workstation
    from rebench_tui.config import Settings

    rt = workstation.connect_docker(Settings())
    sup = rt.gpu_support()
    print(f"  mode {sup.mode}: {sup.why}")
    if sup.devices is None:
        print(f"  no devices mode here: {sup.problem or sup.fix}")
        return 1
    kw = sup.devices.container_kwargs(sup.devices.minors)
    out = rt.client.containers.run(rt.image_tag("base"), ["sh", "-c", "nvidia-smi -L"], remove=True, network_mode="none",
                                   devices=kw["devices"], mounts=kw["mounts"], environment=kw["environment"])
    print("  nvidia-smi -L in a container, driver as found:", out.decode(errors="replace").strip())
    inventory = rt.gpu_inventory()
    print("  inventory:", [(g.index, g.name, g.minor, g.free) for g in inventory], rt.inventory_error or "")
    return 0 if inventory and all(g.minor is not None for g in inventory) else 1


def summary(out: Path, envs: list[str]) -> str:
    found = {}
    for e in envs:
        files = sorted(out.glob(f"{e}/{e}-*-e2e.json"))
        found[e] = json.loads(files[-1].read_text()) if files else None
    return json.dumps(found, indent=1, default=str)


def main(argv: list[str]) -> int:
    verb, rest = argv[0], argv[1:]
    if verb == "needs":
        print(needs(rest[0]))
    elif verb == "prep-dockerfile":
        print(PREP_DOCKERFILE, end="")
    elif verb == "hosts-file":
        print(HOSTS_FILE.format(label=rest[0]), end="")
    elif verb == "smi-in-container":
        return smi_in_container()
    elif verb == "summary":
        print(summary(Path(rest[0]), rest[1:]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
