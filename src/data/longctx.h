// longctx.h: long-context retrieval tasks (docs/longctx.md), generated in byte tokens inside
// King James Bible text (the haystack: a token shard's windows), deterministic from a seed.
//
// Needles: N sentences "the <key> is <value>." inserted into the haystack at chosen depths,
// then a question for one or several keys:
//   <bos> haystack ... the red door is kobal. ... haystack \nQ: what is the red door? A: the red door is kobal<eos>
// The prompt ends with the asked needle's words "the red door is ": the answer is the value, a
// cloze (several keys: "kobal, the blue lamp is tamir").
// Keys are single words, or (compound) two-word keys whose words other needles share ("red door",
// "red lamp", "blue door"), so that only the pair identifies the needle. Values are made-up words.
//
// bAbI-style questions (Weston et al. 2015): facts about people, places and objects spread
// through the haystack in order, then one question:
//   qa1  single supporting fact: "Mary went to the garden." ... "Where is Mary?" -> garden
//   qa2  two supporting facts:   "John took the apple." "John went to the office." ...
//                                "Where is the apple?" -> office
//   qa3  three supporting facts: "Where was the apple before the office?" -> the place the
//                                apple was in before it was last carried to the office
// (qa2 and qa3 draw from three people and three things, so that few facts still make a question.)
#ifndef MTAC_LONGCTX_H
#define MTAC_LONGCTX_H

#include <stddef.h>
#include <stdint.h>

enum { LC_MAX_NEEDLES = 32, LC_MAX_FACTS = 64 };

// copy (training only): a haystack window, "\nQ: go on. A: ", the first 12 tokens of a span
// anywhere in it, and (the answer) the span's next tokens: every answer token is a copy found by
// matching what precedes it, the pattern needle retrieval is made of (an induction head).
typedef enum { LC_NEEDLE = 0, LC_QA1 = 1, LC_QA2 = 2, LC_QA3 = 3, LC_COPY = 4 } lc_task;

typedef struct {
    lc_task task;
    int context;    // tokens in an example, everything included (at least 64)
    // needles
    int n_needles;  // 1 .. LC_MAX_NEEDLES
    int n_queries;  // keys asked, 1 .. n_needles (answers joined by ", ")
    int compound;   // 1: two-word keys sharing words with other keys
    double depth;   // where the first asked needle starts, as a fraction of the haystack (0 =
                    // its start, 1 = its end); < 0: anywhere
    // bAbI
    int n_facts;    // facts before the question (qa1 >= 1, qa2 >= 3, qa3 >= 4), <= LC_MAX_FACTS
} lc_config;

// An example: row[0 .. len) tokens; the answer (with its EOS) is row[answer_at .. len).
typedef struct {
    int len, answer_at;
    int n_marks;
    int mark[LC_MAX_FACTS];  // where each needle or fact starts, in order of position
    int asked_at;            // where the first asked needle starts (needles), -1 otherwise
    int hay_before_asked;    // haystack tokens before it (its depth is this over the haystack's)
    int hay_len;             // haystack tokens in the row
} lc_example;

// Checks a config (ranges; a context long enough for the needles or facts and the question). 0,
// or -1 with a message.
int lc_config_check(const lc_config *c, char *err, size_t n);

// One example into row (c->context ints) from hay[0 .. hay_n) (byte tokens of the haystack shard)
// and the generator state *rng. The haystack is one contiguous window of hay; needles and facts go
// in at word boundaries; each asked key's sentence and each value occur exactly once in the row
// (windows that would repeat one are drawn again). 0, or -1 with a message (a config that fails
// lc_config_check, a haystack shorter than the context, no clean window in 100 draws).
int lc_generate(const lc_config *c, const uint32_t *hay, size_t hay_n, uint64_t *rng, int *row, lc_example *ex,
                char *err, size_t n);

// The training view: tokens = row[0 .. len-1), targets = row[1 .. len) with every target before
// the answer set to -1 when answers_only (the loss on the answer and its EOS alone).
void lc_training_view(const int *row, const lc_example *ex, int answers_only, int *tokens, int *targets);

// The training mixture (mtac train's mix, mix_tasks, mix_loss keys): which tasks, and the loss
// on answers only or on every token.
typedef struct {
    int n_tasks;
    lc_task task[5];
    int answers_only;
} lc_mix;

// "needle,qa1" and "answer"|"all" into *m; the shortest sequence (seq_len) every task fits in
// into *min_seq_len. 0, or -1 with a message.
int lc_mix_parse(const char *tasks, const char *loss, lc_mix *m, int *min_seq_len, char *err, size_t n);

// A task example in a training sequence of T tokens (tokens, targets): a task drawn from seed, an
// example of L tokens (L drawn from 64 to T + 1, at least what the task needs) from hay with
// random settings (needles: 1 to 4, one-word or compound keys, any depth, 1 to all of them asked,
// as fit; bAbI: its fewest facts to 8, as fit), as lc_training_view, into L - 1 positions from a
// random start: the example's EOS target may fall anywhere from position L - 2 to T - 1. The
// positions before and after it keep the caller's tokens (its language-modelling text) and,
// unless answers_only, its targets, but for the one before the example (-1: the example's BOS
// follows it). 0, or -1 with a message.
int lc_mix_sequence(const lc_mix *m, const uint32_t *hay, size_t hay_n, uint64_t seed, int T, int *tokens,
                    int *targets, char *err, size_t n);

// "needle", "qa1", "qa2", "qa3", "copy" and back; -1 for an unknown name.
int lc_task_from_name(const char *name);
const char *lc_task_name(lc_task t);

#endif
