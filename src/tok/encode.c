// encode.c: tokenizer_encode and tokenizer_decode for every kind: added tokens found in the text
// as Hugging Face finds them, the normalizer, the pre-tokenizer (pretok.c), the merges (bpe.c),
// and the decoders.
#include "tok/tok_internal.h"

#include "util/errmsg.h"

#include <stdlib.h>
#include <string.h>

// ---- added tokens ----

typedef struct {
    size_t start, end;
    int id;  // -1: text to tokenize
} seg;
typedef struct {
    seg *v;
    size_t n, cap;
} segs;

static int segs_push(segs *a, size_t start, size_t end, int id) {
    seg *v = a->n < a->cap ? a->v : tok_grow(a->v, &a->cap, sizeof *v, 16);
    if (!v) return -1;
    a->v = v;
    a->v[a->n++] = (seg){start, end, id};
    return 0;
}

// The start of the run of whitespace that ends at s[end].
static size_t space_run_before(const unsigned char *s, size_t lo, size_t end) {
    while (end > lo) {
        size_t b = end - 1;
        while (b > lo && (s[b] & 0xc0) == 0x80 && end - b < 4) b--;
        int32_t cp;
        int k = utf8_len(s + b, end - b, &cp);
        if ((size_t)k != end - b || !is_unicode_space(cp)) break;
        end = b;
    }
    return end;
}

static size_t space_run_after(const unsigned char *s, size_t at, size_t len) {
    while (at < len) {
        int32_t cp;
        int k = utf8_len(s + at, len - at, &cp);
        if (!is_unicode_space(cp)) break;
        at += (size_t)k;
    }
    return at;
}

// The added tokens (those with normalized == norm) in s[0..len), leftmost-longest, with
// single_word, lstrip and rstrip as Hugging Face applies them; the text between them as id -1.
static int added_split(const tokenizer *t, const unsigned char *s, size_t len, int norm, segs *out) {
    size_t from = 0;  // the end of the last token taken
    for (size_t i = 0; i < len;) {
        if (!t->added_first[s[i]]) {
            i++;
            continue;
        }
        int best = -1;
        size_t best_len = 0;
        for (int k = 0; k < t->n_added; k++) {
            const tok_added *a = &t->added[k];
            if (a->normalized != norm || a->len <= best_len || a->len > len - i) continue;
            if (memcmp(s + i, a->content, a->len) == 0) {
                best = k;
                best_len = a->len;
            }
        }
        if (best < 0) {
            i++;
            continue;
        }
        const tok_added *a = &t->added[best];
        size_t start = i, stop = i + a->len;
        i = stop;
        if (a->single_word && t->word_re &&
            (is_word_char(t->word_re, s, start, 0) || is_word_char(t->word_re, s + stop, len - stop, 1)))
            continue;
        if (a->lstrip) {
            size_t ns = space_run_before(s, 0, start);
            start = ns > from ? ns : from;
        }
        if (a->rstrip) stop = space_run_after(s, stop, len);
        if (from < start && segs_push(out, from, start, -1)) return -1;
        if (segs_push(out, start, stop, a->id)) return -1;
        from = i = stop;
    }
    if (from < len && segs_push(out, from, len, -1)) return -1;
    return 0;
}

// ---- the pipeline ----

typedef struct {
    tokenizer *t;
    tok_ids *out;
} word_ctx;

static int on_word(void *ctx, const unsigned char *w, size_t len) {
    word_ctx *c = ctx;
    return bpe_encode_word(c->t, w, len, c->out);
}

// The normalizer: Prepend("▁") to a non-empty text, Replace(" ", "▁"). NULL when there is none.
static unsigned char *normalize(const tokenizer *t, const unsigned char *s, size_t len, size_t *nlen) {
    if (!t->norm_prepend && !t->norm_replace_space) return NULL;
    unsigned char *b = malloc(3 * len + 4);
    if (!b) return NULL;
    *nlen = tok_space_marks(b, s, len, t->norm_prepend && len, t->norm_replace_space);
    return b;
}

// Byte-level BPE: each byte that is not part of a UTF-8 character becomes U+FFFD, as llama.cpp
// reads text (the vocabulary may not even hold the bytes that never occur in UTF-8). NULL when
// the text is all UTF-8 (or out of memory: *bad set).
static unsigned char *replace_invalid(const unsigned char *s, size_t len, size_t *nlen, int *bad) {
    size_t n_bad = 0;
    *bad = 0;
    for (size_t j = 0; j < len;) {
        if (s[j] < 0x80) {
            j++;
            continue;
        }
        int32_t cp;
        j += (size_t)utf8_len(s + j, len - j, &cp);
        n_bad += cp < 0;
    }
    if (!n_bad) return NULL;
    unsigned char *b = malloc(len + 2 * n_bad + 1);
    if (!b) {
        *bad = 1;
        return NULL;
    }
    size_t k = 0;
    for (size_t j = 0; j < len;) {
        int32_t cp;
        int m = utf8_len(s + j, len - j, &cp);
        if (cp < 0) {
            memcpy(b + k, "\xef\xbf\xbd", 3);
            k += 3;
        } else {
            memcpy(b + k, s + j, (size_t)m);
            k += (size_t)m;
        }
        j += (size_t)m;
    }
    *nlen = k;
    return b;
}

static int encode_text(tokenizer *t, const unsigned char *s, size_t len, int first, tok_ids *out, char *err, size_t n) {
    size_t nlen = len;
    unsigned char *norm = NULL;
    if (t->kind == TOKENIZER_BPE_BYTES) {
        int bad;
        norm = replace_invalid(s, len, &nlen, &bad);
        if (bad) return errmsg(err, n, "out of memory");
        if (norm) s = norm;
    } else if (t->norm_prepend || t->norm_replace_space) {
        norm = normalize(t, s, len, &nlen);
        if (!norm) return errmsg(err, n, "out of memory");
        s = norm;
    }
    segs sg = {0};
    int rc = added_split(t, s, nlen, 1, &sg) ? errmsg(err, n, "out of memory") : 0;
    word_ctx wc = {t, out};
    for (size_t i = 0; i < sg.n && !rc; i++) {
        if (sg.v[i].id >= 0) rc = tok_ids_push(out, sg.v[i].id) ? errmsg(err, n, "out of memory") : 0;
        else
            rc = pretokenize(t, s + sg.v[i].start, sg.v[i].end - sg.v[i].start, first && sg.v[i].start == 0, on_word, &wc,
                             err, n);
    }
    free(sg.v);
    free(norm);
    return rc;
}

int tokenizer_encode(const tokenizer *tc, const char *text, size_t len, int bos, int32_t **ids, size_t *n_ids, char *err,
                     size_t n) {
    // The word cache is filled as words are met: the tokenizer is one thread's at a time.
    tokenizer *t = (tokenizer *)tc;
    tok_ids out = {0};
    *ids = NULL;
    *n_ids = 0;
    const unsigned char *s = (const unsigned char *)text;
    int rc = 0;
    if (bos && t->bos_id >= 0) rc = tok_ids_push(&out, t->bos_id) ? errmsg(err, n, "out of memory") : 0;
    if (t->kind == TOKENIZER_BYTES) {
        for (size_t i = 0; i < len && !rc; i++) rc = tok_ids_push(&out, s[i]) ? errmsg(err, n, "out of memory") : 0;
    } else if (!rc) {
        segs sg = {0};
        rc = added_split(t, s, len, 0, &sg) ? errmsg(err, n, "out of memory") : 0;
        for (size_t i = 0; i < sg.n && !rc; i++) {
            if (sg.v[i].id >= 0) rc = tok_ids_push(&out, sg.v[i].id) ? errmsg(err, n, "out of memory") : 0;
            else rc = encode_text(t, s + sg.v[i].start, sg.v[i].end - sg.v[i].start, sg.v[i].start == 0, &out, err, n);
        }
        free(sg.v);
    }
    if (!rc && !out.v && !(out.v = malloc(sizeof *out.v))) rc = errmsg(err, n, "out of memory");
    if (rc) {
        free(out.v);
        return -1;
    }
    *ids = out.v;
    *n_ids = out.n;
    return 0;
}

// ---- decoding ----

static int is_special(const tokenizer *t, int id) {
    for (int k = 0; k < t->n_added; k++)
        if (t->added[k].id == id) return t->added[k].special;
    return 0;
}

// "<0xAB>": the byte, or -1.
static int byte_token(const char *p, size_t len) {
    if (len != 6 || memcmp(p, "<0x", 3) || p[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = p[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = 16 * v + d;
    }
    return v;
}

// One token's text through the decoder steps that act per token (ByteLevel, Replace, ByteFallback).
static int decode_piece(const tokenizer *t, const char *p, size_t len, int first, tok_text *b) {
    for (int d = 0; d < t->n_dec; d++) {
        const tok_dec *s = &t->dec[d];
        if (s->kind == DEC_BYTELEVEL) {
            // a token with a character outside the alphabet is written as it is (an added token)
            char tmp[256];
            size_t k = 0;
            for (size_t j = 0; j < len;) {
                int32_t cp;
                int m = utf8_len((const unsigned char *)p + j, len - j, &cp);
                int byte = cp >= 0 ? bytelevel_byte((uint32_t)cp) : -1;
                if (byte < 0 || k == sizeof tmp) return tok_text_put(b, p, len);
                tmp[k++] = (char)byte;
                j += (size_t)m;
            }
            return tok_text_put(b, tmp, k);
        }
        if (s->kind == DEC_BYTEFALLBACK) {
            int v = byte_token(p, len);
            if (v >= 0) {
                unsigned char c = (unsigned char)v;
                return tok_text_put(b, &c, 1);
            }
        }
    }
    // Replace (and Metaspace's "▁"): each occurrence of from becomes to. Metaspace, when it
    // prepends, drops every "▁" of the first token, as Hugging Face's decoder does.
    const char *from = NULL, *to = NULL;
    for (int d = 0; d < t->n_dec; d++)
        if (t->dec[d].kind == DEC_REPLACE || t->dec[d].kind == DEC_METASPACE) {
            from = t->dec[d].kind == DEC_REPLACE ? t->dec[d].from : TOK_SPACE_MARK;
            to = t->dec[d].kind == DEC_REPLACE ? t->dec[d].to : first && t->dec[d].start ? "" : " ";
        }
    size_t fl = from ? strlen(from) : 0;
    for (size_t j = 0; j < len;) {
        if (fl && j + fl <= len && memcmp(p + j, from, fl) == 0) {
            if (tok_text_put(b, to, strlen(to))) return -1;
            j += fl;
        } else {
            if (tok_text_put(b, p + j, 1)) return -1;
            j++;
        }
    }
    return 0;
}

char *tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n_ids, int skip_special, size_t *len, char *err,
                       size_t n) {
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] < 0 || ids[i] >= t->n_vocab || !t->piece[ids[i]]) {
            errmsg(err, n, "token id %d out of range (vocabulary %d)", (int)ids[i], t->n_vocab);
            return NULL;
        }
    tok_text b = {0};
    int rc = tok_text_put(&b, "", 0);
    if (t->kind == TOKENIZER_BYTES) {
        for (size_t i = 0; i < n_ids && !rc; i++)
            if (ids[i] < 256 || !skip_special) rc = tok_text_put(&b, t->piece[ids[i]], t->piece_len[ids[i]]);
    } else {
        int first = 1;
        for (size_t i = 0; i < n_ids && !rc; i++) {
            if (skip_special && is_special(t, ids[i])) continue;
            rc = decode_piece(t, t->piece[ids[i]], t->piece_len[ids[i]], first, &b);
            first = 0;
        }
        // Strip (after Fuse: of the whole text)
        for (int d = 0; d < t->n_dec && !rc; d++) {
            const tok_dec *s = &t->dec[d];
            if (s->kind != DEC_STRIP) continue;
            int start = s->start, stop = s->stop;
            const char *c = s->content;
            size_t cl = c ? strlen(c) : 0;
            if (!cl) continue;
            size_t a = 0;
            for (int k = 0; k < start && a + cl <= b.n && memcmp(b.v + a, c, cl) == 0; k++) a += cl;
            size_t e = b.n;
            for (int k = 0; k < stop && e >= a + cl && memcmp(b.v + e - cl, c, cl) == 0; k++) e -= cl;
            memmove(b.v, b.v + a, e - a);
            b.n = e - a;
            b.v[b.n] = 0;
        }
    }
    if (rc) {
        free(b.v);
        errmsg(err, n, "out of memory");
        return NULL;
    }
    if (len) *len = b.n;
    return b.v;
}
