// tok_tool.c: the C side of the tokenizer comparisons (tests/ref/check_tokenizer.py) and of the
// tokenizer benchmark (bench/bench_tokenizer.py).
//   tok_tool encode (--run DIR | --spec SPEC.json) CORPUS.json   ids of each text, one JSON array a line
//   tok_tool save --spec SPEC.json DIR                           tokenizer.json + tokenizer_config.json
//   tok_tool bench --run DIR FILE [REPEATS]                      encodes FILE, prints MB/s
// CORPUS.json is a list of texts: strings, or {"hex": "..."} for bytes that are not UTF-8. Each
// line of encode's output is {"ids": [...], "roundtrip": true|false (decode(encode(x)) == x),
// "decoded": the hex of decode(ids)}.
// SPEC.json holds a GGUF file's tokenizer.ggml.* keys (tests/ref/check_tokenizer.py writes it).
#include "io/fsutil.h"
#include "tok/tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void die(const char *msg) {
    fprintf(stderr, "tok_tool: %s\n", msg);
    exit(2);
}

static cJSON *read_json(const char *path) {
    char err[512];
    char *text = read_text_file(path, (size_t)1 << 30, err, sizeof err);
    if (!text) die(err);
    cJSON *j = cJSON_Parse(text);
    free(text);
    if (!j) die("bad JSON");
    return j;
}

static tokenizer *from_spec_file(const char *path, cJSON **keep) {
    cJSON *j = *keep = read_json(path);
    tokenizer_spec s = {0};
    const char *model = cJSON_GetStringValue(cJSON_GetObjectItem(j, "tokenizer.ggml.model"));
    s.kind = model && !strcmp(model, "llama") ? TOKENIZER_BPE_SPM : TOKENIZER_BPE_BYTES;
    s.pre = cJSON_GetStringValue(cJSON_GetObjectItem(j, "tokenizer.ggml.pre"));
    cJSON *tokens = cJSON_GetObjectItem(j, "tokenizer.ggml.tokens"), *e;
    s.n_vocab = cJSON_GetArraySize(tokens);
    const char **tk = malloc((size_t)s.n_vocab * sizeof *tk);
    int32_t *types = malloc((size_t)s.n_vocab * sizeof *types);
    float *scores = malloc((size_t)s.n_vocab * sizeof *scores);
    int i = 0;
    cJSON_ArrayForEach(e, tokens) tk[i++] = e->valuestring;
    s.tokens = tk;
    cJSON *ty = cJSON_GetObjectItem(j, "tokenizer.ggml.token_type");
    i = 0;
    cJSON_ArrayForEach(e, ty) types[i++] = e->valueint;
    if (ty) s.types = types;
    cJSON *sc = cJSON_GetObjectItem(j, "tokenizer.ggml.scores");
    i = 0;
    cJSON_ArrayForEach(e, sc) scores[i++] = (float)e->valuedouble;
    if (sc) s.scores = scores;
    cJSON *merges = cJSON_GetObjectItem(j, "tokenizer.ggml.merges");
    s.n_merges = cJSON_GetArraySize(merges);
    const char **mg = malloc(((size_t)s.n_merges + 1) * sizeof *mg);
    i = 0;
    cJSON_ArrayForEach(e, merges) mg[i++] = e->valuestring;
    s.merges = mg;
    const char *keys[4] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.unknown_token_id",
                           "tokenizer.ggml.padding_token_id"};
    int *ids[4] = {&s.bos_id, &s.eos_id, &s.unk_id, &s.pad_id};
    for (int k = 0; k < 4; k++) {
        cJSON *v = cJSON_GetObjectItem(j, keys[k]);
        *ids[k] = cJSON_IsNumber(v) ? v->valueint : -1;
    }
    s.add_bos = cJSON_IsTrue(cJSON_GetObjectItem(j, "tokenizer.ggml.add_bos_token"));
    s.add_eos = cJSON_IsTrue(cJSON_GetObjectItem(j, "tokenizer.ggml.add_eos_token"));
    s.no_space_prefix = cJSON_IsFalse(cJSON_GetObjectItem(j, "tokenizer.ggml.add_space_prefix"));
    s.chat_template = cJSON_GetStringValue(cJSON_GetObjectItem(j, "tokenizer.chat_template"));
    char err[512];
    tokenizer *t = tokenizer_from_spec(&s, err, sizeof err);
    free(tk);
    free(types);
    free(scores);
    free(mg);
    if (!t) die(err);
    return t;
}

static tokenizer *open_tok(const char *how, const char *path, cJSON **keep) {
    char err[512];
    *keep = NULL;
    if (!strcmp(how, "--spec")) return from_spec_file(path, keep);
    tokenizer *t = tokenizer_load_run(path, err, sizeof err);
    if (!t) die(err);
    return t;
}

static unsigned char *text_of(cJSON *e, size_t *len) {
    if (cJSON_IsString(e)) {
        *len = strlen(e->valuestring);
        return (unsigned char *)strdup(e->valuestring);
    }
    const char *hex = cJSON_GetStringValue(cJSON_GetObjectItem(e, "hex"));
    if (!hex) die("corpus: an item is neither a string nor {\"hex\": ...}");
    *len = strlen(hex) / 2;
    unsigned char *b = malloc(*len + 1);
    for (size_t i = 0; i < *len; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        b[i] = (unsigned char)v;
    }
    return b;
}

int main(int argc, char **argv) {
    if (argc < 4) die("usage: tok_tool encode|save|bench ...");
    cJSON *keep;
    char err[512];
    if (!strcmp(argv[1], "encode") && argc == 5) {
        tokenizer *t = open_tok(argv[2], argv[3], &keep);
        cJSON *corpus = read_json(argv[4]), *e;
        cJSON_ArrayForEach(e, corpus) {
            size_t len, n;
            unsigned char *text = text_of(e, &len);
            int32_t *ids;
            if (tokenizer_encode(t, (const char *)text, len, 0, &ids, &n, err, sizeof err)) die(err);
            size_t blen;
            char *back = tokenizer_decode(t, ids, n, 0, &blen, err, sizeof err);
            if (!back) die(err);
            printf("{\"ids\": [");
            for (size_t i = 0; i < n; i++) printf("%s%d", i ? ", " : "", ids[i]);
            printf("], \"roundtrip\": %s, \"decoded\": \"", blen == len && memcmp(back, text, len) == 0 ? "true" : "false");
            for (size_t i = 0; i < blen; i++) printf("%02x", (unsigned char)back[i]);
            printf("\"}\n");
            free(back);
            free(ids);
            free(text);
        }
        cJSON_Delete(corpus);
        tokenizer_free(t);
    } else if (!strcmp(argv[1], "save") && argc == 5) {
        tokenizer *t = open_tok(argv[2], argv[3], &keep);
        if (tokenizer_save(t, argv[4], err, sizeof err)) die(err);
        tokenizer_free(t);
    } else if (!strcmp(argv[1], "bench") && argc >= 5) {
        tokenizer *t = open_tok(argv[2], argv[3], &keep);
        char *text = read_text_file(argv[4], (size_t)1 << 31, err, sizeof err);
        if (!text) die(err);
        int reps = argc > 5 ? atoi(argv[5]) : 1;
        size_t len = strlen(text), n = 0, total = 0;
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int r = 0; r < reps; r++) {
            int32_t *ids;
            if (tokenizer_encode(t, text, len, 0, &ids, &n, err, sizeof err)) die(err);
            total += n;
            free(ids);
        }
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        printf("{\"bytes\": %zu, \"tokens\": %zu, \"seconds\": %.6f, \"mb_per_s\": %.3f}\n", len * (size_t)reps, total, s,
               (double)len * reps / s / 1e6);
        free(text);
        tokenizer_free(t);
    } else {
        die("usage: tok_tool encode|save|bench ...");
    }
    cJSON_Delete(keep);
    return 0;
}
