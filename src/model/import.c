// import.c: the part of an import common to every source (see import.h): the run directory built
// in a temporary directory beside out, the model filled tensor by tensor, the weights, the run's
// config and the tokenizer written, then the rename into place.
#include "io/fsutil.h"
#include "model/import_internal.h"
#include "train/train.h"
#include "util/errmsg.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// mtac's name, GGUF's (llama.cpp's), Hugging Face's (Llama's); rope: q and k rows in RoPE order.
typedef struct {
    const char *mtac, *gguf, *hf;
    int rope;
} tensor_names;

int import_source_name(import_names f, const char *mt, char *out, size_t len, int *rope) {
    static const tensor_names whole[] = {
        {"tok_embeddings.weight", "token_embd.weight", "model.embed_tokens.weight", 0},
        {"norm.weight", "output_norm.weight", "model.norm.weight", 0},
        {"output.weight", "output.weight", "lm_head.weight", 0},
    };
    static const tensor_names layer[] = {
        {"attention_norm.weight", "attn_norm.weight", "input_layernorm.weight", 0},
        {"attention.wq.weight", "attn_q.weight", "self_attn.q_proj.weight", 1},
        {"attention.wk.weight", "attn_k.weight", "self_attn.k_proj.weight", 1},
        {"attention.wv.weight", "attn_v.weight", "self_attn.v_proj.weight", 0},
        {"attention.wo.weight", "attn_output.weight", "self_attn.o_proj.weight", 0},
        {"ffn_norm.weight", "ffn_norm.weight", "post_attention_layernorm.weight", 0},
        {"feed_forward.w1.weight", "ffn_gate.weight", "mlp.gate_proj.weight", 0},
        {"feed_forward.w2.weight", "ffn_down.weight", "mlp.down_proj.weight", 0},
        {"feed_forward.w3.weight", "ffn_up.weight", "mlp.up_proj.weight", 0},
    };
    const int hf = f == IMPORT_NAMES_HF;
    if (rope) *rope = 0;
    for (size_t i = 0; i < sizeof whole / sizeof whole[0]; i++)
        if (!strcmp(mt, whole[i].mtac)) return snprintf(out, len, "%s", hf ? whole[i].hf : whole[i].gguf), 0;
    int l, at = 0;
    if (sscanf(mt, "layers.%d.%n", &l, &at) != 1 || !at) return -1;
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++)
        if (!strcmp(mt + at, layer[i].mtac)) {
            if (rope) *rope = layer[i].rope;
            snprintf(out, len, hf ? "model.layers.%d.%s" : "blk.%d.%s", l, hf ? layer[i].hf : layer[i].gguf);
            return 0;
        }
    return -1;
}

void import_unpermute_rope(const float *src, float *dst, int heads, int d, int cols) {
    for (int h = 0; h < heads; h++)
        for (int j = 0; j < d / 2; j++) {
            const float *a = src + ((size_t)h * d + j) * cols, *b = src + ((size_t)h * d + d / 2 + j) * cols;
            memcpy(dst + ((size_t)h * d + 2 * j) * cols, a, (size_t)cols * sizeof(float));
            memcpy(dst + ((size_t)h * d + 2 * j + 1) * cols, b, (size_t)cols * sizeof(float));
        }
}

// Removes dir and the files in it (the temporary run: no subdirectories).
static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4500];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(dir);
}

// 1 when path is a directory with nothing in it, 0 when it is anything else.
static int empty_dir(const char *path) {
    DIR *d = opendir(path);
    if (!d) return 0;
    struct dirent *e;
    int empty = 1;
    while (empty && (e = readdir(d))) empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}

static void note(const import_hooks *h, int done, int total, const char *what) {
    if (h && h->progress) h->progress(h->arg, done, total, what);
}

// Every tensor of the model from the source, each checked finite.
static int fill_model(import_src *s, model *m, const import_hooks *h, char *err, size_t n) {
    int count;
    const model_tensor *ts = model_tensors(m, &count);
    float *p = model_params(m);
    for (int i = 0; i < count; i++) {
        if (h && h->stop && *h->stop) return errmsg(err, n, "interrupted: nothing imported"), IMPORT_INTERRUPTED;
        note(h, i, count, ts[i].name);
        int rc = s->read(s, &ts[i], p + ts[i].offset, err, n);
        if (rc) return rc;
        for (size_t j = 0; j < ts[i].numel; j++)
            if (!isfinite(p[ts[i].offset + j]))
                return errmsg(err, n, "%s: tensor '%s' holds %g at index %zu: the weights must be finite", s->path,
                              s->name, (double)p[ts[i].offset + j], j), IMPORT_BAD_INPUT;
    }
    note(h, count, count, "done");
    return s->check_unused(s, err, n);
}

// config.json: a train config holding the model, so `mtac sample/eval/train --run` open it.
static int write_config(const import_src *s, const char *dir, const char *out, char *err, size_t n) {
    train_config c;
    train_config_default(&c);
    c.model = s->cfg;
    c.have_model = 1;
    c.seq_len = s->seq_len < 1 ? 2048 : s->seq_len > 1000000 ? 1000000 : s->seq_len;
    snprintf(c.preset, sizeof c.preset, "imported");
    snprintf(c.out, sizeof c.out, "%s", out);
    char inner[512];
    if (train_config_finish(&c, inner, sizeof inner))
        return errmsg(err, n, "%s: the model is not one mtac can run: %s", s->path, inner), IMPORT_BAD_INPUT;
    char *json = train_config_to_json(&c), path[4300];
    snprintf(path, sizeof path, "%s/config.json", dir);
    int rc = json ? write_text_atomic(path, json, err, n) : errmsg(err, n, "out of memory");
    free(json);
    return rc ? IMPORT_IO_ERROR : 0;
}

static int build_run(import_src *s, const char *dir, const char *out, const import_hooks *h, char *err, size_t n) {
    int rc = write_config(s, dir, out, err, n);
    if (rc) return rc;
    char inner[512], path[4300];
    model *m = model_create(&s->cfg, inner, sizeof inner);
    if (!m) return errmsg(err, n, "%s: %s", s->path, inner), IMPORT_IO_ERROR;
    rc = fill_model(s, m, h, err, n);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (!rc && model_save_weights(m, path, err, n)) rc = IMPORT_IO_ERROR;
    model_free(m);
    int none = 0;
    if (!rc) rc = s->tokenizer(s, dir, &none, err, n);
    if (!rc && none) note(h, -1, 0, "the source has no tokenizer: the run's ids are the model's, with no text for them");
    return rc;
}

int import_model(const char *src, const char *out, const import_hooks *h, char *err, size_t n) {
    struct stat st, so;
    if (stat(src, &st)) return errmsg(err, n, "%s: %s", src, strerror(errno)), IMPORT_BAD_INPUT;
    if (!stat(out, &so) && !empty_dir(out))
        return errmsg(err, n, "%s exists and is not an empty directory: choose another --out", out), IMPORT_BAD_INPUT;
    import_src s;
    memset(&s, 0, sizeof s);
    int rc = S_ISDIR(st.st_mode) ? import_open_hf(&s, src, err, n) : import_open_gguf(&s, src, err, n);
    if (rc) return rc;
    char tmp[4200];
    size_t len = strlen(out);
    while (len > 1 && out[len - 1] == '/') len--;  // "run/" -> beside "run", not inside it
    snprintf(tmp, sizeof tmp, "%.*s.import-XXXXXX", (int)len, out);
    char *slash = strrchr(tmp, '/');  // out's missing parents are made, as mkdir -p would
    if (slash && slash > tmp) {
        *slash = 0;
        const int made = !mkdir_p(tmp);
        *slash = '/';
        if (!made) {
            s.close(&s);
            return errmsg(err, n, "%s: cannot create its directory: %s", out, strerror(errno)), IMPORT_IO_ERROR;
        }
    }
    if (!mkdtemp(tmp)) {
        s.close(&s);
        return errmsg(err, n, "%s: cannot create a temporary directory beside it: %s", out, strerror(errno)), IMPORT_IO_ERROR;
    }
    mode_t mask = umask(0);  // mkdtemp makes it private; the run gets a directory's usual mode
    umask(mask);
    chmod(tmp, 0777 & ~mask);
    rc = build_run(&s, tmp, out, h, err, n);
    s.close(&s);
    if (!rc && h && h->stop && *h->stop) rc = (errmsg(err, n, "interrupted: nothing imported"), IMPORT_INTERRUPTED);
    // rename replaces an empty directory; if one appeared at out meanwhile with files, it fails
    if (!rc && rename(tmp, out)) rc = (errmsg(err, n, "%s: cannot move the run into place: %s", out, strerror(errno)), IMPORT_IO_ERROR);
    if (rc) remove_dir(tmp);
    return rc;
}
