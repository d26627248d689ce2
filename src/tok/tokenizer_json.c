// tokenizer_json.c: Hugging Face's tokenizer.json, tokenizer_config.json and
// generation_config.json, read and written with cJSON; and tokenizers built from a spec (GGUF).
#include "tok/tok_internal.h"

#include "util/errmsg.h"

tokenizer *tokenizer_load_json(const char *tokenizer_json, const char *config_json, const char *gen_json, char *err,
                               size_t n) {
    errmsg(err, n, "%s: tokenizer.json not supported yet", tokenizer_json);
    return NULL;
}

tokenizer *tokenizer_from_spec(const tokenizer_spec *s, char *err, size_t n) {
    errmsg(err, n, "tokenizer spec not supported yet");
    return NULL;
}

int tokenizer_save(const tokenizer *t, const char *dir, char *err, size_t n) {
    if (t->kind == TOKENIZER_BYTES) return 0;
    return errmsg(err, n, "%s: saving a BPE tokenizer not supported yet", dir);
}
