#!/usr/bin/env bash
# test_docs.sh BUILD SRC: the commands the docs give a user, run as written.
# A shell block of README.md or docs/*.md whose fence is preceded by the line
#     <!-- doctest -->                      runs as it is, or by
#     <!-- doctest: SED; SED -->            runs after these sed substitutions (smaller sizes where a
#                                          command trains: the doc shows the real ones; one test of a
#                                          test program CTest runs in full anyway)
# Blocks run in order (README.md, then docs/*.md by name), each with bash -e -o pipefail. Each
# page gets a fresh scratch copy of SRC's tracked files whose build/ is BUILD (the docs say
# build/mtac), as a reader starting on that page has: a block may use what an earlier block of
# the same page made, never what another page made. A failing block is listed with the end of
# its output; each block's seconds are printed. MTAC_DOCTEST_ONLY=FILE runs one page.
set -u
BUILD=$(cd "$1" && pwd)
SRC=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
work=$tmp/tree
# the tracked files as they are in the working tree (a fresh clone in CI), once; each page's
# scratch copy is made from it
(cd "$SRC" && git ls-files -z | xargs -0 tar -cf -) > "$tmp/tree.tar" || { echo "test_docs: cannot copy $SRC"; exit 1; }
# CI runs as root, which mpirun refuses unless allowed (the docs' mpirun lines say "as root:
# mpirun --allow-run-as-root"); the environment allows it, so the blocks run as written
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
pass=0 fail=0
# First, what a clone cannot have: a citation of the spec's old location outside the repository
# (the spec is docs/spec.md) or a path of one particular machine. Every tracked text file is
# searched; a path that only ends in such a name ($tmp/work/) is fine. The patterns are
# bracketed so that this file does not match itself.
bad=$(git -C "$SRC" ls-files -z | (cd "$SRC" && xargs -0 grep -nIsE 'shared/mta-spe[c]|(^|[^[:alnum:]_.$~-])[/](work|home|root)[/]' --))
if [ -n "$bad" ]; then
    fail=$((fail + 1))
    echo "FAIL: tracked files cite the spec outside the repository (use docs/spec.md) or a machine's path:"
    printf '%s\n' "$bad" | sed 's/^/    | /'
fi
pages=("$SRC/README.md" "$SRC"/docs/*.md)
[ -n "${MTAC_DOCTEST_ONLY:-}" ] && pages=("$SRC/$MTAC_DOCTEST_ONLY")
for page in "${pages[@]}"; do
    rel=${page#"$SRC"/}
    rm -rf "$work" && mkdir -p "$work" && tar -xf "$tmp/tree.tar" -C "$work" && ln -s "$BUILD" "$work/build" ||
        { echo "test_docs: cannot make the scratch copy"; exit 1; }
    # each marked block into a file of its own: LINE<tab>SED on the first line, then the block
    rm -rf "$tmp/blocks" && mkdir "$tmp/blocks"
    awk -v dir="$tmp/blocks" '
        /^<!-- doctest(:.*)? -->$/ { sed = $0; sub(/^<!-- doctest:? */, "", sed); sub(/ *-->$/, "", sed); want = NR + 1; next }
        NR == want && /^```/ { inblock = 1; f = sprintf("%s/%06d", dir, NR); printf "%d\t%s\n", NR, sed > f; next }
        inblock && /^```/ { inblock = 0; close(f); next }
        inblock { print > f }
    ' "$page"
    for f in "$tmp"/blocks/*; do
        [ -e "$f" ] || continue
        head=$(head -1 "$f")
        line=${head%%$'\t'*}
        sed_script=${head#*$'\t'}
        body=$(tail -n +2 "$f")
        [ -n "$sed_script" ] && body=$(printf '%s\n' "$body" | sed -e "$sed_script")
        log=$tmp/log
        t0=$SECONDS
        (cd "$work" && timeout 600 bash -e -o pipefail -c "$body") >"$log" 2>&1
        rc=$?
        echo "docs: $rel:$line $((SECONDS - t0)) s"
        if [ "$rc" = 0 ]; then
            pass=$((pass + 1))
        else
            fail=$((fail + 1))
            echo "FAIL: $rel:$line (exit $rc):"
            printf '%s\n' "$body" | sed 's/^/    | /'
            tail -15 "$log" | sed 's/^/    > /'
        fi
    done
done
echo "docs: $pass passed, $fail failed"
[ "$fail" = 0 ] && [ "$pass" -gt 0 ]
