// safetensors.h: read and write the safetensors format (docs/formats.md).
// A file is: u64 little-endian N, then N bytes of JSON header, then the raw tensor bytes.
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the start of the data section) and may hold "__metadata__": {string: string}.
// This reader accepts dtype "F32" only and checks every offset, shape and size against the file.
#ifndef MTAC_SAFETENSORS_H
#define MTAC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define ST_MAX_DIMS 8

typedef struct {
    char *name;                 // owned
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t numel;               // product of shape (1 for a scalar, ndim = 0)
    float *data;                // owned, numel floats
} st_tensor;

typedef struct {
    char *key, *value;          // owned
} st_meta_kv;

typedef struct {
    st_tensor *tensors;
    int n_tensors;
    st_meta_kv *meta;
    int n_meta;
} st_file;

// Reads a whole file. Returns 0 on success; on failure returns -1, writes a message naming the
// file and the problem to err, and leaves *f empty (nothing to free).
int st_read(const char *path, st_file *f, char *err, size_t err_len);

// Finds a tensor by name (NULL if absent).
const st_tensor *st_find(const st_file *f, const char *name);

// Finds a metadata value by key (NULL if absent).
const char *st_meta_get(const st_file *f, const char *key);

void st_free(st_file *f);

// Writes tensors (float32) and optional metadata atomically: to "<path>.tmp", fsync, rename
// (out_open in io/fsutil.h: a symlink followed, a device or FIFO written in place).
// Tensors are written in the order given. Returns 0, or -1 with a message in err.
int st_write(const char *path, const st_tensor *tensors, int n_tensors, const st_meta_kv *meta,
             int n_meta, char *err, size_t err_len);

#endif
