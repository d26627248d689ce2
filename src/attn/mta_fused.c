// mta_fused.c: the fused MTA backend. It never holds a (T,T) map: it walks the query rows in
// strips of R rows and keeps, per map, only the strip and the few rows before it that the
// convolutions need. Its extra memory is O(H * T * R) per worker plus two floats per row.
//
// Maps and their windows (one window per map, rows of all G heads of a unit; see docs/fused.md):
//   Z  = mask(q k^T / sqrt(d))   scores                         window z
//   S1 = qkconv(Z, w_pre)        needs Z rows i-(c_q-1)..i       window s1 (or z when off)
//   S2 = headmix(S1, w_pre_head)                                 window p (softmax runs in place)
//   P  = softmax(S2)             row max and 1/sum saved per row
//   P1 = mask(qkconv(P, w_post)) needs P rows i-(c_q'-1)..i      window p1 (or p2, or p)
//   P2 = headconv(P1)                                            window p2
//   O  = dropout(P2) v;  out = gate(groupnorm(O))
// A unit is one batch element and one group of heads that mixing couples (all H heads with the
// pre-softmax head mixing, c_h heads with the head convolution alone, else one head). Units are
// independent: with enough of them each thread takes whole units; otherwise the threads share a
// unit's heads (convolutions, matrix products) and rows (mixing, softmax) strip by strip, except
// in the forward of units whose strips are independent too (no convolution reaching back to
// earlier rows), where each thread takes whole strips.
//
// The backward walks the strips in the same order and recomputes a strip's maps from q, k and
// the saved row statistics. Gradients flow to earlier rows only through the transposed
// convolutions: dP row r needs dP1 rows r..r+(c_q'-1), dZ row r needs dS1 rows r..r+(c_q-1).
// So the strip that brings rows A = [i0, i1) completes dP (and dS2, dS1) for rows
// B = A - (c_q'-1) and dZ for rows C = B - (c_q-1) (their dq, dk products run in the next
// strip's pass over k; the schedule is lag.h's, the CUDA backend's too); the windows keep the
// rows those lagging stages still read, and a few strips past T flush the lag.
//
// Packed documents (mta_set_documents): a row i of document [s, e) takes every step on its
// document's block alone, as the reference backend does: the convolutions read rows and
// columns from s on (conv.h's routines called with the source at (row s, column s) and local
// indices, the strip cut into pieces at document starts), the transposed ones rows up to e-1,
// the mixings and softmaxes columns s..i. The matrix products skip the keys before the first
// document start of their rows, and the maps they read (P2 with dropout, dZ) are zero from there
// to each row's start.
#include "attn/conv.h"
#include "attn/lag.h"
#include "attn/matmul.h"
#include "attn/mta_internal.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

// What the backend keeps: the softmax row statistics of the last forward (for its backward), and
// per worker thread the row windows of its strips.
typedef struct {
    float *mx, *inv;     // (B,H,T) row max and 1/sum of the softmax
    float *o;            // (B,H,T,d) O before the norm and gate, kept for the backward (keep_o), or NULL
    float *hconv;        // (H,H) head-conv kernel as a mixing matrix
    void *workers;       // nworkers workers
    double *acc;         // per-unit kernel-gradient accumulators
    int nworkers, G, R;  // the plan the workers were sized for
    size_t worker_bytes;
} fused_state;

static inline int imin(int a, int b) { return a < b ? a : b; }
static inline int imax(int a, int b) { return a > b ? a : b; }

// ---- row windows -------------------------------------------------------------------------------

// Rows [base, base+cap) of one map for the G heads of a unit: row r of head h at
// buf + h*hs + (r - base)*ld. Rows are contiguous, so a strip is one matrix for the products and the
// convolution reads its c_q source rows with a stride.
typedef struct {
    float *buf;
    int cap, base;
    size_t ld, hs;
} win;

static inline float *wrow(const win *w, int h, int r) { return w->buf + h * w->hs + (size_t)(r - w->base) * w->ld; }

// Moves head h's rows of window w to start at row nb (nb >= base), keeping the rows it shares
// with the old position; row r's entries st[r]..r (its document's; st: the T row starts of the
// unit's sequence, or NULL: 0) are all that is ever read. The heads move in a worksharing loop;
// the caller sets w->base = nb once all have.
static void wslide_head(const win *w, int h, int nb, const int *st, int T) {
    if (!w->buf) return;
    const int sh = nb - w->base;
    if (sh > 0 && sh < w->cap)
        for (int r = imax(nb, 0); r < imin(w->base + w->cap, (int)w->ld); r++) {
            const int s = st && r < T ? st[r] : 0;
            memmove(wrow(w, h, r) - (size_t)sh * w->ld + s, wrow(w, h, r) + s, (size_t)(r + 1 - s) * sizeof(float));
        }
}

// ---- the plan: strip size, units, which window holds which map ----------------------------------

// A worker's buffers. The threads that share a unit's strips each walk them with their own copy
// of the worker: the window buffers are shared, but each thread moves its copy's bases itself,
// to the same rows as the others, so moving them needs no single thread and no barrier after it.
typedef struct {
    win z, s1, p, p2, g2, dp1, dp, ds1, dz;
    float *o, *dO;       // (G, R, d) recomputed attention output and its gradient
    float *rowpart;      // (2, R, G*H, lanes) per-row mixing-gradient lane partials of the two mixings
    float *kpart;        // (G, K) one row's conv-kernel gradient per head
} worker;

typedef struct {
    // inputs of the call
    const mta_config *c;
    const float *q, *k, *v, *dout;
    const mta_params *p;
    float *out, *dq, *dk, *dv;
    const int *ds;    // each position's document start (B*T; mta_ctx_doc_start), or NULL
    mta_ctx *ctx;
    fused_state *st;  // ctx's
    // plan
    int G, units, R, L1, L2, inner, strips_apart;
    int chain;   // units a thread runs in turn (grouped-query backward: those sharing kv heads; else 1)
    int rounds;  // grouped-query backward of a shared unit: its loops that add to dk, dv take the heads
                 // h with h % rounds == r in round r = 0, 1, ... (distinct kv heads); else 1
    float scale;
    uint32_t drop_thr;
    float drop_scale;
} job;

static int group_size(const mta_config *c) {
    if (c->pre_head_mix) return c->H;
    if (c->post_ch) return c->post_ch;
    return 1;
}

// The rows of each window of a worker for strips of R rows (0: none). Maps that replace one
// another in place share a window (see maps_of): with both the post conv and the head conv, P1
// goes where dP1 will be, and dP (stage B) and dZ (stage C) live in P2's buffer, dead once stage
// A of the same strip is done; with both the pre conv and the mixing, dS1 replaces S1, and the
// window spans both (see unit_backward).
typedef struct {
    int z, s1, p, p2, g2, dp1, dp, ds1, dz;
    int dp_in_p2, dz_in_p2;
} win_rows;

static win_rows window_rows(const job *jb, int R) {
    const mta_config *c = jb->c;
    const int mix = c->pre_head_mix, pre = c->pre_cq > 0, post = c->post_cq > 0, hc = c->post_ch > 0;
    const int L1 = jb->L1, L2 = jb->L2;
    win_rows k = {0};
    k.z = pre ? L1 + L2 + R : 0;
    k.s1 = mix ? (pre ? L2 : 0) + L1 + R : 0;
    k.p = L1 + R;
    k.p2 = post || hc ? R : 0;
    k.g2 = c->dropout > 0 && !post && !hc ? R : 0;
    k.dp1 = post ? L1 + R : 0;
    k.dp_in_p2 = post && hc;
    k.dp = k.dp_in_p2 ? 0 : R;
    k.ds1 = pre && !mix ? L2 + R : 0;
    // dZ may take P2's buffer only if what writes it reads another: without the pre conv, dZ is
    // dS1, which the transposed mixing writes from dS2, itself in P2's buffer when dP is.
    k.dz_in_p2 = (pre || mix) && k.p2 && (pre || !k.dp_in_p2);
    k.dz = (pre || mix) && !k.dz_in_p2 ? R : 0;
    return k;
}

static int total_rows(win_rows k) { return k.z + k.s1 + k.p + k.p2 + k.g2 + k.dp1 + k.dp + k.ds1 + k.dz; }

// Rows per strip: large strips read k and v (and write dk, dv) fewer times, small ones keep the
// windows small. R is the largest of 64, 16 and 12 for which the windows of all workers hold at
// most 3/8 as many floats as the call's output and three input gradients (4 B*H*T*d, which any
// attention backward holds), else 8 (below that the score and convolution tiles run mostly
// empty), so that fused MTA needs about 1.2x the memory of plain attention whatever the thread
// count. Single-head units (plain attention, per-head convolutions) get 64; units of all 8
// heads of the 830M layer get 12 at d = 64 and 16 at d = 128. (Sizes between 16 and 64 would
// pass the budget there but not the 1.2x: the budget leaves out the strip buffers and padding.)
// The config's strip_rows overrides (a trade of memory for time, docs/fused.md).
static int strip_rows(const job *jb, int nworkers) {
    if (jb->c->strip_rows > 0) return jb->c->strip_rows;
    const mta_config *c = jb->c;
    const double budget = 1.5 * c->B * c->H * c->d;  // 3/8 of 4 B*H*d floats per column of T
    static const int sizes[] = {64, 16, 12};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if ((double)nworkers * total_rows(window_rows(jb, sizes[i])) * jb->G <= budget) return sizes[i];
    return 8;
}

// Per-unit gradient accumulators (doubles, summed in row order).
typedef struct {
    double *wpre, *wpost, *mix, *hconv, *ng;
} unit_acc;

static size_t unit_acc_doubles(const mta_config *c, int G) {
    return (size_t)G * c->pre_cq * c->pre_ck + (size_t)G * c->post_cq * c->post_ck + 2 * (size_t)G * G +
           (size_t)G * (2 * c->d + 1);
}

static unit_acc unit_acc_at(const mta_config *c, int G, double *base, int u) {
    unit_acc a;
    a.wpre = base + (size_t)u * unit_acc_doubles(c, G);
    a.wpost = a.wpre + (size_t)G * c->pre_cq * c->pre_ck;
    a.mix = a.wpost + (size_t)G * c->post_cq * c->post_ck;
    a.hconv = a.mix + (size_t)G * G;
    a.ng = a.hconv + (size_t)G * G;
    return a;
}

// ---- workspace ----------------------------------------------------------------------------------

// Floats of one half of a worker's rowpart: R rows of G*H mixing-gradient entries in lanes.
static size_t rowpart_half(int R, int G, int H) { return (size_t)R * G * H * headmix_grad_lanes(); }

static int win_alloc(mta_ctx *ctx, win *w, int cap, int G) {
    memset(w, 0, sizeof *w);
    if (!cap) return 1;
    const int T = ctx->cfg.T;
    w->cap = cap;
    // Rows a multiple of 4 KB apart share L1 sets: the products write 16 rows and the
    // convolutions read up to 8 at once, which then evict one another. One cache line past that
    // puts every row of a tile in its own sets.
    w->ld = (size_t)(T + 15) / 16 * 16;
    while (w->ld / 16 % 4 != 1) w->ld += 16;
    w->hs = (size_t)cap * w->ld;
    w->buf = mta_alloc_floats(ctx, (size_t)G * w->hs);
    return w->buf != NULL;
}

static void fused_release(mta_ctx *ctx);

// Whether the forward keeps O for the backward: asked for, and there is a norm or gate after it
// (without them O is the output, and the backward never needs it).
static int keeps_o(const mta_config *c) { return c->keep_o && (c->group_norm || c->gate); }

static void free_workers(mta_ctx *ctx) {
    fused_state *st = ctx->state;
    for (int t = 0; t < st->nworkers; t++) {
        worker *w = (worker *)st->workers + t;
        win *ws[] = {&w->z, &w->s1, &w->p, &w->p2, &w->g2, &w->dp1, &w->dp, &w->ds1, &w->dz};
        const size_t nw = sizeof ws / sizeof ws[0];
        for (size_t i = 0; i < nw; i++) {  // each buffer once: dp and dz may be p2's
            size_t j = 0;
            while (j < i && ws[j]->buf != ws[i]->buf) j++;
            if (j == i) free(ws[i]->buf);
        }
        free(w->o), free(w->dO), free(w->rowpart), free(w->kpart);
    }
    free(st->workers), free(st->acc);
    st->workers = NULL, st->acc = NULL, st->nworkers = 0;
    ctx->bytes -= st->worker_bytes;
    st->worker_bytes = 0;
}

// The row statistics (kept from a forward to its backward) and the workers' windows (sized for
// the backward, which needs the most), reallocated only when the plan changes.
static mta_status fused_buffers(mta_ctx *ctx, const job *jb, int nworkers) {
    const mta_config *c = &ctx->cfg;
    const int G = jb->G, R = jb->R, units = jb->units;
    fused_state *st = ctx->state;
    if (!st->mx) {
        const size_t rows = (size_t)c->B * c->H * c->T;
        if (!(st->mx = mta_alloc_floats(ctx, rows)) || !(st->inv = mta_alloc_floats(ctx, rows)) ||
            !(st->hconv = mta_alloc_floats(ctx, (size_t)c->H * c->H)) ||
            (keeps_o(c) && !(st->o = mta_alloc_floats(ctx, rows * c->d)))) {
            fused_release(ctx);
            return mta_fail(ctx, MTA_ERR_NOMEM, "out of memory allocating the fused row statistics");
        }
    }
    if (st->workers && st->G == G && st->R == R && st->nworkers == nworkers) return MTA_OK;
    free_workers(ctx);
    const size_t before = ctx->bytes;
    const int K = imax(c->pre_cq * c->pre_ck, c->post_cq * c->post_ck);
    int ok = (st->acc = (double *)mta_alloc_floats(ctx, 2 * (size_t)units * unit_acc_doubles(c, G))) &&
             (st->workers = calloc((size_t)nworkers, sizeof(worker))) != NULL;
    if (ok) st->nworkers = nworkers, st->G = G, st->R = R;
    for (int t = 0; ok && t < nworkers; t++) {
        worker *w = (worker *)st->workers + t;
        const win_rows k = window_rows(jb, R);
        ok = win_alloc(ctx, &w->z, k.z, G) && win_alloc(ctx, &w->s1, k.s1, G) && win_alloc(ctx, &w->p, k.p, G) &&
             win_alloc(ctx, &w->p2, k.p2, G) && win_alloc(ctx, &w->g2, k.g2, G) && win_alloc(ctx, &w->dp1, k.dp1, G) &&
             win_alloc(ctx, &w->dp, k.dp, G) && win_alloc(ctx, &w->ds1, k.ds1, G) && win_alloc(ctx, &w->dz, k.dz, G) &&
             (w->o = mta_alloc_floats(ctx, (size_t)G * R * c->d)) && (w->dO = mta_alloc_floats(ctx, (size_t)G * R * c->d)) &&
             (w->rowpart = mta_alloc_floats(ctx, 2 * rowpart_half(R, G, c->H))) &&
             (w->kpart = mta_alloc_floats(ctx, (size_t)G * (K ? K : 1)));
        if (ok && k.dp_in_p2) w->dp = w->p2;
        if (ok && k.dz_in_p2) w->dz = w->p2;
    }
    st->worker_bytes = ctx->bytes - before;
    if (!ok) {
        free_workers(ctx);
        return mta_fail(ctx, MTA_ERR_NOMEM, "out of memory allocating the fused workspace (%d rows per strip)", R);
    }
    return MTA_OK;
}

static void fused_release(mta_ctx *ctx) {
    fused_state *st = ctx->state;
    if (st) {
        free_workers(ctx);
        free(st->mx), free(st->inv), free(st->hconv), free(st->o);
        free(st);
    }
    ctx->state = NULL;
    ctx->bytes = 0;
    ctx->have_forward = 0;
}

// ---- the logical maps of a worker's windows, given which steps are on ----------------------------

typedef struct {
    win *z;    // where the scores land
    win *s1;   // pre-softmax conv output (input of head mixing)
    win *p;    // S2, then P in place
    win *p1;   // post-softmax conv output (input of the head conv)
    win *p2;   // the map that multiplies V
    win *dp1;  // gradient of P1 (input of the transposed post conv)
    win *dp;   // gradient of P, then of S2 in place
    win *ds1;  // gradient of S1 (input of the transposed pre conv)
    win *dz;   // gradient of Z
} maps;

static maps maps_of(const mta_config *c, worker *w) {
    maps m;
    m.p = &w->p;
    m.s1 = c->pre_head_mix ? &w->s1 : m.p;
    m.z = c->pre_cq ? &w->z : m.s1;
    m.p1 = c->post_cq ? (c->post_ch ? &w->dp1 : &w->p2) : m.p;
    m.p2 = c->post_ch ? &w->p2 : m.p1;
    m.dp = &w->dp;
    m.dp1 = c->post_cq ? &w->dp1 : m.dp;
    m.ds1 = c->pre_cq ? (c->pre_head_mix ? &w->s1 : &w->ds1) : (c->pre_head_mix ? &w->dz : m.dp);
    m.dz = c->pre_cq ? &w->dz : m.ds1;
    return m;
}

// ---- pieces shared by the forward and the backward ----------------------------------------------

// Row i's document start in sequence b (0 without documents).
static inline int dstart(const job *jb, int b, int i) { return mta_row_start(jb->ds, jb->c->T, b, i); }

// One past the last row of row i's document, or lim if the document runs on (mta_doc_end).
static inline int dend(const job *jb, int b, int i, int lim) { return mta_doc_end(jb->ds, jb->c->T, b, i, lim); }

// Row-major C (m,n) = alpha op(A) op(B) + beta C, on matmul.c's strip kernels (NN: the strip
// is A; TN: the strip is A^T, beta = 1; NT: scores, beta = 0), timed into ctx's statistics:
// thread time divided by the number of threads running such calls side by side, so that the sum
// approximates wall time.
typedef enum { MM_NN, MM_NT, MM_TN } mm_kind;

static void matmul(const job *jb, mm_kind kind, int m, int n, int k, float alpha, const float *a, int lda, const float *b,
                   int ldb, float beta, float *cm, int ldc) {
    double t0 = omp_get_wtime();
    if (kind == MM_NN)
        strip_matmul_nn(m, n, k, alpha, a, lda, b, ldb, beta, cm, ldc);
    else if (kind == MM_TN)
        strip_matmul_tn(m, n, k, alpha, a, lda, b, ldb, cm, ldc);
    else
        strip_matmul_nt(m, n, k, alpha, a, lda, b, ldb, cm, ldc);
    double dt = (omp_get_wtime() - t0) / (jb->inner ? omp_get_num_threads() : jb->st->nworkers);
    #pragma omp atomic
    jb->ctx->stats.matmul_s += dt;
    #pragma omp atomic
    jb->ctx->stats.matmul_flop += 2.0 * m * n * k;
}

// Rows [a0, a1) of local head h of window dst (sequence b): the key-query convolution of window
// src (which holds the c_q-1 rows before a0) with global head h0+h's kernel in w (H, cq, ck).
// Each document's piece of the strip is convolved as a map of its own, from its start s.
static void strip_conv(const job *jb, int b, const win *src, const win *dst, const float *w, int cq, int ck, int h0,
                       int h, int a0, int a1) {
    for (int x0 = a0, x1; x0 < a1; x0 = x1) {
        const int s = dstart(jb, b, x0);
        x1 = dend(jb, b, x0, a1);
        qkconv_rows(wrow(src, h, imax(s, x0 - (cq - 1))) + s, src->ld, w + (size_t)(h0 + h) * cq * ck, cq, ck, x0 - s,
                    x1 - s, wrow(dst, h, x0) + s, dst->ld);
    }
}

// Row i of window dst: the unit's G heads of window src mixed by mm (rows H apart) in groups of
// gs heads, over row i's columns s..i (sequence b).
static void mix_row(const job *jb, int b, const win *src, const win *dst, const float *mm, int gs, int i) {
    const int s = dstart(jb, b, i);
    headmix_row(wrow(src, 0, i) + s, src->hs, mm, jb->c->H, jb->G, gs, i + 1 - s, wrow(dst, 0, i) + s, dst->hs);
}

// Rows [a0, a1) of window dst mixed as in mix_row. A worksharing loop over rows.
static void strip_mix(const job *jb, int b, const win *src, const win *dst, const float *mm, int gs, int a0, int a1) {
    #pragma omp for schedule(dynamic, 1)
    for (int i = a0; i < a1; i++) mix_row(jb, b, src, dst, mm, gs, i);
}

// Rows [lo, hi) of a unit whose dZ a strip finished (rows C, lag.h; their first row in dz, heads hs
// apart), waiting for the next strip's pass over k.
typedef struct {
    int lo, hi;
    float *dz;
    size_t ld, hs;
} lagged;

enum { KEY_BLOCK = 256 };  // keys per block of the fused pass over k: k and dk stay in L2

// The products of local head hl that read k: the scores of rows [a0, a1) into window z and, for
// the lagged rows, dq += dZ k / sqrt(d) and dk += dZ^T q / sqrt(d). With lagged rows they run key
// block by key block, so each block of k comes from memory once for the three (the strips are
// too short for k to stay in cache from one product to the next). Keys before the first row's
// document start (sa, sr) are skipped: no row reads those scores, and dZ is zero there.
static void k_products(job *jb, const win *z, int a0, int a1, const lagged *lg, size_t bh, int hl) {
    const int T = jb->c->T, d = jb->c->d, n = a1 - a0, b = (int)(bh / jb->c->H);
    const size_t kvh = mta_kv_slab(jb->c, bh);  // the kv head this query head reads
    const float *q = jb->q + bh * T * d, *k = jb->k + kvh * T * d;
    const int r0 = lg ? lg->lo : 0, r1 = lg ? lg->hi : 0, nr = r1 - r0;  // the lagged rows
    const int sa = n > 0 ? dstart(jb, b, a0) : 0, sr = nr > 0 ? dstart(jb, b, r0) : 0;
    const int first = n > 0 && nr > 0 ? imin(sa, sr) : n > 0 ? sa : sr;
    const int kb = nr > 0 ? KEY_BLOCK : imax(a1 - sa, 1);  // scores alone: one block
    for (int j0 = first; j0 < imax(a1, r1); j0 += kb) {
        const int j1 = j0 + kb;
        if (n > 0 && j0 < a1 && j1 > sa) {
            const int js = imax(j0, sa);
            matmul(jb, MM_NT, n, imin(j1, a1) - js, d, jb->scale, q + (size_t)a0 * d, d, k + (size_t)js * d, d, 0.0f,
                   wrow(z, hl, a0) + js, (int)z->ld);
        }
        if (j0 < r1 && j1 > sr) {
            const int js = imax(j0, sr), m = imin(j1, r1) - js;
            const float *dz = lg->dz + hl * lg->hs + js, *kj = k + (size_t)js * d;
            matmul(jb, MM_NN, nr, d, m, jb->scale, dz, (int)lg->ld, kj, d, 1.0f, jb->dq + (bh * T + r0) * d, d);
            matmul(jb, MM_TN, m, d, nr, jb->scale, dz, (int)lg->ld, q + (size_t)r0 * d, d, 1.0f,
                   jb->dk + (kvh * T + js) * d, d);
        }
    }
}

// Softmax of rows [a0, a1) of local head h of window x (S2 of the unit (b, h0..)), in place. With
// save it stores each row's max and 1/sum; otherwise it reuses them (bit for bit the same P).
static void strip_softmax(job *jb, const win *x, int b, int h0, int h, int a0, int a1, int save) {
    fused_state *st = jb->st;
    const size_t row0 = ((size_t)b * jb->c->H + h0 + h) * jb->c->T;
    for (int i = a0; i < a1; i++) {
        const int s = dstart(jb, b, i);  // over the document's columns s..i
        if (save) softmax_row(wrow(x, h, i) + s, i + 1 - s, &st->mx[row0 + i], &st->inv[row0 + i]);
        else softmax_row_recompute(wrow(x, h, i) + s, i + 1 - s, st->mx[row0 + i], st->inv[row0 + i]);
    }
}

// Recomputes (forward: computes) rows [a0, a1) of Z, S1, S2/P, P1 and P2 of unit (b, h0..h0+G-1).
// With save, the softmax stores its row statistics; otherwise it reuses them. The backward passes
// the rows lg whose dq, dk products wait for a pass over k (or NULL). Runs inside the unit's
// parallel region: every loop is a worksharing loop.
static void strip_maps(job *jb, worker *w, int b, int h0, int a0, int a1, int save, const lagged *lg) {
    const mta_config *c = jb->c;
    const int G = jb->G, H = c->H;
    const mta_params *p = jb->p;
    fused_state *st = jb->st;
    maps m = maps_of(c, w);
    // (In rounds, a head's thread need not be the one of the loops before, which end without a
    // barrier: one first.)
    if (jb->rounds > 1) {
        #pragma omp barrier
    }
    for (int r = 0; r < jb->rounds; r++) {
        #pragma omp for schedule(static)
        for (int h = 0; h < G; h++) {
            if ((h0 + h) % jb->rounds != r) continue;
            k_products(jb, m.z, a0, a1, lg, (size_t)b * H + h0 + h, h);
            if (c->pre_cq) strip_conv(jb, b, m.z, m.s1, p->w_pre, c->pre_cq, c->pre_ck, h0, h, a0, a1);
        }
    }
    // Without the post conv, the head conv reads P itself: a row's head conv follows its softmax
    // in the same loop (each worksharing loop ends in a barrier, a wait on the slower thread).
    const int hconv_in_rows = c->pre_head_mix && c->post_ch && !c->post_cq;
    const float *hm = st->hconv + (size_t)h0 * H + h0;
    if (c->pre_head_mix) {
        // each row's softmax right after its mixing, on the thread that has its heads in cache
        const float *mm = p->w_pre_head + (size_t)h0 * H + h0;
        #pragma omp for schedule(dynamic, 1)
        for (int i = a0; i < a1; i++) {
            mix_row(jb, b, m.s1, m.p, mm, G, i);
            for (int h = 0; h < G; h++) strip_softmax(jb, m.p, b, h0, h, i, i + 1, save);
            if (hconv_in_rows) mix_row(jb, b, m.p, m.p2, hm, c->post_ch, i);
        }
    }
    if (!c->pre_head_mix || c->post_cq) {
        #pragma omp for schedule(static)
        for (int h = 0; h < G; h++) {
            if (!c->pre_head_mix) strip_softmax(jb, m.p, b, h0, h, a0, a1, save);
            if (c->post_cq) strip_conv(jb, b, m.p, m.p1, p->w_post, c->post_cq, c->post_ck, h0, h, a0, a1);
        }
    }
    if (c->post_ch && !hconv_in_rows) strip_mix(jb, b, m.p1, m.p2, hm, c->post_ch, a0, a1);
}

// The map that multiplies V for local head hl, rows [a0, a1): P2 with dropout applied (in place,
// or into window g2 when P2 is P itself, which the backward still needs), zero past the diagonal
// up to column a1 and before the row's document from the strip's first document start on (the
// matrix products read whole strips from there).
static win *strip_pd(job *jb, worker *w, int b, int h0, int hl, int a0, int a1) {
    const mta_config *c = jb->c;
    const int T = c->T, drop = jb->ctx->dropout_on;
    maps m = maps_of(c, w);
    win *pd = drop && m.p2 == m.p ? &w->g2 : m.p2;
    const size_t bh = (size_t)b * c->H + h0 + hl;
    const int s0 = dstart(jb, b, a0);
    for (int i = a0; i < a1; i++) {
        float *x = wrow(pd, hl, i);
        const float *sx = wrow(m.p2, hl, i);
        const int s = dstart(jb, b, i);
        if (drop) {
            const size_t row = (bh * T + i) * (size_t)T;
            for (int j = s; j <= i; j++)
                x[j] = mta_dropout_keep(jb->ctx->seed, row + j, jb->drop_thr) ? sx[j] * jb->drop_scale : 0.0f;
        }
        memset(x + s0, 0, (size_t)(s - s0) * sizeof(float));
        mta_zero_past_diagonal(x, i, a1);
    }
    return pd;
}

// ---- forward ------------------------------------------------------------------------------------

// Strips [s0, s1) of unit u (strip s: rows s*R..), in order: their maps and output rows. The
// threads share each strip when jb->inner; otherwise the region has a team of one, this thread.
static void unit_forward_strips(job *jb, worker *shared, int u, int s0, int s1) {
    const mta_config *c = jb->c;
    const int G = jb->G, H = c->H, T = c->T, d = c->d, R = jb->R;
    const int b = u / (H / G), h0 = u % (H / G) * G;
    const int *starts = jb->ds ? jb->ds + (size_t)b * T : NULL;  // the row starts of sequence b, or NULL
    #pragma omp parallel if (jb->inner)
    {
    worker own = *shared, *w = &own;  // this thread's copy (see worker)
    // The per-head loops here (slides, the first loop of strip_maps, the output rows) have the same
    // G iterations and static schedule, so each thread gets the same heads in all of them: one
    // that runs into the next reads and writes only heads it handled itself, and needs no barrier
    // (nowait). The loops over rows, which read every head, still wait for all.
    for (int i0 = s0 * R; i0 < imin(T, s1 * R); i0 += R) {
        const int i1 = imin(T, i0 + R), n = i1 - i0;
        if (jb->L1 || jb->L2) {  // (without a convolution reaching back, windows keep no rows)
            #pragma omp for schedule(static) nowait
            for (int h = 0; h < G; h++)
                wslide_head(&w->z, h, i0 - jb->L2, starts, T), wslide_head(&w->p, h, i0 - jb->L1, starts, T);
        }
        w->z.base = i0 - jb->L2, w->p.base = i0 - jb->L1;
        w->s1.base = w->p2.base = w->g2.base = w->dp1.base = i0;
        strip_maps(jb, w, b, h0, i0, i1, 1, NULL);
        #pragma omp for schedule(static) nowait
        for (int hl = 0; hl < G; hl++) {
            const size_t bh = (size_t)b * H + h0 + hl;
            win *pd = strip_pd(jb, w, b, h0, hl, i0, i1);
            float *out = jb->out + (bh * T + i0) * d, *o = jb->st->o ? jb->st->o + (bh * T + i0) * d : out;
            const int s = dstart(jb, b, i0);  // (PD is zero before the strip's first document start)
            matmul(jb, MM_NN, n, d, i1 - s, 1.0f, wrow(pd, hl, i0) + s, (int)pd->ld,
                   jb->v + (mta_kv_slab(c, bh) * T + s) * d, d, 0.0f, o, d);
            if (c->group_norm || c->gate)
                mta_normgate_forward_rows(c, jb->p, o, out, n);
        }
    }
    }
}

static int strip_count(const job *jb) { return (jb->c->T + jb->R - 1) / jb->R; }

static void unit_forward(job *jb, worker *w, int u) { unit_forward_strips(jb, w, u, 0, strip_count(jb)); }

// The forward of units whose strips are independent (no convolution reaches back to earlier rows:
// L1 = L2 = 0) when there are fewer units than threads: each thread takes whole strips, with its
// own windows, instead of the threads sharing every strip. Sharing a strip costs a barrier per
// step (five per strip of lm10m's mixing layers), a wait on the slower thread each.
static void strips_forward(job *jb) {
    worker *ws = (worker *)jb->st->workers;
    const int ns = strip_count(jb);
    jb->inner = 0;
    #pragma omp parallel for schedule(dynamic, 1) num_threads(jb->st->nworkers)
    for (int k = 0; k < jb->units * ns; k++) unit_forward_strips(jb, ws + omp_get_thread_num(), k / ns, k % ns, k % ns + 1);
}

// ---- backward -----------------------------------------------------------------------------------

// One mixing's backward for mix_backward: window din from window dout and mm (rows H apart, in
// groups of gs heads), and the mixing kernel's gradient from dout and the mixing's input window
// in, added to acc (G*G, [h*G + h']) through the per-row lane partials in rowpart (slot r: G rows
// of H entries [h*H + h'], each headmix_grad_lanes() floats), summed in a fixed order. The two
// mixings of a strip take separate halves of the worker's rowpart (rowpart_half floats each).
// With sm (the softmax's output P), dout holds dP, and each row first becomes dS2 = P (dP - D) in
// place, on the thread that mixes it.
typedef struct {
    const win *dout, *in, *din, *sm;
    const float *mm;
    int gs;
    float *rowpart;
    double *acc;
} mix_grad;

// The backward of nm mixings over rows [r0, r1) of sequence b, one after the other in each row
// (each reads only its row, so a row's chain runs on one thread, its heads still in cache, with
// one barrier for all), then each row of each head of window zero (or NULL) zeroed past its
// diagonal up to column r1-1 and before its document from row r0's on (for the dq, dk products).
// Row r's columns s..r only (its document's). A worksharing loop over rows, then over acc's
// entries.
static void mix_backward(const job *jb, int b, const mix_grad *mg, int nm, int r0, int r1, const win *zero) {
    const int H = jb->c->H, G = jb->G;
    const size_t rs = (size_t)G * H * headmix_grad_lanes();  // floats per row slot
    const int s0 = dstart(jb, b, r0);
    #pragma omp for schedule(dynamic, 1)
    for (int r = r0; r < r1; r++) {
        const int s = dstart(jb, b, r), n = r + 1 - s;
        for (int k = 0; k < nm; k++) {
            const mix_grad *x = &mg[k];
            if (x->sm)
                for (int h = 0; h < G; h++) softmax_backward_row(wrow(x->sm, h, r) + s, wrow(x->dout, h, r) + s, n);
            headmix_backward_row(wrow(x->dout, 0, r) + s, x->dout->hs, wrow(x->in, 0, r) + s, x->in->hs, x->mm, H, G,
                                 x->gs, n, wrow(x->din, 0, r) + s, x->din->hs, x->rowpart + (size_t)(r - r0) * rs);
        }
        if (zero)
            for (int h = 0; h < G; h++) {
                memset(wrow(zero, h, r) + s0, 0, (size_t)(s - s0) * sizeof(float));
                mta_zero_past_diagonal(wrow(zero, h, r), r, r1);
            }
    }
    // No barrier after: nothing reads acc before the unit is done, and this rowpart is written
    // again only in the next strip.
    for (int k = 0; k < nm; k++) {
        #pragma omp for schedule(static) nowait
        for (int e = 0; e < G * G; e++)
            mg[k].acc[e] += headmix_grad_sum(mg[k].rowpart + (size_t)(e / G * H + e % G) * headmix_grad_lanes(), rs,
                                             r1 - r0);
    }
}

// Local head hl's part of a key-query convolution's kernel gradient from output-gradient rows
// [r0, r1) of window g and the convolution's source rows in window src (sequence b), added to
// acc (G, cq*ck) strip by strip (by document pieces of a strip, each from its start s).
static void kernel_grad(const job *jb, int b, const win *g, const win *src, int cq, int ck, int r0, int r1, int hl,
                        float *kpart, double *acc) {
    const int K = cq * ck;
    float *kp = kpart + (size_t)hl * K;
    for (int x0 = r0, x1; x0 < r1; x0 = x1) {
        const int s = dstart(jb, b, x0);
        x1 = dend(jb, b, x0, r1);
        qkconv_backward_weight_rows(wrow(g, hl, x0) + s, g->ld, wrow(src, hl, imax(s, x0 - (cq - 1))) + s, src->ld, cq,
                                    ck, x0 - s, x1 - s, kp);
        for (int e = 0; e < K; e++) acc[(size_t)hl * K + e] += kp[e];
    }
}

// Rows [r0, r1) of local head hl of window din (sequence b): the transposed convolution of
// window g with kernel wh. Row r of document [s, e) reads g's rows r..min(e-1, r+cq-1), from
// column s.
static void strip_conv_backward(const job *jb, int b, const win *g, const win *din, const float *wh, int cq, int ck,
                                int hl, int r0, int r1) {
    for (int x0 = r0, x1; x0 < r1; x0 = x1) {
        const int s = dstart(jb, b, x0), e = dend(jb, b, x0, imin(jb->c->T, r1 + cq - 1));
        x1 = imin(r1, e);
        qkconv_backward_input_rows(wrow(g, hl, x0) + s, g->ld, e - 1 - s, wh, cq, ck, x0 - s, x1 - s,
                                   wrow(din, hl, x0) + s, din->ld);
    }
}

// ---- backward: a unit's strips, three lagged stages each (lag.h) -------------------------------
//
// Every thread of the unit walks all its strips with its own copy of the worker; the stages share
// a strip's heads (loops over heads, static schedule) and rows (the mixings' loops over rows).
// Loops over heads that follow one another have the same G iterations and schedule, so a thread
// gets the same heads in each: where the next loop reads only heads that this thread wrote, it
// needs no barrier (nowait). Loops over rows read every head and start after a barrier.

// What a thread of a unit's backward works with.
typedef struct {
    job *jb;
    worker w;           // this thread's copy of the unit's worker (see worker)
    maps m;             // the maps in w
    int batch, h0;      // the unit: batch element `batch`, heads h0..h0+G-1
    const int *starts;  // the row starts of sequence `batch`, or NULL
    unit_acc acc;
    mix_grad premix;    // the pre-softmax mixing's backward (its softmax's first), when it is on
    int rows_chain;     // no post conv (B = A) and the mixing: its backward runs in stage A's row loop
} unit_bwd;

static void unit_bwd_init(unit_bwd *x, job *jb, const worker *shared, int u, unit_acc acc) {
    const mta_config *c = jb->c;
    const int G = jb->G, H = c->H;
    x->jb = jb;
    x->w = *shared;
    x->m = maps_of(c, &x->w);
    x->batch = u / (H / G), x->h0 = u % (H / G) * G;
    x->starts = jb->ds ? jb->ds + (size_t)x->batch * c->T : NULL;
    x->acc = acc;
    x->rows_chain = c->pre_head_mix && !c->post_cq;
    const maps *m = &x->m;
    x->premix = c->pre_head_mix ? (mix_grad){m->dp, m->s1, m->ds1, m->p, jb->p->w_pre_head + (size_t)x->h0 * H + x->h0,
                                             G, x->w.rowpart + rowpart_half(jb->R, G, H), acc.mix}
                                : (mix_grad){0};
}

// Moves the windows to strip s: Z, dS1 and dZ start at C's first row (unclipped), P, dP1, dP and
// S1 at B's (S1 at C's when dS1 replaces it in place), P2 and PD at A's.
static void backward_slide(unit_bwd *x, mta_strip s) {
    const job *jb = x->jb;
    worker *w = &x->w;
    const int G = jb->G, T = jb->c->T, L1 = jb->L1, L2 = jb->L2, i0 = s.i0;
    const int s1base = x->m.ds1 == x->m.s1 ? i0 - L1 - L2 : i0 - L1;
    if (L1 || L2) {  // (without a convolution reaching back, windows keep no rows)
        // nowait: the next loop, strip_maps' first (scores, pre conv), runs over the same heads and
        // touches only those this thread moved; the loops after it wait for its barrier (in
        // rounds, strip_maps puts a barrier first).
        #pragma omp for schedule(static) nowait
        for (int h = 0; h < G; h++) {
            wslide_head(&w->z, h, i0 - L1 - L2, x->starts, T);
            wslide_head(&w->s1, h, s1base, x->starts, T);
            wslide_head(&w->p, h, i0 - L1, x->starts, T);
            wslide_head(&w->dp1, h, i0 - L1, x->starts, T);
            wslide_head(&w->ds1, h, i0 - L1 - L2, x->starts, T);
        }
        if (!mta_rows_any(s.A)) {  // past T, no strip_maps: stage B's row loop may come next
            #pragma omp barrier
        }
    }
    w->z.base = w->ds1.base = i0 - L1 - L2;
    w->s1.base = s1base;
    w->p.base = w->dp1.base = i0 - L1;
    w->p2.base = w->g2.base = i0;
    w->dp.base = i0 - L1;
    w->dz.base = i0 - L1 - L2;
}

// Local head hl's rows A after its maps: O (kept, or again), then dO through the gate and norm;
// dV += PD^T dO; dP2 = dO v^T, through the dropout.
static void head_dp2(unit_bwd *x, mta_rows A, int hl) {
    job *jb = x->jb;
    const mta_config *c = jb->c;
    fused_state *st = jb->st;
    const int T = c->T, d = c->d, R = jb->R, b = x->batch, a0 = A.lo, a1 = A.hi, n = a1 - a0;
    const size_t bh = (size_t)b * c->H + x->h0 + hl;
    const size_t kvh = mta_kv_slab(c, bh);
    // keys from the strip's first document start s (PD is zero before it, and dP2 is read from
    // each row's start on)
    const int s = dstart(jb, b, a0);
    const float *vh = jb->v + (kvh * T + s) * d, *go = jb->dout + (bh * T + a0) * d;
    win *pd = strip_pd(jb, &x->w, b, x->h0, hl, a0, a1);
    float *o = st->o ? st->o + (bh * T + a0) * d : x->w.o + (size_t)hl * R * d, *dO = x->w.dO + (size_t)hl * R * d;
    if (c->group_norm || c->gate) {
        if (!st->o)  // O again
            matmul(jb, MM_NN, n, d, a1 - s, 1.0f, wrow(pd, hl, a0) + s, (int)pd->ld, vh, d, 0.0f, o, d);
        mta_normgate_backward_rows(c, jb->p, o, go, dO, n, x->acc.ng + (size_t)hl * (2 * d + 1));
    } else {
        memcpy(dO, go, (size_t)n * d * sizeof(float));
    }
    matmul(jb, MM_TN, a1 - s, d, n, 1.0f, wrow(pd, hl, a0) + s, (int)pd->ld, dO, d, 1.0f, jb->dv + (kvh * T + s) * d,
           d);
    // dP2 overwrites PD (the head conv's input P1 is kept apart) or goes to dP1 directly
    win *g2 = c->post_ch ? pd : x->m.dp1;
    matmul(jb, MM_NT, n, a1 - s, d, 1.0f, dO, d, vh, d, 0.0f, wrow(g2, hl, a0) + s, (int)g2->ld);
    if (jb->ctx->dropout_on)
        for (int i = a0; i < a1; i++) {
            float *g = wrow(g2, hl, i);
            const size_t row = (bh * T + i) * (size_t)T;
            for (int j = dstart(jb, b, i); j <= i; j++)
                g[j] = mta_dropout_keep(jb->ctx->seed, row + j, jb->drop_thr) ? g[j] * jb->drop_scale : 0.0f;
        }
}

// Stage A, rows A: their maps again (with the lagged dq, dk products of the previous strip's rows
// C, lg, in the same pass over k), dO, dV and dP2 per head, then the head conv's backward (dP1)
// and, without the post conv (B = A), the mixing's in the same row loop; without the pre conv
// either (C = A), that loop also finishes the rows' dZ.
static void stage_a(unit_bwd *x, mta_rows A, const lagged *lg) {
    job *jb = x->jb;
    const mta_config *c = jb->c;
    const maps *m = &x->m;
    strip_maps(jb, &x->w, x->batch, x->h0, A.lo, A.hi, 0, lg);
    // strip_maps ends in a barrier: P2 rows A of every head are in
    for (int r = 0; r < jb->rounds; r++) {
        #pragma omp for schedule(static)
        for (int hl = 0; hl < jb->G; hl++)
            if ((x->h0 + hl) % jb->rounds == r) head_dp2(x, A, hl);
    }
    // the loop ends in a barrier: the mixings' row loop reads dP2 rows A of every head
    mix_grad mg[2];
    int nm = 0;
    if (c->post_ch)
        mg[nm++] = (mix_grad){m->p2, m->p1, m->dp1, NULL, jb->st->hconv + (size_t)x->h0 * c->H + x->h0, c->post_ch,
                              x->w.rowpart, x->acc.hconv};
    if (x->rows_chain) mg[nm++] = x->premix;
    if (nm) mix_backward(jb, x->batch, mg, nm, A.lo, A.hi, x->rows_chain && !c->pre_cq ? m->dz : NULL);
}

// Local head hl's part of stage B: the post conv's kernel gradient from dP1 rows A (post_grad),
// and (b_heads) dP of rows B through the transposed post conv, then without the mixing the
// softmax backward, whose dS2 is dS1 (copied when dS1 has a window of its own; with the mixing,
// its row loop does all that).
static void head_dp(unit_bwd *x, mta_strip s, int hl, int post_grad, int b_heads) {
    job *jb = x->jb;
    const mta_config *c = jb->c;
    const maps *m = &x->m;
    const int b = x->batch;
    if (post_grad)
        kernel_grad(jb, b, m->dp1, m->p, c->post_cq, c->post_ck, s.A.lo, s.A.hi, hl, x->w.kpart, x->acc.wpost);
    if (b_heads && c->post_cq)
        strip_conv_backward(jb, b, m->dp1, m->dp, jb->p->w_post + (size_t)(x->h0 + hl) * c->post_cq * c->post_ck,
                            c->post_cq, c->post_ck, hl, s.B.lo, s.B.hi);
    if (b_heads && !c->pre_head_mix)
        for (int r = s.B.lo; r < s.B.hi; r++) {
            const int rs = dstart(jb, b, r);
            softmax_backward_row(wrow(m->p, hl, r) + rs, wrow(m->dp, hl, r) + rs, r + 1 - rs);
            if (m->ds1 != m->dp)
                memcpy(wrow(m->ds1, hl, r) + rs, wrow(m->dp, hl, r) + rs, (size_t)(r + 1 - rs) * sizeof(float));
        }
}

// Stage B, rows B: dP, dS2 and dS1. Their dP1 rows r..r+L1 end at A's last row, which stage A
// wrote before its last barrier (dP2's loop, or the mixings' row loop).
static void stage_b(unit_bwd *x, mta_strip s) {
    job *jb = x->jb;
    const mta_config *c = jb->c;
    const int post_grad = c->post_cq && mta_rows_any(s.A);
    const int b_heads = mta_rows_any(s.B) && (c->post_cq || !c->pre_head_mix);
    if (post_grad || b_heads) {
        // (one loop: neither part writes what the other reads)
        #pragma omp for schedule(static)
        for (int hl = 0; hl < jb->G; hl++) head_dp(x, s, hl, post_grad, b_heads);
    }
    // the loop ends in a barrier: the mixing's row loop reads dP rows B of every head
    if (mta_rows_any(s.B) && c->pre_head_mix && !x->rows_chain)
        mix_backward(jb, x->batch, &x->premix, 1, s.B.lo, s.B.hi, NULL);
}

// Local head hl's part of stage C: the pre conv's kernel gradient from dS1 rows B (pre_grad),
// and (c_heads) dZ of rows C through the transposed pre conv, zeroed where the dq, dk products
// read it past each row's document and diagonal.
static void head_dz(unit_bwd *x, mta_strip s, int hl, int pre_grad, int c_heads) {
    job *jb = x->jb;
    const mta_config *c = jb->c;
    const maps *m = &x->m;
    const int b = x->batch, K1 = c->pre_cq * c->pre_ck;
    if (pre_grad) kernel_grad(jb, b, m->ds1, m->z, c->pre_cq, c->pre_ck, s.B.lo, s.B.hi, hl, x->w.kpart, x->acc.wpre);
    if (!c_heads) return;
    if (c->pre_cq)
        strip_conv_backward(jb, b, m->ds1, m->dz, jb->p->w_pre + (size_t)(x->h0 + hl) * K1, c->pre_cq, c->pre_ck, hl,
                            s.C.lo, s.C.hi);
    const int sc = dstart(jb, b, s.C.lo);  // (the dq, dk products read rows C from here)
    for (int r = s.C.lo; r < s.C.hi; r++) {
        memset(wrow(m->dz, hl, r) + sc, 0, (size_t)(dstart(jb, b, r) - sc) * sizeof(float));
        mta_zero_past_diagonal(wrow(m->dz, hl, r), r, s.C.hi);
    }
}

// Stage C, rows C: dZ. Their dS1 rows r..r+L2 end at B's last row, which stage B (or stage A's
// row loop, with rows_chain) wrote before its last barrier. Their dq, dk products wait for the
// next strip's pass over k (lagged_rows), which overwrites nothing of dz before it (dz's buffer
// holds P2 or dP, written after it).
static void stage_c(unit_bwd *x, mta_strip s) {
    const mta_config *c = x->jb->c;
    const int pre_grad = c->pre_cq && mta_rows_any(s.B), c_heads = mta_rows_any(s.C) && (!x->rows_chain || c->pre_cq);
    if (pre_grad || c_heads) {
        // nowait: what comes next reads head hl's dZ on this thread: the flush, or the next
        // strip's slide and its scores' pass over k, loops over the same heads (or a barrier
        // first, in rounds); the kernel gradients are read when the unit is done.
        #pragma omp for schedule(static) nowait
        for (int hl = 0; hl < x->jb->G; hl++) head_dz(x, s, hl, pre_grad, c_heads);
    }
}

// Rows C of a strip, whose dq, dk products wait for the next strip's pass over k.
static lagged lagged_rows(const unit_bwd *x, mta_rows C) {
    const win *dz = x->m.dz;
    return mta_rows_any(C) ? (lagged){C.lo, C.hi, wrow(dz, 0, C.lo), dz->ld, dz->hs} : (lagged){0, 0, NULL, 0, 0};
}

// The dq, dk products of the lagged rows lg at once, when no strip after brings scores.
static void flush_lagged(unit_bwd *x, lagged *lg) {
    job *jb = x->jb;
    if (jb->rounds > 1) {  // (see strip_maps)
        #pragma omp barrier
    }
    for (int r = 0; r < jb->rounds; r++) {
        #pragma omp for schedule(static)
        for (int hl = 0; hl < jb->G; hl++)
            if ((x->h0 + hl) % jb->rounds == r)
                k_products(jb, x->m.z, 0, 0, lg, (size_t)x->batch * jb->c->H + x->h0 + hl, hl);
    }
    lg->lo = lg->hi = 0;
}

// The backward of unit u, its kernel gradients into acc: the strips of lag.h's schedule, each
// bringing rows A and finishing stages A, B, C on their rows.
static void unit_backward(job *jb, worker *shared, int u, unit_acc acc) {
    const mta_lag g = mta_lag_of(jb->c, jb->R);
    #pragma omp parallel if (jb->inner)
    {
        unit_bwd x;  // this thread's
        unit_bwd_init(&x, jb, shared, u, acc);
        lagged lg = {0, 0, NULL, 0, 0};  // the previous strip's rows C
        for (int i0 = 0; i0 < mta_lag_end(g); i0 += g.R) {
            const mta_strip s = mta_lag_strip(g, i0);
            backward_slide(&x, s);
            if (mta_rows_any(s.A)) stage_a(&x, s.A, &lg);
            stage_b(&x, s);
            stage_c(&x, s);
            lg = lagged_rows(&x, s.C);
            if (mta_rows_any(s.C) && i0 + g.R >= g.T) flush_lagged(&x, &lg);  // (no next strip's scores)
        }
    }
}

// ---- entry points -------------------------------------------------------------------------------

static int gcd(int a, int b) { return b ? gcd(b, a % b) : a; }

static mta_status plan(mta_ctx *ctx, job *jb, int backward) {
    const mta_config *c = &ctx->cfg;
    if (!ctx->state && !(ctx->state = calloc(1, sizeof(fused_state))))
        return mta_fail(ctx, MTA_ERR_NOMEM, "out of memory allocating the fused backend's state");
    jb->c = c, jb->ctx = ctx, jb->st = ctx->state;
    jb->ds = mta_ctx_doc_start(ctx);
    jb->G = group_size(c);
    jb->units = c->B * c->H / jb->G;
    const int threads = omp_get_max_threads();
    jb->inner = jb->units < threads;
    jb->L1 = mta_lag_post(c), jb->L2 = mta_lag_pre(c);
    // a worker per thread when the forward runs strips apart (strips_forward; the backward shares
    // the first worker's strips)
    jb->strips_apart = jb->inner && !jb->L1 && !jb->L2;
    int nworkers = jb->strips_apart ? threads : jb->inner ? 1 : imin(threads, jb->units);
    // Grouped-query attention: the query heads of a kv head add to its dk, dv rows, in a fixed
    // order and never two at once. With whole units per thread, the backward runs the units of
    // lcm(G, H/H_kv) heads (which share no kv head with the others) on one thread in order; with
    // a unit's strips shared, its loops that add to dk, dv run in rounds over the heads h with
    // h % (H/H_kv) = 0, 1, ... (one head of each kv head per round). Either way a kv head's sum
    // takes its query heads in order strip by strip: the same bits whatever the thread count.
    const int rep = c->H / mta_kv_heads(c);
    jb->chain = jb->rounds = 1;
    if (rep > 1 && backward) {
        if (!jb->inner) jb->chain = rep / gcd(jb->G, rep);
        else if (jb->G > 1) jb->rounds = rep;
    }
    jb->R = strip_rows(jb, nworkers);
    jb->scale = 1.0f / sqrtf((float)c->d);
    jb->drop_thr = mta_dropout_threshold(c->dropout);
    jb->drop_scale = 1.0f / (1.0f - c->dropout);
    return fused_buffers(ctx, jb, nworkers);
}

// Runs fn over every unit: in turn (each unit's strips shared by all threads), or with whole
// units per thread.
typedef void (*unit_fn)(job *jb, worker *w, int u);

static void run_units(job *jb, unit_fn fn) {
    worker *ws = (worker *)jb->st->workers;
    if (jb->inner) {
        for (int u = 0; u < jb->units; u++) fn(jb, ws, u);
        return;
    }
    const int chain = jb->chain;
    #pragma omp parallel for schedule(dynamic, 1) num_threads(jb->st->nworkers)
    for (int t = 0; t < jb->units / chain; t++)
        for (int u = t * chain; u < (t + 1) * chain; u++) fn(jb, ws + omp_get_thread_num(), u);
}

static mta_status fused_forward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                                float *out) {
    job jb;
    memset(&jb, 0, sizeof jb);
    mta_status s = plan(ctx, &jb, 0);
    if (s) return s;
    const mta_config *c = &ctx->cfg;
    jb.q = q, jb.k = k, jb.v = v, jb.p = p, jb.out = out;
    if (c->post_ch) mta_headconv_matrix(p->w_post_head, c->H, c->post_ch, jb.st->hconv);
    ctx->dropout_on = c->dropout > 0 && ctx->training;
    if (jb.strips_apart) strips_forward(&jb);
    else run_units(&jb, unit_forward);
    return MTA_OK;
}

static void backward_unit_fn(job *jb, worker *w, int u) {
    unit_acc a = unit_acc_at(jb->c, jb->G, jb->st->acc, u);
    memset(a.wpre, 0, unit_acc_doubles(jb->c, jb->G) * sizeof(double));
    unit_backward(jb, w, u, a);
}

static mta_status fused_backward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                                 const float *dout, float *dq, float *dk, float *dv, const mta_grads *g) {
    job jb;
    memset(&jb, 0, sizeof jb);
    mta_status s = plan(ctx, &jb, 1);
    if (s) return s;
    const mta_config *c = &ctx->cfg;
    jb.q = q, jb.k = k, jb.v = v, jb.p = p, jb.dout = dout, jb.dq = dq, jb.dk = dk, jb.dv = dv;
    if (c->post_ch) mta_headconv_matrix(p->w_post_head, c->H, c->post_ch, jb.st->hconv);
    run_units(&jb, backward_unit_fn);
    // unit partials into the gradients, units in order
    const int G = jb.G, H = c->H, K1 = c->pre_cq * c->pre_ck, K2 = c->post_cq * c->post_ck;
    for (int u = 0; u < jb.units; u++) {
        unit_acc a = unit_acc_at(c, G, jb.st->acc, u);
        const int h0 = u % (H / G) * G;
        for (int hl = 0; hl < G; hl++) {
            const int h = h0 + hl;
            if (g->w_pre)
                for (int e = 0; e < K1; e++) g->w_pre[(size_t)h * K1 + e] += (float)a.wpre[(size_t)hl * K1 + e];
            if (g->w_post)
                for (int e = 0; e < K2; e++) g->w_post[(size_t)h * K2 + e] += (float)a.wpost[(size_t)hl * K2 + e];
            for (int hl2 = 0; hl2 < G; hl2++) {
                if (g->w_pre_head && c->pre_head_mix) g->w_pre_head[(size_t)h * H + h0 + hl2] += (float)a.mix[hl * G + hl2];
                // head conv matrix entry [out o, in n] within a group is kernel w[grp, n, o]
                const int ch = c->post_ch;
                if (g->w_post_head && ch && (h0 + hl2) / ch == h / ch) {
                    const int grp = h / ch, o = h % ch, nn = (h0 + hl2) % ch;
                    g->w_post_head[((size_t)grp * ch + nn) * ch + o] += (float)a.hconv[hl * G + hl2];
                }
            }
        }
        mta_normgate_add_grads(c, g, a.ng, G);
    }
    return MTA_OK;
}

const mta_backend_impl mta_fused_backend = {
    .forward = fused_forward,
    .backward = fused_backward,
    .release = fused_release,
};
