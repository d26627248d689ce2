# expect.sh: the checks of the shell tests (test_cli.sh, test_tokcli.sh, test_retrofit.sh,
# test_train_resume.sh, test_distributed.sh), sourced by each. They count into pass and fail; a test
# ends with `finish NAME`, which prints "NAME: N passed, M failed" and fails when any did.
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
# ok_if COND MESSAGE: one more pass when the test command COND succeeds, else a failure saying MESSAGE.
ok_if() { if eval "$1"; then ok; else bad "$2"; fi; }
# expect CODE NEEDLE -- CMD...: exit status CODE (or "nonzero") and NEEDLE in the output; a signal
# (a crash) is never acceptable.
expect() {
    local want=$1 needle=$2
    shift 3
    local out rc
    out=$("$@" 2>&1)
    rc=$?
    local good=1
    if [ "$want" = nonzero ]; then [ $rc -ne 0 ] || good=0; else [ $rc -eq "$want" ] || good=0; fi
    [ $rc -ge 128 ] && good=0
    case "$out" in *"$needle"*) ;; *) good=0 ;; esac
    if [ $good = 1 ]; then
        ok
    else
        bad "$* -> exit $rc, wanted $want with '$needle'; output:"
        echo "$out" | head -5
    fi
}
finish() {
    echo "$1: $pass passed, $fail failed"
    [ $fail -eq 0 ]
}
# lines FILE: how many lines FILE has, 0 while it does not exist (a run that has not logged yet).
lines() { if [ -f "$1" ]; then wc -l < "$1"; else echo 0; fi; }
# tiny_mta_run DIR MTAC SETTINGS: DIR/data, a fixed text (Genesis and most of Exodus, KJV, kept as
# DIR/corpus.txt) made into shards, and DIR/cfg.json: the training SETTINGS (JSON members) for a
# tiny MTA model with every step on and attention dropout (its masks must be reproduced on resume
# and must not depend on the rank).
tiny_mta_run() {
    cp "$(dirname "${BASH_SOURCE[0]}")"/data/corpus.txt "$1/corpus.txt"
    "$2" data --out "$1/data" --val-every 3 "$1/corpus.txt" > /dev/null || { echo "FAIL: mtac data"; exit 1; }
    cat > "$1/cfg.json" <<JSON
{$3,
 "model": {"dim": 32, "n_layers": 2, "n_heads": 4, "vocab_size": 259, "hidden_dim": 64, "attn_dropout": 0.1,
           "mta": {"qk_layers": [1], "pre_cq": 2, "pre_ck": 3, "post_cq": 2, "post_ck": 3,
                   "pre_head_mix": true, "post_ch": 2, "group_norm": true, "gate": true}}}
JSON
}
