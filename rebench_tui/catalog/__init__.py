"""The environment catalog: ``environments/<id>/`` folders read and validated as data."""

from .catalog import Catalog, Problem, load_catalog
from .manifest import Environment, Manifest, Profile

__all__ = ["Catalog", "Environment", "Manifest", "Problem", "Profile", "load_catalog"]
