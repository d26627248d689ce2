// retrieval.h: scoring a model on the long-context tasks of data/longctx.h (docs/longctx.md):
// greedy answers after each example's question, exact match; and the same tasks for a run with its
// own tokenizer (a pretrained model's BPE): lc_generate's text encoded, answers scored on text.
#ifndef MTAC_RETRIEVAL_H
#define MTAC_RETRIEVAL_H

#include "data/longctx.h"
#include "model/model.h"
#include "tok/tokenizer.h"

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

// ---- a run with its own tokenizer -----------------------------------------------------------------
// The task is the same text: lc_generate's example made from a haystack of text (the run's shard
// decoded), then encoded with the run's tokenizer. The prompt ends before the space that precedes
// the answer ("... A: the red door is") and the answer starts with it (" kobal."), as BPE
// tokenizers attach a space to the word after it; answers are scored on their decoded text.

// The haystack: a shard's ids in t's vocabulary decoded to text (special tokens, the documents'
// EOS, dropped), and what the examples need from it.
typedef struct {
    const tokenizer *tok;
    uint32_t *text;          // the text's bytes, one per element (lc_generate's byte tokens)
    size_t text_n;
    double bytes_per_token;  // of the shard: what a context of tokens is first guessed to hold
} lc_text;

// ids[0 .. n_ids) decoded into h (h->text malloc'd: lc_text_free). 0, or -1 with a message (an
// empty shard; an id outside t's vocabulary: a shard made with another tokenizer).
int lc_text_haystack(const tokenizer *t, const uint32_t *ids, size_t n_ids, lc_text *h, char *err, size_t n);
void lc_text_free(lc_text *h);

// Greedy answers run to LC_TEXT_SLACK tokens past the expected answer and its EOS (room for an
// answer tokenized otherwise than the expected one, and to see what follows it).
enum { LC_TEXT_SLACK = 2, LC_TEXT_ANSWER = 320 };

typedef struct {
    int n_prompt;                   // the prompt's ids (with the tokenizer's BOS first when it adds one)
    int answer[LC_TEXT_ANSWER];     // the answer's text encoded alone, and the tokenizer's first EOS
    int n_answer;                   // when it has one: what a right greedy answer reads
    char expected[LC_TEXT_ANSWER];  // the text scored: the answer without its final full stop, " kobal"
    int byte_context;               // the context in bytes lc_generate made the example's text at
} lc_text_example;

// One example of c (needles or bAbI; c->context counts the tokenizer's ids) from h, its prompt's
// ids into prompt (room for c->context ints). The text is lc_generate's at a byte context guessed
// from h's bytes per token; while the prompt, the answer and LC_TEXT_SLACK tokens are more than
// c->context, it is made again from the same generator state (*rng on entry) at a shorter byte
// context, so that the prompt and the longest greedy answer fit the model's window. *rng ends
// as lc_generate left it. 0, or -1 with a message (copy, a haystack too short for the context, a
// context too short for the needles or facts in these tokens, lc_generate's).
int lc_text_generate(const lc_config *c, const lc_text *h, uint64_t *rng, int *prompt, lc_text_example *ex, char *err,
                     size_t n);

// Scores a greedy answer's ids got[0 .. n_got) (perhaps ending with an EOS) after a prompt whose
// last id is tail: its text is right when it starts with expected and the character after that,
// if any, is no letter or digit (" kobal." and " kobal" right, " kobalt" wrong); *retrieved: it
// starts with expected, whatever follows. Ids outside t's vocabulary end the text. Returns
// whether it is right.
int lc_text_judge(const tokenizer *t, int tail, const char *expected, const int *got, int n_got, int *retrieved);

// lc_score_answers with examples from lc_text_generate: the prompt, then greedy tokens until one
// of the tokenizer's EOS ids or n_answer + LC_TEXT_SLACK tokens, scored by lc_text_judge (correct
// and retrieved as it says). The hooks hear the expected ids (lc_text_example's answer).
int lc_score_text_answers(const lc_answerer *a, const lc_config *c, const lc_text *h, uint64_t seed, int n_examples,
                          int batch, lc_score *score, const lc_eval_hooks *hooks, char *err, size_t n);
int lc_evaluate_text(model *m, const lc_config *c, const lc_text *h, uint64_t seed, int n_examples, int batch,
                     lc_score *score, const lc_eval_hooks *hooks, char *err, size_t n);

#endif
