// toytrain.h: training and evaluating a model on the toy task with freshly generated samples.
#ifndef MTAC_TOYTRAIN_H
#define MTAC_TOYTRAIN_H

#include "model/model.h"
#include "toy/toytask.h"

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

typedef struct {
    toy_config task;
    model_config model;
    int steps, batch_size, n_test, eval_every;
    float lr, weight_decay, beta2;
    uint64_t seed;
} toy_run_config;

typedef struct {
    double final_error;   // sequence error rate on the test set at the end (0..1)
    double final_loss;
    double seconds;
} toy_result;

// Sequence error rate of m on the rows: a row is wrong when any teacher-forced argmax on its
// answer letters or EOS differs from the truth.
int toy_error_rate(model *m, const toy_config *task, const int *rows, int n_rows, int batch, double *err_rate,
                   char *err, size_t n);

// Trains c->model on generated rows (never one of the test rows), with constant lr AdamW, and
// evaluates every eval_every steps; appends JSON lines {step, loss, test_error} to metrics when
// non-NULL and prints progress.
int toy_run(const toy_run_config *c, FILE *metrics, toy_result *res, char *err, size_t n);

#endif
