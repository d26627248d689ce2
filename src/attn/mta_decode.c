// mta_decode.c: incremental decoding (spec section 2, "Incremental decoding"). A new query row i
// of every map depends only on rows i-c+1..i of the map before each convolution, and those rows'
// entries above the diagonal are zero, so once a position's key has arrived its row never
// changes. Per sequence and kv head the cache keeps K and V (H_kv heads), per query head the last pre_cq rows of Z (masked
// scaled scores, the pre-softmax convolution's input; the current row included) and the last
// post_cq rows of P (the softmax output, the post-softmax convolution's input). A step computes
// one row of every map: O(t*(d + c_q*c_k)) work per head at position t. A prefill copies K and V
// and recomputes the window rows from q and K with the same row code, so it needs no (T,T) map.
// Packed documents: each sequence keeps the start s of its current document, and a row runs in
// the document's own coordinates (row t - s over keys s..t, windows indexed by t - s), exactly as
// the document alone would from an empty cache; rows before s are never read.
#include "attn/conv.h"
#include "attn/mta_internal.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mta_cache {
    mta_config cfg;  // cfg.T is the capacity
    int *len;        // (B) positions held per sequence
    int *start;      // (B) first position of each sequence's current document
    float *k, *v;    // (B,H_kv,T,d): query head h reads kv head h/(H/H_kv) (mta_kv_slab)
    float *zwin;     // (B,H,2*pre_cq,T): the last pre_cq rows of Z in a doubled ring (window_push)
    float *pwin;     // (B,H,2*post_cq,T): the last post_cq rows of P likewise
    float *row[5];   // (H,T) scratch rows: z, s1, p, p1, p2
    float *hmat;     // (H,H) head-conv mixing matrix [out, in]
    char err[256];
};

// Slots of a map's window: a doubled ring of the last cq rows (none when the convolution is off
// or looks at one row only).
static size_t window_slots(int cq) { return cq > 1 ? 2 * (size_t)cq : 0; }

static mta_status cache_fail(mta_cache *c, mta_status s, const char *msg) {
    snprintf(c->err, sizeof c->err, "%s", msg);
    return s;
}

const char *mta_cache_error(const mta_cache *c) { return c ? c->err : "no cache"; }

mta_status mta_cache_create(mta_cache **out, const mta_config *cfg, char *msg, size_t n) {
    if (!out || !cfg) return MTA_ERR_NULL;
    *out = NULL;
    mta_status s = mta_config_check(cfg, msg, n);
    if (s) return s;
    mta_cache *c = calloc(1, sizeof *c);
    if (!c) return MTA_ERR_NOMEM;
    c->cfg = *cfg;
    const size_t B = cfg->B, H = cfg->H, T = cfg->T, d = cfg->d, Hkv = (size_t)mta_kv_heads(cfg);
    const size_t zr = window_slots(cfg->pre_cq), pr = window_slots(cfg->post_cq);
    int ok = (c->len = calloc(B, sizeof(int))) && (c->start = calloc(B, sizeof(int))) &&
             (c->k = malloc(B * Hkv * T * d * sizeof(float))) &&
             (c->v = malloc(B * Hkv * T * d * sizeof(float))) && (c->zwin = calloc(B * H * zr * T + 1, sizeof(float))) &&
             (c->pwin = calloc(B * H * pr * T + 1, sizeof(float))) && (c->hmat = calloc(H * H, sizeof(float)));
    for (int i = 0; i < 5 && ok; i++) ok = (c->row[i] = calloc(H * T, sizeof(float))) != NULL;
    if (!ok) {
        mta_cache_destroy(c);
        if (msg && n) snprintf(msg, n, "out of memory allocating a decoding cache for B=%zu, T=%zu", B, T);
        return MTA_ERR_NOMEM;
    }
    *out = c;
    return MTA_OK;
}

void mta_cache_destroy(mta_cache *c) {
    if (!c) return;
    free(c->len), free(c->start), free(c->k), free(c->v), free(c->zwin), free(c->pwin), free(c->hmat);
    for (int i = 0; i < 5; i++) free(c->row[i]);
    free(c);
}

void mta_cache_reset(mta_cache *c) {
    if (!c) return;
    memset(c->len, 0, (size_t)c->cfg.B * sizeof(int));
    memset(c->start, 0, (size_t)c->cfg.B * sizeof(int));
}

mta_status mta_cache_begin_document(mta_cache *c, int b) {
    if (!c) return MTA_ERR_NULL;
    if (b < 0 || b >= c->cfg.B)
        return cache_fail(c, MTA_ERR_INVALID, "begin_document: sequence index outside the cache's batch");
    c->start[b] = c->len[b];
    return MTA_OK;
}

int mta_cache_len(const mta_cache *c, int b) { return c && b >= 0 && b < c->cfg.B ? c->len[b] : -1; }

// The last cq rows of a map (the current one included) live in a doubled ring of 2*cq slots of
// T floats: row r is written to slots r % cq and r % cq + cq, so rows t-(cq-1)..t always sit in
// consecutive slots and the convolution reads them as one strided block (conv.h). Only entries
// 0..r of row r are ever read, so a slot takes the row's t+1 entries and nothing else.
static void window_push(float *win, int cq, int T, const float *cur, int t) {
    if (cq < 2) return;
    memcpy(win + (size_t)(t % cq) * T, cur, (size_t)(t + 1) * sizeof(float));
    memcpy(win + (size_t)(t % cq + cq) * T, cur, (size_t)(t + 1) * sizeof(float));
}

// Row t of the convolution of the windowed map (row t, cur, already pushed). A one-row kernel
// has no window and reads cur itself.
static void window_conv(const float *win, const float *cur, const float *w, int cq, int ck, int T, int t, float *out) {
    const float *src = cq == 1 ? cur : win + (size_t)(t >= cq - 1 ? (t + 1) % cq : 0) * T;
    qkconv_rows(src, (size_t)T, w, cq, ck, t, t + 1, out, (size_t)T);
}

// Row t of heads [lo, hi) mixed within groups of G: dst[h] = sum_{h' in group(h)} m[h,h'] src[h'],
// keys 0..t. Each thread mixes the heads it goes on with (their softmax, their product with V),
// so the only waits are for every head's input rows: mixing a block of keys of all heads at once
// needed a barrier before and after, and at a few thousand keys those cost more than the mixing
// (OMP_WAIT_POLICY=passive). A thread's heads are mixed together, reading each input row once.
static void mix_heads(const float *src, const float *m, int H, int G, int T, int t, int lo, int hi, float *dst) {
    for (int h = lo; h < hi;) {
        const int g0 = h / G * G, he = hi < g0 + G ? hi : g0 + G;  // heads h..he-1 share a group
        headmix_row(src + (size_t)g0 * T, (size_t)T, m + (size_t)h * H + g0, H, he - h, G, t + 1, dst + (size_t)h * T,
                    (size_t)T);
        h = he;
    }
}

// How far cache_row goes: row t of Z only (pushed into its window), on through P (pushed into
// its window), or on to the output row.
enum { ROW_Z, ROW_P, ROW_OUT };

// Row pos of sequence b's maps, from the cache's K and V rows up to pos (already in place) and the
// query rows of the H heads (q, qs floats apart). Pushes the row of Z and, from ROW_P on, the row
// of P into their windows; ROW_OUT writes the output rows to out (H,d). The step and the prefill
// both come here, so a prefilled cache holds the very rows a cache stepped from empty would. The
// maps are those of the current document run alone (spec section 2.3): t = pos - s is the row
// within it and K, V start at its first position s, so no key or window row before s is read.
static void cache_row(mta_cache *c, int b, int pos, const float *q, size_t qs, const mta_params *p, int upto,
                      float *out) {
    const mta_config *cf = &c->cfg;
    const int H = cf->H, T = cf->T, d = cf->d, s = c->start[b], t = pos - s;
    const float scale = 1.0f / sqrtf((float)d);
    const size_t zr = window_slots(cf->pre_cq), pr = window_slots(cf->post_cq);
    float *z = c->row[0], *s1 = c->row[1], *pp = c->row[2], *p1 = c->row[3], *p2 = c->row[4];
    const float *mix_in = cf->pre_cq ? s1 : z, *a_in = cf->post_ch ? p2 : cf->post_cq ? p1 : pp;
    if (upto == ROW_OUT && cf->post_ch) mta_headconv_matrix(p->w_post_head, H, cf->post_ch, c->hmat);
    // One row of every map, head by head between the steps that mix heads.
    #pragma omp parallel
    {
        #pragma omp for schedule(static)
        for (int h = 0; h < H; h++) {  // steps 1-2
            const size_t bh = (size_t)b * H + h;
            const float *K = c->k + (mta_kv_slab(cf, bh) * T + s) * d;
            float *zh = z + (size_t)h * T;
            cblas_sgemv(CblasRowMajor, CblasNoTrans, t + 1, d, scale, K, d, q + h * qs, 1, 0.0f, zh, 1);  // z = K q / sqrt(d)
            if (cf->pre_cq) {
                float *zw = c->zwin + bh * zr * T;
                window_push(zw, cf->pre_cq, T, zh, t);
                if (upto >= ROW_P)
                    window_conv(zw, zh, p->w_pre + (size_t)h * cf->pre_cq * cf->pre_ck, cf->pre_cq, cf->pre_ck, T, t,
                                s1 + (size_t)h * T);
            }
        }
        // this thread's heads in the steps after a mixing (as a static schedule would give them)
        const int nt = omp_get_num_threads(), tid = omp_get_thread_num();
        const int lo = H * tid / nt, hi = H * (tid + 1) / nt;
        if (upto >= ROW_P) {
            if (cf->pre_head_mix) mix_heads(mix_in, p->w_pre_head, H, H, T, t, lo, hi, pp);  // step 3
            for (int h = lo; h < hi; h++) {  // steps 4-5
                float *r = pp + (size_t)h * T;
                if (!cf->pre_head_mix) memcpy(r, mix_in + (size_t)h * T, (size_t)(t + 1) * sizeof(float));
                softmax_row(r, t + 1, NULL, NULL);
                if (cf->post_cq) {  // step 5
                    float *pw = c->pwin + ((size_t)b * H + h) * pr * T;
                    window_push(pw, cf->post_cq, T, r, t);
                    if (upto == ROW_OUT)
                        window_conv(pw, r, p->w_post + (size_t)h * cf->post_cq * cf->post_ck, cf->post_cq, cf->post_ck,
                                    T, t, p1 + (size_t)h * T);
                }
            }
        }
        if (upto == ROW_OUT) {
            if (cf->post_ch) {  // step 6, once every head's P1 row is done
                #pragma omp barrier
                mix_heads(cf->post_cq ? p1 : pp, c->hmat, H, cf->post_ch, T, t, lo, hi, p2);
            }
            for (int h = lo; h < hi; h++) {  // steps 7-9
                const float *A = a_in + (size_t)h * T, *V = c->v + (mta_kv_slab(cf, (size_t)b * H + h) * T + s) * d;
                float *o = out + (size_t)h * d;
                cblas_sgemv(CblasRowMajor, CblasTrans, t + 1, d, 1.0f, V, d, A, 1, 0.0f, o, 1);  // o = V^T a
                mta_normgate_forward_rows(cf, p, o, o, 1);
            }
        }
    }
}

mta_status mta_cache_step(mta_cache *c, int b, const float *q, const float *k, const float *v, const mta_params *p,
                          float *out) {
    if (!c) return MTA_ERR_NULL;
    const mta_config *cf = &c->cfg;
    if (!q || !k || !v || !out || !p) return cache_fail(c, MTA_ERR_NULL, "q, k, v, p and out must be non-NULL");
    if (b < 0 || b >= cf->B) return cache_fail(c, MTA_ERR_INVALID, "sequence index outside the cache's batch");
    const int Hkv = mta_kv_heads(cf), T = cf->T, d = cf->d, t = c->len[b];
    if (t >= T) return cache_fail(c, MTA_ERR_INVALID, "the cache is full: a sequence reached the capacity cfg.T");
    for (int h = 0; h < Hkv; h++) {
        const size_t at = (((size_t)b * Hkv + h) * T + t) * d;
        memcpy(c->k + at, k + (size_t)h * d, (size_t)d * sizeof(float));
        memcpy(c->v + at, v + (size_t)h * d, (size_t)d * sizeof(float));
    }
    cache_row(c, b, t, q, (size_t)d, p, ROW_OUT, out);
    c->len[b] = t + 1;
    return MTA_OK;
}

// The windows of a sequence of L positions must hold Z rows L-(c_q-1)..L-1 and P rows
// L-(c_q'-1)..L-1, the rows the next step's convolutions read besides its own. P row r needs Z
// rows r-(c_q-1)..r (its pre-softmax convolution) and every head's row r (the mixing), so the
// rows from Z's first needed row on are recomputed from q and K: at most c_q + c_q' - 2 rows of
// O(L*(d + c_q*c_k + H)) work per head, against the O(L^2) of the forward that gave K and V.
// With documents only the last one's rows are kept, and rows before its start are never read.
mta_status mta_cache_prefill_documents(mta_cache *c, int Tf, const float *q, const float *k, const float *v,
                                       const mta_params *p, const int *lens, const int32_t *doc) {
    if (!c) return MTA_ERR_NULL;
    if (!q || !k || !v || !p || !lens) return cache_fail(c, MTA_ERR_NULL, "q, k, v, p and lens must be non-NULL");
    const mta_config *cf = &c->cfg;
    const int H = cf->H, Hkv = mta_kv_heads(cf), T = cf->T, d = cf->d;
    for (int b = 0; b < cf->B; b++)
        if (lens[b] < 1 || lens[b] > Tf || lens[b] > T)
            return cache_fail(c, MTA_ERR_INVALID, "prefill: a length is < 1 or longer than the tensors' T or the cache");
    for (int b = 0; b < cf->B; b++) {
        const int L = lens[b];
        for (int h = 0; h < Hkv; h++) {
            const size_t bh = (size_t)b * Hkv + h;
            memcpy(c->k + bh * T * d, k + bh * Tf * d, (size_t)L * d * sizeof(float));
            memcpy(c->v + bh * T * d, v + bh * Tf * d, (size_t)L * d * sizeof(float));
        }
        // the document of the last position, which the steps continue: back over the run of its id
        const int32_t *id = doc ? doc + (size_t)b * Tf : NULL;
        int s = id ? L - 1 : 0;
        while (s > 0 && id[s - 1] == id[s]) s--;
        c->start[b] = s;
        // first P row the windows keep (L: none), and the first Z row (rows before the document's
        // start are never read)
        const int rp = cf->post_cq > 1 ? L - (cf->post_cq - 1) : L;
        const int rz = cf->pre_cq > 1 ? rp - (cf->pre_cq - 1) : rp;
        for (int r = rz > s ? rz : s; r < L; r++)
            cache_row(c, b, r, q + ((size_t)b * H * Tf + r) * d, (size_t)Tf * d, p, r >= rp ? ROW_P : ROW_Z, NULL);
        c->len[b] = L;
    }
    return MTA_OK;
}

mta_status mta_cache_prefill(mta_cache *c, int Tf, const float *q, const float *k, const float *v, const mta_params *p,
                             const int *lens) {
    return mta_cache_prefill_documents(c, Tf, q, k, v, p, lens, NULL);
}
