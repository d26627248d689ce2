// retrieval.h: scoring a model on the long-context tasks of data/longctx.h (docs/longctx.md):
// greedy answers after each example's question, exact match.
#ifndef MTAC_RETRIEVAL_H
#define MTAC_RETRIEVAL_H

#include "data/longctx.h"
#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    int correct, total;
} lc_score;

// Draws n_examples examples of c from hay (seed: example i uses the generator state derived from
// seed and i, so the examples do not depend on batch) and answers each greedily: the prompt up to
// the answer through the decoder's prefill (batches of up to batch examples), then one token at a
// time until EOS or one token past the expected answer's length. An answer is correct when its
// tokens and EOS equal the expected ones exactly. progress (may be NULL) is called after each
// batch with the examples done. 0, or -1 with a message.
int lc_evaluate(model *m, const lc_config *c, const uint32_t *hay, size_t hay_n, uint64_t seed, int n_examples,
                int batch, lc_score *score, void (*progress)(void *arg, int done), void *arg, char *err, size_t n);

#endif
