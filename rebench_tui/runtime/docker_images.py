"""The Docker runtime's images (a mixin of it): the image builder for this engine (with the base
images its host provides itself), each environment's image kept up to date by its recipe's hash,
short probes run in the smallest base image, and the engine's free disk.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from ..catalog import Environment, Profile
from ..hosts import Host
from .base import ProgressFn
from .images import RECIPE_LABEL, ImageBuilder, Recipes, context_hash


class EngineImages:
    """Images and probes for a runtime with a ``client``, ``images_dir``, ``cache_dir`` and ``host_config``."""

    client: Any
    base_url: str | None
    images_dir: Path
    cache_dir: Path
    host_config: Host | None

    @property
    def provided_images(self) -> dict[str, str]:
        """Base images this host provides itself (hosts.toml ``images``), by recipe name."""
        return dict(self.host_config.images) if self.host_config else {}

    def builder(self, progress: ProgressFn) -> ImageBuilder:
        return ImageBuilder(self.client, self.images_dir, self.cache_dir, progress, provided=self.provided_images)

    def has_image(self, tag: str) -> bool:
        return self.builder(lambda _m: None)._image(tag) is not None

    def image_tag(self, name: str) -> str:
        """The tag of base image ``name`` on this engine: the host's own where hosts.toml provides one."""
        return self.provided_images.get(name) or Recipes.load(self.images_dir).images[name].tag

    def _probe_image(self) -> str | None:
        """An image on the engine to run short probes in (the smallest rebench base)."""
        tag = self.image_tag("base")
        return tag if self.has_image(tag) else None

    def _probe(self, argv: list[str], **kwargs: Any) -> str | None:
        image = self._probe_image()
        if image is None:
            return None
        out = self.client.containers.run(image, argv, remove=True, user="root", network_mode="none", **kwargs)
        return out.decode(errors="replace")

    def engine_free_bytes(self) -> int | None:
        """Free bytes on the disk that holds the engine's images and containers."""
        root = (self.client.info() or {}).get("DockerRootDir")
        if self.base_url is None and root and Path(root).exists():
            return shutil.disk_usage(root).free
        text = self._probe(["df", "-P", "-B1", "/"])
        try:
            return int(text.splitlines()[-1].split()[3]) if text else None
        except (IndexError, ValueError):
            return None

    def ensure_image(self, env: Environment, profile: Profile, progress: ProgressFn) -> str:
        builder = self.builder(progress)
        base = builder.ensure(profile.base_image)
        base_id = self.client.images.get(base).id
        h = context_hash(env.path, base_id, skip=("solution", "instructions.md", "environment.toml"))
        tag = f"rebench-env/{env.id}:{profile.name}"
        img = builder._image(tag)
        if img is not None and (img.labels or {}).get(RECIPE_LABEL) == h:
            progress(f"image {tag} is up to date")
            return tag
        builder.build(env.path, tag, base, {RECIPE_LABEL: h, "rebench.env": env.id}, label=env.id, source=env.path)
        return tag
