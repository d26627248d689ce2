// conv.c: key-query convolution, head mixing and softmax, one map row (or a few) at a time.
// Index conventions and the math are in conv.h; shapes: kernels (cq,ck), mixing (H,H).
//
// The convolutions are the costly part of MTA (66 multiply-adds per map entry for a 6x11
// kernel), so they are written as register-tiled kernels: a tile of MT output rows by NVT
// vectors of columns accumulates every tap in vector registers, and each source vector loaded is
// used by every output row of the tile that reads it. Tiles cover the interior, where every tap reads a
// causal source entry; the ragged edges (the first p columns, the last columns before the
// diagonal, the rows near the map's borders) are copied into a small zero-padded scratch and
// run through the same tile kernel, so no column takes a scalar path.
#include "attn/conv.h"
#include "attn/vec.h"
#include "util/exp_approx.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int imin(int a, int b) { return a < b ? a : b; }

enum {
    MT = 4,          // output rows per tile
    NVT = CONV_NV,   // vectors of columns per tile (vec.h: 4 x 16 with AVX-512, 2 x 8 with AVX2)
    NV1 = 8,         // vectors of columns per one-row tile (edges, decoding)
    CQ_MAX = 8,      // kernel rows with a tile of their own (tile_cq)
    EW = 64,         // columns per edge chunk
    EDGE_MAX = 8192  // scratch floats for an edge chunk; larger kernels take a scalar edge path
};

// ---- the tile kernel ----------------------------------------------------------------------------

// A kernel read with strides: tap (a,c) is at w[a*sa + c*sc], so that the transposed
// convolution reads the forward kernel flipped in both directions without a copy. wp is the
// kernel packed for the tile: wp[(s*ck + c)*MT + m] = w(s-m, c) for source row s of a tile and
// output row m (zero where s-m is outside 0..cq-1), so the tile's inner loop has no branches.
typedef struct {
    const float *w;
    int cq, ck, sa, sc;
    const float *wp;
} kern;

static inline float ktap(const kern *k, int a, int c) { return k->w[a * k->sa + c * k->sc]; }

static size_t packed_floats(int cq, int ck) { return (size_t)(MT + cq - 1) * ck * MT; }

static void pack_kernel(const kern *k, float *wp) {
    for (int s = 0; s < MT + k->cq - 1; s++)
        for (int c = 0; c < k->ck; c++)
            for (int m = 0; m < MT; m++) {
                const int a = s - m;
                wp[((size_t)s * k->ck + c) * MT + m] = a >= 0 && a < k->cq ? ktap(k, a, c) : 0.0f;
            }
}

// out[m][x] = sum_{a<cq, c<ck} w(a,c) * src[(m+a)*ld + x + c]  for m < M <= ROWS, x < VL*NV.
// Source row s serves output rows m = s-a for every kernel row a, so each vector is loaded once
// per tap column and multiplied into ROWS accumulators (those with s-m outside the kernel by
// zero, in exchange for no branches: the general tile, for partial tiles, edges and tall kernels).
// Every tile sums an entry's terms in the same order (tap column c, then kernel row a), so a
// row's result does not depend on the tile that computes it. ROWS and NV are compile-time
// constants at every call.
static inline __attribute__((always_inline)) void tile_nv(const float *src, size_t ld, const kern *kw, int M,
                                                           float *out, size_t ldo, const int ROWS, const int NV) {
    const int cq = kw->cq, ck = kw->ck;
    vf acc[MT][NV1];
    for (int m = 0; m < ROWS; m++)
        for (int k = 0; k < NV; k++) acc[m][k] = (vf){0};
    for (int c = 0; c < ck; c++)
        for (int s = 0; s < M + cq - 1; s++) {
            const float *row = src + (size_t)s * ld, *wr = kw->wp + (size_t)s * ck * MT;
            vf x[NV1];
            for (int k = 0; k < NV; k++) x[k] = vload(row + c + k * VL);
            for (int m = 0; m < ROWS; m++) {
                const float wv = wr[c * MT + m];
                for (int k = 0; k < NV; k++) acc[m][k] += wv * x[k];
            }
        }
    for (int m = 0; m < M; m++)
        for (int k = 0; k < NV; k++) vstore(out + (size_t)m * ldo + k * VL, acc[m][k]);
}

// The same for a full tile of MT rows and a kernel of CQ rows (a compile-time constant): the
// loops over source and output rows unroll, so each source row meets only the output rows it
// reaches (MT*CQ products per tap column instead of MT*(MT+CQ-1)), and the CQ kernel entries of
// a tap column are broadcast once for the whole tile.
static inline __attribute__((always_inline)) void tile_cq(const float *src, size_t ld, const kern *kw, float *out,
                                                           size_t ldo, const int CQ, const int NV) {
    const int ck = kw->ck;
    vf acc[MT][NVT];
    for (int m = 0; m < MT; m++)
        for (int k = 0; k < NV; k++) acc[m][k] = (vf){0};
    for (int c = 0; c < ck; c++) {
        float wv[CQ_MAX];
        for (int a = 0; a < CQ; a++) wv[a] = ktap(kw, a, c);
#pragma GCC unroll 16
        for (int s = 0; s < MT + CQ - 1; s++) {
            vf x[NVT];
            for (int k = 0; k < NV; k++) {
                x[k] = vload(src + (size_t)s * ld + c + k * VL);
                keep_in_register(&x[k]);
            }
#pragma GCC unroll 8
            for (int m = imax(0, s - (CQ - 1)); m <= imin(MT - 1, s); m++)
                for (int k = 0; k < NV; k++) acc[m][k] += wv[s - m] * x[k];
        }
    }
    for (int m = 0; m < MT; m++)
        for (int k = 0; k < NV; k++) vstore(out + (size_t)m * ldo + k * VL, acc[m][k]);
}

// nv vectors of a full tile with a kernel of cq <= CQ_MAX rows.
static void tile_cq_cols(const float *src, size_t ld, const kern *kw, int nv, float *out, size_t ldo, const int CQ) {
    int v = 0;
    for (; v + NVT <= nv; v += NVT) tile_cq(src + v * VL, ld, kw, out + v * VL, ldo, CQ, NVT);
    for (; v < nv; v++) tile_cq(src + v * VL, ld, kw, out + v * VL, ldo, CQ, 1);
}

static void conv_tile(const float *src, size_t ld, const kern *kw, int M, int nv, float *out, size_t ldo) {
    if (M == MT && kw->cq <= CQ_MAX) {
        switch (kw->cq) {
        case 1: tile_cq_cols(src, ld, kw, nv, out, ldo, 1); return;
        case 2: tile_cq_cols(src, ld, kw, nv, out, ldo, 2); return;
        case 3: tile_cq_cols(src, ld, kw, nv, out, ldo, 3); return;
        case 4: tile_cq_cols(src, ld, kw, nv, out, ldo, 4); return;
        case 5: tile_cq_cols(src, ld, kw, nv, out, ldo, 5); return;
        case 6: tile_cq_cols(src, ld, kw, nv, out, ldo, 6); return;
        case 7: tile_cq_cols(src, ld, kw, nv, out, ldo, 7); return;
        default: tile_cq_cols(src, ld, kw, nv, out, ldo, 8); return;
        }
    }
    int v = 0;
    if (M == 1) {
        // Edges and decoding: one row, no products wasted on other tile rows. Each accumulator
        // is one chain of cq*ck dependent multiply-adds, so the tile takes NV1 vectors at once to
        // keep enough chains in flight (a 2-vector tile waits on the multiply-add latency).
        for (; v + NV1 <= nv; v += NV1) tile_nv(src + v * VL, ld, kw, 1, out + v * VL, ldo, 1, NV1);
        if (v + 4 <= nv) tile_nv(src + v * VL, ld, kw, 1, out + v * VL, ldo, 1, 4), v += 4;
        if (v + 2 <= nv) tile_nv(src + v * VL, ld, kw, 1, out + v * VL, ldo, 1, 2), v += 2;
        if (v < nv) tile_nv(src + v * VL, ld, kw, 1, out + v * VL, ldo, 1, 1);
        return;
    }
    for (; v + 2 <= nv; v += 2) tile_nv(src + v * VL, ld, kw, M, out + v * VL, ldo, MT, 2);
    if (v < nv) tile_nv(src + v * VL, ld, kw, M, out + v * VL, ldo, MT, 1);
}

// ---- both convolutions: interior tiles and padded edges ----------------------------------------

// The source map S of a convolution: rows rlo..rhi at src + (r - rlo)*ld, row r holding entries
// at columns 0..r; every other entry is zero (causality, and rows outside the map).
typedef struct {
    const float *src;
    size_t ld;
    int rlo, rhi;
} smap;

static inline float sval(const smap *s, int r, int x) {
    return r >= s->rlo && r <= s->rhi && x >= 0 && x <= r ? s->src[(size_t)(r - s->rlo) * s->ld + x] : 0.0f;
}

// The zero-padded scratch of an edge: buf[a*width + x] = S(r + a, x0 + x) for a < n. Each row
// is its causal span (one copy) between zeros.
static void pad_rows(const smap *s, int r, int x0, int n, int width, float *buf) {
    for (int a = 0; a < n; a++) {
        const int ra = r + a;
        float *b = buf + (size_t)a * width;
        // columns x0+lo .. x0+hi-1 exist: 0 <= x0+x <= ra, in a row of the map
        const int lo = imin(width, imax(0, -x0)), hi = ra >= s->rlo && ra <= s->rhi ? imax(lo, imin(width, ra + 1 - x0)) : lo;
        memset(b, 0, (size_t)lo * sizeof(float));
        if (hi > lo) memcpy(b + lo, s->src + (size_t)(ra - s->rlo) * s->ld + x0 + lo, (size_t)(hi - lo) * sizeof(float));
        memset(b + hi, 0, (size_t)(width - hi) * sizeof(float));
    }
}

// Columns [e0, e1] of output rows o..o+M-1, each row only up to its diagonal (row o+m's last
// column is min(e1, o+m)): out[m][j] = sum_{a,c} w(a,c) * S(o+m+sh+a, j+c-off). The source rows
// are copied into a zero-padded scratch chunk by chunk and go through the tile kernel with all M
// rows at once, so that each vector of an edge carries M independent sums (one row at a time,
// an edge of one or two vectors is one chain of cq*ck dependent multiply-adds, waiting on their
// latency, which at short T makes the edges cost as much as the interior). Kernels too large for
// the scratch take the direct sum.
static void conv_edge(const smap *s, int sh, const kern *kw, int off, int o, int M, int e0, int e1, float *out,
                      size_t ldo) {
    const int cq = kw->cq, ck = kw->ck, ns = M + cq - 1;
    if (e1 < e0) return;
    if (!kw->wp || (size_t)ns * (EW + ck - 1) > EDGE_MAX) {
        for (int m = 0; m < M; m++)
            for (int j = e0; j <= imin(e1, o + m); j++) {
                float acc = 0.0f;
                for (int a = 0; a < cq; a++)
                    for (int c = 0; c < ck; c++) acc += ktap(kw, a, c) * sval(s, o + m + sh + a, j + c - off);
                out[(size_t)m * ldo + j] = acc;
            }
        return;
    }
    float buf[EDGE_MAX], res[MT * EW];
    for (int x0 = e0; x0 <= e1; x0 += EW) {
        const int n = imin(EW, e1 - x0 + 1), nv = (n + VL - 1) / VL, width = nv * VL + ck - 1;
        pad_rows(s, o + sh, x0 - off, ns, width, buf);
        conv_tile(buf, (size_t)width, kw, M, nv, res, EW);
        for (int m = 0; m < M; m++) {
            const int last = imin(x0 + n - 1, o + m);
            if (last >= x0) memcpy(out + (size_t)m * ldo + x0, res + (size_t)m * EW, (size_t)(last - x0 + 1) * sizeof(float));
        }
    }
}

// Output rows o0..o1-1 (row o at out + (o-o0)*ldo, columns 0..o):
//   out[o][j] = sum_{a<cq, c<ck} w(a,c) * S(o+sh+a, j+c-off).
// A tile of rows o..o+M-1 is interior for columns [off, o+sh-(ck-1-off)] when all its source
// rows o+sh..o+M-1+sh+cq-1 exist: there every tap reads a causal entry of an existing row.
static void conv_rows(const smap *s, int sh, kern k, int off, int o0, int o1, float *out, size_t ldo) {
    const int cq = k.cq, ck = k.ck;
    // the packed kernel: on the stack for the usual sizes; without it (no memory for a huge
    // kernel) every column takes the direct sum
    enum { PACK_STACK = 4096 };
    float pack_stack[PACK_STACK];
    const size_t np = packed_floats(cq, ck);
    float *wp = np <= PACK_STACK ? pack_stack : malloc(np * sizeof(float));
    if (wp) pack_kernel(&k, wp);
    k.wp = wp;
    const kern *kw = &k;
    for (int o = o0; o < o1; o += MT) {
        const int M = imin(MT, o1 - o), rf = o + sh, rl = o + M - 1 + sh + cq - 1;
        int nv = 0;
        if (wp && rf >= s->rlo && rl <= s->rhi) {
            const int jmax = rf - (ck - 1 - off);
            if (jmax >= off) nv = (jmax - off + 1) / VL;
        }
        float *orow = out + (size_t)(o - o0) * ldo;
        if (nv > 0) {
            conv_tile(s->src + (size_t)(rf - s->rlo) * s->ld, s->ld, kw, M, nv, orow + off, ldo);
            conv_edge(s, sh, kw, off, o, M, 0, off - 1, orow, ldo);
            conv_edge(s, sh, kw, off, o, M, off + nv * VL, o + M - 1, orow, ldo);
        } else {
            conv_edge(s, sh, kw, off, o, M, 0, o + M - 1, orow, ldo);
        }
    }
    if (wp != pack_stack) free(wp);
}

// Forward: S = Z, source rows i-(cq-1)..i, the key window centred (off = p).
void qkconv_rows(const float *src, size_t ld, const float *w, int cq, int ck, int i0, int i1, float *out, size_t ldo) {
    const smap s = {src, ld, imax(0, i0 - (cq - 1)), i1 - 1};
    const kern kw = {w, cq, ck, ck, 1, NULL};
    conv_rows(&s, -(cq - 1), kw, (ck - 1) / 2, i0, i1, out, ldo);
}

// Transposed: din[r][jj] = sum_{a,c} w[a,c] * g[r+(cq-1)-a][jj+p-c]. With a' = cq-1-a and
// c' = ck-1-c this is a forward-shaped convolution of g rows r..r+cq-1 with the kernel flipped
// in both directions and the key offset ck-1-p (= p, ck being odd).
void qkconv_backward_input_rows(const float *g, size_t ld, int last, const float *w, int cq, int ck, int r0, int r1,
                                float *din, size_t ldd) {
    const smap s = {g, ld, r0, last};
    const kern flipped = {w + (size_t)cq * ck - 1, cq, ck, -ck, -1, NULL};
    conv_rows(&s, 0, flipped, ck - 1 - (ck - 1) / 2, r0, r1, din, ldd);
}

// ---- kernel gradient ------------------------------------------------------------------------------

// Kernel rows and columns per accumulator tile (6 x 4 with AVX-512, 6 x 2 with AVX2); vectors
// per block.
enum { AT = 6, CT = WG_ACC / AT, WVB = 32 };

// acc[(a0+a)*ck + c0+c] += g[x] * src[(a0+a)*ld + x + c] lane by lane, for a < NA, c < NC and
// the vectors v0..v1-1: each g vector is loaded once per NA x NC block of taps. NA and NC are
// compile-time constants at every call, NC <= 4 (wg_block_rows; only NC <= CT is reached).
static inline __attribute__((always_inline)) void wg_block(const float *g, const float *src, size_t ld, int v0, int v1,
                                                            int ck, int a0, int c0, vf *acc, const int NA,
                                                            const int NC) {
    vf t[AT][4];
    for (int a = 0; a < NA; a++)
        for (int c = 0; c < NC; c++) t[a][c] = (vf){0};
    for (int v = v0; v < v1; v++) {
        const vf gv = vload(g + v * VL);
        for (int a = 0; a < NA; a++) {
            const float *row = src + (size_t)(a0 + a) * ld + v * VL + c0;
            for (int c = 0; c < NC; c++) t[a][c] += gv * vload(row + c);
        }
    }
    for (int a = 0; a < NA; a++)
        for (int c = 0; c < NC; c++) acc[(a0 + a) * ck + c0 + c] += t[a][c];
}

static void wg_block_rows(const float *g, const float *src, size_t ld, int v0, int v1, int ck, int a0, int c0, vf *acc,
                          int nc, const int NA) {
    switch (nc) {
    case 4: wg_block(g, src, ld, v0, v1, ck, a0, c0, acc, NA, 4); break;
    case 3: wg_block(g, src, ld, v0, v1, ck, a0, c0, acc, NA, 3); break;
    case 2: wg_block(g, src, ld, v0, v1, ck, a0, c0, acc, NA, 2); break;
    default: wg_block(g, src, ld, v0, v1, ck, a0, c0, acc, NA, 1); break;
    }
}

// acc[a*ck+c] += g[x] * src[a*ld + x + c] lane by lane, for x < VL*nv: AT x CT blocks of taps
// (kernel rows beyond the last full AT one at a time); the source rows of a block of WVB
// vectors stay in L1 across the blocks.
static void wgrad_tile(const float *g, const float *src, size_t ld, int cq, int ck, int nv, vf *acc) {
    for (int v0 = 0; v0 < nv; v0 += WVB) {
        const int v1 = imin(nv, v0 + WVB);
        for (int c0 = 0; c0 < ck; c0 += CT) {
            const int nc = imin(CT, ck - c0);
            int a0 = 0;
            for (; a0 + AT <= cq; a0 += AT) wg_block_rows(g, src, ld, v0, v1, ck, a0, c0, acc, nc, AT);
            for (; a0 < cq; a0++) wg_block_rows(g, src, ld, v0, v1, ck, a0, c0, acc, nc, 1);
        }
    }
}

// The kernel gradient's terms of output columns [e0, e1] (g and the source rows r0..r0+cq-1
// copied into zero-padded scratches), added to acc.
static void wgrad_edge(const float *g, const smap *s, int r0, int cq, int ck, int e0, int e1, vf *acc) {
    const int p = (ck - 1) / 2;
    float buf[EDGE_MAX], gb[EW];
    for (int x0 = e0; x0 <= e1; x0 += EW) {
        const int n = imin(EW, e1 - x0 + 1), ev = (n + VL - 1) / VL, width = ev * VL + ck - 1;
        for (int x = 0; x < ev * VL; x++) gb[x] = x < n ? g[x0 + x] : 0.0f;
        pad_rows(s, r0, x0 - p, cq, width, buf);
        wgrad_tile(gb, buf, (size_t)width, cq, ck, ev, acc);
    }
}

// Output row i's terms of the kernel gradient, added to acc: interior vectors through the tile,
// the edges through the zero-padded scratch.
static void wgrad_row(const float *g, const smap *s, int cq, int ck, int i, vf *acc) {
    const int p = (ck - 1) / 2, r0 = i - (cq - 1);
    int nv = 0;
    if (r0 >= 0 && r0 - p >= p) nv = (r0 - 2 * p + 1) / VL;
    if (nv > 0) {
        wgrad_tile(g + p, s->src + (size_t)(r0 - s->rlo) * s->ld, s->ld, cq, ck, nv, acc);
        wgrad_edge(g, s, r0, cq, ck, 0, imin(p - 1, i), acc);
        wgrad_edge(g, s, r0, cq, ck, p + nv * VL, i, acc);
    } else {
        wgrad_edge(g, s, r0, cq, ck, 0, i, acc);
    }
}

// The kernel gradient of MT output rows at once (kernel of CQ rows, a compile-time constant):
// acc[a*ck + c] += sum_{m<MT} g[m][x] * src[(m+a)*ld + x + c] over x < VL*nv, tap columns in
// blocks of NC. Source row s of the tile serves output rows m = s-a, so each shifted source
// vector is loaded once for all the output rows that read it (MT*CQ products for MT+CQ-1 loads
// per tap column, where one row at a time needs a load per product). The last column block may
// run past ck: those sums are dropped (the caller's interior leaves room for the columns they
// read).
static inline __attribute__((always_inline)) void wg_rows(const float *g, size_t ldg, const float *src, size_t ld,
                                                           int nv, int ck, vf *acc, const int CQ, const int NC) {
    for (int c0 = 0; c0 < ck; c0 += NC) {
        vf t[CQ_MAX][4];
        for (int a = 0; a < CQ; a++)
            for (int c = 0; c < NC; c++) t[a][c] = (vf){0};
        for (int v = 0; v < nv; v++) {
            vf gv[MT];
            for (int m = 0; m < MT; m++) gv[m] = vload(g + (size_t)m * ldg + v * VL);
#pragma GCC unroll 16
            for (int s = 0; s < MT + CQ - 1; s++)
                for (int c = 0; c < NC; c++) {
                    vf x = vload(src + (size_t)s * ld + v * VL + c0 + c);
                    keep_in_register(&x);
#pragma GCC unroll 8
                    for (int m = imax(0, s - (CQ - 1)); m <= imin(MT - 1, s); m++) t[s - m][c] += gv[m] * x;
                }
        }
        for (int a = 0; a < CQ; a++)
            for (int c = 0; c < NC && c0 + c < ck; c++) acc[a * ck + c0 + c] += t[a][c];
    }
}

// Tap columns per block of wg_rows, up to 4: CQ x NC accumulators stay within WG_ACC registers.
// A constant argument folds to a constant, so each instance below still has a compile-time NC.
static int wg_cols(int cq) { return imax(1, imin(4, WG_ACC / cq)); }

static void wg_rows_any(const float *g, size_t ldg, const float *src, size_t ld, int nv, int ck, vf *acc, int cq) {
    switch (cq) {
    case 1: wg_rows(g, ldg, src, ld, nv, ck, acc, 1, wg_cols(1)); break;
    case 2: wg_rows(g, ldg, src, ld, nv, ck, acc, 2, wg_cols(2)); break;
    case 3: wg_rows(g, ldg, src, ld, nv, ck, acc, 3, wg_cols(3)); break;
    case 4: wg_rows(g, ldg, src, ld, nv, ck, acc, 4, wg_cols(4)); break;
    case 5: wg_rows(g, ldg, src, ld, nv, ck, acc, 5, wg_cols(5)); break;
    case 6: wg_rows(g, ldg, src, ld, nv, ck, acc, 6, wg_cols(6)); break;
    case 7: wg_rows(g, ldg, src, ld, nv, ck, acc, 7, wg_cols(7)); break;
    default: wg_rows(g, ldg, src, ld, nv, ck, acc, 8, wg_cols(8)); break;
    }
}

// The kernel gradient's terms of output columns [e0, e1] of the MT rows i..i+MT-1 (row i+m up
// to its diagonal), added to acc: g's rows and the source rows copied into zero-padded scratches
// and run through wg_rows, all MT rows at once (one row at a time, an edge of a vector or two
// spent more on loading and storing its accumulators than on its products). The caller checks
// that MT + cq - 1 rows of EW + ckp - 1 columns fit the scratch.
static void wgrad_edge_rows(const float *g, size_t ldg, const smap *s, int i, int cq, int ck, int e0, int e1, vf *acc) {
    const int p = (ck - 1) / 2, nc = wg_cols(cq), ckp = (ck + nc - 1) / nc * nc;
    float buf[EDGE_MAX], gb[MT * EW];
    for (int x0 = e0; x0 <= e1; x0 += EW) {
        const int n = imin(EW, e1 - x0 + 1), ev = (n + VL - 1) / VL, width = ev * VL + ckp - 1;
        for (int m = 0; m < MT; m++)
            for (int x = 0; x < ev * VL; x++)
                gb[m * EW + x] = x < n && x0 + x <= i + m ? g[(size_t)m * ldg + x0 + x] : 0.0f;
        pad_rows(s, i - (cq - 1), x0 - p, MT + cq - 1, width, buf);
        wg_rows_any(gb, EW, buf, (size_t)width, ev, ck, acc, cq);
    }
}

// dw[a,c] = sum_{i0<=i<i1} sum_{j<=i} g_i[j] * S(i-(cq-1)+a, j-p+c). Tiles of MT rows whose
// source rows all exist take their common interior (the first row's) in wg_rows, and each row
// its own remaining columns; other rows go one at a time.
void qkconv_backward_weight_rows(const float *g, size_t ldg, const float *src, size_t ld, int cq, int ck, int i0, int i1,
                                 float *dw) {
    const int p = (ck - 1) / 2, K = cq * ck;
    const smap s = {src, ld, imax(0, i0 - (cq - 1)), i1 - 1};
    if (K > 1024 || (size_t)cq * (EW + ck - 1) > EDGE_MAX) {  // very large kernels: the direct sum
        for (int e = 0; e < K; e++) {
            const int a = e / ck, c = e % ck;
            double acc = 0.0;
            for (int i = i0; i < i1; i++)
                for (int j = 0; j <= i; j++) acc += g[(size_t)(i - i0) * ldg + j] * sval(&s, i - (cq - 1) + a, j - p + c);
            dw[e] = (float)acc;
        }
        return;
    }
    vf acc[1024];
    for (int e = 0; e < K; e++) acc[e] = (vf){0};
    const int nc = wg_cols(cq), ckp = (ck + nc - 1) / nc * nc;  // columns wg_rows reads
    const int tiles = cq <= CQ_MAX && (size_t)(MT + cq - 1) * (EW + ckp - 1) <= EDGE_MAX;
    int i = i0;
    for (; i + MT <= i1 && tiles; i += MT) {
        const int r0 = i - (cq - 1);
        // interior of the tile's first row, for kernel columns up to ckp - 1
        const int nv = r0 >= s.rlo && r0 - (ckp - 1 - p) >= p ? (r0 - (ckp - 1 - p) - p + 1) / VL : 0;
        const float *gi = g + (size_t)(i - i0) * ldg;
        if (nv > 0) {
            wg_rows_any(gi + p, ldg, src + (size_t)(r0 - s.rlo) * ld, ld, nv, ck, acc, cq);
            wgrad_edge_rows(gi, ldg, &s, i, cq, ck, 0, p - 1, acc);  // the columns left and right of it
            wgrad_edge_rows(gi, ldg, &s, i, cq, ck, p + nv * VL, i + MT - 1, acc);
        } else {
            wgrad_edge_rows(gi, ldg, &s, i, cq, ck, 0, i + MT - 1, acc);
        }
    }
    for (; i < i1; i++) wgrad_row(g + (size_t)(i - i0) * ldg, &s, cq, ck, i, acc);
    for (int e = 0; e < K; e++) {
        float t = 0.0f;
        for (int l = 0; l < VL; l++) t += acc[e][l];
        dw[e] = t;
    }
}

// ---- head mixing ---------------------------------------------------------------------------------

enum { HT = 8, HMAX = 64 };  // most output heads per mixing tile; heads whose row tails fit the scratch

// out[o][x] = sum_{i<ni} w[o*so + i*si] * in[i*ins + x]  for o < NO, x < VL*NV: each input
// vector is loaded once and multiplied into NO output heads.
static inline __attribute__((always_inline)) void mix_tile(const float *in, size_t ins, const float *w, int so, int si,
                                                            int ni, float *out, size_t outs, const int NO,
                                                            const int NV) {
    vf acc[HT][2];
    for (int o = 0; o < NO; o++)
        for (int k = 0; k < NV; k++) acc[o][k] = (vf){0};
    for (int i = 0; i < ni; i++) {
        vf x[2];
        for (int k = 0; k < NV; k++) x[k] = vload(in + (size_t)i * ins + k * VL);
        for (int o = 0; o < NO; o++) {
            const float wv = w[o * so + i * si];
            for (int k = 0; k < NV; k++) acc[o][k] += wv * x[k];
        }
    }
    for (int o = 0; o < NO; o++)
        for (int k = 0; k < NV; k++) vstore(out + (size_t)o * outs + k * VL, acc[o][k]);
}

// VL*NV columns of the first nout output heads of one group of G inputs (inputs and weights
// already offset to the group). Tiles of 8 output heads by MIX_NV vectors (vec.h), else 4 by NV,
// else one: the 8-head tile reads each input vector once for 8 outputs (the 8 heads of lm10m's
// and the 830M layer's mixing in one pass), where two 4-head tiles read it twice. With AVX-512,
// two vectors per tile take each weight's broadcast for two multiply-adds instead of one.
static inline __attribute__((always_inline)) void mix_cols(const float *in, size_t ins, const float *w, int so, int si,
                                                            int G, int nout, float *out, size_t outs, const int NV) {
    int o = 0;
    for (; o + HT <= nout; o += HT)
        for (int k = 0; k < NV; k += MIX_NV)
            mix_tile(in + k * VL, ins, w + o * so, so, si, G, out + (size_t)o * outs + k * VL, outs, HT,
                     NV < MIX_NV ? NV : MIX_NV);
    for (; o + 4 <= nout; o += 4) mix_tile(in, ins, w + o * so, so, si, G, out + (size_t)o * outs, outs, 4, NV);
    for (; o < nout; o++) mix_tile(in, ins, w + o * so, so, si, G, out + (size_t)o * outs, outs, 1, NV);
}

// out[h] = sum_{i in group(h)} w[h*so + i*si] * in[i] over columns 0..n-1 for output heads
// h < nh, heads in groups of G (the last group may have fewer than G outputs; it still reads G
// inputs). The last n % VL columns go through a zero-padded scratch.
static void mix_rows(const float *in, size_t ins, const float *w, int so, int si, int nh, int G, int n, float *out,
                     size_t outs) {
    for (int g0 = 0; g0 < nh; g0 += G) {
        const float *gin = in + (size_t)g0 * ins, *gw = w + g0 * so + g0 * si;
        float *gout = out + (size_t)g0 * outs;
        const int nout = imin(G, nh - g0);
        int x = 0;
        for (; x + 2 * VL <= n; x += 2 * VL) mix_cols(gin + x, ins, gw, so, si, G, nout, gout + x, outs, 2);
        for (; x + VL <= n; x += VL) mix_cols(gin + x, ins, gw, so, si, G, nout, gout + x, outs, 1);
        if (x == n) continue;
        if (G <= HMAX) {
            float bin[HMAX * VL], bout[HMAX * VL];
            for (int i = 0; i < G; i++)
                for (int l = 0; l < VL; l++) bin[i * VL + l] = x + l < n ? gin[(size_t)i * ins + x + l] : 0.0f;
            mix_cols(bin, VL, gw, so, si, G, nout, bout, VL, 1);
            for (int o = 0; o < nout; o++)
                memcpy(gout + (size_t)o * outs + x, bout + o * VL, (size_t)(n - x) * sizeof(float));
        } else {
            for (int o = 0; o < nout; o++)
                for (int j = x; j < n; j++) {
                    float acc = 0.0f;
                    for (int i = 0; i < G; i++) acc += gw[o * so + i * si] * gin[(size_t)i * ins + j];
                    gout[(size_t)o * outs + j] = acc;
                }
        }
    }
}

void headmix_row(const float *in, size_t ins, const float *m, int ldm, int nh, int G, int n, float *out,
                 size_t outs) {
    mix_rows(in, ins, m, ldm, 1, nh, G, n, out, outs);
}

// The kernel gradient of a row's mixing, dm[h][i] = sum_j a[h][j] * b[i][j], is kept as VL lane
// partials per entry (summed over a strip's rows in vectors, then across lanes once, by
// headmix_grad_sum): summing each entry's lanes per row had cost more than the products
// themselves at a few hundred columns. A tile is DM_NA x DM_NB entries (vec.h), all in registers.
int headmix_grad_lanes(void) { return VL; }

// acc[h][i] += a[h][x..] * b[i][x..] for the vector at column x, `lanes` of it when PART.
static inline __attribute__((always_inline)) void dot_step(const float *a, size_t as, const float *b, size_t bs, int x,
                                                            int lanes, vf acc[DM_NA][DM_NB], const int NA, const int NB,
                                                            const int PART) {
    vf bv[DM_NB];
    for (int i = 0; i < NB; i++) bv[i] = PART ? vload_part(b + (size_t)i * bs + x, lanes) : vload(b + (size_t)i * bs + x);
    for (int h = 0; h < NA; h++) {
        const vf av = PART ? vload_part(a + (size_t)h * as + x, lanes) : vload(a + (size_t)h * as + x);
        for (int i = 0; i < NB; i++) acc[h][i] += av * bv[i];
    }
}

// The lane partials of dm[h][i] for a tile of NA x NB heads over columns 0..n-1, stored at
// dm + (h*ldm + i)*VL.
static inline __attribute__((always_inline)) void dot_tile(const float *a, size_t as, const float *b, size_t bs, int n,
                                                            float *dm, int ldm, const int NA, const int NB) {
    vf acc[DM_NA][DM_NB];
    for (int h = 0; h < NA; h++)
        for (int i = 0; i < NB; i++) acc[h][i] = (vf){0};
    const int nv = n / VL * VL;
    for (int x = 0; x < nv; x += VL) dot_step(a, as, b, bs, x, VL, acc, NA, NB, 0);
    if (nv < n) dot_step(a, as, b, bs, nv, n - nv, acc, NA, NB, 1);  // zeros past n in both
    for (int h = 0; h < NA; h++)
        for (int i = 0; i < NB; i++) vstore(dm + ((size_t)h * ldm + i) * VL, acc[h][i]);
}

void headmix_backward_row(const float *dout, size_t douts, const float *in, size_t ins, const float *m, int ldm,
                          int nh, int G, int n, float *din, size_t dins, float *dm_row) {
    // dm_row within each group first (whole tiles, then the heads left over one pair at a time),
    // so that din may overwrite in
    for (int g0 = 0; dm_row && g0 < nh; g0 += G) {
        const int ha = g0 + G / DM_NA * DM_NA, ib = g0 + G / DM_NB * DM_NB;
        for (int h = g0; h < ha; h += DM_NA)
            for (int i = g0; i < ib; i += DM_NB)
                dot_tile(dout + (size_t)h * douts, douts, in + (size_t)i * ins, ins, n,
                         dm_row + ((size_t)h * ldm + i) * VL, ldm, DM_NA, DM_NB);
        for (int h = g0; h < g0 + G; h++)
            for (int i = g0; i < g0 + G; i++)
                if (h >= ha || i >= ib)
                    dot_tile(dout + (size_t)h * douts, douts, in + (size_t)i * ins, ins, n,
                             dm_row + ((size_t)h * ldm + i) * VL, ldm, 1, 1);
    }
    mix_rows(dout, douts, m, 1, ldm, nh, G, n, din, dins);  // the transposed mixing
}

float headmix_grad_sum(const float *dm, size_t rs, int nrows) {
    vf s = (vf){0};
    for (int r = 0; r < nrows; r++) s += vload(dm + (size_t)r * rs);
    float t = 0.0f;
    for (int l = 0; l < VL; l++) t += s[l];
    return t;
}

void softmax_row(float *x, int n, float *mx_out, float *inv_out) {
    float mx = x[0];
    // in vectors: as a scalar loop every step waits for the previous one's max
#pragma omp simd reduction(max : mx)
    for (int j = 1; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; j++) {
        x[j] = exp_approx(x[j] - mx);
        sum += x[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; j++) x[j] *= inv;
    if (mx_out) *mx_out = mx;
    if (inv_out) *inv_out = inv;
}

void softmax_row_recompute(float *x, int n, float mx, float inv) {
#pragma omp simd
    for (int j = 0; j < n; j++) x[j] = exp_approx(x[j] - mx) * inv;
}

void softmax_backward_row(const float *p, float *g, int n) {
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < n; j++) dot += p[j] * g[j];
    for (int j = 0; j < n; j++) g[j] = p[j] * (g[j] - dot);
}
