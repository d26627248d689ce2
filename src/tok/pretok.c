// pretok.c: pre-tokenizers (PCRE2 regex splits, Metaspace), the GPT-2 byte-to-char alphabet, and
// the regexes llama.cpp uses for its byte-level pre types.
#include "tok/tok_internal.h"

#include "util/errmsg.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

// GPT-2's pre-tokenizer regex, as Hugging Face's ByteLevel(use_regex) has it.
const char *const TOK_GPT2_REGEX =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// GPT-2's alphabet: the printable bytes stand for themselves; the others (controls, space, DEL,
// NBSP, soft hyphen) take the code points from U+0100 on, in byte order.
static int printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

static uint32_t byte_cp(unsigned char b) {
    if (printable(b)) return b;
    uint32_t k = 0;
    for (unsigned c = 0; c < b; c++) k += !printable(c);
    return 256 + k;
}

int bytelevel_char(unsigned char b, char out[4]) { return utf8_put(byte_cp(b), out); }

int bytelevel_byte(uint32_t cp) {
    if (cp < 256) return printable(cp) ? (int)cp : -1;
    uint32_t k = 256;
    for (unsigned c = 0; c < 256; c++)
        if (!printable(c) && k++ == cp) return (int)c;
    return -1;
}

int pre_compile(tok_pre *p, const char *pattern, char *err, size_t n) {
    int code;
    PCRE2_SIZE off;
    // Invalid UTF-8 in the text never matches (and is not an error): such bytes become pieces of
    // their own, as unmatched gaps.
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF,
                                   &code, &off, NULL);
    if (!re) {
        char msg[256];
        pcre2_get_error_message(code, (PCRE2_UCHAR *)msg, sizeof msg);
        return errmsg(err, n, "regex \"%s\": %s at offset %zu", pattern, msg, (size_t)off);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  // without a JIT, pcre2_match interprets
    p->re = re;
    p->pattern = strdup(pattern);
    if (!p->pattern) return errmsg(err, n, "out of memory");
    return 0;
}

void pre_free(tok_pre *p) {
    if (p->md) pcre2_match_data_free(p->md);
    if (p->re) pcre2_code_free(p->re);
    free(p->pattern);
    memset(p, 0, sizeof *p);
}

void *word_re_compile(void) {
    int code;
    PCRE2_SIZE off;
    return pcre2_compile((PCRE2_SPTR) "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]", PCRE2_ZERO_TERMINATED,
                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_ANCHORED, &code, &off, NULL);
}

void word_re_free(void *re) {
    if (re) pcre2_code_free(re);
}

int is_word_char(const void *re, const unsigned char *s, size_t len, int start) {
    if (!len) return 0;
    size_t at = 0;
    if (!start) {  // the last character: back over continuation bytes
        at = len - 1;
        while (at > 0 && len - at < 4 && (s[at] & 0xc0) == 0x80) at--;
    }
    pcre2_match_data *md = pcre2_match_data_create(1, NULL);
    if (!md) return 0;
    int rc = pcre2_match(re, s, len, at, 0, md, NULL);
    pcre2_match_data_free(md);
    return rc > 0;
}

// The recursion over the steps: step i splits s into pieces and hands each to step i + 1.
typedef struct {
    const tokenizer *t;
    tok_piece_fn fn;
    void *ctx;
    pcre2_match_data *md[TOK_MAX_PRE];
    int first;  // the text is the first fragment (Metaspace's prepend_scheme "first")
    char *err;
    size_t n;
} pre_run;

static int step(pre_run *r, int i, const unsigned char *s, size_t len);

// A piece made by a split; empty ones are dropped, as Hugging Face does.
static int emit(pre_run *r, int i, const unsigned char *s, size_t len) {
    return len ? step(r, i + 1, s, len) : 0;
}

// The next non-empty match of step i's regex in s at or after *off: 1 with [*ms, *me), 0 when
// there is none, -1 (with the message) on a matching error.
static int next_match(pre_run *r, int i, const unsigned char *s, size_t len, size_t *off, size_t *ms, size_t *me) {
    const tok_pre *p = &r->t->pre[i];
    pcre2_match_data *md = r->md[i];
    while (*off <= len) {
        int rc = pcre2_match(p->re, s, len, *off, 0, md, NULL);
        if (rc < 0) {
            if (rc != PCRE2_ERROR_NOMATCH) {
                char msg[128];
                pcre2_get_error_message(rc, (PCRE2_UCHAR *)msg, sizeof msg);
                return errmsg(r->err, r->n, "regex \"%s\": %s", p->pattern, msg);
            }
            return 0;
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] > ov[0]) {
            *ms = ov[0];
            *me = ov[1];
            return 1;
        }
        // an empty match splits nothing: look again one character on
        *off = ov[0] + (ov[0] < len ? (size_t)utf8_len(s + ov[0], len - ov[0], NULL) : 1);
    }
    return 0;
}

// What a split holds back between pieces, by behavior.
typedef struct {
    size_t pend_start;  // MergedWithNext: a delimiter held back to merge with the next piece
    int have_pend;
    size_t last_match_end;  // Contiguous: the end of the previous delimiter
    size_t open_start;      // Contiguous: the start of the delimiter run being built
    int open;
    size_t prev_start, prev_len;  // MergedWithPrevious: the piece not yet emitted
    int have_prev, prev_delim;
} split_held;

// The piece [a, b) of s, a delimiter (a match, or a gap under invert) or not, by the behavior.
static int split_piece(pre_run *r, int i, split_held *h, const unsigned char *s, size_t a, size_t b, int delim) {
    switch (r->t->pre[i].behavior) {
    case SPLIT_REMOVED:
        return delim ? 0 : emit(r, i, s + a, b - a);
    case SPLIT_ISOLATED:
        return emit(r, i, s + a, b - a);
    case SPLIT_MERGED_PREV:
        // a delimiter joins the piece before it, unless that piece is a delimiter too
        if (delim && h->have_prev && !h->prev_delim) {
            h->prev_len = b - h->prev_start;
        } else {
            if (h->have_prev && emit(r, i, s + h->prev_start, h->prev_len)) return -1;
            h->prev_start = a;
            h->prev_len = b - a;
            h->have_prev = 1;
        }
        h->prev_delim = delim;
        return 0;
    case SPLIT_MERGED_NEXT:
        if (delim) {
            if (h->have_pend && emit(r, i, s + h->pend_start, a - h->pend_start)) return -1;
            h->pend_start = a;
            h->have_pend = 1;
            return 0;
        }
        size_t from = h->have_pend ? h->pend_start : a;
        h->have_pend = 0;
        return emit(r, i, s + from, b - from);
    case SPLIT_CONTIGUOUS:
        if (delim && h->open && h->last_match_end == a) {
            h->last_match_end = b;
            return 0;
        }
        if (h->open && emit(r, i, s + h->open_start, h->last_match_end - h->open_start)) return -1;
        h->open = 0;
        if (!delim) return emit(r, i, s + a, b - a);
        h->open = 1;
        h->open_start = a;
        h->last_match_end = b;
        return 0;
    }
    return 0;
}

static int split_regex(pre_run *r, int i, const unsigned char *s, size_t len) {
    split_held h = {.last_match_end = (size_t)-1};
    // The pieces alternate: gap (not matched), match, gap, ...; invert swaps their roles.
    const int inv = r->t->pre[i].invert;
    size_t at = 0, off = 0;
    for (;;) {
        size_t ms = len, me = len;
        int found = next_match(r, i, s, len, &off, &ms, &me);
        if (found < 0) return found;
        // pieces: the gap [at, ms) and, when found, the delimiter [ms, me)
        if (at != ms && split_piece(r, i, &h, s, at, ms, inv)) return -1;
        if (found && ms != me && split_piece(r, i, &h, s, ms, me, 1 ^ inv)) return -1;
        if (!found) break;
        at = off = me;
    }
    if (h.have_prev && emit(r, i, s + h.prev_start, h.prev_len)) return -1;
    if (h.have_pend && emit(r, i, s + h.pend_start, len - h.pend_start)) return -1;
    if (h.open && emit(r, i, s + h.open_start, h.last_match_end - h.open_start)) return -1;
    return 0;
}

size_t tok_space_marks(unsigned char *out, const unsigned char *s, size_t len, int prepend, int replace) {
    size_t k = 0;
    if (prepend) memcpy(out, TOK_SPACE_MARK, 3), k = 3;
    for (size_t j = 0; j < len; j++)
        if (s[j] == ' ' && replace) memcpy(out + k, TOK_SPACE_MARK, 3), k += 3;
        else out[k++] = s[j];
    return k;
}

// Metaspace: spaces become "▁", one is prepended, and the text splits before each "▁".
static int metaspace(pre_run *r, int i, const unsigned char *s, size_t len) {
    const tok_pre *p = &r->t->pre[i];
    unsigned char *b = malloc(3 * len + 3);
    if (!b) return errmsg(r->err, r->n, "out of memory");
    const int pre = p->prepend == 1 || (p->prepend == 2 && r->first);
    const size_t k = tok_space_marks(b, s, len, pre && !(len >= 1 && s[0] == ' '), 1);
    int rc = 0;
    if (!p->split) {
        rc = emit(r, i, b, k);
    } else {
        size_t start = 0;
        for (size_t j = 0; j + 3 <= k; j++)
            if (j > start && memcmp(b + j, TOK_SPACE_MARK, 3) == 0) {
                if ((rc = emit(r, i, b + start, j - start))) break;
                start = j;
            }
        if (!rc) rc = emit(r, i, b + start, k - start);
    }
    free(b);
    return rc;
}

static int step(pre_run *r, int i, const unsigned char *s, size_t len) {
    if (i == r->t->n_pre) return r->fn(r->ctx, s, len);
    const tok_pre *p = &r->t->pre[i];
    if (p->kind == PRE_METASPACE) return metaspace(r, i, s, len);
    if (p->kind == PRE_BYTELEVEL && p->add_prefix_space && s[0] != ' ') {
        unsigned char *b = malloc(len + 1);
        if (!b) return errmsg(r->err, r->n, "out of memory");
        b[0] = ' ';
        memcpy(b + 1, s, len);
        int rc = p->re ? split_regex(r, i, b, len + 1) : step(r, i + 1, b, len + 1);
        free(b);
        return rc;
    }
    return p->re ? split_regex(r, i, s, len) : step(r, i + 1, s, len);
}

int pretokenize(const tokenizer *t, const unsigned char *s, size_t len, int first, tok_piece_fn fn, void *ctx, char *err,
                size_t n) {
    if (!len) return 0;
    pre_run r = {.t = t, .fn = fn, .ctx = ctx, .first = first, .err = err, .n = n};
    int rc = 0;
    for (int i = 0; i < t->n_pre && !rc; i++)
        if (t->pre[i].re && !(r.md[i] = pcre2_match_data_create_from_pattern(t->pre[i].re, NULL)))
            rc = errmsg(err, n, "out of memory");
    if (!rc) rc = step(&r, 0, s, len);
    for (int i = 0; i < t->n_pre; i++)
        if (r.md[i]) pcre2_match_data_free(r.md[i]);
    return rc;
}

// llama.cpp's byte-level pre types (llama-vocab.cpp): each is a list of regexes, applied one
// after the other, every piece split by the next with matches and gaps kept (Isolated).
typedef struct {
    const char *name;
    int ignore_merges;
    const char *re[4];
} pre_type;

#define LLAMA3_RE                                                                                              \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define QWEN2_RE                                                                                             \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define GPT2_RE "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"

static const pre_type PRE_TYPES[] = {
    {"gpt-2", 0, {GPT2_RE}},
    {"llama-bpe", 1, {LLAMA3_RE}},
    {"llama3", 1, {LLAMA3_RE}},
    {"llama-v3", 1, {LLAMA3_RE}},
    {"smollm", 0, {"\\p{N}", GPT2_RE}},
    {"qwen2", 0, {QWEN2_RE}},
    {"default", 0, {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_RE, "\\p{N}+", "[0-9][0-9][0-9]"}},
};

int pre_from_name(tokenizer *t, const char *name, char *err, size_t n) {
    for (size_t k = 0; k < sizeof PRE_TYPES / sizeof PRE_TYPES[0]; k++) {
        const pre_type *p = &PRE_TYPES[k];
        if (strcmp(p->name, name)) continue;
        t->ignore_merges = p->ignore_merges;
        for (int j = 0; j < 4 && p->re[j]; j++) {
            tok_pre *s = &t->pre[t->n_pre++];
            s->kind = PRE_SPLIT;
            s->behavior = SPLIT_ISOLATED;
            if (pre_compile(s, p->re[j], err, n)) return -1;
        }
        // the bytes to the alphabet: a ByteLevel step without a regex of its own
        t->pre[t->n_pre++].kind = PRE_BYTELEVEL;
        return 0;
    }
    return errmsg(err, n, "pre-tokenizer type \"%s\" not supported (gpt-2, llama-bpe, llama3, smollm, qwen2, default)", name);
}
