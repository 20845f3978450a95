"""Base images built without a registry, and environment images built on them.

The chain: a Debian root filesystem (mmdebstrap, ``docker import``; the tarball is cached
compressed under the cache folder) -> ``base`` (users and groups) -> images with Python wheels
(downloaded on the host, installed offline) -> one image per environment and profile.

Every built image carries a ``rebench.recipe`` label: a hash of its recipe, its build context
and its parent's id. An image whose label matches is reused; a changed recipe is rebuilt.

A host may provide some of these images itself (hosts.toml ``images``: recipe name -> an image on
its engine, e.g. an offline GPU host's own CUDA image built on ``images/base``): those are used as
they are, never built or checked against a recipe.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import tomllib
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field

from ..errors import RebenchError

ProgressFn = Callable[[str], None]
RECIPE_LABEL = "rebench.recipe"


class RootfsRecipe(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tag: str
    suite: str
    python_version: str
    packages: list[str]


class ImageRecipe(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    tag: str
    from_: str = Field(alias="from")
    context: str
    description: str = ""
    wheels: list[str] = Field(default_factory=list)


class Recipes(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rootfs: RootfsRecipe
    images: dict[str, ImageRecipe]

    @classmethod
    def load(cls, images_dir: Path) -> "Recipes":
        path = images_dir / "images.toml"
        try:
            return cls.model_validate(tomllib.loads(path.read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise RebenchError(f"no image recipes at {path}", fix="run from the project checkout or set REBENCH_ROOT") from None

    @property
    def names(self) -> list[str]:
        return list(self.images)


def _hash_tree(h: "hashlib._Hash", folder: Path, skip: tuple[str, ...] = ()) -> None:
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if any(rel == s or rel.startswith(s + "/") for s in skip) or "__pycache__" in path.parts:
            continue
        h.update(rel.encode() + b"\0")
        if path.is_file():
            h.update(hashlib.sha256(path.read_bytes()).digest())


def context_hash(folder: Path, *extra: str, skip: tuple[str, ...] = ()) -> str:
    h = hashlib.sha256()
    for e in extra:
        h.update(e.encode() + b"\0")
    _hash_tree(h, folder, skip)
    return h.hexdigest()[:16]


def _pip_platforms(arch: str) -> list[str]:
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(arch, arch)
    tags = ["manylinux_2_28", "manylinux_2_27", "manylinux_2_17", "manylinux2014"]
    return [f"{t}_{arch}" for t in tags]


class ImageBuilder:
    """Builds base images and environment images on one Docker engine."""

    def __init__(self, client: Any, images_dir: Path, cache_dir: Path, progress: ProgressFn = lambda _m: None,
                 provided: dict[str, str] | None = None) -> None:
        self.client = client
        self.images_dir = images_dir
        self.cache_dir = cache_dir
        self.recipes = Recipes.load(images_dir)
        self.progress = progress
        self.provided = dict(provided or {})  # recipe name -> the host's own image (hosts.toml `images`)

    # -- lookups --------------------------------------------------------------------------
    def _image(self, tag: str) -> Any | None:
        import docker.errors

        try:
            return self.client.images.get(tag)
        except docker.errors.ImageNotFound:
            return None

    def _current(self, tag: str, recipe_hash: str) -> bool:
        img = self._image(tag)
        return img is not None and (img.labels or {}).get(RECIPE_LABEL) == recipe_hash

    # -- rootfs ---------------------------------------------------------------------------
    def _rootfs_hash(self) -> str:
        r = self.recipes.rootfs
        return hashlib.sha256(json.dumps(r.model_dump(), sort_keys=True).encode()).hexdigest()[:16]

    def ensure_rootfs(self) -> str:
        r = self.recipes.rootfs
        h = self._rootfs_hash()
        if self._current(r.tag, h):
            return r.tag
        cached = self.cache_dir / "images" / f"rootfs-{r.suite}-{h}.tar.zst"
        with tempfile.TemporaryDirectory(prefix="rebench-rootfs-") as tmp:
            tar = Path(tmp) / "rootfs.tar"
            if cached.is_file():
                self.progress(f"rootfs: unpacking the cached root filesystem {cached}")
                subprocess.run(["zstd", "-q", "-d", "-f", str(cached), "-o", str(tar)], check=True)
            else:
                self._mmdebstrap(tar)
                cached.parent.mkdir(parents=True, exist_ok=True)
                self.progress(f"rootfs: caching it compressed at {cached}")
                subprocess.run(["zstd", "-q", "-T0", "-f", str(tar), "-o", str(cached) + ".part"], check=True)
                os.replace(str(cached) + ".part", cached)
            self.progress(f"rootfs: importing as {r.tag}")
            repo, _, tagname = r.tag.partition(":")
            self.client.api.import_image_from_file(str(tar), repository=repo, tag=tagname or "latest",
                                                   changes=[f"LABEL {RECIPE_LABEL}={h}", 'CMD ["bash"]'])
        return r.tag

    def _mmdebstrap(self, out: Path) -> None:
        r = self.recipes.rootfs
        missing = [tool for tool in ("mmdebstrap", "zstd") if shutil.which(tool) is None]
        if missing:
            raise RebenchError(
                f"cannot build the base root filesystem: {', '.join(missing)} not installed",
                fix="on Debian/Ubuntu: `apt-get install -y mmdebstrap zstd` (as root), then run again; "
                    "or load a saved image with `docker load -i FILE`",
            )
        hooks = "/usr/share/mmdebstrap/hooks/merged-usr"
        cmd = ["mmdebstrap", "--variant=minbase", f"--include={','.join(r.packages)}",
               "--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
               "--dpkgopt=path-exclude=/usr/share/locale/*", "--dpkgopt=path-include=/usr/share/locale/locale.alias"]
        if Path(hooks).is_dir():
            cmd.append(f"--hook-dir={hooks}")
        cmd += [r.suite, str(out)]
        self.progress(f"rootfs: building Debian {r.suite} with mmdebstrap (about 40 s)")
        code, tail = self._stream(cmd, "rootfs", lambda line: line[3:] if line.startswith("I: ") else None)
        if code != 0:
            raise RebenchError("mmdebstrap failed:\n" + "\n".join(tail), fix="check apt's sources and that you are root")

    def _stream(self, cmd: list[str], label: str, show: Callable[[str], str | None]) -> tuple[int, list[str]]:
        """Run a command, passing the lines ``show`` keeps to progress; returns (exit code, last lines)."""
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        tail: list[str] = []
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            tail = (tail + [line])[-20:]
            shown = show(line)
            if shown is not None:
                self.progress(f"{label}: {shown}")
        return proc.wait(), tail

    # -- wheels ---------------------------------------------------------------------------
    def _download_wheels(self, name: str, recipe: ImageRecipe) -> Path:
        key = hashlib.sha256(json.dumps([recipe.wheels, self.recipes.rootfs.python_version, platform.machine()]).encode()).hexdigest()[:16]
        folder = self.cache_dir / "wheels" / f"{name}-{key}"
        done = folder / ".complete"
        if done.is_file():
            return folder
        folder.mkdir(parents=True, exist_ok=True)
        arch = (self.client.info() or {}).get("Architecture", platform.machine())
        cmd = ["python3" if shutil.which("python3") else "python", "-m", "pip", "download", "--only-binary=:all:",
               "--python-version", self.recipes.rootfs.python_version, "--implementation", "cp", "-d", str(folder)]
        for p in _pip_platforms(arch):
            cmd += ["--platform", p]
        cmd += recipe.wheels
        self.progress(f"{name}: downloading wheels {' '.join(recipe.wheels)} into {folder}")
        shown = ("Collecting", "Saved", "Downloading", "File was already")
        code, tail = self._stream(cmd, name, lambda line: line if line.startswith(shown) else None)
        if code != 0:
            raise RebenchError(f"downloading wheels for {name} failed:\n" + "\n".join(tail[-15:]),
                               kept=f"partial downloads in {folder} (pip resumes from them)",
                               fix="check network access to PyPI (pip config, proxies), then run again")
        done.write_text("\n".join(sorted(p.name for p in folder.glob("*.whl"))))
        return folder

    # -- build ----------------------------------------------------------------------------
    def ensure(self, name: str) -> str:
        """Build the named base image (and what it needs) unless an up-to-date one exists; a
        host-provided image is used as it is."""
        if name in self.provided:
            tag = self.provided[name]
            if self._image(tag) is None:
                raise RebenchError(f"hosts.toml says this host provides base image {name!r} as {tag}, but its engine has no such image",
                                   fix=f"build or load {tag} on that engine (on images/base: user agent, group protected), "
                                       f"or remove `{name}` from the host's `images` to build the recipe")
            self.progress(f"{name}: using {tag}, provided by the host (hosts.toml)")
            return tag
        if name == "rootfs":
            return self.ensure_rootfs()
        try:
            recipe = self.recipes.images[name]
        except KeyError:
            raise RebenchError(f"no base image named {name!r}", fix=f"use one of {self.recipes.names} (images/images.toml)") from None
        parent_tag = self.ensure(recipe.from_)
        parent_id = self._image(parent_tag).id
        ctx = self.images_dir / recipe.context
        h = context_hash(ctx, json.dumps(recipe.model_dump(by_alias=True), sort_keys=True), parent_id)
        if self._current(recipe.tag, h):
            return recipe.tag
        with tempfile.TemporaryDirectory(prefix=f"rebench-{name}-") as tmp:
            build_dir = Path(tmp) / "context"
            shutil.copytree(ctx, build_dir)
            if recipe.wheels:
                wheels = self._download_wheels(name, recipe)
                (build_dir / "wheels").mkdir(exist_ok=True)
                for whl in wheels.glob("*.whl"):
                    try:
                        os.link(whl, build_dir / "wheels" / whl.name)
                    except OSError:
                        shutil.copy2(whl, build_dir / "wheels" / whl.name)
            self.build(build_dir, recipe.tag, parent_tag, {RECIPE_LABEL: h}, label=name, source=ctx)
        return recipe.tag

    def build(self, context: Path, tag: str, base: str, labels: dict[str, str], *, label: str, source: Path | None = None) -> None:
        """``docker build`` with the classic builder, streaming its steps as progress."""
        self.progress(f"{label}: building {tag} from {base}")
        tail: list[str] = []
        for chunk in self.client.api.build(path=str(context), tag=tag, buildargs={"BASE_IMAGE": base}, labels=labels,
                                           rm=True, forcerm=True, decode=True, pull=False):
            if "error" in chunk:
                detail = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                raise RebenchError(f"building {tag} failed: {detail.strip()}\n" + "\n".join(tail[-15:]),
                                   fix=f"fix the Dockerfile in {source or context} and start again")
            text = (chunk.get("stream") or chunk.get("status") or "").rstrip()
            for line in filter(None, text.splitlines()):
                tail.append(line)
                self.progress(f"{label}: {line}")
        self.progress(f"{label}: built {tag}")
