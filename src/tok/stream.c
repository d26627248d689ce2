// stream.c: see stream.h.
#include "tok/stream.h"
#include "util/errmsg.h"

#include <stdlib.h>
#include <string.h>

enum { WINDOW = 64 };  // ids per decoded window, at least

// The bytes of the UTF-8 character led by c (0: c cannot lead one).
static int utf8_lead_len(unsigned char c) {
    return c < 0x80 ? 1 : c < 0xC2 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF5 ? 4 : 0;
}

// The bytes of the valid character at s[0..n), 0 when none starts there (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF). With *partial: s ends inside a valid prefix.
static int utf8_char(const unsigned char *s, size_t n, int *partial) {
    const int k = utf8_lead_len(s[0]);
    *partial = 0;
    if (!k) return 0;
    for (int i = 1; i < k; i++) {
        if ((size_t)i == n) return *partial = 1, 0;
        unsigned char lo = 0x80, hi = 0xBF;
        if (i == 1) lo = s[0] == 0xE0 ? 0xA0 : s[0] == 0xF0 ? 0x90 : 0x80;
        if (i == 1) hi = s[0] == 0xED ? 0x9F : s[0] == 0xF4 ? 0x8F : 0xBF;
        if (s[i] < lo || s[i] > hi) return 0;
    }
    return k;
}

size_t utf8_complete(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        const size_t i = n - back;
        if ((u[i] & 0xC0) == 0x80) continue;  // a continuation byte: look further back
        int partial;
        utf8_char(u + i, n - i, &partial);
        return partial ? i : n;
    }
    return n;
}

char *utf8_sanitize(const char *s, size_t n, size_t *len) {
    char *out = malloc(3 * n + 1), *o = out;  // U+FFFD is 3 bytes, at most one per input byte
    if (!out) return NULL;
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        int partial, k = utf8_char(u + i, n - i, &partial);
        if (k) {
            memcpy(o, u + i, (size_t)k), o += k, i += (size_t)k;
            continue;
        }
        // one U+FFFD per maximal invalid subpart: a lead byte and the bytes that keep it a valid prefix
        size_t j = i + 1;
        while (j < n && !utf8_char(u + i, j - i + 1, &partial) && partial) j++;
        memcpy(o, "\xEF\xBF\xBD", 3), o += 3, i = j;
    }
    *o = 0;
    *len = (size_t)(o - out);
    return out;
}

void tok_stream_init(tok_stream *s, const tokenizer *t) {
    memset(s, 0, sizeof *s);
    s->t = t;
}

// The text of ids[from..n) as it reads after ids[from-1] (when from > 0): malloc'd.
static char *window_text(const tokenizer *t, const int32_t *ids, size_t from, size_t n, size_t *len, char *err,
                         size_t en) {
    const size_t a = from ? from - 1 : 0;
    size_t alen = 0;
    char *all = tokenizer_decode(t, ids + a, n - a, 1, len, err, en);
    if (!all || !from) return all;
    char *anchor = tokenizer_decode(t, ids + a, 1, 1, &alen, err, en);
    if (!anchor) {
        free(all);
        return NULL;
    }
    free(anchor);
    alen = alen < *len ? alen : *len;
    memmove(all, all + alen, *len - alen + 1);
    *len -= alen;
    return all;
}

int tok_stream_next(tok_stream *s, const int32_t *ids, size_t n, int final, char **text, size_t *len, char *err,
                    size_t en) {
    size_t wlen;
    char *w = window_text(s->t, ids, s->from, n, &wlen, err, en);
    if (!w) return -1;
    const size_t upto = final ? wlen : utf8_complete(w, wlen), k = upto > s->printed ? upto - s->printed : 0;
    *text = malloc(k + 1);
    if (!*text) {
        free(w);
        return errmsg(err, en, "out of memory");
    }
    memcpy(*text, w + s->printed, k);
    (*text)[k] = 0, *len = k;
    s->printed += k;
    // everything returned and the window long enough: the next one starts here
    if (s->printed == wlen && n - s->from >= WINDOW) s->from = n, s->printed = 0;
    free(w);
    return 0;
}
