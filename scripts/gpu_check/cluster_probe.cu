// cluster_probe.cu: what thread-block-cluster communication costs on this GPU, the two figures the
// performance model (bench/cuda_perf_model.py, DSMEM_BW and CLUSTER_BARRIER) assumes for the
// cluster kernels. Built by `scripts/gpu_check.sh prepare` (static CUDA runtime, sm_90) and run by
// gpu-bundle/run.sh after gpu_probe (its output in machine.txt, its JSON lines in bench.jsonl);
// tests/cluster_probe_emu.cpp runs it in the CUDA emulator.
//
//   cluster_probe [--sizes KB,KB,...] [--rounds N] [--reps N] | --help
//
// Clusters of C = 2 and 4 blocks of 256 threads, as many as can be resident at once (one block an
// SM: each asks for the device's whole opt-in shared memory), each run a kernel of rounds of
//   dsmem_allgather: every block stores its own N KB (16-byte st.shared::cluster, the stores of
//     attn/cluster_ptx.cuh that the cluster kernels use) into each of the C-1 others, then one
//     barrier.cluster (arrive.release + wait.acquire); GB/s = bytes moved between SMs / time;
//   barrier: the barrier alone; barrier_store: one 16-byte store per thread into the next block,
//     then the barrier (the kernels' pattern: stores, then a barrier); microseconds a round.
// A round's time is the difference of two launches of R and 2R rounds over R (the launch and the
// verify pass cancel), the median of --reps such pairs after a warm-up launch. After its last
// round every launch checks that each block holds exactly what its peers stored in that round
// (exit 1 on a mismatch: no throughput of wrong stores is reported).
// Prints a line and a JSON line ({"probe": "cluster", ...}) per measurement, then a summary line.
// Exit 0: measured and verified; 1: a mismatch or a CUDA error; 2: bad arguments; 77: no device
// of compute capability 9.0 (clusters need sm_90).
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef MTAC_CUDA_EMU
#include <chrono>
#define PROBE_DYNAMIC_SHARED(name) uint32_t *const name = (uint32_t *)::cuemu::dynamic_shared()
#else
#define PROBE_DYNAMIC_SHARED(name)                         \
    extern __shared__ __align__(16) uint32_t probe_smem_[]; \
    uint32_t *const name = probe_smem_
#endif
#include "attn/cluster_ptx.cuh"

static const int PROBE_THREADS = 256, PROBE_MAX_PEERS = 3;  // clusters of up to 4 blocks

// The slot of block `from`'s data in block `to`'s shared memory (C-1 slots: none for itself).
__host__ __device__ inline unsigned probe_slot(unsigned from, unsigned to) { return from < to ? from : from - 1; }
// The first word of a block's 16-byte chunk 0 in round k; chunk i holds v + 4i .. v + 4i + 3.
__host__ __device__ inline uint32_t probe_pattern(unsigned block, int k) {
    return block * 0x9E3779B1u ^ (uint32_t)k * 0x01000193u;
}

// rounds (>= 1) of: each thread stores its 16-byte chunks (i = thread, + 256, .. < chunks) of this
// block's round pattern into each of `peers` next blocks of the cluster (rank r + 1 + p), then a
// cluster barrier. Then each block checks the last round's chunks from its peers (rank r - 1 - p)
// and sets bad[block] on a mismatch.
__global__ void __launch_bounds__(PROBE_THREADS) k_exchange(int chunks, int peers, int rounds, unsigned *bad) {
    PROBE_DYNAMIC_SHARED(buf);
    const unsigned r = cl_rank(), C = cl_size(), id = blockIdx.x;
    cl_ptr to[PROBE_MAX_PEERS];
    for (int p = 0; p < PROBE_MAX_PEERS; p++) {
        const unsigned q = (r + 1 + p) % C;
        if (p < peers) to[p] = cl_map(buf + (size_t)probe_slot(r, q) * chunks * 4, q);
    }
    for (int k = 0; k < rounds; k++) {
        const uint32_t v = probe_pattern(id, k);
        for (int i = threadIdx.x; i < chunks; i += PROBE_THREADS) {
            const uint32_t w = v + 4 * (uint32_t)i;
            for (int p = 0; p < PROBE_MAX_PEERS; p++)
                if (p < peers) cl_st16(cl_off(to[p], 16 * (ptrdiff_t)i), w, w + 1, w + 2, w + 3);
        }
        cl_arrive();
        cl_wait();
    }
    for (int p = 0; p < peers; p++) {
        const unsigned from = (r + C - 1 - p) % C;
        const uint32_t v = probe_pattern(id - r + from, rounds - 1);
        const uint32_t *s = buf + (size_t)probe_slot(from, r) * chunks * 4;
        for (int i = threadIdx.x; i < 4 * chunks; i += PROBE_THREADS)
            if (s[i] != v + (uint32_t)i) bad[id] = 1;
    }
}

struct probe_dev {
    cudaDeviceProp prop;
    int clock_khz, smem;  // the SM clock; the shared memory each block asks for (the opt-in limit)
    unsigned *bad;        // a flag per block
    int nbad;
};

static int cuda_ok(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return 1;
    printf("cluster_probe: %s: %s\n", what, cudaGetErrorString(e));
    return 0;
}

// The clusters of C blocks that can be resident at once (one wave); 0 on an error.
static int probe_clusters(const probe_dev &d, int C) {
#ifdef MTAC_CUDA_EMU
    return d.prop.multiProcessorCount / C > 0 ? d.prop.multiProcessorCount / C : 1;
#else
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = C, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(C * 64), cfg.blockDim = dim3(PROBE_THREADS), cfg.dynamicSmemBytes = d.smem;
    cfg.attrs = at, cfg.numAttrs = 1;
    int n = 0;
    if (!cuda_ok(cudaOccupancyMaxActiveClusters(&n, k_exchange, &cfg), "cudaOccupancyMaxActiveClusters")) return 0;
    return n;
#endif
}

// One launch of `clusters` clusters of C blocks; its time in seconds, < 0 on an error.
static double probe_launch(const probe_dev &d, int C, int clusters, int chunks, int peers, int rounds) {
    const dim3 grid(C * clusters), block(PROBE_THREADS);
#ifdef MTAC_CUDA_EMU
    const auto t0 = std::chrono::steady_clock::now();
    ::cuemu::launch("k_exchange", k_exchange, grid, block, d.smem, 0, nullptr, C)(chunks, peers, rounds, d.bad);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return cuda_ok(cudaGetLastError(), "k_exchange") ? s : -1;
#else
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = C, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = d.smem, cfg.attrs = at, cfg.numAttrs = 1;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    cudaEventRecord(e0);
    cudaError_t e = cudaLaunchKernelEx(&cfg, k_exchange, chunks, peers, rounds, d.bad);
    cudaEventRecord(e1);
    if (e == cudaSuccess) e = cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return cuda_ok(e, "k_exchange") ? ms * 1e-3 : -1;
#endif
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// *s = seconds a round: the median over reps of (time of 2R rounds - time of R rounds) / R, after
// a warm-up launch (timer noise can make it <= 0 where rounds are short: the emulator); then the
// blocks' verify flags. Returns 0, or 1 on an error or a mismatch (said why).
static int probe_round(const probe_dev &d, int C, int clusters, int chunks, int peers, int R, int reps, double *s) {
    double t[64];
    if (reps > 64) reps = 64;
    cudaMemset(d.bad, 0, d.nbad * sizeof(unsigned));
    if (probe_launch(d, C, clusters, chunks, peers, R) < 0) return 1;
    for (int i = 0; i < reps; i++) {
        const double a = probe_launch(d, C, clusters, chunks, peers, R);
        const double b = probe_launch(d, C, clusters, chunks, peers, 2 * R);
        if (a < 0 || b < 0) return 1;
        t[i] = (b - a) / R;
    }
    qsort(t, reps, sizeof t[0], cmp_double);
    unsigned *bad = (unsigned *)calloc(d.nbad, sizeof(unsigned));
    int nbad = 0;
    if (bad && cuda_ok(cudaMemcpy(bad, d.bad, d.nbad * sizeof(unsigned), cudaMemcpyDeviceToHost), "cudaMemcpy"))
        for (int i = 0; i < C * clusters; i++) nbad += bad[i] != 0;
    else
        nbad = -1;
    free(bad);
    if (nbad) {
        printf("cluster_probe: VERIFY FAILED: C=%d, %d bytes to each of %d peers: %d of %d blocks did not receive "
               "their peers' last round\n", C, 16 * chunks, peers, nbad, C * clusters);
        return 1;
    }
    *s = t[reps / 2];
    return 0;
}

// One measurement's two lines: for human eyes, and JSON for bench.jsonl and the model (--probe).
static void probe_print(const probe_dev &d, const char *name, int C, int clusters, int bytes, int peers, int R,
                        double s) {
    const double moved = (double)clusters * C * peers * bytes;  // bytes between SMs a round
    if (!strcmp(name, "dsmem_allgather"))
        printf("%-16s C=%d %6d KB to each of %d peers: %8.1f GB/s over %d clusters (%.2f us a round)\n", name, C,
               bytes / 1024, peers, moved / s * 1e-9, clusters, s * 1e6);
    else
        printf("%-16s C=%d %6d bytes a block: %8.3f us a round over %d clusters\n", name, C, bytes * peers, s * 1e6,
               clusters);
    printf("{\"probe\": \"cluster\", \"name\": \"%s\", \"C\": %d, \"bytes\": %d, \"peers\": %d, \"bytes_per_round\": "
           "%.0f, \"rounds\": %d, \"seconds\": %.6e, \"GB_s\": %.2f, \"us\": %.4f, \"clusters\": %d, \"device\": \"%s\", "
           "\"sms\": %d, \"clock_mhz\": %d}\n",
           name, C, bytes, peers, moved, R, s, moved / s * 1e-9, s * 1e6, clusters, d.prop.name,
           d.prop.multiProcessorCount, d.clock_khz / 1000);
}

// 0 with d filled for device 0; 77 without a device of compute capability 9.0; 1 on an error.
static int probe_open(probe_dev &d) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        printf("cluster_probe: no CUDA device\n");
        return 77;
    }
    if (!cuda_ok(cudaGetDeviceProperties(&d.prop, 0), "cudaGetDeviceProperties")) return 1;
    if (d.prop.major < 9) {
        printf("cluster_probe: %s is of compute capability %d.%d: thread block clusters need 9.0\n", d.prop.name,
               d.prop.major, d.prop.minor);
        return 77;
    }
    d.clock_khz = 0;
#ifndef MTAC_CUDA_EMU
    cudaDeviceGetAttribute(&d.clock_khz, cudaDevAttrClockRate, 0);
#endif
    d.smem = (int)d.prop.sharedMemPerBlockOptin;
    d.nbad = 4 * (d.prop.multiProcessorCount + 4);
    if (!cuda_ok(cudaFuncSetAttribute(k_exchange, cudaFuncAttributeMaxDynamicSharedMemorySize, d.smem),
                 "cudaFuncSetAttribute") ||
        !cuda_ok(cudaMalloc(&d.bad, d.nbad * sizeof(unsigned)), "cudaMalloc"))
        return 1;
    printf("%s: %d SMs, %d MHz, %d KB of shared memory a block (one block an SM), %d threads a block\n", d.prop.name,
           d.prop.multiProcessorCount, d.clock_khz / 1000, d.smem / 1024, PROBE_THREADS);
    return 0;
}

// The all-gather at each size and the barriers, for clusters of C; the figures for the summary
// (the largest size's GB/s, the barrier's and the barrier's after a store, us); 0 or 1.
static int probe_cluster(const probe_dev &d, int C, const int *kb, int nkb, int R, int reps, double fig[3]) {
    const int clusters = probe_clusters(d, C);
    if (clusters <= 0 || clusters * C > d.nbad) {
        printf("cluster_probe: no cluster of %d blocks of %d KB fits (%d)\n", C, d.smem / 1024, clusters);
        return 1;
    }
    for (int i = 0; i < nkb; i++) {
        const int bytes = kb[i] * 1024;
        if ((C - 1) * bytes > d.smem) {
            printf("dsmem_allgather  C=%d %6d KB: skipped, %d KB do not fit in %d KB\n", C, kb[i], (C - 1) * kb[i],
                   d.smem / 1024);
            continue;
        }
        double s;
        if (probe_round(d, C, clusters, bytes / 16, C - 1, R, reps, &s)) return 1;
        probe_print(d, "dsmem_allgather", C, clusters, bytes, C - 1, R, s);
        fig[0] = (double)clusters * C * (C - 1) * bytes / s;
    }
    double sb, ss;
    if (probe_round(d, C, clusters, 0, 0, R, reps, &sb) || probe_round(d, C, clusters, PROBE_THREADS, 1, R, reps, &ss))
        return 1;
    probe_print(d, "barrier", C, clusters, 0, 0, R, sb);
    probe_print(d, "barrier_store", C, clusters, 16 * PROBE_THREADS, 1, R, ss);
    fig[1] = sb, fig[2] = ss;
    return 0;
}

// --sizes KB,KB,..: 1..64 sizes, each 1..1024 KB, multiples of 4 KB (whole 16-byte chunks per
// thread); returns their count, 0 when malformed.
static int parse_sizes(const char *s, int *kb, int max) {
    int n = 0;
    for (char *e; *s && n < max; s = *e == ',' ? e + 1 : e) {
        const long v = strtol(s, &e, 10);
        if (e == s || (*e && *e != ',') || v < 4 || v > 1024 || v % 4) return 0;
        kb[n++] = (int)v;
    }
    return *s ? 0 : n;
}

static const char PROBE_USAGE[] =
    "usage: cluster_probe [--sizes KB,KB,..(multiples of 4, <= 1024)] [--rounds N >= 1] [--reps 1..64]\n"
    "Times the distributed shared memory all-gather and barrier.cluster at cluster sizes 2 and 4 over\n"
    "every SM of an sm_90 GPU, verifying every round's bytes; prints a line and a JSON line a figure.\n"
    "Exit 0: measured and verified; 1: a mismatch or a CUDA error; 2: bad arguments; 77: no sm_90 device.\n";

int main(int argc, char **argv) {
    int kb[64] = {8, 32, 64}, nkb = 3, R = 1000, reps = 7;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(PROBE_USAGE, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--sizes") && (nkb = parse_sizes(v, kb, 64)) > 0) i++;
        else if (!strcmp(argv[i], "--rounds") && (R = atoi(v)) >= 1) i++;
        else if (!strcmp(argv[i], "--reps") && (reps = atoi(v)) >= 1 && reps <= 64) i++;
        else {
            fprintf(stderr, "cluster_probe: bad argument '%s' %s\n%s", argv[i], v, PROBE_USAGE);
            return 2;
        }
    }
    probe_dev d;
    const int rc = probe_open(d);
    if (rc) return rc;
    double fig[2][3] = {{0, 0, 0}, {0, 0, 0}};
    for (int c = 0; c < 2; c++)
        if (probe_cluster(d, 2 << c, kb, nkb, R, reps, fig[c])) return 1;
    printf("summary: DSMEM all-gather of %d KB: %.0f GB/s (C=2), %.0f GB/s (C=4); barrier.cluster: %.3f us (C=2), "
           "%.3f us (C=4); after a 16-byte store a thread: %.3f us (C=2), %.3f us (C=4); verified\n",
           kb[nkb - 1], fig[0][0] * 1e-9, fig[1][0] * 1e-9, fig[0][1] * 1e6, fig[1][1] * 1e6, fig[0][2] * 1e6,
           fig[1][2] * 1e6);
    cudaFree(d.bad);
    return 0;
}
