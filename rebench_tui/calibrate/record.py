"""The calibration file's record: the medians with each run's raw score, and the host's facts
(hostname, runtime, CPUs, GPUs, image, packages, scorer digest, assets, rebench-tui version, git
commit) that say where and with what they were measured; and the file a new one replaces."""

from __future__ import annotations

import platform
import socket
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import __version__
from ..catalog import Environment, Profile
from ..catalog.calibration import Calibration, SolutionRuns
from ..errors import RebenchError
from ..runtime import Runtime


def _git(root: Path, env: Environment) -> dict[str, Any]:
    def run(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    commit = run("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "note": "not a git checkout"}
    changed = run("status", "--porcelain", "--", str(env.path))
    return {"commit": commit, "environment_changed": bool(changed), "changes": (changed or "").splitlines()[:20]}


def _host(runtime: Runtime, session, facts: dict[str, Any], prof: Profile, desc: dict[str, Any], participant_uid: int | None,
          started_wall: float) -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "runtime": runtime.kind,
            "engine": runtime.host, "isolated": session.sandbox.isolated, "cpus": facts.get("cpus"),
            "cpu": facts.get("cpu"), "python": facts.get("python"), "profile_gpus": prof.gpus,
            "container": desc.get("container"), "participant_uid": participant_uid,
            "started": datetime.fromtimestamp(started_wall, timezone.utc).isoformat(timespec="seconds"),
            **({"probe_error": facts["probe_error"]} if "probe_error" in facts else {})}


def calibration_record(env: Environment, profile: str, prof: Profile, runtime: Runtime, session, *, runs: int,
                        start: SolutionRuns, reference: SolutionRuns, facts: dict[str, Any], image_id: str | None,
                        details: dict[str, Any], participant_uid: int | None, started_wall: float, started: float,
                        project_root: Path) -> Calibration:
    desc = session.sandbox.describe()
    image = None
    if session.meta.image is not None:
        image = {"tag": session.meta.image, "id": image_id, "base_image": prof.base_image}
    assets = session.meta.metadata.get("assets")
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    duration_s = round(time.monotonic() - started, 1)
    return Calibration(
        env_id=env.id, profile=profile, env_version=env.manifest.version, task_id=env.manifest.task_id,
        direction=env.manifest.score.direction.value, runs=runs, start=start, reference=reference,
        date=date, duration_s=duration_s, host=_host(runtime, session, facts, prof, desc, participant_uid, started_wall),
        gpus=list(facts.get("gpus") or []), image=image, packages=dict(facts.get("packages") or {}),
        scorer_reported=details, scorer_sha256=env.scorer_sha256,
        scorer_sha256_reported=details.get("scorer_sha256"), assets=assets, rebench_tui=__version__,
        git=_git(project_root, env),
        manifest={"start": prof.start_score, "reference": prof.reference_score, "anchors": prof.anchors},
        session=str(session.folder),
    )


def previous_calibration(path: Path) -> Calibration | None:
    """The calibration file ``path`` holds now, if it is there and readable."""
    if not path.is_file():
        return None
    try:
        from ..catalog.calibration import load_calibration

        return load_calibration(path)
    except RebenchError:
        return None
