// testutil.c: see testutil.h.
#include "testutil.h"
#include "model/mta_layers.h"
#include "util/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// xorshift64*: uniform in [0, 1). The tests keep their own uniforms rather than rng_uniform's:
// test_attn_backends' bf16 tolerance holds a cancellation factor measured on the problems these
// draws make (bf16_tolerance), which other inputs exceed.
static double uniform(uint64_t *s) {
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return ((*s * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}

float tu_randn(uint64_t *s) {
    // two declarators, in order (the calls of one braced initializer would be in no fixed order);
    // 1e-300 keeps log() from 0 and changes no other u0
    const double u0 = uniform(s), u1 = uniform(s);
    return (float)rng_box_muller(u0 + 1e-300, u1);
}

double tu_worst(double worst, double e) { return isfinite(worst) && isfinite(e) ? fmax(worst, e) : INFINITY; }

double tu_gamma(double n) { return n * 0x1p-24 / (1 - n * 0x1p-24); }

double tu_sum_ratio(double got, double ref, double abs, double n) {
    const double e = fabs(got - ref);
    return e == 0 ? 0 : e < INFINITY ? e / (tu_gamma(n) * abs) : INFINITY;
}

int tu_close(double a, double b, double atol, double rtol) {
    return isfinite(a) && isfinite(b) && fabs(a - b) <= atol + rtol * fabs(b);
}

double tu_max_abs(const float *a, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = tu_worst(m, fabs(a[i]));
    return m;
}

// |a - b| is NaN or infinite exactly when a or b is.
double tu_max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = tu_worst(m, fabs((double)a[i] - b[i]));
    return m;
}

mta_backend tu_backend(void) {
    const char *e = getenv("MTAC_BACKEND");
    mta_backend b = MTA_BACKEND_FUSED;
    if (e && *e && (mta_backend_from_name(e, &b) || mta_backend_device_memory(b))) {
        fprintf(stderr, "MTAC_BACKEND=%s is not a backend of host tensors\n", e);
        exit(2);
    }
    return b;
}

float tu_bf16_round(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

uint16_t tu_bf16_bits(float x) {
    const float r = tu_bf16_round(x);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    return (uint16_t)(u >> 16);
}

mta_config tu_config_default(int B, int H, int T, int d) {
    mta_config c = mta_config_default(B, H, T, d);
    c.backend = tu_backend();
    return c;
}

mta_config tu_config_all(int B, int H, int T, int d, int cq, int ck, int ch) {
    mta_config c = tu_config_default(B, H, T, d);
    mta_layer_all_steps(&c, cq, ck, ch, 1);
    return c;
}

mta_config tu_config_830m(int B, int H, int T, int d) {
    mta_config c = tu_config_default(B, H, T, d);
    mta_layer_830m(&c, H, 1);
    return c;
}

mta_config tu_config_of(const tc_case *t) {
    mta_config c = tc_config(t);
    c.backend = tu_backend();
    return c;
}

int tu_case_docs(const tc_case *t, const mta_config *c, int32_t *doc) {
    const int *lens;
    const int n = tc_docs(t, &lens);
    if (n) tu_docs_cycle(lens, n, t->docs_first, c->B, c->T, doc);
    return n > 0;
}

mta_config tu_combo(int shape, int mask, float dropout) {
    const int s = shape % TU_NSHAPES;
    const tc_case *t = tc_nth(TC_COMBO, s);
    mta_config c = tu_config_default(t->B, t->H, t->T, t->d);
    if (t->H_kv) c.H_kv = t->H_kv;
    if (mask & TU_PRE) c.pre_cq = t->pre_cq, c.pre_ck = t->pre_ck;
    if (mask & TU_MIX) c.pre_head_mix = 1;
    if (mask & TU_POST) c.post_cq = t->post_cq, c.post_ck = t->post_ck;
    if (mask & TU_HCONV) c.post_ch = t->ch;
    if (mask & TU_GN) c.group_norm = 1, c.depth_scale = s % 2, c.layer_id = 2;
    if (mask & TU_GATE) c.gate = 1;
    c.dropout = dropout;
    return c;
}

void tu_docs_cycle(const int *lens, int nlens, int first, int B, int T, int32_t *doc) {
    for (int b = 0; b < B; b++)
        for (int i = 0, k = first + 3 * b, id = 0; i < T; k++, id ^= 1)
            for (int n = 0; n < lens[k % nlens] && i < T; n++) doc[(size_t)b * T + i++] = id;
}

int tu_combo_docs(int shape, const mta_config *c, int32_t *doc) {
    return tu_case_docs(tc_nth(TC_COMBO, shape % TU_NSHAPES), c, doc);
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
    c->nkv = c->n / cfg->H * (cfg->H_kv > 0 ? cfg->H_kv : cfg->H);
    const mta_param_sizes ps = mta_param_sizes_of(cfg);
    const size_t *wn = ps.w;
    size_t np = 0;
    for (int i = 0; i < MTA_N_PARAMS; i++) np += wn[i];
    const size_t nd = (size_t)cfg->B * cfg->T;  // document ids, int32 in float slots
    c->nmem = 8 * c->n + 2 * np + nd + 1, c->ngrad = 8 * c->n + np + nd;
    c->mem = calloc(c->nmem, sizeof(float));
    if (!c->mem) {
        free(c);
        return NULL;
    }
    float *m = c->mem;
    c->q = m, c->k = m + c->n, c->v = m + 2 * c->n, c->dout = m + 3 * c->n, c->out = m + 4 * c->n;
    c->dq = m + 5 * c->n, c->dk = m + 6 * c->n, c->dv = m + 7 * c->n;
    float *cur = m + 8 * c->n;
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        c->wn[i] = wn[i];
        c->w[i] = wn[i] ? cur : NULL;
        c->gw[i] = wn[i] ? cur + np + nd : NULL;
        cur += wn[i];
    }
    c->doc = (int32_t *)cur;
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (size_t i = 0; i < c->n; i++) {
        c->q[i] = qk_scale * tu_randn(&s);
        c->k[i] = qk_scale * tu_randn(&s);
        c->v[i] = tu_randn(&s);
        c->dout[i] = tu_randn(&s);
    }
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        mta_param_init_identity(cfg, i, c->w[i]);
        c->p.w[i] = c->w[i], c->g.w[i] = c->gw[i];
    }
    for (int i = 0; i < MTA_N_PARAMS; i++)
        for (size_t j = 0; j < wn[i]; j++) c->w[i][j] += noise * tu_randn(&s);
    return c;
}

void tu_case_set_docs(tu_case *c, const int32_t *doc) {
    c->docs = doc != NULL;
    if (doc) memcpy(c->doc, doc, (size_t)c->cfg.B * c->cfg.T * sizeof(int32_t));
}

void tu_case_free(tu_case *c) {
    if (!c) return;
    free(c->mem);
    free(c);
}

// The device address of host address x of case c, whose memory is mirrored at dev.
#define ON_DEV(c, dev, x) ((x) ? (dev) + ((x) - (c)->mem) : NULL)

// Forward (and backward, with zeroed gradients) of c on ctx. With a backend whose calls take device
// memory, c's whole memory is mirrored there (mta_backend_alloc), run on, and copied back.
static mta_status case_calls(tu_case *c, mta_ctx *ctx, int backward) {
    const mta_backend b = c->cfg.backend;
    float *dev = c->mem;
    const size_t bytes = c->nmem * sizeof(float);
    if (mta_backend_device_memory(b)) {
        void *p;
        mta_status s = mta_backend_alloc(b, bytes, &p);
        if (!s) s = mta_backend_upload(b, p, c->mem, bytes);
        if (s) return s;
        dev = p;
    }
    mta_params p;
    mta_grads g;
    for (int i = 0; i < MTA_N_PARAMS; i++) p.w[i] = ON_DEV(c, dev, c->w[i]), g.w[i] = ON_DEV(c, dev, c->gw[i]);
    if (c->docs) mta_set_documents(ctx, (const int32_t *)ON_DEV(c, dev, (float *)c->doc));
    mta_status s = mta_forward(ctx, ON_DEV(c, dev, c->q), ON_DEV(c, dev, c->k), ON_DEV(c, dev, c->v), &p,
                               ON_DEV(c, dev, c->out));
    if (!s && backward)
        s = mta_backward(ctx, ON_DEV(c, dev, c->q), ON_DEV(c, dev, c->k), ON_DEV(c, dev, c->v), &p, ON_DEV(c, dev, c->dout),
                         ON_DEV(c, dev, c->dq), ON_DEV(c, dev, c->dk), ON_DEV(c, dev, c->dv), &g);
    if (dev != c->mem) {
        const mta_status t = mta_backend_synchronize(b);
        // everything the calls write: out, dq, dk, dv (consecutive) and the parameter gradients
        const mta_status u = mta_backend_download(b, c->out, ON_DEV(c, dev, c->out), 4 * c->n * sizeof(float));
        const mta_status w = mta_backend_download(b, c->mem + c->ngrad, dev + c->ngrad, (c->nmem - c->ngrad) * sizeof(float));
        mta_backend_free(b, dev);
        if (!s) s = t ? t : u ? u : w;
    }
    return s;
}

// Forward (and backward, with zeroed gradients) on a fresh context; with training, dropout is on
// with seed 1234. *bytes (when not NULL) gets the context's workspace after the calls. out starts
// as NaN, so that an entry the backend never writes fails every comparison.
static mta_status case_run(tu_case *c, int backward, int training, size_t *bytes) {
    mta_ctx *ctx;
    mta_status s = mta_create(&ctx, &c->cfg, NULL, 0);
    if (s) return s;
    if (training) mta_set_dropout(ctx, 1, 1234);
    if (c->atomics) mta_set_deterministic(ctx, 0);
    memset(c->out, 0xff, c->n * sizeof(float));
    if (backward) {
        memset(c->dq, 0, 3 * c->n * sizeof(float));
        for (int i = 0; i < MTA_N_PARAMS; i++)
            if (c->gw[i]) memset(c->gw[i], 0, c->wn[i] * sizeof(float));
    }
    s = case_calls(c, ctx, backward);
    if (bytes) *bytes = mta_ctx_workspace_bytes(ctx);
    mta_destroy(ctx);
    return s;
}

mta_status tu_case_run(tu_case *c, int backward) { return case_run(c, backward, 0, NULL); }

mta_status tu_case_forward(tu_case *c, size_t *bytes) { return case_run(c, 0, 0, bytes); }

mta_status tu_case_train(tu_case *c, size_t *bytes) { return case_run(c, 1, c->cfg.dropout > 0, bytes); }
mta_status tu_case_train_forward(tu_case *c) { return case_run(c, 0, c->cfg.dropout > 0, NULL); }

int tu_same_bits_but_kv(const tu_case *a, const tu_case *b) {
    if (memcmp(a->out, b->out, a->n * sizeof(float)) || memcmp(a->dq, b->dq, a->n * sizeof(float))) return 0;
    for (int i = 0; i < MTA_N_PARAMS; i++)
        if (a->wn[i] && memcmp(a->gw[i], b->gw[i], a->wn[i] * sizeof(float))) return 0;
    return 1;
}

int tu_same_bits(const tu_case *a, const tu_case *b) {
    // dk and dv are consecutive in a case's memory
    return tu_same_bits_but_kv(a, b) && !memcmp(a->dk, b->dk, 2 * a->n * sizeof(float));
}

// err over max(scale, 1e-6); +INFINITY when err is (a NaN or infinity in either tensor), where
// INFINITY / INFINITY would be a NaN that `e > worst` below and the callers' `e > tol` pass.
static double rel(double err, double scale) { return err < INFINITY ? err / fmax(1e-6, scale) : INFINITY; }

// Largest difference of every output and gradient, relative to the reference tensor's largest
// entry; *which names the worst tensor when which is not NULL.
double tu_rel_diff(const tu_case *a, const tu_case *r, const char **which) {
    static const char *names[4] = {"out", "dq", "dk", "dv"};
    const float *x[4] = {a->out, a->dq, a->dk, a->dv}, *y[4] = {r->out, r->dq, r->dk, r->dv};
    double worst = 0;
    int wi = 0;
    for (int t = 0; t < 4; t++) {
        const double e = rel(tu_max_abs_diff(x[t], y[t], a->n), tu_max_abs(y[t], a->n));
        if (e > worst) worst = e, wi = t;
    }
    for (int i = 0; i < MTA_N_PARAMS; i++)
        if (r->wn[i]) {
            // Gradients that are zero or one number up to rounding are measured at the scale of
            // a sum of the same kind of products:
            // - the gate bias's, a sum over every row that largely cancels (0.06 from terms of
            //   order 1 in the 830M variant), at the gate weight's (a bias column of it);
            // - a head-convolution group of one head scales its head's P2 by a constant: its
            //   gradient is one sum over every entry of P1 dP2, which the group norm cancels
            //   exactly and, without it, random signs cancel largely: at the post-softmax
            //   kernel's (sums of dP1 P, the same kind of products over fewer entries) or,
            //   without that kernel (then with the norm), the norm weight's (dout times normed O
            //   over rows, the same products uncancelled);
            // - a one-head mixing is one scalar on the scores: at the pre-softmax kernel's.
            double scale = tu_max_abs(r->gw[i], r->wn[i]);
            const int like = i == MTA_GATE_B && r->wn[MTA_GATE_W] ? MTA_GATE_W
                             : i == MTA_W_POST_HEAD && r->cfg.post_ch == 1 && (r->cfg.group_norm || r->wn[MTA_W_POST])
                                 ? (r->wn[MTA_W_POST] ? MTA_W_POST : MTA_GN_WEIGHT)
                             : i == MTA_W_PRE_HEAD && r->cfg.H == 1 && r->wn[MTA_W_PRE] ? MTA_W_PRE
                                                                                       : i;
            scale = fmax(scale, tu_max_abs(r->gw[like], r->wn[like]));
            const double e = rel(tu_max_abs_diff(a->gw[i], r->gw[i], r->wn[i]), scale);
            if (e > worst) worst = e, wi = 4 + i;
        }
    if (which) *which = wi < 4 ? names[wi] : mta_param_info(wi - 4)->name;
    return worst;
}

// x times 1 + u y, y uniform in [-1, 1], for each of n floats.
static void perturb(float *x, size_t n, uint64_t *s) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(x[i] * (1.0 + 0x1p-24 * (2 * uniform(s) - 1)));
}

tu_case *tu_case_perturbed(const tu_case *r, uint64_t seed) {
    tu_case *p = tu_case_new(&r->cfg, 1, 1.0f, 0.0f);
    if (!p) return NULL;
    // r's inputs and parameters: its memory before the parameters' gradients (q, k, v, dout, the
    // outputs the run overwrites, the parameters and the document ids)
    memcpy(p->mem, r->mem, r->ngrad * sizeof(float));
    tu_case_set_docs(p, r->docs ? r->doc : NULL);
    uint64_t s = seed * 0x9E3779B97F4A7C15ULL + 7;
    perturb(p->q, 4 * p->n, &s);  // q, k, v, dout
    for (int i = 0; i < MTA_N_PARAMS; i++) perturb(p->w[i], p->wn[i], &s);
    return p;
}

double tu_rounding_noise(const tu_case *r, uint64_t seed) {
    tu_case *p = tu_case_perturbed(r, seed);
    if (!p) return INFINITY;  // fails every check, loudly
    const double noise = tu_case_train(p, NULL) ? INFINITY : tu_rel_diff(p, r, NULL);
    tu_case_free(p);
    return noise;
}

double tu_rounding_bound(double noise) { return TU_ROUNDING_STEPS * fmax(noise, 0x1p-24); }

double tu_rounding_check(const tu_case *a, const tu_case *r, uint64_t seed, const char **which) {
    const double e = tu_rel_diff(a, r, which), bound = tu_rounding_bound(tu_rounding_noise(r, seed));
    return e < INFINITY && bound < INFINITY ? e / bound : INFINITY;
}

mta_config tu_variant(int k) { return tu_config_of(tc_nth(TC_VARIANT, k)); }
