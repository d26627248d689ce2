// testutil.c: see testutil.h.
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

float tu_randn(uint64_t *s) {
    // xorshift64* uniforms through Box-Muller (one value per call keeps it simple).
    double u[2];
    for (int i = 0; i < 2; i++) {
        *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
        u[i] = ((*s * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
    }
    return (float)(sqrt(-2.0 * log(u[0] + 1e-300)) * cos(6.283185307179586 * u[1]));
}

double tu_max_abs(const float *a, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

double tu_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

mta_config tu_config_all(int B, int H, int T, int d, int cq, int ck, int ch) {
    mta_config c = mta_config_default(B, H, T, d);
    c.pre_cq = cq, c.pre_ck = ck, c.pre_head_mix = 1, c.post_cq = cq, c.post_ck = ck, c.post_ch = ch;
    c.group_norm = 1, c.gate = 1;
    return c;
}

tu_case *tu_case_new(const mta_config *cfg, uint64_t seed, float qk_scale, float noise) {
    tu_case *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->cfg = *cfg;
    c->n = (size_t)cfg->B * cfg->H * cfg->T * cfg->d;
    mta_param_sizes ps = mta_param_sizes_of(cfg);
    size_t wn[7] = {ps.w_pre, ps.w_pre_head, ps.w_post, ps.w_post_head, ps.gn_weight, ps.gate_w, ps.gate_b};
    size_t np = 0;
    for (int i = 0; i < 7; i++) np += wn[i];
    c->mem = calloc(8 * c->n + 2 * np + 1, sizeof(float));
    if (!c->mem) {
        free(c);
        return NULL;
    }
    float *m = c->mem;
    c->q = m, c->k = m + c->n, c->v = m + 2 * c->n, c->dout = m + 3 * c->n, c->out = m + 4 * c->n;
    c->dq = m + 5 * c->n, c->dk = m + 6 * c->n, c->dv = m + 7 * c->n;
    float *cur = m + 8 * c->n;
    for (int i = 0; i < 7; i++) {
        c->wn[i] = wn[i];
        c->w[i] = wn[i] ? cur : NULL;
        c->gw[i] = wn[i] ? cur + np : NULL;
        cur += wn[i];
    }
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < c->n; i++) {
        c->q[i] = qk_scale * tu_randn(&s);
        c->k[i] = qk_scale * tu_randn(&s);
        c->v[i] = tu_randn(&s);
        c->dout[i] = tu_randn(&s);
    }
    mta_params_init_identity(cfg, c->w[0], c->w[1], c->w[2], c->w[3], c->w[4], c->w[6]);
    for (int i = 0; i < 7; i++)
        for (size_t j = 0; j < wn[i]; j++) c->w[i][j] += noise * tu_randn(&s);
    mta_params p = {c->w[0], c->w[1], c->w[2], c->w[3], c->w[4], c->w[5], c->w[6]};
    mta_grads g = {c->gw[0], c->gw[1], c->gw[2], c->gw[3], c->gw[4], c->gw[5], c->gw[6]};
    c->p = p;
    c->g = g;
    return c;
}

void tu_case_free(tu_case *c) {
    if (!c) return;
    free(c->mem);
    free(c);
}

mta_status tu_case_run(tu_case *c, int backward) {
    mta_ctx *ctx;
    mta_status s = mta_create(&ctx, &c->cfg, NULL, 0);
    if (s) return s;
    s = mta_forward(ctx, c->q, c->k, c->v, &c->p, c->out);
    if (!s && backward) {
        memset(c->dq, 0, 3 * c->n * sizeof(float));
        for (int i = 0; i < 7; i++)
            if (c->gw[i]) memset(c->gw[i], 0, c->wn[i] * sizeof(float));
        s = mta_backward(ctx, c->q, c->k, c->v, &c->p, c->dout, c->dq, c->dk, c->dv, &c->g);
    }
    mta_destroy(ctx);
    return s;
}
