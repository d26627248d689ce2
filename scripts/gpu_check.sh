#!/usr/bin/env bash
# gpu_check.sh [OUTDIR] [quick|full|bench]: the CUDA backend's checks and benchmarks, on a machine with an
# NVIDIA GPU, the CUDA toolkit and a BLAS (or Debian's OpenBLAS packages in .deb/, unpacked here
# when the machine has none: `apt-get download libopenblas0-openmp libopenblas-openmp-dev
# libopenblas-dev libgfortran5 libquadmath0` into .deb/ on a machine with a package registry).
#   1. builds libmtac with the CUDA backend, test_cuda and bench_cuda (MTAC_LIBRARY_ONLY: no
#      cJSON, libpng, cmocka or MPI needed) in build-gpu/;
#   2. test_cuda: the CUDA backend against the CPU reference on every step combination;
#   3. test_cuda --quick under compute-sanitizer memcheck and racecheck;
#   4. (full) bench_cuda and tests/ref/bench_torch_cuda.py (PyTorch SDPA and the naive MTA) on the
#      issue's shapes: B=1, H=8, d=64 and the 830M layer (H=16, d=96).
# Logs and JSON rows go to OUTDIR (default gpu-out/).
set -uo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
out=${1:-gpu-out}
mode=${2:-full}
case "$mode" in quick|full|bench) ;; *) echo "gpu_check.sh: mode must be quick, full or bench, got '$mode'" >&2; exit 2 ;; esac
mkdir -p "$out"
blas=()
if ! ldconfig -p | grep -q libopenblas && [ -d .deb ]; then
  rm -rf /tmp/mtac-deb && mkdir -p /tmp/mtac-deb
  for f in .deb/libopenblas*.deb .deb/libgfortran5*.deb .deb/libquadmath0*.deb; do dpkg -x "$f" /tmp/mtac-deb; done
  ob=/tmp/mtac-deb/usr/lib/x86_64-linux-gnu/openblas-openmp
  mkdir -p /tmp/mtac-deb/gf && cp -a /tmp/mtac-deb/usr/lib/x86_64-linux-gnu/libgfortran.so.5* \
    /tmp/mtac-deb/usr/lib/x86_64-linux-gnu/libquadmath.so.0* /tmp/mtac-deb/gf/
  export LD_LIBRARY_PATH="$ob:/tmp/mtac-deb/gf${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  blas=(-DMTAC_OPENBLAS_OPENMP="$ob/libopenblas.so" -DMTAC_CBLAS_INCLUDE=/tmp/mtac-deb/usr/include/x86_64-linux-gnu/openblas-openmp)
fi
{ nvidia-smi; nvcc --version; cmake --version | head -1; gcc --version | head -1; } >"$out/machine.txt" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit --format=csv >>"$out/machine.txt" 2>&1
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DMTAC_LIBRARY_ONLY=ON -DMTAC_MPI=OFF "${blas[@]}" >"$out/build.log" 2>&1 &&
  cmake --build build-gpu -j"$(nproc)" >>"$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
grep -i "warning" "$out/build.log" | head -20
export OMP_WAIT_POLICY=passive
status=0
if [ "$mode" != bench ]; then
  timeout 240 build-gpu/test_cuda 2>&1 | tee "$out/test_cuda.log" | grep -v "^FAIL" | tail -3
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  grep "^FAIL" "$out/test_cuda.log" | head -20
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 build-gpu/test_cuda --quick >"$out/sanitizer_$tool.log" 2>&1
    echo "compute-sanitizer $tool: exit $?  $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/sanitizer_$tool.log" | head -2 | tr '\n' ' ')"
  done
fi
if [ "$mode" != quick ]; then
  : >"$out/bench.jsonl"
  for shape in "8 64" "16 96"; do
    set -- $shape
    timeout 300 build-gpu/bench_cuda --T 2048,4096,16384 --H "$1" --d "$2" --reps 3 --config mta830m | tee -a "$out/bench.jsonl"
    timeout 200 build-gpu/bench_cuda --T 2048,4096,16384,32768 --H "$1" --d "$2" --reps 3 --config plain | tee -a "$out/bench.jsonl"
    timeout 300 python3 tests/ref/bench_torch_cuda.py --T 2048,4096,16384,32768 --H "$1" --d "$2" --reps 5 --impl sdpa | tee -a "$out/bench.jsonl"
    timeout 300 python3 tests/ref/bench_torch_cuda.py --T 2048,4096 --H "$1" --d "$2" --reps 3 --impl naive | tee -a "$out/bench.jsonl"
  done
fi
exit $status
