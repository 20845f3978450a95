"""Tensors shared between the scorer and the participant's process, without pickle.

Nothing the other side sends is unpickled: a message describes a buffer in plain JSON and the
receiving side checks every field before it maps anything.

- CPU (smoke profiles): a memfd. The scorer creates it and passes a descriptor; the participant
  can be given a read-only one (:func:`read_only_fd`), which it maps copy-on-write, so its writes
  stay its own.
- CUDA: an IPC handle of the storage (``UntypedStorage._share_cuda_``), opened with
  ``_new_shared_cuda``. The reference-count file torch keeps in /dev/shm belongs to the process
  that shared the buffer; :func:`share_cuda` hands it to the reader's user when they differ (the
  scorer runs as root, the participant as uid 1000).
"""

from __future__ import annotations

import base64
import mmap
import os
import re
from typing import Any

DTYPES = {"int32": 4, "int64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1}
_REF_NAME = re.compile(r"^/torch_[0-9_]+$")


class ShareError(Exception):
    """A buffer description that does not add up (or could not be opened)."""


def _torch_dtype(name: str):
    import torch

    if name not in DTYPES:
        raise ShareError(f"dtype {name!r} is not one of {sorted(DTYPES)}")
    return getattr(torch, name)


# -- CPU: memfd ---------------------------------------------------------------------------------
def memfd(nbytes: int, name: str = "rebench") -> int:
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    os.ftruncate(fd, max(nbytes, 1))
    return fd


def read_only_fd(fd: int) -> int:
    """Another descriptor of the same memfd, opened read-only (it cannot be mapped for writing)."""
    return os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_CLOEXEC)


def map_fd(fd: int, nbytes: int, *, writable: bool, private: bool = False) -> mmap.mmap:
    size = os.fstat(fd).st_size
    if nbytes > size:
        raise ShareError(f"the shared buffer holds {size} bytes, {nbytes} were promised")
    if private:  # copy-on-write: writable here, never seen by the other side
        return mmap.mmap(fd, max(nbytes, 1), flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    prot = mmap.PROT_READ | (mmap.PROT_WRITE if writable else 0)
    return mmap.mmap(fd, max(nbytes, 1), flags=mmap.MAP_SHARED, prot=prot)


def tensor_on(buffer: mmap.mmap, dtype: str, shape: list[int]):
    """A tensor viewing ``buffer`` (no copy)."""
    import warnings

    import torch

    numel = 1
    for d in shape:
        numel *= int(d)
    with warnings.catch_warnings():  # a read-only mapping: torch warns that it cannot stop writes; mmap does
        warnings.simplefilter("ignore")
        flat = torch.frombuffer(buffer, dtype=_torch_dtype(dtype), count=numel)
    return flat.view(*shape)


# -- CUDA: IPC handles --------------------------------------------------------------------------
def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def share_cuda(tensor, reader_uid: int | None = None) -> dict[str, Any]:
    """A JSON description of a contiguous CUDA tensor that another process can open."""
    if not tensor.is_cuda or not tensor.is_contiguous():
        raise ShareError("only contiguous CUDA tensors are shared")
    storage = tensor.untyped_storage()
    (device, handle, size, offset, ref_handle, ref_offset, event_handle, event_sync) = storage._share_cuda_()
    ref_name = ref_handle.decode() if isinstance(ref_handle, bytes) else str(ref_handle)
    if reader_uid is not None and reader_uid != os.geteuid() and os.geteuid() == 0 and _REF_NAME.match(ref_name):
        try:  # the reader maps this counter file to say when it is done with the buffer
            os.chown(f"/dev/shm{ref_name}", reader_uid, -1)
        except OSError:
            pass
    return {"kind": "cuda", "device": int(device), "handle": _b64(handle), "storage_bytes": int(size),
            "storage_offset_bytes": int(offset), "ref_counter": ref_name, "ref_offset": int(ref_offset),
            "event": _b64(event_handle) if event_handle else "", "event_sync": bool(event_sync),
            "element_offset": int(tensor.storage_offset()), "shape": list(tensor.shape),
            "dtype": str(tensor.dtype).removeprefix("torch.")}


def _field(desc: dict[str, Any], key: str, kind: type) -> Any:
    value = desc.get(key)
    if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ShareError(f"{key} must be a non-negative integer, not {value!r}")
    if kind is not int and not isinstance(value, kind):
        raise ShareError(f"{key} must be a {kind.__name__}, not {type(value).__name__}")
    return value


def open_cuda(desc: dict[str, Any], *, dtype: str, shape: list[int]):
    """Open a buffer another process shared, checking that it is what was asked for: the given
    dtype and shape, inside the shared storage."""
    import torch

    if not isinstance(desc, dict) or desc.get("kind") != "cuda":
        raise ShareError("not a CUDA buffer description")
    if desc.get("dtype") != dtype or desc.get("shape") != list(shape):
        raise ShareError(f"expected a {dtype} tensor of shape {list(shape)}, got {desc.get('dtype')!r} {desc.get('shape')!r}")
    device = _field(desc, "device", int)
    size = _field(desc, "storage_bytes", int)
    offset = _field(desc, "storage_offset_bytes", int)
    ref_offset = _field(desc, "ref_offset", int)
    element_offset = _field(desc, "element_offset", int)
    ref_name = _field(desc, "ref_counter", str)
    if not _REF_NAME.match(ref_name):
        raise ShareError(f"reference counter name {ref_name!r} is not one torch makes")
    try:
        handle = base64.b64decode(_field(desc, "handle", str), validate=True)
        event = base64.b64decode(_field(desc, "event", str), validate=True) if desc.get("event") else b""
    except ValueError:
        raise ShareError("handle is not base64") from None
    numel = 1
    for d in shape:
        numel *= d
    need = (element_offset + numel) * DTYPES[dtype]
    if need > size:
        raise ShareError(f"the shared storage holds {size} bytes; the tensor needs {need}")
    with torch.cuda.device(device):
        storage = torch.UntypedStorage._new_shared_cuda(device, handle, size, offset, ref_name.encode(), ref_offset,
                                                        event, bool(desc.get("event_sync")))
    t = torch.empty(0, dtype=_torch_dtype(dtype), device=f"cuda:{device}")
    t.set_(storage, element_offset, list(shape))
    return t
