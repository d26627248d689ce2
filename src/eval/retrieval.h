// retrieval.h: scoring a model on the long-context tasks of data/longctx.h (docs/longctx.md):
// greedy answers after each example's question, exact match.
#ifndef MTAC_RETRIEVAL_H
#define MTAC_RETRIEVAL_H

#include "data/longctx.h"
#include "model/model.h"

#include <stddef.h>
#include <stdint.h>

// correct: exact matches; retrieved: answers whose tokens before the EOS are all right, whatever
// follows them (a model that retrieves but does not stop, e.g. copying on past the needle).
typedef struct {
    int correct, retrieved, total;
} lc_score;

// What answers the questions, B prompts at a time: start reads the prompts (rows: (B, L) tokens,
// prompt b is row b's first lens[b] tokens) and step feeds one token per example (a PAD to an
// example that is done); after each, greedy[b] is example b's next token. 0, or -1 with a message.
typedef struct {
    int (*start)(void *arg, const int *rows, int B, int L, const int *lens, int *greedy, char *err, size_t n);
    int (*step)(void *arg, const int *tokens, int *greedy, char *err, size_t n);
    void *arg;
} lc_answerer;

// What the caller hears while scoring (every member may be NULL): progress after each batch with
// the examples done; answered after each example i with its expected answer (ending with EOS) and
// the greedy tokens it got (ending with EOS when the answerer stopped, at most n_expected + 1).
typedef struct {
    void (*progress)(void *arg, int done);
    void (*answered)(void *arg, int i, const int *expected, int n_expected, const int *got, int n_got, int correct);
    void *arg;
} lc_eval_hooks;

// Draws n_examples examples of c from hay (seed: example i uses the generator state derived from
// seed and i, so the examples do not depend on batch) and has a answer them, in batches of up to
// batch examples: the prompt up to the answer, then greedy tokens until EOS or one token past
// the expected answer's length. An answer is correct when its tokens and EOS equal the expected
// ones exactly. hooks may be NULL. 0, or -1 with a message.
int lc_score_answers(const lc_answerer *a, const lc_config *c, const uint32_t *hay, size_t hay_n, uint64_t seed,
                     int n_examples, int batch, lc_score *score, const lc_eval_hooks *hooks, char *err, size_t n);

// lc_score_answers with the model's greedy answers (its KV/MTA decoder: the prompts through the
// prefill, then one step per token).
int lc_evaluate(model *m, const lc_config *c, const uint32_t *hay, size_t hay_n, uint64_t seed, int n_examples,
                int batch, lc_score *score, const lc_eval_hooks *hooks, char *err, size_t n);

#endif
