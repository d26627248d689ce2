// safetensors.h: read and write the safetensors format (docs/formats.md).
// A file is: u64 little-endian N, then N bytes of JSON header, then the raw tensor bytes.
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets
// relative to the start of the data section) and may hold "__metadata__": {string: string}.
// The readers accept dtypes F32, F16 and BF16 (converted to float32) and check every offset,
// shape and size against the file. st_read reads a whole file; st_open reads only the header and
// st_stream_read one tensor at a time (an import holds one tensor beside the model).
#ifndef MTAC_SAFETENSORS_H
#define MTAC_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

// A tensor of an open file: its place in the data section and its stored dtype.
typedef struct {
    char *name;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    size_t numel;
    int dtype_size, bf16;       // 4 (F32) or 2 (F16, or BF16 when bf16)
    uint64_t begin;             // offset in the data section
} st_entry;

typedef struct {
    char path[1024];
    FILE *f;
    uint64_t data_off;
    st_entry *entries;
    int n_entries;
    st_meta_kv *meta;
    int n_meta;
    unsigned char *buf;         // st_stream_read's chunk of 16-bit values, kept for the next tensor
} st_stream;

// Opens a file and reads its header, with st_read's checks. 0, or -1 with a message (nothing to close).
int st_open(st_stream *s, const char *path, char *err, size_t err_len);
// The index of a tensor (-1 if absent), and a metadata value (NULL if absent).
int st_stream_find(const st_stream *s, const char *name);
const char *st_stream_meta(const st_stream *s, const char *key);
// Reads entry i as float32 into dst (its numel floats). 0, or -1 with a message.
int st_stream_read(st_stream *s, int i, float *dst, char *err, size_t err_len);
void st_close(st_stream *s);

// Writes tensors (float32) and optional metadata atomically: to "<path>.tmp", fsync, rename
// (out_open in io/fsutil.h: a symlink followed, a device or FIFO written in place).
// Tensors are written in the order given. Returns 0, or -1 with a message in err.
int st_write(const char *path, const st_tensor *tensors, int n_tensors, const st_meta_kv *meta,
             int n_meta, char *err, size_t err_len);

#endif
