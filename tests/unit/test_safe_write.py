"""One way to write a file whole, with the durability each caller asks for: records are fsynced
(the file, then the folder after the rename), caches are not; a failed write leaves the old file."""

from __future__ import annotations

import ast
import hashlib
import json
import os
from pathlib import Path

import pytest

import rebench_tui
from rebench_tui.hashing import sha256_file
from rebench_tui.safe_write import write_json, write_whole

PKG = Path(rebench_tui.__file__).parent
# Renames that are not "write these bytes whole": a folder of prepared assets moved into place, a
# compressed root filesystem zstd wrote, and the supervisor, which runs in the sandbox without the package.
OTHER_RENAMES = {"assets.py", "runtime/images.py", "runtime/supervise.py"}


@pytest.fixture
def fsynced(monkeypatch):
    """What os.fsync was called on (the real fsync still runs): file paths and folders."""
    seen: list[str] = []
    real = os.fsync

    def spy(fd):
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return seen


def test_a_record_is_fsynced_then_its_folder(tmp_path, fsynced):
    path = tmp_path / "session.json"
    write_json(path, {"a": 1}, durable=True, indent=2)
    assert json.loads(path.read_text()) == {"a": 1} and path.read_text().endswith("}\n")
    assert len(fsynced) == 2, fsynced
    assert Path(fsynced[0]).parent == tmp_path and Path(fsynced[0]).name.startswith(".session.json.")  # the new file
    assert fsynced[1] == str(tmp_path)  # the folder, after the rename


def test_a_cache_is_written_whole_without_fsync(tmp_path, fsynced):
    write_whole(tmp_path / "files.json", b"{}", durable=False)
    assert (tmp_path / "files.json").read_bytes() == b"{}" and fsynced == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text("old")
    with pytest.raises(UnicodeEncodeError):
        write_whole(path, "\udc80 not encodable", durable=True)
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration.json"]


def test_no_module_of_the_package_keeps_its_own_copy_of_the_safe_write():
    """A temporary file renamed into place is safe_write's job; each caller says how durable."""
    copies = []
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG).as_posix()
        if rel == "safe_write.py" or rel in OTHER_RENAMES:
            continue
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
                    and (node.func.value.id, node.func.attr) in {("os", "replace"), ("os", "rename"), ("tempfile", "mkstemp")}:
                copies.append(f"{rel}:{node.lineno}")
    assert copies == [], copies


def test_sha256_file_matches_a_whole_read(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(os.urandom(3 << 20) + b"tail")
    assert sha256_file(path) == hashlib.sha256(path.read_bytes()).hexdigest()


def test_file_hashes_use_hashlib_file_digest_not_a_loop_of_their_own():
    loops = []
    for p in [*PKG.rglob("*.py"), *(PKG.parent / "environments").rglob("*.py")]:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.For) and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                                                 and n.func.attr == "update" for n in ast.walk(node)) \
                    and ast.unparse(node.iter).startswith("iter(lambda") and ".read" in ast.unparse(node.iter):
                loops.append(f"{p.relative_to(PKG.parent)}:{node.lineno}")
    assert loops == [], loops
