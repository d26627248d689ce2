// import_hf.c: a Hugging Face model directory as an import source (import_internal.h):
// config.json (LlamaForCausalLM, MistralForCausalLM), model.safetensors or its shards
// (model.safetensors.index.json), tokenizer.json with tokenizer_config.json and
// generation_config.json.
#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/import_internal.h"
#include "tok/tokenizer.h"
#include "util/errmsg.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define BAD IMPORT_BAD_INPUT
enum { MAX_SHARDS = 1024, MAX_JSON = 64 << 20 };

typedef struct {
    int shard, entry, used;
} hf_ref;

typedef struct {
    char dir[2048], cfg_path[2100];
    st_stream *shards;
    int n_shards;
    hf_ref *refs;           // every tensor of every shard
    int n_refs;
    float *tmp;             // one tensor, for the q/k rows' permutation
    size_t tmp_len;
} hf_ctx;

static int exists(const char *path) {
    struct stat st;
    return !stat(path, &st) && S_ISREG(st.st_mode);
}

// ---- config.json ----

static const cJSON *member(const cJSON *o, const char *key) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    return it && !cJSON_IsNull(it) ? it : NULL;
}

// An integer member in [lo, hi]: 1 when present, 0 when absent (or null), BAD with a message.
static int get_int(const char *path, const cJSON *o, const char *key, long lo, long hi, int *v, char *err, size_t n) {
    const cJSON *it = member(o, key);
    if (!it) return 0;
    double d = it->valuedouble;
    if (!cJSON_IsNumber(it) || d != (double)(long)d || d < lo || d > hi)
        return errmsg(err, n, "%s: '%s' must be an integer in [%ld, %ld]", path, key, lo, hi), BAD;
    *v = (int)d;
    return 1;
}

static int get_num(const char *path, const cJSON *o, const char *key, double *v, char *err, size_t n) {
    const cJSON *it = member(o, key);
    if (!it) return 0;
    if (!cJSON_IsNumber(it)) return errmsg(err, n, "%s: '%s' must be a number", path, key), BAD;
    *v = it->valuedouble;
    return 1;
}

static int get_bool(const char *path, const cJSON *o, const char *key, int *v, char *err, size_t n) {
    const cJSON *it = member(o, key);
    if (!it) return 0;
    if (!cJSON_IsBool(it)) return errmsg(err, n, "%s: '%s' must be true or false", path, key), BAD;
    *v = cJSON_IsTrue(it);
    return 1;
}

static int require(int r, const char *path, const char *key, char *err, size_t n) {
    if (r == 0) return errmsg(err, n, "%s: '%s' is missing", path, key), BAD;
    return r < 0 ? r : 0;
}

// architectures: one of the Llama family's classes; *mistral for MistralForCausalLM.
static int check_arch(const char *path, const cJSON *root, int *mistral, char *err, size_t n) {
    const cJSON *a = member(root, "architectures"), *e;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 1 || !cJSON_IsString(cJSON_GetArrayItem(a, 0)))
        return errmsg(err, n, "%s: 'architectures' must be a list of one class name", path), BAD;
    e = cJSON_GetArrayItem(a, 0);
    *mistral = !strcmp(e->valuestring, "MistralForCausalLM");
    if (!*mistral && strcmp(e->valuestring, "LlamaForCausalLM"))
        return errmsg(err, n, "%s: architecture %s is not supported (LlamaForCausalLM, MistralForCausalLM)", path,
                      e->valuestring), BAD;
    return 0;
}

// rope_scaling: null, or Llama 3.1's "llama3" frequency scaling.
static int get_rope_scaling(const char *path, const cJSON *root, model_config *c, char *err, size_t n) {
    const cJSON *rs = member(root, "rope_scaling");
    if (!rs) return 0;
    const cJSON *t = member(rs, "rope_type");
    if (!t) t = member(rs, "type");
    if (!cJSON_IsObject(rs) || !cJSON_IsString(t))
        return errmsg(err, n, "%s: 'rope_scaling' must be null or an object with a rope_type", path), BAD;
    if (strcmp(t->valuestring, "llama3"))
        return errmsg(err, n, "%s: rope_scaling type %s is not supported (llama3)", path, t->valuestring), BAD;
    double f, lo, hi;
    int orig = 0, r;
    if ((r = require(get_num(path, rs, "factor", &f, err, n), path, "rope_scaling.factor", err, n)) ||
        (r = require(get_num(path, rs, "low_freq_factor", &lo, err, n), path, "rope_scaling.low_freq_factor", err, n)) ||
        (r = require(get_num(path, rs, "high_freq_factor", &hi, err, n), path, "rope_scaling.high_freq_factor", err, n)) ||
        (r = require(get_int(path, rs, "original_max_position_embeddings", 1, 1 << 30, &orig, err, n), path,
                     "rope_scaling.original_max_position_embeddings", err, n)))
        return r;
    if (!(fabs(f) <= FLT_MAX && fabs(lo) <= FLT_MAX && fabs(hi) <= FLT_MAX))
        return errmsg(err, n, "%s: rope_scaling's factors must be float32 numbers", path), BAD;
    c->rope_factor = (float)f, c->rope_low_freq = (float)lo, c->rope_high_freq = (float)hi, c->rope_orig_ctx = orig;
    return 0;
}

// Refuses what mtac's model does not compute: biases, another activation, another head size.
static int check_unsupported(const char *path, const cJSON *root, const model_config *c, char *err, size_t n) {
    static const char *const biases[] = {"attention_bias", "mlp_bias"};
    for (int i = 0; i < 2; i++) {
        int b = 0, r = get_bool(path, root, biases[i], &b, err, n);
        if (r < 0) return r;
        if (b) return errmsg(err, n, "%s: '%s' true is not supported (mtac's model has no biases)", path, biases[i]), BAD;
    }
    const cJSON *act = member(root, "hidden_act");
    if (act && (!cJSON_IsString(act) || strcmp(act->valuestring, "silu")))
        return errmsg(err, n, "%s: hidden_act %s is not supported (silu)", path, cJSON_IsString(act) ? act->valuestring : "?"), BAD;
    int hd = 0, r = get_int(path, root, "head_dim", 1, 1 << 20, &hd, err, n);
    if (r < 0) return r;
    if (r && hd * c->n_heads != c->dim)
        return errmsg(err, n, "%s: head_dim %d is not hidden_size / num_attention_heads (%d): not supported", path, hd,
                      c->dim / c->n_heads), BAD;
    return 0;
}

static int parse_config(import_src *s, const char *path, const char *json, char *err, size_t n) {
    cJSON *root = cJSON_ParseWithOpts(json, NULL, 1);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return errmsg(err, n, "%s: not a JSON object", path), BAD;
    }
    model_config *c = &s->cfg;
    memset(c, 0, sizeof *c);
    int mistral = 0, r = check_arch(path, root, &mistral, err, n), ctx = 0, window = 0;
    double eps = 1e-6, theta = 1e4;
    c->tie_embeddings = 0;  // transformers' default for these classes
    if (!r) r = require(get_int(path, root, "hidden_size", 2, 1 << 20, &c->dim, err, n), path, "hidden_size", err, n);
    if (!r) r = require(get_int(path, root, "num_hidden_layers", 1, MODEL_MAX_LAYERS, &c->n_layers, err, n), path,
                        "num_hidden_layers", err, n);
    if (!r) r = require(get_int(path, root, "num_attention_heads", 1, 1 << 16, &c->n_heads, err, n), path,
                        "num_attention_heads", err, n);
    if (!r) r = require(get_int(path, root, "intermediate_size", 1, 1 << 22, &c->hidden_dim, err, n), path,
                        "intermediate_size", err, n);
    if (!r) r = require(get_int(path, root, "vocab_size", 1, 1 << 24, &c->vocab_size, err, n), path, "vocab_size", err, n);
    if (!r && get_int(path, root, "num_key_value_heads", 1, 1 << 16, &c->n_kv_heads, err, n) < 0) r = BAD;
    if (!r && get_num(path, root, "rms_norm_eps", &eps, err, n) < 0) r = BAD;
    if (!r && get_num(path, root, "rope_theta", &theta, err, n) < 0) r = BAD;
    if (!r && get_bool(path, root, "tie_word_embeddings", &c->tie_embeddings, err, n) < 0) r = BAD;
    if (!r && get_int(path, root, "max_position_embeddings", 1, 1 << 30, &ctx, err, n) < 0) r = BAD;
    if (!r && mistral && get_int(path, root, "sliding_window", 1, 1 << 30, &window, err, n) < 0) r = BAD;
    if (!r) r = get_rope_scaling(path, root, c, err, n);
    if (!r && c->dim % c->n_heads)
        r = errmsg(err, n, "%s: hidden_size %d is not a multiple of num_attention_heads %d", path, c->dim, c->n_heads);
    if (!r) r = check_unsupported(path, root, c, err, n);
    cJSON_Delete(root);
    if (!r && (!(fabs(eps) <= FLT_MAX) || !(fabs(theta) <= FLT_MAX)))
        r = errmsg(err, n, "%s: rms_norm_eps %g or rope_theta %g is not a float32", path, eps, theta);
    c->norm_eps = r ? 0 : (float)eps, c->rope_theta = r ? 0 : (float)theta;
    // Mistral attends within a sliding window: up to it, that is plain causal attention.
    s->seq_len = window && (!ctx || window < ctx) ? window : ctx;
    return r;
}

// ---- the weights ----

static void hf_close(import_src *s) {
    hf_ctx *h = s->ctx;
    if (!h) return;
    for (int i = 0; i < h->n_shards; i++) st_close(&h->shards[i]);
    free(h->shards);
    free(h->refs);
    free(h->tmp);
    free(h);
    s->ctx = NULL;
}

static int open_shard(hf_ctx *h, const char *file, char *err, size_t n) {
    char path[4200];
    if (strchr(file, '/') || !strcmp(file, "..") || !*file)
        return errmsg(err, n, "%s/model.safetensors.index.json: shard name '%s' is not a file name", h->dir, file), BAD;
    snprintf(path, sizeof path, "%s/%s", h->dir, file);
    for (int i = 0; i < h->n_shards; i++)
        if (!strcmp(h->shards[i].path, path)) return 0;
    if (h->n_shards == MAX_SHARDS) return errmsg(err, n, "%s: more than %d shards", h->dir, MAX_SHARDS), BAD;
    if (st_open(&h->shards[h->n_shards], path, err, n)) return BAD;
    h->n_shards++;
    return 0;
}

// The shards named by the index (weight_map: tensor -> file); each tensor must be in its file.
static int open_index(hf_ctx *h, const char *path, char *err, size_t n) {
    char *json = read_text_file(path, MAX_JSON, err, n);
    if (!json) return BAD;
    cJSON *root = cJSON_ParseWithOpts(json, NULL, 1);
    free(json);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map"), *e;
    int r = cJSON_IsObject(wm) ? 0 : (errmsg(err, n, "%s: no 'weight_map' object", path), BAD);
    cJSON_ArrayForEach(e, wm) {
        if (r) break;
        if (!cJSON_IsString(e)) r = errmsg(err, n, "%s: weight_map entry '%s' is not a file name", path, e->string);
        else r = open_shard(h, e->valuestring, err, n);
    }
    cJSON_ArrayForEach(e, wm) {
        if (r) break;
        char sp[4200];
        snprintf(sp, sizeof sp, "%s/%s", h->dir, e->valuestring);
        for (int i = 0; i < h->n_shards; i++)
            if (!strcmp(h->shards[i].path, sp) && st_stream_find(&h->shards[i], e->string) < 0)
                r = errmsg(err, n, "%s: weight_map puts tensor '%s' in %s, which does not hold it", path, e->string, sp);
    }
    cJSON_Delete(root);
    return r ? BAD : 0;
}

// Every tensor of every shard, once: a name in two shards is an error.
static int collect(hf_ctx *h, char *err, size_t n) {
    int total = 0;
    for (int i = 0; i < h->n_shards; i++) total += h->shards[i].n_entries;
    h->refs = calloc((size_t)total + 1, sizeof *h->refs);
    if (!h->refs) return errmsg(err, n, "out of memory"), IMPORT_IO_ERROR;
    for (int i = 0; i < h->n_shards; i++)
        for (int j = 0; j < h->shards[i].n_entries; j++) {
            const char *nm = h->shards[i].entries[j].name;
            for (int k = 0; k < i; k++)
                if (st_stream_find(&h->shards[k], nm) >= 0)
                    return errmsg(err, n, "%s: tensor '%s' is also in %s", h->shards[i].path, nm, h->shards[k].path), BAD;
            h->refs[h->n_refs++] = (hf_ref){i, j, 0};
        }
    return 0;
}

static int hf_read(import_src *s, const model_tensor *t, float *dst, char *err, size_t n) {
    hf_ctx *h = s->ctx;
    char name[160];
    int rope;
    if (import_source_name(IMPORT_NAMES_HF, t->name, name, sizeof name, &rope))
        return errmsg(err, n, "%s: mtac tensor '%s' has no Hugging Face counterpart (an MTA model?)", h->dir, t->name), BAD;
    hf_ref *ref = NULL;
    for (int i = 0; i < h->n_refs && !ref; i++)
        if (!strcmp(h->shards[h->refs[i].shard].entries[h->refs[i].entry].name, name)) ref = &h->refs[i];
    if (!ref) return errmsg(err, n, "%s: tensor '%s' is missing (needed for %s)", h->dir, name, t->name), BAD;
    st_stream *sh = &h->shards[ref->shard];
    const st_entry *e = &sh->entries[ref->entry];
    int same = e->ndim == t->ndim;
    for (int k = 0; same && k < t->ndim; k++) same = e->shape[k] == t->shape[k];
    if (!same) {
        char got[120] = "", want[120] = "";
        for (int k = 0; k < e->ndim; k++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "", (long long)e->shape[k]);
        for (int k = 0; k < t->ndim; k++) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", k ? ", " : "", (long long)t->shape[k]);
        return errmsg(err, n, "%s: tensor '%s' has shape [%s], config.json makes it [%s]", sh->path, name, got, want), BAD;
    }
    ref->used = 1;
    snprintf(s->name, sizeof s->name, "%s", name);
    if (!rope) return st_stream_read(sh, ref->entry, dst, err, n) ? BAD : 0;
    if (h->tmp_len < t->numel) {
        free(h->tmp);
        h->tmp_len = 0;
        if (!(h->tmp = malloc(t->numel * sizeof(float)))) return errmsg(err, n, "out of memory"), IMPORT_IO_ERROR;
        h->tmp_len = t->numel;
    }
    if (st_stream_read(sh, ref->entry, h->tmp, err, n)) return BAD;
    int d = s->cfg.dim / s->cfg.n_heads;
    import_unpermute_rope(h->tmp, dst, (int)(t->shape[0] / d), d, (int)t->shape[1]);
    return 0;
}

// Tensors mtac leaves aside: RoPE's frequency buffer (it computes them), lm_head when tied.
static int ignorable(const import_src *s, const char *name) {
    const char *p = strstr(name, ".rotary_emb.inv_freq");
    return (p && !p[20]) || (s->cfg.tie_embeddings && !strcmp(name, "lm_head.weight"));
}

static int hf_check_unused(import_src *s, char *err, size_t n) {
    hf_ctx *h = s->ctx;
    for (int i = 0; i < h->n_refs; i++) {
        const char *nm = h->shards[h->refs[i].shard].entries[h->refs[i].entry].name;
        if (!h->refs[i].used && !ignorable(s, nm))
            return errmsg(err, n, "%s: unexpected tensor '%s' (not part of the model config.json describes)",
                          h->shards[h->refs[i].shard].path, nm), BAD;
    }
    return 0;
}

// ---- the tokenizer ----

static int hf_tokenizer(import_src *s, const char *dir, int *none, char *err, size_t n) {
    hf_ctx *h = s->ctx;
    static const char *const files[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
    char p[3][2100];
    for (int i = 0; i < 3; i++) snprintf(p[i], sizeof p[i], "%s/%s", h->dir, files[i]);
    *none = !exists(p[0]);
    if (*none) return 0;
    tokenizer *t = tokenizer_load_json(p[0], exists(p[1]) ? p[1] : NULL, exists(p[2]) ? p[2] : NULL, err, n);
    if (!t) return BAD;
    int v = tokenizer_vocab_size(t);
    tokenizer_free(t);
    if (v > s->cfg.vocab_size)
        return errmsg(err, n, "%s: the tokenizer has %d tokens, more than the model's vocab_size %d", p[0], v,
                      s->cfg.vocab_size), BAD;
    // The files as they are (validated above by the loader, which read them whole).
    for (int i = 0; i < 3; i++) {
        char to[4200];
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        if (exists(p[i]) && copy_file(p[i], to, err, n)) return IMPORT_IO_ERROR;
    }
    return 0;
}

int import_open_hf(import_src *s, const char *dir, char *err, size_t n) {
    hf_ctx *h = calloc(1, sizeof *h);
    if (!h) return errmsg(err, n, "out of memory"), IMPORT_IO_ERROR;
    s->ctx = h;
    s->read = hf_read, s->check_unused = hf_check_unused, s->tokenizer = hf_tokenizer, s->close = hf_close;
    snprintf(h->dir, sizeof h->dir, "%s", dir);
    s->path = h->dir;
    snprintf(h->cfg_path, sizeof h->cfg_path, "%s/config.json", dir);
    char *json = read_text_file(h->cfg_path, MAX_JSON, err, n), idx[2100], single[2100];
    int r = json ? parse_config(s, h->cfg_path, json, err, n) : BAD;
    free(json);
    snprintf(idx, sizeof idx, "%s/model.safetensors.index.json", dir);
    snprintf(single, sizeof single, "%s/model.safetensors", dir);
    if (!r && !(h->shards = calloc(MAX_SHARDS, sizeof *h->shards))) r = (errmsg(err, n, "out of memory"), IMPORT_IO_ERROR);
    if (r) {
    } else if (exists(idx)) {
        r = open_index(h, idx, err, n);
    } else if (exists(single)) {
        r = st_open(&h->shards[0], single, err, n) ? BAD : 0;
        h->n_shards = !r;
    } else {
        r = errmsg(err, n, "%s: no model.safetensors or model.safetensors.index.json (only safetensors checkpoints are "
                           "read: save_pretrained(..., safe_serialization=True))", dir);
    }
    if (!r) r = collect(h, err, n);
    if (r) hf_close(s);
    return r;
}
