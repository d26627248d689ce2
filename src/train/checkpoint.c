// checkpoint.c: see checkpoint.h.
#include "train/checkpoint.h"
#include "util/errmsg.h"
#include "util/fnv1a.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { KINDS = 3 };  // weights, optim.m, optim.v

// The format this file writes. Version 1 (files without the key) checksummed the tensors only;
// version 2 checksums the metadata too, so a damaged step or data position is caught as well.
static const char *const VERSION_KEY = "checkpoint_version", *const VERSION = "2";

static const char *prefix_of(int kind) { return kind == 0 ? "" : kind == 1 ? "optim.m." : "optim.v."; }

static int by_key(const void *a, const void *b) {
    return strcmp((*(const st_meta_kv *const *)a)->key, (*(const st_meta_kv *const *)b)->key);
}

// Version 2: the tensors' hash h continued over every metadata entry but the checksum itself, in
// byte order of the keys (so the order in the file does not matter), each as key, 0, value, 0.
// 0 on success, -1 when out of memory.
static int hash_meta(uint64_t *h, const st_meta_kv *kv, int nkv) {
    const st_meta_kv **order = malloc((size_t)(nkv ? nkv : 1) * sizeof *order);
    if (!order) return -1;
    int k = 0;
    for (int i = 0; i < nkv; i++)
        if (strcmp(kv[i].key, "checksum")) order[k++] = &kv[i];
    qsort(order, (size_t)k, sizeof *order, by_key);
    for (int i = 0; i < k; i++) {
        *h = fnv1a(*h, order[i]->key, strlen(order[i]->key) + 1);
        *h = fnv1a(*h, order[i]->value, strlen(order[i]->value) + 1);
    }
    free(order);
    return 0;
}

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
    for (int i = 0; i < n_meta; i++)
        if (!strcmp(meta[i].key, VERSION_KEY) || !strcmp(meta[i].key, "checksum"))
            return errmsg(err, n, "%s: metadata key '%s' is the checkpoint's own", path, meta[i].key);
    st_tensor *ts = calloc((size_t)nt * kinds, sizeof *ts);
    char (*names)[96] = calloc((size_t)nt * kinds, sizeof *names);
    st_meta_kv *kv = calloc((size_t)n_meta + 2, sizeof *kv);
    if (!ts || !names || !kv) {
        free(ts), free(names), free(kv);
        return errmsg(err, n, "out of memory writing %s", path);
    }
    uint64_t h = FNV1A_START;
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
    memcpy(kv, meta, (size_t)n_meta * sizeof *kv);
    kv[n_meta].key = (char *)VERSION_KEY;
    kv[n_meta].value = (char *)VERSION;
    int rc = hash_meta(&h, kv, n_meta + 1) ? errmsg(err, n, "out of memory writing %s", path) : 0;
    char hex[20];
    snprintf(hex, sizeof hex, "%016" PRIx64, h);
    kv[n_meta + 1].key = "checksum";
    kv[n_meta + 1].value = hex;
    if (!rc) rc = st_write(path, ts, nt * kinds, kv, n_meta + 2, err, n);
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
    uint64_t h = FNV1A_START;
    int rc = 0;
    const char *version = st_meta_get(f, VERSION_KEY);
    if (version && strcmp(version, "2"))
        rc = errmsg(err, n, "%s: unknown checkpoint_version '%.20s' (this mtac reads 2, and files without the key)",
                    path, version);
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
    if (!rc && version && hash_meta(&h, f->meta, f->n_meta)) rc = errmsg(err, n, "out of memory reading %s", path);
    if (!rc) {
        const char *want = st_meta_get(f, "checksum");
        char hex[20];
        snprintf(hex, sizeof hex, "%016" PRIx64, h);
        if (!want) rc = errmsg(err, n, "%s: no checksum in the metadata (not an mtac checkpoint?)", path);
        else if (strcmp(want, hex)) rc = errmsg(err, n, "%s: checksum mismatch (file corrupt): stored %s, computed %s", path, want, hex);
    }
    // A whole file can still hold values no run resumes from (one saved by an older mtac after its
    // run diverged, or written by another program): NaN or infinite weights or moments, or a
    // negative second moment (AdamW takes its square root).
    for (int k = 0; k < kinds && !rc; k++) {
        size_t at;
        float bad;
        const model_tensor *t = model_find_nonfinite(m, base[k], &at, &bad);
        if (t) rc = errmsg(err, n, "%s: tensor '%s%s' holds %g at index %zu: a checkpoint must be finite", path,
                           prefix_of(k), t->name, bad, at);
    }
    for (int i = 0; kinds == 3 && i < nt && !rc; i++)
        for (size_t j = 0; j < mt[i].numel && !rc; j++)
            if (adam_v[mt[i].offset + j] < 0)
                rc = errmsg(err, n, "%s: tensor 'optim.v.%s' holds %g at index %zu: a second moment cannot be negative",
                            path, mt[i].name, adam_v[mt[i].offset + j], j);
    if (rc) st_free(f);
    return rc;
}
