// train_config.c: the training run configuration: one table of keys serves the config file,
// the command-line flags and the JSON copy saved with every run.
#include "train/train.h"
#include "io/fsutil.h"
#include "util/errmsg.h"
#include "train/optim.h"
#include "data/longctx.h"
#include "data/tokenizer.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef enum { K_INT, K_LLONG, K_FLOAT, K_STR } key_type;

// A key's value must lie in [lo, hi], or in (lo, hi] when lo_open is set.
typedef struct {
    const char *name;
    key_type type;
    size_t offset, size;
    double lo, hi;
    int lo_open;
    const char *help;
} key_def;

#define F(field) offsetof(train_config, field), sizeof(((train_config *)0)->field)
static const key_def KEYS[] = {
    {"preset", K_STR, F(preset), 0, 0, 0, "model preset (toy, lm1m, lm10m, 300m, 830m; each also -baseline)"},
    {"steps", K_INT, F(steps), 1, 1e9, 0, "optimizer steps"},
    {"batch_size", K_INT, F(batch_size), 1, 1e6, 0, "sequences per micro-batch"},
    {"seq_len", K_INT, F(seq_len), 1, 1e6, 0, "tokens per sequence"},
    {"grad_accum", K_INT, F(grad_accum), 1, 1e6, 0, "micro-batches per optimizer step"},
    {"schedule", K_STR, F(schedule), 0, 0, 0, "learning-rate schedule: constant, linear or cosine"},
    {"lr", K_FLOAT, F(lr), 0, 10, 0, "peak learning rate"},
    {"min_lr", K_FLOAT, F(min_lr), 0, 10, 0, "learning rate at the end of the decay"},
    {"warmup", K_INT, F(warmup), 0, 1e9, 0, "linear warmup steps"},
    {"beta1", K_FLOAT, F(beta1), 0, 0.999999, 0, "AdamW beta1"},
    {"beta2", K_FLOAT, F(beta2), 0, 0.999999, 0, "AdamW beta2"},
    // eps > 0: with 0, a weight whose gradient has always been 0 gets 0/0 = NaN.
    {"eps", K_FLOAT, F(eps), 0, 1, 1, "AdamW epsilon"},
    {"weight_decay", K_FLOAT, F(weight_decay), 0, 10, 0, "decoupled weight decay (all weights, as torch.optim.AdamW)"},
    {"clip", K_FLOAT, F(clip), 0, 1e9, 0, "global gradient-norm clip (0 = off)"},
    // At most 2^53 - 1: config.json holds it as a JSON number (a double), which is exact only so far.
    {"seed", K_LLONG, F(seed), 0, 9007199254740991.0, 0, "seed of initialisation, data order and dropout"},
    {"eval_every", K_INT, F(eval_every), 0, 1e9, 0, "validation every N steps (0 = only at the end)"},
    {"eval_batches", K_INT, F(eval_batches), 1, 1e6, 0, "validation batches per evaluation"},
    {"save_every", K_INT, F(save_every), 0, 1e9, 0, "checkpoint every N steps (0 = only at the end)"},
    {"log_every", K_INT, F(log_every), 1, 1e9, 0, "progress line every N steps"},
    {"data", K_STR, F(data), 0, 0, 0, "directory with train.bin and val.bin (from mtac data)"},
    {"out", K_STR, F(out), 0, 0, 0, "run directory (checkpoint.safetensors, model.safetensors, metrics.jsonl)"},
    {"init", K_STR, F(init), 0, 0, 0, "weights to start from instead of the seeded initialisation: a safetensors file, or a run "
                                      "directory (its model, weights and tokenizer; e.g. from mtac import or convert)"},
    {"train", K_STR, F(train), 0, 0, 0, "the parameters trained: all, or mta (only the MTA kernels; the others stay as they are)"},
    {"mix", K_FLOAT, F(mix), 0, 1, 0, "fraction of training sequences that hold a long-context task example (docs/longctx.md)"},
    {"mix_tasks", K_STR, F(mix_tasks), 0, 0, 0, "tasks of those examples: needle, qa1, qa2, qa3, copy (comma-separated)"},
    {"mix_loss", K_STR, F(mix_loss), 0, 0, 0, "their loss: answer (on the answer only) or all (every token)"},
};
#undef F
enum { N_KEYS = sizeof KEYS / sizeof KEYS[0] };

void train_config_default(train_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->preset, sizeof c->preset, "lm1m");
    c->backend = MTA_BACKEND_FUSED;
    c->steps = 200, c->batch_size = 8, c->seq_len = 128, c->grad_accum = 1;
    snprintf(c->schedule, sizeof c->schedule, "cosine");
    c->lr = 1e-3f, c->min_lr = 1e-4f, c->warmup = 20;
    c->beta1 = 0.9f, c->beta2 = 0.98f, c->eps = 1e-8f, c->weight_decay = 0.05f, c->clip = 1.0f;
    c->seed = 42, c->eval_every = 50, c->eval_batches = 8, c->save_every = 50, c->log_every = 10;
    snprintf(c->data, sizeof c->data, "data/kjv");
    snprintf(c->out, sizeof c->out, "runs/default");
    snprintf(c->mix_tasks, sizeof c->mix_tasks, "needle,qa1,qa2,qa3");
    snprintf(c->mix_loss, sizeof c->mix_loss, "answer");
    snprintf(c->train, sizeof c->train, "all");
}

static const key_def *find_key(const char *key) {
    char k[64];
    size_t i = 0;
    for (; key[i] && i + 1 < sizeof k; i++) k[i] = key[i] == '-' ? '_' : key[i];
    k[i] = 0;
    for (int j = 0; j < N_KEYS; j++)
        if (!strcmp(KEYS[j].name, k)) return &KEYS[j];
    return NULL;
}

int train_config_set(train_config *c, const char *key, const char *value, char *err, size_t n) {
    const key_def *k = find_key(key);
    if (!k) return errmsg(err, n, "unknown config key '%s' (see mtac train --help)", key);
    char *base = (char *)c + k->offset, *end;
    errno = 0;
    if (k->type == K_STR) {
        const size_t len = strlen(value);
        if (len >= k->size)
            return errmsg(err, n, "%s: value too long (%zu characters, at most %zu)", k->name, len, k->size - 1);
        memcpy(base, value, len + 1);
        return 0;
    }
    double x = strtod(value, &end);
    // strtod reports a non-zero number too small for a double as ERANGE with a tiny or zero result.
    const int underflow = errno == ERANGE && fabs(x) <= DBL_MIN;
    if ((errno && !underflow) || end == value || *end || !isfinite(x) || x < k->lo || (k->lo_open && x == k->lo) ||
        x > k->hi)
        return errmsg(err, n, "%s: expected a number in %c%.16g, %.16g], got '%s'", k->name, k->lo_open ? '(' : '[',
                      k->lo, k->hi, value);
    if ((k->type == K_INT || k->type == K_LLONG) && (underflow || x != floor(x)))
        return errmsg(err, n, "%s: expected an integer, got '%s'", k->name, value);
    // The run holds floats (and config.json records them): a non-zero value must not silently
    // become 0, as a float32 or as a subnormal one, which training flushes to 0 (util/fpenv.h).
    // (None overflows: every range ends far below FLT_MAX.)
    if (k->type == K_FLOAT && (underflow || (x != 0 && fabs(x) < FLT_MIN)))
        return errmsg(err, n, "%s: '%s' is below the smallest normal float32 (%.9g): training flushes smaller numbers "
                      "to 0", k->name, value, FLT_MIN);
    if (k->type == K_INT) *(int *)base = (int)x;
    else if (k->type == K_LLONG) *(long long *)base = (long long)x;
    else *(float *)base = (float)x;
    return 0;
}

int train_config_load(train_config *c, const char *path, char *err, size_t n) {
    char *buf = read_text_file(path, 16u << 20, err, n);
    if (!buf) return -1;
    // Nothing may follow the object but white space (cJSON_Parse would ignore the rest).
    cJSON *root = cJSON_ParseWithOpts(buf, NULL, 1);
    if (!cJSON_IsObject(root)) {
        const char *at = root ? NULL : cJSON_GetErrorPtr();
        int len = at ? (int)strcspn(at, "\n") : 0;
        if (len > 20) len = 20;
        if (len) errmsg(err, n, "%s: not a JSON object (parse error near '%.*s')", path, len, at);
        else errmsg(err, n, "%s: not a JSON object", path);
        free(buf);
        cJSON_Delete(root);
        return -1;
    }
    free(buf);
    int rc = 0;
    for (cJSON *it = root->child; it && !rc; it = it->next) {
        // A key given twice (also as batch-size and batch_size) is refused: which one should win?
        for (const cJSON *p = root->child; p != it && !rc; p = p->next)
            if (!strcmp(p->string, it->string) || (find_key(p->string) && find_key(p->string) == find_key(it->string)))
                rc = errmsg(err, n, "%s: key '%s' appears twice", path, it->string);
        if (rc) break;
        if (!strcmp(it->string, "model")) {
            char *js = cJSON_PrintUnformatted(it);
            char inner[256];
            rc = model_config_from_json(js, &c->model, inner, sizeof inner);
            free(js);
            if (rc) rc = errmsg(err, n, "%s: model: %s", path, inner);
            else c->have_model = 1;
            continue;
        }
        // A string goes to train_config_set whole, as a flag's value does, so that one rule
        // (refuse what does not fit) serves both; a number printed exactly.
        char num[64], inner[256];
        const char *val = num;
        if (cJSON_IsString(it)) val = it->valuestring;
        else if (cJSON_IsNumber(it)) snprintf(num, sizeof num, "%.17g", it->valuedouble);
        else {
            rc = errmsg(err, n, "%s: '%s' must be a string or a number", path, it->string);
            break;
        }
        if (train_config_set(c, it->string, val, inner, sizeof inner)) rc = errmsg(err, n, "%s: %s", path, inner);
    }
    cJSON_Delete(root);
    return rc;
}

// Here, not in train.c, so that the run (train.c) calls the config and never the reverse.
int train_check_batch_shape(int B, int T, char *err, size_t n) {
    if (B < 1 || T < 1) return errmsg(err, n, "batch_size %d and seq_len %d must be >= 1", B, T);
    if (B > INT_MAX / T)
        return errmsg(err, n, "batch_size %d x seq_len %d = %lld tokens per micro-batch: more than %d", B, T,
                      (long long)B * T, INT_MAX);
    return 0;
}

int train_init_is_run(const char *init) {
    struct stat st;
    return init[0] && stat(init, &st) == 0 && S_ISDIR(st.st_mode);
}

int train_config_finish(train_config *c, char *err, size_t n) {
    // --init RUN: the model is the run's (a run resumed has it in its own config.json)
    if (!c->have_model && train_init_is_run(c->init)) {
        train_config r;
        char path[1100], inner[1200];
        train_config_default(&r);
        snprintf(path, sizeof path, "%s/config.json", c->init);
        if (train_config_load(&r, path, inner, sizeof inner) || train_config_finish(&r, inner, sizeof inner))
            return errmsg(err, n, "init: %s", inner);
        c->model = r.model, c->have_model = 1;
    }
    if (strcmp(c->train, "all") && strcmp(c->train, "mta"))
        return errmsg(err, n, "train '%s': give all or mta", c->train);
    if (!strcmp(c->train, "mta") && !c->model.mta)
        return errmsg(err, n, "train mta: the model has no MTA parameters (add them with mtac convert --add-mta)");
    if (!c->have_model && model_preset(c->preset, &c->model))
        return errmsg(err, n, "unknown preset '%s' (available: %s)", c->preset, model_preset_names());
    char inner[256];
    if (model_config_check(&c->model, inner, sizeof inner)) return errmsg(err, n, "model: %s", inner);
    // Training flushes subnormal numbers to 0 (util/fpenv.h): a model float must be 0 or normal.
    const float mf[] = {c->model.norm_eps, c->model.rope_theta, c->model.attn_dropout};
    static const char *const mf_name[] = {"norm_eps", "rope_theta", "attn_dropout"};
    for (int i = 0; i < 3; i++)
        if (mf[i] != 0 && fabsf(mf[i]) < FLT_MIN)
            return errmsg(err, n, "model: %s %g is below the smallest normal float32 (%.9g): training flushes smaller "
                          "numbers to 0", mf_name[i], mf[i], FLT_MIN);
    if (train_check_batch_shape(c->batch_size, c->seq_len, inner, sizeof inner)) return errmsg(err, n, "%s", inner);
    // Named as the user writes them (flags and config keys alike), which lr_schedule_init cannot.
    if (strcmp(c->schedule, "constant") && c->steps < c->warmup)
        return errmsg(err, n, "steps (%d) is less than warmup (%d, the %s lr schedule's warmup steps; default 20): "
                              "lower --warmup or raise --steps", c->steps, c->warmup, c->schedule);
    lr_schedule s;
    if (lr_schedule_init(&s, c->schedule, c->lr, c->warmup, c->steps, c->min_lr, inner, sizeof inner))
        return errmsg(err, n, "%s", inner);
    lc_mix mix;
    int min_T;
    if (lc_mix_parse(c->mix_tasks, c->mix_loss, &mix, &min_T, inner, sizeof inner)) return errmsg(err, n, "%s", inner);
    if (c->mix > 0 && c->seq_len < min_T)
        return errmsg(err, n, "mix: seq_len %d is too short for the examples of %s (at least %d)", c->seq_len, c->mix_tasks,
                      min_T);
    if (c->mix > 0 && c->model.vocab_size < TOK_VOCAB)
        return errmsg(err, n, "mix: the task examples are byte tokens; the model's vocabulary (%d) is smaller than %d",
                      c->model.vocab_size, TOK_VOCAB);
    return 0;
}

char *train_config_to_json(const train_config *c) {
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < N_KEYS; i++) {
        const key_def *k = &KEYS[i];
        const char *base = (const char *)c + k->offset;
        if (k->type == K_STR) cJSON_AddStringToObject(o, k->name, base);
        else if (k->type == K_INT) cJSON_AddNumberToObject(o, k->name, *(const int *)base);
        else if (k->type == K_LLONG) {
            // cJSON prints a number with 15 significant digits whenever they come within a relative
            // DBL_EPSILON of it, which changes integers of 16 digits or more (a seed read back from
            // config.json would differ); written as an integer, every seed up to 2^53-1 is exact.
            char num[32];
            snprintf(num, sizeof num, "%lld", *(const long long *)base);
            cJSON_AddRawToObject(o, k->name, num);
        }
        else cJSON_AddNumberToObject(o, k->name, *(const float *)base);
    }
    char *mj = model_config_to_json(&c->model);
    cJSON_AddItemToObject(o, "model", cJSON_Parse(mj));
    free(mj);
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

void train_config_print_keys(void) {
    for (int i = 0; i < N_KEYS; i++) {
        const key_def *k = &KEYS[i];
        printf("  --%-14s %s", k->name, k->help);
        if (k->type == K_STR) printf("\n");
        else printf(" (%s in %c%.16g, %.16g])\n", k->type == K_FLOAT ? "a number" : "an integer", k->lo_open ? '(' : '[',
                    k->lo, k->hi);
    }
}

const char *train_config_key(int i) { return i >= 0 && i < N_KEYS ? KEYS[i].name : NULL; }
