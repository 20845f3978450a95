"""Importing one file of an environment (or a fixture script) by path, under a name of its own.

Environments are folders of scripts, not packages, and several have a ``model.py`` or
``score.py``: importing by path under a distinct name keeps one test's module from standing in
for another's. The module is registered in ``sys.modules`` (dataclasses look their module up
there) and no ``__pycache__`` is left in the environment's folders.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_file(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    return module
