// test_attn_fixtures.c: the operator against the PyTorch autograd reference (tests/ref), through
// the committed fixtures in tests/fixtures/ (regenerate: /usr/bin/python3 tests/ref/gen_fixtures.py).
// Each fixture holds the inputs and expect.out / expect.grad.* computed in float64 by torch.
// Bound: the case's own float32 rounding (as tu_rounding_check, testutil.h): tu_rel_diff of the
// operator's run from torch's float64 values (each tensor's error over its scale) over
// tu_rounding_bound of the run's rounding noise, > 1 failing. The fixtures store torch's values
// rounded to float32, u/2 of each value, below the bound's floor of 32 u.
#include "io/attn_io.h"
#include "io/safetensors.h"
#include "testutil.h"

#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static double worst_ratio;  // the largest error over its bound, printed at the end

// Copies the file's expect.<name> (n floats) into dst; 0 (with a message) when it is missing or
// of another size.
static int load_expected(const char *path, const st_file *f, const char *name, float *dst, size_t n) {
    char key[48];
    snprintf(key, sizeof key, "expect.%s", name);
    const st_tensor *t = st_find(f, key);
    if (!t || t->numel != n) {
        fprintf(stderr, "%s: %s %s\n", path, key, t ? "has the wrong size" : "is missing");
        return 0;
    }
    memcpy(dst, t->data, n * sizeof(float));
    return 1;
}

// The fixture's problem in a tu_case (a: inputs, run on the tests' backend) and torch's results
// in another (e: out, dq, dk, dv, the parameters' gradients).
static int load_cases(const char *path, const st_file *f, const attn_problem *pr, tu_case *a, tu_case *e) {
    const size_t n = a->n, nkv = a->nkv;
    memcpy(a->q, pr->q, n * sizeof(float)), memcpy(a->k, pr->k, nkv * sizeof(float));
    memcpy(a->v, pr->v, nkv * sizeof(float)), memcpy(a->dout, pr->dout, n * sizeof(float));
    int ok = load_expected(path, f, "out", e->out, n) && load_expected(path, f, "grad.q", e->dq, n) &&
             load_expected(path, f, "grad.k", e->dk, nkv) && load_expected(path, f, "grad.v", e->dv, nkv);
    for (int i = 0; i < MTA_N_PARAMS && ok; i++)
        if (a->wn[i]) {
            char name[32];
            snprintf(name, sizeof name, "grad.%s", mta_param_info(i)->name);
            ok = pr->param[i] && pr->param_numel[i] == a->wn[i] && load_expected(path, f, name, e->gw[i], a->wn[i]);
            if (ok) memcpy(a->w[i], pr->param[i], a->wn[i] * sizeof(float));
        }
    return ok;
}

static int run_fixture(const char *path) {
    char err[512];
    st_file f;
    if (st_read(path, &f, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 0;
    }
    attn_problem pr;
    if (attn_problem_from_file(&f, "expect.", &pr, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", path, err);
        st_free(&f);
        return 0;
    }
    pr.cfg.backend = tu_backend();
    tu_case *a = tu_case_new(&pr.cfg, 1, 1.0f, 0.0f), *e = tu_case_new(&pr.cfg, 1, 1.0f, 0.0f);
    int ok = a && e && pr.dout && load_cases(path, &f, &pr, a, e);
    int32_t *doc = pr.doc ? malloc((size_t)pr.cfg.B * pr.cfg.T * sizeof(int32_t)) : NULL;
    ok = ok && (doc || !pr.doc);
    if (ok && doc) {
        attn_problem_doc_ids(&pr, doc);
        tu_case_set_docs(a, doc);
    }
    free(doc);
    if (ok && tu_case_train(a, NULL) != MTA_OK) {
        fprintf(stderr, "%s: could not run the operator\n", path);
        ok = 0;
    }
    if (ok) {
        const char *which;
        // the noise of the run's own problem; the error at torch's tensors' scales
        const double rel = tu_rel_diff(a, e, &which), bound = tu_rounding_bound(tu_rounding_noise(a, 7));
        const double r = rel < INFINITY && bound < INFINITY ? rel / bound : INFINITY;
        worst_ratio = tu_worst(worst_ratio, r);
        if (!(r <= 1)) {
            fprintf(stderr, "%s: %s differs from torch's by %.3g of its bound\n", path, which, r);
            ok = 0;
        }
    }
    tu_case_free(a);
    tu_case_free(e);
    st_free(&f);
    return ok;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static void test_all_fixtures(void **s) {
    (void)s;
    const char *dir = "tests/fixtures";
    DIR *dp = opendir(dir);
    if (!dp) fail_msg("cannot open %s (run the test from the repository root)", dir);
    int n = 0, passed = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (!ends_with(de->d_name, ".safetensors")) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        int ok = run_fixture(path);
        n++;
        passed += ok;
        if (!ok) fprintf(stderr, "FAIL %s\n", path);
    }
    closedir(dp);
    fprintf(stderr, "fixtures: %d of %d match the PyTorch reference; worst error over its bound %.3g\n", passed, n,
            worst_ratio);
    assert_true(n >= 20);  // the committed set; fewer means fixtures went missing
    assert_int_equal(passed, n);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_all_fixtures)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
