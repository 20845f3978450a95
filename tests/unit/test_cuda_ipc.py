"""rebench_scorer.cuda_ipc: a buffer description from the other side is checked field by field
before the driver is asked to map anything (these checks run without a GPU; the mapping itself
is measured by environments/triton_cumsum/reference/harness_timing.sh and harness_hostile.sh on one)."""

from __future__ import annotations

import base64
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "rebench_tui" / "runtime" / "lib"))
from rebench_scorer import cuda_ipc  # noqa: E402


class _NoDriver(cuda_ipc.Opener):
    """An opener that fails the test if a description got as far as the driver."""

    def _map(self, handle: bytes):  # noqa: ARG002
        raise AssertionError("a bad description reached the driver")


def _desc(**over):
    desc = {"kind": "cuda-ipc", "device": 0, "handle": base64.b64encode(b"\0" * 64).decode(), "offset_bytes": 0,
            "shape": [1000], "dtype": "int32"}
    desc.update(over)
    return desc


@pytest.mark.parametrize(("over", "says"), [
    ({"kind": "cuda"}, "not a CUDA buffer"),
    ({"dtype": "float32"}, "expected a int32 tensor"),
    ({"shape": [999]}, "shape [1000]"),
    ({"device": 1}, "device 1"),
    ({"offset_bytes": -4}, "non-negative"),
    ({"offset_bytes": True}, "non-negative"),
    ({"offset_bytes": 6}, "not aligned"),
    ({"handle": "not base64!"}, "not base64"),
    ({"handle": base64.b64encode(b"\0" * 32).decode()}, "64 bytes"),
])
def test_a_bad_description_is_refused_before_the_driver(over, says):
    with pytest.raises(cuda_ipc.ShareError, match=says.replace("[", r"\[").replace("]", r"\]")):
        _NoDriver().open(_desc(**over), dtype="int32", shape=[1000])


def test_a_description_larger_than_the_mapping_is_refused():
    class Small(cuda_ipc.Opener):
        def _map(self, handle: bytes):
            return (0x7F0000000000, 4000)  # what the driver reports for the mapping: 1000 int32

    with pytest.raises(cuda_ipc.ShareError, match="holds 4000 bytes"):
        Small().open(_desc(offset_bytes=4), dtype="int32", shape=[1000])


def test_the_number_of_distinct_mappings_is_bounded():
    opener = cuda_ipc.Opener(limit=2)
    opener.mapped = {b"a" * 64: (1, 8), b"b" * 64: (2, 8)}
    with pytest.raises(cuda_ipc.ShareError, match="more than 2 distinct buffers"):
        opener._map(b"c" * 64)
    assert opener._map(b"a" * 64) == (1, 8)  # a known handle is reused, not opened again


def test_a_handle_with_nul_bytes_survives_the_round_trip():
    """Driver handles hold NUL bytes; a c_char field cut them at the first one (the H200 run of
    2026-12-04 refused every handle: "a handle is 64 bytes, not 4")."""
    raw = bytes([7, 1, 2, 0, 0, 9] + [0] * 20 + list(range(1, 39)))
    assert len(raw) == cuda_ipc.HANDLE_BYTES
    h = cuda_ipc.handle_from(raw)
    assert cuda_ipc.handle_bytes(h) == raw
    assert cuda_ipc.handle_from(base64.b64decode(base64.b64encode(cuda_ipc.handle_bytes(h)))).reserved[:] == list(raw)
    with pytest.raises(cuda_ipc.ShareError, match="64 bytes, not 4"):
        cuda_ipc.handle_from(raw[:4])
