// shard.c: see shard.h and docs/shards.md.
#include "data/shard.h"
#include "util/errmsg.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { HEADER = 64, VERSION = 1 };
static const char MAGIC[8] = {'M', 'T', 'A', 'C', 'T', 'O', 'K', '1'};

static uint64_t fnv1a(const unsigned char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001B3ULL;
    return h;
}

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
    const int w = dtype == SHARD_U16 ? 2 : 4;
    unsigned char *buf = malloc(HEADER + n * w);
    if (!buf) return errmsg(err, en, "%s: out of memory", path);
    for (size_t i = 0; i < n; i++) {
        if (dtype == SHARD_U16 && tokens[i] > 0xFFFF) {
            free(buf);
            return errmsg(err, en, "%s: token %u does not fit uint16 (use uint32)", path, tokens[i]);
        }
        put_le(buf + HEADER + i * w, tokens[i], w);
    }
    memset(buf, 0, HEADER);
    memcpy(buf, MAGIC, 8);
    put_le(buf + 8, VERSION, 4);
    put_le(buf + 12, (uint64_t)dtype, 4);
    put_le(buf + 16, n, 8);
    put_le(buf + 24, fnv1a(buf + HEADER, n * w), 8);
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(buf);
        return errmsg(err, en, "%s: cannot create: %s", tmp, strerror(errno));
    }
    int ok = fwrite(buf, 1, HEADER + n * w, f) == HEADER + n * w && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok &= fclose(f) == 0;
    free(buf);
    if (!ok || rename(tmp, path)) {
        remove(tmp);
        return errmsg(err, en, "%s: write failed", path);
    }
    return 0;
}

int shard_read(const char *path, shard *s, char *err, size_t en) {
    memset(s, 0, sizeof *s);
    FILE *f = fopen(path, "rb");
    if (!f) return errmsg(err, en, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
        fclose(f);
        return errmsg(err, en, "%s: not a regular file", path);
    }
    size_t size = (size_t)st.st_size;
    unsigned char hdr[HEADER];
    if (size < HEADER || fread(hdr, 1, HEADER, f) != HEADER) {
        fclose(f);
        return errmsg(err, en, "%s: too short for a token shard (%zu bytes, header is %d)", path, size, HEADER);
    }
    int rc = 0;
    uint64_t version = get_le(hdr + 8, 4), dtype = get_le(hdr + 12, 4), n = get_le(hdr + 16, 8);
    int w = dtype == SHARD_U16 ? 2 : 4;
    if (memcmp(hdr, MAGIC, 8)) rc = errmsg(err, en, "%s: not a token shard (bad magic; make shards with mtac data)", path);
    else if (version != VERSION) rc = errmsg(err, en, "%s: shard version %llu, this build reads %d", path, (unsigned long long)version, VERSION);
    else if (dtype != SHARD_U16 && dtype != SHARD_U32) rc = errmsg(err, en, "%s: unknown token dtype %llu", path, (unsigned long long)dtype);
    else if (n > (size - HEADER) / w || HEADER + n * w != size)
        rc = errmsg(err, en, "%s: header says %llu tokens but the file has %zu bytes of tokens (truncated or padded)", path,
                  (unsigned long long)n, size - HEADER);
    unsigned char *raw = NULL;
    if (!rc) {
        raw = malloc(n * w + 1);
        s->tokens = malloc((n + 1) * sizeof(uint32_t));
        if (!raw || !s->tokens) rc = errmsg(err, en, "%s: out of memory", path);
        else if (fread(raw, 1, n * w, f) != n * w) rc = errmsg(err, en, "%s: read error", path);
        else if (fnv1a(raw, n * w) != get_le(hdr + 24, 8)) rc = errmsg(err, en, "%s: checksum mismatch (corrupt shard)", path);
    }
    if (!rc) {
        for (size_t i = 0; i < n; i++) s->tokens[i] = (uint32_t)get_le(raw + i * w, w);
        s->n = n, s->dtype = (int)dtype;
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
