// dataloader.c: see dataloader.h.
#include "data/dataloader.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dataloader_open(dataloader *dl, const char *path, int B, int T, uint64_t seed, char *err, size_t n) {
    memset(dl, 0, sizeof *dl);
    if (shard_read(path, &dl->s, err, n)) return -1;
    if (dl->s.n < (size_t)T + 1) {
        snprintf(err, n, "%s: %zu tokens, fewer than seq_len+1 = %d", path, dl->s.n, T + 1);
        shard_free(&dl->s);
        return -1;
    }
    dl->B = B, dl->T = T;
    dl->state = seed ^ 0x2545F4914F6CDD1DULL;
    return 0;
}

// splitmix64 step
static uint64_t next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void dataloader_next(dataloader *dl, int *tokens, int *targets) {
    const size_t span = dl->s.n - (size_t)dl->T;  // valid start positions: [0, n - T - 1]
    for (int b = 0; b < dl->B; b++) {
        size_t p = (size_t)(next_u64(&dl->state) % span);
        for (int t = 0; t < dl->T; t++) {
            tokens[b * dl->T + t] = (int)dl->s.tokens[p + t];
            targets[b * dl->T + t] = (int)dl->s.tokens[p + t + 1];
        }
    }
}

void dataloader_state_str(const dataloader *dl, char *buf, size_t n) { snprintf(buf, n, "%016" PRIx64, dl->state); }

int dataloader_state_parse(dataloader *dl, const char *s) {
    char *end;
    unsigned long long x = strtoull(s, &end, 16);
    if (end == s || *end || strlen(s) != 16) return -1;
    dl->state = x;
    return 0;
}

void dataloader_close(dataloader *dl) { shard_free(&dl->s); }
