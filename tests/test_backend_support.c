// test_backend_support.c: every backend refuses a config that uses a step it does not compute,
// with a message naming the backend and the step, and accepts the same config without it. Built
// against libmtac's dummy-step build (CMakeLists.txt: MTAC_TEST_DUMMY_STEP), in which mta_config
// has a field dummy_step and the uses (mta_internal.h) a row for it that no backend's allow-list
// names. A backend this build lacks is reported and skipped; the reference and fused ones, and the
// cuda one in builds with the toolkit, never are.
#include "mta.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#ifndef MTAC_TEST_DUMMY_STEP
#error "test_backend_support needs the dummy-step build of libmtac (MTAC_TEST_DUMMY_STEP)"
#endif

static void test_dummy_step_refused(void **s) {
    (void)s;
    int checked = 0;
    for (int b = 0; b < MTA_N_BACKENDS; b++) {
        const char *name = mta_backend_name((mta_backend)b);
        mta_config c = mta_config_default(2, 4, 8, 8);
        c.backend = (mta_backend)b;
        char why[512];
        if (mta_config_check(&c, why, sizeof why) != MTA_OK && strstr(why, "this libmtac has no")) {
            int built = b == MTA_BACKEND_REFERENCE || b == MTA_BACKEND_FUSED;
#ifdef MTAC_HAVE_CUDA
            built |= b == MTA_BACKEND_CUDA;
#endif
            if (built) fail_msg("the %s backend is missing: %s", name, why);
            printf("test_backend_support: skipped the %s backend: %s\n", name, why);
            continue;
        }
        // without the dummy step: accepted
        mta_ctx *ctx = NULL;
        if (mta_create(&ctx, &c, why, sizeof why) != MTA_OK) fail_msg("the %s backend refused a plain config: %s", name, why);
        mta_destroy(ctx);
        // with it, alone and beside every step: refused, saying which backend and which step
        char want[128];
        snprintf(want, sizeof want, "the %s backend does not compute the dummy step", name);
        for (int all = 0; all < 2; all++) {
            c.dummy_step = 1;
            if (all) c.pre_cq = 2, c.pre_ck = 3, c.pre_head_mix = 1, c.post_cq = 2, c.post_ck = 3, c.post_ch = 2;
            if (all) c.group_norm = c.depth_scale = c.gate = 1, c.dropout = 0.1f, c.H_kv = 2;
            ctx = NULL;
            const mta_status st = mta_create(&ctx, &c, why, sizeof why);
            if (st != MTA_ERR_INVALID || ctx || !strstr(why, want))
                fail_msg("the %s backend with the dummy step: status %d, \"%s\" (expected \"%s\")", name, (int)st, why, want);
            // and the same config without it runs
            c.dummy_step = 0;
            if (mta_create(&ctx, &c, why, sizeof why) != MTA_OK) fail_msg("the %s backend refused a config: %s", name, why);
            mta_destroy(ctx);
        }
        checked++;
    }
    printf("test_backend_support: %d backends refuse the dummy step\n", checked);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_dummy_step_refused)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
