// matmul.c: strip-by-tensor matrix products (see matmul.h), register-tiled.
//
// Both products run along the d columns of the tensor in vectors: a tile is NI rows (nn: strip
// rows; tn: keys) by NV vectors of d, up to 6 x 4 = 24 accumulators. For every step of the sum
// (nn: a key j; tn: a strip row r) the tile loads NV vectors of B and broadcasts NI entries of
// A, then does NI * NV multiply-adds. Columns past the last whole vector of d take a scalar loop.
#include "attn/matmul.h"
#include "attn/vec.h"

#include <stdlib.h>

enum { NI_MAX = 6, NV_MAX = 4, NN_KB = 128 };

// nn: acc[i][k] = sum_{j<m} A[i][j] * B[j][k-th vector], stored as alpha*acc + beta*C.
static inline __attribute__((always_inline)) void nn_tile(const float *a, size_t lda, const float *b, size_t ldb, int m,
                                                           float alpha, float beta, float *c, size_t ldc, const int NI,
                                                           const int NV) {
    vf acc[NI_MAX][NV_MAX];
    for (int i = 0; i < NI; i++)
        for (int k = 0; k < NV; k++) acc[i][k] = (vf){0};
    for (int j = 0; j < m; j++) {
        vf bv[NV_MAX];
        for (int k = 0; k < NV; k++) bv[k] = vload(b + (size_t)j * ldb + k * VL);
        for (int i = 0; i < NI; i++) {
            const float av = a[(size_t)i * lda + j];
            for (int k = 0; k < NV; k++) acc[i][k] += av * bv[k];
        }
    }
    for (int i = 0; i < NI; i++)
        for (int k = 0; k < NV; k++) {
            float *ci = c + (size_t)i * ldc + k * VL;
            vstore(ci, beta == 0.0f ? alpha * acc[i][k] : alpha * acc[i][k] + beta * vload(ci));
        }
}

// tn: acc[j][k] = sum_{r<n} A[r][j] * B[r][k-th vector], added to C as alpha*acc.
static inline __attribute__((always_inline)) void tn_tile(const float *a, size_t lda, const float *b, size_t ldb, int n,
                                                           float alpha, float *c, size_t ldc, const int NI,
                                                           const int NV) {
    vf acc[NI_MAX][NV_MAX];
    for (int j = 0; j < NI; j++)
        for (int k = 0; k < NV; k++) acc[j][k] = (vf){0};
    for (int r = 0; r < n; r++) {
        vf bv[NV_MAX];
        for (int k = 0; k < NV; k++) bv[k] = vload(b + (size_t)r * ldb + k * VL);
        for (int j = 0; j < NI; j++) {
            const float av = a[(size_t)r * lda + j];
            for (int k = 0; k < NV; k++) acc[j][k] += av * bv[k];
        }
    }
    for (int j = 0; j < NI; j++)
        for (int k = 0; k < NV; k++) {
            float *cj = c + (size_t)j * ldc + k * VL;
            vstore(cj, vload(cj) + alpha * acc[j][k]);
        }
}

// The tile sizes at run time: NI in 6, 4, 2, 1 and NV in 4, 2, 1, each a compile-time constant
// in its instance.
static int tile_rows(int left) { return left >= 6 ? 6 : left >= 4 ? 4 : left >= 2 ? 2 : 1; }
static int tile_vecs(int left) { return left >= 4 ? 4 : left >= 2 ? 2 : 1; }

static void nn_tile_any(const float *a, size_t lda, const float *b, size_t ldb, int m, float alpha, float beta, float *c,
                        size_t ldc, int ni, int nv) {
    switch (ni * 8 + nv) {
    case 6 * 8 + 4: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 6, 4); break;
    case 6 * 8 + 2: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 6, 2); break;
    case 6 * 8 + 1: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 6, 1); break;
    case 4 * 8 + 4: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 4, 4); break;
    case 4 * 8 + 2: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 4, 2); break;
    case 4 * 8 + 1: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 4, 1); break;
    case 2 * 8 + 4: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 2, 4); break;
    case 2 * 8 + 2: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 2, 2); break;
    case 2 * 8 + 1: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 2, 1); break;
    case 1 * 8 + 4: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 1, 4); break;
    case 1 * 8 + 2: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 1, 2); break;
    default: nn_tile(a, lda, b, ldb, m, alpha, beta, c, ldc, 1, 1); break;
    }
}

static void tn_tile_any(const float *a, size_t lda, const float *b, size_t ldb, int n, float alpha, float *c, size_t ldc,
                        int ni, int nv) {
    switch (ni * 8 + nv) {
    case 6 * 8 + 4: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 6, 4); break;
    case 6 * 8 + 2: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 6, 2); break;
    case 6 * 8 + 1: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 6, 1); break;
    case 4 * 8 + 4: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 4, 4); break;
    case 4 * 8 + 2: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 4, 2); break;
    case 4 * 8 + 1: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 4, 1); break;
    case 2 * 8 + 4: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 2, 4); break;
    case 2 * 8 + 2: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 2, 2); break;
    case 2 * 8 + 1: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 2, 1); break;
    case 1 * 8 + 4: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 1, 4); break;
    case 1 * 8 + 2: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 1, 2); break;
    default: tn_tile(a, lda, b, ldb, n, alpha, c, ldc, 1, 1); break;
    }
}

void strip_matmul_nn(int n, int d, int m, float alpha, const float *a, size_t lda, const float *b, size_t ldb, float beta,
                     float *c, size_t ldc) {
    const int dv = d / VL;
    // Keys in blocks of NN_KB, so that the row tiles after the first find the block of B in L1
    // (B, a (T, d) tensor of some head, is read once per strip, not once per row tile).
    for (int j0 = 0; j0 < m; j0 += NN_KB) {
        const int mj = m - j0 < NN_KB ? m - j0 : NN_KB;
        const float bj = j0 == 0 ? beta : 1.0f;
        for (int i = 0; i < n;) {
            const int ni = tile_rows(n - i);
            for (int k = 0; k < dv;) {
                const int nv = tile_vecs(dv - k);
                nn_tile_any(a + (size_t)i * lda + j0, lda, b + (size_t)j0 * ldb + k * VL, ldb, mj, alpha, bj,
                            c + (size_t)i * ldc + k * VL, ldc, ni, nv);
                k += nv;
            }
            i += ni;
        }
    }
    for (int i = 0; i < n; i++)
        for (int x = dv * VL; x < d; x++) {
            float acc = 0.0f;
            for (int j = 0; j < m; j++) acc += a[(size_t)i * lda + j] * b[(size_t)j * ldb + x];
            float *ci = c + (size_t)i * ldc + x;
            *ci = beta == 0.0f ? alpha * acc : alpha * acc + beta * *ci;
        }
}

void strip_matmul_tn(int m, int d, int n, float alpha, const float *a, size_t lda, const float *b, size_t ldb, float *c,
                     size_t ldc) {
    const int dv = d / VL;
    for (int j = 0; j < m;) {
        const int ni = tile_rows(m - j);
        for (int k = 0; k < dv;) {
            const int nv = tile_vecs(dv - k);
            tn_tile_any(a + j, lda, b + k * VL, ldb, n, alpha, c + (size_t)j * ldc + k * VL, ldc, ni, nv);
            k += nv;
        }
        j += ni;
    }
    for (int j = 0; j < m; j++)
        for (int x = dv * VL; x < d; x++) {
            float acc = 0.0f;
            for (int r = 0; r < n; r++) acc += a[(size_t)r * lda + j] * b[(size_t)r * ldb + x];
            c[(size_t)j * ldc + x] += alpha * acc;
        }
}

// ---- nt: the scores of a strip ----------------------------------------------------------------
//
// C[i][j] = sum_t A[i][t] B[j][t] runs along t in both operands, while the map strip C wants its
// rows in vectors along keys. Transposing B (a whole (m, d) tensor) per strip is what makes
// OpenBLAS slow here; instead the strip's 16 rows of A are transposed once (d x 16, small), a
// tile holds 16 keys x 16 rows as 16 vectors of rows (each step t: one vector of A^T, 16
// broadcasts of B[j][t]), and the finished 16 x 16 tile is transposed in registers on its way
// out: 64 shuffles per 16 * d multiply-adds.

typedef int vi __attribute__((vector_size(64)));

// One butterfly stage of a 16 x 16 transpose held as 16 row vectors: rows r and r+k
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
            m[r] = __builtin_shuffle(a, b, lo);
            m[r + K] = __builtin_shuffle(a, b, hi);
        }
}

// m = m^T: four butterfly stages, 64 two-source shuffles.
static inline __attribute__((always_inline)) void transpose16(vf m[VL]) {
    butterfly(m, 8);
    butterfly(m, 4);
    butterfly(m, 2);
    butterfly(m, 1);
}

// Columns [j0, j0+16) of rows i < ni of C from at = A^T (d x 16, zero past row ni).
static void nt_tile(const float *at, int d, const float *b, size_t ldb, float alpha, int ni, float *c, size_t ldc) {
    vf acc[VL];
    for (int j = 0; j < VL; j++) acc[j] = (vf){0};
    for (int t = 0; t < d; t++) {
        const vf av = vload(at + (size_t)t * VL);
        for (int j = 0; j < VL; j++) acc[j] += b[(size_t)j * ldb + t] * av;
    }
    transpose16(acc);
    for (int i = 0; i < ni; i++) vstore(c + (size_t)i * ldc, alpha * acc[i]);
}

void strip_matmul_nt(int n, int m, int d, float alpha, const float *a, size_t lda, const float *b, size_t ldb, float *c,
                     size_t ldc) {
    enum { AT_STACK = 16 * 256 };
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
        int j = 0;
        for (; j + VL <= m; j += VL) nt_tile(at, d, b + (size_t)j * ldb, ldb, alpha, ni, ci + j, ldc);
        for (; j < m; j++) {  // the last keys one at a time
            vf acc = (vf){0};
            for (int t = 0; t < d; t++) acc += b[(size_t)j * ldb + t] * vload(at + (size_t)t * VL);
            for (int l = 0; l < ni; l++) ci[(size_t)l * ldc + j] = alpha * acc[l];
        }
    }
    if (at != at_stack) free(at);
}
