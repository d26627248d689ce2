"""Tiny safetensors reader/writer (F32 only), struct + json + numpy; no safetensors package.

Format: u64 little-endian header length N, then N bytes of JSON
  {name: {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}
then the raw little-endian data; offsets are relative to the start of the data section.
The header is padded with spaces so the data section starts at a multiple of 8 bytes
(8 + N is a multiple of 8); tensors are written back to back in name order.
"""
import json
import struct

import numpy as np


def save(path, tensors, metadata=None):
    """tensors: dict name -> array-like (converted to float32). metadata: dict str -> str."""
    header = {}
    if metadata:  # first, like mtac's writer (JSON order does not matter to readers)
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    off = 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(np.asarray(tensors[name], dtype='<f4'))
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header, separators=(',', ':')).encode('utf-8')
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def load(path):
    """Returns (dict name -> float32 numpy array, metadata dict)."""
    with open(path, 'rb') as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f'{path}: too short for a safetensors file')
    (n,) = struct.unpack('<Q', raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f'{path}: header length {n} exceeds file size')
    header = json.loads(raw[8:8 + n].decode('utf-8'))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        if info["dtype"] != "F32":
            raise ValueError(f'{path}: tensor {name} has dtype {info["dtype"]}, only F32 supported')
        b, e = info["data_offsets"]
        shape = tuple(info["shape"])
        count = int(np.prod(shape)) if shape else 1
        if e - b != 4 * count or e > len(data):
            raise ValueError(f'{path}: tensor {name} has bad data_offsets {b},{e}')
        out[name] = np.frombuffer(data[b:e], dtype='<f4').reshape(shape).copy()
    return out, meta
