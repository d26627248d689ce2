// retrieval.c: greedy exact-match scoring on the long-context tasks (see retrieval.h).
#include "eval/retrieval.h"
#include "data/tokenizer.h"
#include "util/errmsg.h"
#include "util/rng.h"

#include <stdlib.h>
#include <string.h>

static int argmax(const float *z, int V) {
    int best = 0;
    for (int j = 1; j < V; j++) best = z[j] > z[best] ? j : best;
    return best;
}

int lc_evaluate(model *m, const lc_config *c, const uint32_t *hay, size_t hay_n, uint64_t seed, int n_examples,
                int batch, lc_score *score, void (*progress)(void *arg, int done), void *arg, char *err, size_t n) {
    const int L = c->context, V = model_cfg(m)->vocab_size;
    if (lc_config_check(c, err, n)) return -1;
    if (n_examples < 1 || batch < 1) return errmsg(err, n, "examples %d and batch %d must be >= 1", n_examples, batch);
    if (V < TOK_VOCAB) return errmsg(err, n, "the model's vocabulary (%d) is not the byte tokenizer's (%d)", V, TOK_VOCAB);
    if (batch > n_examples) batch = n_examples;
    int *rows = malloc((size_t)batch * L * sizeof(int)), *lens = malloc((size_t)batch * sizeof(int));
    int *next = malloc((size_t)batch * sizeof(int)), *pos = malloc((size_t)batch * sizeof(int));
    unsigned char *ok = malloc((size_t)batch), *done = malloc((size_t)batch);
    lc_example *ex = malloc((size_t)batch * sizeof *ex);
    model_decoder *dec = NULL;
    int rc = 0;
    if (!rows || !lens || !next || !pos || !ok || !done || !ex) rc = errmsg(err, n, "out of memory");
    score->correct = score->total = 0;
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
        if (rc) break;
        // one decoder per batch size (the last batch may be smaller)
        if (!dec || B != batch) {
            model_decoder_free(dec);
            // room for the prompt and the longest answer any example of the batch may run to
            if (!(dec = model_decoder_create(m, B, 2 * L, err, n))) {
                rc = -1;
                break;
            }
        }
        if ((rc = model_decoder_prefill(dec, rows, L, lens, err, n))) break;
        for (int b = 0; b < B; b++) ok[b] = 1, done[b] = 0, pos[b] = ex[b].answer_at;
        for (int s = 0; s <= longest_answer && !rc; s++) {
            const float *z = model_decoder_logits(dec);
            int all_done = 1;
            for (int b = 0; b < B; b++) {
                next[b] = TOK_PAD;
                if (done[b]) continue;
                const int *row = rows + (size_t)b * L;
                const int g = argmax(z + (size_t)b * V, V);
                // expected: row[pos] while inside the answer (its last token is EOS)
                if (pos[b] >= ex[b].len || g != row[pos[b]]) ok[b] = 0;
                pos[b]++;
                if (g == TOK_EOS || !ok[b] || pos[b] > ex[b].len) done[b] = 1;
                else next[b] = g, all_done = 0;
            }
            if (all_done) break;
            // finished sequences take a PAD step that nothing reads (the decoder steps all B)
            rc = model_decoder_step(dec, next, err, n);
        }
        for (int b = 0; b < B; b++) score->correct += ok[b] && done[b], score->total++;
        if (progress) progress(arg, e0 + B);
    }
    model_decoder_free(dec);
    free(rows), free(lens), free(next), free(pos), free(ok), free(done), free(ex);
    return rc;
}
