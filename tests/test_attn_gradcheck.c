// test_attn_gradcheck.c: the backward against central finite differences of the forward, for
// every parameter kind, on small shapes. Loss L = sum(out * dout), accumulated in double.
#include "testutil.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static double loss(tu_case *c) {
    assert_int_equal(tu_case_run(c, 0), MTA_OK);
    double L = 0;
    for (size_t i = 0; i < c->n; i++) L += (double)c->out[i] * c->dout[i];
    return L;
}

// Compares d L / d x[idx] by central differences with the analytic gradient g[idx].
static int check_entries(tu_case *c, const char *name, float *x, const float *g, size_t n, size_t stride) {
    const float eps = 1e-2f;
    int bad = 0;
    for (size_t i = 0; i < n; i += stride) {
        float x0 = x[i];
        x[i] = x0 + eps;
        double lp = loss(c);
        x[i] = x0 - eps;
        double lm = loss(c);
        x[i] = x0;
        double fd = (lp - lm) / (2.0 * eps), an = g[i];
        if (!tu_close(fd, an, 1e-3, 1e-2)) {  // a NaN or infinity in either fails
            if (bad < 5) fprintf(stderr, "  %s[%zu]: analytic %.6g, finite difference %.6g\n", name, i, an, fd);
            bad++;
        }
    }
    return bad;
}

static void gradcheck(const mta_config *cfg) {
    tu_case *c = tu_case_new(cfg, 11, 1.0f, 0.3f);
    assert_non_null(c);
    assert_int_equal(tu_case_run(c, 1), MTA_OK);
    // Keep copies: the finite differences re-run the forward, which rewrites out.
    size_t total = 3 * c->n;
    for (int i = 0; i < MTA_N_PARAMS; i++) total += c->wn[i];
    float *g = malloc(total * sizeof(float));
    assert_non_null(g);
    memcpy(g, c->dq, 3 * c->n * sizeof(float));
    float *gp = g + 3 * c->n;
    int bad = 0;
    size_t stride = c->n > 60 ? c->n / 60 : 1;  // a spread sample of q, k, v entries
    bad += check_entries(c, "q", c->q, g, c->n, stride);
    // k, v: their nkv entries (H_kv heads with grouped-query attention; each slot holds n)
    const size_t kstride = c->nkv > 60 ? c->nkv / 60 : 1;
    bad += check_entries(c, "k", c->k, g + c->n, c->nkv, kstride);
    bad += check_entries(c, "v", c->v, g + 2 * c->n, c->nkv, kstride);
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        if (!c->wn[i]) continue;
        memcpy(gp, c->gw[i], c->wn[i] * sizeof(float));
        bad += check_entries(c, mta_param_info(i)->name, c->w[i], gp, c->wn[i], 1);
        gp += c->wn[i];
    }
    free(g);
    tu_case_free(c);
    assert_int_equal(bad, 0);
}

static void test_plain(void **s) {
    (void)s;
    mta_config c = tu_config_default(2, 2, 6, 4);
    gradcheck(&c);
}
static void test_pre_conv(void **s) {
    (void)s;
    mta_config c = tu_config_default(1, 2, 7, 4);
    c.pre_cq = 3, c.pre_ck = 3;
    gradcheck(&c);
}
static void test_pre_conv_wide(void **s) {
    (void)s;
    mta_config c = tu_config_default(1, 1, 5, 3);
    c.pre_cq = 2, c.pre_ck = 7;  // key window wider than the sequence
    gradcheck(&c);
}
static void test_head_mix(void **s) {
    (void)s;
    mta_config c = tu_config_default(2, 3, 5, 4);
    c.pre_head_mix = 1;
    gradcheck(&c);
}
static void test_post_conv(void **s) {
    (void)s;
    mta_config c = tu_config_default(1, 2, 7, 4);
    c.post_cq = 2, c.post_ck = 5;
    gradcheck(&c);
}
static void test_head_conv(void **s) {
    (void)s;
    mta_config c = tu_config_default(1, 4, 5, 3);
    c.post_ch = 2;
    gradcheck(&c);
}
static void test_group_norm_depth(void **s) {
    (void)s;
    mta_config c = tu_config_default(1, 2, 5, 6);
    c.group_norm = 1, c.depth_scale = 1, c.layer_id = 3;
    gradcheck(&c);
}
static void test_gate(void **s) {
    (void)s;
    mta_config c = tu_config_default(1, 2, 5, 6);
    c.gate = 1;
    gradcheck(&c);
}
static void test_all_steps(void **s) {
    (void)s;
    mta_config c = tu_config_all(2, 4, 6, 5, 2, 3, 4);
    gradcheck(&c);
}

// Grouped-query attention: 4 query heads on 2 kv heads (dk, dv sum the pairs' terms), every step;
// and 3 query heads on one kv head with the head conv alone.
static void test_grouped_query(void **s) {
    (void)s;
    mta_config c = tu_config_all(2, 4, 6, 5, 2, 3, 2);
    c.H_kv = 2;
    gradcheck(&c);
    c = tu_config_default(1, 3, 5, 4);
    c.H_kv = 1, c.post_ch = 3;
    gradcheck(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),     cmocka_unit_test(test_pre_conv),  cmocka_unit_test(test_pre_conv_wide),
        cmocka_unit_test(test_head_mix),  cmocka_unit_test(test_post_conv), cmocka_unit_test(test_head_conv),
        cmocka_unit_test(test_group_norm_depth), cmocka_unit_test(test_gate), cmocka_unit_test(test_all_steps),
        cmocka_unit_test(test_grouped_query),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
