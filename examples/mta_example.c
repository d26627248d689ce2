// mta_example.c: a program that uses the installed libmtac (examples/CMakeLists.txt, the README.s
// "Using mtac from C and PyTorch"). It runs MTA with every step on and identity kernels, which
// must reproduce plain causal attention (spec section 2), and checks that against a direct
// computation here; then a backward. Exit status 0 when the operator agrees within 1e-5.
#include <mta.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

int main(void) {
    const int B = 2, H = 4, T = 37, d = 16;
    mta_config cfg = mta_config_default(B, H, T, d);
    cfg.pre_cq = 6, cfg.pre_ck = 11, cfg.pre_head_mix = 1;
    cfg.post_cq = 6, cfg.post_ck = 11, cfg.post_ch = H;
    cfg.threads = 2;
    char err[256];
    mta_ctx *ctx;
    if (mta_create(&ctx, &cfg, err, sizeof err) != MTA_OK) {
        fprintf(stderr, "mta_create: %s\n", err);
        return 1;
    }
    size_t n = (size_t)B * H * T * d;
    mta_param_sizes ps = mta_param_sizes_of(&cfg);
    float *q = malloc(n * sizeof *q), *k = malloc(n * sizeof *k), *v = malloc(n * sizeof *v);
    float *out = malloc(n * sizeof *out), *dq = calloc(n, sizeof *dq), *dk = calloc(n, sizeof *dk),
          *dv = calloc(n, sizeof *dv);
    float *w_pre = malloc(ps.w_pre * sizeof(float)), *w_pre_head = malloc(ps.w_pre_head * sizeof(float));
    float *w_post = malloc(ps.w_post * sizeof(float)), *w_post_head = malloc(ps.w_post_head * sizeof(float));
    if (!q || !k || !v || !out || !dq || !dk || !dv || !w_pre || !w_pre_head || !w_post || !w_post_head) return 1;
    unsigned s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u, q[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
        s = s * 1664525u + 1013904223u, k[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
        s = s * 1664525u + 1013904223u, v[i] = (float)(s >> 8) / 16777216.0f - 0.5f;
    }
    mta_params_init_identity(&cfg, w_pre, w_pre_head, w_post, w_post_head, NULL, NULL);
    mta_params p = {.w_pre = w_pre, .w_pre_head = w_pre_head, .w_post = w_post, .w_post_head = w_post_head};
    if (mta_forward(ctx, q, k, v, &p, out) != MTA_OK) {
        fprintf(stderr, "mta_forward: %s\n", mta_ctx_error(ctx));
        return 1;
    }
    // Plain causal softmax attention, directly.
    double worst = 0;
    for (int bh = 0; bh < B * H; bh++)
        for (int i = 0; i < T; i++) {
            const float *qi = q + ((size_t)bh * T + i) * d;
            double w[64], m = -INFINITY, z = 0;
            for (int j = 0; j <= i; j++) {
                double dot = 0;
                for (int x = 0; x < d; x++) dot += (double)qi[x] * k[((size_t)bh * T + j) * d + x];
                w[j] = dot / sqrt((double)d);
                if (w[j] > m) m = w[j];
            }
            for (int j = 0; j <= i; j++) z += (w[j] = exp(w[j] - m));
            for (int x = 0; x < d; x++) {
                double o = 0;
                for (int j = 0; j <= i; j++) o += w[j] / z * v[((size_t)bh * T + j) * d + x];
                double e = fabs(o - out[((size_t)bh * T + i) * d + x]);
                if (e > worst) worst = e;
            }
        }
    // A backward of sum(out): gradients are added to zeroed buffers.
    mta_grads g = {0};
    if (mta_backward(ctx, q, k, v, &p, out, dq, dk, dv, &g) != MTA_OK) {
        fprintf(stderr, "mta_backward: %s\n", mta_ctx_error(ctx));
        return 1;
    }
    double gsum = 0;
    for (size_t i = 0; i < n; i++) gsum += fabs(dq[i]) + fabs(dk[i]) + fabs(dv[i]);
    printf("mtac example: identity MTA vs plain attention, max |diff| %.3g; sum |dq|+|dk|+|dv| = %.4f\n", worst, gsum);
    mta_destroy(ctx);
    free(q), free(k), free(v), free(out), free(dq), free(dk), free(dv);
    free(w_pre), free(w_pre_head), free(w_post), free(w_post_head);
    return worst <= 1e-5 ? 0 : 1;
}
