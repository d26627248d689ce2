// test_conv.c: the map kernels of src/attn/conv.c against direct sums in double, for kernel
// shapes that take every path (4-row tiles, partial tiles, padded edges, rows near both ends of
// the map, kernels too large for the stack-packed or edge-scratch paths), and the invariance
// the backends rely on: a row's result does not depend on how rows are grouped into tiles.
#include "attn/conv.h"
#include "testutil.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static float frand(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)(*s >> 8) / 16777216.0f - 0.5f;
}

// Z(r, x) of a causal map stored with row stride T: zero above the diagonal and outside.
static double zval(const float *z, int T, int r, int x) { return r >= 0 && r < T && x >= 0 && x <= r ? z[(size_t)r * T + x] : 0.0; }

static double worst_ratio;  // the largest error over its bound, printed at the end

// One kernel shape's buffers: the map z (T x T), the kernel w (cq x ck, key padding p), the
// results a of one call and b of rows or strips, and the kernel gradient dw.
typedef struct {
    int T, cq, ck, p;
    float *z, *w, *a, *b, *dw;
} conv_case;

// The direct sum in double of w against the map from row r0, column x0, stepping both by dir
// (+1: the convolution, -1: its transpose); the sum of |products| in *abs.
static double kernel_sum(const conv_case *k, int r0, int x0, int dir, double *abs) {
    double ref = 0;
    *abs = 0;
    for (int q = 0; q < k->cq; q++)
        for (int c = 0; c < k->ck; c++) {
            const double t = k->w[q * k->ck + c] * zval(k->z, k->T, r0 + dir * q, x0 + dir * c);
            ref += t, *abs += fabs(t);
        }
    return ref;
}

// Row r of a against row r of b, bit for bit, and each of its entries against the direct sum
// (dir as in kernel_sum); the worst ratio to the bound.
static double check_rows(const conv_case *k, int dir) {
    const int T = k->T, shift = dir * (k->cq - 1), x_shift = -dir * k->p;
    double worst = 0;
    for (int r = 0; r < T; r++) {
        assert_memory_equal(k->a + (size_t)r * T, k->b + (size_t)r * T, (size_t)(r + 1) * sizeof(float));
        for (int j = 0; j <= r; j++) {
            double abs;
            const double ref = kernel_sum(k, r - shift, j + x_shift, dir, &abs);
            worst = tu_worst(worst, tu_sum_ratio(k->a[(size_t)r * T + j], ref, abs, k->cq * k->ck));
        }
    }
    return worst;
}

// Forward: all rows in one call against one call per row (bit for bit) and the direct sum.
static double check_forward(const conv_case *k) {
    const int T = k->T, cq = k->cq, ck = k->ck;
    qkconv_rows(k->z, T, k->w, cq, ck, 0, T, k->a, T);
    for (int i = 0; i < T; i++)
        qkconv_rows(k->z + (size_t)(i > cq - 1 ? i - (cq - 1) : 0) * T, T, k->w, cq, ck, i, i + 1, k->b + (size_t)i * T, T);
    return check_rows(k, 1);
}

// Transposed: the map's last row is T-1; strips of 5 rows against one call.
static double check_transposed(const conv_case *k) {
    const int T = k->T, cq = k->cq, ck = k->ck;
    qkconv_backward_input_rows(k->z, T, T - 1, k->w, cq, ck, 0, T, k->a, T);
    for (int r0 = 0; r0 < T; r0 += 5)
        qkconv_backward_input_rows(k->z + (size_t)r0 * T, T, T - 1, k->w, cq, ck, r0, r0 + 5 < T ? r0 + 5 : T,
                                   k->b + (size_t)r0 * T, T);
    return check_rows(k, -1);
}

// The kernel gradient of strips of rows (1: every row; 13: tiles of rows, the rows a tile
// leaves, and partial tiles), with the map itself as the output gradient, against the direct
// sum over the strip.
static double check_weight(const conv_case *k, int strip) {
    const int T = k->T, cq = k->cq, ck = k->ck, p = k->p;
    const float *z = k->z;
    double worst = 0;
    for (int i0 = 0; i0 < T; i0 += strip) {
        const int i1 = i0 + strip < T ? i0 + strip : T;
        qkconv_backward_weight_rows(z + (size_t)i0 * T, T, z + (size_t)(i0 > cq - 1 ? i0 - (cq - 1) : 0) * T, T, cq, ck, i0,
                                    i1, k->dw);
        for (int q = 0; q < cq; q++)
            for (int c = 0; c < ck; c++) {
                double ref = 0, abs = 0;
                int n = 0;
                for (int i = i0; i < i1; i++)
                    for (int j = 0; j <= i; j++, n++) {
                        const double t = z[(size_t)i * T + j] * zval(z, T, i - (cq - 1) + q, j - p + c);
                        ref += t, abs += fabs(t);
                    }
                worst = tu_worst(worst, tu_sum_ratio(k->dw[q * ck + c], ref, abs, n));
            }
    }
    return worst;
}

static void check_shape(int T, int cq, int ck) {
    uint32_t seed = 7u + (uint32_t)(T * 131 + cq * 17 + ck);
    conv_case k = {T, cq, ck, (ck - 1) / 2, malloc(sizeof(float) * T * T), malloc(sizeof(float) * cq * ck),
                   calloc((size_t)T * T, sizeof(float)), calloc((size_t)T * T, sizeof(float)), malloc(sizeof(float) * cq * ck)};
    assert_non_null(k.z), assert_non_null(k.a), assert_non_null(k.b), assert_non_null(k.w), assert_non_null(k.dw);
    for (int i = 0; i < T * T; i++) k.z[i] = frand(&seed);
    for (int i = 0; i < cq * ck; i++) k.w[i] = frand(&seed);
    double worst = check_forward(&k);
    worst = tu_worst(worst, check_transposed(&k));
    worst = tu_worst(worst, check_weight(&k, 1));
    worst = tu_worst(worst, check_weight(&k, 13));
    // every entry a float32 sum of products: within gamma_n sum|products| (tu_sum_ratio)
    worst_ratio = tu_worst(worst_ratio, worst);
    if (!(worst <= 1)) fail_msg("T=%d, kernel %dx%d: %.3g of the bound from the direct sum", T, cq, ck, worst);
    free(k.z), free(k.a), free(k.b), free(k.w), free(k.dw);
}

static void test_convolutions(void **s) {
    (void)s;
    const int shapes[][3] = {
        {100, 6, 11},  // the 830M kernel: full tiles, edges on both sides
        {77, 2, 9},    // the toy kernel
        {45, 1, 1},    // identity-sized
        {40, 3, 5},    // T not a multiple of the tile or the vector
        {9, 4, 13},    // kernel wider than most rows
        {70, 20, 51},  // packed kernel too large for the stack
        {80, 70, 61},  // too large for the edge scratch: the direct sum
    };
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) check_shape(shapes[k][0], shapes[k][1], shapes[k][2]);
}

// Head mixing and its gradients against direct sums: groups of 3 inside 6 heads (one-head
// tiles), all 8 heads in one group (the 8-head tile), groups of 4 (the 4-head tile), 12 heads
// (8 + 4) and 16; row lengths with and without a vector tail. The gradient's lane partials are
// summed by headmix_grad_sum over one row.
static void test_head_mixing(void **s) {
    (void)s;
    const int cases[][3] = {{6, 3, 37}, {8, 8, 64}, {8, 8, 70}, {5, 5, 1}, {8, 4, 70}, {12, 12, 50}, {16, 16, 37}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int H = cases[k][0], G = cases[k][1], n = cases[k][2], ld = 80;
        uint32_t seed = 99u + (uint32_t)k;
        float in[16 * 80], g[16 * 80], m[256], out[16 * 80], din[16 * 80], dm[256 * 16];
        assert_true(headmix_grad_lanes() <= 16);
        for (int i = 0; i < H * ld; i++) in[i] = frand(&seed), g[i] = frand(&seed);
        for (int i = 0; i < H * H; i++) m[i] = frand(&seed);
        headmix_row(in, ld, m, H, H, G, n, out, ld);
        headmix_backward_row(g, ld, in, ld, m, H, H, G, n, din, ld, dm);
        double worst = 0;
        for (int h = 0; h < H; h++) {
            const int g0 = h / G * G;
            for (int j = 0; j < n; j++) {
                double o = 0, di = 0, oa = 0, da = 0;
                for (int h2 = g0; h2 < g0 + G; h2++) {
                    o += (double)m[h * H + h2] * in[h2 * ld + j], oa += fabs((double)m[h * H + h2] * in[h2 * ld + j]);
                    di += (double)m[h2 * H + h] * g[h2 * ld + j], da += fabs((double)m[h2 * H + h] * g[h2 * ld + j]);
                }
                worst = tu_worst(worst, tu_worst(tu_sum_ratio(out[h * ld + j], o, oa, G), tu_sum_ratio(din[h * ld + j], di, da, G)));
            }
            for (int h2 = g0; h2 < g0 + G; h2++) {
                double d = 0, abs = 0;
                for (int j = 0; j < n; j++) d += (double)g[h * ld + j] * in[h2 * ld + j], abs += fabs((double)g[h * ld + j] * in[h2 * ld + j]);
                const float got = headmix_grad_sum(dm + (size_t)(h * H + h2) * headmix_grad_lanes(), 0, 1);
                worst = tu_worst(worst, tu_sum_ratio(got, d, abs, n));
            }
        }
        // sums of G products (the mixing) and of n (its gradient): tu_sum_ratio's bound
        worst_ratio = tu_worst(worst_ratio, worst);
        if (!(worst <= 1)) fail_msg("H=%d, groups of %d, %d columns: %.3g of the bound from the direct sum", H, G, n, worst);
    }
}

// The softmax's exp against libm's, across the range it sees (x - max <= 0) and beyond.
static void test_softmax(void **s) {
    (void)s;
    float x[300];
    for (int i = 0; i < 300; i++) x[i] = -90.0f + 0.3f * (float)i;  // -90 .. -0.3
    float y[300];
    memcpy(y, x, sizeof x);
    float mx, inv;
    softmax_row(y, 300, &mx, &inv);
    // Each entry's relative error: e_i = |a_i| u from rounding a_i = x_i - mx (exp turns an error of
    // the argument into a relative one), plus 4 u, exp_approx's 2 ulp; the sum of the 300 positive
    // exps adds their weighted mean error E and gamma_300 (tu_gamma); 1 / sum and the product 2 u.
    // Below exp(-87) exp_approx clamps: an absolute 1.6e-38 over a sum >= 1 (its largest term is
    // exp(0)), so 1e-37.
    const double u = 0x1p-24;
    double sum = 0, E = 0;
    for (int i = 0; i < 300; i++) sum += exp((double)x[i] - mx), E += exp((double)x[i] - mx) * (fabs(x[i] - mx) + 4) * u;
    E /= sum;
    double worst = 0;
    for (int i = 0; i < 300; i++) {
        const double ref = exp((double)x[i] - mx) / sum, rtol = (fabs(x[i] - mx) + 4) * u + E + tu_gamma(300) + 2 * u;
        worst = tu_worst(worst, fabs(y[i] - ref) / (1e-37 + rtol * ref));
        if (!tu_close(y[i], ref, 1e-37, rtol))  // a NaN fails, where `|y - ref| > tol` passed it
            fail_msg("softmax entry %d: %.9g against %.9g", i, y[i], ref);
    }
    worst_ratio = tu_worst(worst_ratio, worst);
    float z[300];
    memcpy(z, x, sizeof x);
    softmax_row_recompute(z, 300, mx, inv);
    assert_memory_equal(y, z, sizeof y);
}

// Non-finite scores propagate as NaN, without undefined behaviour (the UBSan build checks the
// exp's integer conversion): a NaN entry, or an infinite one (inf - inf), makes the row NaN.
static void test_softmax_nonfinite(void **s) {
    (void)s;
    const float bad[2] = {NAN, INFINITY};
    for (int b = 0; b < 2; b++)
        for (int at = 0; at < 40; at += 13) {
            float x[40];
            for (int i = 0; i < 40; i++) x[i] = 0.1f * (float)i;
            x[at] = bad[b];
            float mx, inv;
            softmax_row(x, 40, &mx, &inv);
            for (int i = 0; i < 40; i++)
                if (!isnan(x[i])) fail_msg("%s at %d: entry %d is %g, not NaN", b ? "inf" : "NaN", at, i, x[i]);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_convolutions),
        cmocka_unit_test(test_head_mixing),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_softmax_nonfinite),
    };
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    printf("worst error over its bound: %.3g\n", worst_ratio);
    return failed;
}
