// fuzz_safetensors.c: the safetensors reader (src/io/safetensors.c, st_read), which every file
// input of mtac goes through (operator problems, weights, checkpoints). The input is the file.
// A file it accepts must also survive the writer: st_write of what was read, read again, gives
// the same tensors (names, shapes, bytes) and metadata. The streaming reader (st_open,
// st_stream_read) accepts exactly the files st_read accepts and reads the same floats.
#include "fuzz_util.h"
#include "io/safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void require_same(const st_file *a, const st_file *b) {
    fuzz_require(a->n_tensors == b->n_tensors && a->n_meta == b->n_meta, "round trip: tensor/metadata counts");
    for (int i = 0; i < a->n_tensors; i++) {
        const st_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        fuzz_require(!strcmp(x->name, y->name) && x->ndim == y->ndim && x->numel == y->numel, "round trip: tensor");
        fuzz_require(!memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof x->shape[0]), "round trip: shape");
        fuzz_require(!memcmp(x->data, y->data, x->numel * sizeof(float)), "round trip: data");
    }
    for (int i = 0; i < a->n_meta; i++)
        fuzz_require(!strcmp(a->meta[i].key, b->meta[i].key) && !strcmp(a->meta[i].value, b->meta[i].value),
                     "round trip: metadata");
}

// The streamed tensors of path equal f's (NULL: st_read refused the file, so must st_open).
static void require_stream(const char *path, const st_file *f) {
    st_stream s;
    char err[512];
    int rc = st_open(&s, path, err, sizeof err);
    fuzz_require((rc == 0) == (f != NULL), "st_open accepts what st_read accepts");
    if (rc) return;
    fuzz_require(s.n_entries == f->n_tensors && s.n_meta == f->n_meta, "st_open: tensor/metadata counts");
    for (int i = 0; i < s.n_entries; i++) {
        const st_tensor *t = &f->tensors[i];
        fuzz_require(!strcmp(s.entries[i].name, t->name) && s.entries[i].numel == t->numel, "st_open: tensor");
        float *x = malloc(t->numel * sizeof(float) + 1);
        fuzz_require(x && st_stream_read(&s, i, x, err, sizeof err) == 0, "st_stream_read reads an accepted tensor");
        fuzz_require(!memcmp(x, t->data, t->numel * sizeof(float)), "streamed floats equal st_read's");
        free(x);
    }
    st_close(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file f, g;
    char err[512];
    const char *in = fuzz_file(data, size);
    if (st_read(in, &f, err, sizeof err)) {
        require_stream(in, NULL);
        return 0;
    }
    require_stream(in, &f);
    for (int i = 0; i < f.n_tensors; i++) {
        const st_tensor *t = &f.tensors[i];
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->shape[d];
        fuzz_require(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS && numel == t->numel, "numel is the shape's product");
        fuzz_require(st_find(&f, t->name) == t, "tensor names are unique");
    }
    const char *path = fuzz_dir_path("rt.safetensors");
    fuzz_require(st_write(path, f.tensors, f.n_tensors, f.meta, f.n_meta, err, sizeof err) == 0, "st_write accepts what st_read gave");
    fuzz_require(st_read(path, &g, err, sizeof err) == 0, "st_read accepts what st_write wrote");
    require_same(&f, &g);
    st_free(&g);
    st_free(&f);
    return 0;
}
