// bench_cuda.c: forward + backward time and GPU memory of the CUDA backend, one JSON row per
// sequence length (the GPU rows of `mtac bench attn`; this program needs only libmtac and the
// CUDA runtime, so a bare GPU machine can build it).
//
//   bench_cuda [--T 2048,4096,...] [--B 1] [--H 8] [--d 64] [--H_kv N]
//              [--config mta830m|mta830m-heads|normgate|plain] [--precision fp32|bf16] [--dtype fp32|bf16]
//              [--nondeterministic] [--rows R] [--reps 5] [--warmup 1]   (options: cli/cli_opts.h)
//
// mta830m: pre and post 6x11 convolutions, H x H head mixing, head convolution over all heads,
// group norm and gate (the 830M layer's MTA, in 6 of its 24 layers); mta830m-heads: the same
// without the key-query convolutions (its other 18 layers); normgate: group norm and gate alone
// (the steps the bf16 tensor-core path covers in every slice); plain: every step off.
// --precision bf16 sets mta_config.precision = MTA_BF16 (the tensor-core path where it covers the
// config, docs/cuda.md); --dtype bf16 stores q, k, v, out, dout, dq, dk, dv as bfloat16
// (mta_config.dtype), as a bf16 model holds them; --nondeterministic: mta_set_deterministic(ctx, 0).
// --H_kv: key/value heads (grouped-query attention). Inputs are random normal (pool_normal: never
// zeros; rounded to bfloat16 with --dtype bf16), parameters identity plus noise. fwd_bwd_s is the
// median over --reps of one forward and one backward, timed with CUDA events after --warmup
// untimed calls. peak_mb is the GPU memory in use after the timed calls (cudaMemGetInfo) minus
// that before anything was allocated: q, k, v, out, dout, dq, dk, dv, the parameters and the
// backend's workspace (which it keeps between calls), and cuBLAS's.
#include "cli_opts.h"
#include "model/mta_layers.h"
#include "testutil.h"

#include <cuda_runtime.h>
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

// n elements of GPU memory, cleared: floats, or bfloat16 (2 bytes each: mta_config.dtype) when bf16.
static float *dev_alloc(size_t n, int bf16) {
    float *d;
    const size_t bytes = n * (bf16 ? 2 : sizeof(float));
    ck(cudaMalloc((void **)&d, bytes), "cudaMalloc");
    ck(cudaMemset(d, 0, bytes), "cudaMemset");
    return d;
}

// A normal draw for entry i of the tensor salt: one of a pool of 2^16 draws (tu_randn; it fits
// in L2), picked by a hash of (salt, i). The kernels' time does not depend on the values, and at
// T = 32768 drawing each entry would take longer than the timed calls.
enum { POOL_BITS = 16 };
static float pool_normal(uint64_t salt, size_t i) {
    static float *pool;
    if (!pool) {
        uint64_t s = 42;
        if (!(pool = malloc(sizeof(float) << POOL_BITS))) exit(1);
        for (size_t e = 0; e < (size_t)1 << POOL_BITS; e++) pool[e] = tu_randn(&s);
    }
    uint64_t z = (salt << 40) ^ (uint64_t)i;  // (splitmix64's finalizer)
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return pool[(z ^ (z >> 31)) >> (64 - POOL_BITS)];
}

// n normal values (pool_normal, a new salt from *seed) in GPU memory, as floats or rounded to
// bfloat16 (a float's upper half) when bf16.
static float *dev_randn(size_t n, int bf16, uint64_t *seed) {
    float *h = malloc(n * sizeof(float)), *d = dev_alloc(n, bf16);
    uint16_t *h16 = bf16 ? malloc(n * sizeof(uint16_t)) : NULL;
    const uint64_t salt = ++*seed;
    if (!h || (bf16 && !h16)) exit(1);
    for (size_t i = 0; i < n; i++) {
        h[i] = pool_normal(salt, i);
        if (bf16) h16[i] = tu_bf16_bits(h[i]);
    }
    ck(cudaMemcpy(d, bf16 ? (void *)h16 : (void *)h, n * (bf16 ? 2 : sizeof(float)), cudaMemcpyHostToDevice), "cudaMemcpy");
    free(h);
    free(h16);
    return d;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

enum { CFG_PLAIN, CFG_MTA830M, CFG_NORMGATE, CFG_HEADS };
static const char *const CONFIGS[] = {"plain", "mta830m", "normgate", "mta830m-heads", NULL};

typedef struct {
    uint64_t Ts[32];
    int nT, B, H, d, H_kv, rows, reps, warmup, config, bf16, dtype, nondeterministic;
} bench_args;

// The flags into a: -1 to go on, else the exit status.
static int parse(int argc, char **argv, bench_args *a) {
    const cli_opt opts[] = {
        {"T", CLI_LIST, a->Ts, 1, 1e9, .max = 32, .count = &a->nT, .arg = "LIST",
         .help = "sequence lengths; default those of tests/attn_cases.c's TC_PERF cases (2048,4096)"},
        {"B", CLI_INT, &a->B, 1, 1e9, .arg = "N", .help = "batch"},
        {"H", CLI_INT, &a->H, 1, 1e9, .arg = "N", .help = "heads"},
        {"d", CLI_INT, &a->d, 1, 1e9, .arg = "N", .help = "head dim"},
        {"H_kv", CLI_INT, &a->H_kv, 1, 1e9, .arg = "N", .help = "key/value heads, dividing H (default H)"},
        {"config", CLI_CHOICE, &a->config, .choices = CONFIGS, .arg = "NAME", .help = "the MTA steps on"},
        {"precision", CLI_CHOICE, &a->bf16, .choices = CLI_PRECISIONS, .arg = "P", .help = "mta_config.precision"},
        {"dtype", CLI_CHOICE, &a->dtype, .choices = CLI_PRECISIONS, .arg = "P",
         .help = "mta_config.dtype: the storage of q, k, v, out, dout, dq, dk, dv"},
        {"nondeterministic", CLI_FLAG, &a->nondeterministic, .help = "mta_set_deterministic(ctx, 0)"},
        {"rows", CLI_INT, &a->rows, 1, 1e9, .arg = "R", .help = "query rows per strip (default: the backend's choice)"},
        {"reps", CLI_INT, &a->reps, 1, 1e9, .arg = "N", .help = "timed calls; the median is reported"},
        {"warmup", CLI_INT, &a->warmup, 0, 1e9, .arg = "N", .help = "untimed calls first"},
    };
    const cli_spec spec = {"bench_cuda",
                           "usage: bench_cuda [--T 2048,4096] [--B 1] [--H 8] [--d 64] [--H_kv N]\n"
                           "                  [--config mta830m|mta830m-heads|normgate|plain] [--precision fp32|bf16]\n"
                           "                  [--dtype fp32|bf16] [--nondeterministic] [--rows R] [--reps 5] [--warmup 1]\n",
                           "Times forward + backward of the CUDA backend (median of --reps, CUDA events) and its GPU memory;\n"
                           "prints one JSON row per T.\n",
                           NULL, opts, sizeof opts / sizeof opts[0], NULL};
    int first;
    const int st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    const tc_case *t;
    if (!a->nT)
        while (a->nT < 32 && (t = tc_nth(TC_PERF, a->nT))) a->Ts[a->nT++] = (uint64_t)t->T;
    return -1;
}

// The config of a at sequence length T: 0, or 2 after a message.
static int config_of(const bench_args *a, int T, mta_config *c) {
    *c = mta_config_default(a->B, a->H, T, a->d);
    c->backend = MTA_BACKEND_CUDA, c->strip_rows = a->rows, c->H_kv = a->H_kv;
    c->precision = a->bf16 ? MTA_BF16 : MTA_FP32;
    c->dtype = a->dtype ? MTA_DTYPE_BF16 : MTA_DTYPE_F32;
    if (a->config == CFG_MTA830M) mta_layer_830m(c, a->H, 1);
    if (a->config == CFG_HEADS) mta_layer_830m_heads(c, a->H, 1);
    if (a->config == CFG_NORMGATE) c->group_norm = 1, c->gate = 1;
    char msg[256];
    if (!mta_config_check(c, msg, sizeof msg)) return 0;
    fprintf(stderr, "bench_cuda: %s\n", msg);
    return 2;
}

// One problem's tensors in GPU memory: random q, k, v (k, v of H_kv heads), dout; out and the
// gradients; the parameters identity plus noise, drawn on the host and copied, their gradients 0.
typedef struct {
    float *q, *k, *v, *dout, *out, *dq, *dk, *dv;
    mta_params p;
    mta_grads g;
} problem;

static void problem_make(const mta_config *c, uint64_t seed, problem *pr) {
    const size_t n = (size_t)c->B * c->H * c->T * c->d, nkv = n / c->H * (c->H_kv ? c->H_kv : c->H);
    memset(pr, 0, sizeof *pr);
    const int h = c->dtype == MTA_DTYPE_BF16;
    pr->q = dev_randn(n, h, &seed), pr->k = dev_randn(nkv, h, &seed), pr->v = dev_randn(nkv, h, &seed);
    pr->dout = dev_randn(n, h, &seed);
    pr->out = dev_alloc(n, h), pr->dq = dev_alloc(n, h), pr->dk = dev_alloc(nkv, h), pr->dv = dev_alloc(nkv, h);
    const mta_param_sizes ps = mta_param_sizes_of(c);
    float *hw[MTA_N_PARAMS] = {0};
    for (int i = 0; i < MTA_N_PARAMS; i++)
        if (ps.w[i] && !(hw[i] = calloc(ps.w[i], sizeof(float)))) exit(1);
    for (int i = 0; i < MTA_N_PARAMS; i++) mta_param_init_identity(c, i, hw[i]);
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        if (!ps.w[i]) continue;
        for (size_t e = 0; e < ps.w[i]; e++) hw[i][e] += 0.1f * tu_randn(&seed);
        float *w = dev_alloc(ps.w[i], 0), *gw = dev_alloc(ps.w[i], 0);
        ck(cudaMemcpy(w, hw[i], ps.w[i] * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
        free(hw[i]);
        pr->p.w[i] = w, pr->g.w[i] = gw;
    }
}

static void problem_free(problem *pr) {
    for (int i = 0; i < MTA_N_PARAMS; i++) cudaFree((void *)pr->p.w[i]), cudaFree(pr->g.w[i]);
    cudaFree(pr->q), cudaFree(pr->k), cudaFree(pr->v), cudaFree(pr->dout), cudaFree(pr->out);
    cudaFree(pr->dq), cudaFree(pr->dk), cudaFree(pr->dv);
}

// The median over reps timed calls (after warmup untimed ones) of one forward and one backward,
// in seconds; exits after a message when a call fails.
static double median_call(mta_ctx *ctx, const problem *pr, int T, int reps, int warmup) {
    cudaEvent_t e0, e1;
    ck(cudaEventCreate(&e0), "event"), ck(cudaEventCreate(&e1), "event");
    double *times = calloc((size_t)reps, sizeof(double));
    if (!times) exit(1);
    for (int r = -warmup; r < reps; r++) {
        ck(cudaEventRecord(e0, 0), "event");
        if (mta_forward(ctx, pr->q, pr->k, pr->v, &pr->p, pr->out) ||
            mta_backward(ctx, pr->q, pr->k, pr->v, &pr->p, pr->dout, pr->dq, pr->dk, pr->dv, &pr->g)) {
            fprintf(stderr, "bench_cuda: T=%d: %s\n", T, mta_ctx_error(ctx));
            exit(1);
        }
        ck(cudaEventRecord(e1, 0), "event");
        ck(cudaEventSynchronize(e1), "sync");
        float ms;
        ck(cudaEventElapsedTime(&ms, e0, e1), "event");
        if (r >= 0) times[r] = ms / 1e3;
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    const double med = times[reps / 2];
    free(times);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return med;
}

// Times a's problem at sequence length T and prints its JSON row: 0, or the exit status.
static int bench_T(const bench_args *a, int T, const char *device) {
    mta_config c;
    if (config_of(a, T, &c)) return 2;
    ck(cudaDeviceSynchronize(), "sync");
    size_t free0, free1, total;
    ck(cudaMemGetInfo(&free0, &total), "cudaMemGetInfo");
    problem pr;
    problem_make(&c, 42 + T, &pr);
    mta_ctx *ctx;
    char msg[256];
    if (mta_create(&ctx, &c, msg, sizeof msg)) {
        fprintf(stderr, "bench_cuda: %s\n", msg);
        return 1;
    }
    mta_set_deterministic(ctx, !a->nondeterministic);
    const double t = median_call(ctx, &pr, T, a->reps, a->warmup);
    ck(cudaMemGetInfo(&free1, &total), "cudaMemGetInfo");
    const size_t ws = mta_ctx_workspace_bytes(ctx);
    static const char *const impl[4] = {"cuda_plain", "cuda_mta", "cuda_normgate", "cuda_mta_heads"};
    printf("{\"impl\": \"%s\", \"config\": \"%s\", \"device\": \"%s\", \"dtype\": \"%s\", \"precision\": \"%s\", "
           "\"deterministic\": %s, \"T\": %d, \"B\": %d, \"H\": %d, \"H_kv\": %d, \"d\": %d, \"fwd_bwd_s\": %.6f, "
           "\"peak_mb\": %.1f, \"workspace_mb\": %.1f, \"reps\": %d}\n",
           impl[a->config], CONFIGS[a->config], device, a->dtype ? "bfloat16" : "float32", CLI_PRECISIONS[a->bf16],
           a->nondeterministic ? "false" : "true", T, a->B, a->H, a->H_kv ? a->H_kv : a->H, a->d, t,
           (free0 - free1) / 1e6, ws / 1e6, a->reps);
    fflush(stdout);
    mta_destroy(ctx);
    problem_free(&pr);
    return 0;
}

int main(int argc, char **argv) {
    const tc_case *perf = tc_nth(TC_PERF, 0);  // the default sizes and layer
    bench_args a = {.B = perf->B, .H = perf->H, .d = perf->d, .reps = 5, .warmup = 1,
                    .config = perf->l830m ? CFG_MTA830M : CFG_PLAIN};
    const int st = parse(argc, argv, &a);
    if (st >= 0) return st;
    if (!mta_backend_available(MTA_BACKEND_CUDA)) {
        fprintf(stderr, "bench_cuda: no CUDA device, or libmtac was built without the CUDA backend\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    ck(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    for (int ti = 0; ti < a.nT; ti++) {
        const int r = bench_T(&a, (int)a.Ts[ti], prop.name);
        if (r) return r;
    }
    return 0;
}
