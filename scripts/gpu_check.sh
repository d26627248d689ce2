#!/usr/bin/env bash
# gpu_check.sh prepare | run [OUT] | --help: the CUDA backend's checks on a GPU machine that can
# only execute (no package registry, no build), prepared on a machine that can only build.
#
#   scripts/gpu_check.sh prepare   (here: the CUDA toolkit's nvcc, no GPU needed)
#     1. configures and builds build-gpu/ (Release, -DMTAC_CUDA=ON, sm_90, no MPI) with nvcc, and
#        stops if CMake did not configure the CUDA backend or no binary holds it;
#     2. assembles gpu-bundle/ (git-ignored, under 60 MiB):
#          bin/  test_attn_backends, bench_cuda, libmtac_cuda.so* (when the build has the module),
#                libcudart (the CUDA runtime, carried: small), gpu_probe (scripts/gpu_check/gpu_probe.cu),
#                cluster_probe (scripts/gpu_check/cluster_probe.cu, sm_90), bench/bench_torch_cuda.py
#                and tests/ref/mta_ref.py;
#          python/mtac/  the Python package (python/mtac/*.py, libmtac.so, libmtac_cuda.so) for the
#                PyTorch tests of CUDA tensors (python/tests/test_torch_device.py);
#          deb/  the Debian packages of the shared libraries the binaries load (found with ldd,
#                fetched with apt-get download), less glibc, libgcc and libstdc++;
#          run.sh (scripts/gpu_check/run.sh), MANIFEST.txt (commit, toolkit, files, what the GPU machine
#                must provide: the driver and cuBLAS, far too big to carry).
#     Idempotent: the build is incremental, the bundle made anew, the packages cached in build-gpu/.
#
#   On the GPU machine, from the repository root, with gpu-bundle carried along:
#     bash gpu-bundle/run.sh "$OUT"     (or scripts/gpu_check.sh run "$OUT")
#   runs the cluster probe, the library check, test_attn_backends cuda, compute-sanitizer, the PyTorch tests of CUDA
#   tensors, bench_cuda and the PyTorch benchmark, each under its own timeout (under 8 minutes in all), and writes summary.txt and the
#   logs to OUT (default gpu-out/). Without a GPU it stops at once with "no GPU: nothing was
#   checked" and a non-zero exit. docs/cuda.md says more.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }
die() {
    echo "gpu_check.sh: $*" >&2
    exit 1
}

case "${1:-}" in
-h | --help | help)
    usage
    exit 0
    ;;
run)
    [ -f gpu-bundle/run.sh ] || die "no gpu-bundle/run.sh here: run 'scripts/gpu_check.sh prepare' first (on a machine with nvcc)"
    exec bash gpu-bundle/run.sh "${2:-gpu-out}"
    ;;
prepare) ;;
*)
    usage >&2
    exit 2
    ;;
esac

build="build-gpu"
bundle=gpu-bundle
jobs=${MTAC_JOBS:-2}
limit_mib=60

# ---- 1. the build ----
export PATH=$PATH:/usr/local/cuda/bin
nvcc=$(command -v nvcc) || die "nvcc not found (looked on PATH and in /usr/local/cuda/bin): install the CUDA toolkit; without it the CUDA backend would silently not be built"
"$nvcc" --version >/dev/null 2>&1 || die "$nvcc does not run ($("$nvcc" --version 2>&1 | tail -1)): fix the CUDA toolkit's installation"
echo "== nvcc: $nvcc ($("$nvcc" --version | grep -o 'release [0-9.]*'))"
mkdir -p "$build"
log=$build/prepare-configure.log
# MTAC_NATIVE=OFF: AVX2 and FMA, not this machine's own CPU (the GPU machine's host CPU is another).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMTAC_CUDA=ON -DMTAC_CUDA_EMU=OFF -DMTAC_MPI=OFF -DMTAC_NATIVE=OFF \
    -DMTAC_LIBRARY_ONLY=OFF -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 >"$log" 2>&1 ||
    { tail -30 "$log"; die "cmake configure failed (whole log: $log)"; }
if ! grep -q 'mtac: CUDA backend' "$log" || grep -q 'building without the CUDA backend' "$log"; then
    grep -i 'cuda' "$log" | head -10
    die "CMake did not configure the CUDA backend (no 'mtac: CUDA backend' line in $log)"
fi
grep 'mtac: CUDA backend' "$log"

# The targets the bundle needs: the test, the benchmark, and every CUDA target of the build (the
# backend's module libmtac_cuda, where the build has one), not the emulator's.
targets=(test_attn_backends bench_cuda mtac_shared)
while read -r t; do
    case " ${targets[*]} " in *" $t "*) ;; *) targets+=("$t") ;; esac
done < <(cmake --build "$build" --target help 2>/dev/null | sed -n -e 's/^\.\.\. \([A-Za-z0-9_.-]*\).*/\1/p' -e 's/^\([A-Za-z0-9_.-]*\): .*/\1/p' |
    grep -i cuda | grep -vi -e emu -e '^test_cuda$')
echo "== building ${targets[*]} in $build/ (-j$jobs)"
log=$build/prepare-build.log
cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$log" 2>&1 ||
    { grep -E 'error|Error' "$log" | head -30; die "build failed (whole log: $log)"; }
grep -i ' warning' "$log" | sort -u | head -10

# ---- 2. the bundle ----
rm -rf "$bundle"
mkdir -p "$bundle/bin" "$bundle/deb"
cp "$build/test_attn_backends" "$build/bench_cuda" "$bundle/bin/" || die "the build made no test_attn_backends or bench_cuda"
mods=$(find "$build" -maxdepth 3 -name 'libmtac_cuda.so*' \( -type f -o -type l \) | sort)
for m in $mods; do cp -P "$m" "$bundle/bin/"; done
# Does a binary hold the CUDA backend? The module, or libcudart linked into the test.
if [ -z "$mods" ] && ! objdump -p "$bundle/bin/test_attn_backends" | grep -q 'NEEDED.*libcudart'; then
    die "neither libmtac_cuda.so nor a test linked with the CUDA runtime was built: the CUDA backend is missing"
fi
cp bench/bench_torch_cuda.py tests/ref/mta_ref.py "$bundle/bin/"
# The Python package as pip would install it (python/setup.py): its modules, libmtac.so and the
# CUDA module beside it (libmtac opens it from its own directory), for the PyTorch tests.
mkdir -p "$bundle/python/mtac"
cp python/mtac/*.py "$bundle/python/mtac/"
cp -L "$build/libmtac.so" "$bundle/python/mtac/libmtac.so" || die "the build made no libmtac.so"
[ -z "$mods" ] || cp -L "$build/libmtac_cuda.so" "$bundle/python/mtac/" || die "no $build/libmtac_cuda.so"
"$nvcc" -O2 -cudart static -o "$bundle/bin/gpu_probe" scripts/gpu_check/gpu_probe.cu >"$build/prepare-probe.log" 2>&1 ||
    { cat "$build/prepare-probe.log"; die "nvcc could not build scripts/gpu_check/gpu_probe.cu"; }
# The cluster probe: sm_90 code (clusters), the kernels' own cluster_ptx.cuh; warnings and spills stop it.
"$nvcc" -O2 -arch=sm_90 -cudart static -Isrc -Xptxas -v -Xcompiler -Wall,-Wextra -o "$bundle/bin/cluster_probe" \
    scripts/gpu_check/cluster_probe.cu >"$build/prepare-cluster-probe.log" 2>&1 ||
    { cat "$build/prepare-cluster-probe.log"; die "nvcc could not build scripts/gpu_check/cluster_probe.cu"; }
if grep -iE 'warning|[1-9][0-9]* bytes spill' "$build/prepare-cluster-probe.log"; then
    die "scripts/gpu_check/cluster_probe.cu: warnings or spills (whole log: $build/prepare-cluster-probe.log)"
fi
cp scripts/gpu_check/run.sh "$bundle/run.sh"
chmod +x "$bundle/run.sh" "$bundle/bin/gpu_probe" "$bundle/bin/cluster_probe"

# The shared libraries the binaries load, as ldd resolves them here.
objs=("$bundle"/bin/test_attn_backends "$bundle"/bin/bench_cuda "$bundle"/python/mtac/libmtac.so)
for m in "$bundle"/bin/libmtac_cuda.so*; do [ -f "$m" ] && [ ! -L "$m" ] && objs+=("$m"); done
lddout=$(for o in "${objs[@]}"; do ldd "$o" | sed "s|^|$(basename "$o"): |"; done)
if grep -q 'not found' <<<"$lddout"; then
    grep 'not found' <<<"$lddout"
    die "some libraries are missing on this machine too"
fi
# glibc, libgcc and libstdc++ are on every machine (newer ones run what older ones built); the CUDA
# runtime is carried as a file; cuBLAS and the driver must be on the GPU machine.
core='^(linux-vdso|ld-linux|libc|libm|libdl|libpthread|librt|libutil|libresolv|libgcc_s|libstdc\+\+)\.so'
cuda_dev='^lib(cublas|cublasLt|cuda|nvidia-ml|nvJitLink|nvrtc)\.so'
pkgs=() cudart='' device_libs=()
while read -r name path; do
    case "$name" in libmtac_cuda.so*) continue ;; esac
    if [[ $name =~ $core ]]; then continue; fi
    if [[ $name =~ ^libcudart\.so ]]; then
        cudart=$path
        continue
    fi
    if [[ $name =~ $cuda_dev ]]; then
        case " ${device_libs[*]} " in *" $name "*) ;; *) device_libs+=("$name") ;; esac
        continue
    fi
    real=$(readlink -f "$path")
    pkg=$({ dpkg -S "$real" || dpkg -S "${real#/usr}" || dpkg -S "/usr$real"; } 2>/dev/null | head -1)
    [ -n "$pkg" ] || die "$name ($real) belongs to no Debian package: cannot bundle it"
    pkg=${pkg%%:*}
    case " ${pkgs[*]} " in *" $pkg "*) ;; *) pkgs+=("$pkg") ;; esac
done < <(sed -n 's/^[^:]*: *\([^ ]*\) => \(\/[^ ]*\) .*/\1 \2/p' <<<"$lddout" | sort -u)
[ -n "$cudart" ] && cp -L "$cudart" "$bundle/bin/$(basename "$cudart")"

# The packages, in the versions installed here, cached in build-gpu/deb-cache/.
cache=$build/deb-cache
mkdir -p "$cache"
updated=0
for p in "${pkgs[@]}"; do
    ver=$(dpkg-query -W -f='${Version}' "$p") || die "dpkg-query: $p is not installed"
    arch=$(dpkg-query -W -f='${Architecture}' "$p")
    file=$(printf '%s_%s_%s.deb' "$p" "${ver//:/%3a}" "$arch")
    if [ ! -s "$cache/$file" ]; then
        if [ -s "/var/cache/apt/archives/$file" ]; then
            cp "/var/cache/apt/archives/$file" "$cache/"
        else
            (cd "$cache" && apt-get download "$p=$ver" >/dev/null 2>&1) ||
                { [ $updated = 1 ] || { apt-get update >/dev/null 2>&1 || true; updated=1; }; (cd "$cache" && apt-get download "$p=$ver" >/dev/null); } ||
                die "apt-get download $p=$ver failed"
        fi
    fi
    [ -s "$cache/$file" ] || die "no $file after apt-get download"
    cp "$cache/$file" "$bundle/deb/"
done

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
dirty=$(git status --porcelain --untracked-files=no -- src include tests bench CMakeLists.txt cmake 2>/dev/null | head -1)
{
    echo "mtac GPU bundle, made $(date -u +%Y-%m-%dT%H:%MZ) by scripts/gpu_check.sh prepare"
    echo "commit: $commit${dirty:+ plus uncommitted changes in src/, include/, tests/, bench/ or CMake files}"
    echo "nvcc: $("$nvcc" --version | grep -o 'release [0-9.]*, V[0-9.]*'); sm_90 code and compute_90 PTX"
    echo "host compiler: $(gcc --version | head -1); glibc $(ldd --version | head -1 | grep -o '[0-9.]*$')"
    if [ -n "$cudart" ]; then echo "CUDA runtime: carried (bin/$(basename "$cudart"))"; else echo "CUDA runtime: linked statically"; fi
    echo "the GPU machine must provide: an NVIDIA driver for CUDA $("$nvcc" --version | grep -o 'release [0-9]*\.[0-9]*' | cut -d' ' -f2) or newer${device_libs[*]:+, ${device_libs[*]}}"
    echo "debian packages (deb/): ${pkgs[*]}"
    echo "files:"
    (cd "$bundle" && find . -type f -o -type l | sort | while read -r f; do printf '  %-48s %10s\n' "${f#./}" "$(stat -c %s "$f")"; done)
} >"$bundle/MANIFEST.txt"
printf '%s\n' "${device_libs[@]}" >"$bundle/device-libs.txt"

# ---- 3. sizes ----
bytes=$(du -sb "$bundle" | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
tree=$(git ls-files -co --exclude-standard -z | du --files0-from=- -cb 2>/dev/null | tail -1 | cut -f1)
tmib=$(awk -v b="$tree" 'BEGIN { printf "%.1f", b / 1048576 }')
cat "$bundle/MANIFEST.txt"
echo "== gpu-bundle/: $mib MiB; the working tree that travels with it: $tmib MiB (the device tool carries 64 MiB in all)"
[ "$bytes" -lt $((limit_mib * 1048576)) ] || die "gpu-bundle/ is $mib MiB, over the $limit_mib MiB limit"
[ $((bytes + tree)) -lt $((64 * 1048576)) ] || die "gpu-bundle/ and the working tree together pass 64 MiB"
echo "== ready. On the GPU machine, from the repository root (carry: gpu-bundle):"
echo "     bash gpu-bundle/run.sh \"\$OUT\""
