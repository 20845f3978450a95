"""Loading every environment folder, reporting every problem at once."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from pydantic import ValidationError

from ..errors import CatalogError
from .anchor_pair import SAME
from .manifest import Environment, Manifest
from .published import PUBLISHED_FILE, Published, PublishedEnv, load_published

MANIFEST = "environment.toml"
_DOCKERFILE_FROM = re.compile(r"^\s*FROM\s+\$\{?BASE_IMAGE\}?(\s|$)", re.MULTILINE | re.IGNORECASE)
_DOCKERFILE_ARG = re.compile(r"^\s*ARG\s+BASE_IMAGE\b", re.MULTILINE | re.IGNORECASE)


@dataclass(frozen=True)
class Problem:
    path: Path
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}" + (f": {self.field}" if self.field else "")
        return f"{where}: {self.message}"


@dataclass
class Catalog:
    root: Path
    environments: dict[str, Environment] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    published: Published | None = None  # METR's figures (root/published.toml)

    def get(self, env_id: str) -> Environment:
        if env_id in self.environments:
            return self.environments[env_id]
        broken = [p for p in self.problems if p.path.parts and env_id in p.path.parts]
        if broken:
            raise CatalogError(broken)
        known = ", ".join(sorted(self.environments)) or "none"
        from ..errors import RebenchError

        raise RebenchError(
            f"no environment {env_id!r} in {self.root}",
            fix=f"choose one of: {known} (`rebench-tui list` shows them)",
        )

    def raise_problems(self) -> None:
        if self.problems:
            raise CatalogError(self.problems)


def _pydantic_problems(path: Path, err: ValidationError) -> list[Problem]:
    out = []
    for e in err.errors():
        loc = ".".join(str(x) for x in e["loc"])
        msg = e["msg"]
        if e["type"] == "extra_forbidden":
            msg = "unknown field (a typo?)"
        out.append(Problem(path, loc, msg))
    return out


def _inside(base: Path, rel: str) -> bool:
    """Whether ``rel`` names something inside ``base`` (no absolute path, no ``..`` or link out of it)."""
    if "\0" in rel or Path(rel).is_absolute():
        return False
    try:
        return (base / rel).resolve().is_relative_to(base.resolve())
    except (OSError, RuntimeError, ValueError):  # a link loop, a name the OS refuses
        return False


def _anchor_problems(manifest_path: Path, manifest: Manifest, published: PublishedEnv | None,
                     published_path: Path | None) -> list[Problem]:
    """A profile that says its figures are METR's must carry exactly the published ones."""
    out = []
    for name, prof in manifest.profiles.items():
        if prof.anchors != "published":
            continue
        where = f"profiles.{name}.anchors"
        if published is None:
            out.append(Problem(manifest_path, where, f"says 'published', but {published_path or PUBLISHED_FILE} has no "
                                                     f"figures for {manifest.id!r}"))
        elif abs(published.start - prof.start_score) >= SAME or abs(published.reference - prof.reference_score) >= SAME:
            out.append(Problem(manifest_path, where, f"says 'published', but start/reference {prof.start_score:g}/"
                                                     f"{prof.reference_score:g} are not METR's {published.start:g}/"
                                                     f"{published.reference:g} (use anchors = \"measured\")"))
        elif published.family != manifest.family or published.direction != manifest.score.direction:
            out.append(Problem(manifest_path, where, f"the published figures are for {published.family} "
                                                     f"({published.direction.value} is better)"))
    return out


def _calibration_problems(folder: Path, manifest_path: Path, manifest: Manifest) -> list[Problem]:
    """Files a calibration copies must be in the environment folder."""
    out = []
    for name, prof in manifest.profiles.items():
        cal = prof.calibration
        if cal is None:
            continue
        for side, setup in (("start", cal.start), ("reference", cal.reference)):
            if setup is None:
                continue
            for dest, src in setup.files.items():
                where = f"profiles.{name}.calibration.{side}.files.{dest}"
                if not _inside(folder, src):
                    out.append(Problem(manifest_path, where, f"{src!r} points outside the environment folder"))
                elif not (folder / src).exists():
                    out.append(Problem(manifest_path, where, f"{src!r} is not in the environment folder"))
    return out


def _read_manifest(folder: Path, manifest_path: Path) -> tuple[Manifest | None, list[Problem]]:
    """The validated manifest (or None) and the problems with it, the folder-name check included."""
    problems: list[Problem] = []
    manifest: Manifest | None = None
    data: object = None
    try:
        data = tomllib.loads(manifest_path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        problems.append(Problem(manifest_path, "", f"not valid TOML: {exc}"))
    except (OSError, RecursionError) as exc:
        problems.append(Problem(manifest_path, "", f"cannot be read: {exc}"))
    else:
        try:
            manifest = Manifest.model_validate(data)
        except ValidationError as exc:
            problems += _pydantic_problems(manifest_path, exc)
    declared = data.get("id") if isinstance(data, dict) else None
    if isinstance(declared, str) and declared != folder.name:
        problems.append(Problem(manifest_path, "id", f"{declared!r} does not match the folder name {folder.name!r}"))
    return manifest, problems


def _read_instructions(folder: Path) -> tuple[str, list[Problem]]:
    instructions = folder / "instructions.md"
    if not instructions.is_file():
        return "", [Problem(instructions, "", "missing instructions")]
    try:
        text = instructions.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        return "", [Problem(instructions, "", f"not UTF-8 text: {exc}")]
    except OSError as exc:
        return "", [Problem(instructions, "", f"cannot be read: {exc}")]
    return text, [] if text.strip() else [Problem(instructions, "", "instructions are empty")]


def _dockerfile_problems(folder: Path) -> list[Problem]:
    dockerfile = folder / "Dockerfile"
    if not dockerfile.is_file():
        return [Problem(dockerfile, "", "missing Dockerfile")]
    problems = []
    try:
        body = dockerfile.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        body = None
        problems.append(Problem(dockerfile, "", f"cannot be read: {exc}"))
    if body is not None and not _DOCKERFILE_ARG.search(body) or not _DOCKERFILE_FROM.search(body):
        problems.append(Problem(dockerfile, "FROM", "must start with `ARG BASE_IMAGE` and `FROM ${BASE_IMAGE}` so profiles can choose the base image"))
    return problems


def _file_problems(folder: Path, manifest_path: Path, manifest: Manifest) -> list[Problem]:
    """The scorer must be a file in protected/, the assets' prepare script one in the folder."""
    problems = []
    scorer = manifest.score.scorer
    if not _inside(folder / "protected", scorer):
        problems.append(Problem(manifest_path, "score.scorer", f"{scorer!r} points outside protected/ (use a path relative to it)"))
    elif not (folder / "protected" / scorer).is_file():
        problems.append(Problem(manifest_path, "score.scorer", f"{scorer!r} is not a file in protected/"))
    if manifest.assets is not None:
        prep = manifest.assets.prepare
        if not _inside(folder, prep):
            problems.append(Problem(manifest_path, "assets.prepare", f"{prep!r} points outside the environment folder"))
        elif not (folder / prep).is_file():
            problems.append(Problem(manifest_path, "assets.prepare", f"{prep!r} is not a file in the environment folder"))
    return problems


def _manifest_problems(folder: Path, manifest_path: Path, manifest: Manifest, published: Published | None,
                       known_images: Iterable[str] | None) -> list[Problem]:
    """What a valid manifest says that the folder, the published figures or the images contradict."""
    problems = _file_problems(folder, manifest_path, manifest)
    pub = published.get(manifest.id) if published is not None else None
    problems += _anchor_problems(manifest_path, manifest, pub, published.path if published else None)
    problems += _calibration_problems(folder, manifest_path, manifest)
    if known_images is not None:
        known = set(known_images)
        for name, prof in manifest.profiles.items():
            if prof.base_image not in known:
                problems.append(Problem(manifest_path, f"profiles.{name}.base_image", f"unknown base image {prof.base_image!r}; known: {sorted(known)}"))
    return problems


def load_environment(folder: Path, known_images: Iterable[str] | None = None,
                     published: Published | None = None) -> tuple[Environment | None, list[Problem]]:
    """Load one folder; return the environment (or None) and every problem found in it.
    Without ``published``, the published figures beside the folder (its catalog's) are read."""
    if published is None and (folder.parent / PUBLISHED_FILE).is_file():
        published, _ = load_published(folder.parent / PUBLISHED_FILE)  # its own problems are the catalog's to report
    manifest_path = folder / MANIFEST
    if not manifest_path.is_file():
        return None, [Problem(manifest_path, "", "missing manifest")]
    manifest, problems = _read_manifest(folder, manifest_path)
    text, instruction_problems = _read_instructions(folder)
    problems += instruction_problems
    problems += _dockerfile_problems(folder)
    for sub in ("solution", "protected"):
        if not (folder / sub).is_dir():
            problems.append(Problem(folder / sub, "", f"missing {sub}/ folder"))
    if manifest is not None:
        problems += _manifest_problems(folder, manifest_path, manifest, published, known_images)
    if problems or manifest is None:
        return None, problems
    pub = published.get(manifest.id) if published is not None else None
    return Environment(path=folder, manifest=manifest, instructions=text, published=pub), []


def load_catalog(root: Path, known_images: Iterable[str] | None = None) -> Catalog:
    """Load every ``root/<id>/`` folder that holds anything; collect all problems."""
    catalog = Catalog(root=root)
    if not root.is_dir():
        catalog.problems.append(Problem(root, "", "environments folder not found"))
        return catalog
    known = list(known_images) if known_images is not None else None
    published_path = root / PUBLISHED_FILE
    if published_path.exists():  # a catalog without one (a test fixture) simply has no published figures
        catalog.published, pub_problems = load_published(published_path)
        catalog.problems += [Problem(published_path, f, m) for f, m in pub_problems]
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))):
        env, problems = load_environment(folder, known, catalog.published)
        catalog.problems += problems
        if env is not None:
            catalog.environments[env.id] = env
    return catalog
