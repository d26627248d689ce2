#!/usr/bin/env bash
# test_doc_paths.sh SRC: every repository path and C name the docs give still exists.
# In README.md and docs/*.md:
#  - a path under one of the repository's top folders (src/attn/mta.c, tests/ref/, scripts/...),
#    anywhere in the text, must exist in SRC;
#  - a name in backquotes that has an underscore (`mta_forward`, `MTAC_TIERS`, `tc_round()`) must
#    occur as a word in the sources (outside docs/ and README.md).
# A placeholder is skipped: a path or name with NAME in it, or one ending in "_" (a prefix:
# tests/fuzz/fuzz_<target>.c).
# Names the docs cite from outside the project (CUDA intrinsics, other projects' keys) are listed
# in OUTSIDE below.
set -u
SRC=$(cd "${1:-.}" && pwd)
cd "$SRC" || exit 1
OUTSIDE=" __shfl_up_sync __shfl_down_sync ffn_dim_multiplier p_drop "
roots='src|cli|tests|scripts|bench|include|python|examples|cmake|docs'
fail=0 paths=0 names=0
# every word of the sources (the files git tracks or would: not build/; not the docs), once
words=$(mktemp)
trap 'rm -f "$words"' EXIT
git grep --untracked -ohE '[A-Za-z_][A-Za-z0-9_]*' -- . ':!docs' ':!README.md' | sort -u > "$words" || exit 1
for page in README.md docs/*.md; do
    # paths: a root folder not preceded by a path or word character (so src/attn/cuda_emu/include/x.h
    # is one path, and a URL's /src/ is not one)
    while IFS=: read -r line p; do
        p=${p#"${p%%[a-z]*}"}              # drop the character before the root
        while :; do case "$p" in *. | */ | *,) p=${p%?} ;; *) break ;; esac; done
        case "$p" in *NAME* | *_) continue ;; esac
        paths=$((paths + 1))
        [ -e "$p" ] || { echo "$page:$line: no such file or directory: $p"; fail=$((fail + 1)); }
    done < <(grep -noE "(^|[^A-Za-z0-9_./~\$-])($roots)/[A-Za-z0-9_./+-]*" "$page")
    # names
    while IFS=: read -r line w; do
        w=${w//\`/}; w=${w%()}
        case "$w" in *NAME* | *_) continue ;; esac
        case "$OUTSIDE" in *" $w "*) continue ;; esac
        names=$((names + 1))
        grep -qFx -e "$w" "$words" ||
            { echo "$page:$line: \`$w\` is in no source file"; fail=$((fail + 1)); }
    done < <(grep -noE '`[A-Za-z_][A-Za-z0-9_]*_[A-Za-z0-9_]*(\(\))?`' "$page")
done
echo "doc paths: $paths paths, $names names checked, $fail missing"
[ "$fail" = 0 ] && [ "$paths" -gt 0 ] && [ "$names" -gt 0 ]
