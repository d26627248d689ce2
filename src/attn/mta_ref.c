// mta_ref.c: the reference (materialising) MTA backend. It holds every (T,T) map the backward
// needs, so its memory is O(B*H*T^2) (the fused backend, mta_fused.c, holds none).
//
// Forward, per batch element (spec section 2), maps (B,H,T,T), tensors (B,H,T,d):
//   Z  = mask(q k^T / sqrt(d))          scores, zero where j > i (query head h reads kv head
//                                       h/(H/H_kv): mta_kv_slab) and, with packed documents,
//                                       where j is before row i's document start s_i
//   S1 = qkconv(Z, w_pre)               if the pre-softmax conv is on, else S1 = Z
//   S2 = headmix(S1, w_pre_head)        if head mixing is on, else S2 = S1
//   P  = softmax_causal(S2)             in place on S2's buffer
//   P1 = mask(qkconv(P, w_post))        if the post-softmax conv is on, else P1 = P
//   P2 = headconv(P1, w_post_head)      if the head conv is on, else P2 = P1
//   D  = dropout mask / (1-p)          training only; O = (D * P2) v
//   O  = P2 v;  Y = groupnorm(O);  out = Y * sigmoid(Y . gate_w + gate_b)
// The backward walks the same chain in reverse with two gradient maps used in turn.
// Packed documents (mta_set_documents): every map is zero outside the diagonal blocks of the
// documents, and each step runs on a document's block [s,e)x[s,e) as on the map of a sequence
// of its own (the block's rows are T apart), so a convolution never reads another document.
#include "attn/conv.h"
#include "attn/mta_internal.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

// What the forward keeps for the backward. Maps are (B,H,T,T); a map whose step is off is not
// allocated, and the chain aliases an earlier one (chain_of).
typedef struct {
    float *z;       // masked scores Z (input of the pre-softmax conv)
    float *s1;      // after the pre-softmax conv (input of head mixing)
    float *s2;      // after head mixing; softmax runs in place, so this becomes P
    float *p1;      // after the post-softmax conv
    float *p2;      // after the post-softmax head conv
    float *pd;      // P2 with dropout applied (multiplies V when dropout is active)
    float *o;       // (B,H,T,d) attention output before group norm
    float *hconv, *hconv_grad;  // (H,H) head-conv kernel as a mixing matrix, and its gradient
    // backward workspace, allocated on the first backward
    float *g1, *g2;      // gradient maps (B,H,T,T)
    float *dO;           // (B,H,T,d)
    float *partial;      // per-row kernel-gradient partials, reduced in a fixed order
    double *ngpart;      // (B*H, 2d+1) norm/gate parameter gradients per slab
} ref_state;

enum {
    ROW_BLOCK = 256,  // rows per causal matrix-product block: block [i0,i1) needs keys [0,i1)
    ROW_TASK = 16,    // rows per OpenMP chunk in the map loops
};


static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

// Row-major sgemm C = alpha op(A) op(B) + beta C, timed and counted into st (for benchmarks).
static void sgemm(mta_stats *st, int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                  const float *b, int ldb, float beta, float *c, int ldc) {
    double t0 = omp_get_wtime();
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
                lda, b, ldb, beta, c, ldc);
    st->matmul_s += omp_get_wtime() - t0;
    st->matmul_flop += 2.0 * m * n * k;
}

// Row i of a map (x) zero outside its document's causal block: columns before s, after i.
static void zero_outside(float *x, int s, int i, int T) {
    memset(x, 0, (size_t)s * sizeof(float));
    mta_zero_past_diagonal(x, i, T);
}

// Every row of every slab zero outside its block (ds: the document starts, or NULL).
static void zero_outside_all(const mta_config *c, const int *ds, float *map) {
    const int T = c->T;
    #pragma omp parallel for schedule(static)
    for (int t = 0; t < c->B * c->H * T; t++)
        zero_outside(map + (size_t)t * T, mta_row_start(ds, T, t / T / c->H, t % T), t % T, T);
}

// ---- causal matrix products on one (batch, head) slab -------------------------------------

// s = scale * q k^T for j <= i, zero above the diagonal. q, k: (T,d); s: (T,T).
static void scores_causal(mta_stats *st, const float *q, const float *k, int T, int d, float scale, float *s) {
    for (int i0 = 0; i0 < T; i0 += ROW_BLOCK) {
        int i1 = imin(T, i0 + ROW_BLOCK);
        sgemm(st, 0, 1, i1 - i0, i1, d, scale, q + (size_t)i0 * d, d, k, d,
                    0.0f, s + (size_t)i0 * T, T);
    }
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < T; i++) mta_zero_past_diagonal(s + (size_t)i * T, i, T);
}

// o = p v with p zero above the diagonal. p: (T,T); v, o: (T,d).
static void apply_values(mta_stats *st, const float *p, const float *v, int T, int d, float *o) {
    for (int i0 = 0; i0 < T; i0 += ROW_BLOCK) {
        int i1 = imin(T, i0 + ROW_BLOCK);
        sgemm(st, 0, 0, i1 - i0, d, i1, 1.0f, p + (size_t)i0 * T, T, v, d,
                    0.0f, o + (size_t)i0 * d, d);
    }
}

// Backward of o = p v: dp = do v^T (causal part only; entries above the diagonal inside a block
// are left as computed and never read), dv += p^T do.
static void apply_values_backward(mta_stats *st, const float *p, const float *v, const float *dout, int T, int d, float *dp,
                                  float *dv) {
    for (int i0 = 0; i0 < T; i0 += ROW_BLOCK) {
        int i1 = imin(T, i0 + ROW_BLOCK);
        sgemm(st, 0, 1, i1 - i0, i1, d, 1.0f, dout + (size_t)i0 * d, d, v, d,
                    0.0f, dp + (size_t)i0 * T, T);
        sgemm(st, 1, 0, i1, d, i1 - i0, 1.0f, p + (size_t)i0 * T, T,
                    dout + (size_t)i0 * d, d, 1.0f, dv, d);
    }
}

// Backward of s = scale * q k^T given ds zero above the diagonal: dq += scale ds k, dk += scale ds^T q.
static void scores_backward(mta_stats *st, const float *ds, const float *q, const float *k, int T, int d, float scale, float *dq,
                            float *dk) {
    for (int i0 = 0; i0 < T; i0 += ROW_BLOCK) {
        int i1 = imin(T, i0 + ROW_BLOCK);
        sgemm(st, 0, 0, i1 - i0, d, i1, scale, ds + (size_t)i0 * T, T, k, d,
                    1.0f, dq + (size_t)i0 * d, d);
        sgemm(st, 1, 0, i1, d, i1 - i0, scale, ds + (size_t)i0 * T, T,
                    q + (size_t)i0 * d, d, 1.0f, dk, d);
    }
}

// ---- whole-tensor steps over all (batch, head) slabs -----------------------------------------

// out = qkconv(in) for every slab, whole rows (zero outside the blocks); w: (H,cq,ck). A row
// task's rows are cut at document ends; document [s,e) is convolved as a map of its own.
static void qkconv_all(const mta_config *c, const int *ds, const float *in, const float *w, int cq, int ck,
                       float *out) {
    const int T = c->T, BH = c->B * c->H;
    const size_t TT = (size_t)T * T;
    const int nb = (T + ROW_TASK - 1) / ROW_TASK;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < BH * nb; t++) {
        const int bh = t / nb, b = bh / c->H, h = bh % c->H, i1 = imin(T, t % nb * ROW_TASK + ROW_TASK);
        for (int a0 = t % nb * ROW_TASK, a1; a0 < i1; a0 = a1) {
            const int s = mta_row_start(ds, T, b, a0);
            a1 = mta_doc_end(ds, T, b, a0, i1);
            const float *src = in + bh * TT + (size_t)imax(s, a0 - (cq - 1)) * T + s;
            float *o = out + bh * TT + (size_t)a0 * T;
            qkconv_rows(src, T, w + (size_t)h * cq * ck, cq, ck, a0 - s, a1 - s, o + s, T);
            for (int i = a0; i < a1; i++) zero_outside(o + (size_t)(i - a0) * T, s, i, T);
        }
    }
}

// din = qkconv^T(dout); dw += kernel gradient (when non-NULL), reduced over (b, i) in order.
// Documents as in qkconv_all: rows past a document's end do not exist for it.
static void qkconv_all_backward(const mta_config *c, const int *ds, const float *dout, const float *in, const float *w,
                                int cq, int ck, float *din, float *dw, float *partial) {
    const int T = c->T, H = c->H, BH = c->B * c->H, K = cq * ck;
    const size_t TT = (size_t)T * T;
    const int nb = (T + ROW_TASK - 1) / ROW_TASK;
    #pragma omp parallel for schedule(dynamic, 1)
    for (int t = 0; t < BH * nb; t++) {
        const int bh = t / nb, b = bh / H, h = bh % H, i1 = imin(T, t % nb * ROW_TASK + ROW_TASK);
        const float *wh = w + (size_t)h * K, *g = dout + bh * TT;
        for (int a0 = t % nb * ROW_TASK, a1; a0 < i1; a0 = a1) {
            // e: the document's end, looked for no further than the transposed convolution reads
            const int s = mta_row_start(ds, T, b, a0), e = mta_doc_end(ds, T, b, a0, imin(T, i1 + cq - 1));
            a1 = imin(i1, e);
            float *o = din + bh * TT + (size_t)a0 * T;
            qkconv_backward_input_rows(g + (size_t)a0 * T + s, T, e - 1 - s, wh, cq, ck, a0 - s, a1 - s, o + s, T);
            for (int i = a0; i < a1; i++) {
                zero_outside(o + (size_t)(i - a0) * T, s, i, T);
                if (dw)
                    qkconv_backward_weight_rows(g + (size_t)i * T + s, T, in + bh * TT + (size_t)imax(s, i - (cq - 1)) * T + s,
                                                T, cq, ck, i - s, i - s + 1, partial + ((size_t)bh * T + i) * K);
            }
        }
    }
    if (!dw) return;
    #pragma omp parallel for schedule(static)
    for (int hk = 0; hk < H * K; hk++) {
        int h = hk / K, kk = hk % K;
        float acc = 0.0f;
        for (int b = 0; b < c->B; b++)
            for (int i = 0; i < T; i++) acc += partial[(((size_t)b * H + h) * T + i) * K + kk];
        dw[hk] += acc;
    }
}

// out = headmix(in) with the (H,H) matrix m, mixing within groups of G heads.
static void headmix_all(const mta_config *c, const float *in, const float *m, int G, float *out) {
    const int T = c->T, H = c->H;
    const size_t TT = (size_t)T * T, HTT = (size_t)H * TT;
    #pragma omp parallel for schedule(dynamic, ROW_TASK)
    for (int t = 0; t < c->B * T; t++) {
        const size_t off = (size_t)(t / T) * HTT + (size_t)(t % T) * T;
        headmix_row(in + off, TT, m, H, H, G, T, out + off, TT);
    }
}

// din = headmix^T(dout); dm += (H,H) kernel gradient when non-NULL.
static void headmix_all_backward(const mta_config *c, const float *dout, const float *in, const float *m, int G,
                                 float *din, float *dm, float *partial) {
    const int T = c->T, H = c->H;
    const size_t TT = (size_t)T * T, HTT = (size_t)H * TT, HH = (size_t)H * H, lanes = headmix_grad_lanes();
    #pragma omp parallel for schedule(dynamic, ROW_TASK)
    for (int t = 0; t < c->B * T; t++) {
        const size_t off = (size_t)(t / T) * HTT + (size_t)(t % T) * T;
        if (dm) memset(partial + (size_t)t * HH * lanes, 0, HH * lanes * sizeof(float));
        headmix_backward_row(dout + off, TT, in + off, TT, m, H, H, G, T, din + off, TT,
                             dm ? partial + (size_t)t * HH * lanes : NULL);
    }
    if (!dm) return;
    #pragma omp parallel for schedule(static)
    for (int e = 0; e < (int)HH; e++) dm[e] += headmix_grad_sum(partial + e * lanes, HH * lanes, c->B * T);
}

// ---- group norm and gate, per (batch, head, position) row of d ----------------------------

static void norm_gate_forward(const mta_config *c, const mta_params *p, ref_state *st, float *out) {
    const int rows = c->B * c->H * c->T;
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) mta_normgate_forward_rows(c, p, st->o + (size_t)r * c->d, out + (size_t)r * c->d, 1);
}

// dO from dout through the gate and the norm; parameter gradients summed per (b,h) slab in
// position order, then over slabs in order, so the result does not depend on the thread count.
static void norm_gate_backward(const mta_config *c, const mta_params *p, ref_state *st, const float *dout,
                               const mta_grads *g) {
    const int d = c->d, T = c->T, BH = c->B * c->H;
    const int np = 2 * d + 1;  // per slab: dgamma (d), dgate_w (d), dgate_b (1)
    #pragma omp parallel for schedule(static)
    for (int bh = 0; bh < BH; bh++) {
        double *acc = st->ngpart + (size_t)bh * np;
        memset(acc, 0, (size_t)np * sizeof(double));
        const size_t r = (size_t)bh * T * d;
        mta_normgate_backward_rows(c, p, st->o + r, dout + r, st->dO + r, T, acc);
    }
    mta_normgate_add_grads(c, g, st->ngpart, BH);
}

// ---- buffers -------------------------------------------------------------------------------

static size_t map_floats(const mta_config *c) { return (size_t)c->B * c->H * c->T * c->T; }
static size_t act_floats(const mta_config *c) { return (size_t)c->B * c->H * c->T * c->d; }

static void ref_release(mta_ctx *ctx);

static mta_status forward_buffers(mta_ctx *ctx) {
    const mta_config *c = &ctx->cfg;
    if (!ctx->state && !(ctx->state = calloc(1, sizeof(ref_state))))
        return mta_fail(ctx, MTA_ERR_NOMEM, "out of memory allocating the reference backend's state");
    ref_state *st = ctx->state;
    if (st->z) return MTA_OK;
    const size_t nm = map_floats(c), na = act_floats(c);
    int ok = (st->z = mta_alloc_floats(ctx, nm)) != NULL;
    if (ok && c->pre_cq) ok = (st->s1 = mta_alloc_floats(ctx, nm)) != NULL;
    if (ok && c->pre_head_mix) ok = (st->s2 = mta_alloc_floats(ctx, nm)) != NULL;
    if (ok && c->post_cq) ok = (st->p1 = mta_alloc_floats(ctx, nm)) != NULL;
    if (ok && c->post_ch) ok = (st->p2 = mta_alloc_floats(ctx, nm)) != NULL;
    if (ok && c->dropout > 0) ok = (st->pd = mta_alloc_floats(ctx, nm)) != NULL;
    if (ok) ok = (st->o = mta_alloc_floats(ctx, na)) && (st->hconv = mta_alloc_floats(ctx, (size_t)c->H * c->H)) &&
                 (st->hconv_grad = mta_alloc_floats(ctx, (size_t)c->H * c->H));
    if (!ok) {
        ref_release(ctx);
        return mta_fail(ctx, MTA_ERR_NOMEM, "out of memory allocating the forward workspace (%zu bytes per map)",
                        nm * sizeof(float));
    }
    return MTA_OK;
}

static mta_status backward_buffers(mta_ctx *ctx) {
    const mta_config *c = &ctx->cfg;
    ref_state *st = ctx->state;
    if (st->g1) return MTA_OK;
    const size_t nm = map_floats(c), rows = (size_t)c->B * c->H * c->T;
    // Per-row kernel-gradient partials: the larger of the conv kernels (cq*ck per (b,h,i) row)
    // and the mixing matrices (H*H lane partials per (b,i) row, headmix_backward_row); the
    // norm/gate parameters (2d+1 per slab).
    size_t per = (size_t)c->pre_cq * c->pre_ck;
    if ((size_t)c->post_cq * c->post_ck > per) per = (size_t)c->post_cq * c->post_ck;
    if ((size_t)c->H * headmix_grad_lanes() > per) per = (size_t)c->H * headmix_grad_lanes();
    const size_t ng = (size_t)c->B * c->H * (2 * c->d + 1);
    int ok = (st->g1 = mta_alloc_floats(ctx, nm)) && (st->g2 = mta_alloc_floats(ctx, nm)) &&
             (st->dO = mta_alloc_floats(ctx, act_floats(c))) && (st->partial = mta_alloc_floats(ctx, rows * per)) &&
             (st->ngpart = (double *)mta_alloc_floats(ctx, 2 * ng));
    if (!ok) return mta_fail(ctx, MTA_ERR_NOMEM, "out of memory allocating the backward workspace");
    return MTA_OK;
}

static void ref_release(mta_ctx *ctx) {
    ref_state *st = ctx->state;
    if (st) {
        void *all[] = {st->z, st->s1, st->s2, st->p1, st->p2, st->pd, st->o, st->hconv, st->hconv_grad,
                       st->g1, st->g2, st->dO, st->partial, st->ngpart};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
        free(st);
    }
    ctx->state = NULL;
    ctx->bytes = 0;
    ctx->have_forward = 0;
}

// The logical maps of the chain, given which steps are on (see the top of this file).
typedef struct {
    float *z, *mix_in, *p, *hconv_in, *pv;
} chain;

static chain chain_of(const mta_config *c, const ref_state *st) {
    chain ch;
    ch.z = st->z;
    ch.mix_in = c->pre_cq ? st->s1 : st->z;
    ch.p = c->pre_head_mix ? st->s2 : ch.mix_in;
    ch.hconv_in = c->post_cq ? st->p1 : ch.p;
    ch.pv = c->post_ch ? st->p2 : ch.hconv_in;
    return ch;
}

static const float *ref_attention(const mta_ctx *ctx, int b, int h) {
    const mta_config *c = &ctx->cfg;
    return chain_of(c, ctx->state).pv + ((size_t)b * c->H + h) * c->T * c->T;
}

// ---- attention dropout --------------------------------------------------------------------

// dst = src * mask / (1-p) on the causal part of every row (zero above the diagonal).
static void dropout_apply(const mta_ctx *ctx, const float *src, float *dst) {
    const mta_config *c = &ctx->cfg;
    const int T = c->T, BH = c->B * c->H;
    const uint32_t thr = mta_dropout_threshold(c->dropout);
    const float scale = 1.0f / (1.0f - c->dropout);
    #pragma omp parallel for schedule(dynamic, ROW_TASK)
    for (int t = 0; t < BH * T; t++) {
        const size_t row = (size_t)t * T;
        const int i = t % T;
        for (int j = 0; j <= i; j++) dst[row + j] = mta_dropout_keep(ctx->seed, row + j, thr) ? src[row + j] * scale : 0.0f;
        for (int j = i + 1; j < T; j++) dst[row + j] = 0.0f;
    }
}

// ---- forward and backward ----------------------------------------------------------------------

static mta_status ref_forward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                              float *out) {
    const mta_config *c = &ctx->cfg;
    mta_status s = forward_buffers(ctx);
    if (s) return s;
    ref_state *st = ctx->state;
    const int T = c->T, d = c->d, BH = c->B * c->H;
    const size_t TT = (size_t)T * T, Td = (size_t)T * d;
    const float scale = 1.0f / sqrtf((float)d);
    chain ch = chain_of(c, st);

    const int *ds = mta_ctx_doc_start(ctx);
    for (int bh = 0; bh < BH; bh++)
        scores_causal(&ctx->stats, q + bh * Td, k + mta_kv_slab(c, bh) * Td, T, d, scale, ch.z + bh * TT);
    if (ds) zero_outside_all(c, ds, ch.z);
    if (c->pre_cq) qkconv_all(c, ds, ch.z, p->w_pre, c->pre_cq, c->pre_ck, st->s1);
    if (c->pre_head_mix) headmix_all(c, ch.mix_in, p->w_pre_head, c->H, st->s2);
    #pragma omp parallel for schedule(dynamic, ROW_TASK)
    for (int t = 0; t < BH * T; t++) {
        float *x = ch.p + (size_t)t * T;
        const int i = t % T, s0 = mta_row_start(ds, T, t / T / c->H, i);
        softmax_row(x + s0, i - s0 + 1, NULL, NULL);
        zero_outside(x, s0, i, T);
    }
    if (c->post_cq) qkconv_all(c, ds, ch.p, p->w_post, c->post_cq, c->post_ck, st->p1);
    if (c->post_ch) {
        mta_headconv_matrix(p->w_post_head, c->H, c->post_ch, st->hconv);
        headmix_all(c, ch.hconv_in, st->hconv, c->post_ch, st->p2);
    }
    ctx->dropout_on = c->dropout > 0 && ctx->training;
    if (ctx->dropout_on) dropout_apply(ctx, ch.pv, st->pd);
    const float *pv = ctx->dropout_on ? st->pd : ch.pv;
    for (int bh = 0; bh < BH; bh++) apply_values(&ctx->stats, pv + bh * TT, v + mta_kv_slab(c, bh) * Td, T, d, st->o + bh * Td);
    norm_gate_forward(c, p, st, out);
    return MTA_OK;
}

static mta_status ref_backward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                               const float *dout, float *dq, float *dk, float *dv, const mta_grads *g) {
    const mta_config *c = &ctx->cfg;
    mta_status s = backward_buffers(ctx);
    if (s) return s;
    ref_state *st = ctx->state;
    const int T = c->T, d = c->d, H = c->H, BH = c->B * c->H;
    const size_t TT = (size_t)T * T, Td = (size_t)T * d;
    const float scale = 1.0f / sqrtf((float)d);
    chain ch = chain_of(c, st);
    float *cur = st->g1, *spare = st->g2, *tmp;

    const int *ds = mta_ctx_doc_start(ctx);
    norm_gate_backward(c, p, st, dout, g);
    const float *pv = ctx->dropout_on ? st->pd : ch.pv;
    // (dk, dv of a kv head: its query heads' terms added in head order, the loops being serial)
    for (int bh = 0; bh < BH; bh++)
        apply_values_backward(&ctx->stats, pv + bh * TT, v + mta_kv_slab(c, bh) * Td, st->dO + bh * Td, T, d, cur + bh * TT,
                              dv + mta_kv_slab(c, bh) * Td);
    if (ds) zero_outside_all(c, ds, cur);  // dP is do v^T in every causal entry
    if (ctx->dropout_on) dropout_apply(ctx, cur, cur);  // the same mask and scale on the gradient
    if (c->post_ch) {
        // st->hconv still holds this forward's matrix; the (H,H) gradient of that matrix maps
        // back to the kernel as dw[g,n,o] = dm[g*ch+o, g*ch+n].
        float *dm = g->w_post_head ? st->hconv_grad : NULL;
        if (dm) memset(dm, 0, (size_t)H * H * sizeof(float));
        headmix_all_backward(c, cur, ch.hconv_in, st->hconv, c->post_ch, spare, dm, st->partial);
        if (dm) mta_headconv_grad_add(dm, H, c->post_ch, g->w_post_head);
        tmp = cur, cur = spare, spare = tmp;
    }
    if (c->post_cq) {
        qkconv_all_backward(c, ds, cur, ch.p, p->w_post, c->post_cq, c->post_ck, spare, g->w_post, st->partial);
        tmp = cur, cur = spare, spare = tmp;
    }
    #pragma omp parallel for schedule(dynamic, ROW_TASK)
    for (int t = 0; t < BH * T; t++) {
        float *gr = cur + (size_t)t * T;
        const int i = t % T, s0 = mta_row_start(ds, T, t / T / H, i);
        softmax_backward_row(ch.p + (size_t)t * T + s0, gr + s0, i - s0 + 1);
        zero_outside(gr, s0, i, T);
    }
    if (c->pre_head_mix) {
        headmix_all_backward(c, cur, ch.mix_in, p->w_pre_head, H, spare, g->w_pre_head, st->partial);
        tmp = cur, cur = spare, spare = tmp;
    }
    if (c->pre_cq) {
        qkconv_all_backward(c, ds, cur, ch.z, p->w_pre, c->pre_cq, c->pre_ck, spare, g->w_pre, st->partial);
        tmp = cur, cur = spare, spare = tmp;
    }
    for (int bh = 0; bh < BH; bh++)
        scores_backward(&ctx->stats, cur + bh * TT, q + bh * Td, k + mta_kv_slab(c, bh) * Td, T, d, scale, dq + bh * Td,
                        dk + mta_kv_slab(c, bh) * Td);
    return MTA_OK;
}

const mta_backend_impl mta_reference_backend = {
    .forward = ref_forward,
    .backward = ref_backward,
    .release = ref_release,
    .attention = ref_attention,
    .computes = mta_host_computes,
};
