#!/usr/bin/env python3
"""check_tokenizer.py: mtac's tokenizers (src/tok) against Hugging Face's tokenizers and llama.cpp.

    check_tokenizer.py --tool build/tok_tool [--corpus tests/data/tok_corpus.json] [--gguf FILE]
    check_tokenizer.py --tool build/tok_tool --gguf FILE --write-fixture   (needs llama_cpp)

1. Tokenizers trained here with `tokenizers` on the corpus (byte-level BPE with Llama 3's Split
   regex, GPT-2's ByteLevel, SentencePiece-style BPE with byte fallback and the Prepend/Replace
   normalizer, each with added tokens): ids equal `tokenizers`' on every text of the corpus.
2. With a GGUF file (--gguf, or env MTAC_SMOLLM2_GGUF): its tokenizer.ggml.* keys, dumped with the
   `gguf` package, built by tokenizer_from_spec and written by tokenizer_save: the file loads in
   `tokenizers` and gives the same ids as mtac, and mtac's ids equal llama.cpp's (the committed
   fixture tests/fixtures/tok_smollm2_llamacpp.json, and live when llama_cpp imports).
Every encoded text must also decode back to itself. Exit 0 pass, 1 fail, 77 skip (no tokenizers).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "tok_smollm2_llamacpp.json")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")

try:
    import tokenizers
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
except ImportError:
    print("SKIP: the reference python has no tokenizers (scripts/ref_env.sh)")
    sys.exit(77)


def texts(corpus):
    """The corpus as bytes; str for the items `tokenizers` can take (valid UTF-8), else None."""
    out = []
    for e in corpus:
        b = bytes.fromhex(e["hex"]) if isinstance(e, dict) else e.encode()
        out.append((b, e if isinstance(e, str) else None))
    return out


def mtac_ids(tool, how, path, corpus_file):
    r = subprocess.run([tool, "encode", how, path, corpus_file], capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"FAIL: tok_tool encode {how} {path}: {r.stderr.strip()}")
    return [json.loads(l) for l in r.stdout.splitlines()]


def fffd(b):
    """b with each byte that is not part of a UTF-8 character replaced by U+FFFD (as llama.cpp and
    mtac's byte-level BPE read text)."""
    out, j = [], 0
    while j < len(b):
        for k in (1, 2, 3, 4):
            try:
                out.append(b[j:j + k].decode())
                j += k
                break
            except UnicodeDecodeError:
                pass
        else:
            out.append("\ufffd")
            j += 1
    return "".join(out).encode()


def compare(name, got, want, items, fails, decode=None):
    """mtac's ids against want; mtac's decoding against decode(ids) (Hugging Face's), or the text."""
    bad = 0
    for k, ((b, s), g, w) in enumerate(zip(items, got, want)):
        if w is None:
            continue
        back = bytes.fromhex(g["decoded"])
        ref = decode(w).encode() if decode else fffd(b)
        if back != ref:
            print(f"FAIL {name}: text {k} {b[:40]!r}: decoded as {back[:60]!r}, not {ref[:60]!r}")
            bad += 1
        if g["ids"] != w:
            print(f"FAIL {name}: text {k} {b[:60]!r}:\n  mtac {g['ids'][:40]}\n  ref  {w[:40]}")
            bad += 1
    n = sum(w is not None for w in want)
    print(f"{name}: {n - bad}/{n} texts equal" if not bad else f"{name}: {bad} mismatches")
    fails.append(bad)


def train(kind, corpus_texts):
    if kind == "spm":
        tok = Tokenizer(models.BPE(byte_fallback=True, unk_token=None, fuse_unk=False))
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
        alphabet = []
        special = SPECIALS + [f"<0x{b:02X}>" for b in range(256)]
    else:
        tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
        if kind == "llama3":
            tok.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(tokenizers.Regex(LLAMA3_RE), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        elif kind == "gpt2_prefix":
            tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
        else:
            tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                         pre_tokenizers.ByteLevel(add_prefix_space=False)])
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        special = SPECIALS
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=special, initial_alphabet=alphabet, show_progress=False)
    tok.train_from_iterator(corpus_texts * 3, trainer)
    return tok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--corpus", default=os.path.join(ROOT, "tests", "data", "tok_corpus.json"))
    ap.add_argument("--gguf", default=os.environ.get("MTAC_SMOLLM2_GGUF"))
    ap.add_argument("--write-fixture", action="store_true")
    a = ap.parse_args()
    corpus = json.load(open(a.corpus))
    items = texts(corpus)
    fails = []
    with tempfile.TemporaryDirectory() as tmp:
        corpus_texts = [s for _, s in items if s]
        for kind in ["llama3", "gpt2_prefix", "smollm", "spm"]:
            tok = train(kind, corpus_texts)
            d = os.path.join(tmp, kind)
            os.makedirs(d)
            tok.save(os.path.join(d, "tokenizer.json"))
            want = [tok.encode(s, add_special_tokens=False).ids if s is not None else None for _, s in items]
            compare(f"trained {kind} (tokenizers)", mtac_ids(a.tool, "--run", d, a.corpus), want, items, fails,
                    lambda ids: tok.decode(ids, skip_special_tokens=False))

        if a.gguf and os.path.exists(a.gguf):
            import gguf
            r = gguf.GGUFReader(a.gguf)
            spec = {k: f.contents() for k, f in r.fields.items() if k.startswith("tokenizer.")}
            spec_file = os.path.join(tmp, "spec.json")
            json.dump(spec, open(spec_file, "w"))
            d = os.path.join(tmp, "gguf")
            os.makedirs(d)
            rc = subprocess.run([a.tool, "save", "--spec", spec_file, d], capture_output=True, text=True)
            if rc.returncode:
                sys.exit(f"FAIL: tok_tool save: {rc.stderr.strip()}")
            got = mtac_ids(a.tool, "--spec", spec_file, a.corpus)
            saved = mtac_ids(a.tool, "--run", d, a.corpus)
            compare("GGUF spec vs its saved tokenizer.json (mtac)", saved, [g["ids"] for g in got], items, fails)
            hf = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
            want = [hf.encode(s, add_special_tokens=False).ids if s is not None else None for _, s in items]
            compare("GGUF-derived tokenizer.json (tokenizers)", got, want, items, fails,
                    lambda ids: hf.decode(ids, skip_special_tokens=False))
            try:
                import llama_cpp
            except ImportError:
                llama_cpp = None
            if llama_cpp:
                llm = llama_cpp.Llama(model_path=a.gguf, vocab_only=True, verbose=False)
                live = [llm.tokenize(b, add_bos=False, special=True) if b else [] for b, _ in items]
                compare("GGUF (llama.cpp, live)", got, live, items, fails)
                if a.write_fixture:
                    json.dump({"gguf": os.path.basename(a.gguf), "corpus": "tests/data/tok_corpus.json", "ids": live},
                              open(FIXTURE, "w"))
                    print(f"wrote {FIXTURE}")
            elif a.write_fixture:
                sys.exit("--write-fixture needs llama_cpp")
            if os.path.exists(FIXTURE):
                fx = json.load(open(FIXTURE))
                if len(fx["ids"]) != len(items):
                    sys.exit("FAIL: the fixture's corpus differs from the corpus: rerun with --write-fixture")
                compare("GGUF (llama.cpp fixture)", got, fx["ids"], items, fails)
        else:
            print("GGUF checks skipped: no --gguf / MTAC_SMOLLM2_GGUF")
    if any(fails):
        print("FAIL")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
