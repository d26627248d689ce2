"""The real tier's checks (tests/test_real.sh): runs mtac on an imported SmolLM2 run for every item of
the fixture (tests/fixtures/smollm2.json) and compares its answers with the fixture's.

  check_real.py collect MTAC RUN FIXTURE > answers.json
  check_real.py compare FIXTURE ANSWERS.json...      (exit 1 on any difference)

Tolerances: logits within 1e-4 of the row's largest |logit| (the issue's bound: float32 through 30
layers of sums of length <= 1536 gives ~1e-5 relative, and a wrong weight or index moves logits by
whole units); a passage's loss within 1e-3 relative (the issue's bound). Ids are compared exactly.
"""
import json
import subprocess
import sys


def run(cmd, stdin=None):
    p = subprocess.run(cmd, input=stdin, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"check_real: {' '.join(cmd)}: exit {p.returncode}\n{p.stderr}")
    return p.stdout


def last_json(out):
    return json.loads([l for l in out.splitlines() if l.startswith("{")][-1])


def collect(mtac, rundir, fixture):
    fx = json.load(open(fixture))
    ans = {"tokenize": [], "prompts": []}
    for t in fx["tokenize"]:
        out = run([mtac, "tokenize", "--run", rundir, "--bos", "no"], stdin=t["text"])
        ans["tokenize"].append([int(x) for x in out.split()])
    for p in fx["prompts"]:
        ids = " ".join(map(str, p["ids"]))
        logits = json.loads(run([mtac, "logits", "--run", rundir], stdin=ids))
        greedy = last_json(run([mtac, "sample", "--run", rundir, "--prompt", p["text"], "--bos", "no",
                                "--tokens", str(len(p["greedy"])), "--temperature", "0", "--json"]))
        ans["prompts"].append({"prompt_ids": greedy["prompt_ids"], "greedy": greedy["ids"],
                               "logits_fixed": [[row[i] for i in fx["ids_fixed"]] for row in logits["logits"]],
                               "argmax": [max(range(len(row)), key=row.__getitem__) for row in logits["logits"]]})
    c = last_json(run([mtac, "sample", "--run", rundir, "--chat", "--prompt", fx["chat"]["prompt"],
                       "--temperature", "0", "--tokens", "40", "--json"]))
    ans["chat"] = c
    with open(rundir + "/passage.txt", "w") as f:
        f.write(fx["passage"]["text"])
    ans["passage"] = last_json(run([mtac, "eval", "--run", rundir, "--text", rundir + "/passage.txt", "--bos", "no",
                                    "--json"]))
    json.dump(ans, sys.stdout)


def compare(fixture, answers):
    fx = json.load(open(fixture))
    bad = []
    for name in answers:
        a = json.load(open(name))
        for t, got in zip(fx["tokenize"], a["tokenize"]):
            if got != t["ids"]:
                bad.append(f"{name}: tokenize {t['text']!r}: {got} != {t['ids']}")
        worst = 0.0
        for p, got in zip(fx["prompts"], a["prompts"]):
            if got["prompt_ids"] != p["ids"]:
                bad.append(f"{name}: prompt {p['text']!r} ids {got['prompt_ids']} != {p['ids']}")
            if got["greedy"] != p["greedy"][:len(got["greedy"])] or (len(got["greedy"]) < len(p["greedy"]) and
                                                                    got["greedy"][-1:] != [2]):
                bad.append(f"{name}: greedy after {p['text']!r}: {got['greedy']} != {p['greedy']}")
            for pos, (row, exp, top, mx) in enumerate(zip(got["logits_fixed"], p["logits_fixed"], p["top_ids"],
                                                          p["max_abs_logit"])):
                err = max(abs(x - y) for x, y in zip(row, exp)) / mx
                worst = max(worst, err)
                if err > 1e-4:
                    bad.append(f"{name}: logits of {p['text']!r} at {pos}: {err:.2e} of the largest > 1e-4")
                if got["argmax"][pos] != top[0]:
                    bad.append(f"{name}: argmax of {p['text']!r} at {pos}: {got['argmax'][pos]} != {top[0]}")
        c = a["chat"]
        if c["prompt_ids"] != fx["chat"]["prompt_ids"] or c["ids"] != fx["chat"]["ids"]:
            bad.append(f"{name}: chat ids {c['prompt_ids']} -> {c['ids']} != {fx['chat']['prompt_ids']} -> "
                       f"{fx['chat']['ids']}")
        if not c["text"].startswith("The capital of France is Paris."):
            bad.append(f"{name}: chat answer {c['text']!r}")
        ps, exp = a["passage"], fx["passage"]
        rel = abs(ps["loss"] - exp["loss"]) / exp["loss"]
        if ps["tokens"] != exp["tokens"] or rel > 1e-3:
            bad.append(f"{name}: passage loss {ps['loss']} over {ps['tokens']} tokens != {exp['loss']} over "
                       f"{exp['tokens']} (relative {rel:.1e} > 1e-3)")
        print(f"check_real: {name}: logits within {worst:.1e} of the largest; passage loss {ps['loss']:.6f} "
              f"(transformers {exp['loss']:.6f}); chat: {c['text']!r}")
    for b in bad:
        print("FAIL:", b)
    print(f"check_real: {len(bad)} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    if sys.argv[1] == "collect":
        collect(*sys.argv[2:5])
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3:]))
