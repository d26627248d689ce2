#!/usr/bin/env bash
# run.sh [OUT]: the GPU side of scripts/gpu_check.sh. `scripts/gpu_check.sh prepare` copies this file
# to gpu-bundle/run.sh; on the GPU machine, from the repository root: bash gpu-bundle/run.sh "$OUT".
# Builds nothing and fetches nothing. In order, each step under its own timeout (under 8 minutes
# in all), its output going straight to its own log in OUT (default gpu-out/):
#   machine.txt  nvidia-smi, the driver, gpu_probe (runtime vs driver CUDA versions, the devices);
#                then cluster_probe (into machine.txt too: the device tool brings back 8 files):
#                distributed shared memory all-gather throughput and barrier.cluster times at
#                cluster sizes 2 and 4, verified (the performance model's DSMEM_BW and
#                CLUSTER_BARRIER: bench/cuda_perf_model.py --probe OUT/bench.jsonl);
#   libs.log     the bundle's Debian packages unpacked (dpkg -x) into a temporary prefix, cuBLAS
#                looked for on the machine, then ldd: every library each binary needs is found;
#   test.log     test_attn_backends cuda: the whole matrix against the reference backend;
#   sanitizer.log  compute-sanitizer memcheck, racecheck, synccheck, initcheck on
#                MTAC_SWEEP=quick test_attn_backends cuda;
#   torch.log    python/tests/test_torch_device.py's CUDA tests (mtac.torch on CUDA tensors, with the
#                bundle's python/mtac), then the PyTorch benchmark below;
#   bench_cuda.log first issue 46's goal rows: bf16 (tensors and precision), B=2, H=16, d=96:
#                the 830M conv layer (mta830m) at T = 4096 and 32768, again at 4096 without
#                determinism, the head-only layer (mta830m-heads) at 4096; then the float32 rows:
#                the 830M layer's MTA and plain attention, B=1, (H,d) = (8,64) and (16,96),
#                T = 2048, 4096; group norm and gate alone (what the bf16 tensor-core path covers)
#                in fp32 and bf16 at (8,64);
#   torch.log    bench/bench_torch_cuda.py: PyTorch SDPA in bf16 at the goal rows' shape (their
#                bar), then SDPA (bf16, fp32) and the naive MTA at small T (skipped, not failed,
#                without torch);
#   bench.jsonl  every benchmark row and cluster_probe's; summary.txt one line per step, written as
#                each ends, and the goal rows measured beside the model's predictions
#                (bench/cuda_perf_model.py --measured bench.jsonl, where the repository is here).
# Exit 0 when every check passed; 1 when one failed (cluster_probe's verify pass too, though it does
# not stop the benchmarks: it checks the cluster instructions, not the backend's results); 5 when none failed but one did not finish
# (a timeout; the budget spent); 3 when there is no usable GPU (nothing was checked); 4 when a
# library is missing. MTAC_GPU_CHECK_LIBS_ONLY=1 runs the library check alone,
# GPU or not (to try a bundle on any x86-64 Linux machine).
set -u
case "${1:-}" in -h | --help)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 0
    ;;
esac
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/bin
out=${1:-gpu-out}
mkdir -p "$out" && out=$(cd "$out" && pwd) || { echo "run.sh: cannot make $out" >&2; exit 2; }
export OMP_WAIT_POLICY=passive PYTHONUNBUFFERED=1
summary=$out/summary.txt
: >"$summary"
budget=${MTAC_GPU_BUDGET_S:-465}  # the sum of the steps' timeouts stays under this (8 min = 480 s)
deadline=$((SECONDS + budget))
failed=0 incomplete=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mtac-gpu.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

# note NAME STATUS SECONDS FIGURES: one line of summary.txt, echoed.
note() {
    local line
    line=$(printf '%-13s %-10s %4ss  %s' "$1" "$2" "$3" "$4")
    echo "$line" >>"$summary"
    echo "$line"
}
finish() {  # finish CODE MESSAGE
    local s=FAIL
    case $1 in 0) s=PASS ;; 3) s=NO-GPU ;; 5) s=INCOMPLETE ;; esac
    note overall "$s" "$SECONDS" "$2"
    for f in "$out"/*; do [ -f "$f" ] && truncate -s '<15M' "$f"; done
    exit "$1"
}
buf=()
command -v stdbuf >/dev/null && buf=(stdbuf -oL -eL)
# run LIMIT LOG CMD...: CMD with the bundle's libraries, line-buffered, stdout and stderr appended
# to LOG, killed after LIMIT seconds (less when the budget has less left). Sets rc and secs;
# rc 125 when no time was left to start it.
run() {
    local limit=$1 log=$2 left
    shift 2
    left=$((deadline - SECONDS))
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $(date -u +%H:%M:%S) $* (timeout ${limit}s)" >>"$log"
    if [ "$limit" -lt 5 ]; then
        echo "== not run: the time budget is spent" >>"$log"
        rc=125 secs=0
        return
    fi
    local t0=$SECONDS
    timeout -k 5 "$limit" "${buf[@]}" env LD_LIBRARY_PATH="$libpath" "$@" >>"$log" 2>&1
    rc=$? secs=$((SECONDS - t0))
    echo "== exit $rc after ${secs}s" >>"$log"
}
# tally RC: counts a step's exit status towards the overall result.
tally() {
    case $1 in
    0) ;;
    124 | 137 | 125) incomplete=1 ;;
    *) failed=1 ;;
    esac
}
# status RC: PASS, TIMEOUT, NOTRUN or "FAIL(rc)".
status() {
    case $1 in
    0) echo PASS ;;
    124 | 137) echo TIMEOUT ;;
    125) echo NOTRUN ;;
    *) echo "FAIL($1)" ;;
    esac
}

echo "mtac GPU check: results in $out"
[ -f "$here/MANIFEST.txt" ] && head -6 "$here/MANIFEST.txt"

# ---- machine information; stop here without a GPU ----
orig_ld=${LD_LIBRARY_PATH:-}
libpath=$orig_ld  # the machine's own until the bundle's libraries are unpacked
m=$out/machine.txt
{
    date -u
    uname -a
    grep -m1 PRETTY_NAME /etc/os-release 2>/dev/null
    echo "glibc: $(ldd --version 2>/dev/null | head -1)"
    echo "cpus: $(nproc) x $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2)"
    cat /proc/driver/nvidia/version 2>/dev/null
} >"$m" 2>&1
gpu=1 why=''
if ! command -v nvidia-smi >/dev/null; then
    gpu=0 why='nvidia-smi not found'
else
    run 10 "$m" nvidia-smi
    [ "$rc" = 0 ] || gpu=0 why="nvidia-smi failed (exit $rc)"
    run 5 "$m" nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv
fi
if [ $gpu = 1 ]; then
    run 10 "$m" "$bin/gpu_probe"
    [ "$rc" = 0 ] || gpu=0 why="gpu_probe: $(grep -v '^==' "$m" | tail -2 | tr '\n' ' ')"
fi
gpu_name=$(timeout 5 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
drv=$(grep -m1 '^driver supports' "$m" | sed 's/^driver supports: *//')
if [ $gpu = 1 ]; then
    note machine ok "$SECONDS" "${gpu_name:-?}; driver for $drv; bundle: $(sed -n 's/^commit: //p' "$here/MANIFEST.txt" 2>/dev/null)"
else
    note machine NO-GPU "$SECONDS" "$why"
fi
if [ $gpu = 0 ] && [ -z "${MTAC_GPU_CHECK_LIBS_ONLY:-}" ]; then
    echo "no GPU: nothing was checked ($why)" | tee -a "$summary" >&2
    finish 3 "no GPU: nothing was checked"
fi

# ---- 0. the cluster probe (the CUDA runtime linked in: the driver is all it needs) ----
cl_failed=0
if [ $gpu = 1 ]; then
    run 15 "$m" "$bin/cluster_probe"
    s=$(status $rc)
    [ "$rc" = 77 ] && s=SKIPPED
    case $rc in 0 | 77) ;; 124 | 137 | 125) incomplete=1 ;; *) cl_failed=1 ;; esac
    grep -h '^{"probe": "cluster"' "$m" >"$out/bench.jsonl"
    figs=$(sed -n 's/^summary: //p' "$m")
    note cluster "$s" "$secs" "${figs:-$(sed -n '/== .*cluster_probe/,$p' "$m" | grep -v -e '^{' -e '^==' | tail -1)}"
fi

# ---- 1. the libraries ----
l=$out/libs.log
t0=$SECONDS
: >"$l"
prefix=$tmp/root
mkdir -p "$prefix"
unpack() {  # unpack DEB: dpkg -x, or Python's ar and tar readers where dpkg is missing
    if command -v dpkg >/dev/null; then
        dpkg -x "$1" "$prefix"
    else
        python3 - "$1" "$prefix" <<'EOF'
import io, sys, tarfile
data = open(sys.argv[1], 'rb').read()
pos = 8
while pos < len(data):
    name, size = data[pos:pos + 16].decode().strip().rstrip('/'), int(data[pos + 48:pos + 58])
    if name.startswith('data.tar'):
        tarfile.open(fileobj=io.BytesIO(data[pos + 60:pos + 60 + size])).extractall(sys.argv[2])
    pos += 60 + size + size % 2
EOF
    fi
}
for d in "$here"/deb/*.deb; do
    [ -f "$d" ] || continue
    unpack "$d" >>"$l" 2>&1 || echo "could not unpack $(basename "$d")" >>"$l"
done
debdirs=$(find "$prefix" -name '*.so*' -printf '%h\n' 2>/dev/null | sort -u | tr '\n' ':')
libpath=$bin:${debdirs%:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
objs=("$bin/test_attn_backends" "$bin/bench_cuda")
[ -f "$here/python/mtac/libmtac.so" ] && objs+=("$here/python/mtac/libmtac.so")
for f in "$bin"/libmtac_cuda.so*; do [ -f "$f" ] && [ ! -L "$f" ] && objs+=("$f"); done
missing() {  # the libraries ldd finds for none of the objects
    for o in "${objs[@]}"; do LD_LIBRARY_PATH=$libpath ldd "$o" 2>&1 | sed -n 's/^[[:space:]]*\([^ ]*\) => not found/\1/p'; done | sort -u
}
# cuBLAS and the like are not carried: look for them where CUDA installs put them.
# Up to 3 rounds: a library found can need another (libcublas needs libcublasLt).
searched=' '
for _ in 1 2 3; do
miss=$(missing)
new=''
for name in $miss; do [[ $searched == *" $name "* ]] || new="$new $name"; done
[ -n "$new" ] || break
searched="$searched${new# } "
miss=$new
if [ -n "$miss" ]; then
    cands=(/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/local/cuda-*/lib64
        /usr/local/cuda-*/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu /usr/local/lib /opt/nvidia/lib64)
    if command -v python3 >/dev/null; then
        while read -r sp; do
            cands+=("$sp"/nvidia/*/lib "$sp"/torch/lib)
        done < <(timeout 20 python3 -c 'import site, sys; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null)
    fi
    for name in $miss; do
        found=''
        for dir in "${cands[@]}"; do
            if [ -e "$dir/$name" ]; then found=$dir && break; fi
        done
        if [ -z "$found" ]; then
            found=$(timeout 20 find / -xdev \( -path /proc -o -path /sys \) -prune -o -name "$name" -print 2>/dev/null | head -1)
            found=${found%/*}
        fi
        if [ -n "$found" ]; then
            echo "$name: found in $found" >>"$l"
            libpath=$libpath:$found
        else
            echo "$name: not found on this machine" >>"$l"
        fi
    done
fi
done
for o in "${objs[@]}"; do
    echo "== ldd $(basename "$o")" >>"$l"
    timeout 10 env LD_LIBRARY_PATH="$libpath" ldd "$o" >>"$l" 2>&1
done
echo "LD_LIBRARY_PATH=$libpath" >>"$l"
miss=$(missing)
badver=$(grep -h 'version .* not found' "$l" | sort -u | head -3)
if [ -n "$miss" ] || [ -n "$badver" ]; then
    why="missing: $(echo $miss | tr ' ' ',')${badver:+ $badver}"
    [[ $miss == *cublas* ]] && why="$why (cuBLAS is not carried: the machine needs the CUDA toolkit's or the nvidia-cublas wheel's)"
    note libs FAIL $((SECONDS - t0)) "$why"
    finish 4 "a library is missing: nothing was run"
fi
cublas=$(grep -h -o 'libcublas\.so[^ ]* => [^ ]*' "$l" | head -1)
note libs ok $((SECONDS - t0)) "every library found; ${cublas:-no cuBLAS needed}"
[ -n "${MTAC_GPU_CHECK_LIBS_ONLY:-}" ] && finish 0 "MTAC_GPU_CHECK_LIBS_ONLY: the library check alone"

# ---- 2. the whole matrix against the reference backend ----
log=$out/test.log
: >"$log"
run 110 "$log" "$bin/test_attn_backends" cuda
if [ "$rc" = 77 ]; then
    note test SKIPPED "$secs" "test_attn_backends cuda exit 77: the CUDA backend is not available (see test.log)"
    echo "no GPU: nothing was checked (the CUDA backend says it cannot run here though gpu_probe found a device)" | tee -a "$summary" >&2
    finish 3 "no GPU: nothing was checked"
fi
tally "$rc"
figs=$(grep -E '^\[ *(PASSED|FAILED) *\]' "$log" | tr -s ' ' | tr '\n' ' ')
note test "$(status $rc)" "$secs" "${figs:-no cmocka summary (see test.log)}"

# ---- 3. compute-sanitizer on the quick matrix ----
log=$out/sanitizer.log
: >"$log"
cs=$(command -v compute-sanitizer)
for c in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer /opt/nvidia/compute-sanitizer/compute-sanitizer; do
    [ -n "$cs" ] && break
    [ -x "$c" ] && cs=$c
done
for tool in memcheck racecheck synccheck initcheck; do
    if [ -z "$cs" ]; then
        note "$tool" SKIPPED 0 "compute-sanitizer not found on this machine"
        continue
    fi
    run 30 "$log" env MTAC_SWEEP=quick "$cs" --tool "$tool" --error-exitcode 9 "$bin/test_attn_backends" cuda
    s=$(status $rc)
    [ "$rc" = 9 ] && s=ERRORS
    tally "$rc"
    figs=$(sed -n '/== .*--tool '"$tool"'/,$p' "$log" | grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' | tail -1 | sed 's/^=* *//')
    [ "$rc" = 124 ] || [ "$rc" = 137 ] && figs="timed out: incomplete${figs:+; $figs}"
    [ "$rc" = 125 ] && figs="not run: the time budget was spent"
    note "$tool" "$s" "$secs" "${figs:-no summary line}"
done

# ---- 4. the PyTorch op on CUDA tensors ----
# python/tests/test_torch_device.py's CUDA tests (TestCuda: against the CPU backend, pointers and
# streams, the context cache, the errors, the module) with the bundle's package; torch loads its
# own CUDA runtime and cuBLAS, which libmtac_cuda.so then shares (same sonames), so only the
# Debian packages' directories (OpenBLAS for libmtac.so) go on the library path.
log=$out/torch.log
: >"$log"
tests=$(cd "$here/.." && pwd)/python/tests
torch_tests() {
    if ! command -v python3 >/dev/null; then
        note torch:op SKIPPED 0 "python3 not found"
        return
    fi
    if [ ! -f "$tests/test_torch_device.py" ]; then
        note torch:op SKIPPED 0 "no $tests/test_torch_device.py: run from the repository root"
        return
    fi
    local keep=$libpath
    libpath=${debdirs%:}${orig_ld:+:$orig_ld}
    # pytest where there is one, else unittest (the tests are unittest classes)
    if timeout 20 python3 -c 'import pytest' 2>/dev/null; then
        run 40 "$log" env -C "$tests" PYTHONPATH="$here/python" python3 -m pytest -q -rs -p no:cacheprovider -k TestCuda test_torch_device.py
    else
        run 40 "$log" env -C "$tests" PYTHONPATH="$here/python" python3 -m unittest -v test_torch_device.TestCuda
    fi
    libpath=$keep
    local s figs
    s=$(status $rc)
    figs=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped)|^(OK|FAILED)|^Ran ' "$log" | tail -2 | tr '\n' ' ' | tr -s '= ')
    if [ "$rc" = 0 ] && grep -qiE 'skipped|skip=' <<<"$figs"; then
        # A GPU test that did not run is no pass: the reason is in torch.log (-rs).
        s=SKIPPED incomplete=1
    fi
    tally "$rc"
    note torch:op "$s" "$secs" "${figs:-no summary line (see torch.log)}"
}
torch_tests

# A backend that computes wrong results has no speed worth measuring: the time goes to the logs.
if [ $failed = 1 ]; then
    note bench NOTRUN 0 "not run: a check failed"
    finish 1 "a check failed: see the FAIL and ERRORS lines and their logs; the benchmarks were not run"
fi

# ---- 5. bench_cuda: issue 46's goal rows, then the float32 rows ----
log=$out/bench_cuda.log
: >"$log"
# rows LOG IMPL H [PRECISION [PATTERN]]: "T=2048 0.0123s 312MB, ..." from the JSON rows of one
# configuration (PATTERN: a grep pattern the rows must match as well).
rows() {
    grep '^{' "$1" | grep "\"impl\": \"$2\"" | grep "\"H\": $3," | grep "\"precision\": \"${4:-fp32}\"" | grep -e "${5:-.}" |
        sed -n 's/.*"T": \([0-9]*\).*"fwd_bwd_s": \([0-9.e+-]*\).*"peak_mb": \([0-9.]*\).*/T=\1 \2s \3MB/p; s/.*"T": \([0-9]*\).*"oom": true.*/T=\1 oom/p' |
        tr '\n' ',' | sed 's/,$//; s/,/, /g'
}
# goal LIMIT LABEL IMPL T FLAGS...: goal rows (bf16 tensors and precision, B=2, H=16, d=96) at the
# lengths T, and their summary line.
goal() {
    local lim=$1 label=$2 impl=$3 T=$4 det=true
    shift 4
    case " $* " in *" --nondeterministic "*) det=false ;; esac
    run $lim "$log" "$bin/bench_cuda" --T "$T" --B 2 --H 16 --d 96 --precision bf16 --dtype bf16 --reps 3 --warmup 1 "$@"
    tally "$rc"
    local r
    r=$(rows "$log" "$impl" 16 bf16 "\"deterministic\": $det, \"T\": [0-9]*, \"B\": 2,")
    note "goal:$label" "$(status $rc)" "$secs" "B=2 H=16 d=96 bf16: ${r:-no rows}"
}
goal 30 conv cuda_mta 4096,32768 --config mta830m
goal 10 conv:nd cuda_mta 4096 --config mta830m --nondeterministic
goal 10 heads cuda_mta_heads 4096 --config mta830m-heads
for shape in "8 64" "16 96"; do
    set -- $shape
    for cfg in mta830m plain; do
        lim=10
        [ $cfg = plain ] && lim=8
        run $lim "$log" "$bin/bench_cuda" --T 2048,4096 --B 1 --H "$1" --d "$2" --config $cfg --reps 3 --warmup 1
        tally "$rc"
        impl=cuda_mta
        [ $cfg = plain ] && impl=cuda_plain
        r=$(rows "$log" $impl "$1")
        note "cuda:$cfg" "$(status $rc)" "$secs" "H=$1 d=$2: ${r:-no rows}"
    done
done
for prec in fp32 bf16; do
    run 8 "$log" "$bin/bench_cuda" --T 2048,4096,16384 --B 1 --H 8 --d 64 --config normgate --precision $prec --reps 3 --warmup 1
    tally "$rc"
    r=$(rows "$log" cuda_normgate 8 $prec)
    note "cuda:normgate:$prec" "$(status $rc)" "$secs" "H=8 d=64: ${r:-no rows}"
done

# ---- 6. PyTorch on the same GPU (after the op's tests in torch.log) ----
log=$out/torch.log
libpath=$orig_ld  # PyTorch loads its own CUDA libraries: none of the bundle's
if ! command -v python3 >/dev/null; then
    note torch SKIPPED 0 "python3 not found"
else
    run 10 "$log" python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())'
    if [ "$rc" = 125 ]; then
        note torch NOTRUN 0 "not run: the time budget was spent"
    elif [ "$rc" != 0 ]; then
        note torch SKIPPED "$secs" "torch is not importable here (see torch.log)"
    else
        # sdpa_rows PATTERN: "bfloat16 T=2048 0.0012s 52MB, ..." from torch.log's SDPA rows that match PATTERN.
        sdpa_rows() {
            grep '^{' "$log" | grep '"torch_sdpa"' | grep -e "$1" |
                sed -n 's/.*"dtype": "\([a-z0-9]*\)".*"T": \([0-9]*\).*"fwd_bwd_s": \([0-9.e+-]*\).*"peak_mb": \([0-9.]*\).*/\1 T=\2 \3s \4MB/p' |
                tr '\n' ',' | sed 's/,$//; s/,/, /g'
        }
        # the goal rows' bar: SDPA in bf16 at their shape
        run 15 "$log" python3 "$bin/bench_torch_cuda.py" --impl sdpa --sdpa-dtypes bfloat16 --T 4096,32768 --B 2 --H 16 --d 96 --reps 5
        s=$(status $rc)
        [ "$rc" = 77 ] && s=SKIPPED
        note goal:sdpa "$s" "$secs" "B=2 H=16 d=96: $(sdpa_rows '"B": 2, "H": 16, "d": 96,')"
        for shape in "8 64" "16 96"; do
            set -- $shape
            run 8 "$log" python3 "$bin/bench_torch_cuda.py" --impl sdpa --T 2048,4096,16384 --B 1 --H "$1" --d "$2" --reps 5
            s=$(status $rc)
            [ "$rc" = 77 ] && s=SKIPPED
            note torch:sdpa "$s" "$secs" "H=$1 d=$2: $(sdpa_rows "\"B\": 1, \"H\": $1, \"d\": $2,")"
            run 6 "$log" python3 "$bin/bench_torch_cuda.py" --impl naive --T 2048,4096 --B 1 --H "$1" --d "$2" --reps 3
            s=$(status $rc)
            [ "$rc" = 77 ] && s=SKIPPED
            note torch:naive "$s" "$secs" "H=$1 d=$2: $(rows "$log" torch_naive "$1")"
        done
    fi
fi
{ grep -h '^{"probe": "cluster"' "$m"; grep -h '^{' "$out/bench_cuda.log" "$out/torch.log"; } >"$out/bench.jsonl" 2>/dev/null
# The goal rows beside the model's predictions (python3 and the repository's model, where here).
model=$(cd "$here/.." && pwd)/bench/cuda_perf_model.py
if command -v python3 >/dev/null && [ -f "$model" ]; then
    timeout 30 python3 "$model" --measured "$out/bench.jsonl" >>"$summary" 2>&1 ||
        echo "(cuda_perf_model.py --measured: exit $?)" >>"$summary"
fi
[ $cl_failed = 1 ] && failed=1

# The PyTorch baselines do not count: they measure PyTorch, not this project.
if [ $failed = 1 ]; then
    finish 1 "a check failed: see the FAIL and ERRORS lines and their logs"
elif [ $incomplete = 1 ]; then
    finish 5 "nothing failed, but a step did not finish (TIMEOUT or NOTRUN above): incomplete"
else
    finish 0 "every check passed"
fi
