// gguf.c: the GGUF reader (see gguf.h). Layout (little-endian): "GGUF", u32 version, u64 tensor
// count, u64 key/value count; the key/values (string key, u32 type, value); the tensor infos
// (string name, u32 ndim, u64 ne[ndim], u32 type, u64 offset); padding to general.alignment
// (default 32); the data. A string is a u64 length and its bytes (no NUL); an array a u32
// element type, a u64 count and the elements.
#include "io/gguf.h"
#include "io/dequant.h"
#include "io/fsutil.h"
#include "util/errmsg.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gguf.c assumes a little-endian host"
#endif

static const struct {
    const char *name;
    int size;  // bytes of a scalar of this type (0: string, array)
} VTYPES[GGUF_N_TYPES] = {
    {"u8", 1}, {"i8", 1}, {"u16", 2}, {"i16", 2}, {"u32", 4}, {"i32", 4}, {"f32", 4},
    {"bool", 1}, {"string", 0}, {"array", 0}, {"u64", 8}, {"i64", 8}, {"f64", 8},
};

const char *gguf_type_name(gguf_type t) { return (unsigned)t < GGUF_N_TYPES ? VTYPES[t].name : "?"; }

// A cursor over the file: pos and size let every length be checked against what is left.
typedef struct {
    FILE *f;
    const char *path;
    uint64_t pos, size;
    char *err;
    size_t n;
} rd;

static uint64_t left(const rd *r) { return r->size - r->pos; }

static int get(rd *r, void *dst, uint64_t len, const char *what) {
    if (len > left(r))
        return errmsg(r->err, r->n, "%s: truncated: %s needs %llu bytes at offset %llu, the file ends at %llu", r->path,
                      what, (unsigned long long)len, (unsigned long long)r->pos, (unsigned long long)r->size);
    if (len && fread(dst, 1, (size_t)len, r->f) != len)
        return errmsg(r->err, r->n, "%s: read error at offset %llu", r->path, (unsigned long long)r->pos);
    r->pos += len;
    return 0;
}

static int get_u32(rd *r, uint32_t *v, const char *what) { return get(r, v, 4, what); }
static int get_u64(rd *r, uint64_t *v, const char *what) { return get(r, v, 8, what); }

// A string: malloc'd and NUL-terminated; one holding a NUL byte is refused (it could not be used
// as a C string without being cut short).
static int get_str(rd *r, char **s, const char *what) {
    uint64_t len;
    *s = NULL;
    if (get_u64(r, &len, what)) return -1;
    if (len > left(r))
        return errmsg(r->err, r->n, "%s: %s: string length %llu at offset %llu runs past the end of the file (%llu bytes)",
                      r->path, what, (unsigned long long)len, (unsigned long long)(r->pos - 8), (unsigned long long)r->size);
    char *b = malloc((size_t)len + 1);
    if (!b) return errmsg(r->err, r->n, "%s: out of memory", r->path);
    if (get(r, b, len, what)) {
        free(b);
        return -1;
    }
    b[len] = '\0';
    if (strlen(b) != len) {
        free(b);
        return errmsg(r->err, r->n, "%s: %s: string holds a NUL byte", r->path, what);
    }
    *s = b;
    return 0;
}

// A scalar number of type t from 8 bytes of raw (as stored), as an integer and a double.
static void number(gguf_type t, const unsigned char *raw, int64_t *i, double *f) {
    union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32; float f32;
            uint64_t u64; int64_t i64; double f64; } v;
    memcpy(&v, raw, 8);
    switch (t) {
    case GGUF_U8: case GGUF_BOOL: *i = v.u8; break;
    case GGUF_I8: *i = v.i8; break;
    case GGUF_U16: *i = v.u16; break;
    case GGUF_I16: *i = v.i16; break;
    case GGUF_U32: *i = v.u32; break;
    case GGUF_I32: *i = v.i32; break;
    case GGUF_U64: *i = v.u64 > INT64_MAX ? INT64_MAX : (int64_t)v.u64; *f = (double)v.u64; return;
    case GGUF_I64: *i = v.i64; break;
    case GGUF_F32: *f = v.f32; *i = 0; return;
    case GGUF_F64: *f = v.f64; *i = 0; return;
    default: *i = 0; break;
    }
    *f = (double)*i;
}

// Element j of a numeric array, as an integer and as a double.
static void arr_elem(const gguf_kv *kv, uint64_t j, int64_t *i, double *f) {
    unsigned char b[8] = {0};
    memcpy(b, (const unsigned char *)kv->raw + j * VTYPES[kv->elem].size, VTYPES[kv->elem].size);
    number(kv->elem, b, i, f);
}

int64_t gguf_arr_int(const gguf_kv *kv, uint64_t j) {
    int64_t i;
    double f;
    arr_elem(kv, j, &i, &f);
    if (kv->elem != GGUF_F32 && kv->elem != GGUF_F64) return i;
    // a float outside int64's range (or NaN) has no integer value: converting it is undefined
    return f >= 0x1p63 ? INT64_MAX : f >= -0x1p63 ? (int64_t)f : f < 0 ? INT64_MIN : 0;
}

double gguf_arr_num(const gguf_kv *kv, uint64_t j) {
    int64_t i;
    double f;
    arr_elem(kv, j, &i, &f);
    return f;
}

static int read_value(rd *r, gguf_kv *kv) {
    const char *k = kv->key;
    char what[300];
    snprintf(what, sizeof what, "the value of key '%.200s'", k);
    if (kv->type == GGUF_STRING) return get_str(r, &kv->str, what);
    if (kv->type != GGUF_ARRAY) {
        unsigned char b[8] = {0};
        if (get(r, b, (uint64_t)VTYPES[kv->type].size, what)) return -1;
        number(kv->type, b, &kv->i, &kv->f);
        return 0;
    }
    uint32_t et;
    if (get_u32(r, &et, what) || get_u64(r, &kv->n, what)) return -1;
    if (et >= GGUF_N_TYPES)
        return errmsg(r->err, r->n, "%s: key '%s': unknown array element type %u", r->path, k, et);
    if (et == GGUF_ARRAY) return errmsg(r->err, r->n, "%s: key '%s': arrays of arrays are not supported", r->path, k);
    kv->elem = (gguf_type)et;
    // every element takes at least its size (a string: its 8-byte length) of the file
    uint64_t least = et == GGUF_STRING ? 8 : (uint64_t)VTYPES[et].size;
    if (kv->n > left(r) / least)
        return errmsg(r->err, r->n, "%s: key '%s': array of %llu %s runs past the end of the file", r->path, k,
                      (unsigned long long)kv->n, VTYPES[et].name);
    if (et != GGUF_STRING) {
        kv->raw = malloc((size_t)(kv->n * least) + 1);
        if (!kv->raw) return errmsg(r->err, r->n, "%s: out of memory", r->path);
        return get(r, kv->raw, kv->n * least, what);
    }
    kv->as = calloc((size_t)kv->n + 1, sizeof *kv->as);
    if (!kv->as) return errmsg(r->err, r->n, "%s: out of memory", r->path);
    for (uint64_t j = 0; j < kv->n; j++) {
        snprintf(what, sizeof what, "element %llu of key '%.200s'", (unsigned long long)j, k);
        if (get_str(r, &kv->as[j], what)) return -1;
    }
    return 0;
}

static int cmp_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// The first name that occurs twice among n (NULL if none); -1 when out of memory.
static int find_dup(char **names, size_t stride, int count, const char **dup) {
    *dup = NULL;
    if (count < 2) return 0;
    const char **v = malloc((size_t)count * sizeof *v);
    if (!v) return -1;
    for (int i = 0; i < count; i++) v[i] = *(char **)((char *)names + (size_t)i * stride);
    qsort(v, (size_t)count, sizeof *v, cmp_name);
    for (int i = 1; i < count && !*dup; i++)
        if (!strcmp(v[i - 1], v[i])) *dup = v[i];
    free(v);
    return 0;
}

static int read_tensor_info(rd *r, gguf_tensor *t) {
    char what[300];
    if (get_str(r, &t->name, "a tensor name")) return -1;
    const char *nm = t->name;
    snprintf(what, sizeof what, "the info of tensor '%.200s'", nm);
    uint32_t nd, type;
    if (get_u32(r, &nd, what)) return -1;
    if (nd < 1 || nd > GGUF_MAX_DIMS)
        return errmsg(r->err, r->n, "%s: tensor '%s' has %u dimensions (1 to %d)", r->path, nm, nd, GGUF_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        uint64_t v;
        if (get_u64(r, &v, what)) return -1;
        if (v < 1 || v > (uint64_t)INT64_MAX || numel > (uint64_t)SIZE_MAX / sizeof(float) / v)
            return errmsg(r->err, r->n, "%s: tensor '%s' has a bad size %llu in dimension %d", r->path, nm,
                          (unsigned long long)v, d);
        t->ne[d] = (int64_t)v;
        numel *= v;
    }
    if (get_u32(r, &type, what) || get_u64(r, &t->offset, what)) return -1;
    t->type = type;
    const char *tn = ggml_type_name(type);
    if (!tn) return errmsg(r->err, r->n, "%s: tensor '%s' has an unknown ggml type %u", r->path, nm, type);
    if (!ggml_type_supported(type))
        return errmsg(r->err, r->n, "%s: tensor '%s' has type %s, which mtac cannot read (F32, F16, BF16, Q4_0, Q4_1, "
                      "Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)", r->path, nm, tn);
    uint64_t bs = (uint64_t)ggml_block_size(type);
    if ((uint64_t)t->ne[0] % bs)
        return errmsg(r->err, r->n, "%s: tensor '%s' of type %s has rows of %lld values, not a multiple of its block (%llu)",
                      r->path, nm, tn, (long long)t->ne[0], (unsigned long long)bs);
    t->numel = (size_t)numel;
    t->nbytes = (size_t)(numel / bs * (uint64_t)ggml_type_size(type));
    return 0;
}

static void free_kv(gguf_kv *kv) {
    free(kv->key);
    free(kv->str);
    free(kv->raw);
    if (kv->as)
        for (uint64_t j = 0; j < kv->n; j++) free(kv->as[j]);
    free(kv->as);
}

void gguf_close(gguf_file *g) {
    for (int i = 0; i < g->n_kv; i++) free_kv(&g->kv[i]);
    for (int i = 0; i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->buf);
    if (g->f) fclose(g->f);
    memset(g, 0, sizeof *g);
}

// The key/values; counts are first checked against the smallest room each entry takes.
static int read_kvs(rd *r, gguf_file *g, uint64_t n_kv) {
    if (n_kv > left(r) / 13 || n_kv > INT_MAX)  // key length, type, a one-byte value
        return errmsg(r->err, r->n, "%s: header: %llu key/values cannot fit in the file", r->path, (unsigned long long)n_kv);
    g->kv = calloc((size_t)n_kv + 1, sizeof *g->kv);
    if (!g->kv) return errmsg(r->err, r->n, "%s: out of memory", r->path);
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &g->kv[g->n_kv++];
        uint32_t t;
        if (get_str(r, &kv->key, "a metadata key") || get_u32(r, &t, "a metadata type")) return -1;
        if (t >= GGUF_N_TYPES) return errmsg(r->err, r->n, "%s: key '%s' has an unknown value type %u", r->path, kv->key, t);
        kv->type = (gguf_type)t;
        if (read_value(r, kv)) return -1;
    }
    const char *dup;
    if (find_dup(&g->kv[0].key, sizeof *g->kv, g->n_kv, &dup)) return errmsg(r->err, r->n, "%s: out of memory", r->path);
    if (dup) return errmsg(r->err, r->n, "%s: key '%s' appears twice", r->path, dup);
    return 0;
}

static int read_infos(rd *r, gguf_file *g, uint64_t n_t) {
    if (n_t > left(r) / 32 || n_t > INT_MAX)  // name length, ndim, one dimension, type, offset
        return errmsg(r->err, r->n, "%s: header: %llu tensors cannot fit in the file", r->path, (unsigned long long)n_t);
    g->tensors = calloc((size_t)n_t + 1, sizeof *g->tensors);
    if (!g->tensors) return errmsg(r->err, r->n, "%s: out of memory", r->path);
    for (uint64_t i = 0; i < n_t; i++)
        if (read_tensor_info(r, &g->tensors[g->n_tensors++])) return -1;
    const char *dup;
    if (find_dup(&g->tensors[0].name, sizeof *g->tensors, g->n_tensors, &dup))
        return errmsg(r->err, r->n, "%s: out of memory", r->path);
    if (dup) return errmsg(r->err, r->n, "%s: tensor '%s' appears twice", r->path, dup);
    return 0;
}

// general.alignment, the data offset, and every tensor's place in the data section.
static int place_data(rd *r, gguf_file *g) {
    g->alignment = 32;
    const gguf_kv *a = gguf_get(g, "general.alignment");
    if (a) {
        if (a->type != GGUF_U32 || a->i == 0 || (a->i & (a->i - 1)))
            return errmsg(r->err, r->n, "%s: general.alignment must be a u32 power of two", r->path);
        g->alignment = (uint64_t)a->i;
    }
    g->data_offset = (r->pos + g->alignment - 1) / g->alignment * g->alignment;
    if (g->data_offset > r->size)
        return errmsg(r->err, r->n, "%s: truncated: the data section would start at %llu, past the end (%llu bytes)",
                      r->path, (unsigned long long)g->data_offset, (unsigned long long)r->size);
    uint64_t room = r->size - g->data_offset;
    for (int i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return errmsg(r->err, r->n, "%s: tensor '%s' offset %llu is not a multiple of the alignment %llu", r->path,
                          t->name, (unsigned long long)t->offset, (unsigned long long)g->alignment);
        if (t->offset > room || t->nbytes > room - t->offset)
            return errmsg(r->err, r->n, "%s: tensor '%s' (%zu bytes at data offset %llu) runs past the end of the file "
                          "(truncated?)", r->path, t->name, t->nbytes, (unsigned long long)t->offset);
    }
    return 0;
}

int gguf_open(gguf_file *g, const char *path, char *err, size_t n) {
    memset(g, 0, sizeof *g);
    size_t size;
    FILE *f = open_input_file(path, &size, err, n);
    if (!f) return -1;
    snprintf(g->path, sizeof g->path, "%s", path);
    g->f = f;
    g->size = size;
    rd r = {f, path, 0, size, err, n};
    char magic[4];
    uint64_t n_t, n_kv;
    int rc = -1;
    if (get(&r, magic, 4, "the magic") || memcmp(magic, "GGUF", 4)) {
        if (r.pos == 4) errmsg(err, n, "%s: not a GGUF file (no GGUF magic)", path);
    } else if (get_u32(&r, &g->version, "the version")) {
    } else if (g->version != 2 && g->version != 3) {
        errmsg(err, n, "%s: GGUF version %u (mtac reads versions 2 and 3)", path, g->version);
    } else if (get_u64(&r, &n_t, "the tensor count") || get_u64(&r, &n_kv, "the key/value count")) {
    } else if (!read_kvs(&r, g, n_kv) && !read_infos(&r, g, n_t) && !place_data(&r, g)) {
        rc = 0;
    }
    if (rc) gguf_close(g);
    return rc;
}

int gguf_read_tensor(gguf_file *g, int i, float *dst, char *err, size_t n) {
    if (i < 0 || i >= g->n_tensors) return errmsg(err, n, "%s: no tensor %d", g->path, i);
    const gguf_tensor *t = &g->tensors[i];
    if (fseeko(g->f, (off_t)(g->data_offset + t->offset), SEEK_SET))
        return errmsg(err, n, "%s: cannot seek to tensor '%s'", g->path, t->name);
    // In chunks of whole blocks, so only a chunk of the stored bytes is in memory beside dst.
    size_t bs = (size_t)ggml_block_size(t->type), ts = (size_t)ggml_type_size(t->type);
    size_t blocks = t->numel / bs, chunk = (4u << 20) / ts + 1, need = (chunk < blocks ? chunk : blocks) * ts + 1;
    if (g->buf_len < need) {
        free(g->buf);
        g->buf_len = 0;
        if (!(g->buf = malloc(need))) return errmsg(err, n, "%s: out of memory reading tensor '%s'", g->path, t->name);
        g->buf_len = need;
    }
    for (size_t b = 0; b < blocks; b += chunk) {
        size_t k = blocks - b < chunk ? blocks - b : chunk;
        if (fread(g->buf, ts, k, g->f) != k) return errmsg(err, n, "%s: read error in tensor '%s'", g->path, t->name);
        dequant_rows(t->type, g->buf, dst + b * bs, k * bs);
    }
    return 0;
}

const gguf_kv *gguf_get(const gguf_file *g, const char *key) {
    for (int i = 0; i < g->n_kv; i++)
        if (!strcmp(g->kv[i].key, key)) return &g->kv[i];
    return NULL;
}

int gguf_find_tensor(const gguf_file *g, const char *name) {
    for (int i = 0; i < g->n_tensors; i++)
        if (!strcmp(g->tensors[i].name, name)) return i;
    return -1;
}

static int is_int(gguf_type t) { return t <= GGUF_I32 || t == GGUF_BOOL || t == GGUF_U64 || t == GGUF_I64; }

int gguf_get_int(const gguf_file *g, const char *key, int64_t *v, char *err, size_t n) {
    const gguf_kv *kv = gguf_get(g, key);
    if (!kv) return 0;
    if (!is_int(kv->type))
        return errmsg(err, n, "%s: key '%s' is a %s, not an integer", g->path, key, gguf_type_name(kv->type));
    *v = kv->i;
    return 1;
}

int gguf_get_num(const gguf_file *g, const char *key, double *v, char *err, size_t n) {
    const gguf_kv *kv = gguf_get(g, key);
    if (!kv) return 0;
    if (!is_int(kv->type) && kv->type != GGUF_F32 && kv->type != GGUF_F64)
        return errmsg(err, n, "%s: key '%s' is a %s, not a number", g->path, key, gguf_type_name(kv->type));
    *v = kv->f;
    return 1;
}

int gguf_get_str(const gguf_file *g, const char *key, const char **v, char *err, size_t n) {
    const gguf_kv *kv = gguf_get(g, key);
    if (!kv) return 0;
    if (kv->type != GGUF_STRING)
        return errmsg(err, n, "%s: key '%s' is a %s, not a string", g->path, key, gguf_type_name(kv->type));
    *v = kv->str;
    return 1;
}
