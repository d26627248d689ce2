// encode.c: tokenizer_encode and tokenizer_decode for every kind.
#include "tok/tok_internal.h"

#include "data/tokenizer.h"
#include "util/errmsg.h"

#include <stdlib.h>
#include <string.h>

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int bos, int32_t **ids, size_t *n_ids, char *err,
                     size_t n) {
    tok_ids out = {0};
    *ids = NULL;
    *n_ids = 0;
    if (bos && t->bos_id >= 0 && tok_ids_push(&out, t->bos_id)) return errmsg(err, n, "out of memory");
    if (t->kind == TOKENIZER_BYTES) {
        for (size_t i = 0; i < len; i++)
            if (tok_ids_push(&out, (unsigned char)text[i])) {
                free(out.v);
                return errmsg(err, n, "out of memory");
            }
    } else {
        free(out.v);
        return errmsg(err, n, "BPE encoding not built yet");
    }
    if (!out.v) out.v = malloc(sizeof *out.v);
    *ids = out.v;
    *n_ids = out.n;
    return 0;
}

char *tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n_ids, int skip_special, size_t *len, char *err,
                       size_t n) {
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= t->n_vocab) {
            errmsg(err, n, "token id %d out of range (vocabulary %d)", (int)ids[i], t->n_vocab);
            return NULL;
        }
    if (t->kind == TOKENIZER_BYTES) {
        char *s = malloc(5 * n_ids + 1);
        if (!s) {
            errmsg(err, n, "out of memory");
            return NULL;
        }
        size_t k = 0;
        for (size_t i = 0; i < n_ids; i++) {
            if (ids[i] < 256) s[k++] = (char)ids[i];
            else if (!skip_special) {
                memcpy(s + k, t->piece[ids[i]], t->piece_len[ids[i]]);
                k += t->piece_len[ids[i]];
            }
        }
        s[k] = 0;
        if (len) *len = k;
        return s;
    }
    errmsg(err, n, "BPE decoding not built yet");
    return NULL;
}
