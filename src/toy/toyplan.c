// toyplan.c: see toyplan.h. run.json holds the setting, the task, the recipe, the seeds and each
// model's full config (docs/model.md), so a run directory is self-describing.
#include "toy/toyplan.h"
#include "io/fsutil.h"
#include "util/errmsg.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
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

int toy_plan_save(const toy_plan *p, const char *dir, char *err, size_t n) {
    const toy_run_config *r = &p->run;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "setting", p->setting);
    cJSON *t = cJSON_AddObjectToObject(o, "task");
    cJSON_AddNumberToObject(t, "blocks", r->task.n_blocks);
    cJSON_AddNumberToObject(t, "block_len", r->task.block_len);
    cJSON_AddNumberToObject(t, "query_len", r->task.query_len);
    cJSON_AddNumberToObject(t, "alphabet", r->task.alphabet);
    cJSON_AddNumberToObject(o, "steps", r->steps);
    cJSON_AddNumberToObject(o, "batch", r->batch_size);
    cJSON_AddNumberToObject(o, "lr", r->lr);
    cJSON_AddStringToObject(o, "schedule", r->schedule == LR_COSINE ? "cosine" : r->schedule == LR_LINEAR ? "linear" : "constant");
    cJSON_AddNumberToObject(o, "warmup", r->warmup);
    cJSON_AddNumberToObject(o, "weight_decay", r->weight_decay);
    cJSON_AddNumberToObject(o, "beta2", r->beta2);
    cJSON_AddNumberToObject(o, "test_samples", r->n_test);
    cJSON_AddNumberToObject(o, "eval_every", r->eval_every);
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

// A non-negative integer member that fits an int, or -1.
static int get_int(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 1e9 && v->valuedouble == (int)v->valuedouble
               ? (int)v->valuedouble : -1;
}

// A number of the recipe as the float the run uses; NaN when absent, not a number, or beyond
// float's range (such a double has no float value, so it is checked before the conversion; 1e999
// reads as infinity).
static float get_float(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) && fabs(v->valuedouble) <= FLT_MAX ? (float)v->valuedouble : NAN;
}

int toy_plan_load(toy_plan *p, const char *dir, char *err, size_t n) {
    char path[4096], inner[256];
    snprintf(path, sizeof path, "%s/run.json", dir);
    char *text = read_text_file(path, 1u << 20, err, n);
    if (!text) return -1;
    cJSON *o = cJSON_Parse(text);
    free(text);
    memset(p, 0, sizeof *p);
    toy_run_config *r = &p->run;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "task"), *s = cJSON_GetObjectItemCaseSensitive(o, "seeds"),
                *ms = cJSON_GetObjectItemCaseSensitive(o, "models"), *set = cJSON_GetObjectItemCaseSensitive(o, "setting");
    int rc = 0;
    if (!cJSON_IsObject(o) || !cJSON_IsObject(t) || !cJSON_IsArray(s) || !cJSON_IsArray(ms) || !cJSON_IsString(set))
        rc = errmsg(err, n, "%s: not a toy run record (needs setting, task, seeds, models)", path);
    if (!rc) {
        snprintf(p->setting, sizeof p->setting, "%s", set->valuestring);
        r->task.n_blocks = get_int(t, "blocks"), r->task.block_len = get_int(t, "block_len");
        r->task.query_len = get_int(t, "query_len"), r->task.alphabet = get_int(t, "alphabet");
        r->steps = get_int(o, "steps"), r->batch_size = get_int(o, "batch"), r->n_test = get_int(o, "test_samples");
        r->eval_every = get_int(o, "eval_every");
        // schedule and warmup are optional: constant and 0, the paper's recipe
        const cJSON *sc = cJSON_GetObjectItemCaseSensitive(o, "schedule");
        r->warmup = cJSON_GetObjectItemCaseSensitive(o, "warmup") ? get_int(o, "warmup") : 0;
        int kind = !sc ? LR_CONSTANT : cJSON_IsString(sc) ? lr_kind_from_name(sc->valuestring) : -1;
        r->schedule = kind < 0 ? LR_CONSTANT : (lr_kind)kind;
        if (kind < 0) rc = errmsg(err, n, "%s: schedule must be constant, linear or cosine", path);
        r->lr = get_float(o, "lr"), r->weight_decay = get_float(o, "weight_decay"), r->beta2 = get_float(o, "beta2");
        if (rc) {
        } else if (toy_config_check(&r->task, inner, sizeof inner)) rc = errmsg(err, n, "%s: task: %s", path, inner);
        else if (r->steps < 1 || r->batch_size < 1 || r->n_test < 1 || r->eval_every < 1 || r->warmup < 0)
            rc = errmsg(err, n, "%s: steps, batch, test_samples, eval_every (positive) and warmup must be integers", path);
        // The ranges of mtac toy --lr and of the training config, checked on the float the run
        // uses (1e-50 rounds to 0, 0.999999999 to 1). Absent, they were -1; infinite, they
        // trained as such and were saved again as null.
        else if (!(r->lr > 0 && r->lr < 1) || !(r->weight_decay >= 0 && r->weight_decay <= 10) ||
                 !(r->beta2 >= 0 && r->beta2 < 1))
            rc = errmsg(err, n, "%s: lr (in (0, 1)), weight_decay (in [0, 10]) and beta2 (in [0, 1)) must be numbers", path);
    }
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
