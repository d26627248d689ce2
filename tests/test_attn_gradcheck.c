// test_attn_gradcheck.c: the backward against central finite differences of the forward, for
// every parameter kind, on small shapes. Loss L = sum(out * dout), accumulated in double. Each
// entry's tolerance is computed from the data: the losses' measured rounding over the step, and
// the truncation estimated from a second step (check_entries).
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

static double worst_ratio;  // the largest |fd - analytic| over its tolerance, printed at the end

// The central difference (L(x + h) - L(x - h)) / (x+ - x-) at x[i], over the step that the float32
// x + h and x - h actually take; *step gets that step.
static double central(tu_case *c, float *x, size_t i, float h, double *step) {
    const float x0 = x[i], xp = x0 + h, xm = x0 - h;
    x[i] = xp;
    const double lp = loss(c);
    x[i] = xm;
    const double lm = loss(c);
    x[i] = x0;
    *step = (double)xp - (double)xm;
    return (lp - lm) / *step;
}

// The tolerance of one entry (docs/testing.md), the sum of three errors:
// - rounding: each loss is a float32 forward off by at most R (loss_rounding), so fd(h) by at most
//   2 R / step;
// - truncation: fd(h) - L' = h^2 L3 / 6 + O(h^4), L3 the third derivative; the step 2h truncates 4
//   times as much, so fd(2h) - fd(h) = 3 h^2 L3 / 6 plus both roundings, and the truncation of
//   fd(h) is at most (|fd(2h) - fd(h)| + both roundings) / 3; taken twice, for L3 varying over
//   [x - 2h, x + 2h] and the O(h^4) term;
// - the analytic gradient's own float32 rounding, ga (tu_rounding_bound times its tensor's scale).
// A wrong index or a missing term moves a gradient by a fraction of its size, far more.
static int check_entries(tu_case *c, const char *name, float *x, const float *g, size_t n, size_t stride, double R,
                         double ga) {
    const float h = 1e-2f;
    int bad = 0;
    for (size_t i = 0; i < n; i += stride) {
        double s1, s2;
        const double fd = central(c, x, i, h, &s1), fd2 = central(c, x, i, 2 * h, &s2), an = g[i];
        const double r1 = 2 * R / s1, r2 = 2 * R / s2, tol = 2 * (fabs(fd2 - fd) + r1 + r2) / 3 + r1 + ga;
        const double ratio = fabs(fd - an) < INFINITY ? fabs(fd - an) / tol : INFINITY;
        worst_ratio = tu_worst(worst_ratio, ratio);
        if (!(ratio <= 1)) {  // a NaN or infinity in either fails
            if (bad < 5)
                fprintf(stderr, "  %s[%zu]: analytic %.6g, finite difference %.6g: %.3g of the tolerance %.3g\n", name,
                        i, an, fd, ratio, tol);
            bad++;
        }
    }
    return bad;
}

// R, the rounding of one loss against the exact one: as tu_rounding_bound reasons (testutil.h),
// each of the forward's at most 16 steps moves it by about as much as rounding every input once
// more does (tu_case_perturbed; the largest move of three draws, at least u |L|), and there is
// one float32 computation here, not two: TU_ROUNDING_STEPS / 2 times that.
static double loss_rounding(tu_case *c) {
    const double L = loss(c);
    double noise = 0x1p-24 * fabs(L);
    for (uint64_t seed = 1; seed <= 3; seed++) {
        tu_case *p = tu_case_perturbed(c, seed);
        assert_non_null(p);
        noise = tu_worst(noise, fabs(loss(p) - L));
        tu_case_free(p);
    }
    return TU_ROUNDING_STEPS / 2 * noise;
}

// The failing entries of config cfg's problem.
static int gradcheck(const mta_config *cfg) {
    tu_case *c = tu_case_new(cfg, 11, 1.0f, 0.3f);
    assert_non_null(c);
    assert_int_equal(tu_case_run(c, 1), MTA_OK);
    const double bound = tu_rounding_bound(tu_rounding_noise(c, 5));
    // Keep copies: the finite differences re-run the forward, which rewrites out.
    size_t total = 3 * c->n;
    for (int i = 0; i < MTA_N_PARAMS; i++) total += c->wn[i];
    float *g = malloc(total * sizeof(float));
    assert_non_null(g);
    memcpy(g, c->dq, 3 * c->n * sizeof(float));
    float *gp = g + 3 * c->n;
    const double R = loss_rounding(c);
    int bad = 0;
    size_t stride = c->n > 60 ? c->n / 60 : 1;  // a spread sample of q, k, v entries
    bad += check_entries(c, "q", c->q, g, c->n, stride, R, bound * tu_max_abs(g, c->n));
    // k, v: their nkv entries (H_kv heads with grouped-query attention; each slot holds n)
    const size_t kstride = c->nkv > 60 ? c->nkv / 60 : 1;
    bad += check_entries(c, "k", c->k, g + c->n, c->nkv, kstride, R, bound * tu_max_abs(g + c->n, c->nkv));
    bad += check_entries(c, "v", c->v, g + 2 * c->n, c->nkv, kstride, R, bound * tu_max_abs(g + 2 * c->n, c->nkv));
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        if (!c->wn[i]) continue;
        memcpy(gp, c->gw[i], c->wn[i] * sizeof(float));
        bad += check_entries(c, mta_param_info(i)->name, c->w[i], gp, c->wn[i], 1, R, bound * tu_max_abs(gp, c->wn[i]));
        gp += c->wn[i];
    }
    free(g);
    tu_case_free(c);
    return bad;
}

// Every gradient-check case of the list (attn_cases.c, TC_GRAD): each step alone, every step,
// grouped-query attention (dk, dv sum the query heads' terms). Every failing case is listed.
static void test_gradients(void **s) {
    (void)s;
    int failed = 0;
    const tc_case *t;
    for (int k = 0; (t = tc_nth(TC_GRAD, k)); k++) {
        const mta_config c = tu_config_of(t);
        const int bad = gradcheck(&c);
        if (bad) print_error("%s: %d entries differ from the finite differences\n", t->name, bad), failed++;
    }
    if (failed) fail_msg("%d of %d cases failed", failed, tc_count(TC_GRAD));
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_gradients)};
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    printf("worst finite-difference error over its tolerance: %.3g\n", worst_ratio);
    return failed;
}
