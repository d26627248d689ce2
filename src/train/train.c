// train.c: the training loop (docs/training.md). One step: grad_accum micro-batches of
// (batch_size, seq_len) windows drawn from the training shard, loss and backward each (gradients
// summed, then divided by grad_accum), global-norm clip, AdamW at the scheduled learning rate.
// Everything random derives from the seed, the step and the micro-batch index, and the data
// sampler's state is saved in the checkpoint, so a resumed run repeats the uninterrupted one bit
// for bit (same thread count).
#include "train/train.h"
#include "util/errmsg.h"
#include "data/dataloader.h"
#include "data/shard.h"
#include "io/fsutil.h"
#include "train/checkpoint.h"
#include "train/optim.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int sig) { g_stop = sig; }

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void path_join(char *dst, size_t n, const char *dir, const char *file) { snprintf(dst, n, "%s/%s", dir, file); }

int train_check_batch_shape(int B, int T, char *err, size_t n) {
    if (B < 1 || T < 1) return errmsg(err, n, "batch_size %d and seq_len %d must be >= 1", B, T);
    if (B > INT_MAX / T)
        return errmsg(err, n, "batch_size %d x seq_len %d = %lld tokens per micro-batch: more than %d", B, T,
                      (long long)B * T, INT_MAX);
    return 0;
}

// Tokens and targets of one micro-batch, B*T ints each, in one allocation (tokens first).
static int *alloc_batch(int B, int T, char *err, size_t n) {
    int *tok = malloc(2 * (size_t)B * T * sizeof(int));
    if (!tok) errmsg(err, n, "out of memory for a batch of %d x %d tokens", B, T);
    return tok;
}

int train_eval_loss(model *m, const char *val_path, int B, int T, int nbatches, double *loss, char *err, size_t n) {
    if (train_check_batch_shape(B, T, err, n) || model_reserve(m, B, T, err, n)) return -1;
    int *tok = alloc_batch(B, T, err, n);
    if (!tok) return -1;
    int *tgt = tok + (size_t)B * T;
    dataloader dl;
    if (dataloader_open(&dl, val_path, B, T, 0, err, n)) {
        free(tok);
        return -1;
    }
    double total = 0;
    long count = 0;
    int rc = 0;
    model_set_training(m, 0, 0);
    // The shard in order from its start, each token a target once, until nbatches or its end;
    // batch means are weighted by their number of targets.
    for (int b = 0; b < nbatches && dataloader_next_seq(&dl, tok, tgt) > 0; b++) {
        float l;
        if ((rc = model_forward(m, tok, tgt, B, T, &l, err, n))) break;
        long valid = 0;
        for (size_t i = 0; i < (size_t)B * T; i++) valid += tgt[i] >= 0;
        total += (double)l * valid, count += valid;
    }
    free(tok);
    dataloader_close(&dl);
    if (!rc) *loss = count ? total / count : NAN;
    return rc;
}

model *train_open_run(const char *run, train_config *c, char *err, size_t n) {
    char path[1100];
    train_config_default(c);
    snprintf(path, sizeof path, "%s/config.json", run);
    if (train_config_load(c, path, err, n) || train_config_finish(c, err, n)) return NULL;
    model *m = model_create(&c->model, err, n);
    snprintf(path, sizeof path, "%s/model.safetensors", run);
    if (m && model_load_weights(m, path, err, n)) {
        model_free(m);
        m = NULL;
    }
    return m;
}

// metrics.jsonl: on resume keep only the lines of steps the checkpoint already holds.
static void truncate_metrics(const char *path, int upto_step) {
    FILE *f = open_input_file(path, NULL, NULL, 0);
    if (!f) return;
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *o = fopen(tmp, "w");
    char line[4096];
    while (o && fgets(line, sizeof line, f)) {
        const char *p = strstr(line, "\"step\":");
        if (p && atoi(p + 7) <= upto_step) fputs(line, o);
    }
    fclose(f);
    if (o && fclose(o) == 0) rename(tmp, path);
}

typedef struct {
    char ckpt[1100], weights[1100], metrics[1100], config[1100], train_bin[1100], val_bin[1100];
} run_paths;

static void make_paths(const train_config *c, run_paths *p) {
    path_join(p->ckpt, sizeof p->ckpt, c->out, "checkpoint.safetensors");
    path_join(p->weights, sizeof p->weights, c->out, "model.safetensors");
    path_join(p->metrics, sizeof p->metrics, c->out, "metrics.jsonl");
    path_join(p->config, sizeof p->config, c->out, "config.json");
    path_join(p->train_bin, sizeof p->train_bin, c->data, "train.bin");
    path_join(p->val_bin, sizeof p->val_bin, c->data, "val.bin");
}

static int save_all(const train_config *c, const run_paths *p, model *m, const adamw *opt, int step,
                    const dataloader *dl, double best_val, char *err, size_t n) {
    char step_s[32], t_s[32], dl_s[256], bv[64];
    snprintf(step_s, sizeof step_s, "%d", step);
    snprintf(t_s, sizeof t_s, "%d", opt->t);
    dataloader_state_str(dl, dl_s, sizeof dl_s);
    snprintf(bv, sizeof bv, "%.17g", best_val);
    char *cfg = train_config_to_json(c);
    st_meta_kv meta[] = {{"step", step_s}, {"adam_t", t_s}, {"data_state", dl_s}, {"best_val_loss", bv},
                         {"train_config", cfg}};
    int rc = checkpoint_save(p->ckpt, m, opt->m, opt->v, meta, 5, err, n);
    if (!rc) rc = model_save_weights(m, p->weights, err, n);
    free(cfg);
    return rc;
}

// ---- the training state in a checkpoint's metadata -------------------------------------------
// The values are text. Each is accepted only when the whole string is a number in its range, so a
// damaged or edited file cannot resume at a negative step (2^31 steps to the end) or with AdamW at
// t = -1 (its first bias correction 1 - beta^0 = 0 divides by zero and every weight becomes NaN).

// A non-negative decimal integer in [0, hi] (strtol alone would take blanks, a sign, a tail).
static int meta_int(const char *path, const st_file *f, const char *key, long hi, long *out, char *err, size_t n) {
    const char *s = st_meta_get(f, key);
    if (!s) return errmsg(err, n, "%s: the metadata holds no '%s'", path, key);
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (!isdigit((unsigned char)s[0]) || *end || errno || x > hi)
        return errmsg(err, n, "%s: metadata '%s' is '%.40s', expected an integer in [0, %ld]", path, key, s, hi);
    *out = x;
    return 0;
}

// The best validation loss so far: a cross-entropy, so >= 0, or inf before the first evaluation
// (also when the key is absent).
static int meta_best_val(const char *path, const st_file *f, double *out, char *err, size_t n) {
    const char *s = st_meta_get(f, "best_val_loss");
    *out = INFINITY;
    if (!s) return 0;
    char *end;
    double x = strtod(s, &end);
    if (!*s || isspace((unsigned char)s[0]) || *end || !(x >= 0))
        return errmsg(err, n, "%s: metadata 'best_val_loss' is '%.40s', expected a loss >= 0 or inf", path, s);
    *out = x;
    return 0;
}

// Reads and checks step, adam_t, data_state and best_val_loss.
static int read_train_state(const char *path, const st_file *f, int *step, adamw *opt, dataloader *dl,
                            double *best_val, char *err, size_t n) {
    long s, t;
    // step + 1 must still fit an int
    if (meta_int(path, f, "step", INT_MAX - 1, &s, err, n) || meta_int(path, f, "adam_t", INT_MAX - 1, &t, err, n))
        return -1;
    // train_run takes exactly one AdamW step per training step, from t = 0 at step 0.
    if (t != s) return errmsg(err, n, "%s: metadata 'adam_t' is %ld but 'step' is %ld: they must be equal", path, t, s);
    const char *ds = st_meta_get(f, "data_state");
    if (!ds || dataloader_state_parse(dl, ds))
        return errmsg(err, n, "%s: metadata 'data_state' is %s%.40s%s, expected 16 hex digits", path, ds ? "'" : "",
                      ds ? ds : "missing", ds ? "'" : "");
    if (meta_best_val(path, f, best_val, err, n)) return -1;
    *step = (int)s, opt->t = (int)t;
    return 0;
}

// ---- one step ---------------------------------------------------------------------------------

// Forward and backward over grad_accum micro-batches, clipping, then AdamW at lr. The step is
// checked before it changes anything: a non-finite loss or gradient norm returns TRAIN_NONFINITE
// with the weights and moments untouched; after the update, a weight that is no longer finite
// returns TRAIN_NONFINITE too (the weights are then lost, but nothing is saved from them).
// step1 is the 1-based step number, for the messages.
static int train_step(const train_config *c, model *m, adamw *opt, dataloader *dl, int *tok, int *tgt, int step1,
                      float lr, double *loss, double *gnorm, char *err, size_t n) {
    const int B = c->batch_size, T = c->seq_len;
    const size_t P = model_num_params(m);
    model_zero_grad(m);
    *loss = 0;
    for (int a = 0; a < c->grad_accum; a++) {
        dataloader_next(dl, tok, tgt);
        model_set_training(m, 1, ((uint64_t)c->seed * 1000003u + (uint64_t)(step1 - 1)) * 131u + (uint64_t)a);
        float l;
        if (model_forward(m, tok, tgt, B, T, &l, err, n) || model_backward(m, err, n)) return TRAIN_ERROR;
        *loss += l / c->grad_accum;
    }
    if (c->grad_accum > 1) {
        float inv = 1.0f / c->grad_accum, *g = model_grads(m);
        for (size_t i = 0; i < P; i++) g[i] *= inv;
    }
    *gnorm = clip_grad_norm(model_grads(m), P, c->clip > 0 ? c->clip : 0);
    if (!isfinite(*loss) || !isfinite(*gnorm)) {
        errmsg(err, n, "step %d: the loss is %g and the gradient norm %g", step1, *loss, *gnorm);
        return TRAIN_NONFINITE;
    }
    adamw_update(opt, model_params(m), model_grads(m), P, lr, NULL);
    size_t at;
    float bad;
    const model_tensor *t = model_find_nonfinite(m, model_params(m), &at, &bad);
    if (t) {
        errmsg(err, n, "step %d: after the update (loss %g, gradient norm %g, lr %g) weight '%s' holds %g at index %zu",
               step1, *loss, *gnorm, lr, t->name, bad, at);
        return TRAIN_NONFINITE;
    }
    return TRAIN_OK;
}

int train_run(const train_config *c, int resume, char *err, size_t n) {
    const int B = c->batch_size, T = c->seq_len;
    if (train_check_batch_shape(B, T, err, n)) return TRAIN_ERROR;
    run_paths p;
    make_paths(c, &p);
    if (mkdir_p(c->out)) return errmsg(err, n, "%s: cannot create run directory: %s", c->out, strerror(errno));
    struct stat sb;
    if (!resume && stat(p.ckpt, &sb) == 0)
        return errmsg(err, n, "%s already holds a run: use --resume %s to continue it, or another --out", c->out, c->out);

    model *m = model_create(&c->model, err, n);
    if (!m) return TRAIN_ERROR;
    model_set_backend(m, c->backend);
    const size_t P = model_num_params(m);
    adamw opt;
    if (adamw_init(&opt, P, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay)) {
        model_free(m);
        return errmsg(err, n, "out of memory for the optimizer");
    }
    // the activations first: they are far larger than the batch
    int *tok = model_reserve(m, B, T, err, n) ? NULL : alloc_batch(B, T, err, n);
    dataloader dl;
    int rc = tok ? dataloader_open(&dl, p.train_bin, B, T, (uint64_t)c->seed, err, n) : TRAIN_ERROR;
    if (rc) goto out_model;
    int *tgt = tok + (size_t)B * T;
    int start = 0;
    double best_val = INFINITY;
    if (resume) {
        st_file f;
        rc = checkpoint_load(p.ckpt, m, opt.m, opt.v, &f, err, n);
        if (rc) goto out_dl;
        rc = read_train_state(p.ckpt, &f, &start, &opt, &dl, &best_val, err, n);
        st_free(&f);
        if (rc) goto out_dl;
        truncate_metrics(p.metrics, start);
        printf("resumed %s at step %d\n", p.ckpt, start);
    } else {
        model_init(m, (uint64_t)c->seed);
        remove(p.metrics);
    }
    char *cfg = train_config_to_json(c);
    rc = write_text_atomic(p.config, cfg, err, n);
    free(cfg);
    if (rc) goto out_dl;
    FILE *mf = fopen(p.metrics, "a");
    if (!mf) {
        rc = errmsg(err, n, "%s: cannot open: %s", p.metrics, strerror(errno));
        goto out_dl;
    }
    lr_schedule sched;
    lr_schedule_init(&sched, c->schedule, c->lr, c->warmup, c->steps, c->min_lr, err, n);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    g_stop = 0;

    printf("training %s: %zu parameters, %d steps of %d x %d x %d tokens\n", c->model.mta ? "MTA" : "baseline", P,
           c->steps, c->grad_accum, B, T);
    double t_run = now_s(), tokens_done = 0;
    int step = start, saved = resume ? start : -1;  // the step the checkpoint on disk holds (-1: none)
    for (; step < c->steps && !g_stop; step++) {
        double t0 = now_s(), loss, gnorm;
        const int s1 = step + 1;
        float lr = lr_at(&sched, step);
        if ((rc = train_step(c, m, &opt, &dl, tok, tgt, s1, lr, &loss, &gnorm, err, n))) break;
        double dt = now_s() - t0, tps = (double)c->grad_accum * B * T / dt;
        tokens_done += (double)c->grad_accum * B * T;
        double val = NAN;
        if ((c->eval_every && s1 % c->eval_every == 0) || s1 == c->steps) {
            rc = train_eval_loss(m, p.val_bin, B, T, c->eval_batches, &val, err, n);
            if (rc) break;
            if (!isfinite(val)) {
                rc = TRAIN_NONFINITE;
                errmsg(err, n, "step %d: the validation loss is %g (training loss %g)", s1, val, loss);
                break;
            }
            if (val < best_val) best_val = val;
        }
        fprintf(mf, "{\"step\":%d,\"loss\":%.6f,\"lr\":%.6g,\"grad_norm\":%.4f,\"tokens_per_s\":%.1f", s1, loss, lr,
                gnorm, tps);
        if (!isnan(val)) fprintf(mf, ",\"val_loss\":%.6f,\"val_ppl\":%.4f", val, exp(val));
        fprintf(mf, "}\n");
        fflush(mf);
        if (s1 % c->log_every == 0 || s1 == c->steps || !isnan(val)) {
            double el = now_s() - t_run, eta = (c->steps - s1) * el / (s1 - start);
            printf("step %5d/%d | loss %.4f | lr %.2e | grad norm %.3f | %.0f tok/s | ETA %.0fs", s1, c->steps, loss, lr,
                   gnorm, tokens_done / el, eta);
            if (!isnan(val)) printf(" | val loss %.4f ppl %.2f", val, exp(val));
            printf("\n");
            fflush(stdout);
        }
        if (c->save_every && s1 % c->save_every == 0 && s1 < c->steps) {
            rc = save_all(c, &p, m, &opt, s1, &dl, best_val, err, n);
            if (rc) break;
            saved = s1;
        }
    }
    if (rc == TRAIN_NONFINITE && err && n) {
        // The message names the step and the value; add what the run directory still holds.
        size_t len = strlen(err);
        if (saved >= 0)
            snprintf(err + len, n - len, ": training stopped; nothing was saved, %s still holds step %d", p.ckpt, saved);
        else snprintf(err + len, n - len, ": training stopped; no checkpoint had been saved yet");
    }
    if (!rc) rc = save_all(c, &p, m, &opt, step, &dl, best_val, err, n);
    if (!rc && g_stop) printf("stopped by signal at step %d; checkpoint saved: continue with --resume %s\n", step, c->out);
    else if (!rc) printf("done: %d steps, checkpoint %s, weights %s\n", step, p.ckpt, p.weights);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    fclose(mf);
out_dl:
    dataloader_close(&dl);
out_model:
    free(tok);
    adamw_free(&opt);
    model_free(m);
    return rc;
}
