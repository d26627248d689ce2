// matmul.c: strip-by-tensor matrix products (see matmul.h), register-tiled.
//
// nn (C = A B, A a strip) and tn (C += A^T B) are one product, C[i] = sum_s A(i,s) B[s], with A
// read through strides: A(i,s) = a[i*ai + s*as] (nn: ai = lda, as = 1; tn: ai = 1, as = lda).
// It runs along the d columns of B in vectors: a tile is NI rows of C by NV vectors of d, up to
// MM_NI x MM_NV accumulators (vec.h: 6 x 4 with AVX-512, 6 x 2 with AVX2); each step s loads NV
// vectors of B, broadcasts NI entries of A and does NI * NV multiply-adds. When VL does not divide
// d (d = 40 with AVX-512), the last vector of the last tile is a partial one, moved with masks:
// a scalar loop over those columns had cost lm10m's attention (d = 40) most of its time. nt is
// below.
#include "attn/matmul.h"
#include "attn/vec.h"

#include <stdlib.h>

enum {
    KB = 128,       // steps per block: the block of B stays in L1 for the other row tiles
    PF_STEPS = 24,  // how far ahead the first row tile prefetches B
    LINE = 16       // floats per cache line: one prefetch each, whatever the vector width
};

// Vector k of NV at p, whose last holds only `last` lanes when PART.
static inline __attribute__((always_inline)) vf tile_load(const float *p, int k, const int NV, const int PART, int last) {
    return PART && k == NV - 1 ? vload_part(p + k * VL, last) : vload(p + k * VL);
}

static inline __attribute__((always_inline)) void tile_store(float *p, int k, vf v, const int NV, const int PART,
                                                              int last) {
    if (PART && k == NV - 1) vstore_part(p + k * VL, v, last);
    else vstore(p + k * VL, v);
}

// acc[i][k] = sum_{s<ns} A(i,s) * B[s][k-th vector], stored as alpha*acc + beta*C (C not read
// when beta == 0). NI, NV and PART (the last vector has only `last` lanes) are compile-time
// constants at every call.
static inline __attribute__((always_inline)) void ab_tile(const float *a, size_t ai, size_t as, const float *b,
                                                           size_t ldb, int ns, float alpha, float beta, float *c,
                                                           size_t ldc, int pf, int last, const int NI, const int NV,
                                                           const int PART) {
    vf acc[MM_NI][MM_NV];
    for (int i = 0; i < NI; i++)
        for (int k = 0; k < NV; k++) acc[i][k] = (vf){0};
    for (int st = 0; st < ns; st++) {
        if (pf && st + PF_STEPS < ns)  // the first row tile brings the block of B from memory
            for (int x = 0; x < NV * VL; x += LINE) __builtin_prefetch(b + (size_t)(st + PF_STEPS) * ldb + x);
        vf bv[MM_NV];
        for (int k = 0; k < NV; k++) bv[k] = tile_load(b + (size_t)st * ldb, k, NV, PART, last);
        for (int i = 0; i < NI; i++) {
            const float av = a[i * ai + st * as];
            for (int k = 0; k < NV; k++) acc[i][k] += av * bv[k];
        }
    }
    for (int i = 0; i < NI; i++)
        for (int k = 0; k < NV; k++) {
            float *ci = c + (size_t)i * ldc;
            const vf r = beta == 0.0f ? alpha * acc[i][k] : alpha * acc[i][k] + beta * tile_load(ci, k, NV, PART, last);
            tile_store(ci, k, r, NV, PART, last);
        }
}

static inline int imin(int a, int b) { return a < b ? a : b; }

// The tile sizes at run time: NI in 6, 4, 2, 1 and NV in MM_NV, 2, 1, each a compile-time
// constant in its instance.
static int tile_rows(int left) { return left >= 6 ? 6 : left >= 4 ? 4 : left >= 2 ? 2 : 1; }
static int tile_vecs(int left) { return left >= MM_NV ? MM_NV : left >= 2 ? 2 : 1; }

static inline __attribute__((always_inline)) void ab_tile_nv(const float *a, size_t ai, size_t as, const float *b,
                                                              size_t ldb, int ns, float alpha, float beta, float *c,
                                                              size_t ldc, int pf, int last, int ni, const int NV,
                                                              const int PART) {
    switch (ni) {
    case 6: ab_tile(a, ai, as, b, ldb, ns, alpha, beta, c, ldc, pf, last, 6, NV, PART); break;
    case 4: ab_tile(a, ai, as, b, ldb, ns, alpha, beta, c, ldc, pf, last, 4, NV, PART); break;
    case 2: ab_tile(a, ai, as, b, ldb, ns, alpha, beta, c, ldc, pf, last, 2, NV, PART); break;
    default: ab_tile(a, ai, as, b, ldb, ns, alpha, beta, c, ldc, pf, last, 1, NV, PART); break;
    }
}

static inline __attribute__((always_inline)) void ab_tile_part(const float *a, size_t ai, size_t as, const float *b,
                                                                size_t ldb, int ns, float alpha, float beta, float *c,
                                                                size_t ldc, int pf, int ni, int nv, int last,
                                                                const int PART) {
    if (nv == MM_NV) ab_tile_nv(a, ai, as, b, ldb, ns, alpha, beta, c, ldc, pf, last, ni, MM_NV, PART);
    else if (nv == 2) ab_tile_nv(a, ai, as, b, ldb, ns, alpha, beta, c, ldc, pf, last, ni, 2, PART);
    else ab_tile_nv(a, ai, as, b, ldb, ns, alpha, beta, c, ldc, pf, last, ni, 1, PART);
}

// A tile of ni rows by nv vectors, the last of which holds `last` lanes (VL: a whole one).
static void ab_tile_any(const float *a, size_t ai, size_t as, const float *b, size_t ldb, int ns, float alpha, float beta,
                        float *c, size_t ldc, int pf, int ni, int nv, int last) {
    if (last < VL) ab_tile_part(a, ai, as, b, ldb, ns, alpha, beta, c, ldc, pf, ni, nv, last, 1);
    else ab_tile_part(a, ai, as, b, ldb, ns, alpha, beta, c, ldc, pf, ni, nv, VL, 0);
}

// The lanes of the last vector of a tile starting at vector k of nv, in a row of dv vectors
// whose last holds dl lanes.
static int tile_last(int k, int nv, int dv, int dl) { return k + nv == dv ? dl : VL; }

// C (nr, d) = alpha * sum_s A(i,s) B[s] + beta * C, d in dv vectors (the last with dl lanes), for
// ns <= KB steps (tn: the strip's rows; nn: a row's first keys): B is small and stays in L1
// whatever the order, so each row tile runs every vector of d before the next, and its A (ni rows
// of ns steps, for tn a column block of the strip) comes from memory once. Going over the row
// tiles once per pair of vectors instead read the strip d/16 times.
static void ab_one_block(int nr, int dv, int dl, int ns, float alpha, const float *a, size_t ai, size_t as,
                         const float *b, size_t ldb, float beta, float *c, size_t ldc) {
    for (int i = 0; i < nr;) {
        const int ni = tile_rows(nr - i);
        if (beta != 0.0f)  // the next tile's C, which its store reads, on its way from memory
            for (int r = i + ni; r < imin(i + 2 * ni, nr); r++)
                for (int x = 0; x < dv * VL; x += LINE) __builtin_prefetch(c + (size_t)r * ldc + x, 1);
        for (int k = 0; k < dv;) {
            const int nv = tile_vecs(dv - k);
            ab_tile_any(a + i * ai, ai, as, b + k * VL, ldb, ns, alpha, beta, c + (size_t)i * ldc + k * VL, ldc, 0, ni, nv,
                        tile_last(k, nv, dv, dl));
            k += nv;
        }
        i += ni;
    }
}

// C (nr, d) = alpha * sum_s A(i,s) B[s] + beta * C over ns steps, in blocks of KB steps.
static void ab_product(int nr, int d, int ns, float alpha, const float *a, size_t ai, size_t as, const float *b,
                       size_t ldb, float beta, float *c, size_t ldc) {
    const int dv = (d + VL - 1) / VL, dl = d - (dv - 1) * VL;
    if (ns <= KB) {
        ab_one_block(nr, dv, dl, ns, alpha, a, ai, as, b, ldb, beta, c, ldc);
        return;
    }
    for (int s0 = 0; s0 < ns; s0 += KB) {
        const int nb = ns - s0 < KB ? ns - s0 : KB;
        const float bb = s0 == 0 ? beta : 1.0f;
        for (int k = 0; k < dv;) {  // a block of nb x MM_NV vectors of B serves every row tile from L1
            const int nv = tile_vecs(dv - k);
            for (int i = 0; i < nr;) {
                const int ni = tile_rows(nr - i);
                if (bb != 0.0f)  // the next tile's C, which its store reads, on its way from memory
                    for (int r = i + ni; r < imin(i + 2 * ni, nr); r++)
                        for (int x = 0; x < nv * VL; x += LINE) __builtin_prefetch(c + (size_t)r * ldc + k * VL + x, 1);
                ab_tile_any(a + i * ai + s0 * as, ai, as, b + (size_t)s0 * ldb + k * VL, ldb, nb, alpha, bb,
                            c + (size_t)i * ldc + k * VL, ldc, i == 0, ni, nv, tile_last(k, nv, dv, dl));
                i += ni;
            }
            k += nv;
        }
    }
}

void strip_matmul_nn(int n, int d, int m, float alpha, const float *a, size_t lda, const float *b, size_t ldb, float beta,
                     float *c, size_t ldc) {
    ab_product(n, d, m, alpha, a, lda, 1, b, ldb, beta, c, ldc);
}

void strip_matmul_tn(int m, int d, int n, float alpha, const float *a, size_t lda, const float *b, size_t ldb, float *c,
                     size_t ldc) {
    ab_product(m, d, n, alpha, a, 1, lda, b, ldb, 1.0f, c, ldc);
}

// ---- nt: the scores of a strip ----------------------------------------------------------------
//
// C[i][j] = sum_t A[i][t] B[j][t] runs along t in both operands, while the map strip C wants its
// rows in vectors along keys. Transposing B (a whole (m, d) tensor) per strip is what makes
// OpenBLAS slow here; instead the strip's VL rows of A are transposed once (d x VL, small), a
// tile holds VL keys x VL rows as VL vectors of rows (each step t: one vector of A^T, VL
// broadcasts of B[j][t]), and the finished VL x VL tile is transposed in registers on its way
// out: VL * log2(VL) two-source shuffles per VL * d multiply-adds (64 for VL = 16, 24 for 8).

typedef int vi __attribute__((vector_size(sizeof(vf))));

// Elements idx[c] of a and b side by side (0..VL-1 from a, VL..2VL-1 from b): GCC's two-source
// shuffle. Clang (the fuzz build, docs/fuzzing.md) has only a constant-index form, so there the
// elements are picked one by one; speed does not matter under its sanitizers.
static inline __attribute__((always_inline)) vf shuffle2(vf a, vf b, vi idx) {
#ifdef __clang__
    vf r;
    for (int c = 0; c < VL; c++) r[c] = idx[c] < VL ? a[idx[c]] : b[idx[c] - VL];
    return r;
#else
    return __builtin_shuffle(a, b, idx);
#endif
}

// One butterfly stage of a VL x VL transpose held as VL row vectors: rows r and r+k
// (r & k == 0) swap their off-diagonal k x k blocks. K is a compile-time constant at every call.
static inline __attribute__((always_inline)) void butterfly(vf m[VL], const int K) {
    vi lo, hi;
    for (int c = 0; c < VL; c++) {
        lo[c] = c & K ? VL + c - K : c;
        hi[c] = c & K ? VL + c : c + K;
    }
#pragma GCC unroll 16
    for (int r = 0; r < VL; r++)
        if (!(r & K)) {
            const vf a = m[r], b = m[r + K];
            m[r] = shuffle2(a, b, lo);
            m[r + K] = shuffle2(a, b, hi);
        }
}

// m = m^T: log2(VL) butterfly stages, VL being 16 or 8 (vec.h). Each K is written out: in a
// loop GCC built the shuffles' index vectors at run time (blends and broadcasts in the tile).
static inline __attribute__((always_inline)) void transpose(vf m[VL]) {
    if (VL == 16) butterfly(m, 8);
    butterfly(m, 4);
    butterfly(m, 2);
    butterfly(m, 1);
}

// Columns [j0, j0+VL) of rows i < ni of C from at = A^T (d x VL, zero past row ni). With the
// row stride of B a compile-time constant, the VL rows of B are one pointer plus constant
// offsets; with a run-time stride they are VL pointers, which do not fit in registers.
static inline __attribute__((always_inline)) void nt_tile(const float *at, int d, const float *b, size_t ldb,
                                                           const float *bn, float alpha, int ni, float *c, size_t ldc) {
    vf acc[VL];
    for (int j = 0; j < VL; j++) acc[j] = (vf){0};
    for (int t = 0; t < d; t++) {
        if (bn && t % LINE == 0)  // the next tile's rows of B, one cache line each per LINE steps
            for (int j = 0; j < VL; j++) __builtin_prefetch(bn + (size_t)j * ldb + t);
        const vf av = vload(at + (size_t)t * VL);
        for (int j = 0; j < VL; j++) acc[j] += b[(size_t)j * ldb + t] * av;
    }
    transpose(acc);
    for (int i = 0; i < ni; i++) vstore(c + (size_t)i * ldc, alpha * acc[i]);
}

// Tiles j0 = 0, VL, ... up to the last whole one; the usual head sizes get a constant stride.
static void nt_tiles(const float *at, int d, const float *b, size_t ldb, float alpha, int ni, int nt, float *c,
                     size_t ldc) {
    for (int j = 0; j < nt * VL; j += VL) {
        const float *bj = b + (size_t)j * ldb, *bn = j + VL < nt * VL ? bj + (size_t)VL * ldb : NULL;
        if (ldb == 64 && d == 64) nt_tile(at, 64, bj, 64, bn, alpha, ni, c + j, ldc);
        else if (ldb == 128 && d == 128) nt_tile(at, 128, bj, 128, bn, alpha, ni, c + j, ldc);
        else nt_tile(at, d, bj, ldb, bn, alpha, ni, c + j, ldc);
    }
}

void strip_matmul_nt(int n, int m, int d, float alpha, const float *a, size_t lda, const float *b, size_t ldb, float *c,
                     size_t ldc) {
    enum { AT_STACK = VL * 256 };
    float at_stack[AT_STACK];
    float *at = (size_t)d * VL <= AT_STACK ? at_stack : malloc((size_t)d * VL * sizeof(float));
    if (!at) {  // no memory for A^T of a very wide head: the direct sums
        for (int i = 0; i < n; i++)
            for (int j = 0; j < m; j++) {
                float acc = 0.0f;
                for (int t = 0; t < d; t++) acc += a[(size_t)i * lda + t] * b[(size_t)j * ldb + t];
                c[(size_t)i * ldc + j] = alpha * acc;
            }
        return;
    }
    for (int i0 = 0; i0 < n; i0 += VL) {
        const int ni = n - i0 < VL ? n - i0 : VL;
        for (int t = 0; t < d; t++)
            for (int l = 0; l < VL; l++) at[(size_t)t * VL + l] = l < ni ? a[(size_t)(i0 + l) * lda + t] : 0.0f;
        float *ci = c + (size_t)i0 * ldc;
        nt_tiles(at, d, b, ldb, alpha, ni, m / VL, ci, ldc);
        for (int j = m / VL * VL; j < m; j++) {  // the last keys one at a time
            vf acc = (vf){0};
            for (int t = 0; t < d; t++) acc += b[(size_t)j * ldb + t] * vload(at + (size_t)t * VL);
            for (int l = 0; l < ni; l++) ci[(size_t)l * ldc + j] = alpha * acc[l];
        }
    }
    if (at != at_stack) free(at);
}
