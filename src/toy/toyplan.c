// toyplan.c: see toyplan.h. run.json holds the setting, the task, the recipe, the seeds and each
// model's full config (docs/model.md), so a run directory is self-describing.
#include "toy/toyplan.h"
#include "io/fsutil.h"
#include "util/errmsg.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int toy_plan_preset(const char *name, toy_plan *p) {
    memset(p, 0, sizeof *p);
    toy_run_config *r = &p->run;
    r->task = toy_config_paper();
    r->weight_decay = 0.0f, r->beta2 = 0.98f;
    p->n_models = 2;
    snprintf(p->model_name[0], sizeof p->model_name[0], "toy-baseline");
    snprintf(p->model_name[1], sizeof p->model_name[1], "toy");
    model_preset("toy-baseline", &p->models[0]);
    model_preset("toy", &p->models[1]);
    p->n_seeds = 3, p->seeds[0] = 42, p->seeds[1] = 43, p->seeds[2] = 44;
    if (!strcmp(name, "paper")) {
        // Table 1 of the paper: 100k steps of 64 rows (GPU work)
        r->steps = 100000, r->batch_size = 64, r->n_test = 1000, r->eval_every = 1000, r->lr = 1e-4f;
    } else if (!strcmp(name, "reduced") || !strcmp(name, "quick")) {
        // Sized for a 2-core CPU (docs/toy.md): 6 blocks (45-token rows), a 2-layer dim-64 model,
        // lr 1e-3 with warmup and cosine decay, no attention dropout; quick is one seed, fewer steps
        r->task.n_blocks = 6;
        r->batch_size = 32, r->n_test = 500, r->eval_every = 500, r->lr = 1e-3f;
        r->schedule = LR_COSINE, r->warmup = 200;
        r->steps = !strcmp(name, "quick") ? 2500 : 6000;
        if (!strcmp(name, "quick")) p->n_seeds = 1, r->n_test = 300, r->eval_every = 250;
        for (int i = 0; i < p->n_models; i++) p->models[i].attn_dropout = 0.0f;
        toy_plan_resize(p, 64, 2, 192);
    } else {
        return -1;
    }
    snprintf(p->setting, sizeof p->setting, "%s", name);
    return 0;
}

const char *toy_plan_settings(void) { return "paper, reduced, quick"; }

void toy_plan_resize(toy_plan *p, int dim, int layers, int hidden) {
    for (int i = 0; i < p->n_models; i++) {
        model_config *m = &p->models[i];
        if (dim) m->dim = dim;
        if (layers) m->n_layers = layers;
        if (hidden) m->hidden_dim = hidden;
        // the toy MTA models convolve in every layer (paper section 4)
        for (int l = 0; l < MODEL_MAX_LAYERS; l++) m->qk_layer[l] = m->mta && l < m->n_layers;
    }
}

void toy_plan_path(char *buf, size_t n, const char *dir, const char *name, uint64_t seed, const char *suffix) {
    snprintf(buf, n, "%s/%s-seed%" PRIu64 "%s", dir, name, seed, suffix);
}

// The plan's scalar members of run.json, in the order they are written (the seeds and the models
// are lists, read and written by hand after them): the JSON key, whether it lies in the "task"
// object or at the top level, its type, its place in toy_plan, its range, and for an optional
// member the value it takes when absent. The task's members are checked as a whole by
// toy_config_check (their range here is what reads as an int); a top-level number outside its
// range (absent, not a number, not an integer, on the float the run uses) fails with the message
// of its type, which lists the ranges (plan_range_error). A member added here is read, written
// and checked.
typedef enum { PF_STR, PF_INT, PF_FLOAT, PF_SCHEDULE } plan_type;
typedef struct {
    const char *key;
    int in_task;
    plan_type type;
    size_t offset, size;
    double lo, hi;
    int lo_open, hi_open;
    int optional;
    double absent;
} plan_field;

#define INT_HI 1e9  // the largest integer read (it fits an int)
#define F(m) offsetof(toy_plan, m), sizeof ((toy_plan *)0)->m
static const plan_field FIELDS[] = {
    // key, in_task, type, offset and size, lo, hi, lo_open, hi_open, optional, absent
    {"setting", 0, PF_STR, F(setting), 0, 0, 0, 0, 0, 0},
    {"blocks", 1, PF_INT, F(run.task.n_blocks), 0, INT_HI, 0, 0, 0, 0},
    {"block_len", 1, PF_INT, F(run.task.block_len), 0, INT_HI, 0, 0, 0, 0},
    {"query_len", 1, PF_INT, F(run.task.query_len), 0, INT_HI, 0, 0, 0, 0},
    {"alphabet", 1, PF_INT, F(run.task.alphabet), 0, INT_HI, 0, 0, 0, 0},
    {"steps", 0, PF_INT, F(run.steps), 1, INT_HI, 0, 0, 0, 0},
    {"batch", 0, PF_INT, F(run.batch_size), 1, INT_HI, 0, 0, 0, 0},
    // The ranges of mtac toy --lr and of the training config, checked on the float the run uses
    // (1e-50 rounds to 0, 0.999999999 to 1).
    {"lr", 0, PF_FLOAT, F(run.lr), 0, 1, 1, 1, 0, 0},
    // optional: constant and no warmup, the paper's recipe
    {"schedule", 0, PF_SCHEDULE, F(run.schedule), 0, 0, 0, 0, 1, LR_CONSTANT},
    {"warmup", 0, PF_INT, F(run.warmup), 0, INT_HI, 0, 0, 1, 0},
    {"weight_decay", 0, PF_FLOAT, F(run.weight_decay), 0, 10, 0, 0, 0, 0},
    {"beta2", 0, PF_FLOAT, F(run.beta2), 0, 1, 0, 1, 0, 0},
    {"test_samples", 0, PF_INT, F(run.n_test), 1, INT_HI, 0, 0, 0, 0},
    {"eval_every", 0, PF_INT, F(run.eval_every), 1, INT_HI, 0, 0, 0, 0},
};
#undef F
enum { N_FIELDS = sizeof FIELDS / sizeof FIELDS[0] };

static const char TASK[] = "task";  // the object of the members with in_task

int toy_plan_save(const toy_plan *p, const char *dir, char *err, size_t n) {
    cJSON *o = cJSON_CreateObject(), *t = NULL;
    for (int i = 0; i < N_FIELDS; i++) {
        const plan_field *f = &FIELDS[i];
        const char *base = (const char *)p + f->offset;
        if (f->in_task && !t) t = cJSON_AddObjectToObject(o, TASK);
        cJSON *to = f->in_task ? t : o;
        if (f->type == PF_STR) cJSON_AddStringToObject(to, f->key, base);
        else if (f->type == PF_INT) cJSON_AddNumberToObject(to, f->key, *(const int *)base);
        else if (f->type == PF_FLOAT) cJSON_AddNumberToObject(to, f->key, *(const float *)base);
        else cJSON_AddStringToObject(to, f->key, lr_kind_name(*(const lr_kind *)base));
    }
    cJSON *s = cJSON_AddArrayToObject(o, "seeds");
    for (int i = 0; i < p->n_seeds; i++) cJSON_AddItemToArray(s, cJSON_CreateNumber((double)p->seeds[i]));
    cJSON *ms = cJSON_AddArrayToObject(o, "models");
    for (int i = 0; i < p->n_models; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "name", p->model_name[i]);
        char *js = model_config_to_json(&p->models[i]);
        cJSON_AddItemToObject(m, "config", cJSON_Parse(js));
        free(js);
        cJSON_AddItemToArray(ms, m);
    }
    char *text = cJSON_Print(o), path[4096];
    cJSON_Delete(o);
    snprintf(path, sizeof path, "%s/run.json", dir);
    int rc = text ? write_text_atomic(path, text, err, n) : errmsg(err, n, "out of memory");
    free(text);
    return rc;
}

// A non-negative integer that fits an int, or -1.
static int read_int(const cJSON *v) {
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= INT_HI && v->valuedouble == (int)v->valuedouble
               ? (int)v->valuedouble : -1;
}

// A number as the float the run uses; NaN when absent, not a number, or beyond float's range
// (such a double has no float value, so it is checked before the conversion; 1e999 reads as
// infinity).
static float read_float(const cJSON *v) {
    return cJSON_IsNumber(v) && fabs(v->valuedouble) <= FLT_MAX ? (float)v->valuedouble : NAN;
}

static int in_range(const plan_field *f, double x) {
    return (f->lo_open ? x > f->lo : x >= f->lo) && (f->hi_open ? x < f->hi : x <= f->hi);
}

// A member's range in words: "positive", "" (any int read), or "in (0, 1)".
static void range_text(const plan_field *f, char *buf, size_t n) {
    if (f->type == PF_INT && f->hi == INT_HI && (f->lo == 0 || f->lo == 1)) snprintf(buf, n, "%s", f->lo ? "positive" : "");
    else snprintf(buf, n, "in %c%g, %g%c", f->lo_open ? '(' : '[', f->lo, f->hi, f->hi_open ? ')' : ']');
}

// The message for the top-level members of a type: their keys, those of one range together and
// followed by it, e.g. "steps, batch, test_samples, eval_every (positive) and warmup must be
// integers".
static int plan_range_error(plan_type type, const char *path, char *err, size_t n) {
    int ord[N_FIELDS], m = 0, used[N_FIELDS] = {0};
    char text[512] = "", r[64], r2[64];
    for (int i = 0; i < N_FIELDS; i++) {
        if (used[i] || FIELDS[i].in_task || FIELDS[i].type != type) continue;
        range_text(&FIELDS[i], r, sizeof r);
        for (int j = i; j < N_FIELDS; j++) {
            if (used[j] || FIELDS[j].in_task || FIELDS[j].type != type) continue;
            range_text(&FIELDS[j], r2, sizeof r2);
            if (!strcmp(r, r2)) ord[m++] = j, used[j] = 1;
        }
    }
    size_t len = 0;
    for (int i = 0; i < m; i++) {
        range_text(&FIELDS[ord[i]], r, sizeof r);
        if (i + 1 < m) range_text(&FIELDS[ord[i + 1]], r2, sizeof r2);
        const int last_of_range = i + 1 == m || strcmp(r, r2);
        len += snprintf(text + len, sizeof text - len, "%s%s%s%s%s", !i ? "" : i + 1 < m ? ", " : " and ", FIELDS[ord[i]].key,
                        last_of_range && *r ? " (" : "", last_of_range ? r : "", last_of_range && *r ? ")" : "");
        if (len >= sizeof text) break;
    }
    return errmsg(err, n, "%s: %s must be %s", path, text, type == PF_INT ? "integers" : "numbers");
}

int toy_plan_load(toy_plan *p, const char *dir, char *err, size_t n) {
    char path[4096], inner[256];
    snprintf(path, sizeof path, "%s/run.json", dir);
    char *text = read_text_file(path, 1u << 20, err, n);
    if (!text) return -1;
    cJSON *o = cJSON_Parse(text);
    free(text);
    memset(p, 0, sizeof *p);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, TASK), *s = cJSON_GetObjectItemCaseSensitive(o, "seeds"),
                *ms = cJSON_GetObjectItemCaseSensitive(o, "models");
    int rc = 0;
    if (!cJSON_IsObject(o) || !cJSON_IsObject(t) || !cJSON_IsArray(s) || !cJSON_IsArray(ms)) rc = -1;
    for (int i = 0; !rc && i < N_FIELDS; i++)
        if (FIELDS[i].type == PF_STR && !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(FIELDS[i].in_task ? t : o, FIELDS[i].key)))
            rc = -1;
    if (rc) rc = errmsg(err, n, "%s: not a toy run record (needs setting, task, seeds, models)", path);
    // Each member is read whatever the others hold; then the first failing check reports: the
    // schedule, the task, the integers, the numbers.
    const plan_field *failed[PF_SCHEDULE + 1] = {NULL};
    for (int i = 0; !rc && i < N_FIELDS; i++) {
        const plan_field *f = &FIELDS[i];
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(f->in_task ? t : o, f->key);
        char *base = (char *)p + f->offset;
        int ok = 1;
        if (f->type == PF_STR) {
            snprintf(base, f->size, "%s", v->valuestring);
        } else if (f->type == PF_INT) {
            const int x = !v && f->optional ? (int)f->absent : read_int(v);
            *(int *)base = x, ok = f->in_task || in_range(f, x);
        } else if (f->type == PF_FLOAT) {
            // Absent, NaN; infinite, they trained as such and were saved again as null.
            const float x = read_float(v);
            *(float *)base = x, ok = in_range(f, x);
        } else {
            const int kind = !v && f->optional ? (int)f->absent : cJSON_IsString(v) ? lr_kind_from_name(v->valuestring) : -1;
            *(lr_kind *)base = kind < 0 ? LR_CONSTANT : (lr_kind)kind, ok = kind >= 0;
        }
        if (!ok && !failed[f->type]) failed[f->type] = f;
    }
    if (rc) {
    } else if (failed[PF_SCHEDULE]) rc = errmsg(err, n, "%s: %s must be constant, linear or cosine", path, failed[PF_SCHEDULE]->key);
    else if (toy_config_check(&p->run.task, inner, sizeof inner)) rc = errmsg(err, n, "%s: task: %s", path, inner);
    else if (failed[PF_INT]) rc = plan_range_error(PF_INT, path, err, n);
    else if (failed[PF_FLOAT]) rc = plan_range_error(PF_FLOAT, path, err, n);
    const cJSON *it;
    if (!rc) cJSON_ArrayForEach(it, s) {
        if (p->n_seeds == TOY_MAX_SEEDS || !cJSON_IsNumber(it)) {
            rc = errmsg(err, n, "%s: seeds must be at most %d integers in [0, 2^52]", path, TOY_MAX_SEEDS);
            break;
        }
        // Checked before the conversion: a double outside [0, 2^64) (or NaN) has no uint64 value.
        const double x = it->valuedouble;
        if (!(x >= 0 && x <= (double)TOY_MAX_SEED) || x != floor(x)) {
            rc = errmsg(err, n, "%s: seeds: %.17g is not an integer in [0, 2^52]", path, x);
            break;
        }
        p->seeds[p->n_seeds++] = (uint64_t)x;
    }
    if (!rc) cJSON_ArrayForEach(it, ms) {
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(it, "name"), *cf = cJSON_GetObjectItemCaseSensitive(it, "config");
        if (p->n_models == TOY_MAX_MODELS || !cJSON_IsString(nm) || !cJSON_IsObject(cf) || strlen(nm->valuestring) >= 32) {
            rc = errmsg(err, n, "%s: models must be at most %d entries with a name and a config", path, TOY_MAX_MODELS);
            break;
        }
        char *js = cJSON_PrintUnformatted(cf);
        int bad = model_config_from_json(js, &p->models[p->n_models], inner, sizeof inner);
        free(js);
        if (bad) {
            rc = errmsg(err, n, "%s: model %s: %s", path, nm->valuestring, inner);
            break;
        }
        snprintf(p->model_name[p->n_models++], sizeof p->model_name[0], "%s", nm->valuestring);
    }
    if (!rc && (!p->n_seeds || !p->n_models)) rc = errmsg(err, n, "%s: no seeds or no models", path);
    cJSON_Delete(o);
    return rc;
}
