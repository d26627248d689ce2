// gguf.h: read GGUF files (versions 2 and 3), llama.cpp's model format: a header, metadata
// key/values, tensor infos, then the tensor data at an aligned offset (docs/models.md,
// "Importing"). gguf_open reads everything but the tensor data, checking every count, length and
// offset against the file before it allocates or seeks; gguf_read_tensor then reads one tensor at
// a time as float32 (io/dequant.h), so a model is never in memory twice.
#ifndef MTAC_GGUF_H
#define MTAC_GGUF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// GGUF's value types
typedef enum {
    GGUF_U8 = 0, GGUF_I8, GGUF_U16, GGUF_I16, GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY,
    GGUF_U64, GGUF_I64, GGUF_F64, GGUF_N_TYPES
} gguf_type;

typedef struct {
    char *key;
    gguf_type type;     // of the value; for an array, GGUF_ARRAY and elem its elements' type
    gguf_type elem;
    // A scalar: the number in i (integers and bool; a U64 past INT64_MAX is held as INT64_MAX)
    // and f (every number), a string in str. An array: n elements, strings in as, numbers as
    // stored (little-endian, elem's type) in raw: read them with gguf_arr_int / gguf_arr_num.
    int64_t i;
    double f;
    char *str;
    uint64_t n;
    void *raw;
    char **as;
} gguf_kv;

enum { GGUF_MAX_DIMS = 4 };

typedef struct {
    char *name;
    int ndim;
    int64_t ne[GGUF_MAX_DIMS];  // ggml order: ne[0] is the row (fastest) dimension
    uint32_t type;              // ggml type (io/dequant.h)
    uint64_t offset;            // from the start of the data section
    size_t numel, nbytes;
} gguf_tensor;

typedef struct {
    char path[1024];
    FILE *f;
    uint64_t size;              // of the file
    uint32_t version;
    gguf_kv *kv;
    int n_kv;
    gguf_tensor *tensors;
    int n_tensors;
    uint64_t alignment, data_offset;
    unsigned char *buf;         // gguf_read_tensor's chunk of stored bytes, kept for the next tensor
    size_t buf_len;
} gguf_file;

// Opens and reads the header, metadata and tensor infos of path. 0, or -1 with a message naming
// the file and what is wrong (g left closed: nothing to free).
int gguf_open(gguf_file *g, const char *path, char *err, size_t n);
// Reads tensor i into dst (its numel floats). 0, or -1 with a message.
int gguf_read_tensor(gguf_file *g, int i, float *dst, char *err, size_t n);
void gguf_close(gguf_file *g);

// Finds a key (NULL if absent) and a tensor (-1 if absent).
const gguf_kv *gguf_get(const gguf_file *g, const char *key);
int gguf_find_tensor(const gguf_file *g, const char *name);

// Typed lookups of a scalar key: 1 and the value when present with a fitting type (an integer
// type for get_int, any number for get_num, a string for get_str), 0 when absent, -1 with a
// message naming the key when present with another type.
int gguf_get_int(const gguf_file *g, const char *key, int64_t *v, char *err, size_t n);
int gguf_get_num(const gguf_file *g, const char *key, double *v, char *err, size_t n);
int gguf_get_str(const gguf_file *g, const char *key, const char **v, char *err, size_t n);

// Element j of a numeric array (kv->type GGUF_ARRAY, elem not GGUF_STRING) as an integer
// (floats truncated toward zero, clamped to int64's range, NaN as 0) or as a double.
int64_t gguf_arr_int(const gguf_kv *kv, uint64_t j);
double gguf_arr_num(const gguf_kv *kv, uint64_t j);
// The name of a value type ("u32", "string", ...).
const char *gguf_type_name(gguf_type t);

#endif
