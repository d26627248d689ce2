// config.c: the model configuration: checks, JSON reading and writing (docs/model.md).
#include "model/model.h"
#include "io/fsutil.h"
#include "util/errmsg.h"
#include "util/tokens.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int model_default_hidden(int dim) {
    const int multiple_of = 256;
    int h = (int)(2 * 4 * (long)dim / 3);
    return multiple_of * ((h + multiple_of - 1) / multiple_of);
}

// The MTA step settings of model_config.attn: the keys of the config's "mta" object (docs/model.md),
// in the order model_config_to_json writes them. qk: only in the layers of qk_layers.
typedef enum { STEP_INT, STEP_BOOL } step_kind;
static const struct {
    const char *key;
    size_t offset;  // of the int in mta_config
    step_kind kind;
    int max;        // STEP_INT: the largest value read
    int qk;
} step_keys[] = {
    {"pre_cq", offsetof(mta_config, pre_cq), STEP_INT, 4096, 1},
    {"pre_ck", offsetof(mta_config, pre_ck), STEP_INT, 4096, 1},
    {"post_cq", offsetof(mta_config, post_cq), STEP_INT, 4096, 1},
    {"post_ck", offsetof(mta_config, post_ck), STEP_INT, 4096, 1},
    {"pre_head_mix", offsetof(mta_config, pre_head_mix), STEP_BOOL, 1, 0},
    {"post_ch", offsetof(mta_config, post_ch), STEP_INT, 1 << 16, 0},
    {"group_norm", offsetof(mta_config, group_norm), STEP_BOOL, 1, 0},
    {"depth_scale", offsetof(mta_config, depth_scale), STEP_BOOL, 1, 0},
    {"gate", offsetof(mta_config, gate), STEP_BOOL, 1, 0},
};
enum { N_STEP_KEYS = sizeof step_keys / sizeof step_keys[0] };

static int *step_field(mta_config *m, int i) { return (int *)((char *)m + step_keys[i].offset); }
static int step_value(const mta_config *m, int i) { return *(const int *)((const char *)m + step_keys[i].offset); }

// The operator config of layer l (qk: its key-query convolutions are on) at batch B, length T.
static mta_config layer_config(const model_config *c, int l, int qk, int B, int T) {
    mta_config m = mta_config_default(B, c->n_heads, T, c->dim / c->n_heads);
    m.H_kv = model_kv_heads(c);
    m.dropout = c->attn_dropout;
    if (!c->mta) return m;
    for (int i = 0; i < N_STEP_KEYS; i++)
        if (qk || !step_keys[i].qk) *step_field(&m, i) = step_value(&c->attn, i);
    m.layer_id = l;
    return m;
}

// The llama3 RoPE scaling: all zero (none), or a factor > 0 with 0 < low_freq < high_freq (the
// interpolation divides by their difference) and an original context >= 1.
static int rope_scaling_check(const model_config *c, char *msg, size_t n) {
    if (c->rope_factor == 0) {
        if (c->rope_low_freq != 0 || c->rope_high_freq != 0 || c->rope_orig_ctx != 0)
            return errmsg(msg, n, "rope scaling: low_freq, high_freq and orig_ctx must be 0 without a factor");
        return 0;
    }
    if (!isfinite(c->rope_factor) || !(c->rope_factor > 0))
        return errmsg(msg, n, "rope_scaling: factor must be a finite number > 0 (got %g)", (double)c->rope_factor);
    if (!isfinite(c->rope_high_freq) || !(c->rope_low_freq > 0) || !(c->rope_high_freq > c->rope_low_freq))
        return errmsg(msg, n, "rope_scaling: need 0 < low_freq_factor < high_freq_factor (got %g, %g)",
                      (double)c->rope_low_freq, (double)c->rope_high_freq);
    if (c->rope_orig_ctx < 1)
        return errmsg(msg, n, "rope_scaling: original_max_position_embeddings must be >= 1 (got %d)", c->rope_orig_ctx);
    return 0;
}

int model_config_check(const model_config *c, char *msg, size_t n) {
    if (c->dim < 1 || c->n_layers < 1 || c->n_heads < 1 || c->vocab_size < 1 || c->hidden_dim < 1)
        return errmsg(msg, n, "dim, n_layers, n_heads, vocab_size and hidden_dim must be >= 1");
    if (c->n_layers > MODEL_MAX_LAYERS) return errmsg(msg, n, "n_layers=%d exceeds %d", c->n_layers, MODEL_MAX_LAYERS);
    if (c->dim % c->n_heads) return errmsg(msg, n, "dim=%d is not divisible by n_heads=%d", c->dim, c->n_heads);
    if (c->n_kv_heads < 0 || c->n_kv_heads > c->n_heads || (c->n_kv_heads && c->n_heads % c->n_kv_heads))
        return errmsg(msg, n, "n_kv_heads=%d must divide n_heads=%d (0 = n_heads)", c->n_kv_heads, c->n_heads);
    if (c->doc_mask != 0 && c->doc_mask != 1) return errmsg(msg, n, "doc_mask must be 0 or 1 (got %d)", c->doc_mask);
    if (c->doc_mask && c->vocab_size <= TOK_EOS)
        return errmsg(msg, n, "doc_mask: the vocabulary (%d) has no EOS token (id %d) to end documents with", c->vocab_size,
                      TOK_EOS);
    if ((c->dim / c->n_heads) % 2) return errmsg(msg, n, "head dim %d must be even for RoPE", c->dim / c->n_heads);
    // Finite as well as in range: JSON has no infinity, so a config holding one would be written
    // out as null and the run's own config.json could not be read back.
    if (!isfinite(c->rope_theta) || !(c->rope_theta > 0))
        return errmsg(msg, n, "rope_theta must be a finite number > 0 (got %g)", (double)c->rope_theta);
    if (!isfinite(c->norm_eps) || !(c->norm_eps > 0))
        return errmsg(msg, n, "norm_eps must be a finite number > 0 (got %g)", (double)c->norm_eps);
    if (c->tie_embeddings != 0 && c->tie_embeddings != 1)
        return errmsg(msg, n, "tie_embeddings must be 0 or 1 (got %d)", c->tie_embeddings);
    if (rope_scaling_check(c, msg, n)) return -1;
    if (!(c->attn_dropout >= 0 && c->attn_dropout < 1))
        return errmsg(msg, n, "attn_dropout must be in [0, 1) (got %g)", (double)c->attn_dropout);
    if (!c->mta) return 0;
    mta_config t = layer_config(c, 0, 1, 1, 1);
    char m2[200];
    if (mta_config_check(&t, m2, sizeof m2)) return errmsg(msg, n, "mta: %s", m2);
    return 0;
}

mta_config model_layer_mta_config(const model_config *c, int l, int B, int T) {
    return layer_config(c, l, c->qk_layer[l], B, T);
}

// Reads an integer member (exact, within [lo, hi]); absent leaves *out.
static int get_int(const cJSON *o, const char *key, int lo, int hi, int *out, char *msg, size_t n) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it) return 0;
    if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < lo ||
        it->valuedouble > hi)
        return errmsg(msg, n, "config: '%s' must be an integer in [%d, %d]", key, lo, hi);
    *out = (int)it->valuedouble;
    return 0;
}

// Reads a float member; absent leaves *out. The model holds float32, so the number must be one:
// beyond FLT_MAX it would become infinite, and a non-zero number below the smallest float32 would
// silently become 0. (model_config_check then checks each value's own range.)
static int get_float(const cJSON *o, const char *key, float *out, char *msg, size_t n) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it) return 0;
    if (!cJSON_IsNumber(it)) return errmsg(msg, n, "config: '%s' must be a number", key);
    const double x = it->valuedouble;
    const float f = (float)x;
    if (!isfinite(f) || (x != 0 && f == 0))
        return errmsg(msg, n, "config: '%s' = %g is outside the range of a float32", key, x);
    *out = f;
    return 0;
}

static int get_bool(const cJSON *o, const char *key, int *out, char *msg, size_t n) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it) return 0;
    if (!cJSON_IsBool(it)) return errmsg(msg, n, "config: '%s' must be true or false", key);
    *out = cJSON_IsTrue(it);
    return 0;
}

static int check_keys(const cJSON *o, const char *const *allowed, int n_allowed, const char *where, char *msg,
                      size_t n) {
    for (const cJSON *it = o->child; it; it = it->next) {
        int ok = 0;
        for (int i = 0; i < n_allowed; i++) ok |= !strcmp(it->string, allowed[i]);
        if (!ok) return errmsg(msg, n, "config: unknown key '%s'%s", it->string, where);
        // cJSON keeps both copies of a repeated key and lookups find the first: refuse it rather
        // than pick one without a word.
        for (const cJSON *p = o->child; p != it; p = p->next)
            if (!strcmp(p->string, it->string)) return errmsg(msg, n, "config: key '%s' appears twice%s", it->string, where);
    }
    return 0;
}

// "rope_scaling": absent or null = none, else {"rope_type": "llama3", "factor", "low_freq_factor",
// "high_freq_factor", "original_max_position_embeddings"}, every key required (Hugging Face's).
static int get_rope_scaling(const cJSON *root, model_config *c, char *msg, size_t n) {
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!o || cJSON_IsNull(o)) return 0;
    static const char *const keys[] = {"rope_type", "factor", "low_freq_factor", "high_freq_factor",
                                       "original_max_position_embeddings"};
    if (!cJSON_IsObject(o)) return errmsg(msg, n, "config: 'rope_scaling' must be an object or null");
    if (check_keys(o, keys, 5, " in 'rope_scaling'", msg, n)) return -1;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "rope_type");
    if (!cJSON_IsString(type) || strcmp(type->valuestring, "llama3"))
        return errmsg(msg, n, "config: rope_scaling: rope_type must be \"llama3\" (the only scaling supported)");
    for (int i = 1; i < 5; i++)
        if (!cJSON_GetObjectItemCaseSensitive(o, keys[i])) return errmsg(msg, n, "config: rope_scaling: '%s' is required", keys[i]);
    if (get_float(o, "factor", &c->rope_factor, msg, n) || get_float(o, "low_freq_factor", &c->rope_low_freq, msg, n) ||
        get_float(o, "high_freq_factor", &c->rope_high_freq, msg, n) ||
        get_int(o, "original_max_position_embeddings", 1, INT_MAX, &c->rope_orig_ctx, msg, n))
        return -1;
    if (c->rope_factor == 0) return errmsg(msg, n, "config: rope_scaling: factor must be > 0");
    return 0;
}

int model_config_from_json(const char *json, model_config *c, char *msg, size_t n) {
    memset(c, 0, sizeof *c);
    c->rope_theta = 1e5f, c->norm_eps = 1e-5f, c->tie_embeddings = 1;
    // Nothing may follow the object but white space: cJSON_Parse would stop at its end and ignore
    // the rest (a second object, stray braces) without a word.
    cJSON *root = cJSON_ParseWithOpts(json, NULL, 1);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return errmsg(msg, n, "config: not a JSON object (parse error near '%.20s')", cJSON_GetErrorPtr() ? cJSON_GetErrorPtr() : "");
    }
    static const char *const top[] = {"dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "hidden_dim",
                                      "rope_theta", "norm_eps", "attn_dropout", "doc_mask", "mta", "tie_embeddings",
                                      "rope_scaling"};
    const char *mk[1 + N_STEP_KEYS] = {"qk_layers"};
    for (int i = 0; i < N_STEP_KEYS; i++) mk[1 + i] = step_keys[i].key;
    int rc = check_keys(root, top, (int)(sizeof top / sizeof top[0]), "", msg, n);
    if (!rc) rc = get_int(root, "dim", 1, 1 << 20, &c->dim, msg, n);
    if (!rc) rc = get_int(root, "n_layers", 1, MODEL_MAX_LAYERS, &c->n_layers, msg, n);
    if (!rc) rc = get_int(root, "n_heads", 1, 1 << 16, &c->n_heads, msg, n);
    if (!rc) rc = get_int(root, "n_kv_heads", 0, 1 << 16, &c->n_kv_heads, msg, n);
    if (!rc) rc = get_int(root, "vocab_size", 1, 1 << 24, &c->vocab_size, msg, n);
    if (!rc) rc = get_int(root, "hidden_dim", 1, 1 << 22, &c->hidden_dim, msg, n);
    if (!rc) rc = get_float(root, "rope_theta", &c->rope_theta, msg, n);
    if (!rc) rc = get_float(root, "norm_eps", &c->norm_eps, msg, n);
    if (!rc) rc = get_float(root, "attn_dropout", &c->attn_dropout, msg, n);
    if (!rc) rc = get_int(root, "doc_mask", 0, 1, &c->doc_mask, msg, n);
    if (!rc) rc = get_bool(root, "tie_embeddings", &c->tie_embeddings, msg, n);
    if (!rc) rc = get_rope_scaling(root, c, msg, n);
    if (!rc && (!c->dim || !c->n_layers || !c->n_heads || !c->vocab_size))
        rc = errmsg(msg, n, "config: dim, n_layers, n_heads and vocab_size are required");
    if (!rc && !c->hidden_dim) c->hidden_dim = model_default_hidden(c->dim);
    if (!rc && c->n_kv_heads == c->n_heads) c->n_kv_heads = 0;  // one form for "as many as n_heads"
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "mta");
    if (!rc && m && !cJSON_IsNull(m)) {
        if (!cJSON_IsObject(m)) rc = errmsg(msg, n, "config: 'mta' must be an object or null");
        if (!rc) rc = check_keys(m, mk, 1 + N_STEP_KEYS, " in 'mta'", msg, n);
        c->mta = 1;
        for (int i = 0; !rc && i < N_STEP_KEYS; i++)
            rc = step_keys[i].kind == STEP_BOOL ? get_bool(m, step_keys[i].key, step_field(&c->attn, i), msg, n)
                                                : get_int(m, step_keys[i].key, 0, step_keys[i].max, step_field(&c->attn, i), msg, n);
        const cJSON *ql = cJSON_GetObjectItemCaseSensitive(m, "qk_layers");
        if (!rc && ql) {
            if (!cJSON_IsArray(ql)) rc = errmsg(msg, n, "config: 'qk_layers' must be an array of layer indices");
            for (const cJSON *it = ql ? ql->child : NULL; !rc && it; it = it->next) {
                if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
                    it->valuedouble >= c->n_layers)
                    rc = errmsg(msg, n, "config: qk_layers entries must be layer indices in [0, %d)", c->n_layers);
                else
                    c->qk_layer[(int)it->valuedouble] = 1;
            }
        }
    }
    cJSON_Delete(root);
    if (!rc) rc = model_config_check(c, msg, n);
    return rc;
}

int model_config_load(const char *path, model_config *c, char *msg, size_t n) {
    char *buf = read_text_file(path, 64u << 20, msg, n);
    if (!buf) return -1;
    char inner[256];
    int rc = model_config_from_json(buf, c, inner, sizeof inner);
    free(buf);
    if (rc) return errmsg(msg, n, "%s: %s", path, inner);
    return 0;
}

char *model_config_to_json(const model_config *c) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "dim", c->dim);
    cJSON_AddNumberToObject(o, "n_layers", c->n_layers);
    cJSON_AddNumberToObject(o, "n_heads", c->n_heads);
    // only with grouped-query attention: the configs without it read and write as before
    if (model_kv_heads(c) != c->n_heads) cJSON_AddNumberToObject(o, "n_kv_heads", c->n_kv_heads);
    cJSON_AddNumberToObject(o, "vocab_size", c->vocab_size);
    cJSON_AddNumberToObject(o, "hidden_dim", c->hidden_dim);
    cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta);
    cJSON_AddNumberToObject(o, "norm_eps", c->norm_eps);
    cJSON_AddNumberToObject(o, "attn_dropout", c->attn_dropout);
    // only when on: the configs without it read and write as before
    if (c->doc_mask) cJSON_AddNumberToObject(o, "doc_mask", 1);
    if (!c->tie_embeddings) cJSON_AddBoolToObject(o, "tie_embeddings", 0);
    if (c->rope_factor != 0) {
        cJSON *r = cJSON_AddObjectToObject(o, "rope_scaling");
        cJSON_AddStringToObject(r, "rope_type", "llama3");
        cJSON_AddNumberToObject(r, "factor", c->rope_factor);
        cJSON_AddNumberToObject(r, "low_freq_factor", c->rope_low_freq);
        cJSON_AddNumberToObject(r, "high_freq_factor", c->rope_high_freq);
        cJSON_AddNumberToObject(r, "original_max_position_embeddings", c->rope_orig_ctx);
    }
    if (c->mta) {
        cJSON *m = cJSON_AddObjectToObject(o, "mta");
        cJSON *ql = cJSON_AddArrayToObject(m, "qk_layers");
        for (int l = 0; l < c->n_layers; l++)
            if (c->qk_layer[l]) cJSON_AddItemToArray(ql, cJSON_CreateNumber(l));
        for (int i = 0; i < N_STEP_KEYS; i++) {
            const int x = step_value(&c->attn, i);
            if (step_keys[i].kind == STEP_BOOL) cJSON_AddBoolToObject(m, step_keys[i].key, x);
            else cJSON_AddNumberToObject(m, step_keys[i].key, x);
        }
    } else {
        cJSON_AddNullToObject(o, "mta");
    }
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}
