"""Reading and writing the safetensors format without the `safetensors` package.

The format: 8 bytes (little-endian u64) giving the length N of a JSON header, N bytes of header
({name: {"dtype", "shape", "data_offsets": [begin, end]}, optional "__metadata__"}), then the raw
little-endian tensor bytes, offsets relative to the end of the header.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import torch

DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8,
          "BOOL": torch.bool}
NAMES = {v: k for k, v in DTYPES.items()}


def save_file(tensors: dict[str, torch.Tensor], path: str | Path, metadata: dict[str, str] | None = None) -> None:
    header: dict = {"__metadata__": metadata or {"format": "pt"}}
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name].detach().to("cpu").contiguous()
        data = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as fh:
        fh.write(struct.pack("<Q", len(raw)))
        fh.write(raw)
        for data in blobs:
            fh.write(data)


def load_file(path: str | Path) -> dict[str, torch.Tensor]:
    buf = bytearray(Path(path).read_bytes())
    (n,) = struct.unpack("<Q", bytes(buf[:8]))
    header = json.loads(bytes(buf[8:8 + n]))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = DTYPES[info["dtype"]]
        begin, end = info["data_offsets"]
        flat = torch.frombuffer(buf, dtype=torch.uint8, count=end - begin, offset=base + begin) if end > begin else torch.empty(0, dtype=torch.uint8)
        out[name] = flat.view(dtype).reshape(info["shape"]).clone()
    return out
