// shard.c: see shard.h and docs/shards.md.
#include "data/shard.h"
#include "data/tokenizer.h"
#include "io/fsutil.h"
#include "util/errmsg.h"
#include "util/fnv1a.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { HEADER = 64, VERSION = 1 };
static const char MAGIC[8] = {'M', 'T', 'A', 'C', 'T', 'O', 'K', '1'};

static void put_le(unsigned char *p, uint64_t x, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (unsigned char)(x >> (8 * i));
}

static uint64_t get_le(const unsigned char *p, int bytes) {
    uint64_t x = 0;
    for (int i = 0; i < bytes; i++) x |= (uint64_t)p[i] << (8 * i);
    return x;
}

int shard_write(const char *path, const uint32_t *tokens, size_t n, int dtype, char *err, size_t en) {
    if (dtype != SHARD_U16 && dtype != SHARD_U32) return errmsg(err, en, "%s: unknown token dtype %d", path, dtype);
    const size_t w = dtype == SHARD_U16 ? 2 : 4;
    if (n > (SIZE_MAX - HEADER) / w) return errmsg(err, en, "%s: %zu tokens are too many", path, n);
    unsigned char *buf = malloc(HEADER + n * w);
    if (!buf) return errmsg(err, en, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        if (dtype == SHARD_U16 && tokens[i] > 0xFFFF) {
            free(buf);
            return errmsg(err, en, "%s: token %u does not fit uint16 (use uint32)", path, tokens[i]);
        }
        put_le(buf + HEADER + i * w, tokens[i], (int)w);
    }
    memset(buf, 0, HEADER);
    memcpy(buf, MAGIC, 8);
    put_le(buf + 8, VERSION, 4);
    put_le(buf + 12, (uint64_t)dtype, 4);
    put_le(buf + 16, n, 8);
    put_le(buf + 24, fnv1a(FNV1A_START, buf + HEADER, n * w), 8);
    out_file o;
    if (out_open(&o, path, err, en)) {
        free(buf);
        return -1;
    }
    // out_close makes the file appear whole: a reader sees the old shard or the new one.
    fwrite(buf, 1, HEADER + n * w, o.f);
    free(buf);
    return out_close(&o, err, en);
}

// Checks the header against the file size; 0 if it describes a valid shard.
static int check_header(const char *path, const unsigned char *hdr, size_t size, char *err, size_t en) {
    uint64_t version = get_le(hdr + 8, 4), dtype = get_le(hdr + 12, 4), n = get_le(hdr + 16, 8);
    if (memcmp(hdr, MAGIC, 8))
        return errmsg(err, en, "%s: not a token shard (bad magic; make shards with mtac data)", path);
    if (version != VERSION)
        return errmsg(err, en, "%s: shard version %llu, this build reads %d", path, (unsigned long long)version, VERSION);
    if (dtype != SHARD_U16 && dtype != SHARD_U32)
        return errmsg(err, en, "%s: unknown token dtype %llu (1 = uint16, 2 = uint32)", path, (unsigned long long)dtype);
    // The checksum covers only the tokens, so check the reserved bytes to catch a damaged header.
    for (int i = 32; i < HEADER; i++)
        if (hdr[i]) return errmsg(err, en, "%s: reserved header byte %d is not zero (corrupt header)", path, i);
    const size_t w = dtype == SHARD_U16 ? 2 : 4, have = size - HEADER;
    if (n > have / w || n * w != have)
        return errmsg(err, en, "%s: header says %llu tokens (%llu bytes) but the file has %zu bytes of tokens (%s)",
                      path, (unsigned long long)n, (unsigned long long)(n * w), have,
                      n > have / w ? "truncated" : "trailing bytes");
    return 0;
}

int shard_read(const char *path, shard *s, char *err, size_t en) {
    memset(s, 0, sizeof *s);
    size_t size;
    FILE *f = open_input_file(path, &size, err, en);
    if (!f) return -1;
    unsigned char hdr[HEADER];
    if (size < HEADER || fread(hdr, 1, HEADER, f) != HEADER) {
        fclose(f);
        return errmsg(err, en, "%s: too short for a token shard (%zu bytes, header is %d; truncated)", path, size, HEADER);
    }
    int rc = check_header(path, hdr, size, err, en);
    const int dtype = (int)get_le(hdr + 12, 4);
    const size_t n = (size_t)get_le(hdr + 16, 8), w = dtype == SHARD_U16 ? 2 : 4;
    unsigned char *raw = NULL;
    if (!rc) {
        raw = malloc(n * w + 1);
        s->tokens = malloc((n + 1) * sizeof(uint32_t));
        if (!raw || !s->tokens) rc = errmsg(err, en, "%s: out of memory", path);
        else if (fread(raw, 1, n * w, f) != n * w) rc = errmsg(err, en, "%s: read error", path);
        else if (fnv1a(FNV1A_START, raw, n * w) != get_le(hdr + 24, 8))
            rc = errmsg(err, en, "%s: checksum mismatch: the token bytes are corrupt", path);
    }
    if (!rc) {
        for (size_t i = 0; i < n; i++) s->tokens[i] = (uint32_t)get_le(raw + i * w, (int)w);
        s->n = n, s->dtype = dtype;
    }
    free(raw);
    fclose(f);
    if (rc) shard_free(s);
    return rc;
}

void shard_free(shard *s) {
    free(s->tokens);
    memset(s, 0, sizeof *s);
}

// ---- text into shards -------------------------------------------------------------------------

int shard_tokens_push(shard_tokens *v, uint32_t x) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? 2 * v->cap : 1 << 16;
        uint32_t *nt = realloc(v->t, nc * sizeof *nt);
        if (!nt) return -1;
        v->t = nt, v->cap = nc;
    }
    v->t[v->n++] = x;
    return 0;
}

static int push_bytes(void *arg, const unsigned char *s, size_t len, shard_tokens *v) {
    (void)arg;
    uint32_t ids[256];
    for (size_t j = 0; j < len; j += 256) {
        size_t m = tok_encode(s + j, len - j < 256 ? len - j : 256, ids);
        for (size_t q = 0; q < m; q++)
            if (shard_tokens_push(v, ids[q])) return -1;
    }
    return 0;
}

// One past the end of the line that starts at i (its '\n' included).
static size_t line_end(const unsigned char *s, size_t len, size_t i) {
    const unsigned char *nl = memchr(s + i, '\n', len - i);
    return nl ? (size_t)(nl - s) + 1 : len;
}

// A blank line holds nothing but spaces, tabs and carriage returns.
static int blank_line(const unsigned char *s, size_t i, size_t end) {
    for (; i < end; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n') return 0;
    return 1;
}

// SHARD_DOC_FILE: blocks end at the first line end after SHARD_BLOCK bytes; the file's EOS goes to
// both shards, since its blocks may be in both.
// The document's end: e->eos, when there is one.
static int push_eos(const shard_encoder *e, shard_tokens *v) {
    return e->eos >= 0 ? shard_tokens_push(v, (uint32_t)e->eos) : 0;
}

static int split_file(const shard_encoder *e, const unsigned char *s, size_t len, int k, size_t *block_no,
                      shard_tokens *tr, shard_tokens *va) {
    size_t i = 0;
    while (i < len) {
        size_t end = i + SHARD_BLOCK < len ? i + SHARD_BLOCK : len;
        while (end < len && s[end - 1] != '\n') end++;
        if (e->encode(e->arg, s + i, end - i, (++*block_no % (size_t)k == 0) ? va : tr)) return -1;
        i = end;
    }
    return push_eos(e, tr) || push_eos(e, va);
}

// SHARD_DOC_PARAGRAPH: each paragraph with its EOS goes to the shard of its block, and a block
// ends with the first paragraph that brings it to SHARD_BLOCK bytes.
static int split_paragraphs(const shard_encoder *enc, const unsigned char *s, size_t len, int k, size_t *block_no,
                            shard_tokens *tr, shard_tokens *va) {
    size_t i = 0, in_block = 0;
    shard_tokens *dst = tr;
    for (;;) {
        for (size_t e; i < len && blank_line(s, i, e = line_end(s, len, i));) i = e;  // blank lines dropped
        if (i == len) return 0;
        size_t end = i;
        for (size_t e; end < len && !blank_line(s, end, e = line_end(s, len, end));) end = e;
        if (!in_block) dst = (++*block_no % (size_t)k == 0) ? va : tr;
        if (enc->encode(enc->arg, s + i, end - i, dst) || push_eos(enc, dst)) return -1;
        in_block += end - i;
        if (in_block >= SHARD_BLOCK) in_block = 0;
        i = end;
    }
}

int shard_split_encoded(const shard_encoder *e, const unsigned char *s, size_t len, int documents, int k,
                        size_t *block_no, shard_tokens *tr, shard_tokens *va) {
    return documents == SHARD_DOC_PARAGRAPH ? split_paragraphs(e, s, len, k, block_no, tr, va)
                                            : split_file(e, s, len, k, block_no, tr, va);
}

int shard_split_text(const unsigned char *s, size_t len, int documents, int k, size_t *block_no, shard_tokens *tr,
                     shard_tokens *va) {
    const shard_encoder bytes = {push_bytes, NULL, TOK_EOS};
    return shard_split_encoded(&bytes, s, len, documents, k, block_no, tr, va);
}
