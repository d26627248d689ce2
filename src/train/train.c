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

#include <errno.h>
#include <inttypes.h>
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

int train_eval_loss(model *m, const char *val_path, int B, int T, int nbatches, double *loss, char *err, size_t n) {
    dataloader dl;
    if (dataloader_open(&dl, val_path, B, T, 0, err, n)) return -1;
    int *tok = malloc(2 * (size_t)B * T * sizeof(int)), *tgt = tok + (size_t)B * T;
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
        for (int i = 0; i < B * T; i++) valid += tgt[i] >= 0;
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

int train_run(const train_config *c, int resume, char *err, size_t n) {
    run_paths p;
    make_paths(c, &p);
    if (mkdir_p(c->out)) return errmsg(err, n, "%s: cannot create run directory: %s", c->out, strerror(errno));
    struct stat sb;
    if (!resume && stat(p.ckpt, &sb) == 0)
        return errmsg(err, n, "%s already holds a run: use --resume %s to continue it, or another --out", c->out, c->out);

    model *m = model_create(&c->model, err, n);
    if (!m) return -1;
    const size_t P = model_num_params(m);
    adamw opt;
    if (adamw_init(&opt, P, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay)) {
        model_free(m);
        return errmsg(err, n, "out of memory for the optimizer");
    }
    dataloader dl;
    int rc = dataloader_open(&dl, p.train_bin, c->batch_size, c->seq_len, (uint64_t)c->seed, err, n);
    if (rc) goto out_model;
    int start = 0;
    double best_val = INFINITY;
    if (resume) {
        st_file f;
        rc = checkpoint_load(p.ckpt, m, opt.m, opt.v, &f, err, n);
        if (rc) goto out_dl;
        const char *s = st_meta_get(&f, "step"), *t = st_meta_get(&f, "adam_t"), *ds = st_meta_get(&f, "data_state"),
                   *bv = st_meta_get(&f, "best_val_loss");
        if (!s || !t || !ds || dataloader_state_parse(&dl, ds)) {
            st_free(&f);
            rc = errmsg(err, n, "%s: training state missing or unreadable in the metadata", p.ckpt);
            goto out_dl;
        }
        start = atoi(s), opt.t = atoi(t), best_val = bv ? strtod(bv, NULL) : INFINITY;
        st_free(&f);
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

    const int B = c->batch_size, T = c->seq_len;
    int *tok = malloc(2 * (size_t)B * T * sizeof(int)), *tgt = tok + (size_t)B * T;
    printf("training %s: %zu parameters, %d steps of %d x %d x %d tokens\n", c->model.mta ? "MTA" : "baseline", P,
           c->steps, c->grad_accum, B, T);
    double t_run = now_s(), tokens_done = 0;
    int step = start;
    for (; step < c->steps && !g_stop; step++) {
        double t0 = now_s();
        float lr = lr_at(&sched, step);
        model_zero_grad(m);
        double loss = 0;
        for (int a = 0; a < c->grad_accum && !rc; a++) {
            dataloader_next(&dl, tok, tgt);
            model_set_training(m, 1, ((uint64_t)c->seed * 1000003u + (uint64_t)step) * 131u + (uint64_t)a);
            float l;
            rc = model_forward(m, tok, tgt, B, T, &l, err, n);
            if (!rc) rc = model_backward(m, err, n);
            loss += l / c->grad_accum;
        }
        if (rc) break;
        if (c->grad_accum > 1) {
            float inv = 1.0f / c->grad_accum, *g = model_grads(m);
            for (size_t i = 0; i < P; i++) g[i] *= inv;
        }
        double gnorm = clip_grad_norm(model_grads(m), P, c->clip > 0 ? c->clip : 0);
        adamw_update(&opt, model_params(m), model_grads(m), P, lr, NULL);
        double dt = now_s() - t0, tps = (double)c->grad_accum * B * T / dt;
        tokens_done += (double)c->grad_accum * B * T;
        int s1 = step + 1;
        double val = NAN;
        if ((c->eval_every && s1 % c->eval_every == 0) || s1 == c->steps) {
            rc = train_eval_loss(m, p.val_bin, B, T, c->eval_batches, &val, err, n);
            if (rc) break;
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
        }
    }
    if (!rc) rc = save_all(c, &p, m, &opt, step, &dl, best_val, err, n);
    if (!rc && g_stop) printf("stopped by signal at step %d; checkpoint saved: continue with --resume %s\n", step, c->out);
    else if (!rc) printf("done: %d steps, checkpoint %s, weights %s\n", step, p.ckpt, p.weights);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    free(tok);
    fclose(mf);
out_dl:
    dataloader_close(&dl);
out_model:
    adamw_free(&opt);
    model_free(m);
    return rc;
}
