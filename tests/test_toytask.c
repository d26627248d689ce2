// test_toytask.c: the toy-task generator follows docs/spec.md section 4.
#include "toy/toytask.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

static void test_paper_rows(void **s) {
    (void)s;
    toy_config c = toy_config_paper();
    char err[256];
    assert_int_equal(toy_config_check(&c, err, sizeof err), 0);
    assert_int_equal(toy_row_len(&c), 321);
    uint64_t rng = 42;
    int row[321], tok[320], tgt[320];
    for (int it = 0; it < 200; it++) {
        toy_generate(&c, &rng, row);
        assert_int_equal(row[0], TOY_BOS);
        assert_int_equal(row[312], TOY_HASH);
        assert_int_equal(row[320], TOY_EOS);
        const int *q = row + 313, *ans = row + 315;
        assert_true(q[0] != q[1]);
        // the blocks: 52 of 5 distinct letters separated by '.', distinct from each other
        int target_hits = 0;
        for (int b = 0; b < 52; b++) {
            const int *bl = row + 1 + 6 * b;
            if (b < 51) assert_int_equal(bl[5], TOY_DOT);
            int hasq0 = 0, hasq1 = 0;
            for (int i = 0; i < 5; i++) {
                assert_true(bl[i] >= 0 && bl[i] < 26);
                for (int j = i + 1; j < 5; j++) assert_true(bl[i] != bl[j]);
                hasq0 |= bl[i] == q[0], hasq1 |= bl[i] == q[1];
            }
            if (hasq0 && hasq1) {
                target_hits++;
                assert_memory_equal(bl, ans, 5 * sizeof(int));  // the answer is that block, in order
            }
            for (int e = 0; e < b; e++) assert_true(memcmp(row + 1 + 6 * e, bl, 5 * sizeof(int)) != 0);
        }
        assert_int_equal(target_hits, 1);
        // the loss sees exactly the 5 answer letters and EOS
        toy_example(&c, row, tok, tgt);
        int scored = 0;
        for (int t = 0; t < 320; t++)
            if (tgt[t] >= 0) scored++, assert_true(t >= 314);
        assert_int_equal(scored, 6);
        assert_int_equal(tgt[319], TOY_EOS);
    }
}

static void test_deterministic_and_text(void **s) {
    (void)s;
    toy_config c = toy_config_paper();
    uint64_t a = 7, b = 7;
    int r1[321], r2[321];
    toy_generate(&c, &a, r1);
    toy_generate(&c, &b, r2);
    assert_memory_equal(r1, r2, sizeof r1);
    assert_true(toy_row_hash(&c, r1) == toy_row_hash(&c, r2));
    toy_generate(&c, &a, r2);
    assert_true(toy_row_hash(&c, r1) != toy_row_hash(&c, r2));
    char text[400];
    toy_row_text(&c, r1, text, sizeof text);
    assert_int_equal(strlen(text), 322);  // 321 tokens and the '>' marker
    assert_int_equal(text[0], '^');
    assert_non_null(strchr(text, '#'));
}

static void test_bad_configs(void **s) {
    (void)s;
    char err[256];
    toy_config c = {52, 5, 6, 26};
    assert_int_equal(toy_config_check(&c, err, sizeof err), -1);
    c = (toy_config){52, 5, 2, 27};
    assert_int_equal(toy_config_check(&c, err, sizeof err), -1);
    c = (toy_config){100, 2, 2, 4};  // 12 ordered pairs, 2 of them hold the query: 10 < 2*99
    assert_int_equal(toy_config_check(&c, err, sizeof err), -1);
    assert_non_null(strstr(err, "distractor"));
    c = (toy_config){8, 3, 2, 8};  // small settings work
    assert_int_equal(toy_config_check(&c, err, sizeof err), 0);
    uint64_t rng = 1;
    int row[64];
    toy_generate(&c, &rng, row);
    assert_int_equal(row[toy_row_len(&c) - 1], TOY_EOS);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_paper_rows), cmocka_unit_test(test_deterministic_and_text),
                                       cmocka_unit_test(test_bad_configs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
