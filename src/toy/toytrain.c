// toytrain.c: see toytrain.h.
#include "toy/toytrain.h"
#include "train/optim.h"
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

int toy_error_rate(model *m, const toy_config *task, const int *rows, int n_rows, int batch, double *rate, char *err,
                   size_t n) {
    const int R = toy_row_len(task), T = R - 1, V = model_cfg(m)->vocab_size;
    int *tok = malloc(2 * (size_t)batch * T * sizeof(int)), *tgt = tok + (size_t)batch * T;
    int wrong = 0, rc = 0;
    model_set_training(m, 0, 0);
    for (int r0 = 0; r0 < n_rows && !rc; r0 += batch) {
        int B = n_rows - r0 < batch ? n_rows - r0 : batch;
        for (int b = 0; b < B; b++) toy_example(task, rows + (size_t)(r0 + b) * R, tok + (size_t)b * T, tgt + (size_t)b * T);
        float loss;
        if ((rc = model_forward(m, tok, tgt, B, T, &loss, err, n))) break;
        const float *lg = model_logits(m);
        for (int b = 0; b < B; b++) {
            int bad = 0;
            for (int t = 0; t < T; t++) {
                int want = tgt[(size_t)b * T + t];
                if (want < 0) continue;
                const float *z = lg + ((size_t)b * T + t) * V;
                int best = 0;
                for (int j = 1; j < V; j++) best = z[j] > z[best] ? j : best;
                bad |= best != want;
            }
            wrong += bad;
        }
    }
    free(tok);
    if (!rc) *rate = (double)wrong / n_rows;
    return rc;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int toy_run(const toy_run_config *c, FILE *metrics, toy_result *res, char *err, size_t n) {
    if (toy_config_check(&c->task, err, n)) return -1;
    const int R = toy_row_len(&c->task), T = R - 1, B = c->batch_size;
    model *m = model_create(&c->model, err, n);
    if (!m) return -1;
    model_init(m, c->seed);
    adamw opt;
    int *test = malloc((size_t)c->n_test * R * sizeof(int)), *rows = malloc((size_t)B * R * sizeof(int));
    int *tok = malloc(2 * (size_t)B * T * sizeof(int)), *tgt = tok + (size_t)B * T;
    uint64_t *hashes = malloc((size_t)c->n_test * sizeof(uint64_t));
    int rc = adamw_init(&opt, model_num_params(m), c->lr, 0.9f, c->beta2, 1e-8f, c->weight_decay);
    if (rc || !test || !rows || !tok || !hashes) {
        rc = errmsg(err, n, "out of memory");
        goto done;
    }
    // The test set comes from its own stream; training rows that equal a test row are skipped.
    uint64_t test_rng = c->seed * 0x9E3779B97F4A7C15ULL ^ 0x7E57, train_rng = c->seed * 0xD1B54A32D192ED03ULL ^ 0x7A1;
    for (int i = 0; i < c->n_test; i++) {
        toy_generate(&c->task, &test_rng, test + (size_t)i * R);
        hashes[i] = toy_row_hash(&c->task, test + (size_t)i * R);
    }
    qsort(hashes, (size_t)c->n_test, sizeof *hashes, cmp_u64);
    double t0 = now_s(), loss_ema = NAN, rate = NAN;
    for (int step = 0; step < c->steps && !rc; step++) {
        for (int b = 0; b < B; b++) {
            int *row = rows + (size_t)b * R;
            do {
                toy_generate(&c->task, &train_rng, row);
                uint64_t h = toy_row_hash(&c->task, row);
                if (!bsearch(&h, hashes, (size_t)c->n_test, sizeof h, cmp_u64)) break;
            } while (1);
            toy_example(&c->task, row, tok + (size_t)b * T, tgt + (size_t)b * T);
        }
        float loss;
        model_zero_grad(m);
        model_set_training(m, 1, c->seed * 1000003u + (uint64_t)step);
        if ((rc = model_forward(m, tok, tgt, B, T, &loss, err, n)) || (rc = model_backward(m, err, n))) break;
        clip_grad_norm(model_grads(m), model_num_params(m), 1.0);
        adamw_update(&opt, model_params(m), model_grads(m), model_num_params(m), c->lr, NULL);
        loss_ema = isnan(loss_ema) ? loss : 0.95 * loss_ema + 0.05 * loss;
        int s1 = step + 1;
        if (s1 % c->eval_every == 0 || s1 == c->steps) {
            if ((rc = toy_error_rate(m, &c->task, test, c->n_test, B, &rate, err, n))) break;
            double el = now_s() - t0;
            printf("  step %6d/%d | loss %.4f | test error %5.1f%% | %.0fs, ETA %.0fs\n", s1, c->steps, loss_ema,
                   100 * rate, el, el / s1 * (c->steps - s1));
            fflush(stdout);
            if (metrics) {
                fprintf(metrics, "{\"step\":%d,\"loss\":%.6f,\"test_error\":%.6f}\n", s1, loss_ema, rate);
                fflush(metrics);
            }
        }
    }
    if (!rc && res) res->final_error = rate, res->final_loss = loss_ema, res->seconds = now_s() - t0;
done:
    adamw_free(&opt);
    free(test), free(rows), free(tok), free(hashes);
    model_free(m);
    return rc;
}
