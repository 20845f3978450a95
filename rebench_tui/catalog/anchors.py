"""Anchors: the start and reference scores a normalized score is measured between, and where
they come from.

A normalized score is ``(y - start) / (reference - start)``; it is only as true as its two
anchors. Every pair used anywhere carries its provenance (:class:`Anchors`):

- ``published``: METR's figures (``environments/published.toml``, read by :func:`load_published`),
  measured by METR on H100s with METR's models, data and judges;
- ``measured``: figures this project measured and wrote into a manifest (its ``measured`` note
  says how and where);
- ``calibrated``: measured on this host by ``rebench-tui calibrate`` (a calibration file under
  the config folder, :mod:`.calibration`): the starting and the reference solution through the
  real scorer, N times each, with the host's facts;
- ``uncalibrated``: a manifest's placeholder nobody measured;
- ``log`` / ``file``: what a run's own log, or a file named on the command line, says;
- ``recorded``: a session recorded before sessions kept provenance (only the two numbers).

The profile's anchors *in effect* (:func:`anchors_in_effect`) are the ones calibrated here when
a calibration file exists, else the manifest's. A session records the ones it was normalized
with, and ``compare`` normalizes every run by its own.

The pair itself is :mod:`.anchor_pair`'s and the published table :mod:`.published`'s; their names
are importable from here too.
"""

from __future__ import annotations

from pathlib import Path

from .anchor_pair import KINDS, SAME, Anchors, AnchorsError, anchors_gpu, gpu_differs, gpu_model
from .calibration import calibration_path, load_calibration
from .manifest import Environment
from .published import PUBLISHED_FILE, Published, PublishedEnv, load_published

__all__ = ["KINDS", "PUBLISHED_FILE", "SAME", "Anchors", "AnchorsError", "Published", "PublishedEnv", "anchors_gpu",
           "anchors_in_effect", "gpu_differs", "gpu_model", "load_published", "manifest_anchors"]


# -- a profile's anchors ----------------------------------------------------------------------
def manifest_anchors(env: Environment, profile: str) -> Anchors:
    """The anchors a profile's manifest gives, with their provenance."""
    p = env.profile(profile)
    common = {"env_id": env.id, "profile": profile, "env_version": env.manifest.version,
              "manifest": str(env.path / "environment.toml")}
    if p.anchors == "published":
        pub = env.published
        if pub is not None and abs(pub.start - p.start_score) < SAME and abs(pub.reference - p.reference_score) < SAME:
            a = pub.anchors()
            return Anchors(p.start_score, p.reference_score, "published", a.summary,
                           {**a.provenance, **common, "measured": p.measured})
        # the catalog reports this as a problem; here the figures are taken as the manifest's own
    if p.anchors == "uncalibrated":
        return Anchors(p.start_score, p.reference_score, "uncalibrated",
                       "uncalibrated: placeholder figures nobody measured (run `rebench-tui calibrate`)",
                       {**common, "measured": p.measured})
    return Anchors(p.start_score, p.reference_score, "measured",
                   "measured by this project (the manifest's `measured` note says how and where)",
                   {**common, "measured": p.measured})


def anchors_in_effect(env: Environment, profile: str, config_dir: Path | None) -> Anchors:
    """The anchors a new session of ``env``/``profile`` is normalized with here: calibrated on this
    host when a calibration file exists (see :mod:`.calibration`), else the manifest's.

    An unreadable calibration file is an error (naming it), not silently passed over."""
    if config_dir is not None:
        path = calibration_path(config_dir, env.id, profile)
        if path.is_file():
            cal = load_calibration(path)
            if (cal.env_id, cal.profile) != (env.id, profile):
                raise AnchorsError(f"the calibration file {path} is for {cal.env_id}/{cal.profile}, not {env.id}/{profile}",
                                   fix=f"remove {path}, then run `rebench-tui calibrate {env.id} --profile {profile}`")
            return cal.anchors(env, path)
    return manifest_anchors(env, profile)
