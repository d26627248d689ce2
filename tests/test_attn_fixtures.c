// test_attn_fixtures.c: the operator against the PyTorch autograd reference (tests/ref), through
// the committed fixtures in tests/fixtures/ (regenerate: /usr/bin/python3 tests/ref/gen_fixtures.py).
// Each fixture holds the inputs and expect.out / expect.grad.* computed in float64 by torch.
// Tolerance: per tensor, max |C - torch| <= 1e-4 * max(max |torch|, 0.1): relative to the tensor's
// scale, with a floor for gradients that are structurally ~0 (see tests/ref/check_against_torch.py).
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

static const double REL_TOL = 1e-4;

// Compares one result with its expect.<name> tensor (attn_compare_expected: an infinite
// difference for a NaN or infinity in either); returns 1 when within tolerance.
static int compare(const char *file, const st_file *f, const char *name, const float *got, size_t n) {
    double err, scale;
    char msg[256];
    const int r = attn_compare_expected(f, name, got, n, &err, &scale, msg, sizeof msg);
    if (r <= 0) {
        fprintf(stderr, "%s: %s\n", file, r < 0 ? msg : "a result without its expect.* tensor");
        return 0;
    }
    if (!(err <= REL_TOL * scale)) {
        fprintf(stderr, "%s: %s differs: max abs err %.3g, scale %.3g (rel %.3g > %.0e)\n", file, name, err, scale,
                err / scale, REL_TOL);
        return 0;
    }
    return 1;
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
    const mta_config *c = &pr.cfg;
    const size_t n = (size_t)c->B * c->H * c->T * c->d, nkv = n / c->H * (size_t)c->H_kv;  // k, v: H_kv heads
    size_t np = 0;
    for (int i = 0; i < MTA_N_PARAMS; i++) np += pr.param_numel[i];
    float *buf = calloc(4 * n + np + 1, sizeof(float));
    float *gp[MTA_N_PARAMS] = {0}, *cur = buf + 4 * n;
    for (int i = 0; i < MTA_N_PARAMS; i++)
        if (pr.param[i]) gp[i] = cur, cur += pr.param_numel[i];
    mta_params p = attn_problem_params(&pr);
    mta_grads g;
    for (int i = 0; i < MTA_N_PARAMS; i++) g.w[i] = gp[i];
    mta_ctx *ctx = NULL;
    int32_t *doc = pr.doc ? malloc((size_t)c->B * c->T * sizeof(int32_t)) : NULL;
    if (doc) attn_problem_doc_ids(&pr, doc);
    int ok = buf && pr.dout && (doc || !pr.doc) && mta_create(&ctx, c, err, sizeof err) == MTA_OK &&
             mta_set_documents(ctx, doc) == MTA_OK && mta_forward(ctx, pr.q, pr.k, pr.v, &p, buf) == MTA_OK &&
             mta_backward(ctx, pr.q, pr.k, pr.v, &p, pr.dout, buf + n, buf + 2 * n, buf + 3 * n, &g) == MTA_OK;
    if (!ok) fprintf(stderr, "%s: could not run the operator (%s)\n", path, ctx ? mta_ctx_error(ctx) : err);
    if (ok) {
        ok &= compare(path, &f, "out", buf, n);
        ok &= compare(path, &f, "grad.q", buf + n, n);
        ok &= compare(path, &f, "grad.k", buf + 2 * n, nkv);
        ok &= compare(path, &f, "grad.v", buf + 3 * n, nkv);
        for (int i = 0; i < MTA_N_PARAMS; i++) {
            char name[32];
            snprintf(name, sizeof name, "grad.%s", mta_param_info(i)->name);
            if (gp[i]) ok &= compare(path, &f, name, gp[i], pr.param_numel[i]);
        }
    }
    mta_destroy(ctx);
    free(buf);
    free(doc);
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
    fprintf(stderr, "fixtures: %d of %d match the PyTorch reference\n", passed, n);
    assert_true(n >= 20);  // the committed set; fewer means fixtures went missing
    assert_int_equal(passed, n);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_all_fixtures)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
