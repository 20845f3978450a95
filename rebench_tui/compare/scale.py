"""One scale where human sessions meet METR's published runs.

A published run's score is normalized on METR's published anchors; a human session's on the
anchors it recorded (measured by this project, calibrated on its host...), which can be far apart
(triton_cumsum's gpu profile: this project's reference kernel, 0.51 ms on an H100, where METR's
reference is 1.6 ms). Side by side, the two would sit on different scales. So where a comparison
holds published runs and no ``--anchors`` choice was made, every other run of an environment
METR published is renormalized from its raw scores onto the published anchors
(:func:`onto_published`); the lines it returns say which anchors, what moved, and how the
settings differ (GPU, profile, harness), and are printed beside the table.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

from ..catalog.anchors import anchors_gpu
from .runs import EnvResolver, Run, SourceKind

HARNESS = ("harness: METR's agents ran in METR's own scaffolds (the published rows name the model, not the "
           "scaffold); human sessions ran in this workstation; the paper compared both under its own harness")


def differences(r: Run, own, published, hardware: str) -> str | None:
    """One line: how a renormalized run's setting differs from METR's (GPU under its own anchors,
    profile, the paper's settings it was not made in); None where nothing is known to differ."""
    profile = r.env.origin.split(":", 1)[1] if r.env.origin.startswith("session:") else None
    bits = []
    if r.human:
        gpu = anchors_gpu(own)
        bits.append(f"GPU: its own anchors were measured on {gpu or 'a GPU they do not name'}, METR's on {hardware}"
                    + ("" if gpu in (None, anchors_gpu(published)) else " (a timed score moves with the GPU)"))
    if profile and profile != "gpu":
        bits.append(f"profile {profile} (not the gpu profile: a small stand-in, its raw scores are not the paper's)")
    if r.setting_differs:
        bits.append("differs from the paper's setting in " + ", ".join(r.setting_differs))
    return f"{r.run_id} ({r.env_id}): " + "; ".join(bits) if bits else None


def onto_published(runs: Sequence[Run], resolver: EnvResolver) -> tuple[list[Run], list[str]]:
    """``runs`` with every run of a published environment on METR's published anchors, when any
    of them is a published run and no ``--anchors`` choice was made; and the lines to print
    beside the table (none when there is nothing to say)."""
    if not any(r.kind == SourceKind.PUBLISHED for r in runs):
        return list(runs), []
    if resolver.override is not None:
        return list(runs), [f"scale: --anchors {resolver.override} for every run it has figures for (METR's published "
                            "runs were mapped back from their published normalized scores first)"]
    table = resolver.published
    out: list[Run] = []
    moved: list[str] = []
    kept: list[str] = []
    differ: list[str] = []
    envs_seen: dict[str, str] = {}
    for r in runs:
        pub = table.get(r.env_id) if table is not None else None
        if pub is None:
            out.append(r)
            if r.kind != SourceKind.PUBLISHED:
                kept.append(f"{r.run_id} ({r.env_id}): METR published no anchors for it; kept on {r.env.anchors.tag}")
            continue
        a = pub.anchors()
        envs_seen[r.env_id] = f"{r.env_id} {a.start:g} → {a.reference:g} (measured on {pub.hardware})"
        if r.kind == SourceKind.PUBLISHED or r.env.anchors.same_figures(a) and r.env.anchors.kind == "published":
            out.append(r)
            continue
        own = r.env.anchors
        out.append(replace(r, env=r.env.with_anchors(a), notes=r.notes + (
            f"renormalized onto METR's published anchors from its own ({own.tag} {own.start:g} → {own.reference:g})",)))
        moved.append(f"{r.run_id} ({r.env_id}, {r.group}): from its own anchors {own.tag} {own.start:g} → "
                     f"{own.reference:g} onto {a.start:g} → {a.reference:g}")
        d = differences(r, own, a, pub.hardware)
        if d:
            differ.append(d)
    lines = ["scale: every run of a METR environment on METR's published anchors: " + "; ".join(envs_seen.values())]
    if moved:
        lines.append(f"renormalized from their raw scores ({len(moved)}): " + " | ".join(moved))
    lines += kept
    lines += [f"setting: {d}" for d in differ]
    if any(r.human for r in runs):
        lines.append(HARNESS)
    return out, lines
