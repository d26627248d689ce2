// test_cuda.c [--quick]: the CUDA backend against the CPU reference backend, on the GPU.
//   - every on/off combination of the six MTA steps on every shape of tu_combo (H = 1, odd H,
//     head-conv groups, B > 1, c_q = 1, kernels wider than T, odd d), with and without dropout,
//     at strips of 1, 3 and 16 rows and the default size;
//   - the hand-picked variants of tu_variant, and longer sequences of the 830M layer pattern
//     (several default strips, T not a multiple of them);
//   - the same inputs give the same bits on every run (no atomics: fixed reductions).
// Errors are measured as in test_attn_backends (relative to each reference tensor's largest
// entry) and must stay under 2e-5: the products are exact float32 (no TF32).
// --quick: a few small cases (for compute-sanitizer). Exits 77 (CTest's skip) without a GPU.
// Needs only libmtac, the CUDA runtime and this file's helpers: no cmocka, so that a machine with
// just the CUDA toolkit and a BLAS can build and run it.
#include "testutil.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures, runs, printed;
static double worst_seen;

#define CK(x)                                                                                          \
    do {                                                                                               \
        cudaError_t e_ = (x);                                                                          \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "test_cuda: %s failed: %s\n", #x, cudaGetErrorString(e_));                 \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

static float *to_dev(const float *h, size_t n) {
    float *d = NULL;
    CK(cudaMalloc((void **)&d, (n ? n : 1) * sizeof(float)));
    if (n) CK(cudaMemcpy(d, h, n * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}

static void to_host(float *h, const float *d, size_t n) {
    if (n) CK(cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost));
}

// Forward and backward of case c on the GPU (cfg.backend = cuda), inputs from c's host arrays and
// results back into them. Returns the status.
static mta_status gpu_run(tu_case *c) {
    const size_t n = c->n;
    float *q = to_dev(c->q, n), *k = to_dev(c->k, n), *v = to_dev(c->v, n), *dout = to_dev(c->dout, n);
    float *out, *dq, *dk, *dv;
    CK(cudaMalloc((void **)&out, n * sizeof(float)));
    CK(cudaMalloc((void **)&dq, 3 * n * sizeof(float)));
    CK(cudaMemset(out, 0xff, n * sizeof(float)));  // NaN: every entry must be written
    CK(cudaMemset(dq, 0, 3 * n * sizeof(float)));
    dk = dq + n, dv = dq + 2 * n;
    float *w[7] = {0}, *gw[7] = {0};
    for (int i = 0; i < 7; i++)
        if (c->w[i]) {
            w[i] = to_dev(c->w[i], c->wn[i]);
            CK(cudaMalloc((void **)&gw[i], c->wn[i] * sizeof(float)));
            CK(cudaMemset(gw[i], 0, c->wn[i] * sizeof(float)));
        }
    const mta_params p = {w[0], w[1], w[2], w[3], w[4], w[5], w[6]};
    const mta_grads g = {gw[0], gw[1], gw[2], gw[3], gw[4], gw[5], gw[6]};
    mta_ctx *ctx;
    char msg[256];
    mta_status s = mta_create(&ctx, &c->cfg, msg, sizeof msg);
    if (s) {
        fprintf(stderr, "test_cuda: %s\n", msg);
        exit(1);
    }
    if (c->cfg.dropout > 0) mta_set_dropout(ctx, 1, 1234);
    s = mta_forward(ctx, q, k, v, &p, out);
    if (!s) s = mta_backward(ctx, q, k, v, &p, dout, dq, dk, dv, &g);
    if (s) fprintf(stderr, "test_cuda: %s\n", mta_ctx_error(ctx));
    CK(cudaDeviceSynchronize());
    mta_destroy(ctx);
    to_host(c->out, out, n);
    to_host(c->dq, dq, 3 * n);
    for (int i = 0; i < 7; i++)
        if (c->w[i]) {
            to_host(c->gw[i], gw[i], c->wn[i]);
            CK(cudaFree(w[i]));
            CK(cudaFree(gw[i]));
        }
    float *bufs[6] = {q, k, v, dout, out, dq};
    for (int i = 0; i < 6; i++) CK(cudaFree(bufs[i]));
    return s;
}

// The config on the reference backend and on the GPU at each strip size of rows (0: default).
static void check(const mta_config *cfg, uint64_t seed, const int *rows, int nrows, const char *label) {
    mta_config rc = *cfg;
    rc.backend = MTA_BACKEND_REFERENCE, rc.strip_rows = 0;
    tu_case *ref = tu_case_new(&rc, seed, 1.0f, 0.3f);
    if (tu_case_train(ref, NULL)) exit(1);
    mta_config gc = *cfg;
    gc.backend = MTA_BACKEND_CUDA;
    tu_case *f = tu_case_new(&gc, seed, 1.0f, 0.3f);
    for (int r = 0; r < nrows; r++) {
        f->cfg.strip_rows = rows[r];
        const mta_status s = gpu_run(f);
        const char *which = "status";
        const double e = s ? INFINITY : tu_rel_diff(f, ref, &which);
        if (e > worst_seen) worst_seen = e;
        runs++;
        if (!(e <= 2e-5)) {
            failures++;
            if (printed++ < 40)
                printf("FAIL %s, %d rows per strip: %s differs from the reference by %.3g\n", label, rows[r], which, e);
        }
    }
    tu_case_free(f);
    tu_case_free(ref);
}

static void check_repeatable(const mta_config *cfg, const char *label) {
    mta_config gc = *cfg;
    gc.backend = MTA_BACKEND_CUDA;
    tu_case *a = tu_case_new(&gc, 11, 1.0f, 0.3f), *b = tu_case_new(&gc, 11, 1.0f, 0.3f);
    gpu_run(a);
    gpu_run(b);
    runs++;
    if (!tu_same_bits(a, b)) {
        failures++;
        printf("FAIL %s: two runs on the same inputs differ\n", label);
    }
    tu_case_free(a);
    tu_case_free(b);
}

int main(int argc, char **argv) {
    const int quick = argc > 1 && !strcmp(argv[1], "--quick");
    if (argc > 2 || (argc == 2 && !quick)) {
        fprintf(stderr, "usage: test_cuda [--quick]\n");
        return 2;
    }
    if (!mta_backend_available(MTA_BACKEND_CUDA)) {
        printf("test_cuda: no CUDA device (or a build without the CUDA backend); skipped\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("test_cuda: %s (sm_%d%d, %d SMs)\n", prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    if (quick) {
        const int rows[] = {3, 0};
        mta_config c = tu_config_all(1, 4, 23, 5, 2, 3, 2);
        c.dropout = 0.25f;
        check(&c, 5, rows, 2, "quick: every step, dropout");
        c = tu_config_all(2, 2, 19, 4, 1, 7, 2);
        check(&c, 6, rows, 2, "quick: c_q = 1");
    } else {
        const int rows[] = {1, 3, 16, 0};
        char name[64], label[128];
        for (int shape = 0; shape < TU_NSHAPES; shape++)
            for (int mask = 0; mask < TU_NCOMBOS; mask++)
                for (int di = 0; di < 2; di++) {
                    const float drop = di ? 0.25f : 0.0f;
                    snprintf(label, sizeof label, "shape %d, %s, dropout %.2f", shape, tu_combo_name(mask, name, sizeof name),
                             drop);
                    const mta_config c = tu_combo(shape, mask, drop);
                    check(&c, 1000 + 128 * shape + 2 * mask + di, rows, 4, label);
                }
        for (int k = 0; k < TU_NVARIANTS; k++) {
            snprintf(label, sizeof label, "variant %d", k);
            const mta_config c = tu_variant(k);
            const int vrows[] = {1, 2, 5, 16, 64};
            check(&c, 40 + k, vrows, 5, label);
        }
        // the 830M pattern over several default strips; d = 64 and 96, T not a multiple of 64
        const int lrows[] = {0, 24};
        mta_config c = tu_config_all(1, 8, 333, 64, 6, 11, 8);
        check(&c, 91, lrows, 2, "830M pattern, H = 8, T = 333, d = 64");
        c = tu_config_all(2, 4, 200, 96, 6, 11, 4);
        c.dropout = 0.1f;
        check(&c, 92, lrows, 2, "830M pattern, B = 2, T = 200, d = 96, dropout");
        c = tu_config_all(1, 8, 333, 64, 6, 11, 8);
        check_repeatable(&c, "830M pattern, repeated");
        c.dropout = 0.2f;
        check_repeatable(&c, "830M pattern with dropout, repeated");
    }
    printf("test_cuda: %d of %d runs failed; largest difference from the reference %.3g\n", failures, runs, worst_seen);
    return failures ? 1 : 0;
}
