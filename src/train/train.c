// train.c: the training run (docs/training.md, docs/distributed.md): the step of train/step.h
// over micro-batches of (batch_size, seq_len) windows drawn from the training shard, with the
// learning-rate schedule, evaluation, metrics, checkpoints and resume. Everything random derives
// from the seed, the step and the micro-batch index, and the data sampler's state is saved in the
// checkpoint, so a resumed run repeats the uninterrupted one bit for bit (same thread count per
// rank), with any number of ranks.
#include "train/train.h"
#include "util/errmsg.h"
#include "data/dataloader.h"
#include "data/longctx.h"
#include "data/shard.h"
#include "io/fsutil.h"
#include "train/checkpoint.h"
#include "train/optim.h"
#include "util/fpenv.h"
#include "util/rng.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void path_join(char *dst, size_t n, const char *dir, const char *file) { snprintf(dst, n, "%s/%s", dir, file); }

// Tokens and targets of one micro-batch, B*T ints each, in one allocation (tokens first).
static int *alloc_batch(int B, int T, char *err, size_t n) {
    int *tok = malloc(2 * (size_t)B * T * sizeof(int));
    if (!tok) errmsg(err, n, "out of memory for a batch of %d x %d tokens", B, T);
    return tok;
}

int train_check_vocab(const shard *s, const char *path, int vocab_size, char *err, size_t n) {
    uint32_t max = 0;
    size_t at = 0;
    for (size_t i = 0; i < s->n; i++)
        if (s->tokens[i] > max) max = s->tokens[i], at = i;
    if (s->n && max >= (uint32_t)vocab_size)
        return errmsg(err, n, "%s holds token %" PRIu32 " (at %zu), but the model's vocab_size is %d: every token must be "
                      "below vocab_size (byte shards from mtac data need vocab_size >= %" PRIu32 ")", path, max, at,
                      vocab_size, max + 1);
    return 0;
}

int train_eval_loss(model *m, const char *val_path, int B, int T, int nbatches, double *loss, int *done,
                    const train_eval_progress *progress, char *err, size_t n) {
    if (train_check_batch_shape(B, T, err, n) || model_reserve(m, B, T, err, n)) return -1;
    int *tok = alloc_batch(B, T, err, n);
    if (!tok) return -1;
    int *tgt = tok + (size_t)B * T;
    dataloader dl;
    if (dataloader_open(&dl, val_path, B, T, 0, err, n)) {
        free(tok);
        return -1;
    }
    int rc = train_check_vocab(&dl.s, val_path, model_cfg(m)->vocab_size, err, n);
    // the batches there are: ceil(windows / B); fewer when nbatches asks for fewer
    const size_t have = (dataloader_seq_windows(&dl) + (size_t)B - 1) / (size_t)B;
    const int total = nbatches > 0 && (size_t)nbatches < have ? nbatches : have > INT_MAX ? INT_MAX : (int)have;
    double sum = 0;
    long count = 0;
    int b = 0;
    model_set_training(m, 0, 0);
    // The shard in order from its start, each token a target once, until nbatches or its end;
    // batch means are weighted by their number of targets.
    for (; !rc && b < total && dataloader_next_seq(&dl, tok, tgt) > 0; b++) {
        float l;
        if ((rc = model_forward(m, tok, tgt, B, T, &l, err, n))) break;
        long valid = 0;
        for (size_t i = 0; i < (size_t)B * T; i++) valid += tgt[i] >= 0;
        sum += (double)l * valid, count += valid;
        if (progress && progress->fn) progress->fn(progress->arg, b + 1, total);
    }
    free(tok);
    dataloader_close(&dl);
    if (!rc) *loss = count ? sum / count : NAN;
    if (!rc && done) *done = b;
    return rc;
}

int train_copy_tokenizer(const char *from, const char *to, char *err, size_t n) {
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
    for (int i = 0; i < 3; i++) {
        char src[1100], dst[1100];
        struct stat st;
        path_join(src, sizeof src, from, files[i]);
        path_join(dst, sizeof dst, to, files[i]);
        if (stat(src, &st) == 0 && copy_file(src, dst, err, n)) return -1;
    }
    return 0;
}

// 1 for the MTA operator's parameters ("layers.L.attention.mta.*"), 0 for the others.
static unsigned char *mta_mask(const model *m) {
    unsigned char *k = calloc(model_num_params(m), 1);
    int nt;
    const model_tensor *ts = model_tensors(m, &nt);
    for (int i = 0; k && i < nt; i++)
        if (strstr(ts[i].name, ".attention.mta.")) memset(k + ts[i].offset, 1, ts[i].numel);
    return k;
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

// ---- the run ----------------------------------------------------------------------------------

// One "key":value of a metrics.jsonl line: JSON has no NaN or infinity, so those are null.
static void metric(FILE *f, const char *key, const char *fmt, double x) {
    fprintf(f, ",\"%s\":", key);
    if (isfinite(x)) fprintf(f, fmt, x);
    else fputs("null", f);
}

// A shard of the data directory that cannot be read: say where its path came from.
static int data_error(const train_config *c, char *err, size_t n) {
    const size_t len = err && n ? strlen(err) : n;
    if (len + 1 < n)
        snprintf(err + len, n - len, " (the data directory '%s', from --data or the run's config.json)", c->data);
    return TRAIN_ERROR;
}

// Everything the run will read, checked before its first step: the training shard (open in dl),
// the validation shard (rank 0 evaluates), both against the model's vocabulary.
static int check_inputs(const train_config *c, const run_paths *p, const dataloader *dl, int lead, char *err, size_t n) {
    if (train_check_vocab(&dl->s, p->train_bin, c->model.vocab_size, err, n)) return TRAIN_ERROR;
    if (!lead) return 0;
    dataloader val;
    if (dataloader_open(&val, p->val_bin, c->batch_size, c->seq_len, 0, err, n)) return data_error(c, err, n);
    const int rc = train_check_vocab(&val.s, p->val_bin, c->model.vocab_size, err, n);
    dataloader_close(&val);
    return rc ? TRAIN_ERROR : 0;
}

// The training data: windows of the training shard, a fraction of them holding a long-context
// task example whose haystack is the same shard (never the validation text).
typedef struct {
    dataloader *dl;
    const train_config *c;
    lc_mix mix;
} train_source;

// step_batch_fn: every rank draws every micro-batch's windows, reading only its own. Whether
// sequence b of micro-batch a of a step is a task example, and which, is a function of (seed,
// step, a, b) alone, so it needs no state in the checkpoint and does not depend on the ranks.
static int shard_batch(void *arg, int step, int a, int *tokens, int *targets, char *err, size_t n) {
    train_source *s = arg;
    if (!tokens) {
        dataloader_skip(s->dl);
        return 0;
    }
    dataloader_next(s->dl, tokens, targets);
    const int B = s->c->batch_size, T = s->c->seq_len;
    for (int b = 0; b < B && s->c->mix > 0; b++) {
        uint64_t r = (((uint64_t)s->c->seed * 0x9E3779B97F4A7C15ULL ^ (uint64_t)step) * 1000003u + (uint64_t)a) * 8191u + (uint64_t)b;
        splitmix64(&r);
        if ((double)(splitmix64(&r) >> 11) * 0x1p-53 >= s->c->mix) continue;
        if (lc_mix_sequence(&s->mix, s->dl->s.tokens, s->dl->s.n, splitmix64(&r), T, tokens + (size_t)b * T,
                            targets + (size_t)b * T, err, n))
            return -1;
    }
    return 0;
}

// FNV-1a of a string: the ranks compare their configurations by it.
static uint64_t text_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

// Progress goes to the caller on rank 0 only.
static void emit(const train_hooks *h, int lead, const train_event *e) {
    if (lead && h->on_event) h->on_event(h->arg, e);
}

// After a failure that follows a complete step (rank 0's evaluation): every rank gathers the
// moments, rank 0 saves that step, and err says so. TRAIN_ERROR.
static int save_after_failure(const train_config *c, const run_paths *p, trainer *tr, int lead, model *m,
                              const adamw *opt, int step, const dataloader *dl, double best_val, char *err, size_t n) {
    trainer_gather_moments(tr);
    if (!lead) return errmsg(err, n, "rank 0's evaluation failed after step %d", step);
    char e2[512];
    const int bad = save_all(c, p, m, opt, step, dl, best_val, e2, sizeof e2);
    const size_t len = err && n ? strlen(err) : n;
    if (len + 1 < n) {
        if (bad) snprintf(err + len, n - len, "; saving step %d failed too: %s", step, e2);
        else snprintf(err + len, n - len, "; step %d is saved: continue with --resume %s", step, c->out);
    }
    return TRAIN_ERROR;
}

// The training state rank 0 read from a checkpoint, for the others.
typedef struct {
    int start;
    double best_val;
    uint64_t data_state;
} resume_state;

int train_run(const train_config *c, int resume, const train_hooks *hooks, char *err, size_t n) {
    static const train_hooks none = {0};
    const train_hooks *h = hooks ? hooks : &none;
    dist *d = h->d ? h->d : dist_self();
    const int rank = dist_rank(d), ranks = dist_size(d), lead = rank == 0;
    const int B = c->batch_size, T = c->seq_len;
    if (train_check_batch_shape(B, T, err, n)) return TRAIN_ERROR;
    run_paths p;
    make_paths(c, &p);
    // Every rank must run the same configuration: rank 0's is the one written to config.json.
    char *cfg = train_config_to_json(c);
    if (!cfg) return errmsg(err, n, "out of memory");
    char which[128];
    if (dist_differs_from_root(d, text_hash(cfg), which, sizeof which)) {
        free(cfg);
        return errmsg(err, n, "the training configuration of rank(s) %s differs from rank 0's: every rank must be given "
                      "the same", which);
    }
    if (lead) {
        struct stat sb;
        int rc = 0;
        if (mkdir_p(c->out)) rc = errmsg(err, n, "%s: cannot create run directory: %s", c->out, strerror(errno));
        else if (!resume && stat(p.ckpt, &sb) == 0)
            rc = errmsg(err, n, "%s already holds a run: use --resume %s to continue it, or another --out", c->out, c->out);
        if (rc) {
            free(cfg);
            return rc;
        }
    }

    model *m = model_create(&c->model, err, n);
    if (!m) {
        free(cfg);
        return TRAIN_ERROR;
    }
    model_set_backend(m, c->backend);
    const size_t P = model_num_params(m);
    // ZeRO-1: rank 0 holds every moment (it saves them), the others their shard's
    size_t lo = 0, hi = P;
    if (!lead) trainer_shard(P, rank, ranks, &lo, &hi);
    adamw opt;
    unsigned char *trainable = NULL;
    trainer *tr = NULL;
    FILE *mf = NULL;
    dataloader dl;
    int dl_open = 0, rc = TRAIN_ERROR;
    if (adamw_init_range(&opt, lo, hi, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay)) {
        model_free(m);
        free(cfg);
        return errmsg(err, n, "out of memory for the optimizer");
    }
    // Subnormals flushed from here (before any weight is set) to the end of the run (fpenv.h), on
    // every thread; the caller's setting back at out.
    const int was_flushing = fp_flush_subnormals(1);
    // the activations first: they are far larger than anything else a rank holds per token
    if (model_reserve(m, B, T, err, n)) goto out;
    if (dataloader_open(&dl, p.train_bin, B, T, (uint64_t)c->seed, err, n)) {
        data_error(c, err, n);
        goto out;
    }
    dl_open = 1;
    if (check_inputs(c, &p, &dl, lead, err, n)) goto out;
    train_source src = {&dl, c, {0}};
    int min_T;
    if (lc_mix_parse(c->mix_tasks, c->mix_loss, &src.mix, &min_T, err, n)) goto out;
    if (!strcmp(c->train, "mta") && !(trainable = mta_mask(m))) {
        errmsg(err, n, "out of memory for the mask of the trained parameters");
        goto out;
    }
    const step_config sc = {B, T, c->grad_accum, c->clip, (uint64_t)c->seed, shard_batch, &src, trainable};
    if (!(tr = trainer_create(m, &opt, d, &sc, err, n))) goto out;
    resume_state rs = {0, INFINITY, 0};
    if (resume) {
        if (lead) {
            st_file f;
            if (checkpoint_load(p.ckpt, m, opt.m, opt.v, &f, err, n)) goto out;
            int bad = read_train_state(p.ckpt, &f, &rs.start, &opt, &dl, &rs.best_val, err, n);
            st_free(&f);
            if (bad) goto out;
            // The run is at rs.start: fewer steps in all would leave nothing to do, and config.json
            // would then claim a total the checkpoint has already passed.
            if (c->steps < rs.start) {
                errmsg(err, n, "--steps %d is below the run's step %d (%s): give --steps %d or more to continue it",
                       c->steps, rs.start, p.ckpt, rs.start);
                goto out;
            }
            rs.data_state = dl.state;
            truncate_metrics(p.metrics, rs.start);
        }
        dist_bcast(d, &rs, sizeof rs, 0);
        dl.state = rs.data_state;
        trainer_broadcast_state(tr);  // weights, moments and AdamW's t
        // A run resumed with train = mta after steps of all: the frozen parameters' moments would
        // still move them, so they start again from zero.
        for (size_t i = opt.base; trainable && i < opt.base + opt.n; i++)
            if (!trainable[i]) opt.m[i - opt.base] = opt.v[i - opt.base] = 0;
        emit(h, lead, &(train_event){.kind = TRAIN_EV_RESUMED, .step = rs.start, .steps = c->steps, .ranks = ranks, .path = p.ckpt});
    } else {
        model_init(m, (uint64_t)c->seed);  // the same on every rank
        if (c->init[0]) {  // rank 0 reads the starting weights, every rank gets them
            char w[1100];
            const int is_run = train_init_is_run(c->init);
            if (is_run) path_join(w, sizeof w, c->init, "model.safetensors");
            else snprintf(w, sizeof w, "%s", c->init);
            if (lead && model_load_weights(m, w, err, n)) goto out;
            // the run speaks the tokens of the model it starts from
            if (lead && is_run && train_copy_tokenizer(c->init, c->out, err, n)) goto out;
            trainer_broadcast_state(tr);
        }
        if (lead) remove(p.metrics);
    }
    if (lead) {
        if (write_text_atomic(p.config, cfg, err, n)) goto out;
        if (!(mf = fopen(p.metrics, "a"))) {
            errmsg(err, n, "%s: cannot open: %s", p.metrics, strerror(errno));
            goto out;
        }
    }
    lr_schedule sched;
    if (lr_schedule_init(&sched, c->schedule, c->lr, c->warmup, c->steps, c->min_lr, err, n)) goto out;

    emit(h, lead, &(train_event){.kind = TRAIN_EV_START, .step = rs.start, .steps = c->steps, .ranks = ranks, .n_params = P});
    const double step_tokens = (double)c->grad_accum * B * T;
    double t_run = now_s(), tokens_done = 0, best_val = rs.best_val;
    int step = rs.start, saved = resume ? rs.start : -1, stop = 0;  // saved: the step on disk (-1: none)
    rc = TRAIN_OK;
    for (; step < c->steps && !stop; step++) {
        double t0 = now_s();
        const int s1 = step + 1;
        float lr = lr_at(&sched, step);
        step_stats st;
        if ((rc = trainer_step(tr, step, lr, &st, err, n))) break;
        double tps = step_tokens / (now_s() - t0);
        tokens_done += step_tokens;
        double val = NAN;
        const int evaluate = (c->eval_every && s1 % c->eval_every == 0) || s1 == c->steps;
        // control[0]: a rank was asked to stop; control[1]: rank 0's validation loss is not finite;
        // control[2]: rank 0's evaluation failed
        double control[3] = {h->stop && *h->stop, 0, 0};
        if (lead && evaluate) {
            if (train_eval_loss(m, p.val_bin, B, T, c->eval_batches, &val, NULL, NULL, err, n)) control[2] = 1;
            else control[1] = !isfinite(val);
            if (isfinite(val) && val < best_val) best_val = val;
        }
        dist_allreduce_sum(d, control, 3);
        if (control[1]) {
            rc = TRAIN_NONFINITE;
            if (lead) errmsg(err, n, "step %d: the validation loss is %g (training loss %g)", s1, val, st.loss);
            else errmsg(err, n, "step %d: rank 0's validation loss is not finite", s1);
            break;
        }
        stop = control[0] > 0;
        if (lead) {
            fprintf(mf, "{\"step\":%d", s1);
            metric(mf, "loss", "%.6f", st.loss);
            metric(mf, "lr", "%.6g", lr);
            metric(mf, "grad_norm", "%.4f", st.grad_norm);
            metric(mf, "tokens_per_s", "%.1f", tps);
            if (!isnan(val)) metric(mf, "val_loss", "%.6f", val), metric(mf, "val_ppl", "%.4f", exp(val));
            fprintf(mf, "}\n");
            fflush(mf);
        }
        if (control[2]) {
            // The step itself is done and sound (its metrics line written): keep it, so that the
            // run resumes from here.
            rc = save_after_failure(c, &p, tr, lead, m, &opt, s1, &dl, best_val, err, n);
            break;
        }
        if (s1 % c->log_every == 0 || s1 == c->steps || evaluate) {
            // the ranks' weights are identical by construction: check it at each progress line
            if ((rc = trainer_check_replicas(tr, err, n))) break;
            double el = now_s() - t_run;
            emit(h, lead, &(train_event){.kind = TRAIN_EV_LOG, .step = s1, .steps = c->steps, .ranks = ranks, .loss = st.loss,
                                   .lr = lr, .grad_norm = st.grad_norm, .tokens_per_s = tokens_done / el,
                                   .val_loss = val, .eta_s = (c->steps - s1) * el / (s1 - rs.start), .wait_s = st.wait_s});
        }
        if (c->save_every && s1 % c->save_every == 0 && s1 < c->steps && !stop) {
            trainer_gather_moments(tr);
            if (lead && (rc = save_all(c, &p, m, &opt, s1, &dl, best_val, err, n))) break;
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
    if (!rc) rc = trainer_check_replicas(tr, err, n);
    if (!rc) {
        trainer_gather_moments(tr);
        if (lead) rc = save_all(c, &p, m, &opt, step, &dl, best_val, err, n);
    }
    if (!rc) emit(h, lead, &(train_event){.kind = stop ? TRAIN_EV_STOPPED : TRAIN_EV_DONE, .step = step, .steps = c->steps,
                                    .ranks = ranks, .path = c->out});
out:
    if (mf) fclose(mf);
    if (dl_open) dataloader_close(&dl);
    trainer_free(tr);
    adamw_free(&opt);
    free(trainable);
    model_free(m);
    free(cfg);
    if (!was_flushing) fp_flush_subnormals(0);
    return rc;
}
