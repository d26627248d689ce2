// testutil.c: see testutil.h.
#include "testutil.h"

#include <math.h>
#include <stdio.h>
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

mta_backend tu_backend(void) {
    const char *e = getenv("MTAC_BACKEND");
    mta_backend b = MTA_BACKEND_FUSED;
    if (e && *e && mta_backend_from_name(e, &b)) {
        fprintf(stderr, "MTAC_BACKEND=%s is not a backend\n", e);
        exit(2);
    }
    return b;
}

mta_config tu_config_default(int B, int H, int T, int d) {
    mta_config c = mta_config_default(B, H, T, d);
    c.backend = tu_backend();
    return c;
}

mta_config tu_config_all(int B, int H, int T, int d, int cq, int ck, int ch) {
    mta_config c = tu_config_default(B, H, T, d);
    c.pre_cq = cq, c.pre_ck = ck, c.pre_head_mix = 1, c.post_cq = cq, c.post_ck = ck, c.post_ch = ch;
    c.group_norm = 1, c.gate = 1;
    return c;
}

mta_config tu_combo(int shape, int mask, float dropout) {
    static const struct {
        int B, H, T, d, pre_cq, pre_ck, post_cq, post_ck, ch;
    } shapes[TU_NSHAPES] = {
        {1, 1, 7, 3, 2, 9, 3, 11, 1},    // H = 1; c_k > T
        {2, 3, 23, 5, 1, 3, 4, 5, 1},    // B > 1, odd H with c_h = 1, pre c_q = 1
        {1, 3, 29, 4, 3, 5, 1, 3, 3},    // c_h = H (odd), post c_q = 1
        {2, 4, 31, 6, 6, 11, 5, 7, 2},   // 1 < c_h < H, c_q wider than small strips
        {1, 6, 37, 17, 5, 3, 2, 13, 3},  // d past a vector with a tail, 1 < c_h < H
    };
    const int s = shape % TU_NSHAPES;
    mta_config c = tu_config_default(shapes[s].B, shapes[s].H, shapes[s].T, shapes[s].d);
    if (mask & TU_PRE) c.pre_cq = shapes[s].pre_cq, c.pre_ck = shapes[s].pre_ck;
    if (mask & TU_MIX) c.pre_head_mix = 1;
    if (mask & TU_POST) c.post_cq = shapes[s].post_cq, c.post_ck = shapes[s].post_ck;
    if (mask & TU_HCONV) c.post_ch = shapes[s].ch;
    if (mask & TU_GN) c.group_norm = 1, c.depth_scale = s % 2, c.layer_id = 2;
    if (mask & TU_GATE) c.gate = 1;
    c.dropout = dropout;
    return c;
}

const char *tu_combo_name(int mask, char *buf, size_t n) {
    static const char *names[6] = {"pre", "mix", "post", "hconv", "gn", "gate"};
    size_t at = 0;
    buf[0] = 0;
    for (int i = 0; i < 6; i++)
        if (mask >> i & 1) at += (size_t)snprintf(buf + at, at < n ? n - at : 0, "%s%s", at ? "+" : "", names[i]);
    if (!mask) snprintf(buf, n, "plain");
    return buf;
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
