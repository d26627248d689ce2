"""Every GGUF dequantizer of mtac against gguf.quants.dequantize, bit for bit.

  check_dequant.py IMPORT_TOOL WORKDIR

Writes a GGUF file (with the gguf package) holding random blocks of each type mtac reads (random
bytes, the block scales set to random finite halves, subnormals included), has
`import_tool dequant` convert it, and compares the float32 bits with the package's own
dequantization. Exits 1 on any difference, naming the type and the first index."""
import subprocess
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize

# (type, byte offsets of the f16 scales inside a block); F16/BF16: every element is a scale
TYPES = [(Q.F32, None), (Q.F16, None), (Q.BF16, None), (Q.Q4_0, [0]), (Q.Q4_1, [0, 2]), (Q.Q5_0, [0]),
         (Q.Q5_1, [0, 2]), (Q.Q8_0, [0]), (Q.Q4_K, [0, 2]), (Q.Q5_K, [0, 2]), (Q.Q6_K, [208])]


def finite_halves(rng, n):
    h = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
    return np.where((h & 0x7c00) == 0x7c00, h & 0x83ff, h).astype(np.uint16)  # exponent 31 -> 0


def main():
    tool, work = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(43)
    w = gguf.GGUFWriter(f"{work}/dequant.gguf", "llama")
    want = []
    for t, scales in TYPES:
        bs, ts = gguf.GGML_QUANT_SIZES[t]
        rows, blocks = 3, (2048 if bs == 1 else 40)  # many halves: subnormals among them
        n = rows * blocks
        if t == Q.F32:
            raw = rng.standard_normal(n * bs, dtype=np.float32).view(np.uint8)
        elif t == Q.F16:
            raw = finite_halves(rng, n).view(np.uint8)
        elif t == Q.BF16:  # a finite bfloat16 has the exponent of a finite float: not all ones
            b = rng.integers(0, 1 << 16, size=n, dtype=np.uint16)
            raw = np.where((b & 0x7f80) == 0x7f80, b & 0x807f, b).astype(np.uint16).view(np.uint8)
        else:
            raw = rng.integers(0, 256, size=(n, ts), dtype=np.uint8)
            for off in scales:
                raw[:, off:off + 2] = finite_halves(rng, n).view(np.uint8).reshape(n, 2)
        raw = np.ascontiguousarray(raw.reshape(rows, blocks * ts))
        w.add_tensor(t.name, raw, raw_dtype=t)
        want.append((t.name, dequantize(raw, t).astype(np.float32).reshape(-1)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    subprocess.run([tool, "dequant", f"{work}/dequant.gguf", f"{work}/dequant.bin"], check=True)
    got = np.fromfile(f"{work}/dequant.bin", dtype=np.uint32)
    off, bad = 0, 0
    for name, x in want:
        g = got[off:off + x.size]
        off += x.size
        diff = np.nonzero(g != x.view(np.uint32))[0]
        if g.size != x.size or diff.size:
            i = diff[0] if diff.size else 0
            print(f"{name}: {diff.size} of {x.size} values differ; first at {i}: mtac {g[i]:#010x}, gguf {x.view(np.uint32)[i]:#010x}")
            bad += 1
        else:
            print(f"{name}: {x.size} values equal bit for bit")
    if off != got.size:
        print(f"mtac wrote {got.size} values, expected {off}")
        bad += 1
    sys.exit(1 if bad else 0)


main()
