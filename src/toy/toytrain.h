// toytrain.h: training and evaluating a model on the toy task with freshly generated samples.
#ifndef MTAC_TOYTRAIN_H
#define MTAC_TOYTRAIN_H

#include "model/model.h"
#include "toy/toytask.h"
#include "train/optim.h"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

typedef struct {
    toy_config task;
    model_config model;
    int steps, batch_size, n_test, eval_every;
    float lr, weight_decay, beta2;
    lr_kind schedule;  // constant (the paper), or linear/cosine decay to 0 over the steps
    int warmup;        // linear warmup steps
    uint64_t seed;
} toy_run_config;

typedef struct {
    double error;        // sequence error rate (0..1): a row is wrong when any teacher-forced argmax
                         // on its answer letters or EOS differs from the truth (the paper's metric)
    double exact_match;  // fraction of rows whose greedy continuation of BOS..query is exactly the
                         // answer block and EOS
} toy_eval;

typedef struct {
    toy_eval final;      // on the test set at the end
    double final_loss;
    double seconds;
    int n_evals;         // the evaluations along the way: step, test error, exact match
    double *eval_step, *eval_error, *eval_exact;  // malloc'd; toy_result_free releases them
} toy_result;

void toy_result_free(toy_result *r);

// Evaluates m on n_rows full rows (toy_row_len tokens each), batch rows per forward.
int toy_evaluate(model *m, const toy_config *task, const int *rows, int n_rows, int batch, toy_eval *ev, char *err,
                 size_t n);

// Trains c->model on generated rows (never one of the test rows), with constant lr AdamW, and
// evaluates every eval_every steps; appends JSON lines {step, loss, test_error, exact_match} to
// metrics when non-NULL and prints progress. With weights_path non-NULL the trained weights are
// saved there (safetensors) at the end.
int toy_run(const toy_run_config *c, FILE *metrics, const char *weights_path, toy_result *res, char *err, size_t n);

// The test rows of a run with this task and seed (n_test rows of toy_row_len tokens), exactly as
// toy_run draws them; for inspecting a trained model on them (mtac attnmap).
void toy_test_rows(const toy_config *task, uint64_t seed, int n_test, int *rows);

#endif
