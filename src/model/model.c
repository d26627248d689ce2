// model.c: the MTA transformer, forward and backward (docs/model.md).
// Shapes: N = B*T rows; x (N,D); q, attention out (B,H,T,d); k, v (B,H_kv,T,d) (H_kv = n_kv_heads); FFN hidden (N,F); logits (N,V).
// Linear layers store W as (out,in) like nn.Linear, so y = x W^T.
#include "model/model.h"
#include "model/swiglu.h"
#include "util/errmsg.h"
#include "util/fnv1a.h"
#include "io/safetensors.h"
#include "util/rng.h"
#include "util/threads.h"
#include "util/tokens.h"

#include <cblas.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    MAX_TENSORS = 16 * MODEL_MAX_LAYERS + 2,
    STRIP_ROWS = 32  // fused strips of a forward without a backward, and of mixing layers (ensure_acts)
};

typedef struct {
    float *x_in, *xn1, *rms1, *q, *k, *v, *ao, *aoc, *x_mid, *xn2, *rms2, *h1, *h3, *hg;
} layer_acts;

struct model {
    model_config cfg;
    int d;                    // head dim
    model_tensor tensors[MAX_TENSORS];
    int n_tensors;
    size_t num_params;
    float *params, *grads;
    model_weights w, g;
    // activations of the last forward, for batches up to (cap_B, cap_T); cap_keep: every layer's
    // (for the backward), else one layer's set that all layers reuse (a forward without targets)
    int B, T, cap_B, cap_T, cap_keep, have_targets, n_valid;
    int training;
    uint64_t seed;
    int *tokens, *targets;
    // doc_mask: each position's document id (counting EOS tokens before it in its row) and its
    // RoPE position within the document; docs_on when some row holds more than one document
    int32_t *doc;
    int *pos, docs_on;
    float *acts;  // the buffers below, one allocation (carve_acts)
    layer_acts la[MODEL_MAX_LAYERS];
    float *xf, *xnf, *rmsf, *logits, *rope_cos, *rope_sin;
    // The forward's (N,D) q, k, v rows, before RoPE and the split into (B,H,T,d) heads (la[l].q,
    // .k, .v), which every layer reuses.
    float *q_rows, *k_rows, *v_rows;
    // backward scratch (NULL after a forward without targets). The attention's gradients dq
    // (B,H,T,d) and dk, dv (B,H_kv,T,d) are q_rows, k_rows, v_rows again: those are dead once the
    // forward has split them into heads.
    float *dx, *dxn, *dlin, *dq, *dk, *dv, *dao, *dh1, *dh3, *dlogits;
    mta_ctx *ctx[MODEL_MAX_LAYERS];
    mta_backend backend;  // of the attention contexts (fused unless maps are needed)
    model_grad_hook grad_ready;
    void *grad_ready_arg;
};

// ---- parameter layout ---------------------------------------------------------------------

static float *add_tensor(model *m, float *base, int build, const char *name, int ndim, int64_t a, int64_t b,
                         int64_t c, size_t *off) {
    size_t numel = (size_t)a * (ndim > 1 ? (size_t)b : 1) * (ndim > 2 ? (size_t)c : 1);
    if (build) {
        model_tensor *t = &m->tensors[m->n_tensors++];
        snprintf(t->name, sizeof t->name, "%s", name);
        t->ndim = ndim;
        t->shape[0] = a, t->shape[1] = b, t->shape[2] = c;
        t->offset = *off, t->numel = numel;
    }
    float *p = base ? base + *off : NULL;
    *off += numel;
    return p;
}

static const char *lname(char *buf, int l, const char *suffix) {
    snprintf(buf, 80, "layers.%d.%s", l, suffix);
    return buf;
}

// Walks the parameters in their fixed order: builds the tensor table (build = 1) and/or returns
// named pointers into base (params or grads). Returns the total count.
static size_t layout(model *m, float *base, int build, model_weights *w) {
    const model_config *c = &m->cfg;
    const int D = c->dim, F = c->hidden_dim, KV = model_kv_heads(c) * (c->dim / c->n_heads);
    size_t off = 0;
    char nm[80];
    memset(w, 0, sizeof *w);
    w->tok_embeddings = add_tensor(m, base, build, "tok_embeddings.weight", 2, c->vocab_size, D, 0, &off);
    for (int l = 0; l < c->n_layers; l++) {
        layer_weights *L = &w->layer[l];
        mta_config mc = model_layer_mta_config(c, l, 1, 1);
        L->attn_norm = add_tensor(m, base, build, lname(nm, l, "attention_norm.weight"), 1, D, 0, 0, &off);
        L->wq = add_tensor(m, base, build, lname(nm, l, "attention.wq.weight"), 2, D, D, 0, &off);
        L->wk = add_tensor(m, base, build, lname(nm, l, "attention.wk.weight"), 2, KV, D, 0, &off);
        L->wv = add_tensor(m, base, build, lname(nm, l, "attention.wv.weight"), 2, KV, D, 0, &off);
        L->wo = add_tensor(m, base, build, lname(nm, l, "attention.wo.weight"), 2, D, D, 0, &off);
        for (int i = 0; i < MTA_N_PARAMS; i++) {  // the operator's parameters, "attention.mta.<name>"
            int64_t s[3];
            const int nd = mta_param_shape(&mc, i, s);
            char suffix[64];
            snprintf(suffix, sizeof suffix, "attention.mta.%s", mta_param_info(i)->name);
            if (nd) L->mta_w[i] = add_tensor(m, base, build, lname(nm, l, suffix), nd, s[0], s[1], s[2], &off);
        }
        L->ffn_norm = add_tensor(m, base, build, lname(nm, l, "ffn_norm.weight"), 1, D, 0, 0, &off);
        L->w1 = add_tensor(m, base, build, lname(nm, l, "feed_forward.w1.weight"), 2, F, D, 0, &off);
        L->w2 = add_tensor(m, base, build, lname(nm, l, "feed_forward.w2.weight"), 2, D, F, 0, &off);
        L->w3 = add_tensor(m, base, build, lname(nm, l, "feed_forward.w3.weight"), 2, F, D, 0, &off);
    }
    w->norm = add_tensor(m, base, build, "norm.weight", 1, D, 0, 0, &off);
    if (!c->tie_embeddings) w->output = add_tensor(m, base, build, "output.weight", 2, c->vocab_size, D, 0, &off);
    return off;
}

model *model_create(const model_config *c, char *msg, size_t n) {
    if (model_config_check(c, msg, n)) return NULL;
    model *m = calloc(1, sizeof *m);
    if (!m) {
        errmsg(msg, n, "out of memory");
        return NULL;
    }
    m->cfg = *c;
    m->d = c->dim / c->n_heads;
    m->backend = MTA_BACKEND_FUSED;
    model_weights tmp;
    m->num_params = layout(m, NULL, 1, &tmp);
    m->params = calloc(m->num_params, sizeof(float));
    m->grads = calloc(m->num_params, sizeof(float));
    if (!m->params || !m->grads) {
        errmsg(msg, n, "out of memory for %zu parameters", m->num_params);
        model_free(m);
        return NULL;
    }
    layout(m, m->params, 0, &m->w);
    layout(m, m->grads, 0, &m->g);
    return m;
}

static void free_acts(model *m) {
    free(m->acts);
    free(m->tokens);
    free(m->doc);
    m->acts = NULL, m->tokens = NULL, m->targets = NULL, m->doc = NULL, m->pos = NULL;
    for (int l = 0; l < MODEL_MAX_LAYERS; l++) {
        mta_destroy(m->ctx[l]);
        m->ctx[l] = NULL;
    }
    m->cap_B = m->cap_T = m->cap_keep = 0;
}

void model_free(model *m) {
    if (!m) return;
    free_acts(m);
    free(m->params);
    free(m->grads);
    free(m);
}

const model_config *model_cfg(const model *m) { return &m->cfg; }
size_t model_num_params(const model *m) { return m->num_params; }
float *model_params(model *m) { return m->params; }
float *model_grads(model *m) { return m->grads; }
const float *model_logits(const model *m) { return m->logits; }
void model_set_backend(model *m, mta_backend b) {
    if (b == m->backend) return;
    free_acts(m);  // the contexts are recreated with the new backend by the next forward
    m->T = 0;
    m->backend = b;
}

int model_attention_map(model *m, int l, int b, int h, float *out, char *msg, size_t n) {
    if (!m->T) return errmsg(msg, n, "no forward to take an attention map of");
    if (m->backend != MTA_BACKEND_REFERENCE)
        return errmsg(msg, n, "attention maps need the reference attention backend: call model_set_backend first");
    if (l < 0 || l >= m->cfg.n_layers || b < 0 || b >= m->B || h < 0 || h >= m->cfg.n_heads)
        return errmsg(msg, n, "attention map (layer %d, sequence %d, head %d) outside %d layers, %d sequences, %d heads",
                      l, b, h, m->cfg.n_layers, m->B, m->cfg.n_heads);
    if (mta_attention_map(m->ctx[l], b, h, out) != MTA_OK) return errmsg(msg, n, "%s", mta_ctx_error(m->ctx[l]));
    return 0;
}
void model_set_grad_hook(model *m, model_grad_hook fn, void *arg) {
    m->grad_ready = fn;
    m->grad_ready_arg = arg;
}

// Tells the hook that grads[p - grads, + count) are final.
static void grads_ready(model *m, const float *p, size_t count) {
    if (m->grad_ready) m->grad_ready(m->grad_ready_arg, (size_t)(p - m->grads), (size_t)(p - m->grads) + count);
}

void model_zero_grad(model *m) { memset(m->grads, 0, m->num_params * sizeof(float)); }

const model_tensor *model_tensors(const model *m, int *count) {
    *count = m->n_tensors;
    return m->tensors;
}

model_weights model_weights_of(model *m, float *base) {
    model_weights w;
    layout(m, base, 0, &w);
    return w;
}

// ---- initialisation -------------------------------------------------------------------------

static void trunc_normal(float *x, size_t n, float std, uint64_t *s) {
    for (size_t i = 0; i < n; i++) {
        double z;
        do z = rng_normal(s);
        while (fabs(z) > 3.0);
        x[i] = (float)(z * std);
    }
}

static void fill(float *x, size_t n, float v) {
    for (size_t i = 0; i < n; i++) x[i] = v;
}

void model_init(model *m, uint64_t seed) {
    const model_config *c = &m->cfg;
    const int D = c->dim, F = c->hidden_dim, KV = model_kv_heads(c) * m->d;
    const float sd = 1.0f / sqrtf((float)D), sf = 1.0f / sqrtf((float)F);
    uint64_t s = seed;
    memset(m->params, 0, m->num_params * sizeof(float));
    trunc_normal(m->w.tok_embeddings, (size_t)c->vocab_size * D, sd, &s);
    for (int l = 0; l < c->n_layers; l++) {
        layer_weights *L = &m->w.layer[l];
        mta_config mc = model_layer_mta_config(c, l, 1, 1);
        fill(L->attn_norm, D, 1.0f);
        fill(L->ffn_norm, D, 1.0f);
        trunc_normal(L->wq, (size_t)D * D, sd, &s);
        trunc_normal(L->wk, (size_t)KV * D, sd, &s);
        trunc_normal(L->wv, (size_t)KV * D, sd, &s);
        trunc_normal(L->wo, (size_t)D * D, sd, &s);
        trunc_normal(L->w1, (size_t)F * D, sd, &s);
        trunc_normal(L->w3, (size_t)F * D, sd, &s);
        trunc_normal(L->w2, (size_t)D * F, sf, &s);
        for (int i = 0; i < MTA_N_PARAMS; i++) mta_param_init_identity(&mc, i, L->mta_w[i]);
        if (L->mta_w[MTA_GATE_W]) trunc_normal(L->mta_w[MTA_GATE_W], (size_t)m->d, sd, &s);
    }
    fill(m->w.norm, D, 1.0f);
    // last, so that a tied model draws what it always drew
    if (m->w.output) trunc_normal(m->w.output, (size_t)c->vocab_size * D, sd, &s);
}

// ---- building blocks ------------------------------------------------------------------------

// The inverse frequency theta^(-2i/d) of RoPE pair i, with c's llama3 scaling when it has one
// (Hugging Face's _compute_llama3_parameters): a wavelength 2 pi / f longer than
// orig_ctx / low_freq is stretched by factor, one shorter than orig_ctx / high_freq kept, and
// one between interpolated, smooth = (orig_ctx / wavelength - low_freq) / (high_freq - low_freq).
static double rope_inv_freq(const model_config *c, int i, int d) {
    const double f = pow((double)c->rope_theta, -2.0 * i / d);
    if (c->rope_factor == 0) return f;
    const double factor = c->rope_factor, lo = c->rope_low_freq, hi = c->rope_high_freq, ctx = c->rope_orig_ctx;
    const double wavelen = 6.283185307179586 / f;
    if (wavelen < ctx / hi) return f;
    if (wavelen > ctx / lo) return f / factor;
    const double smooth = (ctx / wavelen - lo) / (hi - lo);
    return (1 - smooth) * f / factor + smooth * f;
}

// RoPE table in double: angle t * inv_freq(i) for positions 0..T-1, pairs i < d/2.
static void rope_table(float *cs, float *sn, int T, int d, const model_config *c) {
    for (int t = 0; t < T; t++)
        for (int i = 0; i < d / 2; i++) {
            double ang = t * rope_inv_freq(c, i, d);
            cs[(size_t)t * (d / 2) + i] = (float)cos(ang);
            sn[(size_t)t * (d / 2) + i] = (float)sin(ang);
        }
}

// y (N,out) = x (N,in) W^T, W (out,in). One row (a decoding step) is a product with a vector:
// OpenBLAS's sgemm packs all of W for it, and sampling from lm1m spent 79% of its time there
// (sgemv: no copy).
static void linear_forward(float *y, const float *x, const float *W, int N, int in, int out) {
    if (N == 1) {
        cblas_sgemv(CblasRowMajor, CblasNoTrans, out, in, 1.0f, W, in, x, 1, 0.0f, y, 1);
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, out, in, 1.0f, x, in, W, in, 0.0f, y, out);
}

// dx (N,in) = dy W (added to beta * dx); dW (out,in) += dy^T x.
static void linear_backward(float *dx, float beta, float *dW, const float *dy, const float *x, const float *W, int N,
                            int in, int out) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, in, out, 1.0f, dy, out, W, in, beta, dx, in);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, out, in, N, 1.0f, dy, out, x, in, 1.0f, dW, in);
}

// y = x / sqrt(mean(x^2) + eps) * w per row of D; rs saves 1/sqrt(...).
static void rmsnorm_forward(float *y, float *rs, const float *x, const float *w, int N, int D, float eps) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * D;
        float ss = 0.0f;
        for (int e = 0; e < D; e++) ss += xi[e] * xi[e];
        float r = 1.0f / sqrtf(ss / D + eps);
        rs[i] = r;
        for (int e = 0; e < D; e++) y[(size_t)i * D + e] = xi[e] * r * w[e];
    }
}

// dx += rs*u - rs^3/D * x * (u . x) with u = dy*w;  dw += sum_rows dy * x * rs (rows in order).
static void rmsnorm_backward(float *dx, float *dw, const float *dy, const float *x, const float *rs, const float *w,
                             int N, int D) {
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float *xi = x + (size_t)i * D, *gi = dy + (size_t)i * D;
        float r = rs[i], ux = 0.0f;
        for (int e = 0; e < D; e++) ux += gi[e] * w[e] * xi[e];
        float k3 = r * r * r * ux / D;
        for (int e = 0; e < D; e++) dx[(size_t)i * D + e] += r * gi[e] * w[e] - k3 * xi[e];
    }
    for (int i = 0; i < N; i++)
        for (int e = 0; e < D; e++) dw[e] += dy[(size_t)i * D + e] * x[(size_t)i * D + e] * rs[i];
}

// Moves rows between the (B,T,H*d) layout and (B,H,T,d) heads: to_heads = 1 rotates pairs
// (2i, 2i+1) by angle p*theta^(-2i/d) when cs/sn are given (RoPE), at position p = pos[b*T+t]
// (each token's place in its document), or t when pos is NULL; to_heads = 0 moves back and
// rotates by -angle (the transpose of the rotation, which is also its gradient).
static void move_heads(float *dst, const float *src, int B, int T, int H, int d, const float *cs, const float *sn,
                       const int *pos, int to_heads) {
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                const size_t row = ((size_t)b * T + t) * H * d + (size_t)h * d, head = (((size_t)b * H + h) * T + t) * d;
                const float *s = src + (to_heads ? row : head);
                float *o = dst + (to_heads ? head : row);
                if (!cs) {
                    memcpy(o, s, (size_t)d * sizeof(float));
                    continue;
                }
                const size_t at = (size_t)(pos ? pos[(size_t)b * T + t] : t) * (d / 2);
                for (int i = 0; i < d / 2; i++) {
                    float c = cs[at + i], sn_ = to_heads ? sn[at + i] : -sn[at + i];
                    float x0 = s[2 * i], x1 = s[2 * i + 1];
                    o[2 * i] = x0 * c - x1 * sn_;
                    o[2 * i + 1] = x0 * sn_ + x1 * c;
                }
            }
}

// (B,T,H*d) rows -> (B,H,T,d) heads (move_heads).
static void split_heads(float *dst, const float *src, int B, int T, int H, int d, const float *cs, const float *sn,
                        const int *pos) {
    move_heads(dst, src, B, T, H, d, cs, sn, pos, 1);
}

// (B,H,T,d) heads -> (B,T,H*d) rows (move_heads).
static void merge_heads(float *dst, const float *src, int B, int T, int H, int d, const float *cs, const float *sn,
                        const int *pos) {
    move_heads(dst, src, B, T, H, d, cs, sn, pos, 0);
}

// ---- threads -------------------------------------------------------------------------------

// Floating-point operations of a forward over `rows` token rows that attend to `keys` keys each
// on average: the matrix products (2 per weight and row) and attention's two products per head
// (the MTA convolutions and mixings are a fraction of those). threads_enter takes it to choose
// how many threads a forward, backward or decoding step is worth (util/threads.h).
static double forward_flops(const model_config *c, double rows, double keys) {
    const double D = c->dim, F = c->hidden_dim, V = c->vocab_size, KV = (double)D / c->n_heads * model_kv_heads(c);
    return 2 * rows * (c->n_layers * (2 * D * D + 2 * D * KV + 3 * D * F) + D * V) + 4 * rows * keys * D * c->n_layers;
}

// ---- the layer block --------------------------------------------------------------------------

// The attention of a block: q is (N,D) rows, k, v (N,KV) rows (KV = n_kv_heads * head dim), before RoPE; out gets the (N,D) rows that
// multiply W_o. The forward runs the operator over (B,H,T,d) heads, the decoder one cached step
// per sequence.
typedef int (*attend_fn)(void *arg, int l, const float *q, const float *k, const float *v, float *out, char *msg,
                         size_t n);

// Where a block reads and writes, N rows each: (N,D) x_in, xn1, q, k, v, ao, x_mid, xn2, x_out;
// (N) rms1, rms2; (N,F) h1, h3, hg. Buffers may be shared where one is dead before the other is
// written (the decoder shares xn1/xn2, rms1/rms2, h1/hg and x_in/x_out).
typedef struct {
    float *x_in, *xn1, *rms1, *q, *k, *v, *ao, *x_mid, *xn2, *rms2, *h1, *h3, *hg, *x_out;
} block_bufs;

// Layer l (spec section 3), the one block the forward and the decoder share:
//   x_mid = x_in + Attn(RMSNorm(x_in)) W_o^T
//   x_out = x_mid + (silu(xn2 W1^T) * (xn2 W3^T)) W2^T,  xn2 = RMSNorm(x_mid)
static int block_forward(const model_config *c, const layer_weights *L, int l, const block_bufs *b, int N,
                         attend_fn attend, void *arg, char *msg, size_t n) {
    const int D = c->dim, F = c->hidden_dim, KV = model_kv_heads(c) * (c->dim / c->n_heads);
    rmsnorm_forward(b->xn1, b->rms1, b->x_in, L->attn_norm, N, D, c->norm_eps);
    linear_forward(b->q, b->xn1, L->wq, N, D, D);
    linear_forward(b->k, b->xn1, L->wk, N, D, KV);
    linear_forward(b->v, b->xn1, L->wv, N, D, KV);
    if (attend(arg, l, b->q, b->k, b->v, b->ao, msg, n)) return -1;
    linear_forward(b->x_mid, b->ao, L->wo, N, D, D);
    for (size_t i = 0; i < (size_t)N * D; i++) b->x_mid[i] += b->x_in[i];
    rmsnorm_forward(b->xn2, b->rms2, b->x_mid, L->ffn_norm, N, D, c->norm_eps);
    linear_forward(b->h1, b->xn2, L->w1, N, D, F);
    linear_forward(b->h3, b->xn2, L->w3, N, D, F);
    swiglu_forward(b->hg, b->h1, b->h3, (size_t)N * F);
    linear_forward(b->x_out, b->hg, L->w2, N, F, D);
    for (size_t i = 0; i < (size_t)N * D; i++) b->x_out[i] += b->x_mid[i];
    return 0;
}

// ---- activations ----------------------------------------------------------------------------

// Buffers are carved out of one allocation in a fixed order by a walk that runs twice, as
// layout() does: with base NULL it only sums the sizes (every pointer it sets is NULL), then on
// the allocation it sets the pointers. So the size allocated is the size carved.
typedef struct {
    float *base;
    size_t used;  // floats carved so far
} carver;

static float *take(carver *cv, size_t count) {
    float *r = cv->base ? cv->base + cv->used : NULL;
    cv->used += count;
    return r;
}

// One layer's activations over N rows. keep = 0 (one set that every layer reuses): the buffers
// dead before another is written are shared (xn2 = xn1, rms2 = rms1, hg = h1).
static void carve_layer(carver *cv, layer_acts *a, size_t N, size_t D, size_t F, int keep) {
    a->x_in = take(cv, N * D), a->xn1 = take(cv, N * D), a->rms1 = take(cv, N);
    a->q = take(cv, N * D), a->k = take(cv, N * D), a->v = take(cv, N * D);
    a->ao = take(cv, N * D), a->aoc = take(cv, N * D), a->x_mid = take(cv, N * D);
    a->h1 = take(cv, N * F), a->h3 = take(cv, N * F);
    if (keep) a->xn2 = take(cv, N * D), a->rms2 = take(cv, N), a->hg = take(cv, N * F);
    else a->xn2 = a->xn1, a->rms2 = a->rms1, a->hg = a->h1;
}

// The backward's scratch (keep), or NULL pointers.
static void carve_backward(carver *cv, model *m, size_t N, size_t D, size_t F, size_t V, int keep) {
    if (!keep) {
        m->dlogits = m->dx = m->dxn = m->dlin = m->dao = m->dh1 = m->dh3 = m->dq = m->dk = m->dv = NULL;
        return;
    }
    m->dlogits = take(cv, N * V);
    m->dx = take(cv, N * D), m->dxn = take(cv, N * D), m->dlin = take(cv, N * D), m->dao = take(cv, N * D);
    m->dh1 = take(cv, N * F), m->dh3 = take(cv, N * F);
    m->dq = m->q_rows, m->dk = m->k_rows, m->dv = m->v_rows;  // dead after the forward (struct model)
}

// Walks the activations of a forward over (B,T) (see ensure_acts for keep) into base, or only
// sums them with base NULL. Returns their count of floats.
static size_t carve_acts(model *m, float *base, int B, int T, int keep) {
    const model_config *c = &m->cfg;
    const size_t N = (size_t)B * T, D = c->dim, F = c->hidden_dim, V = c->vocab_size, half = (size_t)m->d / 2;
    const int sets = keep ? c->n_layers : 1;
    carver cv = {base, 0};
    for (int l = 0; l < sets; l++) carve_layer(&cv, &m->la[l], N, D, F, keep);
    for (int l = sets; l < c->n_layers; l++) m->la[l] = m->la[0];
    m->xf = take(&cv, N * D), m->xnf = take(&cv, N * D), m->rmsf = take(&cv, N), m->logits = take(&cv, N * V);
    m->rope_cos = take(&cv, (size_t)T * half), m->rope_sin = take(&cv, (size_t)T * half);
    m->q_rows = take(&cv, N * D), m->k_rows = take(&cv, N * D), m->v_rows = take(&cv, N * D);
    carve_backward(&cv, m, N, D, F, V, keep);
    return cv.used;
}

// The activations (zeroed) and the batch's tokens, targets, RoPE positions and document ids.
static int alloc_acts(model *m, int B, int T, int keep, char *msg, size_t n) {
    const size_t N = (size_t)B * T, total = carve_acts(m, NULL, B, T, keep);
    m->acts = calloc(total, sizeof(float));
    m->tokens = malloc(3 * N * sizeof(int));
    m->doc = malloc(N * sizeof(int32_t));
    if (!m->acts || !m->tokens || !m->doc)
        return errmsg(msg, n, "out of memory for activations (B=%d, T=%d: %.1f GiB)", B, T,
                      (double)total * sizeof(float) / (1u << 30));
    m->targets = m->tokens + N, m->pos = m->tokens + 2 * N;
    carve_acts(m, m->acts, B, T, keep);
    return 0;
}

// Each layer's attention context for (B,T) on the model's backend.
static int create_contexts(model *m, int B, int T, int keep, char *msg, size_t n) {
    for (int l = 0; l < m->cfg.n_layers; l++) {
        mta_config mc = model_layer_mta_config(&m->cfg, l, B, T);
        mc.backend = m->backend;
        // A forward without a backward holds one layer's workspace at a time (fwd_attend gives
        // each back), so it can afford wider strips than the operator's memory-bound default:
        // fewer barriers in the same peak memory (docs/decoding.md). Training takes them too in
        // the layers whose units couple heads: there the operator's budget, set against its own
        // inputs and outputs (docs/fused.md), leaves narrow strips whose score tiles run half
        // empty and whose many barriers cost the most, and the larger windows are a small part
        // of the activations (docs/training.md).
        if (!keep || mc.pre_head_mix || mc.post_ch) mc.strip_rows = STRIP_ROWS;
        // Training keeps each layer's attention output before its norm and gate for the
        // backward, one (B,T,dim) tensor per layer, instead of a product per head again.
        mc.keep_o = keep;
        if (mta_create(&m->ctx[l], &mc, msg, n) != MTA_OK) return -1;
    }
    return 0;
}

// The activations of a forward over (B,T). keep = 1: every layer's, and the backward's scratch
// (a forward with targets, which model_backward may follow). keep = 0: a forward that only
// computes logits (evaluation without a loss, the decoder's prefill) needs one layer's buffers
// at a time, so every layer uses the same set (carve_layer), and the block's output overwrites
// its input: a fraction of the memory at long contexts (docs/decoding.md).
static int ensure_acts(model *m, int B, int T, int keep, char *msg, size_t n) {
    if (B == m->cap_B && T == m->cap_T && (m->cap_keep || !keep)) return 0;
    free_acts(m);
    if (alloc_acts(m, B, T, keep, msg, n) || create_contexts(m, B, T, keep, msg, n)) {
        free_acts(m);
        return -1;
    }
    rope_table(m->rope_cos, m->rope_sin, T, m->d, &m->cfg);
    m->cap_B = B, m->cap_T = T, m->cap_keep = keep;
    return 0;
}

static mta_params layer_mta_params(const layer_weights *L) {
    mta_params p;
    for (int i = 0; i < MTA_N_PARAMS; i++) p.w[i] = L->mta_w[i];
    return p;
}

void model_set_training(model *m, int training, uint64_t seed) {
    m->training = training != 0;
    m->seed = seed;
}

// ---- forward and backward -----------------------------------------------------------------------

// Called after layer l's attention forward, with its context and its (B,H,T,d) Q, K and V (after
// RoPE); non-zero stops the forward. The decoder's prefill uses it to fill its caches.
typedef int (*layer_hook)(void *arg, int l, mta_ctx *ctx, const float *q, const float *k, const float *v, char *msg,
                          size_t n);

static int forward_impl(model *m, const int *tokens, const int *targets, int B, int T, float *loss, layer_hook hook,
                        void *hook_arg, const int *lens, char *msg, size_t n);

int model_forward(model *m, const int *tokens, const int *targets, int B, int T, float *loss, char *msg, size_t n) {
    return forward_impl(m, tokens, targets, B, T, loss, NULL, NULL, NULL, msg, n);
}

static int reserve(model *m, int B, int T, int keep, char *msg, size_t n) {
    if (B < 1 || T < 1) return errmsg(msg, n, "batch size and length must be >= 1 (got B=%d T=%d)", B, T);
    if (mta_backend_device_memory(m->backend))
        return errmsg(msg, n, "the model keeps its tensors in host memory: the %s attention backend takes device memory",
                      mta_backend_name(m->backend));
    // N = B*T rows are indexed with an int in the forward and backward (and by the BLAS calls).
    if (B > INT_MAX / T) return errmsg(msg, n, "batch of B=%d x T=%d tokens: more than %d rows", B, T, INT_MAX);
    return ensure_acts(m, B, T, keep, msg, n);
}

int model_reserve(model *m, int B, int T, char *msg, size_t n) { return reserve(m, B, T, 1, msg, n); }

// doc_mask: a document starts at each row's first token and after each EOS. The document ids
// (a count of the EOS tokens before a position in its row) and RoPE positions (the distance from
// the document's start) of the batch in m->tokens; the operators get the ids only when some row
// holds more than one document, so a batch without one runs exactly as without doc_mask.
static void set_documents(model *m) {
    const int B = m->B, T = m->T;
    m->docs_on = 0;
    for (int b = 0; b < B && m->cfg.doc_mask; b++) {
        const int *tok = m->tokens + (size_t)b * T;
        int32_t id = 0;
        for (int t = 0, start = 0; t < T; t++) {
            if (t > 0 && tok[t - 1] == TOK_EOS) id++, start = t;
            m->doc[(size_t)b * T + t] = id;
            m->pos[(size_t)b * T + t] = t - start;
        }
        m->docs_on |= id > 0;
    }
    for (int l = 0; l < m->cfg.n_layers; l++) mta_set_documents(m->ctx[l], m->docs_on ? m->doc : NULL);
}

typedef struct {
    model *m;
    layer_hook hook;
    void *hook_arg;
} fwd_attend_arg;

// The forward's attention: RoPE and the split into (B,H,T,d) heads, the operator, the merge back.
static int fwd_attend(void *arg, int l, const float *q, const float *k, const float *v, float *out, char *msg,
                      size_t n) {
    const fwd_attend_arg *fa = arg;
    model *m = fa->m;
    layer_acts *a = &m->la[l];
    const int B = m->B, T = m->T, H = m->cfg.n_heads, Hkv = model_kv_heads(&m->cfg), d = m->d;
    const int *pos = m->docs_on ? m->pos : NULL;
    split_heads(a->q, q, B, T, H, d, m->rope_cos, m->rope_sin, pos);
    split_heads(a->k, k, B, T, Hkv, d, m->rope_cos, m->rope_sin, pos);
    split_heads(a->v, v, B, T, Hkv, d, NULL, NULL, NULL);
    mta_params p = layer_mta_params(&m->w.layer[l]);
    mta_set_dropout(m->ctx[l], m->training, m->seed * 0x100000001B3ULL + (uint64_t)l);
    if (mta_forward(m->ctx[l], a->q, a->k, a->v, &p, a->ao) != MTA_OK)
        return errmsg(msg, n, "layer %d attention: %s", l, mta_ctx_error(m->ctx[l]));
    if (fa->hook && fa->hook(fa->hook_arg, l, m->ctx[l], a->q, a->k, a->v, msg, n)) return -1;
    // Without targets no backward follows, and only the reference backend's workspace (its maps,
    // for model_attention_map) is worth keeping: the others give theirs back layer by layer.
    if (!m->have_targets && m->backend != MTA_BACKEND_REFERENCE) mta_ctx_release(m->ctx[l]);
    merge_heads(out, a->ao, B, T, H, d, NULL, NULL, NULL);
    return 0;
}

static int forward_run(model *m, const int *tokens, const int *targets, int B, int T, float *loss, layer_hook hook,
                       void *hook_arg, const int *lens, char *msg, size_t n);

// lens (without targets only): just the logits of each sequence b's token lens[b]-1, into row b
// of the logits (what a prefill needs: the output projection is a fifth of a small model's work).
static int forward_impl(model *m, const int *tokens, const int *targets, int B, int T, float *loss, layer_hook hook,
                        void *hook_arg, const int *lens, char *msg, size_t n) {
    const int prev = threads_enter(forward_flops(&m->cfg, (double)B * T, (T + 1) / 2.0), threads_min_work.flops);
    const int rc = forward_run(m, tokens, targets, B, T, loss, hook, hook_arg, lens, msg, n);
    threads_leave(prev);
    return rc;
}

// The mean cross-entropy of the logits over the targets that are not -1 (into *loss when not
// NULL) and its gradient, dlogits = (softmax - onehot) / count.
static void cross_entropy(model *m, const int *targets, int N, int V, float *loss) {
    int valid = 0;
    for (int i = 0; i < N; i++) valid += targets[i] >= 0;
    m->n_valid = valid;
    double total = 0.0;
    for (int i = 0; i < N; i++) {
        const float *z = m->logits + (size_t)i * V;
        float *g = m->dlogits + (size_t)i * V;
        if (targets[i] < 0) {
            memset(g, 0, (size_t)V * sizeof(float));
            continue;
        }
        float mx = z[0];
#pragma omp simd reduction(max : mx)
        for (int j = 1; j < V; j++) mx = z[j] > mx ? z[j] : mx;
        double se = 0.0;
        for (int j = 0; j < V; j++) se += exp((double)z[j] - mx);
        total += log(se) + mx - z[targets[i]];
        for (int j = 0; j < V; j++) g[j] = (float)(exp((double)z[j] - mx) / se) / valid;
        g[targets[i]] -= 1.0f / valid;
    }
    if (loss) *loss = valid ? (float)(total / valid) : 0.0f;
}

static int forward_run(model *m, const int *tokens, const int *targets, int B, int T, float *loss, layer_hook hook,
                       void *hook_arg, const int *lens, char *msg, size_t n) {
    const model_config *c = &m->cfg;
    if (reserve(m, B, T, targets != NULL, msg, n)) return -1;
    const int D = c->dim, V = c->vocab_size;
    const int N = B * T;
    for (int i = 0; i < N; i++) {
        if (tokens[i] < 0 || tokens[i] >= V) return errmsg(msg, n, "token %d at position %d is outside [0, %d)", tokens[i], i, V);
        if (targets && (targets[i] < -1 || targets[i] >= V))
            return errmsg(msg, n, "target %d at position %d is outside [-1, %d)", targets[i], i, V);
    }
    memcpy(m->tokens, tokens, (size_t)N * sizeof(int));
    m->have_targets = targets != NULL;
    if (targets) memcpy(m->targets, targets, (size_t)N * sizeof(int));
    m->B = B, m->T = T;
    set_documents(m);

    float *x = m->la[0].x_in;
    for (int i = 0; i < N; i++) memcpy(x + (size_t)i * D, m->w.tok_embeddings + (size_t)tokens[i] * D, D * sizeof(float));
    fwd_attend_arg fa = {m, hook, hook_arg};
    for (int l = 0; l < c->n_layers; l++) {
        layer_acts *a = &m->la[l];
        block_bufs bb = {a->x_in, a->xn1, a->rms1, m->q_rows, m->k_rows, m->v_rows, a->aoc, a->x_mid, a->xn2, a->rms2, a->h1, a->h3,
                         a->hg, l + 1 < c->n_layers ? m->la[l + 1].x_in : m->xf};
        if (block_forward(c, &m->w.layer[l], l, &bb, N, fwd_attend, &fa, msg, n)) return -1;
    }
    if (lens && !targets) {
        for (int b = 0; b < B; b++) {
            const size_t last = (size_t)b * T + lens[b] - 1;
            rmsnorm_forward(m->xnf + (size_t)b * D, m->rmsf + b, m->xf + last * D, m->w.norm, 1, D, c->norm_eps);
        }
        linear_forward(m->logits, m->xnf, model_output_weights(&m->w), B, D, V);
        return 0;
    }
    rmsnorm_forward(m->xnf, m->rmsf, m->xf, m->w.norm, N, D, c->norm_eps);
    linear_forward(m->logits, m->xnf, model_output_weights(&m->w), N, D, V);
    if (targets) cross_entropy(m, targets, N, V, loss);
    return 0;
}

static int backward_run(model *m, char *msg, size_t n);

// The backward runs on as many threads as its forward (twice its work, in the same products).
int model_backward(model *m, char *msg, size_t n) {
    const int prev = threads_enter(forward_flops(&m->cfg, (double)m->B * m->T, (m->T + 1) / 2.0), threads_min_work.flops);
    const int rc = backward_run(m, msg, n);
    threads_leave(prev);
    return rc;
}

static int backward_run(model *m, char *msg, size_t n) {
    const model_config *c = &m->cfg;
    if (!m->have_targets) return errmsg(msg, n, "model_backward needs a forward with targets first");
    const int B = m->B, T = m->T, D = c->dim, H = c->n_heads, d = m->d, F = c->hidden_dim, V = c->vocab_size;
    const int Hkv = model_kv_heads(c), KV = Hkv * d;
    const int N = B * T;
    const int *pos = m->docs_on ? m->pos : NULL;  // RoPE positions of the forward's documents
    model_weights *G = &m->g;
    const model_weights *W = &m->w;

    // logits = xnf E^T (E the output projection, the embedding when tied): dE += dlogits^T xnf,
    // dxnf = dlogits E
    linear_backward(m->dxn, 0.0f, model_output_weights(G), m->dlogits, m->xnf, model_output_weights(W), N, D, V);
    memset(m->dx, 0, (size_t)N * D * sizeof(float));
    rmsnorm_backward(m->dx, G->norm, m->dxn, m->xf, m->rmsf, W->norm, N, D);
    // norm.weight and the untied output.weight after it are final (layout())
    grads_ready(m, G->norm, (size_t)D + (G->output ? (size_t)V * D : 0));
    for (int l = c->n_layers - 1; l >= 0; l--) {
        layer_acts *a = &m->la[l];
        const layer_weights *L = &W->layer[l];
        layer_weights *LG = &G->layer[l];
        // x_next = x_mid + hg w2^T; hg = silu(h1) * h3
        float *dhg = m->dh1;
        linear_backward(dhg, 0.0f, LG->w2, m->dx, a->hg, L->w2, N, F, D);
        swiglu_backward(dhg, m->dh3, a->h1, a->h3, (size_t)N * F);  // dhg is now dh1
        linear_backward(m->dxn, 0.0f, LG->w1, m->dh1, a->xn2, L->w1, N, D, F);
        linear_backward(m->dxn, 1.0f, LG->w3, m->dh3, a->xn2, L->w3, N, D, F);
        rmsnorm_backward(m->dx, LG->ffn_norm, m->dxn, a->x_mid, a->rms2, L->ffn_norm, N, D);  // dx = d x_mid
        // x_mid = x_in + aoc wo^T
        linear_backward(m->dlin, 0.0f, LG->wo, m->dx, a->aoc, L->wo, N, D, D);
        split_heads(m->dao, m->dlin, B, T, H, d, NULL, NULL, NULL);
        // mta_backward adds to dq, dk, dv (N*D floats each, carve_acts)
        memset(m->dq, 0, (size_t)N * D * sizeof(float));
        memset(m->dk, 0, (size_t)N * D * sizeof(float));
        memset(m->dv, 0, (size_t)N * D * sizeof(float));
        mta_params p = layer_mta_params(L);
        mta_grads g;
        for (int i = 0; i < MTA_N_PARAMS; i++) g.w[i] = LG->mta_w[i];
        if (mta_backward(m->ctx[l], a->q, a->k, a->v, &p, m->dao, m->dq, m->dk, m->dv, &g) != MTA_OK)
            return errmsg(msg, n, "layer %d attention backward: %s", l, mta_ctx_error(m->ctx[l]));
        merge_heads(m->dlin, m->dq, B, T, H, d, m->rope_cos, m->rope_sin, pos);
        linear_backward(m->dxn, 0.0f, LG->wq, m->dlin, a->xn1, L->wq, N, D, D);
        merge_heads(m->dlin, m->dk, B, T, Hkv, d, m->rope_cos, m->rope_sin, pos);
        linear_backward(m->dxn, 1.0f, LG->wk, m->dlin, a->xn1, L->wk, N, D, KV);
        merge_heads(m->dlin, m->dv, B, T, Hkv, d, NULL, NULL, NULL);
        linear_backward(m->dxn, 1.0f, LG->wv, m->dlin, a->xn1, L->wv, N, D, KV);
        rmsnorm_backward(m->dx, LG->attn_norm, m->dxn, a->x_in, a->rms1, L->attn_norm, N, D);  // dx = d x_in
        // the layer's tensors are contiguous, from attention_norm to w3 (layout())
        grads_ready(m, LG->attn_norm, (size_t)(LG->w3 + (size_t)F * D - LG->attn_norm));
    }
    // embedding lookup: rows in order, so repeated tokens sum deterministically
    for (int i = 0; i < N; i++) {
        float *ge = G->tok_embeddings + (size_t)m->tokens[i] * D;
        for (int e = 0; e < D; e++) ge[e] += m->dx[(size_t)i * D + e];
    }
    grads_ready(m, G->tok_embeddings, (size_t)V * D);
    return 0;
}

// ---- weights as safetensors ----------------------------------------------------------------------

// The metadata key of a weights file's checksum (a checkpoint's is "checksum", over more).
static const char *const WEIGHTS_CHECKSUM = "weights_checksum";

int model_save_weights(const model *m, const char *path, char *msg, size_t n) {
    st_tensor ts[MAX_TENSORS];
    uint64_t h = FNV1A_START;
    for (int i = 0; i < m->n_tensors; i++) {
        const model_tensor *t = &m->tensors[i];
        memset(&ts[i], 0, sizeof ts[i]);
        ts[i].name = (char *)t->name;
        ts[i].ndim = t->ndim;
        for (int k = 0; k < t->ndim; k++) ts[i].shape[k] = t->shape[k];
        ts[i].numel = t->numel;
        ts[i].data = m->params + t->offset;
        h = fnv1a(h, ts[i].data, t->numel * sizeof(float));
    }
    char hex[20];
    snprintf(hex, sizeof hex, "%016" PRIx64, h);
    const st_meta_kv meta = {(char *)WEIGHTS_CHECKSUM, hex};
    return st_write(path, ts, m->n_tensors, &meta, 1, msg, n);
}

int model_copy_matching(model *dst, const model *src) {
    int copied = 0;
    for (int i = 0; i < dst->n_tensors; i++) {
        const model_tensor *d = &dst->tensors[i];
        for (int j = 0; j < src->n_tensors; j++) {
            const model_tensor *s = &src->tensors[j];
            int same = !strcmp(d->name, s->name) && d->ndim == s->ndim;
            for (int k = 0; same && k < d->ndim; k++) same = d->shape[k] == s->shape[k];
            if (same) {
                memcpy(dst->params + d->offset, src->params + s->offset, d->numel * sizeof(float));
                copied++;
                break;
            }
        }
    }
    return copied;
}

const model_tensor *model_find_nonfinite(const model *m, const float *base, size_t *at, float *value) {
    for (int i = 0; i < m->n_tensors; i++) {
        const model_tensor *t = &m->tensors[i];
        const float *x = base + t->offset;
        for (size_t j = 0; j < t->numel; j++)
            if (!isfinite(x[j])) {
                *at = j, *value = x[j];
                return t;
            }
    }
    return NULL;
}

int model_load_weights(model *m, const char *path, char *msg, size_t n) {
    // streamed, one tensor at a time straight into the parameters: a run opens in the memory of
    // its model, not two or three times that
    st_stream f;
    char err[512];
    if (st_open(&f, path, err, sizeof err)) return errmsg(msg, n, "%s", err);
    int rc = 0;
    uint64_t h = FNV1A_START;
    for (int i = 0; i < m->n_tensors && !rc; i++) {
        const model_tensor *t = &m->tensors[i];
        int j = st_stream_find(&f, t->name);
        if (j < 0) {
            rc = errmsg(msg, n, "%s: missing tensor '%s' (does the config match the weights?)", path, t->name);
            break;
        }
        const st_entry *s = &f.entries[j];
        int same = s->ndim == t->ndim;
        for (int k = 0; same && k < t->ndim; k++) same = s->shape[k] == t->shape[k];
        if (!same) rc = errmsg(msg, n, "%s: tensor '%s' has the wrong shape for this config", path, t->name);
        else if (st_stream_read(&f, j, m->params + t->offset, err, sizeof err)) rc = errmsg(msg, n, "%s", err);
        else h = fnv1a(h, m->params + t->offset, t->numel * sizeof(float));
    }
    if (!rc && f.n_entries != m->n_tensors) {
        for (int i = 0; i < f.n_entries && !rc; i++) {
            int known = 0;
            for (int j = 0; j < m->n_tensors && !known; j++) known = !strcmp(f.entries[i].name, m->tensors[j].name);
            if (!known) rc = errmsg(msg, n, "%s: unexpected tensor '%s' for this config", path, f.entries[i].name);
        }
    }
    size_t at;
    float bad;
    const model_tensor *t = rc ? NULL : model_find_nonfinite(m, m->params, &at, &bad);
    if (t) rc = errmsg(msg, n, "%s: tensor '%s' holds %g at index %zu: the weights must be finite", path, t->name, bad, at);
    // last: a message that names a tensor (an extra one, a NaN) says more than a checksum's
    const char *want = st_stream_meta(&f, WEIGHTS_CHECKSUM);
    char hex[20];
    snprintf(hex, sizeof hex, "%016" PRIx64, h);
    if (!rc && want && strcmp(want, hex))
        rc = errmsg(msg, n, "%s: checksum mismatch (file corrupt): stored %.20s, computed %s", path, want, hex);
    st_close(&f);
    return rc;
}

// ---- incremental decoding ---------------------------------------------------------------------

struct model_decoder {
    model *m;
    int B, cap;
    int *len;                           // (B) tokens held per sequence
    // (B) the RoPE position of each sequence's next token (len, or with doc_mask its place in its
    // document) and whether its last token was EOS (doc_mask: the next one starts a document)
    int *pos, *eos;
    const int *lens;                    // the prompt lengths during a prefill
    mta_cache *cache[MODEL_MAX_LAYERS];
    float *rope_cos, *rope_sin;         // (cap, d/2)
    float *mem;                         // the rows below, one allocation
    float *x, *xn, *rms, *q, *k, *v, *qh, *kh, *ao, *xm, *h1, *h3, *logits;  // (B, width) rows
};

// The decoder's rows into base, or only their count with base NULL (carve_acts).
static size_t carve_decoder(model_decoder *dec, float *base) {
    const model_config *c = &dec->m->cfg;
    const size_t B = (size_t)dec->B, D = c->dim, F = c->hidden_dim, V = c->vocab_size;
    carver cv = {base, 0};
    dec->x = take(&cv, B * D), dec->xn = take(&cv, B * D), dec->rms = take(&cv, B), dec->q = take(&cv, B * D);
    dec->k = take(&cv, B * D), dec->v = take(&cv, B * D), dec->qh = take(&cv, B * D), dec->kh = take(&cv, B * D);
    dec->ao = take(&cv, B * D), dec->xm = take(&cv, B * D), dec->h1 = take(&cv, B * F), dec->h3 = take(&cv, B * F);
    dec->logits = take(&cv, B * V);
    return cv.used;
}

model_decoder *model_decoder_create(model *m, int B, int cap, char *msg, size_t n) {
    const model_config *c = &m->cfg;
    if (B < 1 || cap < 1) {
        errmsg(msg, n, "decoder needs B >= 1 and capacity >= 1 (got %d, %d)", B, cap);
        return NULL;
    }
    model_decoder *dec = calloc(1, sizeof *dec);
    if (dec) {
        const size_t table = (size_t)cap * (m->d / 2) * sizeof(float) + 1;  // (cap, d/2) floats
        dec->m = m, dec->B = B, dec->cap = cap;
        dec->len = calloc(3 * (size_t)B, sizeof(int));
        dec->mem = malloc(carve_decoder(dec, NULL) * sizeof(float));
        dec->rope_cos = malloc(table), dec->rope_sin = malloc(table);
    }
    if (!dec || !dec->len || !dec->mem || !dec->rope_cos || !dec->rope_sin) {
        model_decoder_free(dec);
        errmsg(msg, n, "out of memory allocating a decoder for %d sequences of %d tokens", B, cap);
        return NULL;
    }
    dec->pos = dec->len + B, dec->eos = dec->len + 2 * B;
    carve_decoder(dec, dec->mem);
    rope_table(dec->rope_cos, dec->rope_sin, cap, m->d, c);
    for (int l = 0; l < c->n_layers; l++) {
        mta_config mc = model_layer_mta_config(c, l, B, cap);
        if (mta_cache_create(&dec->cache[l], &mc, msg, n) != MTA_OK) {
            model_decoder_free(dec);
            return NULL;
        }
    }
    return dec;
}

void model_decoder_free(model_decoder *dec) {
    if (!dec) return;
    for (int l = 0; l < MODEL_MAX_LAYERS; l++) mta_cache_destroy(dec->cache[l]);
    free(dec->len), free(dec->mem), free(dec->rope_cos), free(dec->rope_sin);
    free(dec);
}

const float *model_decoder_logits(const model_decoder *dec) { return dec->logits; }
int model_decoder_len(const model_decoder *dec, int b) { return b >= 0 && b < dec->B ? dec->len[b] : -1; }

// Fills layer l's cache from its forward's q, k and v (mta_cache_prefill recomputes the few
// score and probability rows it keeps), then releases the forward's workspace: with the fused
// backend (the default) a prefill never holds a (T,T) map, and with the reference backend it
// holds one layer's maps at a time.
static int prefill_layer(void *arg, int l, mta_ctx *ctx, const float *q, const float *k, const float *v, char *msg,
                         size_t n) {
    model_decoder *dec = arg;
    const layer_weights *L = &dec->m->w.layer[l];
    const mta_params p = layer_mta_params(L);
    const int32_t *doc = dec->m->docs_on ? dec->m->doc : NULL;  // the prompts' documents (doc_mask)
    if (mta_cache_prefill_documents(dec->cache[l], dec->m->T, q, k, v, &p, dec->lens, doc) != MTA_OK)
        return errmsg(msg, n, "layer %d: %s", l, mta_cache_error(dec->cache[l]));
    mta_ctx_release(ctx);
    return 0;
}

int model_decoder_prefill(model_decoder *dec, const int *tokens, int T, const int *lens, char *msg, size_t n) {
    model *m = dec->m;
    const model_config *c = &m->cfg;
    const int B = dec->B, V = c->vocab_size;
    for (int b = 0; b < B; b++)
        if (lens[b] < 1 || lens[b] > T || lens[b] > dec->cap)
            return errmsg(msg, n, "prompt %d has length %d: it must be in [1, %d] (and at most the capacity %d)", b, lens[b],
                          T, dec->cap);
    model_set_training(m, 0, 0);
    dec->lens = lens;
    // The model's forward on its own backend, without targets (so with one layer's activations at
    // a time), each layer's cache filled as soon as its attention has run.
    int rc = forward_impl(m, tokens, NULL, B, T, NULL, prefill_layer, dec, lens, msg, n);
    for (int b = 0; b < B && !rc; b++) {
        const size_t last = (size_t)b * T + lens[b] - 1;
        dec->len[b] = lens[b];
        dec->pos[b] = (m->docs_on ? m->pos[last] : lens[b] - 1) + 1;
        dec->eos[b] = c->doc_mask && tokens[last] == TOK_EOS;
        memcpy(dec->logits + (size_t)b * V, m->logits + (size_t)b * V, (size_t)V * sizeof(float));
    }
    return rc;
}

// The decoder's attention: each sequence's token at its own position (RoPE), one cached step.
static int dec_attend(void *arg, int l, const float *q, const float *k, const float *v, float *out, char *msg,
                      size_t n) {
    model_decoder *dec = arg;
    const model *m = dec->m;
    const int D = m->cfg.dim, H = m->cfg.n_heads, Hkv = model_kv_heads(&m->cfg), d = m->d;
    mta_params p = layer_mta_params(&m->w.layer[l]);
    for (int b = 0; b < dec->B; b++) {
        // one token's rows are already (H,d) heads, its k and v rows (Hkv,d)
        const size_t at = (size_t)dec->pos[b] * (d / 2), row = (size_t)b * D, kvrow = (size_t)b * Hkv * d;
        split_heads(dec->qh + row, q + row, 1, 1, H, d, dec->rope_cos + at, dec->rope_sin + at, NULL);
        split_heads(dec->kh + kvrow, k + kvrow, 1, 1, Hkv, d, dec->rope_cos + at, dec->rope_sin + at, NULL);
        if (mta_cache_step(dec->cache[l], b, dec->qh + row, dec->kh + kvrow, v + kvrow, &p, out + row) != MTA_OK)
            return errmsg(msg, n, "layer %d: %s", l, mta_cache_error(dec->cache[l]));
    }
    return 0;
}

static int decoder_step_run(model_decoder *dec, const int *tokens, char *msg, size_t n);

// A step is one row per sequence: for the small models it is microseconds of work, which threads
// woken for each of its few dozen parallel regions would only slow down (util/threads.h).
int model_decoder_step(model_decoder *dec, const int *tokens, char *msg, size_t n) {
    double keys = 0;
    for (int b = 0; b < dec->B; b++) keys += dec->len[b] + 1;
    const int prev = threads_enter(forward_flops(&dec->m->cfg, dec->B, keys / dec->B), threads_min_work.flops);
    const int rc = decoder_step_run(dec, tokens, msg, n);
    threads_leave(prev);
    return rc;
}

static int decoder_step_run(model_decoder *dec, const int *tokens, char *msg, size_t n) {
    model *m = dec->m;
    const model_config *c = &m->cfg;
    const int B = dec->B, D = c->dim, V = c->vocab_size;
    for (int b = 0; b < B; b++) {
        if (tokens[b] < 0 || tokens[b] >= V) return errmsg(msg, n, "token %d of sequence %d is outside [0, %d)", tokens[b], b, V);
        if (dec->len[b] >= dec->cap) return errmsg(msg, n, "sequence %d is full (%d tokens)", b, dec->cap);
        memcpy(dec->x + (size_t)b * D, m->w.tok_embeddings + (size_t)tokens[b] * D, (size_t)D * sizeof(float));
    }
    // doc_mask: a token after an EOS starts a document, from RoPE position 0
    for (int b = 0; b < B; b++) {
        if (!dec->eos[b]) continue;
        for (int l = 0; l < c->n_layers; l++)
            if (mta_cache_begin_document(dec->cache[l], b) != MTA_OK)
                return errmsg(msg, n, "layer %d: %s", l, mta_cache_error(dec->cache[l]));
        dec->pos[b] = 0;
    }
    for (int l = 0; l < c->n_layers; l++) {
        // one row per sequence; the norms share xn and rms, the SwiGLU product overwrites h1 and the
        // block's output overwrites its input x (read for the last time before)
        block_bufs bb = {dec->x, dec->xn, dec->rms, dec->q, dec->k, dec->v, dec->ao, dec->xm, dec->xn, dec->rms, dec->h1,
                         dec->h3, dec->h1, dec->x};
        if (block_forward(c, &m->w.layer[l], l, &bb, B, dec_attend, dec, msg, n)) return -1;
    }
    rmsnorm_forward(dec->xn, dec->rms, dec->x, m->w.norm, B, D, c->norm_eps);
    linear_forward(dec->logits, dec->xn, model_output_weights(&m->w), B, D, V);
    for (int b = 0; b < B; b++) {
        dec->len[b]++, dec->pos[b]++;
        dec->eos[b] = c->doc_mask && tokens[b] == TOK_EOS;
    }
    return 0;
}
