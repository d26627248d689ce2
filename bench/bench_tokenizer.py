#!/usr/bin/env python3
"""bench_tokenizer.py: single-thread encoding speed of mtac's tokenizer against Hugging Face's
tokenizers, side by side on the same text and tokenizer.json.

    RUN=... python bench/bench_tokenizer.py --tool build/tok_tool --run DIR [--text FILE] [--repeat N]

DIR holds a tokenizer.json (e.g. one `mtac import` wrote, or tests/ref/check_tokenizer.py's
GGUF-derived one: --gguf FILE builds it from a GGUF's tokenizer.ggml.* keys). The text is FILE
(default: Debian's bible-kjv text when installed, else the repository's docs and C sources),
repeated N times. tokenizers runs one encode of the whole text on one thread (RAYON_NUM_THREADS=1,
no encode_batch); mtac the same through tok_tool bench. Prints MB/s for both and checks that the
ids agree.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
from tokenizers import Tokenizer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_text():
    for p in ["/usr/share/bible-kjv/bible.txt", "/usr/share/bible-kjv/kjv.txt"]:
        if os.path.exists(p):
            return open(p, encoding="utf-8", errors="replace").read(), p
    files = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")) + glob.glob(os.path.join(ROOT, "src", "*", "*.c")))
    return "".join(open(f, encoding="utf-8").read() for f in files), "docs/*.md + src/*/*.c"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--run", help="a directory with tokenizer.json")
    ap.add_argument("--gguf", help="build the tokenizer.json from this GGUF's tokenizer keys instead")
    ap.add_argument("--text")
    ap.add_argument("--repeat", type=int, default=4)
    a = ap.parse_args()
    tmp = tempfile.TemporaryDirectory()
    run = a.run
    if a.gguf:
        import gguf
        r = gguf.GGUFReader(a.gguf)
        spec = {k: f.contents() for k, f in r.fields.items() if k.startswith("tokenizer.")}
        spec_file = os.path.join(tmp.name, "spec.json")
        json.dump(spec, open(spec_file, "w"))
        run = os.path.join(tmp.name, "run")
        os.makedirs(run)
        subprocess.run([a.tool, "save", "--spec", spec_file, run], check=True)
    if not run:
        sys.exit("give --run DIR or --gguf FILE")
    text, name = (open(a.text, encoding="utf-8").read(), a.text) if a.text else default_text()
    text = text * a.repeat
    data = text.encode()
    path = os.path.join(tmp.name, "text.txt")
    open(path, "wb").write(data)

    tok = Tokenizer.from_file(os.path.join(run, "tokenizer.json"))
    best_hf = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        ids = tok.encode(text, add_special_tokens=False).ids
        best_hf = min(best_hf, time.perf_counter() - t0)
    # tokenizers is faster on many short texts than on one long one: also its best case, the text
    # in paragraphs, encoded one after the other (still one thread, no encode_batch)
    paras = [p for p in text.split("\n\n")]
    best_hf_p = 1e9
    for _ in range(3):
        t0 = time.perf_counter()
        for p in paras:
            tok.encode(p, add_special_tokens=False)
        best_hf_p = min(best_hf_p, time.perf_counter() - t0)
    best_c, n_c = 1e9, None
    for _ in range(3):
        out = subprocess.run([a.tool, "bench", "--run", run, path], capture_output=True, text=True, check=True).stdout
        r = json.loads(out)
        best_c = min(best_c, r["seconds"])
        n_c = r["tokens"]
    mb = len(data) / 1e6
    print(f"text: {name} x{a.repeat}, {mb:.2f} MB, {len(ids)} tokens (tokenizers), {n_c} tokens (mtac)")
    print(f"tokenizers, one thread, whole text:    {mb / best_hf:8.2f} MB/s")
    print(f"tokenizers, one thread, by paragraph:  {mb / best_hf_p:8.2f} MB/s")
    print(f"mtac,       one thread, whole text:    {mb / best_c:8.2f} MB/s  "
          f"({best_hf / best_c:.1f}x and {best_hf_p / best_c:.1f}x tokenizers')")
    if n_c != len(ids):
        print("WARNING: the token counts differ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
