// tokenizer.c: see tokenizer.h. The byte-level tokenizer, the accessors, a run's files, and the
// encoding pipeline of the BPE kinds: added tokens, normalizer, pre-tokenizer, merges (bpe.c).
#include "tok/tok_internal.h"

#include "data/tokenizer.h"
#include "io/fsutil.h"
#include "util/errmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

tokenizer *tokenizer_bytes(void) {
    static const char *const special[3] = {"<bos>", "<eos>", "<pad>"};
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kind = TOKENIZER_BYTES;
    t->n_vocab = TOK_VOCAB;
    t->piece = calloc(TOK_VOCAB, sizeof *t->piece);
    t->piece_len = calloc(TOK_VOCAB, sizeof *t->piece_len);
    if (!t->piece || !t->piece_len) {
        tokenizer_free(t);
        return NULL;
    }
    // A byte's piece is the byte itself; the specials' are their markers.
    for (int i = 0; i < TOK_VOCAB; i++) {
        t->piece[i] = calloc(8, 1);
        if (!t->piece[i]) {
            tokenizer_free(t);
            return NULL;
        }
        if (i < 256) t->piece[i][0] = (char)i;
        else strcpy(t->piece[i], special[i - 256]);
        t->piece_len[i] = i < 256 ? 1 : (uint32_t)strlen(t->piece[i]);
    }
    t->bos_id = TOK_BOS;
    t->pad_id = TOK_PAD;
    t->unk_id = -1;
    t->n_eos = 1;
    t->eos[0] = TOK_EOS;
    return t;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    if (t->piece)
        for (int i = 0; i < t->n_vocab; i++) free(t->piece[i]);
    free(t->piece);
    free(t->piece_len);
    free(t->map.slot);
    tok_merges_free(&t->merges);
    free(t->merge_left);
    free(t->merge_right);
    free(t->scores);
    free(t->types);
    for (int i = 0; i < t->n_pre; i++) pre_free(&t->pre[i]);
    for (int i = 0; i < t->n_dec; i++) {
        free(t->dec[i].from);
        free(t->dec[i].to);
        free(t->dec[i].content);
    }
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    word_re_free(t->word_re);
    free(t->chat_template);
    free(t->pre_name);
    free(t->bos_token);
    free(t->eos_token);
    free(t->pad_token);
    free(t->unk_token);
    bpe_cache_free(t);
    free(t);
}

static int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

tokenizer *tokenizer_load_run(const char *dir, char *err, size_t n) {
    char tj[4096], cj[4096], gj[4096];
    snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
    snprintf(cj, sizeof cj, "%s/tokenizer_config.json", dir);
    snprintf(gj, sizeof gj, "%s/generation_config.json", dir);
    if (!file_exists(tj)) {
        tokenizer *t = tokenizer_bytes();
        if (!t) errmsg(err, n, "out of memory");
        return t;
    }
    return tokenizer_load_json(tj, file_exists(cj) ? cj : NULL, file_exists(gj) ? gj : NULL, err, n);
}

tokenizer_kind tokenizer_get_kind(const tokenizer *t) { return t->kind; }
int tokenizer_vocab_size(const tokenizer *t) { return t->n_vocab; }
int tokenizer_bos_id(const tokenizer *t) { return t->bos_id; }
int tokenizer_add_bos(const tokenizer *t) { return t->add_bos; }
int tokenizer_n_eos(const tokenizer *t) { return t->n_eos; }
int tokenizer_eos_id(const tokenizer *t, int i) { return i >= 0 && i < t->n_eos ? t->eos[i] : -1; }
const char *tokenizer_chat_template(const tokenizer *t) { return t->chat_template; }

const char *tokenizer_piece(const tokenizer *t, int id) {
    return id >= 0 && id < t->n_vocab ? t->piece[id] : NULL;
}

int tokenizer_find(const tokenizer *t, const char *piece) {
    if (t->kind == TOKENIZER_BYTES) {
        for (int i = 0; i < t->n_vocab; i++)
            if (strlen(piece) == t->piece_len[i] && memcmp(piece, t->piece[i], t->piece_len[i]) == 0) return i;
        return -1;
    }
    return tok_map_get(t, piece, strlen(piece));
}

void *tok_grow(void *v, size_t *cap, size_t size, size_t first) {
    size_t c = *cap ? 2 * *cap : first;
    void *nv = realloc(v, c * size);
    if (nv) *cap = c;
    return nv;
}

int tok_ids_push(tok_ids *a, int32_t id) {
    int32_t *v = a->n < a->cap ? a->v : tok_grow(a->v, &a->cap, sizeof *v, 64);
    if (!v) return -1;
    a->v = v;
    a->v[a->n++] = id;
    return 0;
}

int tok_text_put(tok_text *b, const void *p, size_t k) {
    if (b->n + k + 1 > b->cap) {
        size_t cap = 2 * (b->n + k + 1) + 64;
        char *v = realloc(b->v, cap);
        if (!v) return -1;
        b->v = v;
        b->cap = cap;
    }
    memcpy(b->v + b->n, p, k);
    b->n += k;
    b->v[b->n] = 0;
    return 0;
}

// ---- UTF-8 ----

int utf8_len(const unsigned char *s, size_t n, int32_t *cp) {
    unsigned c = s[0];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (len == 0 || (size_t)len > n) {
        if (cp) *cp = -1;
        return 1;
    }
    uint32_t v = len == 1 ? c : len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            if (cp) *cp = -1;
            return 1;
        }
        v = v << 6 | (s[i] & 0x3f);
    }
    // overlong forms, surrogates and values past U+10FFFF are not UTF-8
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[len] || (v >= 0xd800 && v <= 0xdfff) || v > 0x10ffff) {
        if (cp) *cp = -1;
        return 1;
    }
    if (cp) *cp = (int32_t)v;
    return len;
}

int utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

// Unicode's White_Space property (what Rust's char::is_whitespace tests, for lstrip/rstrip).
int is_unicode_space(int32_t cp) {
    return (cp >= 9 && cp <= 13) || cp == 32 || cp == 0x85 || cp == 0xa0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f ||
           cp == 0x3000;
}
