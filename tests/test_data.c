// test_data.c: token shards (round trip, every kind of corruption) and the batch sampler
// (determinism, saved state, bounds).
#include "data/dataloader.h"
#include "data/shard.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char path[64];

static int setup(void **s) {
    (void)s;
    snprintf(path, sizeof path, "/tmp/mtac_test_shard_%d.bin", (int)getpid());
    return 0;
}
static int teardown(void **s) {
    (void)s;
    remove(path);
    return 0;
}

static void write_sample(int dtype, size_t n) {
    uint32_t *t = malloc((n + 1) * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = (uint32_t)(i * 7919 % 259);
    char err[256];
    assert_int_equal(shard_write(path, t, n, dtype, err, sizeof err), 0);
    free(t);
}

static void test_round_trip(void **s) {
    (void)s;
    int dtypes[2] = {SHARD_U16, SHARD_U32};
    size_t sizes[3] = {0, 1, 1000};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 3; k++) {
            write_sample(dtypes[d], sizes[k]);
            shard sh;
            char err[256];
            assert_int_equal(shard_read(path, &sh, err, sizeof err), 0);
            assert_int_equal(sh.n, sizes[k]);
            assert_int_equal(sh.dtype, dtypes[d]);
            for (size_t i = 0; i < sh.n; i++) assert_int_equal(sh.tokens[i], i * 7919 % 259);
            shard_free(&sh);
        }
    uint32_t big = 70000;
    char err[256];
    assert_int_equal(shard_write(path, &big, 1, SHARD_U16, err, sizeof err), -1);
    assert_non_null(strstr(err, "uint16"));
}

// Rewrites one byte of the file (or its length) and expects an error mentioning needle.
static void corrupt(long at, int byte, long truncate_to, const char *needle) {
    write_sample(SHARD_U16, 100);
    FILE *f = fopen(path, "r+b");
    if (at >= 0) {
        fseek(f, at, SEEK_SET);
        fputc(byte, f);
    }
    fclose(f);
    if (truncate_to >= 0) assert_int_equal(truncate(path, truncate_to), 0);
    shard sh;
    char err[256] = "";
    assert_int_equal(shard_read(path, &sh, err, sizeof err), -1);
    if (!strstr(err, needle)) fail_msg("'%s' does not mention '%s'", err, needle);
    assert_null(sh.tokens);
}

static void test_corruption(void **s) {
    (void)s;
    corrupt(0, 'X', -1, "bad magic");
    corrupt(8, 9, -1, "version");
    corrupt(12, 7, -1, "dtype");
    corrupt(16, 200, -1, "header says");
    corrupt(64 + 11, 0x55, -1, "checksum");
    corrupt(-1, 0, 10, "too short");
    corrupt(-1, 0, 64 + 199, "truncated");
    corrupt(-1, 0, 64 + 202, "padded");
    shard sh;
    char err[256];
    assert_int_equal(shard_read("/nonexistent/x.bin", &sh, err, sizeof err), -1);
    assert_int_equal(shard_read("/tmp", &sh, err, sizeof err), -1);
}

static void test_loader(void **s) {
    (void)s;
    write_sample(SHARD_U16, 500);
    dataloader a, b;
    char err[256];
    assert_int_equal(dataloader_open(&a, path, 3, 16, 5, err, sizeof err), 0);
    assert_int_equal(dataloader_open(&b, path, 3, 16, 5, err, sizeof err), 0);
    int ta[48], ga[48], tb[48], gb[48];
    for (int i = 0; i < 20; i++) {
        dataloader_next(&a, ta, ga);
        dataloader_next(&b, tb, gb);
        assert_memory_equal(ta, tb, sizeof ta);
        for (int j = 0; j < 48; j++) {
            assert_true(ta[j] >= 0 && ta[j] < 259);
            if (j % 16 < 15) assert_int_equal(ga[j], ta[j + 1]);  // targets are the next tokens
        }
    }
    // a saved state continues identically
    char st[64];
    dataloader_state_str(&a, st, sizeof st);
    dataloader_next(&a, ta, ga);
    assert_int_equal(dataloader_state_parse(&b, st), 0);
    dataloader_next(&b, tb, gb);
    assert_memory_equal(ta, tb, sizeof ta);
    assert_int_equal(dataloader_state_parse(&b, "xyz"), -1);
    dataloader_close(&a);
    dataloader_close(&b);
    // too short for one window
    assert_int_equal(dataloader_open(&a, path, 1, 500, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "fewer than"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corruption, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loader, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
