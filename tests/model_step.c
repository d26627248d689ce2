// model_step.c: the C side of tests/ref/check_model_against_torch.py, with the command line of
// `model_ref.py run`: logits, loss and every weight's gradient at the given weights, then N
// AdamW steps (loss, backward, global-norm clip, update) with the loss before each step.
#include "io/safetensors.h"
#include "model/model.h"
#include "train/step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int die(const char *msg) {
    fprintf(stderr, "model_step: %s\n", msg);
    return 1;
}

int main(int argc, char **argv) {
    const char *cfg_path = NULL, *wpath = NULL, *dpath = NULL, *out = NULL;
    int steps = 0;
    double lr = 1e-3, b1 = 0.9, b2 = 0.98, eps = 1e-8, wd = 0.0, clip = 1.0;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--config")) cfg_path = v;
        else if (!strcmp(a, "--weights")) wpath = v;
        else if (!strcmp(a, "--data")) dpath = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--steps")) steps = atoi(v);
        else if (!strcmp(a, "--lr")) lr = atof(v);
        else if (!strcmp(a, "--beta1")) b1 = atof(v);
        else if (!strcmp(a, "--beta2")) b2 = atof(v);
        else if (!strcmp(a, "--eps")) eps = atof(v);
        else if (!strcmp(a, "--weight-decay")) wd = atof(v);
        else if (!strcmp(a, "--clip")) clip = atof(v);
        else return die("unknown option");
    }
    if (!cfg_path || !wpath || !dpath || !out) return die("usage: model_step --config C --weights W --data D --out O [...]");
    char err[512];
    model_config c;
    if (model_config_load(cfg_path, &c, err, sizeof err)) return die(err);
    model *m = model_create(&c, err, sizeof err);
    if (!m || model_load_weights(m, wpath, err, sizeof err)) return die(err);
    st_file d;
    if (st_read(dpath, &d, err, sizeof err)) return die(err);
    const st_tensor *tt = st_find(&d, "tokens"), *tg = st_find(&d, "targets");
    if (!tt || !tg || tt->ndim != 2 || tg->numel != tt->numel) return die("data needs tokens and targets (B,T)");
    const int B = (int)tt->shape[0], T = (int)tt->shape[1], N = B * T, V = c.vocab_size;
    int *tok = malloc(2 * (size_t)N * sizeof(int)), *tgt = tok + N;
    for (int i = 0; i < N; i++) tok[i] = (int)lrintf(tt->data[i]), tgt[i] = (int)lrintf(tg->data[i]);

    int nt;
    const model_tensor *mt = model_tensors(m, &nt);
    const size_t P = model_num_params(m);
    // outputs: logits, loss, grad.* (step 0), losses, final.*
    float *init_grads = malloc(P * sizeof(float)), *finals = malloc(P * sizeof(float));
    float *logits = malloc((size_t)N * V * sizeof(float)), *losses = calloc(steps > 0 ? steps : 1, sizeof(float));
    float loss0 = 0;
    adamw opt;
    if (adamw_init(&opt, P, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd)) return die("out of memory");
    // the gradient at the given weights, then the steps of train/step.h
    model_zero_grad(m);
    if (model_forward(m, tok, tgt, B, T, &loss0, err, sizeof err) || model_backward(m, err, sizeof err)) return die(err);
    memcpy(logits, model_logits(m), (size_t)N * V * sizeof(float));
    memcpy(init_grads, model_grads(m), P * sizeof(float));
    step_same_batch src = {tok, tgt, (size_t)N};  // the file's batch every step
    const step_config sc = {B, T, 1, (float)clip, 0, step_same_batch_fn, &src, NULL};
    trainer *tr = trainer_create(m, &opt, dist_self(), &sc, err, sizeof err);
    if (!tr) return die(err);
    for (int s = 0; s < steps; s++) {
        step_stats st;
        if (trainer_step(tr, s, (float)lr, &st, err, sizeof err)) return die(err);
        losses[s] = (float)st.loss;
    }
    trainer_free(tr);
    memcpy(finals, model_params(m), P * sizeof(float));

    int n_out = 2 + nt + (steps > 0 ? 1 + nt : 0);
    st_tensor *ts = calloc((size_t)n_out, sizeof *ts);
    char (*names)[96] = calloc((size_t)n_out, sizeof *names);
    int k = 0;
    ts[k] = (st_tensor){.name = "logits", .ndim = 3, .shape = {B, T, V}, .numel = (size_t)N * V, .data = logits}, k++;
    ts[k] = (st_tensor){.name = "loss", .ndim = 1, .shape = {1}, .numel = 1, .data = &loss0}, k++;
    for (int kind = 0; kind < (steps > 0 ? 2 : 1); kind++)
        for (int i = 0; i < nt; i++, k++) {
            snprintf(names[k], sizeof names[0], "%s%s", kind ? "final." : "grad.", mt[i].name);
            ts[k].name = names[k];
            ts[k].ndim = mt[i].ndim;
            for (int j = 0; j < mt[i].ndim; j++) ts[k].shape[j] = mt[i].shape[j];
            ts[k].numel = mt[i].numel;
            ts[k].data = (kind ? finals : init_grads) + mt[i].offset;
        }
    if (steps > 0) ts[k] = (st_tensor){.name = "losses", .ndim = 1, .shape = {steps}, .numel = (size_t)steps, .data = losses}, k++;
    if (st_write(out, ts, k, NULL, 0, err, sizeof err)) return die(err);
    adamw_free(&opt);
    free(ts), free(names), free(init_grads), free(finals), free(logits), free(losses), free(tok);
    st_free(&d);
    model_free(m);
    return 0;
}
