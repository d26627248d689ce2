// test_tokstream.c: the streamed text of generated tokens (src/tok/stream.c): whole UTF-8
// characters only, the same bytes as decoding everything at once, and the U+FFFD replacement of
// invalid bytes as Python's decode(errors="replace") makes it (the expected strings are Python's).
#include "tok/stream.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static void test_complete(void **state) {
    (void)state;
    assert_int_equal(utf8_complete("ab", 2), 2);
    assert_int_equal(utf8_complete("a\xC3", 2), 1);             // é cut after its lead byte
    assert_int_equal(utf8_complete("a\xC3\xA9", 3), 3);
    assert_int_equal(utf8_complete("\xF0\x9F\x99", 3), 0);      // 🙂 missing its last byte
    assert_int_equal(utf8_complete("\xF0\x9F\x99\x82", 4), 4);
    assert_int_equal(utf8_complete("a\x80", 2), 2);             // a stray continuation: never completes
    assert_int_equal(utf8_complete("a\xE0\x80", 3), 3);         // an overlong prefix: never completes
    assert_int_equal(utf8_complete("\xFF", 1), 1);
}

static void test_sanitize(void **state) {
    (void)state;
    static const char *const cases[][2] = {
        {"\xE0\xA0x", "\xEF\xBF\xBDx"},
        {"\xC0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xF0\x9F\x99", "\xEF\xBF\xBD"},
        {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"a\xFF\xFE" "b", "a\xEF\xBF\xBD\xEF\xBF\xBD" "b"},
        {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
        {"\xE2\x82", "\xEF\xBF\xBD"},
        {"h\xC3\xA9llo \xF0\x9F\x99\x82", "h\xC3\xA9llo \xF0\x9F\x99\x82"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len;
        char *s = utf8_sanitize(cases[i][0], strlen(cases[i][0]), &len);
        assert_non_null(s);
        assert_int_equal(len, strlen(cases[i][1]));
        assert_string_equal(s, cases[i][1]);
        free(s);
    }
}

// Bytes streamed one id at a time: each piece ends on a whole character, and the pieces make the
// text of all the ids, across the windows' restarts (300 ids, windows of at least 64).
static void test_stream(void **state) {
    (void)state;
    tokenizer *t = tokenizer_bytes();
    char text[1024] = "", err[256];
    const char *unit = "a\xC3\xA9\xF0\x9F\x99\x82 \xE2\x82\xAC";  // a é 🙂 space €: 1+2+4+1+3 bytes
    for (int r = 0; r < 27; r++) strcat(text, unit);
    const size_t n = strlen(text);
    int32_t *ids = malloc(n * sizeof *ids);
    for (size_t i = 0; i < n; i++) ids[i] = (unsigned char)text[i];
    char got[1024] = "";
    size_t at = 0;
    tok_stream s;
    tok_stream_init(&s, t);
    for (size_t i = 1; i <= n; i++) {
        char *piece;
        size_t len;
        assert_int_equal(tok_stream_next(&s, ids, i, i == n, &piece, &len, err, sizeof err), 0);
        assert_int_equal(utf8_complete(piece, len), len);
        memcpy(got + at, piece, len), at += len;
        free(piece);
        // what is out is the text of ids[0..i) up to its last whole character
        assert_int_equal(at, utf8_complete(text, i));
    }
    assert_int_equal(at, n);
    assert_memory_equal(got, text, n);
    free(ids);
    tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_complete),
        cmocka_unit_test(test_sanitize),
        cmocka_unit_test(test_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
