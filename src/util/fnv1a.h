// fnv1a.h: FNV-1a 64, the checksum of mtac's files (checkpoints, weights, token shards): cheap, and
// any changed byte changes it (not a defence against deliberate tampering).
#ifndef MTAC_FNV1A_H
#define MTAC_FNV1A_H

#include <stddef.h>
#include <stdint.h>

#define FNV1A_START 0xcbf29ce484222325ULL

// The hash h continued over n bytes at p (start from FNV1A_START).
static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ULL;
    return h;
}

#endif
