// perplexity.h: the mean next-token loss of a token sequence under a model, in windows.
#ifndef MTAC_PERPLEXITY_H
#define MTAC_PERPLEXITY_H

#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

// The mean of -log p(ids[i] | the ids before it in its window) over i = 1..n-1, in consecutive
// windows of T inputs (window k: inputs ids[kT .. kT+T-1], targets one position further; the last
// window shorter), each starting a fresh context: every id but the first is predicted once, as
// the sequential evaluation of a shard holding the same ids (train_eval_loss with B = 1). The loss
// is computed in double from each window's logits, so a window costs one forward without targets
// (no activations kept for a backward). *loss; *windows (when non-NULL) the windows run. 0, or -1
// with a message (fewer than 2 ids, an id outside the vocabulary, the model's own failure).
// fn (when non-NULL) gets each finished window.
int perplexity_eval(model *m, const int32_t *ids, size_t n, int T, double *loss, int *windows,
                    void (*fn)(void *arg, int done, int total), void *arg, char *err, size_t en);

#endif
