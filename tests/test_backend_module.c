// test_backend_module.c MODULE_RIGHT MODULE_STALE MODULE_UNBUMPED MODULE_NONE: libmtac opens a
// backend module (libmtac_cuda.so) only when it was built for this libmtac's ABI (mta_module_open,
// mta_internal.h), and otherwise says why. The arguments are the four stand-ins of
// tests/backend_module.c.
#include "attn/mta_internal.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static const char *module[4];  // right, stale, unbumped, none

// mta_module_open of path must refuse it with a message containing each of the words.
static void expect_refused(const char *path, const char *w1, const char *w2) {
    char why[512] = "";
    const mta_backend_impl *impl = mta_module_open(path, NULL, "mta_test_backend", why, sizeof why);
    if (impl) fail_msg("%s was opened: it should be refused (%s)", path, w1);
    if (!strstr(why, w1) || !strstr(why, w2)) fail_msg("%s refused with \"%s\": expected \"%s\" and \"%s\"", path, why, w1, w2);
}

static void test_right_abi_opens(void **s) {
    (void)s;
    char why[512] = "";
    const mta_backend_impl *impl = mta_module_open(module[0], NULL, "mta_test_backend", why, sizeof why);
    if (!impl) fail_msg("the module of this ABI was refused: %s", why);
    assert_non_null(impl->available);
    assert_int_equal(impl->available(), 1);
    // the fallback is tried when the path cannot be opened
    impl = mta_module_open("no-such-dir/libnothing.so", module[0], "mta_test_backend", why, sizeof why);
    if (!impl) fail_msg("the fallback of a missing path was not opened: %s", why);
}

static void test_stale_abi_refused(void **s) {
    (void)s;
    char want[128];
    snprintf(want, sizeof want, "(ABI %d, this libmtac needs %d): rebuild it", MTA_BACKEND_ABI + 1, MTA_BACKEND_ABI);
    expect_refused(module[1], "is from another mtac", want);
}

static void test_unbumped_change_refused(void **s) {
    (void)s;
    expect_refused(module[2], "is from another mtac", "without a bump of MTA_BACKEND_ABI");
}

static void test_missing_abi_refused(void **s) {
    (void)s;
    expect_refused(module[3], "has no mtac_backend_abi", "rebuild it");
}

static void test_missing_module_refused(void **s) {
    (void)s;
    expect_refused("no-such-dir/libnothing.so", "could not be opened", "libnothing.so");
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: test_backend_module RIGHT STALE UNBUMPED NONE: the stand-in modules (tests/backend_module.c)\n");
        return 2;
    }
    for (int i = 0; i < 4; i++) module[i] = argv[i + 1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_right_abi_opens),       cmocka_unit_test(test_stale_abi_refused),
        cmocka_unit_test(test_unbumped_change_refused), cmocka_unit_test(test_missing_abi_refused),
        cmocka_unit_test(test_missing_module_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
