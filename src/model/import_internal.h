// import_internal.h: what import.c asks of a source format (import_hf.c, import_gguf.c).
#ifndef MTAC_IMPORT_INTERNAL_H
#define MTAC_IMPORT_INTERNAL_H

#include "model/import.h"
#include "model/model.h"

typedef struct import_src import_src;
struct import_src {
    model_config cfg;     // filled by the opener (tie_embeddings included)
    int seq_len;          // the context the model was trained for
    const char *path;     // the source, for messages
    char name[160];       // the source's name of the tensor read last, for messages
    // Reads the tensor of mtac name t->name (shape t->shape) into dst, converted to float32 and in
    // mtac's layout. IMPORT_BAD_INPUT (missing, wrong shape) or 0.
    int (*read)(import_src *s, const model_tensor *t, float *dst, char *err, size_t n);
    // After every read: a tensor of the source that no read used is an error (naming it).
    int (*check_unused)(import_src *s, char *err, size_t n);
    // Writes the tokenizer's files into dir (0, IMPORT_BAD_INPUT or IMPORT_IO_ERROR); when the
    // source has none, writes nothing and sets *none.
    int (*tokenizer)(import_src *s, const char *dir, int *none, char *err, size_t n);
    void (*close)(import_src *s);
    void *ctx;
};

// Opens a Hugging Face directory / a GGUF file. 0, or IMPORT_BAD_INPUT / IMPORT_IO_ERROR.
int import_open_hf(import_src *s, const char *dir, char *err, size_t n);
int import_open_gguf(import_src *s, const char *path, char *err, size_t n);

// A source format's names of mtac's tensors.
typedef enum { IMPORT_NAMES_GGUF, IMPORT_NAMES_HF } import_names;
// The name in format f of the mtac tensor mt, into out: 0, or -1 when mtac has no such tensor to
// import. *rope (unless NULL): its rows are in Hugging Face's RoPE order (the q and k projections).
int import_source_name(import_names f, const char *mt, char *out, size_t len, int *rope);

// Rows of a (H*d, D) query or key projection from Hugging Face's rotate-half order within each
// head (pairs j, j+d/2) to the adjacent pairs (2j, 2j+1) of mtac's RoPE: dst row 2j of a head is
// src row j, dst row 2j+1 is src row d/2+j.
void import_unpermute_rope(const float *src, float *dst, int heads, int head_dim, int cols);

#endif
