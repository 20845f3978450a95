"""Environment assets: model weights, corpora and tables built by an environment's ``prepare.py``.

Assets live in the cache (``<cache>/assets/<env>/<profile>/``), never in the repository. Each
prepared folder holds ``workspace/`` (participant assets, read-only at ``/home/agent/assets``),
``protected/`` (held-out assets, ``/protected/assets``) and ``MANIFEST.json``: how it was made
and the size and sha256 of every file. A folder is only ever renamed into place whole, so a
half-finished run is never mistaken for a ready one; downloads go to a persistent work folder
so an interrupted ``prepare`` resumes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

from .catalog import Environment
from .errors import RebenchError
from .hashing import sha256_file

Mode = Literal["fetch", "synthetic", "from"]
MANIFEST = "MANIFEST.json"
SIDES = ("workspace", "protected")


class AssetProgress:
    """Callbacks for a running prepare: ``bar(done, total, label)`` and ``line(text)``."""

    def __init__(self, bar: Callable[[float, float, str], None] | None = None, line: Callable[[str], None] | None = None) -> None:
        self.bar = bar or (lambda _d, _t, _l: None)
        self.line = line or (lambda _t: None)


@dataclass(frozen=True)
class AssetStatus:
    env_id: str
    profile: str
    folder: Path
    ready: bool
    reason: str = ""
    manifest: dict[str, Any] | None = None

    @property
    def mode(self) -> str | None:
        return None if self.manifest is None else self.manifest.get("mode")

    @property
    def digest(self) -> str | None:
        """sha256 of MANIFEST.json: names this exact set of assets in a session's record."""
        path = self.folder / MANIFEST
        return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _listing(folder: Path) -> dict[str, dict[str, Any]]:
    files = {}
    for side in SIDES:
        base = folder / side
        if not base.exists():
            continue
        for path in sorted(base.rglob("*")):
            if path.is_file() and not path.is_symlink():
                files[path.relative_to(folder).as_posix()] = {"size": path.stat().st_size}
    return files


def prepare_command(env: Environment, profile: str) -> str:
    """The exact command that prepares a profile's assets (smoke: synthetic; gpu: fetched)."""
    return f"rebench-tui prepare {env.id}" + (" --synthetic" if profile == "smoke" else "")


class AssetStore:
    def __init__(self, cache_dir: Path) -> None:
        self.root = cache_dir / "assets"

    def folder(self, env_id: str, profile: str) -> Path:
        return self.root / env_id / profile

    def work_folder(self, env_id: str, profile: str) -> Path:
        """Where a prepare script keeps what it can reuse on its next run (downloads, finished runs)."""
        return self.root / env_id / f".work-{profile}"

    def status(self, env: Environment, profile: str) -> AssetStatus:
        """Quick check: the manifest is there and every file in it exists with its size."""
        folder = self.folder(env.id, profile)
        manifest_path = folder / MANIFEST
        if not manifest_path.is_file():
            return AssetStatus(env.id, profile, folder, False, f"not prepared (no {manifest_path})")
        try:
            manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        except ValueError as exc:
            return AssetStatus(env.id, profile, folder, False, f"{manifest_path} is not valid JSON: {exc}")
        for rel, info in manifest.get("files", {}).items():
            p = folder / rel
            if not p.is_file():
                return AssetStatus(env.id, profile, folder, False, f"{rel} is missing", manifest)
            if p.stat().st_size != info["size"]:
                return AssetStatus(env.id, profile, folder, False, f"{rel} has {p.stat().st_size} bytes, the manifest says {info['size']}", manifest)
        for name, held_out in env.manifest.score.room_assets.items():  # what each scoring room puts in ~/assets
            if not (folder / "protected" / held_out).is_file():
                return AssetStatus(env.id, profile, folder, False, f"protected/{held_out} is missing (the scoring room's "
                                   f"~/assets/{name}): these assets were prepared before it was part of them", manifest)
        return AssetStatus(env.id, profile, folder, True, "", manifest)

    def verify(self, env: Environment, profile: str, progress: AssetProgress | None = None) -> list[str]:
        """Full check: every file's sha256 against the manifest. Returns the problems found."""
        st = self.status(env, profile)
        if st.manifest is None:
            return [st.reason]
        return self._check(st.folder, st.manifest, progress or AssetProgress()) + ([] if st.ready else [st.reason])

    @staticmethod
    def _check(folder: Path, manifest: dict[str, Any], progress: AssetProgress) -> list[str]:
        problems = []
        files = manifest.get("files", {})
        total = sum(info["size"] for info in files.values()) or 1
        done = 0
        for rel, info in files.items():
            p = folder / rel
            progress.bar(done, total, f"checking {rel}")
            if not p.is_file():
                problems.append(f"{rel}: missing")
            elif sha256_file(p) != info["sha256"]:
                problems.append(f"{rel}: sha256 differs from the manifest (corrupted or changed)")
            done += info["size"]
        progress.bar(total, total, "checked")
        return problems

    def require(self, env: Environment, profile: str) -> AssetStatus | None:
        """The ready assets of an environment that declares them; raises naming the command if missing."""
        if env.manifest.assets is None:
            return None
        st = self.status(env, profile)
        if not st.ready:
            raise RebenchError(
                f"the assets of {env.id} for the {profile} profile are not ready: {st.reason}",
                kept="nothing was started",
                fix=f"run `{prepare_command(env, profile)}` (see `rebench-tui prepare --help` for --from DIR on offline machines)",
            )
        return st

    # -- building -------------------------------------------------------------------------
    def prepare(self, env: Environment, profile: str, mode: Mode, *, source: Path | None = None, force: bool = False,
                progress: AssetProgress | None = None, python: str | None = None) -> AssetStatus:
        progress = progress or AssetProgress()
        if env.manifest.assets is None:
            raise RebenchError(f"{env.id} has no assets to prepare", fix="start it directly")
        if profile not in env.profile_names:
            raise RebenchError(f"{env.id} has no profile {profile!r}", fix=f"use one of {env.profile_names}")
        st = self.status(env, profile)
        if st.ready and not force:
            progress.line(f"{env.id} ({profile}): already prepared ({st.mode}) in {st.folder}; nothing to do (--force rebuilds)")
            return st
        folder = st.folder
        folder.parent.mkdir(parents=True, exist_ok=True)
        partial = folder.with_name(f".{profile}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        started = time.time()
        if mode == "from" and source is not None and (source / MANIFEST).is_file():
            manifest = self._import(env, profile, source, partial, progress)
        else:
            if mode == "from" and source is None:
                raise RebenchError("--from needs a folder", fix="pass --from DIR")
            self._run_script(env, profile, mode, source, partial, progress, python or sys.executable)
            manifest = self._manifest(env, profile, mode, partial, progress, source)
        manifest["seconds"] = round(time.time() - started, 1)
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(partial, folder)
        progress.line(f"{env.id} ({profile}): ready in {folder} ({len(manifest['files'])} files, {manifest['seconds']} s)")
        return self.status(env, profile)

    def _run_script(self, env: Environment, profile: str, mode: Mode, source: Path | None, out: Path,
                    progress: AssetProgress, python: str) -> None:
        script = env.path / env.manifest.assets.prepare  # type: ignore[union-attr]
        work = self.work_folder(env.id, profile)
        work.mkdir(parents=True, exist_ok=True)
        for side in SIDES:
            (out / side).mkdir(exist_ok=True)
        cmd = [python, str(script), "--profile", profile, "--mode", mode, "--out", str(out), "--work", str(work)]
        if source is not None:
            cmd += ["--source", str(source)]
        progress.line(f"{env.id} ({profile}): running {script.name} --mode {mode}")
        env_vars = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=env.path, env=env_vars)
        errors: list[str] = []

        def drain_err() -> None:
            assert proc.stderr is not None
            for line in proc.stderr:
                errors.append(line.rstrip())
                del errors[:-40]
                progress.line(line.rstrip())

        import threading

        t = threading.Thread(target=drain_err, daemon=True)
        t.start()
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            if line.startswith("PROGRESS "):
                parts = line.split(" ", 3)
                try:
                    progress.bar(float(parts[1]), float(parts[2]), parts[3] if len(parts) > 3 else "")
                    continue
                except (ValueError, IndexError):
                    pass
            progress.line(line)
        code = proc.wait()
        t.join()
        if code != 0:
            raise RebenchError(
                f"preparing {env.id} ({profile}, --mode {mode}) failed with exit status {code}:\n" + "\n".join(errors[-15:]),
                kept=f"downloads and intermediate files in {work} (a rerun resumes from them); nothing replaced the ready assets",
                fix="read the message above; rerun the same command once it is fixed",
            )

    def _manifest(self, env: Environment, profile: str, mode: str, folder: Path, progress: AssetProgress,
                  source: Path | None) -> dict[str, Any]:
        files = _listing(folder)
        if not files:
            raise RebenchError(f"{env.id}'s prepare.py wrote no files into workspace/ or protected/",
                               fix=f"check {env.path / 'prepare.py'}")
        total = sum(f["size"] for f in files.values()) or 1
        done = 0
        for rel, info in files.items():
            progress.bar(done, total, f"checksums: {rel}")
            info["sha256"] = sha256_file(folder / rel)
            done += info["size"]
        progress.bar(total, total, "checksums done")
        script = env.path / env.manifest.assets.prepare  # type: ignore[union-attr]
        return {
            "env": env.id, "profile": profile, "mode": mode, "source": None if source is None else str(source),
            "env_version": env.manifest.version, "prepare_sha256": sha256_file(script),
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": files,
        }

    def _import(self, env: Environment, profile: str, source: Path, out: Path, progress: AssetProgress) -> dict[str, Any]:
        manifest = json.loads((source / MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("env") != env.id or manifest.get("profile") != profile:
            raise RebenchError(
                f"{source} holds assets of {manifest.get('env')!r} ({manifest.get('profile')!r}), not {env.id!r} ({profile!r})",
                fix="pass the folder prepared for this environment and profile (or --profile to match it)")
        bad = [rel for rel in manifest.get("files", {}) if rel.startswith("/") or ".." in Path(rel).parts
               or Path(rel).parts[0] not in SIDES]
        if bad:
            raise RebenchError(f"{source / MANIFEST} names files outside workspace/ and protected/: {bad[:5]}",
                               fix="use a folder written by `rebench-tui prepare`")
        progress.line(f"{env.id} ({profile}): checking {len(manifest['files'])} files in {source} against their checksums")
        problems = self._check(source, manifest, progress)
        if problems:
            raise RebenchError(f"{source} does not match its manifest:\n  " + "\n  ".join(problems[:20]),
                               kept="the cache is unchanged", fix="copy the folder again (it is incomplete or corrupted)")
        for rel in manifest["files"]:
            dest = out / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / rel, dest)  # a copy: later edits of the source cannot reach the cache
        manifest = {**manifest, "imported_from": str(source), "mode": manifest.get("mode", "from")}
        return manifest
