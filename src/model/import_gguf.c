// import_gguf.c: a GGUF file as an import source (import_internal.h): general.architecture
// "llama", its llama.* keys, llama.cpp's tensor names, and the tokenizer.ggml.* keys. llama.cpp's
// converter already put the q/k rows in the adjacent-pair order of mtac's RoPE.
#include "io/gguf.h"
#include "model/import_internal.h"
#include "tok/tokenizer.h"
#include "util/errmsg.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAD IMPORT_BAD_INPUT

typedef struct {
    gguf_file g;
    unsigned char *used;    // per tensor of the file
} gguf_ctx;

static void gg_close(import_src *s) {
    gguf_ctx *c = s->ctx;
    if (!c) return;
    gguf_close(&c->g);
    free(c->used);
    free(c);
    s->ctx = NULL;
}

// An integer key in [lo, hi] into *v: 1 present, 0 absent, BAD.
static int key_int(const gguf_file *g, const char *key, long lo, long hi, int *v, char *err, size_t n) {
    int64_t x;
    int r = gguf_get_int(g, key, &x, err, n);
    if (r <= 0) return r < 0 ? BAD : 0;
    if (x < lo || x > hi) return errmsg(err, n, "%s: key '%s' is %lld, outside [%ld, %ld]", g->path, key, (long long)x, lo, hi), BAD;
    *v = (int)x;
    return 1;
}

static int need(int r, const gguf_file *g, const char *key, char *err, size_t n) {
    if (r == 0) return errmsg(err, n, "%s: key '%s' is missing", g->path, key), BAD;
    return r < 0 ? r : 0;
}

// The model config from the llama.* keys; vocab and tying from the tensors.
static int read_config(import_src *s, gguf_file *g, char *err, size_t n) {
    const char *arch = NULL;
    if (gguf_get_str(g, "general.architecture", &arch, err, n) < 0) return BAD;
    if (!arch) return errmsg(err, n, "%s: key 'general.architecture' is missing", g->path), BAD;
    if (strcmp(arch, "llama"))
        return errmsg(err, n, "%s: general.architecture %s is not supported (llama)", g->path, arch), BAD;
    model_config *c = &s->cfg;
    memset(c, 0, sizeof *c);
    int r, experts = 0, kl = 0, vl = 0, rd = 0, ctx = 0;
    if ((r = need(key_int(g, "llama.embedding_length", 2, 1 << 20, &c->dim, err, n), g, "llama.embedding_length", err, n)) ||
        (r = need(key_int(g, "llama.block_count", 1, MODEL_MAX_LAYERS, &c->n_layers, err, n), g, "llama.block_count", err, n)) ||
        (r = need(key_int(g, "llama.attention.head_count", 1, 1 << 16, &c->n_heads, err, n), g, "llama.attention.head_count", err, n)) ||
        (r = need(key_int(g, "llama.feed_forward_length", 1, 1 << 22, &c->hidden_dim, err, n), g, "llama.feed_forward_length", err, n)))
        return r;
    if (key_int(g, "llama.attention.head_count_kv", 1, 1 << 16, &c->n_kv_heads, err, n) < 0 ||
        key_int(g, "llama.context_length", 1, 1 << 30, &ctx, err, n) < 0 ||
        key_int(g, "llama.expert_count", 0, 1 << 20, &experts, err, n) < 0 ||
        key_int(g, "llama.attention.key_length", 1, 1 << 20, &kl, err, n) < 0 ||
        key_int(g, "llama.attention.value_length", 1, 1 << 20, &vl, err, n) < 0 ||
        key_int(g, "llama.rope.dimension_count", 1, 1 << 20, &rd, err, n) < 0)
        return BAD;
    s->seq_len = ctx;
    if (experts > 0) return errmsg(err, n, "%s: llama.expert_count %d: mixtures of experts are not supported", g->path, experts), BAD;
    if (c->dim % c->n_heads)
        return errmsg(err, n, "%s: llama.embedding_length %d is not a multiple of the head count %d", g->path, c->dim, c->n_heads), BAD;
    int d = c->dim / c->n_heads;
    const int *lens[] = {&kl, &vl, &rd};
    static const char *const lk[] = {"llama.attention.key_length", "llama.attention.value_length", "llama.rope.dimension_count"};
    for (int i = 0; i < 3; i++)
        if (*lens[i] && *lens[i] != d)
            return errmsg(err, n, "%s: %s %d is not the head size %d: not supported", g->path, lk[i], *lens[i], d), BAD;
    double eps = 1e-5, theta = 1e4;
    if (gguf_get_num(g, "llama.attention.layer_norm_rms_epsilon", &eps, err, n) < 0 ||
        gguf_get_num(g, "llama.rope.freq_base", &theta, err, n) < 0)
        return BAD;
    if (!(fabs(eps) <= FLT_MAX) || !(fabs(theta) <= FLT_MAX))
        return errmsg(err, n, "%s: layer_norm_rms_epsilon %g or rope.freq_base %g is not a float32", g->path, eps, theta), BAD;
    c->norm_eps = (float)eps, c->rope_theta = (float)theta;
    const char *st = NULL;
    if (gguf_get_str(g, "llama.rope.scaling.type", &st, err, n) < 0) return BAD;
    if (st && strcmp(st, "none"))
        return errmsg(err, n, "%s: llama.rope.scaling.type %s is not supported", g->path, st), BAD;
    if (gguf_find_tensor(g, "rope_freqs.weight") >= 0)
        return errmsg(err, n, "%s: tensor 'rope_freqs.weight' (Llama 3.1 RoPE scaling in GGUF) is not supported: import "
                              "the Hugging Face checkpoint instead", g->path), BAD;
    int e = gguf_find_tensor(g, "token_embd.weight");
    if (e < 0) return errmsg(err, n, "%s: tensor 'token_embd.weight' is missing", g->path), BAD;
    if (g->tensors[e].ndim != 2 || g->tensors[e].ne[0] != c->dim || g->tensors[e].ne[1] > (1 << 24))
        return errmsg(err, n, "%s: tensor 'token_embd.weight' has the wrong shape for embedding_length %d", g->path, c->dim), BAD;
    c->vocab_size = (int)g->tensors[e].ne[1];
    c->tie_embeddings = gguf_find_tensor(g, "output.weight") < 0;
    return 0;
}

static int gg_read(import_src *s, const model_tensor *t, float *dst, char *err, size_t n) {
    gguf_ctx *c = s->ctx;
    char name[160];
    if (import_source_name(IMPORT_NAMES_GGUF, t->name, name, sizeof name, NULL))
        return errmsg(err, n, "%s: mtac tensor '%s' has no GGUF counterpart (an MTA model?)", c->g.path, t->name), BAD;
    int i = gguf_find_tensor(&c->g, name);
    if (i < 0) return errmsg(err, n, "%s: tensor '%s' is missing (needed for %s)", c->g.path, name, t->name), BAD;
    const gguf_tensor *gt = &c->g.tensors[i];
    // ggml lists dimensions fastest first: (rows, cols) is ne = [cols, rows]
    int same = gt->ndim == t->ndim;
    for (int k = 0; same && k < t->ndim; k++) same = gt->ne[k] == t->shape[t->ndim - 1 - k];
    if (!same) {
        char got[120] = "", want[120] = "";
        for (int k = 0; k < gt->ndim; k++) snprintf(got + strlen(got), sizeof got - strlen(got), "%s%lld", k ? ", " : "", (long long)gt->ne[k]);
        for (int k = t->ndim - 1; k >= 0; k--) snprintf(want + strlen(want), sizeof want - strlen(want), "%s%lld", k < t->ndim - 1 ? ", " : "", (long long)t->shape[k]);
        return errmsg(err, n, "%s: tensor '%s' has ne [%s], the llama.* keys make it [%s]", c->g.path, name, got, want), BAD;
    }
    c->used[i] = 1;
    snprintf(s->name, sizeof s->name, "%s", name);
    return gguf_read_tensor(&c->g, i, dst, err, n) ? BAD : 0;
}

static int gg_check_unused(import_src *s, char *err, size_t n) {
    gguf_ctx *c = s->ctx;
    for (int i = 0; i < c->g.n_tensors; i++)
        if (!c->used[i])
            return errmsg(err, n, "%s: unexpected tensor '%s' (not part of a llama model of these keys)", c->g.path,
                          c->g.tensors[i].name), BAD;
    return 0;
}

// ---- the tokenizer: tokenizer.ggml.* ----

// A string array key (NULL when absent); BAD when of another type.
static int str_array(const gguf_file *g, const char *key, const gguf_kv **kv, char *err, size_t n) {
    *kv = gguf_get(g, key);
    if (*kv && ((*kv)->type != GGUF_ARRAY || (*kv)->elem != GGUF_STRING))
        return errmsg(err, n, "%s: key '%s' is not an array of strings", g->path, key), BAD;
    return 0;
}

static int num_array(const gguf_file *g, const char *key, uint64_t len, const gguf_kv **kv, char *err, size_t n) {
    *kv = gguf_get(g, key);
    if (!*kv) return 0;
    if ((*kv)->type != GGUF_ARRAY || (*kv)->elem == GGUF_STRING)
        return errmsg(err, n, "%s: key '%s' is not an array of numbers", g->path, key), BAD;
    if ((*kv)->n != len)
        return errmsg(err, n, "%s: key '%s' has %llu entries for %llu tokens", g->path, key, (unsigned long long)(*kv)->n,
                      (unsigned long long)len), BAD;
    return 0;
}

static int special_id(const gguf_file *g, const char *key, int vocab, int *id, char *err, size_t n) {
    *id = -1;
    int r = key_int(g, key, 0, vocab - 1, id, err, n);
    return r < 0 ? BAD : 0;
}

static int build_spec(import_src *s, const gguf_file *g, tokenizer_spec *sp, float **scores, int32_t **types, char *err,
                      size_t n) {
    const char *kind = NULL;
    const gguf_kv *tok, *mer, *sc, *ty;
    if (gguf_get_str(g, "tokenizer.ggml.model", &kind, err, n) < 0) return BAD;
    int spm = !strcmp(kind, "llama");
    if (!spm && strcmp(kind, "gpt2"))
        return errmsg(err, n, "%s: tokenizer.ggml.model %s is not supported (gpt2, llama)", g->path, kind), BAD;
    if (str_array(g, "tokenizer.ggml.tokens", &tok, err, n) || str_array(g, "tokenizer.ggml.merges", &mer, err, n)) return BAD;
    if (!tok) return errmsg(err, n, "%s: key 'tokenizer.ggml.tokens' is missing", g->path), BAD;
    if (tok->n > (uint64_t)s->cfg.vocab_size)
        return errmsg(err, n, "%s: tokenizer.ggml.tokens has %llu tokens, more than token_embd's %d rows", g->path,
                      (unsigned long long)tok->n, s->cfg.vocab_size), BAD;
    if (num_array(g, "tokenizer.ggml.scores", tok->n, &sc, err, n) || num_array(g, "tokenizer.ggml.token_type", tok->n, &ty, err, n))
        return BAD;
    if (spm && !sc) return errmsg(err, n, "%s: key 'tokenizer.ggml.scores' is missing (a llama tokenizer needs it)", g->path), BAD;
    if (!spm && (!mer || mer->n > (1u << 30)))
        return errmsg(err, n, "%s: key 'tokenizer.ggml.merges' is missing (a gpt2 tokenizer needs it)", g->path), BAD;
    memset(sp, 0, sizeof *sp);
    sp->kind = spm ? TOKENIZER_BPE_SPM : TOKENIZER_BPE_BYTES;
    sp->pre = spm ? NULL : "default";
    if (!spm && gguf_get_str(g, "tokenizer.ggml.pre", &sp->pre, err, n) < 0) return BAD;
    sp->n_vocab = (int)tok->n;
    sp->tokens = (const char *const *)tok->as;
    *scores = sc ? malloc(tok->n * sizeof **scores + 1) : NULL;
    *types = ty ? malloc(tok->n * sizeof **types + 1) : NULL;
    if ((sc && !*scores) || (ty && !*types)) return errmsg(err, n, "out of memory"), IMPORT_IO_ERROR;
    for (uint64_t i = 0; i < tok->n; i++) {
        double v = sc ? gguf_arr_num(sc, i) : 0;
        if (!(fabs(v) <= FLT_MAX)) return errmsg(err, n, "%s: tokenizer.ggml.scores[%llu] is not a float32", g->path, (unsigned long long)i), BAD;
        if (sc) (*scores)[i] = (float)v;
        if (ty) (*types)[i] = (int32_t)gguf_arr_int(ty, i);
    }
    sp->scores = *scores, sp->types = *types;
    sp->n_merges = mer ? (int)mer->n : 0;
    sp->merges = mer ? (const char *const *)mer->as : NULL;
    int v = sp->n_vocab;
    sp->add_bos = spm, sp->add_eos = 0;
    int space = 1;  // llama.cpp's default: SPM text starts with a space
    if (special_id(g, "tokenizer.ggml.bos_token_id", v, &sp->bos_id, err, n) ||
        special_id(g, "tokenizer.ggml.eos_token_id", v, &sp->eos_id, err, n) ||
        special_id(g, "tokenizer.ggml.unknown_token_id", v, &sp->unk_id, err, n) ||
        special_id(g, "tokenizer.ggml.padding_token_id", v, &sp->pad_id, err, n) ||
        key_int(g, "tokenizer.ggml.add_bos_token", 0, 1, &sp->add_bos, err, n) < 0 ||
        key_int(g, "tokenizer.ggml.add_eos_token", 0, 1, &sp->add_eos, err, n) < 0 ||
        key_int(g, "tokenizer.ggml.add_space_prefix", 0, 1, &space, err, n) < 0 ||
        gguf_get_str(g, "tokenizer.chat_template", &sp->chat_template, err, n) < 0)
        return BAD;
    sp->no_space_prefix = !space;
    return 0;
}

static int gg_tokenizer(import_src *s, const char *dir, int *none, char *err, size_t n) {
    gguf_ctx *c = s->ctx;
    *none = !gguf_get(&c->g, "tokenizer.ggml.model");
    if (*none) return 0;
    tokenizer_spec sp;
    float *scores = NULL;
    int32_t *types = NULL;
    int rc = build_spec(s, &c->g, &sp, &scores, &types, err, n);
    tokenizer *t = NULL;
    if (!rc) {
        char inner[512];
        t = tokenizer_from_spec(&sp, inner, sizeof inner);
        if (!t) rc = (errmsg(err, n, "%s: the tokenizer.ggml.* keys: %s", c->g.path, inner), BAD);
    }
    if (!rc && tokenizer_save(t, dir, err, n)) rc = IMPORT_IO_ERROR;
    if (t) tokenizer_free(t);
    free(scores);
    free(types);
    return rc;
}

int import_open_gguf(import_src *s, const char *path, char *err, size_t n) {
    gguf_ctx *c = calloc(1, sizeof *c);
    if (!c) return errmsg(err, n, "out of memory"), IMPORT_IO_ERROR;
    s->ctx = c;
    s->read = gg_read, s->check_unused = gg_check_unused, s->tokenizer = gg_tokenizer, s->close = gg_close;
    if (gguf_open(&c->g, path, err, n)) {
        free(c);
        s->ctx = NULL;
        return BAD;
    }
    s->path = c->g.path;
    int r = read_config(s, &c->g, err, n);
    if (!r && !(c->used = calloc((size_t)c->g.n_tensors + 1, 1))) r = (errmsg(err, n, "out of memory"), IMPORT_IO_ERROR);
    if (r) gg_close(s);
    return r;
}
