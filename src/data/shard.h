// shard.h: token shards (docs/shards.md): a 64-byte header (magic "MTACTOK1", version, token
// dtype, count, FNV-1a checksum of the token bytes) followed by the tokens, little-endian.
#ifndef MTAC_SHARD_H
#define MTAC_SHARD_H

#include <stddef.h>
#include <stdint.h>

enum { SHARD_U16 = 1, SHARD_U32 = 2 };

typedef struct {
    uint32_t *tokens;
    size_t n;
    int dtype;
} shard;

// Writes n tokens atomically (temp file, fsync, rename). dtype SHARD_U16 needs ids < 65536.
int shard_write(const char *path, const uint32_t *tokens, size_t n, int dtype, char *err, size_t err_len);
// Reads and verifies a shard (magic, version, dtype, size, checksum).
int shard_read(const char *path, shard *s, char *err, size_t err_len);
void shard_free(shard *s);

#endif
