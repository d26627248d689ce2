// retrieval.c: greedy exact-match scoring on the long-context tasks (see retrieval.h).
#include "eval/retrieval.h"
#include "data/tokenizer.h"
#include "util/errmsg.h"
#include "util/rng.h"

#include <stdlib.h>
#include <string.h>

int lc_score_answers(const lc_answerer *a, const lc_config *c, const uint32_t *hay, size_t hay_n, uint64_t seed,
                     int n_examples, int batch, lc_score *score, const lc_eval_hooks *hooks, char *err, size_t n) {
    const int L = c->context;
    if (lc_config_check(c, err, n)) return -1;
    if (n_examples < 1 || batch < 1) return errmsg(err, n, "examples %d and batch %d must be >= 1", n_examples, batch);
    if (batch > n_examples) batch = n_examples;
    int *rows = malloc((size_t)batch * L * sizeof(int)), *lens = malloc((size_t)batch * sizeof(int));
    int *next = malloc((size_t)batch * sizeof(int)), *greedy = malloc((size_t)batch * sizeof(int));
    unsigned char *done = malloc((size_t)batch);
    lc_example *ex = malloc((size_t)batch * sizeof *ex);
    int *got = malloc((size_t)batch * (L + 1) * sizeof(int)), *n_got = malloc((size_t)batch * sizeof(int));
    int rc = 0;
    if (!rows || !lens || !next || !greedy || !done || !ex || !got || !n_got)
        rc = errmsg(err, n, "out of memory");
    score->correct = score->retrieved = score->total = 0;
    for (int e0 = 0; e0 < n_examples && !rc; e0 += batch) {
        const int B = n_examples - e0 < batch ? n_examples - e0 : batch;
        int longest_answer = 0;
        for (int b = 0; b < B && !rc; b++) {
            uint64_t rng = (seed ^ 0x10C0C7ULL) * 0x9E3779B97F4A7C15ULL + (uint64_t)(e0 + b);
            splitmix64(&rng);
            rc = lc_generate(c, hay, hay_n, &rng, rows + (size_t)b * L, &ex[b], err, n);
            lens[b] = ex[b].answer_at;
            const int al = ex[b].len - ex[b].answer_at;
            longest_answer = al > longest_answer ? al : longest_answer;
        }
        if (rc || (rc = a->start(a->arg, rows, B, L, lens, greedy, err, n))) break;
        // greedy tokens until EOS or one past the expected answer's length (its last token is
        // EOS), right or wrong, so that the hooks see whole answers
        for (int b = 0; b < B; b++) done[b] = 0, n_got[b] = 0;
        for (int s = 0; s <= longest_answer && !rc; s++) {
            int all_done = 1;
            for (int b = 0; b < B; b++) {
                next[b] = TOK_PAD;
                if (done[b]) continue;
                const int g = greedy[b];
                got[(size_t)b * (L + 1) + n_got[b]++] = g;
                if (g == TOK_EOS || n_got[b] > ex[b].len - ex[b].answer_at) done[b] = 1;
                else next[b] = g, all_done = 0;
            }
            if (all_done) break;
            rc = a->step(a->arg, next, greedy, err, n);
        }
        for (int b = 0; b < B && !rc; b++) {
            const int *want = rows + (size_t)b * L + ex[b].answer_at, *g = got + (size_t)b * (L + 1);
            const int m = ex[b].len - ex[b].answer_at;  // the expected tokens, EOS included
            int same = 0;                                // how many of them the answer begins with
            while (same < m && same < n_got[b] && g[same] == want[same]) same++;
            const int correct = same == m && n_got[b] == m;
            score->correct += correct, score->retrieved += same >= m - 1, score->total++;
            if (hooks && hooks->answered) hooks->answered(hooks->arg, e0 + b, want, m, g, n_got[b], correct);
        }
        if (!rc && hooks && hooks->progress) hooks->progress(hooks->arg, e0 + B);
    }
    free(rows), free(lens), free(next), free(greedy), free(done), free(ex), free(got), free(n_got);
    return rc;
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
