// retrieval.c: greedy exact-match scoring on the long-context tasks (see retrieval.h).
#include "eval/retrieval.h"
#include "data/tokenizer.h"
#include "util/errmsg.h"
#include "util/rng.h"

#include <stdlib.h>
#include <string.h>

// The greedy answers of B prompts (rows: (B, L); prompt b is row b's first lens[b] tokens): answer
// b's tokens into got + b (L + 1), n_got[b] of them, each until one of the n_eos ids eos or
// max_got[b] tokens (at most L + 1), right or wrong, so that the hooks see whole answers; an
// example that is done is fed pad. 0, or -1 with a message.
static int greedy_answers(const lc_answerer *a, const int *rows, int B, int L, const int *lens, const int *max_got,
                          const int *eos, int n_eos, int pad, int *got, int *n_got, char *err, size_t n) {
    int *next = malloc((size_t)B * sizeof(int)), *greedy = malloc((size_t)B * sizeof(int));
    unsigned char *done = calloc((size_t)B, 1);
    int rc = next && greedy && done ? a->start(a->arg, rows, B, L, lens, greedy, err, n) : errmsg(err, n, "out of memory");
    for (int b = 0; b < B; b++) n_got[b] = 0;
    while (!rc) {
        int all_done = 1;
        for (int b = 0; b < B; b++) {
            next[b] = pad;
            if (done[b]) continue;
            const int g = greedy[b];
            int stop = ++n_got[b] == max_got[b];
            got[(size_t)b * (L + 1) + n_got[b] - 1] = g;
            for (int k = 0; k < n_eos; k++) stop |= g == eos[k];
            if (stop) done[b] = 1;
            else next[b] = g, all_done = 0;
        }
        if (all_done) break;
        rc = a->step(a->arg, next, greedy, err, n);
    }
    free(next), free(greedy), free(done);
    return rc;
}

// An example's prompt into row (the rest of its L tokens pad), its length into *len and the most
// greedy tokens its answer may run to into *max_got: lc_generate's (h NULL: one past the expected
// answer's length, EOS included) or lc_text_generate's. 0, or -1 with a message.
static int make_example(const lc_config *c, const uint32_t *hay, size_t hay_n, const lc_text *h, uint64_t *rng, int pad,
                        int *row, lc_example *ex, lc_text_example *tx, int *len, int *max_got, char *err, size_t n) {
    if (!h) {
        if (lc_generate(c, hay, hay_n, rng, row, ex, err, n)) return -1;
        *len = ex->answer_at, *max_got = ex->len - ex->answer_at + 1;
        return 0;
    }
    if (lc_text_generate(c, h, rng, row, tx, err, n)) return -1;
    for (int t = tx->n_prompt; t < c->context; t++) row[t] = pad;
    *len = tx->n_prompt, *max_got = tx->n_answer + LC_TEXT_SLACK;
    return 0;
}

// Whether answer b is right and (*retrieved) holds the answer: exact match of tokens and EOS
// (bytes; retrieved: all of them but the EOS), or lc_text_judge. The hooks hear it.
static int judge(const lc_text *h, const int *row, int len, const lc_example *ex, const lc_text_example *tx, const int *g,
                 int n_got, int i, const lc_eval_hooks *hooks, int *retrieved) {
    int correct;
    const int *want = h ? tx->answer : row + ex->answer_at;
    const int m = h ? tx->n_answer : ex->len - ex->answer_at;  // the expected tokens, EOS included
    if (h) correct = lc_text_judge(h->tok, row[len - 1], tx->expected, g, n_got, retrieved);
    else {
        int same = 0;  // how many of them the answer begins with
        while (same < m && same < n_got && g[same] == want[same]) same++;
        correct = same == m && n_got == m;
        *retrieved = same >= m - 1;
    }
    if (hooks && hooks->answered) hooks->answered(hooks->arg, i, want, m, g, n_got, correct);
    return correct;
}

// lc_score_answers (h NULL) and lc_score_text_answers.
static int score_examples(const lc_answerer *a, const lc_config *c, const uint32_t *hay, size_t hay_n, const lc_text *h,
                          uint64_t seed, int n_examples, int batch, lc_score *score, const lc_eval_hooks *hooks,
                          char *err, size_t n) {
    const int L = c->context;
    if (!h && lc_config_check(c, err, n)) return -1;
    if (n_examples < 1 || batch < 1) return errmsg(err, n, "examples %d and batch %d must be >= 1", n_examples, batch);
    if (batch > n_examples) batch = n_examples;
    // the tokens a done example is fed, and those that end an answer
    int eos[8], n_eos = 0;
    const int pad = h ? (tokenizer_n_eos(h->tok) ? tokenizer_eos_id(h->tok, 0) : 0) : TOK_PAD;
    if (!h) eos[n_eos++] = TOK_EOS;
    for (int k = 0; h && k < tokenizer_n_eos(h->tok) && n_eos < 8; k++) eos[n_eos++] = tokenizer_eos_id(h->tok, k);
    int *rows = malloc((size_t)batch * L * sizeof(int)), *lens = malloc((size_t)batch * sizeof(int));
    int *max_got = malloc((size_t)batch * sizeof(int)), *n_got = malloc((size_t)batch * sizeof(int));
    lc_example *ex = malloc((size_t)batch * sizeof *ex);
    lc_text_example *tx = h ? malloc((size_t)batch * sizeof *tx) : NULL;
    int *got = malloc((size_t)batch * (L + 1) * sizeof(int));
    int rc = 0;
    if (!rows || !lens || !max_got || !n_got || !ex || (h && !tx) || !got) rc = errmsg(err, n, "out of memory");
    score->correct = score->retrieved = score->total = 0;
    for (int e0 = 0; e0 < n_examples && !rc; e0 += batch) {
        const int B = n_examples - e0 < batch ? n_examples - e0 : batch;
        for (int b = 0; b < B && !rc; b++) {
            uint64_t rng = (seed ^ 0x10C0C7ULL) * 0x9E3779B97F4A7C15ULL + (uint64_t)(e0 + b);
            splitmix64(&rng);
            rc = make_example(c, hay, hay_n, h, &rng, pad, rows + (size_t)b * L, &ex[b], tx ? &tx[b] : NULL, &lens[b],
                              &max_got[b], err, n);
        }
        if (!rc) rc = greedy_answers(a, rows, B, L, lens, max_got, eos, n_eos, pad, got, n_got, err, n);
        for (int b = 0; b < B && !rc; b++) {
            int retrieved;
            score->correct += judge(h, rows + (size_t)b * L, lens[b], &ex[b], tx ? &tx[b] : NULL,
                                    got + (size_t)b * (L + 1), n_got[b], e0 + b, hooks, &retrieved);
            score->retrieved += retrieved, score->total++;
        }
        if (!rc && hooks && hooks->progress) hooks->progress(hooks->arg, e0 + B);
    }
    free(rows), free(lens), free(max_got), free(n_got), free(ex), free(tx), free(got);
    return rc;
}

int lc_score_answers(const lc_answerer *a, const lc_config *c, const uint32_t *hay, size_t hay_n, uint64_t seed,
                     int n_examples, int batch, lc_score *score, const lc_eval_hooks *hooks, char *err, size_t n) {
    return score_examples(a, c, hay, hay_n, NULL, seed, n_examples, batch, score, hooks, err, n);
}

int lc_score_text_answers(const lc_answerer *a, const lc_config *c, const lc_text *h, uint64_t seed, int n_examples,
                          int batch, lc_score *score, const lc_eval_hooks *hooks, char *err, size_t n) {
    return score_examples(a, c, h->text, h->text_n, h, seed, n_examples, batch, score, hooks, err, n);
}

// ---- the model as the answerer ------------------------------------------------------------------

typedef struct {
    model *m;
    model_decoder *dec;
    int B;
} model_answerer;

static void argmax_rows(const model_answerer *s, int *greedy) {
    const int V = model_cfg(s->m)->vocab_size;
    const float *z = model_decoder_logits(s->dec);
    for (int b = 0; b < s->B; b++) {
        const float *zb = z + (size_t)b * V;
        int best = 0;
        for (int j = 1; j < V; j++) best = zb[j] > zb[best] ? j : best;
        greedy[b] = best;
    }
}

static int model_start(void *arg, const int *rows, int B, int L, const int *lens, int *greedy, char *err, size_t n) {
    model_answerer *s = arg;
    if (!s->dec || B != s->B) {  // one decoder per batch size (the last batch may be smaller)
        model_decoder_free(s->dec);
        // room for the prompt and the longest answer an example may run to
        if (!(s->dec = model_decoder_create(s->m, B, 2 * L, err, n))) return -1;
        s->B = B;
    }
    if (model_decoder_prefill(s->dec, rows, L, lens, err, n)) return -1;
    argmax_rows(s, greedy);
    return 0;
}

// finished examples take a PAD step that nothing reads (the decoder steps all B)
static int model_step(void *arg, const int *tokens, int *greedy, char *err, size_t n) {
    model_answerer *s = arg;
    if (model_decoder_step(s->dec, tokens, err, n)) return -1;
    argmax_rows(s, greedy);
    return 0;
}

int lc_evaluate(model *m, const lc_config *c, const uint32_t *hay, size_t hay_n, uint64_t seed, int n_examples,
                int batch, lc_score *score, const lc_eval_hooks *hooks, char *err, size_t n) {
    if (model_cfg(m)->vocab_size < TOK_VOCAB)
        return errmsg(err, n, "the model's vocabulary (%d) is not the byte tokenizer's (%d)", model_cfg(m)->vocab_size,
                      TOK_VOCAB);
    model_answerer s = {m, NULL, 0};
    const lc_answerer a = {model_start, model_step, &s};
    const int rc = lc_score_answers(&a, c, hay, hay_n, seed, n_examples, batch, score, hooks, err, n);
    model_decoder_free(s.dec);
    return rc;
}

int lc_evaluate_text(model *m, const lc_config *c, const lc_text *h, uint64_t seed, int n_examples, int batch,
                     lc_score *score, const lc_eval_hooks *hooks, char *err, size_t n) {
    if (model_cfg(m)->vocab_size < tokenizer_vocab_size(h->tok))
        return errmsg(err, n, "the model's vocabulary (%d) is smaller than its tokenizer's (%d)", model_cfg(m)->vocab_size,
                      tokenizer_vocab_size(h->tok));
    model_answerer s = {m, NULL, 0};
    const lc_answerer a = {model_start, model_step, &s};
    const int rc = lc_score_text_answers(&a, c, h, seed, n_examples, batch, score, hooks, err, n);
    model_decoder_free(s.dec);
    return rc;
}
