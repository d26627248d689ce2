// bench_cuda.c: forward + backward time and GPU memory of the CUDA backend, one JSON row per
// sequence length (the GPU rows of `mtac bench attn`; this program needs only libmtac and the
// CUDA runtime, so a bare GPU machine can build it).
//
//   bench_cuda [--T 2048,4096,...] [--B 1] [--H 8] [--d 64] [--H_kv N] [--config mta830m|normgate|plain]
//              [--precision fp32|bf16] [--rows R] [--reps 5] [--warmup 1]
//
// mta830m: pre and post 6x11 convolutions, H x H head mixing, head convolution over all heads,
// group norm and gate (the 830M layer's MTA); normgate: group norm and gate alone (the steps the
// bf16 tensor-core path covers in every slice); plain: every step off. --precision bf16 sets
// mta_config.precision = MTA_BF16 (the tensor-core path where it covers the config, docs/cuda.md).
// --H_kv: key/value heads (grouped-query attention). Inputs are random normal
// (never zeros), parameters identity plus noise. fwd_bwd_s is the median over --reps of one
// forward and one backward, timed with CUDA events after --warmup untimed calls. peak_mb is the
// GPU memory in use after the timed calls (cudaMemGetInfo) minus that before anything was
// allocated: q, k, v, out, dout, dq, dk, dv, the parameters and the backend's workspace (which it
// keeps between calls), and cuBLAS's.
#include "testutil.h"

#include <cuda_runtime.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void ck(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "bench_cuda: %s: %s\n", what, cudaGetErrorString(e));
        exit(1);
    }
}

// n normal draws in GPU memory.
static float *dev_randn(size_t n, uint64_t *seed) {
    float *h = malloc(n * sizeof(float)), *d;
    if (!h) exit(1);
    for (size_t i = 0; i < n; i++) h[i] = tu_randn(seed);
    ck(cudaMalloc((void **)&d, n * sizeof(float)), "cudaMalloc");
    ck(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    free(h);
    return d;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(FILE *f) {
    fprintf(f, "usage: bench_cuda [--T 2048,4096] [--B 1] [--H 8] [--d 64] [--H_kv N] [--config mta830m|normgate|plain]\n"
               "                  [--precision fp32|bf16] [--rows R] [--reps 5] [--warmup 1]\n"
               "Times forward + backward of the CUDA backend (median of --reps, CUDA events) and its GPU memory;\n"
               "prints one JSON row per T.\n");
}

static int pos_int(const char *s, int *out) {
    char *end;
    long x = strtol(s, &end, 10);
    if (end == s || *end || x < 1 || x > 100000000) return 0;
    *out = (int)x;
    return 1;
}

int main(int argc, char **argv) {
    int B = 1, H = 8, d = 64, H_kv = 0, rows = 0, reps = 5, warmup = 1, mta = 1, bf16 = 0;  // mta: 0 plain, 1 mta830m, 2 normgate
    int Ts[32], nT = 0;
    const char *Tlist = "2048,4096";
    static const struct option opts[] = {{"T", 1, 0, 'T'},      {"B", 1, 0, 'B'},    {"H", 1, 0, 'H'},
                                         {"d", 1, 0, 'd'},      {"config", 1, 0, 'c'}, {"rows", 1, 0, 'r'},
                                         {"reps", 1, 0, 'n'},   {"warmup", 1, 0, 'w'}, {"help", 0, 0, 'h'},
                                         {"H_kv", 1, 0, 'k'},   {"precision", 1, 0, 'p'}, {0, 0, 0, 0}};
    int o, ok = 1;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (o) {
        case 'T': Tlist = optarg; break;
        case 'B': ok = pos_int(optarg, &B); break;
        case 'H': ok = pos_int(optarg, &H); break;
        case 'd': ok = pos_int(optarg, &d); break;
        case 'r': ok = pos_int(optarg, &rows); break;
        case 'n': ok = pos_int(optarg, &reps); break;
        case 'w': ok = !strcmp(optarg, "0") ? (warmup = 0, 1) : pos_int(optarg, &warmup); break;
        case 'k': ok = pos_int(optarg, &H_kv); break;
        case 'c':
            if (!strcmp(optarg, "mta830m")) mta = 1;
            else if (!strcmp(optarg, "normgate")) mta = 2;
            else if (!strcmp(optarg, "plain")) mta = 0;
            else ok = 0;
            break;
        case 'p':
            if (!strcmp(optarg, "bf16")) bf16 = 1;
            else if (!strcmp(optarg, "fp32")) bf16 = 0;
            else ok = 0;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
        if (!ok) {
            fprintf(stderr, "bench_cuda: bad value '%s'\n", optarg);
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    char *tl = strdup(Tlist);
    for (char *t = strtok(tl, ","); t; t = strtok(NULL, ",")) {
        if (nT == 32 || !pos_int(t, &Ts[nT])) {
            fprintf(stderr, "bench_cuda: --T takes up to 32 positive integers separated by commas, got '%s'\n", Tlist);
            return 2;
        }
        nT++;
    }
    free(tl);
    if (!mta_backend_available(MTA_BACKEND_CUDA)) {
        fprintf(stderr, "bench_cuda: no CUDA device, or libmtac was built without the CUDA backend\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    for (int ti = 0; ti < nT; ti++) {
        const int T = Ts[ti];
        mta_config c = mta_config_default(B, H, T, d);
        c.backend = MTA_BACKEND_CUDA, c.strip_rows = rows, c.H_kv = H_kv;
        c.precision = bf16 ? MTA_BF16 : MTA_FP32;
        if (mta == 1) c.pre_cq = c.post_cq = 6, c.pre_ck = c.post_ck = 11, c.pre_head_mix = 1, c.post_ch = H;
        if (mta) c.group_norm = 1, c.gate = 1;
        char msg[256];
        if (mta_config_check(&c, msg, sizeof msg)) {
            fprintf(stderr, "bench_cuda: %s\n", msg);
            return 2;
        }
        ck(cudaDeviceSynchronize(), "sync");
        size_t free0, total;
        ck(cudaMemGetInfo(&free0, &total), "cudaMemGetInfo");
        const size_t n = (size_t)B * H * T * d, nkv = n / H * (H_kv ? H_kv : H);  // k, v: H_kv heads
        uint64_t seed = 42 + T;
        float *q = dev_randn(n, &seed), *k = dev_randn(nkv, &seed), *v = dev_randn(nkv, &seed);
        float *dout = dev_randn(n, &seed), *out, *dq, *dk, *dv;
        ck(cudaMalloc((void **)&out, n * sizeof(float)), "cudaMalloc");
        ck(cudaMalloc((void **)&dq, n * sizeof(float)), "cudaMalloc");
        ck(cudaMalloc((void **)&dk, nkv * sizeof(float)), "cudaMalloc");
        ck(cudaMalloc((void **)&dv, nkv * sizeof(float)), "cudaMalloc");
        // parameters: identity plus noise, drawn on the host and copied
        const mta_param_sizes ps = mta_param_sizes_of(&c);
        const size_t *pn = ps.w;
        float *hw[MTA_N_PARAMS] = {0};
        mta_params p = {{0}};
        mta_grads g = {{0}};
        for (int i = 0; i < MTA_N_PARAMS; i++)
            if (pn[i] && !(hw[i] = calloc(pn[i], sizeof(float)))) return 1;
        for (int i = 0; i < MTA_N_PARAMS; i++) mta_param_init_identity(&c, i, hw[i]);
        for (int i = 0; i < MTA_N_PARAMS; i++)
            if (pn[i]) {
                float *w, *gw;
                for (size_t e = 0; e < pn[i]; e++) hw[i][e] += 0.1f * tu_randn(&seed);
                ck(cudaMalloc((void **)&w, pn[i] * sizeof(float)), "cudaMalloc");
                ck(cudaMalloc((void **)&gw, pn[i] * sizeof(float)), "cudaMalloc");
                ck(cudaMemcpy(w, hw[i], pn[i] * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
                ck(cudaMemset(gw, 0, pn[i] * sizeof(float)), "cudaMemset");
                free(hw[i]);
                p.w[i] = w, g.w[i] = gw;
            }
        mta_ctx *ctx;
        if (mta_create(&ctx, &c, msg, sizeof msg)) {
            fprintf(stderr, "bench_cuda: %s\n", msg);
            return 1;
        }
        cudaEvent_t e0, e1;
        ck(cudaEventCreate(&e0), "event"), ck(cudaEventCreate(&e1), "event");
        double *times = calloc((size_t)reps, sizeof(double));
        for (int r = -warmup; r < reps; r++) {
            ck(cudaEventRecord(e0, 0), "event");
            if (mta_forward(ctx, q, k, v, &p, out) || mta_backward(ctx, q, k, v, &p, dout, dq, dk, dv, &g)) {
                fprintf(stderr, "bench_cuda: T=%d: %s\n", T, mta_ctx_error(ctx));
                return 1;
            }
            ck(cudaEventRecord(e1, 0), "event");
            ck(cudaEventSynchronize(e1), "sync");
            float ms;
            ck(cudaEventElapsedTime(&ms, e0, e1), "event");
            if (r >= 0) times[r] = ms / 1e3;
        }
        qsort(times, (size_t)reps, sizeof(double), cmp_double);
        size_t free1;
        ck(cudaMemGetInfo(&free1, &total), "cudaMemGetInfo");
        const size_t ws = mta_ctx_workspace_bytes(ctx);
        static const char *const impl[3] = {"cuda_plain", "cuda_mta", "cuda_normgate"};
        printf("{\"impl\": \"%s\", \"device\": \"%s\", \"dtype\": \"float32\", \"precision\": \"%s\", \"T\": %d, "
               "\"B\": %d, \"H\": %d, \"H_kv\": %d, \"d\": %d, \"fwd_bwd_s\": %.6f, \"peak_mb\": %.1f, "
               "\"workspace_mb\": %.1f, \"reps\": %d}\n",
               impl[mta], prop.name, bf16 ? "bf16" : "fp32", T, B, H, H_kv ? H_kv : H, d, times[reps / 2],
               (free0 - free1) / 1e6, ws / 1e6, reps);
        fflush(stdout);
        free(times);
        mta_destroy(ctx);
        cudaEventDestroy(e0), cudaEventDestroy(e1);
        for (int i = 0; i < MTA_N_PARAMS; i++) cudaFree((void *)p.w[i]), cudaFree(g.w[i]);
        cudaFree(q), cudaFree(k), cudaFree(v), cudaFree(dout), cudaFree(out), cudaFree(dq), cudaFree(dk), cudaFree(dv);
    }
    return 0;
}
