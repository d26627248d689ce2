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

#include <cjson/cJSON.h>

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

// The training state rank 0 read from a checkpoint, for the others.
typedef struct {
    int start;
    double best_val;
    uint64_t data_state;
} resume_state;

// Everything a run holds. train_run builds it step by step and run_close frees what was made,
// whichever step failed: the one way out.
typedef struct {
    const train_config *c;
    const train_hooks *h;
    dist *d;
    int rank, ranks, lead, resume;
    run_paths p;
    char *cfg;                 // the configuration as JSON: config.json, and the checkpoint's copy
    model *m;
    adamw opt;                 // ZeRO-1: rank 0 holds every moment (it saves them), the others their shard's
    int flushing, was_flushing;  // subnormals flushed for the run; the caller's setting
    dataloader dl;
    int dl_open;
    train_source src;
    unsigned char *trainable;  // train = mta: 1 for the parameters that train; NULL: all train
    trainer *tr;
    FILE *mf;                  // metrics.jsonl (rank 0)
    lr_schedule sched;
    resume_state rs;           // where the run starts
    int step, saved, stop;     // the step to run; the step on disk (-1: none); a stop was asked for
    double t_run, tokens_done, best_val;
} run;

// What one step gave: its metrics line and progress line are made of it.
typedef struct {
    int s1;           // the steps done after it
    int evaluate;     // the schedule evaluates after it
    float lr;
    step_stats st;
    double tps, val;  // val: NAN unless evaluated
} step_result;

// Progress goes to the caller on rank 0 only.
static void emit(const run *r, train_event e) {
    e.steps = r->c->steps, e.ranks = r->ranks;
    if (r->lead && r->h->on_event) r->h->on_event(r->h->arg, &e);
}

// The checkpoint (weights, moments, training state, configuration) and model.safetensors at step.
static int save_all(const run *r, int step, char *err, size_t n) {
    char step_s[32], t_s[32], dl_s[256], bv[64];
    snprintf(step_s, sizeof step_s, "%d", step);
    snprintf(t_s, sizeof t_s, "%d", r->opt.t);
    dataloader_state_str(&r->dl, dl_s, sizeof dl_s);
    snprintf(bv, sizeof bv, "%.17g", r->best_val);
    st_meta_kv meta[] = {{"step", step_s}, {"adam_t", t_s}, {"data_state", dl_s}, {"best_val_loss", bv},
                         {"train_config", r->cfg}};
    int rc = checkpoint_save(r->p.ckpt, r->m, r->opt.m, r->opt.v, meta, 5, err, n);
    if (!rc) rc = model_save_weights(r->m, r->p.weights, err, n);
    return rc;
}

// After a failure that follows a complete step (rank 0's evaluation): every rank gathers the
// moments, rank 0 saves that step, and err says so. TRAIN_ERROR.
static int save_after_failure(run *r, int step, char *err, size_t n) {
    trainer_gather_moments(r->tr);
    if (!r->lead) return errmsg(err, n, "rank 0's evaluation failed after step %d", step);
    char e2[512];
    const int bad = save_all(r, step, e2, sizeof e2);
    const size_t len = err && n ? strlen(err) : n;
    if (len + 1 < n) {
        if (bad) snprintf(err + len, n - len, "; saving step %d failed too: %s", step, e2);
        else snprintf(err + len, n - len, "; step %d is saved: continue with --resume %s", step, r->c->out);
    }
    return TRAIN_ERROR;
}

// ---- metrics.jsonl ----------------------------------------------------------------------------

// One "key":number of a metrics line, as fmt prints it; JSON has no NaN or infinity, so those are
// null. cJSON is given the number as text (a raw item) because its own printing writes the double
// itself, 15 or 17 significant digits: a loss would gain digits of noise and every line would
// change. The file keeps the digits docs/formats.md shows; a reader parses them to the same values.
static int add_metric(cJSON *o, const char *key, const char *fmt, double x) {
    char num[512];  // "%.6f" of the largest double: 309 digits and the decimals
    snprintf(num, sizeof num, fmt, x);
    return cJSON_AddItemToObject(o, key, isfinite(x) ? cJSON_CreateRaw(num) : cJSON_CreateNull());
}

// Appends the line of step s to f: step, loss, lr, grad_norm, tokens_per_s, then val_loss and
// val_ppl after an evaluation.
static int write_metrics(FILE *f, const step_result *s, char *err, size_t n) {
    cJSON *o = cJSON_CreateObject();
    int ok = o && cJSON_AddNumberToObject(o, "step", s->s1) && add_metric(o, "loss", "%.6f", s->st.loss) &&
             add_metric(o, "lr", "%.6g", s->lr) && add_metric(o, "grad_norm", "%.4f", s->st.grad_norm) &&
             add_metric(o, "tokens_per_s", "%.1f", s->tps);
    if (ok && !isnan(s->val)) ok = add_metric(o, "val_loss", "%.6f", s->val) && add_metric(o, "val_ppl", "%.4f", exp(s->val));
    char *line = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    if (!line) return errmsg(err, n, "out of memory for the metrics of step %d", s->s1);
    fprintf(f, "%s\n", line);
    fflush(f);
    cJSON_free(line);
    return 0;
}

// ---- the steps of a run -----------------------------------------------------------------------

// What needs nothing built: the batch shape, that every rank runs rank 0's configuration (the one
// written to config.json), and on rank 0 the run directory: made, and holding no run unless resumed.
static int run_check(run *r, char *err, size_t n) {
    const train_config *c = r->c;
    if (train_check_batch_shape(c->batch_size, c->seq_len, err, n)) return TRAIN_ERROR;
    make_paths(c, &r->p);
    if (!(r->cfg = train_config_to_json(c))) return errmsg(err, n, "out of memory");
    char which[128];
    if (dist_differs_from_root(r->d, text_hash(r->cfg), which, sizeof which))
        return errmsg(err, n, "the training configuration of rank(s) %s differs from rank 0's: every rank must be given "
                      "the same", which);
    struct stat sb;
    if (!r->lead) return 0;
    if (mkdir_p(c->out)) return errmsg(err, n, "%s: cannot create run directory: %s", c->out, strerror(errno));
    if (!r->resume && stat(r->p.ckpt, &sb) == 0)
        return errmsg(err, n, "%s already holds a run: use --resume %s to continue it, or another --out", c->out, c->out);
    return 0;
}

// The model, the optimizer, the training data (checked, with the validation shard) and the trainer.
static int run_build(run *r, char *err, size_t n) {
    const train_config *c = r->c;
    const int B = c->batch_size, T = c->seq_len;
    if (!(r->m = model_create(&c->model, err, n))) return TRAIN_ERROR;
    model_set_backend(r->m, c->backend);
    const size_t P = model_num_params(r->m);
    size_t lo = 0, hi = P;
    if (!r->lead) trainer_shard(P, r->rank, r->ranks, &lo, &hi);
    if (adamw_init_range(&r->opt, lo, hi, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay))
        return errmsg(err, n, "out of memory for the optimizer");
    // Subnormals flushed from here (before any weight is set) to the end of the run (fpenv.h), on
    // every thread; run_close sets the caller's setting back.
    r->was_flushing = fp_flush_subnormals(1), r->flushing = 1;
    // the activations first: they are far larger than anything else a rank holds per token
    if (model_reserve(r->m, B, T, err, n)) return TRAIN_ERROR;
    if (dataloader_open(&r->dl, r->p.train_bin, B, T, (uint64_t)c->seed, err, n)) return data_error(c, err, n);
    r->dl_open = 1;
    if (check_inputs(c, &r->p, &r->dl, r->lead, err, n)) return TRAIN_ERROR;
    r->src = (train_source){&r->dl, c, {0}};
    int min_T;
    if (lc_mix_parse(c->mix_tasks, c->mix_loss, &r->src.mix, &min_T, err, n)) return TRAIN_ERROR;
    if (!strcmp(c->train, "mta") && !(r->trainable = mta_mask(r->m)))
        return errmsg(err, n, "out of memory for the mask of the trained parameters");
    const step_config sc = {B, T, c->grad_accum, c->clip, (uint64_t)c->seed, shard_batch, &r->src, r->trainable};
    return (r->tr = trainer_create(r->m, &r->opt, r->d, &sc, err, n)) ? 0 : TRAIN_ERROR;
}

// Rank 0's part of a resume: the checkpoint's weights, moments and training state, checked.
static int read_checkpoint(run *r, char *err, size_t n) {
    st_file f;
    if (checkpoint_load(r->p.ckpt, r->m, r->opt.m, r->opt.v, &f, err, n)) return TRAIN_ERROR;
    const int bad = read_train_state(r->p.ckpt, &f, &r->rs.start, &r->opt, &r->dl, &r->rs.best_val, err, n);
    st_free(&f);
    if (bad) return TRAIN_ERROR;
    // The run is at rs.start: fewer steps in all would leave nothing to do, and config.json would
    // then claim a total the checkpoint has already passed.
    if (r->c->steps < r->rs.start)
        return errmsg(err, n, "--steps %d is below the run's step %d (%s): give --steps %d or more to continue it",
                      r->c->steps, r->rs.start, r->p.ckpt, r->rs.start);
    r->rs.data_state = r->dl.state;
    truncate_metrics(r->p.metrics, r->rs.start);
    return 0;
}

// A resumed run: rank 0 reads the checkpoint, every rank gets its state.
static int run_resume(run *r, char *err, size_t n) {
    if (r->lead && read_checkpoint(r, err, n)) return TRAIN_ERROR;
    dist_bcast(r->d, &r->rs, sizeof r->rs, 0);
    r->dl.state = r->rs.data_state;
    trainer_broadcast_state(r->tr);  // weights, moments and AdamW's t
    // A run resumed with train = mta after steps of all: the frozen parameters' moments would
    // still move them, so they start again from zero.
    adamw *o = &r->opt;
    for (size_t i = o->base; r->trainable && i < o->base + o->n; i++)
        if (!r->trainable[i]) o->m[i - o->base] = o->v[i - o->base] = 0;
    emit(r, (train_event){.kind = TRAIN_EV_RESUMED, .step = r->rs.start, .path = r->p.ckpt});
    return 0;
}

// A new run: the seed's weights, or those of --init (read by rank 0, given to every rank).
static int run_init_weights(run *r, char *err, size_t n) {
    const train_config *c = r->c;
    model_init(r->m, (uint64_t)c->seed);  // the same on every rank
    if (c->init[0]) {
        char w[1100];
        const int is_run = train_init_is_run(c->init);
        if (is_run) path_join(w, sizeof w, c->init, "model.safetensors");
        else snprintf(w, sizeof w, "%s", c->init);
        if (r->lead && model_load_weights(r->m, w, err, n)) return TRAIN_ERROR;
        // the run speaks the tokens of the model it starts from
        if (r->lead && is_run && train_copy_tokenizer(c->init, c->out, err, n)) return TRAIN_ERROR;
        trainer_broadcast_state(r->tr);
    }
    if (r->lead) remove(r->p.metrics);
    return 0;
}

// Rank 0 writes config.json and opens metrics.jsonl; the lr schedule; the first progress line.
static int run_begin(run *r, char *err, size_t n) {
    const train_config *c = r->c;
    if (r->lead && write_text_atomic(r->p.config, r->cfg, err, n)) return TRAIN_ERROR;
    if (r->lead && !(r->mf = fopen(r->p.metrics, "a")))
        return errmsg(err, n, "%s: cannot open: %s", r->p.metrics, strerror(errno));
    if (lr_schedule_init(&r->sched, c->schedule, c->lr, c->warmup, c->steps, c->min_lr, err, n)) return TRAIN_ERROR;
    emit(r, (train_event){.kind = TRAIN_EV_START, .step = r->rs.start, .n_params = model_num_params(r->m)});
    r->t_run = now_s(), r->tokens_done = 0, r->best_val = r->rs.best_val;
    r->step = r->rs.start, r->saved = r->resume ? r->rs.start : -1, r->stop = 0;
    return 0;
}

// Rank 0 evaluates when the schedule says; then every rank learns the same three things:
// control[0] a rank was asked to stop, [1] rank 0's validation loss is not finite, [2] rank 0's
// evaluation failed (its message in err).
static void evaluate_and_agree(run *r, step_result *s, double control[3], char *err, size_t n) {
    const train_config *c = r->c;
    control[0] = r->h->stop && *r->h->stop, control[1] = control[2] = 0;
    if (r->lead && s->evaluate) {
        if (train_eval_loss(r->m, r->p.val_bin, c->batch_size, c->seq_len, c->eval_batches, &s->val, NULL, NULL, err, n))
            control[2] = 1;
        else control[1] = !isfinite(s->val);
        if (isfinite(s->val) && s->val < r->best_val) r->best_val = s->val;
    }
    dist_allreduce_sum(r->d, control, 3);
}

// The progress line at log_every, the last step and each evaluation; the ranks' weights are
// identical by construction: checked at each.
static int log_step(run *r, const step_result *s, char *err, size_t n) {
    const train_config *c = r->c;
    if (s->s1 % c->log_every && s->s1 != c->steps && !s->evaluate) return 0;
    const int rc = trainer_check_replicas(r->tr, err, n);
    if (rc) return rc;
    double el = now_s() - r->t_run;
    emit(r, (train_event){.kind = TRAIN_EV_LOG, .step = s->s1, .loss = s->st.loss, .lr = s->lr,
                          .grad_norm = s->st.grad_norm, .tokens_per_s = r->tokens_done / el, .val_loss = s->val,
                          .eta_s = (c->steps - s->s1) * el / (s->s1 - r->rs.start), .wait_s = s->st.wait_s});
    return 0;
}

// The checkpoint of every save_every steps (not the last one, nor on a stop: the run's end saves).
static int save_periodic(run *r, int s1, char *err, size_t n) {
    const train_config *c = r->c;
    if (!c->save_every || s1 % c->save_every || s1 >= c->steps || r->stop) return 0;
    trainer_gather_moments(r->tr);
    int rc;
    if (r->lead && (rc = save_all(r, s1, err, n))) return rc;
    r->saved = s1;
    return 0;
}

// Step r->step: train, evaluate, agree, write its metrics line, log, save. A non-finite
// validation loss stops the run before its line is written or anything saved.
static int run_step(run *r, char *err, size_t n) {
    const train_config *c = r->c;
    step_result s = {.s1 = r->step + 1, .val = NAN};
    const double t0 = now_s(), step_tokens = (double)c->grad_accum * c->batch_size * c->seq_len;
    s.lr = lr_at(&r->sched, r->step);
    int rc = trainer_step(r->tr, r->step, s.lr, &s.st, err, n);
    if (rc) return rc;
    s.tps = step_tokens / (now_s() - t0);
    r->tokens_done += step_tokens;
    s.evaluate = (c->eval_every && s.s1 % c->eval_every == 0) || s.s1 == c->steps;
    double control[3];
    evaluate_and_agree(r, &s, control, err, n);
    if (control[1]) {
        if (r->lead) errmsg(err, n, "step %d: the validation loss is %g (training loss %g)", s.s1, s.val, s.st.loss);
        else errmsg(err, n, "step %d: rank 0's validation loss is not finite", s.s1);
        return TRAIN_NONFINITE;
    }
    r->stop = control[0] > 0;
    if (r->lead && (rc = write_metrics(r->mf, &s, err, n))) return rc;
    // The step itself is done and sound (its metrics line written): keep it, so that the run
    // resumes from here.
    if (control[2]) return save_after_failure(r, s.s1, err, n);
    if ((rc = log_step(r, &s, err, n))) return rc;
    return save_periodic(r, s.s1, err, n);
}

// After the steps: a diverged run says what the run directory still holds; a finished or
// stopped one is checked and saved.
static int run_finish(run *r, int rc, char *err, size_t n) {
    if (rc == TRAIN_NONFINITE && err && n) {
        // The message names the step and the value; add what the run directory still holds.
        size_t len = strlen(err);
        if (r->saved >= 0)
            snprintf(err + len, n - len, ": training stopped; nothing was saved, %s still holds step %d", r->p.ckpt,
                     r->saved);
        else snprintf(err + len, n - len, ": training stopped; no checkpoint had been saved yet");
    }
    if (!rc) rc = trainer_check_replicas(r->tr, err, n);
    if (!rc) {
        trainer_gather_moments(r->tr);
        if (r->lead) rc = save_all(r, r->step, err, n);
    }
    if (!rc) emit(r, (train_event){.kind = r->stop ? TRAIN_EV_STOPPED : TRAIN_EV_DONE, .step = r->step, .path = r->c->out});
    return rc;
}

// Frees what the run made (each field is empty until its step made it).
static void run_close(run *r) {
    if (r->mf) fclose(r->mf);
    if (r->dl_open) dataloader_close(&r->dl);
    trainer_free(r->tr);
    adamw_free(&r->opt);
    free(r->trainable);
    model_free(r->m);
    free(r->cfg);
    if (r->flushing && !r->was_flushing) fp_flush_subnormals(0);
}

int train_run(const train_config *c, int resume, const train_hooks *hooks, char *err, size_t n) {
    static const train_hooks none = {0};
    run r = {.c = c, .h = hooks ? hooks : &none, .resume = resume, .rs = {0, INFINITY, 0}};
    r.d = r.h->d ? r.h->d : dist_self();
    r.rank = dist_rank(r.d), r.ranks = dist_size(r.d), r.lead = r.rank == 0;
    int rc = run_check(&r, err, n);
    if (!rc) rc = run_build(&r, err, n);
    if (!rc) rc = resume ? run_resume(&r, err, n) : run_init_weights(&r, err, n);
    if (!rc) rc = run_begin(&r, err, n);
    if (!rc) {
        while (r.step < c->steps && !r.stop && !(rc = run_step(&r, err, n))) r.step++;
        rc = run_finish(&r, rc, err, n);
    }
    run_close(&r);
    return rc;
}
