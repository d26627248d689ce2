// dataloader.h: batches from a token shard.
// Training: B windows of T+1 tokens at positions drawn from an explicit PRNG state (splitmix64),
// so a checkpoint can save the state and a resumed run draws the same batches. No hidden globals:
// everything that changes from batch to batch is in the struct.
// Evaluation: non-overlapping windows in order from the start of the shard, covering all of it.
#ifndef MTAC_DATALOADER_H
#define MTAC_DATALOADER_H

#include "data/shard.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    shard s;
    int B, T;
    uint64_t state;  // training sampler: PRNG state, the only thing a batch changes
    size_t seq_pos;  // evaluation: start of the next sequential window
} dataloader;

// Reads the shard at path; needs B, T >= 1 and at least T+1 tokens.
int dataloader_open(dataloader *dl, const char *path, int B, int T, uint64_t seed, char *err, size_t err_len);
// Same over tokens already in memory (copied; the shard's dtype is set to SHARD_U32).
int dataloader_open_tokens(dataloader *dl, const uint32_t *tokens, size_t n, int B, int T, uint64_t seed, char *err,
                           size_t err_len);
void dataloader_close(dataloader *dl);

// Training batch: B windows at random starts p_b in [0, n-T-1].
// tokens[b*T+t] = shard[p_b + t], targets[b*T+t] = shard[p_b + t + 1].
void dataloader_next(dataloader *dl, int *tokens, int *targets);
// Moves past one training batch without reading it: the state dataloader_next would leave (a
// data-parallel rank skips the micro-batches other ranks compute).
void dataloader_skip(dataloader *dl);
// The same draw as dataloader_next, as windows: win[b*(T+1)+t] = shard[p_b + t], t in [0, T].
void dataloader_next_windows(dataloader *dl, uint32_t *win);

// The sampler state as 16 hex digits, and back (0 on success, -1 if malformed).
void dataloader_state_str(const dataloader *dl, char *buf, size_t n);
int dataloader_state_parse(dataloader *dl, const char *s);

// Evaluation: window i has inputs shard[i*T .. i*T+T-1] and targets one further on, so every
// token but the first is a target exactly once over the ceil((n-1)/T) windows. The last window
// may be short: its missing inputs are TOK_PAD and its missing targets -1 (ignored by the loss).
size_t dataloader_seq_windows(const dataloader *dl);
void dataloader_seq_reset(dataloader *dl);
// Fills the next B windows; returns how many rows hold data (0 once the shard is done). Rows past
// the end are all TOK_PAD / -1.
int dataloader_next_seq(dataloader *dl, int *tokens, int *targets);

#endif
