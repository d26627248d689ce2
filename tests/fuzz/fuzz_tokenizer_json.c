// fuzz_tokenizer_json.c: Hugging Face's tokenizer.json (src/tok/tokenizer_json.c,
// tokenizer_load_json). The input is the file. A tokenizer it accepts must encode a text (a fixed
// one with special-looking parts, then the input's own first bytes) to ids inside its vocabulary,
// decode them, and write itself out (tokenizer_save) as files that load back and encode the
// text to the same ids.
#include "fuzz_util.h"
#include "tok/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static void encode(tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n) {
    char msg[256];
    if (tokenizer_encode(t, text, len, 1, ids, n, msg, sizeof msg)) {
        *ids = NULL;  // a regex may give up (PCRE2's match limit): an error, not a finding
        return;
    }
    for (size_t i = 0; i < *n; i++) fuzz_require((*ids)[i] >= 0 && (*ids)[i] < tokenizer_vocab_size(t), "ids in the vocabulary");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char msg[512];
    tokenizer *t = tokenizer_load_json(fuzz_file(data, size), NULL, NULL, msg, sizeof msg);
    if (!t) return 0;
    char text[256] = "Hello, world! 123 <|im_start|>\xc3\xa9\xff  \n\t x";
    size_t len = strlen(text), extra = size < 64 ? size : 64;
    memcpy(text + len, data, extra);
    len += extra;
    int32_t *ids;
    size_t n;
    encode(t, text, len, &ids, &n);
    if (ids) {
        size_t out_len;
        char *back = tokenizer_decode(t, ids, n, 0, &out_len, msg, sizeof msg);
        fuzz_require(back != NULL, "the ids decode");
        free(back);
        if (tokenizer_save(t, fuzz_dir(), msg, sizeof msg) == 0) {
            tokenizer *u = tokenizer_load_run(fuzz_dir(), msg, sizeof msg);
            fuzz_require(u != NULL, "the saved tokenizer loads");
            int32_t *ids2;
            size_t n2;
            encode(u, text, len, &ids2, &n2);
            fuzz_require(ids2 && n2 == n && memcmp(ids, ids2, n * sizeof *ids) == 0, "the saved tokenizer encodes the same");
            free(ids2);
            tokenizer_free(u);
        }
        free(ids);
    }
    tokenizer_free(t);
    return 0;
}
