// toytrain.c: see toytrain.h.
#include "toy/toytrain.h"
#include "train/optim.h"
#include "train/step.h"
#include "util/errmsg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int argmax(const float *z, int V) {
    int best = 0;
    for (int j = 1; j < V; j++) best = z[j] > z[best] ? j : best;
    return best;
}

int toy_evaluate(model *m, const toy_config *task, const int *rows, int n_rows, int batch, toy_eval *ev, char *err,
                 size_t n) {
    // Answer = row[P..P+N]: the N block letters and EOS; the logits at position t predict row[t+1].
    const int R = toy_row_len(task), T = R - 1, N = task->block_len, P = R - 1 - N, V = model_cfg(m)->vocab_size;
    int *tok = malloc(2 * (size_t)batch * T * sizeof(int)), *tgt = tok + (size_t)batch * T;
    unsigned char *ok = malloc((size_t)batch);
    int wrong = 0, exact = 0, rc = 0;
    if (!tok || !ok) rc = errmsg(err, n, "out of memory");
    model_set_training(m, 0, 0);
    for (int r0 = 0; r0 < n_rows && !rc; r0 += batch) {
        const int B = n_rows - r0 < batch ? n_rows - r0 : batch;
        const int *rb = rows + (size_t)r0 * R;
        // teacher forcing: one forward over the whole rows
        for (int b = 0; b < B; b++) toy_example(task, rb + (size_t)b * R, tok + (size_t)b * T, tgt + (size_t)b * T);
        float loss;
        if ((rc = model_forward(m, tok, tgt, B, T, &loss, err, n))) break;
        const float *lg = model_logits(m);
        for (int b = 0; b < B; b++) {
            int bad = 0;
            for (int t = P - 1; t < T; t++) bad |= argmax(lg + ((size_t)b * T + t) * V, V) != rb[(size_t)b * R + t + 1];
            wrong += bad;
        }
        // greedy generation: N+1 forwards, each appending the argmax at the next answer position;
        // the model is causal, so the PAD after the generated prefix cannot influence it
        for (int b = 0; b < B; b++) {
            ok[b] = 1;
            for (int t = P; t < T; t++) tok[(size_t)b * T + t] = TOY_PAD;
        }
        for (int s = 0; s <= N && !rc; s++) {
            if ((rc = model_forward(m, tok, NULL, B, T, NULL, err, n))) break;
            lg = model_logits(m);
            for (int b = 0; b < B; b++) {
                int g = argmax(lg + ((size_t)b * T + P - 1 + s) * V, V);
                ok[b] &= g == rb[(size_t)b * R + P + s];
                if (s < N) tok[(size_t)b * T + P + s] = g;
            }
        }
        for (int b = 0; b < B; b++) exact += ok[b];
    }
    free(tok), free(ok);
    if (!rc) ev->error = (double)wrong / n_rows, ev->exact_match = (double)exact / n_rows;
    return rc;
}

void toy_result_free(toy_result *r) {
    free(r->eval_step), free(r->eval_error), free(r->eval_exact);
    r->eval_step = r->eval_error = r->eval_exact = NULL;
    r->n_evals = 0;
}

void toy_test_rows(const toy_config *task, uint64_t seed, int n_test, int *rows) {
    uint64_t rng = seed * 0x9E3779B97F4A7C15ULL ^ 0x7E57;
    for (int i = 0; i < n_test; i++) toy_generate(task, &rng, rows + (size_t)i * toy_row_len(task));
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

// step_batch_fn: fresh rows from the training stream; rows equal to a test row are skipped.
typedef struct {
    const toy_config *task;
    uint64_t rng;
    int B, n_test;
    int *rows;               // (B, R)
    const uint64_t *hashes;  // the test rows' hashes, sorted
} toy_source;

static int toy_batch(void *arg, int step, int a, int *tok, int *tgt, char *err, size_t n) {
    toy_source *s = arg;
    const int R = toy_row_len(s->task), T = R - 1;
    for (int b = 0; b < s->B; b++) {
        int *row = s->rows + (size_t)b * R;
        do {
            toy_generate(s->task, &s->rng, row);
            uint64_t h = toy_row_hash(s->task, row);
            if (!bsearch(&h, s->hashes, (size_t)s->n_test, sizeof h, cmp_u64)) break;
        } while (1);
        if (tok) toy_example(s->task, row, tok + (size_t)b * T, tgt + (size_t)b * T);
    }
    return 0;
}

int toy_run(const toy_run_config *c, FILE *metrics, const char *weights_path, toy_result *res, char *err, size_t n) {
    if (toy_config_check(&c->task, err, n)) return -1;
    const int R = toy_row_len(&c->task), T = R - 1, B = c->batch_size;
    model *m = model_create(&c->model, err, n);
    if (!m) return -1;
    model_init(m, c->seed);
    adamw opt;
    int *test = malloc((size_t)c->n_test * R * sizeof(int)), *rows = malloc((size_t)B * R * sizeof(int));
    trainer *tr = NULL;
    uint64_t *hashes = malloc((size_t)c->n_test * sizeof(uint64_t));
    const int max_evals = c->steps / c->eval_every + 1;
    double *ev_step = calloc((size_t)max_evals, sizeof(double)), *ev_err = calloc((size_t)max_evals, sizeof(double)),
           *ev_exact = calloc((size_t)max_evals, sizeof(double));
    int n_evals = 0;
    int rc = adamw_init(&opt, model_num_params(m), c->lr, 0.9f, c->beta2, 1e-8f, c->weight_decay);
    if (rc || !test || !rows || !hashes || !ev_step || !ev_err || !ev_exact) {
        rc = errmsg(err, n, "out of memory");
        goto done;
    }
    // The test set comes from its own stream; training rows that equal a test row are skipped.
    toy_test_rows(&c->task, c->seed, c->n_test, test);
    for (int i = 0; i < c->n_test; i++) hashes[i] = toy_row_hash(&c->task, test + (size_t)i * R);
    qsort(hashes, (size_t)c->n_test, sizeof *hashes, cmp_u64);
    toy_source src = {&c->task, c->seed * 0xD1B54A32D192ED03ULL ^ 0x7A1, B, c->n_test, rows, hashes};
    const step_config sc = {B, T, 1, 1.0f, c->seed, toy_batch, &src, NULL};
    if (!(tr = trainer_create(m, &opt, dist_self(), &sc, err, n))) {
        rc = -1;
        goto done;
    }
    const lr_schedule sched = {c->schedule, c->lr, c->warmup, c->steps, 0.0f};
    double t0 = now_s(), loss_ema = NAN;
    toy_eval ev = {NAN, NAN};
    for (int step = 0; step < c->steps && !rc; step++) {
        step_stats st;
        if (trainer_step(tr, step, lr_at(&sched, step), &st, err, n)) {
            rc = -1;  // an error, or a NaN loss or weight (err says which)
            break;
        }
        const double loss = st.loss;
        loss_ema = isnan(loss_ema) ? loss : 0.95 * loss_ema + 0.05 * loss;
        int s1 = step + 1;
        if (s1 % c->eval_every == 0 || s1 == c->steps) {
            if ((rc = toy_evaluate(m, &c->task, test, c->n_test, B, &ev, err, n))) break;
            ev_step[n_evals] = s1, ev_err[n_evals] = ev.error, ev_exact[n_evals++] = ev.exact_match;
            double el = now_s() - t0;
            printf("  step %6d/%d | loss %.4f | test error %5.1f%% | exact match %5.1f%% | %.0fs, ETA %.0fs\n", s1,
                   c->steps, loss_ema, 100 * ev.error, 100 * ev.exact_match, el, el / s1 * (c->steps - s1));
            fflush(stdout);
            if (metrics) {
                fprintf(metrics, "{\"step\":%d,\"loss\":%.6f,\"test_error\":%.6f,\"exact_match\":%.6f}\n", s1, loss_ema,
                        ev.error, ev.exact_match);
                fflush(metrics);
            }
        }
    }
    if (!rc && weights_path) rc = model_save_weights(m, weights_path, err, n);
    if (!rc && res) {
        res->final = ev, res->final_loss = loss_ema, res->seconds = now_s() - t0;
        res->n_evals = n_evals, res->eval_step = ev_step, res->eval_error = ev_err, res->eval_exact = ev_exact;
        ev_step = ev_err = ev_exact = NULL;
    }
done:
    trainer_free(tr);
    adamw_free(&opt);
    free(ev_step), free(ev_err), free(ev_exact);
    free(test), free(rows), free(hashes);
    model_free(m);
    return rc;
}
