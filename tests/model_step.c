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

typedef struct {
    const char *config, *weights, *data, *out;
    int steps;
    double lr, b1, b2, eps, wd, clip;
} options;

// The command line into *o: NULL, or what is wrong with it.
static const char *parse_options(int argc, char **argv, options *o) {
    *o = (options){NULL, NULL, NULL, NULL, 0, 1e-3, 0.9, 0.98, 1e-8, 0.0, 1.0};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--config")) o->config = v;
        else if (!strcmp(a, "--weights")) o->weights = v;
        else if (!strcmp(a, "--data")) o->data = v;
        else if (!strcmp(a, "--out")) o->out = v;
        else if (!strcmp(a, "--steps")) o->steps = atoi(v);
        else if (!strcmp(a, "--lr")) o->lr = atof(v);
        else if (!strcmp(a, "--beta1")) o->b1 = atof(v);
        else if (!strcmp(a, "--beta2")) o->b2 = atof(v);
        else if (!strcmp(a, "--eps")) o->eps = atof(v);
        else if (!strcmp(a, "--weight-decay")) o->wd = atof(v);
        else if (!strcmp(a, "--clip")) o->clip = atof(v);
        else return "unknown option";
    }
    if (!o->config || !o->weights || !o->data || !o->out) return "usage: model_step --config C --weights W --data D --out O [...]";
    return NULL;
}

// The data file's tokens and targets, (B,T) each, as ints: *tok holds 2 B T (the targets after
// the tokens; to free). 0, or -1 with a message in err.
static int read_batch(const char *path, int **tok, int *B, int *T, char *err, size_t n) {
    st_file d;
    if (st_read(path, &d, err, n)) return -1;
    const st_tensor *tt = st_find(&d, "tokens"), *tg = st_find(&d, "targets");
    if (!tt || !tg || tt->ndim != 2 || tg->numel != tt->numel) {
        snprintf(err, n, "data needs tokens and targets (B,T)");
        st_free(&d);
        return -1;
    }
    *B = (int)tt->shape[0], *T = (int)tt->shape[1];
    const int N = *B * *T;
    *tok = malloc(2 * (size_t)N * sizeof(int));
    for (int i = 0; i < N; i++) (*tok)[i] = (int)lrintf(tt->data[i]), (*tok)[N + i] = (int)lrintf(tg->data[i]);
    st_free(&d);
    return 0;
}

// What the program writes: the logits, loss and gradient at the given weights; the loss before
// each step and the weights after the last.
typedef struct {
    float *logits, *grads, *losses, *finals;
    float loss0;
} results;

// The gradient at the model's weights, then o->steps steps of train/step.h on the same batch.
static int run(model *m, const options *o, const int *tok, int B, int T, results *r, char *err, size_t n) {
    const int N = B * T, V = model_cfg(m)->vocab_size;
    const size_t P = model_num_params(m);
    r->grads = malloc(P * sizeof(float)), r->finals = malloc(P * sizeof(float));
    r->logits = malloc((size_t)N * V * sizeof(float)), r->losses = calloc(o->steps > 0 ? o->steps : 1, sizeof(float));
    r->loss0 = 0;
    adamw opt;
    if (adamw_init(&opt, P, (float)o->lr, (float)o->b1, (float)o->b2, (float)o->eps, (float)o->wd))
        return snprintf(err, n, "out of memory"), -1;
    model_zero_grad(m);
    if (model_forward(m, tok, tok + N, B, T, &r->loss0, err, n) || model_backward(m, err, n)) return -1;
    memcpy(r->logits, model_logits(m), (size_t)N * V * sizeof(float));
    memcpy(r->grads, model_grads(m), P * sizeof(float));
    step_same_batch src = {tok, tok + N, (size_t)N};  // the file's batch every step
    const step_config sc = {B, T, 1, (float)o->clip, 0, step_same_batch_fn, &src, NULL};
    trainer *tr = trainer_create(m, &opt, dist_self(), &sc, err, n);
    if (!tr) return -1;
    for (int s = 0; s < o->steps; s++) {
        step_stats st;
        if (trainer_step(tr, s, (float)o->lr, &st, err, n)) return -1;
        r->losses[s] = (float)st.loss;
    }
    trainer_free(tr);
    memcpy(r->finals, model_params(m), P * sizeof(float));
    adamw_free(&opt);
    return 0;
}

// logits, loss, grad.<tensor>..., and after steps: final.<tensor>..., losses.
static int write_results(const char *out, const model *m, const results *r, int B, int T, int steps, char *err,
                         size_t n) {
    const int V = model_cfg(m)->vocab_size;
    int nt;
    const model_tensor *mt = model_tensors(m, &nt);
    const int n_out = 2 + nt + (steps > 0 ? 1 + nt : 0);
    st_tensor *ts = calloc((size_t)n_out, sizeof *ts);
    char(*names)[96] = calloc((size_t)n_out, sizeof *names);
    int k = 0;
    ts[k] = (st_tensor){.name = "logits", .ndim = 3, .shape = {B, T, V}, .numel = (size_t)B * T * V, .data = r->logits}, k++;
    ts[k] = (st_tensor){.name = "loss", .ndim = 1, .shape = {1}, .numel = 1, .data = (float *)&r->loss0}, k++;
    for (int kind = 0; kind < (steps > 0 ? 2 : 1); kind++)
        for (int i = 0; i < nt; i++, k++) {
            snprintf(names[k], sizeof names[0], "%s%s", kind ? "final." : "grad.", mt[i].name);
            ts[k].name = names[k];
            ts[k].ndim = mt[i].ndim;
            for (int j = 0; j < mt[i].ndim; j++) ts[k].shape[j] = mt[i].shape[j];
            ts[k].numel = mt[i].numel;
            ts[k].data = (kind ? r->finals : r->grads) + mt[i].offset;
        }
    if (steps > 0) ts[k] = (st_tensor){.name = "losses", .ndim = 1, .shape = {steps}, .numel = (size_t)steps, .data = r->losses}, k++;
    const int rc = st_write(out, ts, k, NULL, 0, err, n);
    free(ts), free(names);
    return rc;
}

int main(int argc, char **argv) {
    options o;
    const char *bad = parse_options(argc, argv, &o);
    if (bad) return die(bad);
    char err[512];
    model_config c;
    if (model_config_load(o.config, &c, err, sizeof err)) return die(err);
    model *m = model_create(&c, err, sizeof err);
    if (!m || model_load_weights(m, o.weights, err, sizeof err)) return die(err);
    int *tok, B, T;
    if (read_batch(o.data, &tok, &B, &T, err, sizeof err)) return die(err);
    results r;
    if (run(m, &o, tok, B, T, &r, err, sizeof err) || write_results(o.out, m, &r, B, T, o.steps, err, sizeof err))
        return die(err);
    free(r.grads), free(r.finals), free(r.logits), free(r.losses), free(tok);
    model_free(m);
    return 0;
}
