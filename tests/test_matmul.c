// test_matmul.c: the strip matrix products of src/attn/matmul.c against direct sums in double,
// for shapes that take every path at either vector width: full and partial row/key tiles (6, 4,
// 2, 1 rows; 8- or 16-key blocks and single keys), d with and without a partial last vector, key blocks of
// the nn product, row strides wider than the rows, alpha and both betas.
#include "attn/matmul.h"
#include "testutil.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

static float *randn_buf(size_t n, uint32_t *s) {
    float *x = malloc(n * sizeof(float));
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = frand(s);
    return x;
}

static double worst_ratio;  // the largest error over its bound, printed at the end

// got, a float32 alpha * (sum of `terms` products) + beta * c, against the exact want: within
// gamma_{terms + 2} * abs (tu_sum_ratio: the sum's terms, alpha's product and beta's sum, in any
// order), abs = |alpha| sum|products| + |beta c|, computed with want.
static void check(float got, double want, double abs, int terms, const char *what, int n, int m, int d) {
    const double r = tu_sum_ratio(got, want, abs, terms + 2);
    worst_ratio = tu_worst(worst_ratio, r);
    if (!(r <= 1))  // not `> 1`, which a NaN passes
        fail_msg("%s n=%d m=%d d=%d: %.9g, expected %.9g: %.3g of the bound", what, n, m, d, got, want, r);
}

// Tensor rows ldb = d + pad apart: pad 0 is how q, k, v lie (nt has a path for d = 64 and 128
// there), pad 5 a strided view.
static void check_shape(int n, int m, int d, int pad) {
    uint32_t seed = 11u + (uint32_t)(n * 7919 + m * 131 + d + pad);
    const size_t lda = (size_t)m + 3, ldb = (size_t)(d + pad), ldc = (size_t)d + 2, ldm = (size_t)m + 1;
    const float alpha = 0.75f, beta = 1.0f;
    float *a = randn_buf((size_t)n * lda, &seed);        // a strip (n, m)
    float *b = randn_buf((size_t)m * ldb, &seed);        // a tensor (m, d)
    float *bs = randn_buf((size_t)n * ldb, &seed);       // strip rows of a tensor (n, d)
    float *c0 = randn_buf((size_t)(n > m ? n : m) * ldc, &seed);
    float *c = malloc((size_t)(n > m ? n : m) * ldc * sizeof(float)), *cm = malloc((size_t)n * ldm * sizeof(float));
    assert_non_null(c), assert_non_null(cm);
    // nn, beta = 0 (C's old contents ignored: NaN there must not leak) and beta = 1
    for (int bi = 0; bi < 2; bi++) {
        for (size_t i = 0; i < (size_t)n * ldc; i++) c[i] = bi ? c0[i] : NAN;
        strip_matmul_nn(n, d, m, alpha, a, lda, b, ldb, bi ? beta : 0.0f, c, ldc);
        for (int i = 0; i < n; i++)
            for (int x = 0; x < d; x++) {
                double s = 0, sa = 0;
                for (int j = 0; j < m; j++) s += (double)a[i * lda + j] * b[j * ldb + x], sa += fabs((double)a[i * lda + j] * b[j * ldb + x]);
                const double cb = bi ? beta * c0[i * ldc + x] : 0.0;
                check(c[i * ldc + x], alpha * s + cb, fabs(alpha) * sa + fabs(cb), m, "nn", n, m, d);
            }
    }
    // tn: C (m, d) += alpha A^T B
    for (size_t i = 0; i < (size_t)m * ldc; i++) c[i] = c0[i];
    strip_matmul_tn(m, d, n, alpha, a, lda, bs, ldb, c, ldc);
    for (int j = 0; j < m; j++)
        for (int x = 0; x < d; x++) {
            double s = 0, sa = 0;
            for (int r = 0; r < n; r++) s += (double)a[r * lda + j] * bs[r * ldb + x], sa += fabs((double)a[r * lda + j] * bs[r * ldb + x]);
            check(c[j * ldc + x], alpha * s + c0[j * ldc + x], fabs(alpha) * sa + fabs(c0[j * ldc + x]), n, "tn", n, m, d);
        }
    // nt: C (n, m) = alpha A B^T with A = strip rows of a tensor (n, d), B = a tensor (m, d);
    // the columns past m (the row stride's slack) are left alone
    for (size_t i = 0; i < (size_t)n * ldm; i++) cm[i] = -7.0f;
    strip_matmul_nt(n, m, d, alpha, bs, ldb, b, ldb, cm, ldm);
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < m; j++) {
            double s = 0, sa = 0;
            for (int t = 0; t < d; t++) s += (double)bs[i * ldb + t] * b[j * ldb + t], sa += fabs((double)bs[i * ldb + t] * b[j * ldb + t]);
            check(cm[i * ldm + j], alpha * s, fabs(alpha) * sa, d, "nt", n, m, d);
        }
        assert_true(cm[i * ldm + m] == -7.0f);
    }
    free(a), free(b), free(bs), free(c0), free(c), free(cm);
}

static void test_shapes(void **s) {
    (void)s;
    // Vectors are 8 floats (AVX2) or 16 (AVX-512, src/attn/vec.h), tiles up to 6 rows by 2 or 4
    // vectors: d from 1 to 14 vectors of 8 (and 0 to 7 of 16) with and without a tail, strips
    // of every length mod 6, 8 and 16 up to 17, keys of both tile widths with and without single
    // keys left over.
    const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 33, 150}, ms[] = {1, 8, 9, 15, 16, 23, 37, 129, 300},
              ds[] = {1, 5, 8, 16, 20, 24, 40, 48, 64, 80, 112, 128};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof ms / sizeof ms[0]; j++)
            for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++)
                for (int pad = 0; pad <= 5; pad += 5) check_shape(ns[i], ms[j], ds[k], pad);
}

// A head wider than the nt kernel's stack buffer for A^T takes its heap path.
static void test_wide_head(void **s) {
    (void)s;
    check_shape(5, 40, 300, 5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_wide_head),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    printf("worst error over its bound: %.3g\n", worst_ratio);
    return failed;
}
