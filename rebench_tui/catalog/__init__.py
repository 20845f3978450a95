"""The environment catalog: ``environments/<id>/`` folders read and validated as data."""

from .anchors import Anchors, AnchorsError, Published, PublishedEnv, anchors_in_effect, load_published, manifest_anchors
from .catalog import Catalog, Problem, load_catalog
from .manifest import Environment, Manifest, Profile, Rehearsal

__all__ = ["Anchors", "AnchorsError", "Catalog", "Environment", "Manifest", "Problem", "Profile", "Published", "PublishedEnv", "Rehearsal",
           "anchors_in_effect", "load_catalog", "load_published", "manifest_anchors"]
