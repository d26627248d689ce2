// checkpoint.c: see checkpoint.h.
#include "train/checkpoint.h"
#include "util/errmsg.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KINDS = 3 };  // weights, optim.m, optim.v

// FNV-1a over the tensors' bytes in the model's tensor order (weights, then m, then v).
static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ULL;
    return h;
}

static const char *prefix_of(int kind) { return kind == 0 ? "" : kind == 1 ? "optim.m." : "optim.v."; }

int checkpoint_save(const char *path, const model *m, const float *adam_m, const float *adam_v,
                    const st_meta_kv *meta, int n_meta, char *err, size_t n) {
    int nt;
    const model_tensor *mt = model_tensors(m, &nt);
    const float *base[KINDS] = {model_params((model *)m), adam_m, adam_v};
    int kinds = adam_m && adam_v ? 3 : 1;
    // A checkpoint is what a run resumes from: never replace a good one with NaN or infinite values.
    for (int k = 0; k < kinds; k++) {
        size_t at;
        float bad;
        const model_tensor *t = model_find_nonfinite(m, base[k], &at, &bad);
        if (t) return errmsg(err, n, "%s: not written: tensor '%s%s' holds %g at index %zu", path, prefix_of(k), t->name, bad, at);
    }
    st_tensor *ts = calloc((size_t)nt * kinds, sizeof *ts);
    char (*names)[96] = calloc((size_t)nt * kinds, sizeof *names);
    st_meta_kv *kv = calloc((size_t)n_meta + 1, sizeof *kv);
    if (!ts || !names || !kv) {
        free(ts), free(names), free(kv);
        return errmsg(err, n, "out of memory writing %s", path);
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int k = 0; k < kinds; k++)
        for (int i = 0; i < nt; i++) {
            st_tensor *t = &ts[k * nt + i];
            snprintf(names[k * nt + i], sizeof names[0], "%s%s", prefix_of(k), mt[i].name);
            t->name = names[k * nt + i];
            t->ndim = mt[i].ndim;
            for (int d = 0; d < mt[i].ndim; d++) t->shape[d] = mt[i].shape[d];
            t->numel = mt[i].numel;
            t->data = (float *)base[k] + mt[i].offset;
            h = fnv1a(h, t->data, t->numel * sizeof(float));
        }
    char hex[20];
    snprintf(hex, sizeof hex, "%016" PRIx64, h);
    memcpy(kv, meta, (size_t)n_meta * sizeof *kv);
    kv[n_meta].key = "checksum";
    kv[n_meta].value = hex;
    int rc = st_write(path, ts, nt * kinds, kv, n_meta + 1, err, n);
    free(ts), free(names), free(kv);
    return rc;
}

int checkpoint_load(const char *path, model *m, float *adam_m, float *adam_v, st_file *f, char *err, size_t n) {
    char inner[512];
    if (st_read(path, f, inner, sizeof inner)) return errmsg(err, n, "%s", inner);
    int nt;
    const model_tensor *mt = model_tensors(m, &nt);
    float *base[KINDS] = {model_params(m), adam_m, adam_v};
    int kinds = adam_m && adam_v ? 3 : 1;
    uint64_t h = 0xcbf29ce484222325ULL;
    int rc = 0;
    // The checksum covers every tensor written, so check it over all three kinds when present.
    int stored_kinds = st_find(f, "optim.m.norm.weight") ? 3 : 1;
    for (int k = 0; k < stored_kinds && !rc; k++)
        for (int i = 0; i < nt && !rc; i++) {
            char name[96];
            snprintf(name, sizeof name, "%s%s", prefix_of(k), mt[i].name);
            const st_tensor *t = st_find(f, name);
            if (!t) {
                rc = errmsg(err, n, "%s: missing tensor '%s' (not a checkpoint of this model?)", path, name);
                break;
            }
            int same = t->ndim == mt[i].ndim;
            for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == mt[i].shape[d];
            if (!same) {
                rc = errmsg(err, n, "%s: tensor '%s' does not match the model's shape", path, name);
                break;
            }
            h = fnv1a(h, t->data, t->numel * sizeof(float));
            if (k < kinds) memcpy(base[k] + mt[i].offset, t->data, t->numel * sizeof(float));
        }
    if (!rc && kinds > stored_kinds) rc = errmsg(err, n, "%s: holds no optimizer state (a weights-only file?)", path);
    if (!rc) {
        const char *want = st_meta_get(f, "checksum");
        char hex[20];
        snprintf(hex, sizeof hex, "%016" PRIx64, h);
        if (!want) rc = errmsg(err, n, "%s: no checksum in the metadata (not an mtac checkpoint?)", path);
        else if (strcmp(want, hex)) rc = errmsg(err, n, "%s: checksum mismatch (file corrupt): stored %s, computed %s", path, want, hex);
    }
    if (rc) st_free(f);
    return rc;
}
