// dataloader.c: see dataloader.h.
#include "data/dataloader.h"
#include "util/rng.h"
#include "data/tokenizer.h"
#include "util/errmsg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Checks B, T and the shard length, and seeds the sampler. Frees the shard on failure.
static int setup(dataloader *dl, const char *name, int B, int T, uint64_t seed, char *err, size_t n) {
    if (B < 1 || T < 1) {
        shard_free(&dl->s);
        return errmsg(err, n, "%s: batch size %d and sequence length %d must be >= 1", name, B, T);
    }
    if (dl->s.n < (size_t)T + 1) {
        size_t have = dl->s.n;
        shard_free(&dl->s);
        return errmsg(err, n, "%s: %zu tokens, fewer than seq_len+1 = %d", name, have, T + 1);
    }
    dl->B = B, dl->T = T;
    // Fixed: checkpoints store this state, so changing the seeding would change resumed runs.
    dl->state = seed ^ 0x2545F4914F6CDD1DULL;
    dl->seq_pos = 0;
    return 0;
}

int dataloader_open(dataloader *dl, const char *path, int B, int T, uint64_t seed, char *err, size_t n) {
    memset(dl, 0, sizeof *dl);
    if (shard_read(path, &dl->s, err, n)) return -1;
    return setup(dl, path, B, T, seed, err, n);
}

int dataloader_open_tokens(dataloader *dl, const uint32_t *tokens, size_t ntok, int B, int T, uint64_t seed,
                           char *err, size_t n) {
    memset(dl, 0, sizeof *dl);
    dl->s.tokens = malloc((ntok + 1) * sizeof(uint32_t));
    if (!dl->s.tokens) return errmsg(err, n, "tokens: out of memory");
    if (ntok) memcpy(dl->s.tokens, tokens, ntok * sizeof(uint32_t));
    dl->s.n = ntok, dl->s.dtype = SHARD_U32;
    return setup(dl, "tokens", B, T, seed, err, n);
}

void dataloader_close(dataloader *dl) { shard_free(&dl->s); }

// A window start in [0, n-T-1]. The modulo bias is below span/2^64, far under any noise in training.
static size_t next_pos(dataloader *dl) {
    const size_t span = dl->s.n - (size_t)dl->T;
    return (size_t)(splitmix64(&dl->state) % span);
}

// Rows start at b*T in size_t: B*T may exceed what an int product holds.
void dataloader_next(dataloader *dl, int *tokens, int *targets) {
    const int T = dl->T;
    for (int b = 0; b < dl->B; b++) {
        const uint32_t *w = dl->s.tokens + next_pos(dl);
        int *x = tokens + (size_t)b * T, *y = targets + (size_t)b * T;
        for (int t = 0; t < T; t++) {
            x[t] = (int)w[t];
            y[t] = (int)w[t + 1];
        }
    }
}

void dataloader_skip(dataloader *dl) {
    for (int b = 0; b < dl->B; b++) next_pos(dl);
}

void dataloader_next_windows(dataloader *dl, uint32_t *win) {
    const size_t W = (size_t)dl->T + 1;
    for (int b = 0; b < dl->B; b++) memcpy(win + b * W, dl->s.tokens + next_pos(dl), W * sizeof(uint32_t));
}

void dataloader_state_str(const dataloader *dl, char *buf, size_t n) { snprintf(buf, n, "%016" PRIx64, dl->state); }

int dataloader_state_parse(dataloader *dl, const char *s) {
    if (strlen(s) != 16) return -1;
    for (int i = 0; i < 16; i++)  // strtoull alone would take a sign or leading blanks
        if (!strchr("0123456789abcdefABCDEF", s[i])) return -1;
    dl->state = strtoull(s, NULL, 16);
    return 0;
}

size_t dataloader_seq_windows(const dataloader *dl) {
    return dl->s.n < 2 ? 0 : (dl->s.n - 1 + (size_t)dl->T - 1) / (size_t)dl->T;
}

void dataloader_seq_reset(dataloader *dl) { dl->seq_pos = 0; }

int dataloader_next_seq(dataloader *dl, int *tokens, int *targets) {
    const int T = dl->T;
    const size_t n = dl->s.n;
    int rows = 0;
    for (int b = 0; b < dl->B; b++) {
        const size_t p = dl->seq_pos;
        const int have = p + 1 < n ? (int)(n - 1 - p < (size_t)T ? n - 1 - p : (size_t)T) : 0;  // targets left
        int *x = tokens + (size_t)b * T, *y = targets + (size_t)b * T;
        for (int t = 0; t < T; t++) {
            x[t] = t < have ? (int)dl->s.tokens[p + t] : TOK_PAD;
            y[t] = t < have ? (int)dl->s.tokens[p + t + 1] : -1;
        }
        if (have > 0) rows++, dl->seq_pos += (size_t)have;
    }
    return rows;
}
