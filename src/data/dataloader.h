// dataloader.h: training batches from a token shard: B windows of T+1 tokens at positions drawn
// from an explicit PRNG state, so a checkpoint can save the state and a resumed run draws the
// same batches.
#ifndef MTAC_DATALOADER_H
#define MTAC_DATALOADER_H

#include "data/shard.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    shard s;
    int B, T;
    uint64_t state;  // PRNG state: the only thing that changes from batch to batch
} dataloader;

int dataloader_open(dataloader *dl, const char *path, int B, int T, uint64_t seed, char *err, size_t err_len);
// tokens[b*T+t] = shard[p_b + t], targets[b*T+t] = shard[p_b + t + 1].
void dataloader_next(dataloader *dl, int *tokens, int *targets);
void dataloader_state_str(const dataloader *dl, char *buf, size_t n);
int dataloader_state_parse(dataloader *dl, const char *s);  // 0 on success
void dataloader_close(dataloader *dl);

#endif
