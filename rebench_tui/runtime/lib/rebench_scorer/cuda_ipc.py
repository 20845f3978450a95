"""CUDA buffers shared between the scorer and the participant's process, through the driver's IPC
handles, described in plain JSON (nothing the other side sends is unpickled).

Why not torch's own sharing (``UntypedStorage._share_cuda_`` / ``_new_shared_cuda``): it opens
every handle afresh once the last tensor on it is gone, and it keeps a reference count with which
the sharing process holds back a freed block until the reader lets go. A timed batch of ten
400 MB outputs then paid for ten fresh mappings each time (about 0.35 ms a call on an H200,
measured 2026-12-03). Here:

- :func:`describe` (the sharing side) names the allocation a tensor lives in by its IPC handle
  and the tensor's offset in it; no event, no reference count file.
- :class:`Opener` (the reading side) maps each distinct handle once and keeps it mapped until
  :meth:`Opener.close`, so when the other side's allocator hands out the same blocks again (as
  PyTorch's caching allocator does batch after batch), opening costs a dictionary lookup. The
  size of what is read is checked against the mapping the driver reports, never against what the
  other side claims.

A reader sees whatever is in the memory when it reads it; nothing here orders the two sides'
streams. Callers that need finished values either synchronize on the writing side before saying
so, or (the scorer) check the values they read.
"""

from __future__ import annotations

import base64
import ctypes
from typing import Any

DTYPES = {"int32": ("<i4", 4), "int64": ("<i8", 8), "float32": ("<f4", 4), "float16": ("<f2", 2), "uint8": ("|u1", 1)}
HANDLE_BYTES = 64
LAZY_ENABLE_PEER_ACCESS = 1


class ShareError(Exception):
    """A buffer description that does not add up, or a driver call that failed."""


class _Handle(ctypes.Structure):
    # Bytes, not c_char: a c_char array reads back cut at its first NUL, and handles hold NULs.
    _fields_ = [("reserved", ctypes.c_ubyte * HANDLE_BYTES)]


def handle_bytes(handle: _Handle) -> bytes:
    """All HANDLE_BYTES of a driver handle (NULs included)."""
    return ctypes.string_at(ctypes.addressof(handle), HANDLE_BYTES)


def handle_from(data: bytes) -> _Handle:
    if len(data) != HANDLE_BYTES:
        raise ShareError(f"a handle is {HANDLE_BYTES} bytes, not {len(data)}")
    return _Handle.from_buffer_copy(data)


_driver: ctypes.CDLL | None = None


def _cuda() -> ctypes.CDLL:
    global _driver
    if _driver is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise ShareError(f"the CUDA driver library could not be loaded: {exc}") from None
        lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_Handle), ctypes.c_uint64]
        lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), _Handle, ctypes.c_uint]
        lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        lib.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t), ctypes.c_uint64]
        lib.cuCtxGetCurrent.argtypes = [ctypes.POINTER(ctypes.c_void_p)]
        lib.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        lib.cuMemFree_v2.argtypes = [ctypes.c_uint64]
        _driver = lib
    return _driver


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise ShareError(f"{what} failed with CUDA driver error {rc}")


_ready: set[int] = set()


def _ensure_context(device: int) -> None:
    """The driver calls act on the calling thread's current context: make PyTorch set it up
    (once; both sides use one thread for CUDA)."""
    if device in _ready:
        return
    import torch

    torch.cuda.set_device(device)
    torch.cuda.current_stream(device).synchronize()
    ctx = ctypes.c_void_p()
    _check(_cuda().cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
    if not ctx.value:
        torch.zeros(1, device=f"cuda:{device}")
        _check(_cuda().cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            raise ShareError("no CUDA context is current on this thread")
    _ready.add(device)


def _dtype_name(tensor) -> str:
    name = str(tensor.dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise ShareError(f"dtype {name} cannot be shared (only {sorted(DTYPES)})")
    return name


def describe(tensor) -> dict[str, Any]:
    """A JSON description of a contiguous CUDA tensor that another process can open."""
    if not tensor.is_cuda or not tensor.is_contiguous():
        raise ShareError("only contiguous CUDA tensors are shared")
    device = tensor.device.index or 0
    _ensure_context(device)
    lib = _cuda()
    ptr = tensor.data_ptr()
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    _check(lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)), "cuMemGetAddressRange")
    handle = _Handle()
    _check(lib.cuIpcGetMemHandle(ctypes.byref(handle), base), "cuIpcGetMemHandle")
    return {"kind": "cuda-ipc", "device": device, "handle": base64.b64encode(handle_bytes(handle)).decode(),
            "offset_bytes": ptr - base.value, "shape": list(tensor.shape), "dtype": _dtype_name(tensor)}


class _View:
    """What torch.as_tensor needs to view device memory it did not allocate."""

    def __init__(self, ptr: int, shape: list[int], typestr: str, owner: object) -> None:
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, False), "version": 2}
        self.owner = owner  # the mapping stays while a view of it lives


def view(ptr: int, shape: list[int], dtype: str, owner: object, device: int = 0):
    """A tensor over device memory at ``ptr`` that this process has mapped (``owner``, kept alive
    with the view). Nothing is checked: the caller vouches for the range it reads."""
    import torch

    return torch.as_tensor(_View(ptr, list(shape), DTYPES[dtype][0], owner), device=f"cuda:{device}")


class Buffer:
    """Device memory of its own (one driver allocation, outside PyTorch's caching allocator) for
    sharing. A handle names a whole allocation, so a tensor from PyTorch's allocator may share
    its block with other tensors (a scorer's expected output, say) that the reader could then
    read too; a Buffer holds nothing but itself. ``tensor`` views it; :meth:`free` gives it back."""

    def __init__(self, shape: list[int], dtype: str, device: int = 0) -> None:
        import torch

        typestr, width = DTYPES[dtype]
        numel = 1
        for d in shape:
            numel *= int(d)
        _ensure_context(device)
        ptr = ctypes.c_uint64()
        _check(_cuda().cuMemAlloc_v2(ctypes.byref(ptr), max(numel * width, 1)), "cuMemAlloc")
        self.ptr = ptr.value
        self.device = device
        self.tensor = torch.as_tensor(_View(self.ptr, list(shape), typestr, self), device=f"cuda:{device}")
        self.desc = describe(self.tensor)

    def free(self) -> None:
        if self.ptr:
            import torch

            torch.cuda.synchronize(self.device)
            self.tensor = None
            _cuda().cuMemFree_v2(ctypes.c_uint64(self.ptr))
            self.ptr = 0


class Opener:
    """The reading side: maps each distinct handle once, keeps it until :meth:`close`.

    ``limit`` bounds how many distinct mappings are kept: a process that hands over a fresh
    allocation every time gets :class:`ShareError` once it is reached, not unbounded mappings."""

    def __init__(self, device: int = 0, limit: int = 256) -> None:
        self.device = device
        self.limit = limit
        self.mapped: dict[bytes, tuple[int, int]] = {}  # handle -> (pointer, bytes mapped)
        self.opened = 0  # how many times the driver was asked to map (the rest were reuses)

    def _map(self, handle: bytes) -> tuple[int, int]:
        known = self.mapped.get(handle)
        if known is not None:
            return known
        if len(self.mapped) >= self.limit:
            raise ShareError(f"more than {self.limit} distinct buffers were handed over")
        _ensure_context(self.device)
        lib = _cuda()
        ptr = ctypes.c_uint64()
        rc = lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), handle_from(handle), LAZY_ENABLE_PEER_ACCESS)
        _check(rc, "opening a shared buffer (cuIpcOpenMemHandle)")
        base, size = ctypes.c_uint64(), ctypes.c_size_t()
        rc = lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ptr)
        if rc != 0:
            lib.cuIpcCloseMemHandle(ptr)
            _check(rc, "cuMemGetAddressRange")
        self.mapped[handle] = (ptr.value, int(size.value))
        self.opened += 1
        return self.mapped[handle]

    def open(self, desc: dict[str, Any], *, dtype: str, shape: list[int]):
        """A tensor viewing the described buffer, checked to be the asked-for dtype and shape and
        to lie inside the mapping."""
        return view(self.locate(desc, dtype=dtype, shape=shape), shape, dtype, self, self.device)

    def locate(self, desc: dict[str, Any], *, dtype: str, shape: list[int]) -> int:
        """Where the described tensor starts in this process, with every check :meth:`open` makes
        (no tensor is made: a timed caller reads many buffers through one view of its own)."""
        if not isinstance(desc, dict) or desc.get("kind") != "cuda-ipc":
            raise ShareError("not a CUDA buffer description")
        if desc.get("dtype") != dtype or desc.get("shape") != list(shape):
            raise ShareError(f"expected a {dtype} tensor of shape {list(shape)}, got {desc.get('dtype')!r} {desc.get('shape')!r}")
        if desc.get("device") != self.device:
            raise ShareError(f"the buffer is on device {desc.get('device')!r}, not {self.device}")
        offset = desc.get("offset_bytes")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ShareError(f"offset_bytes must be a non-negative integer, not {offset!r}")
        width = DTYPES[dtype][1]
        if offset % width:
            raise ShareError(f"offset {offset} is not aligned to {dtype}")
        try:
            handle = base64.b64decode(str(desc.get("handle")), validate=True)
        except ValueError:
            raise ShareError("the handle is not base64") from None
        if len(handle) != HANDLE_BYTES:
            raise ShareError(f"a handle is {HANDLE_BYTES} bytes, not {len(handle)}")
        numel = 1
        for d in shape:
            numel *= int(d)
        ptr, size = self._map(handle)
        if offset + numel * width > size:
            raise ShareError(f"the shared allocation holds {size} bytes; the tensor needs {offset + numel * width}")
        return ptr + offset

    def close(self) -> None:
        """Unmap everything (no tensor opened here may be used afterwards)."""
        if self.mapped:
            import torch

            torch.cuda.synchronize(self.device)
            lib = _cuda()
            for ptr, _size in self.mapped.values():
                lib.cuIpcCloseMemHandle(ctypes.c_uint64(ptr))
            self.mapped.clear()
