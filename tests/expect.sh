# expect.sh: the checks of the shell tests (test_cli.sh, test_tokcli.sh, test_retrofit.sh,
# test_train_resume.sh), sourced by each. They count into pass and fail; a test ends with
# `finish NAME`, which prints "NAME: N passed, M failed" and fails when any did.
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
