// matmul.h: the matrix products of a strip of map rows (n rows, n small: 1..64) with the
// (T, d) tensors q, k, v and their gradients, row-major. OpenBLAS repacks its operands on every
// call, which for a 16-row strip costs as much as the product itself; these kernels read the
// strip and the tensor where they lie and keep a tile of the result in registers.
#ifndef MTAC_ATTN_MATMUL_H
#define MTAC_ATTN_MATMUL_H

#include <stddef.h>

// C = alpha * A B + beta * C (C is not read when beta == 0).
// A: (n, m), rows lda apart (a strip of a map); B: (m, d), rows ldb apart; C: (n, d), rows ldc apart.
void strip_matmul_nn(int n, int d, int m, float alpha, const float *a, size_t lda, const float *b, size_t ldb, float beta,
                     float *c, size_t ldc);

// C += alpha * A^T B.
// A: (n, m), rows lda apart (a strip of a map); B: (n, d), rows ldb apart; C: (m, d), rows ldc apart.
void strip_matmul_tn(int m, int d, int n, float alpha, const float *a, size_t lda, const float *b, size_t ldb, float *c,
                     size_t ldc);

// C = alpha * A B^T (C's old contents are not read).
// A: (n, d), rows lda apart (q or dO rows of the strip); B: (m, d), rows ldb apart (k or v);
// C: (n, m), rows ldc apart (a strip of a map).
void strip_matmul_nt(int n, int m, int d, float alpha, const float *a, size_t lda, const float *b, size_t ldb, float *c,
                     size_t ldc);

#endif
