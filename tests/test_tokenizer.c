// test_tokenizer.c: the tokenizers of src/tok: the byte-level one, byte-level BPE and SentencePiece
// BPE built from small tokenizer.json files and specs, added tokens, decoding, and the errors of
// malformed files. (The comparison with Hugging Face's tokenizers and llama.cpp on a corpus is
// tests/ref/check_tokenizer.py.)
#include "tok/tok_internal.h"
#include "tok/tokenizer.h"

#include <cjson/cJSON.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static char dir[64];

static int setup(void **s) {
    (void)s;
    snprintf(dir, sizeof dir, "/tmp/mtac_test_tok_%d", (int)getpid());
    mkdir(dir, 0700);
    return 0;
}

static int teardown(void **s) {
    (void)s;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void write_json(const char *name, cJSON *j) {
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = cJSON_Print(j);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    free(text);
    cJSON_Delete(j);
}

// A byte-level BPE tokenizer.json: the 256 byte characters (id = byte), then "he", "ll", "hell",
// "hello" by the merges "h e", "l l", "he ll", "hell o", and the added token "<|s|>" (id 260).
static cJSON *tiny_bytelevel(int lstrip, int rstrip) {
    cJSON *root = cJSON_CreateObject();
    cJSON *m = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON *v = cJSON_AddObjectToObject(m, "vocab");
    for (int b = 0; b < 256; b++) {
        char c[8] = {0};
        bytelevel_char((unsigned char)b, c);
        cJSON_AddNumberToObject(v, c, b);
    }
    const char *words[] = {"he", "ll", "hell", "hello"};
    for (int i = 0; i < 4; i++) cJSON_AddNumberToObject(v, words[i], 256 + i);
    cJSON *mg = cJSON_AddArrayToObject(m, "merges");
    const char *merges[] = {"h e", "l l", "he ll", "hell o"};
    for (int i = 0; i < 4; i++) cJSON_AddItemToArray(mg, cJSON_CreateString(merges[i]));
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "ByteLevel");
    cJSON_AddBoolToObject(pre, "add_prefix_space", 0);
    cJSON_AddBoolToObject(pre, "use_regex", 1);
    cJSON_AddStringToObject(cJSON_AddObjectToObject(root, "decoder"), "type", "ByteLevel");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "id", 260);
    cJSON_AddStringToObject(a, "content", "<|s|>");
    cJSON_AddBoolToObject(a, "special", 1);
    cJSON_AddBoolToObject(a, "lstrip", lstrip);
    cJSON_AddBoolToObject(a, "rstrip", rstrip);
    cJSON_AddItemToArray(added, a);
    return root;
}

static tokenizer *load(const char *name) {
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tokenizer *t = tokenizer_load_json(path, NULL, NULL, err, sizeof err);
    if (!t) fprintf(stderr, "%s\n", err);
    return t;
}

static void expect_ids(tokenizer *t, const char *text, const int32_t *want, size_t n_want) {
    int32_t *ids;
    size_t n;
    char err[256];
    assert_int_equal(tokenizer_encode(t, text, strlen(text), 0, &ids, &n, err, sizeof err), 0);
    if (n != n_want || memcmp(ids, want, n * sizeof *ids)) {
        fprintf(stderr, "\"%s\":", text);
        for (size_t i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, "\n");
    }
    assert_int_equal(n, n_want);
    assert_memory_equal(ids, want, n * sizeof *ids);
    free(ids);
}

static void test_bytelevel_json(void **s) {
    (void)s;
    write_json("tokenizer.json", tiny_bytelevel(0, 0));
    tokenizer *t = load("tokenizer.json");
    assert_non_null(t);
    assert_int_equal(tokenizer_get_kind(t), TOKENIZER_BPE_BYTES);
    assert_int_equal(tokenizer_vocab_size(t), 261);
    // the merges by rank; " hello" is "Ġ" + "hello" (no "Ġh" merge)
    expect_ids(t, "hello hello", (const int32_t[]){259, 32, 259}, 3);
    expect_ids(t, "hel", (const int32_t[]){256, 'l'}, 2);
    expect_ids(t, "", NULL, 0);
    // the added token inside a word and beside spaces (kept: no lstrip/rstrip)
    expect_ids(t, "he<|s|> x", (const int32_t[]){256, 260, 32, 'x'}, 4);
    expect_ids(t, "<|s", (const int32_t[]){'<', '|', 's'}, 3);
    // a byte that is not UTF-8 reads as U+FFFD (its three bytes' characters here)
    expect_ids(t, "\xff", (const int32_t[]){0xef, 0xbf, 0xbd}, 3);
    char err[256];
    size_t len;
    int32_t ids[] = {259, 32, 260, 'x', 0xc3, 0xa9};
    char *text = tokenizer_decode(t, ids, 6, 0, &len, err, sizeof err);
    assert_string_equal(text, "hello <|s|>x\xc3\xa9");
    free(text);
    text = tokenizer_decode(t, ids, 6, 1, &len, err, sizeof err);
    assert_string_equal(text, "hello x\xc3\xa9");
    free(text);
    tokenizer_free(t);

    // lstrip and rstrip take the spaces around the token with it
    write_json("strip.json", tiny_bytelevel(1, 1));
    t = load("strip.json");
    assert_non_null(t);
    expect_ids(t, "he  <|s|>  x", (const int32_t[]){256, 260, 'x'}, 3);
    tokenizer_free(t);
}

// A Llama-2-style SentencePiece BPE as a GGUF holds it: scores, byte tokens, control tokens.
static void test_spm_spec(void **s) {
    (void)s;
    const char *words[] = {"\xe2\x96\x81", "h", "e", "l", "o", "\xe2\x96\x81h", "ll", "\xe2\x96\x81he", "llo", "\xe2\x96\x81hello"};
    enum { NW = 10, NV = 3 + 256 + NW };
    const char *tokens[NV];
    char bytes[256][8];
    float scores[NV];
    int32_t types[NV];
    tokens[0] = "<unk>", tokens[1] = "<s>", tokens[2] = "</s>";
    types[0] = 2, types[1] = types[2] = 3;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        tokens[3 + b] = bytes[b];
        types[3 + b] = 6;
    }
    for (int i = 0; i < NV; i++) scores[i] = 0;
    for (int i = 0; i < NW; i++) {
        tokens[259 + i] = words[i];
        types[259 + i] = 1;
        scores[259 + i] = (float)-i;  // longer pieces later in the vocabulary, lower scores
    }
    tokenizer_spec spec = {.kind = TOKENIZER_BPE_SPM, .n_vocab = NV, .tokens = tokens, .scores = scores, .types = types,
                           .bos_id = 1, .eos_id = 2, .unk_id = 0, .pad_id = -1, .add_bos = 1};
    char err[512];
    tokenizer *t = tokenizer_from_spec(&spec, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(tokenizer_add_bos(t), 1);
    // "▁hello": pairs whose text is a token merge, the best score first
    expect_ids(t, "hello", (const int32_t[]){259 + 9}, 1);
    // é has no token: its bytes; "<s>" in the text is the control token
    expect_ids(t, "h\xc3\xa9", (const int32_t[]){259 + 5, 3 + 0xc3, 3 + 0xa9}, 3);
    expect_ids(t, "<s>hello", (const int32_t[]){1, 259 + 9}, 2);
    int32_t ids[] = {259 + 9, 259 + 0, 259 + 5, 3 + 0xc3, 3 + 0xa9};
    size_t len;
    char *text = tokenizer_decode(t, ids, 5, 0, &len, err, sizeof err);
    assert_string_equal(text, "hello  h\xc3\xa9");  // the first space stripped, as Hugging Face does
    free(text);
    // saved and loaded again: the same ids
    assert_int_equal(tokenizer_save(t, dir, err, sizeof err), 0);
    tokenizer *u = tokenizer_load_run(dir, err, sizeof err);
    assert_non_null(u);
    assert_int_equal(tokenizer_get_kind(u), TOKENIZER_BPE_SPM);
    assert_int_equal(tokenizer_bos_id(u), 1);
    assert_int_equal(tokenizer_add_bos(u), 1);
    assert_int_equal(tokenizer_eos_id(u, 0), 2);
    expect_ids(u, "hello", (const int32_t[]){259 + 9}, 1);
    expect_ids(u, "h\xc3\xa9", (const int32_t[]){259 + 5, 3 + 0xc3, 3 + 0xa9}, 3);
    tokenizer_free(u);
    tokenizer_free(t);
    char path[128];
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    remove(path);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    remove(path);
}

// Split's behaviours on Hugging Face's example, "the-final--countdown" split on "-".
typedef struct {
    char out[256];
} pieces;
static int collect(void *ctx, const unsigned char *s, size_t len) {
    pieces *p = ctx;
    strncat(p->out, "[", sizeof p->out - strlen(p->out) - 1);
    strncat(p->out, (const char *)s, len < sizeof p->out - strlen(p->out) - 1 ? len : 0);
    strncat(p->out, "]", sizeof p->out - strlen(p->out) - 1);
    return 0;
}

static void test_split_behaviours(void **s) {
    (void)s;
    static const char *const want[] = {"[the][final][countdown]", "[the][-][final][-][-][countdown]",
                                       "[the-][final-][-][countdown]", "[the][-final][-][-countdown]",
                                       "[the][-][final][--][countdown]"};
    for (int b = 0; b < 5; b++) {
        tokenizer t = {.kind = TOKENIZER_BPE_BYTES, .n_pre = 1};
        char err[256];
        assert_int_equal(pre_compile(&t.pre[0], "-", err, sizeof err), 0);
        t.pre[0].behavior = (tok_split_behavior)b;
        pieces p = {{0}};
        const char *text = "the-final--countdown";
        assert_int_equal(pretokenize(&t, (const unsigned char *)text, strlen(text), 1, collect, &p, err, sizeof err), 0);
        assert_string_equal(p.out, want[b]);
        pre_free(&t.pre[0]);
    }
}

// Malformed files: an error naming the file and the field, never a crash.
static void expect_error(cJSON *j, const char *want1, const char *want2) {
    write_json("bad.json", j);
    char path[128], err[512] = "";
    snprintf(path, sizeof path, "%s/bad.json", dir);
    tokenizer *t = tokenizer_load_json(path, NULL, NULL, err, sizeof err);
    if (t || !strstr(err, path) || !strstr(err, want1) || !strstr(err, want2))
        fprintf(stderr, "message: %s (want %s, %s)\n", err, want1, want2);
    assert_null(t);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, want1));
    assert_non_null(strstr(err, want2));
}

static void test_malformed(void **s) {
    (void)s;
    cJSON *j = tiny_bytelevel(0, 0);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(j, "model"), "type", cJSON_CreateString("WordPiece"));
    expect_error(j, "model.type", "WordPiece");
    j = tiny_bytelevel(0, 0);
    cJSON_AddItemToArray(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "model"), "merges"), cJSON_CreateString("he zz"));
    expect_error(j, "model.merges[4]", "right token");
    j = tiny_bytelevel(0, 0);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(j, "model"), "vocab");
    expect_error(j, "model.vocab", "missing");
    j = tiny_bytelevel(0, 0);
    cJSON *pre = cJSON_CreateObject();
    cJSON_AddStringToObject(pre, "type", "Split");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(pre, "pattern"), "Regex", "(unclosed");
    cJSON_AddStringToObject(pre, "behavior", "Isolated");
    cJSON_ReplaceItemInObject(j, "pre_tokenizer", pre);
    expect_error(j, "pre_tokenizer.pattern", "(unclosed");
    j = tiny_bytelevel(0, 0);
    cJSON *norm = cJSON_CreateObject();
    cJSON_AddStringToObject(norm, "type", "NFC");
    cJSON_AddItemToObject(j, "normalizer", norm);
    expect_error(j, "normalizer", "NFC");
    j = tiny_bytelevel(0, 0);
    cJSON *dec = cJSON_CreateObject();
    cJSON_AddStringToObject(dec, "type", "WordPiece");
    cJSON_ReplaceItemInObject(j, "decoder", dec);
    expect_error(j, "decoder", "WordPiece");
    expect_error(cJSON_CreateArray(), "not a JSON object", "");
    char err[512];
    assert_null(tokenizer_load_json("/nonexistent/tokenizer.json", NULL, NULL, err, sizeof err));
    assert_non_null(strstr(err, "/nonexistent/tokenizer.json"));
    // a spec with an unknown pre type
    const char *tokens[] = {"a"};
    tokenizer_spec spec = {.kind = TOKENIZER_BPE_BYTES, .pre = "chatglm-bpe", .n_vocab = 1, .tokens = tokens,
                           .bos_id = -1, .eos_id = -1, .unk_id = -1, .pad_id = -1};
    assert_null(tokenizer_from_spec(&spec, err, sizeof err));
    assert_non_null(strstr(err, "chatglm-bpe"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes),
        cmocka_unit_test_setup_teardown(test_bytelevel_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spm_spec, setup, teardown),
        cmocka_unit_test(test_split_behaviours),
        cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
