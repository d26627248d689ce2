#!/usr/bin/env python3
"""check_tokenizer.py: mtac's tokenizers (src/tok) against Hugging Face's tokenizers and llama.cpp.

    check_tokenizer.py --tool build/tok_tool [--corpus tests/data/tok_corpus.json] [--gguf FILE]
    check_tokenizer.py --tool build/tok_tool --gguf FILE --write-fixture   (needs llama_cpp)

1. Tokenizers trained here with `tokenizers` on the corpus (byte-level BPE with Llama 3's Split
   regex, GPT-2's ByteLevel, SentencePiece-style BPE with byte fallback and the Prepend/Replace
   normalizer, each with added tokens): ids equal `tokenizers`' on every text of the corpus.
2. With SmolLM2's Hugging Face directory (--hf-dir, or env MTAC_SMOLLM2_HF): its tokenizer.json
   gives `tokenizers`' ids and llama.cpp's (the fixture below).
3. With a GGUF file (--gguf, or env MTAC_SMOLLM2_GGUF): its tokenizer.ggml.* keys, dumped with the
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
PRE_TYPES = ["gpt-2", "llama-bpe", "qwen2", "default", None]  # None: no tokenizer.ggml.pre
QWEN2_RE = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
            r"|\s*[\r\n]+|\s+(?!\S)|\s+")
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
        if decode is not False and back != ref:
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
    elif kind.startswith("metaspace"):  # the older SentencePiece layout (Mistral's, some Llama 2 files)
        scheme, split = {"metaspace": ("first", False), "metaspace_split": ("always", True)}[kind]
        tok = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>", fuse_unk=True))
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=scheme, split=split)
        tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme=scheme, split=split)
        alphabet = []
        special = SPECIALS + [f"<0x{b:02X}>" for b in range(256)] + ["<unk>"]
    else:
        tok = Tokenizer(models.BPE(ignore_merges=(kind == "llama3")))
        if kind in ("llama3", "qwen2"):
            tok.pre_tokenizer = pre_tokenizers.Sequence([
                pre_tokenizers.Split(tokenizers.Regex(LLAMA3_RE if kind == "llama3" else QWEN2_RE), behavior="isolated",
                                     invert=False),
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


def vocab_gguf(path, model, tokens, types, scores=None, merges=None, pre=None, bos=0, eos=0):
    """A vocabulary-only GGUF (llama.cpp reads it with vocab_only)."""
    import gguf
    w = gguf.GGUFWriter(path, "llama")
    for k, v in [("context_length", 64), ("embedding_length", 8), ("block_count", 1), ("feed_forward_length", 8)]:
        getattr(w, f"add_{k}")(v)
    w.add_head_count(1)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model(model)
    if pre:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    if scores:
        w.add_token_scores(scores)
    w.add_token_types(types)
    if merges:
        w.add_token_merges(merges)
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_add_space_prefix(model == "llama")
    w.add_add_bos_token(False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def spm_gguf(tok, path):
    """A SentencePiece-style tokenizer as GGUF "llama" (Llama 2's layout: control tokens, <0xXX>
    byte tokens, pieces scored by their order, add_space_prefix)."""
    vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
    tokens, scores, types = [], [], []
    for piece, i in vocab:
        tokens.append(piece)
        byte = piece.startswith("<0x") and len(piece) == 6
        types.append(3 if piece in SPECIALS else 6 if byte else 1)
        scores.append(0.0 if piece in SPECIALS or byte else -float(i))
    vocab_gguf(path, "llama", tokens, types, scores, bos=tokens.index("<|endoftext|>"), eos=tokens.index("<|im_end|>"))


def gguf_spec(path, tmp):
    import gguf
    r = gguf.GGUFReader(path)
    spec = {k: f.contents() for k, f in r.fields.items() if k.startswith("tokenizer.")}
    spec_file = os.path.join(tmp, os.path.basename(path) + ".spec.json")
    json.dump(spec, open(spec_file, "w"))
    return spec_file


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tool", required=True)
    ap.add_argument("--corpus", default=os.path.join(ROOT, "tests", "data", "tok_corpus.json"))
    ap.add_argument("--gguf", default=os.environ.get("MTAC_SMOLLM2_GGUF"))
    ap.add_argument("--hf-dir", default=os.environ.get("MTAC_SMOLLM2_HF"),
                    help="a Hugging Face directory of SmolLM2 (its own tokenizer.json)")
    ap.add_argument("--write-fixture", action="store_true")
    a = ap.parse_args()
    corpus = json.load(open(a.corpus))
    items = texts(corpus)
    fails = []
    try:
        import llama_cpp
    except ImportError:
        llama_cpp = None
    with tempfile.TemporaryDirectory() as tmp:
        corpus_texts = [s for _, s in items if s]
        for kind in ["llama3", "qwen2", "gpt2_prefix", "smollm", "spm", "metaspace", "metaspace_split"]:
            tok = train(kind, corpus_texts)
            d = os.path.join(tmp, kind)
            os.makedirs(d)
            tok.save(os.path.join(d, "tokenizer.json"))
            want = [tok.encode(s, add_special_tokens=False).ids if s is not None else None for _, s in items]
            compare(f"trained {kind} (tokenizers)", mtac_ids(a.tool, "--run", d, a.corpus), want, items, fails,
                    lambda ids: tok.decode(ids, skip_special_tokens=False))
            gguf_pre = {"llama3": "llama-bpe", "qwen2": "qwen2", "smollm": "smollm"}.get(kind)
            if gguf_pre and llama_cpp:
                # the same vocabulary and merges as a GGUF gpt2 tokenizer of llama.cpp's pre type
                # for this regex (a vocabulary trained with it tells the pre-tokenizers apart)
                g = os.path.join(tmp, f"{kind}.gguf")
                model = json.loads(tok.to_str())["model"]
                vocab = sorted(tok.get_vocab().items(), key=lambda kv: kv[1])
                merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
                vocab_gguf(g, "gpt2", [p for p, _ in vocab], [3 if p in SPECIALS else 1 for p, _ in vocab],
                           merges=merges, pre=gguf_pre, bos=0, eos=0)
                llm = llama_cpp.Llama(model_path=g, vocab_only=True, verbose=False)
                live = [llm.tokenize(b, add_bos=False, special=True) if b else [] for b, _ in items]
                compare(f"trained {kind} as GGUF pre {gguf_pre} (llama.cpp, live)",
                        mtac_ids(a.tool, "--spec", gguf_spec(g, tmp), a.corpus), live, items, fails, False)
            if kind == "spm" and llama_cpp:
                # the same pieces as a GGUF "llama" tokenizer (merges by score): mtac vs llama.cpp
                g = os.path.join(tmp, "spm.gguf")
                spm_gguf(tok, g)
                llm = llama_cpp.Llama(model_path=g, vocab_only=True, verbose=False)
                # (the valid UTF-8 texts: on other bytes llama.cpp's SentencePiece reader differs from
                # byte fallback; ids only: llama.cpp keeps the first space in decoding, Hugging Face not)
                live = [llm.tokenize(b, add_bos=False, special=True) if s is not None else None for b, s in items]
                compare("trained spm as GGUF llama (llama.cpp, live)", mtac_ids(a.tool, "--spec", gguf_spec(g, tmp), a.corpus),
                        live, items, fails, False)

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
            live_pre = {}
            if llama_cpp:
                llm = llama_cpp.Llama(model_path=a.gguf, vocab_only=True, verbose=False)
                live = [llm.tokenize(b, add_bos=False, special=True) if b else [] for b, _ in items]
                compare("GGUF (llama.cpp, live)", got, live, items, fails)
                for pre in PRE_TYPES:
                    g = os.path.join(tmp, f"pre-{pre}.gguf")
                    vocab_gguf(g, "gpt2", spec["tokenizer.ggml.tokens"], spec["tokenizer.ggml.token_type"],
                               merges=spec["tokenizer.ggml.merges"], pre=pre, bos=1, eos=2)
                    llm = llama_cpp.Llama(model_path=g, vocab_only=True, verbose=False)
                    live_pre[str(pre)] = [llm.tokenize(b, add_bos=False, special=True) if b else [] for b, _ in items]
                if a.write_fixture:
                    json.dump({"gguf": os.path.basename(a.gguf), "corpus": "tests/data/tok_corpus.json", "ids": live,
                               "pre_types": live_pre}, open(FIXTURE, "w"))
                    print(f"wrote {FIXTURE}")
            elif a.write_fixture:
                sys.exit("--write-fixture needs llama_cpp")
            if os.path.exists(FIXTURE):
                fx = json.load(open(FIXTURE))
                if len(fx["ids"]) != len(items):
                    sys.exit("FAIL: the fixture's corpus differs from the corpus: rerun with --write-fixture")
                compare("GGUF (llama.cpp fixture)", got, fx["ids"], items, fails)
            # SmolLM2's vocabulary and merges under llama.cpp's other byte-level pre types
            fx_pre = json.load(open(FIXTURE)).get("pre_types", {}) if os.path.exists(FIXTURE) else {}
            for pre in PRE_TYPES:
                s2 = {k: v for k, v in spec.items() if k != "tokenizer.ggml.pre"}
                if pre:
                    s2["tokenizer.ggml.pre"] = pre
                f2 = os.path.join(tmp, f"spec-{pre}.json")
                json.dump(s2, open(f2, "w"))
                ids = mtac_ids(a.tool, "--spec", f2, a.corpus)
                for src, want in [("live", live_pre.get(str(pre))), ("fixture", fx_pre.get(str(pre)))]:
                    if want:
                        compare(f"SmolLM2 vocabulary, pre {pre} (llama.cpp {src})", ids, want, items, fails, False)
        else:
            print("GGUF checks skipped: no --gguf / MTAC_SMOLLM2_GGUF")

        if a.hf_dir and os.path.exists(os.path.join(a.hf_dir, "tokenizer.json")):
            # SmolLM2's own tokenizer.json: tokenizers, and llama.cpp's ids for its GGUF
            hf = Tokenizer.from_file(os.path.join(a.hf_dir, "tokenizer.json"))
            got = mtac_ids(a.tool, "--run", a.hf_dir, a.corpus)
            want = [hf.encode(s, add_special_tokens=False).ids if s is not None else None for _, s in items]
            compare("SmolLM2 tokenizer.json (tokenizers)", got, want, items, fails,
                    lambda ids: hf.decode(ids, skip_special_tokens=False))
            if os.path.exists(FIXTURE):
                compare("SmolLM2 tokenizer.json (llama.cpp fixture)", got, json.load(open(FIXTURE))["ids"], items, fails)
        else:
            print("Hugging Face directory checks skipped: no --hf-dir / MTAC_SMOLLM2_HF")
    if any(fails):
        print("FAIL")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
