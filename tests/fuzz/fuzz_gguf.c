// fuzz_gguf.c: the GGUF reader (src/io/gguf.c, gguf_open and gguf_read_tensor), which `mtac
// import` reads GGUF files with. The input is the file. An accepted file keeps the reader's
// promises: tensor names and keys unique, every tensor's bytes inside the file and its size its
// type's, and every tensor reads (dequantizes) without reading outside its bytes (the sanitizers).
#include "fuzz_util.h"
#include "io/dequant.h"
#include "io/gguf.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    gguf_file g;
    char err[512];
    if (gguf_open(&g, fuzz_file(data, size), err, sizeof err)) return 0;
    fuzz_require(g.data_offset <= g.size && g.data_offset % g.alignment == 0, "the data section starts inside, aligned");
    for (int i = 0; i < g.n_kv; i++) {
        const gguf_kv *kv = &g.kv[i];
        fuzz_require(gguf_get(&g, kv->key) == kv, "keys are unique");
        // every element of an array is readable as stored
        if (kv->type == GGUF_ARRAY && kv->elem != GGUF_STRING && kv->n) {
            (void)gguf_arr_int(kv, kv->n - 1);
            (void)gguf_arr_num(kv, 0);
        }
        if (kv->type == GGUF_ARRAY && kv->elem == GGUF_STRING)
            for (uint64_t j = 0; j < kv->n; j++) fuzz_require(kv->as[j] != NULL, "string elements are read");
        int64_t v;
        double d;
        const char *s;
        (void)gguf_get_int(&g, kv->key, &v, err, sizeof err);
        (void)gguf_get_num(&g, kv->key, &d, err, sizeof err);
        (void)gguf_get_str(&g, kv->key, &s, err, sizeof err);
    }
    for (int i = 0; i < g.n_tensors; i++) {
        const gguf_tensor *t = &g.tensors[i];
        fuzz_require(gguf_find_tensor(&g, t->name) == i, "tensor names are unique");
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= (size_t)t->ne[d];
        fuzz_require(numel == t->numel && t->numel % (size_t)ggml_block_size(t->type) == 0, "numel is whole blocks");
        fuzz_require(t->nbytes == t->numel / (size_t)ggml_block_size(t->type) * (size_t)ggml_type_size(t->type),
                     "nbytes is the type's size");
        fuzz_require(g.data_offset + t->offset + t->nbytes <= g.size, "tensor bytes inside the file");
        float *x = malloc(t->numel * sizeof(float) + 1);
        fuzz_require(x && gguf_read_tensor(&g, i, x, err, sizeof err) == 0, "an accepted tensor reads");
        free(x);
    }
    gguf_close(&g);
    return 0;
}
