// safetensors.c: read and write the safetensors format (see safetensors.h, docs/formats.md).
// The JSON header is parsed and printed with cJSON; everything in it is checked against the file
// before any tensor data is touched, so a malformed or truncated file fails with a message.
#include "io/safetensors.h"
#include "io/dequant.h"
#include "io/fsutil.h"
#include "util/errmsg.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

// Tensor bytes are copied straight into floats, so the host must be little-endian like the format.
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c assumes a little-endian host"
#endif

#define ST_MAX_HEADER (100u * 1000u * 1000u) // a larger header is corrupt, not a real file
#define ST_MAX_EXACT 9007199254740992.0      // 2^53: larger doubles are not exact integers

static int host_is_little_endian(void) {
    uint32_t x = 1;
    unsigned char b;
    memcpy(&b, &x, 1);
    return b == 1;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

// A JSON number that is an exact non-negative integer (cJSON stores all numbers as doubles).
// Returns 1 and sets *out, 0 if not a number / not an integer / too large, -1 if negative.
static int json_uint(const cJSON *it, uint64_t *out) {
    if (!cJSON_IsNumber(it)) return 0;
    double d = it->valuedouble;
    if (d < 0) return -1;
    if (!(d <= ST_MAX_EXACT)) return 0; // also rejects NaN and inf
    uint64_t u = (uint64_t)d;
    if ((double)u != d) return 0;
    *out = u;
    return 1;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

// cJSON keeps every copy of a repeated key, so duplicates must be found by hand. Sorting the keys
// keeps this O(n log n) even for a hostile header with millions of entries.
// Returns 0 and sets *dup to a repeated key (or NULL), -1 if out of memory.
static int find_duplicate_key(const cJSON *obj, const char **dup) {
    *dup = NULL;
    int n = cJSON_GetArraySize(obj), k = 0;
    if (n < 2) return 0;
    const char **keys = malloc((size_t)n * sizeof *keys);
    if (!keys) return -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, obj) keys[k++] = e->string;
    qsort(keys, (size_t)n, sizeof *keys, cmp_str);
    for (int i = 1; i < n && !*dup; i++)
        if (!strcmp(keys[i - 1], keys[i])) *dup = keys[i];
    free(keys);
    return 0;
}

// ----------------------------------------------------------------------------
// reading

const st_tensor *st_find(const st_file *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

const char *st_meta_get(const st_file *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (!strcmp(f->meta[i].key, key)) return f->meta[i].value;
    return NULL;
}

void st_free(st_file *f) {
    for (int i = 0; i < f->n_tensors; i++) {
        free(f->tensors[i].name);
        free(f->tensors[i].data);
    }
    for (int i = 0; i < f->n_meta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->tensors);
    free(f->meta);
    memset(f, 0, sizeof *f); // so a second st_free is a no-op
}

// Reads the whole file into a malloc'd buffer. Only regular files (open_input_file): a directory
// opens fine on Linux but reports a bogus size, devices and pipes have none, and a FIFO would
// block the open itself.
static int read_all(const char *path, unsigned char **buf, size_t *len, char *err, size_t n) {
    size_t sz;
    FILE *fp = open_input_file(path, &sz, err, n);
    if (!fp) return -1;
    unsigned char *b = malloc(sz ? sz : 1);
    if (!b) {
        fclose(fp);
        return errmsg(err, n, "%s: out of memory reading %zu bytes", path, sz);
    }
    size_t got = fread(b, 1, sz, fp);
    int rerr = ferror(fp);
    fclose(fp);
    if (got != sz || rerr) {
        free(b);
        return errmsg(err, n, "%s: short read (%zu of %zu bytes)", path, got, sz);
    }
    *buf = b;
    *len = sz;
    return 0;
}

// Bytes per value of a dtype this reader converts to float32 (0: another dtype).
static int dtype_size(const char *dt) {
    return !strcmp(dt, "F32") ? 4 : !strcmp(dt, "F16") || !strcmp(dt, "BF16") ? 2 : 0;
}

// count values of dtype size/kind at src to float32 at dst (the bytes may sit at any offset).
static void convert(const st_entry *e, const unsigned char *src, float *dst, size_t count) {
    if (e->dtype_size == 4) {
        memcpy(dst, src, count * sizeof(float));
        return;
    }
    for (size_t i = 0; i < count; i++) {
        uint16_t h = (uint16_t)(src[2 * i] | src[2 * i + 1] << 8);
        dst[i] = e->bf16 ? bf16_to_f32(h) : f16_to_f32(h);
    }
}

// Parses one header entry into t (name already set); the data section has data_len bytes.
static int parse_entry(const char *path, const cJSON *e, size_t data_len, st_entry *t, char *err, size_t n) {
    const char *nm = t->name;
    if (!cJSON_IsObject(e)) return errmsg(err, n, "%s: header entry for tensor '%s' is not an object", path, nm);

    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dtype)) return errmsg(err, n, "%s: tensor '%s' has no string dtype", path, nm);
    t->dtype_size = dtype_size(dtype->valuestring);
    t->bf16 = !strcmp(dtype->valuestring, "BF16");
    if (!t->dtype_size)
        return errmsg(err, n, "%s: unsupported dtype %s for tensor '%s' (F32, F16 or BF16)", path, dtype->valuestring, nm);

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsArray(shape)) return errmsg(err, n, "%s: tensor '%s' has no shape array", path, nm);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > ST_MAX_DIMS)
        return errmsg(err, n, "%s: tensor '%s' has ndim %d > %d (ST_MAX_DIMS)", path, nm, ndim, ST_MAX_DIMS);
    size_t numel = 1;
    int i = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) {
        uint64_t v;
        int r = json_uint(d, &v);
        if (r < 0) return errmsg(err, n, "%s: tensor '%s' has a negative dimension in shape", path, nm);
        if (r == 0) return errmsg(err, n, "%s: tensor '%s' shape entry %d is not an integer", path, nm, i);
        if (v != 0 && numel > SIZE_MAX / v) return errmsg(err, n, "%s: tensor '%s' shape product overflows", path, nm);
        numel *= (size_t)v;
        t->shape[i++] = (int64_t)v;
    }
    t->ndim = ndim;
    t->numel = numel;
    if (numel > SIZE_MAX / sizeof(float)) return errmsg(err, n, "%s: tensor '%s' shape product overflows", path, nm);

    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    uint64_t be[2];
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || json_uint(cJSON_GetArrayItem(offs, 0), &be[0]) != 1 ||
        json_uint(cJSON_GetArrayItem(offs, 1), &be[1]) != 1)
        return errmsg(err, n, "%s: tensor '%s' data_offsets must be two non-negative integers", path, nm);
    if (be[0] > be[1])
        return errmsg(err, n, "%s: tensor '%s' data_offsets begin %llu > end %llu", path, nm, (unsigned long long)be[0],
                    (unsigned long long)be[1]);
    if (be[1] > data_len)
        return errmsg(err, n, "%s: tensor '%s' data_offsets end %llu is beyond the data section (%zu bytes)", path, nm,
                    (unsigned long long)be[1], data_len);
    size_t nbytes = numel * (size_t)t->dtype_size;
    if (be[1] - be[0] != nbytes)
        return errmsg(err, n, "%s: tensor '%s' data_offsets span %llu bytes but shape needs %zu", path, nm,
                    (unsigned long long)(be[1] - be[0]), nbytes);
    t->begin = be[0];
    return 0;
}

static void free_entries(st_entry *e, int n_e, st_meta_kv *meta, int n_meta) {
    for (int i = 0; i < n_e; i++) free(e[i].name);
    for (int i = 0; i < n_meta; i++) {
        free(meta[i].key);
        free(meta[i].value);
    }
    free(e);
    free(meta);
}

static int parse_meta(const char *path, const cJSON *e, st_meta_kv **meta, int *n_meta, char *err, size_t n) {
    const char *dup;
    if (!cJSON_IsObject(e)) return errmsg(err, n, "%s: __metadata__ is not an object", path);
    if (find_duplicate_key(e, &dup)) return errmsg(err, n, "%s: out of memory", path);
    if (dup) return errmsg(err, n, "%s: duplicate __metadata__ key '%s'", path, dup);
    int nm = cJSON_GetArraySize(e);
    *meta = calloc((size_t)(nm ? nm : 1), sizeof **meta);
    if (!*meta) return errmsg(err, n, "%s: out of memory", path);
    const cJSON *kv;
    cJSON_ArrayForEach(kv, e) {
        if (!cJSON_IsString(kv)) return errmsg(err, n, "%s: __metadata__ value for '%s' is not a string", path, kv->string);
        st_meta_kv *m = &(*meta)[*n_meta];
        m->key = dup_str(kv->string);
        m->value = dup_str(kv->valuestring);
        (*n_meta)++; // count first so a half-filled entry is freed
        if (!m->key || !m->value) return errmsg(err, n, "%s: out of memory", path);
    }
    return 0;
}

// Parses the header JSON (nul-terminated) into the entries of s; the data section has data_len bytes.
static int parse_header(const char *path, const char *hdr, size_t data_len, st_stream *s, char *err, size_t n) {
    cJSON *root = cJSON_ParseWithOpts(hdr, NULL, 1);
    if (!root) return errmsg(err, n, "%s: header is not valid JSON", path);
    int rc = -1;
    const char *dup;
    if (!cJSON_IsObject(root)) {
        errmsg(err, n, "%s: header is not a JSON object", path);
        goto done;
    }
    if (find_duplicate_key(root, &dup)) {
        errmsg(err, n, "%s: out of memory", path);
        goto done;
    }
    if (dup) {
        errmsg(err, n, "%s: duplicate header entry '%s'", path, dup);
        goto done;
    }
    int n_t = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) {
        if (strcmp(e->string, "__metadata__")) n_t++;
    }
    s->entries = calloc((size_t)(n_t ? n_t : 1), sizeof *s->entries);
    if (!s->entries) {
        errmsg(err, n, "%s: out of memory", path);
        goto done;
    }
    cJSON_ArrayForEach(e, root) {
        if (!strcmp(e->string, "__metadata__")) {
            if (parse_meta(path, e, &s->meta, &s->n_meta, err, n)) goto done;
            continue;
        }
        st_entry *t = &s->entries[s->n_entries];
        t->name = dup_str(e->string);
        s->n_entries++;
        if (!t->name) {
            errmsg(err, n, "%s: out of memory", path);
            goto done;
        }
        if (parse_entry(path, e, data_len, t, err, n)) goto done;
    }
    rc = 0;
done:
    cJSON_Delete(root);
    return rc;
}

// The header of a file of len bytes whose first bytes (at least min(len, 8 + header)) are at
// head: its length checked, copied out NUL-terminated, and parsed into s. *data_off gets the start
// of the data section.
static int read_header(const char *path, const unsigned char *head, size_t have, size_t len, st_stream *s,
                       size_t *data_off, char *err, size_t n) {
    if (len < 8) return errmsg(err, n, "%s: file is %zu bytes, shorter than the 8-byte header length", path, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | head[i];
    if (hlen > ST_MAX_HEADER)
        return errmsg(err, n, "%s: header length %llu is absurd (> %u bytes)", path, (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > len - 8)
        return errmsg(err, n, "%s: header length %llu is larger than the file (%zu bytes)", path, (unsigned long long)hlen, len);
    if (have < 8 + hlen) return errmsg(err, n, "%s: short read of the header", path);
    // cJSON wants a nul-terminated string; an embedded NUL would silently cut the header short.
    if (memchr(head + 8, 0, (size_t)hlen)) return errmsg(err, n, "%s: header is not valid JSON (contains a NUL byte)", path);
    char *hdr = malloc((size_t)hlen + 1);
    if (!hdr) return errmsg(err, n, "%s: out of memory", path);
    memcpy(hdr, head + 8, (size_t)hlen);
    hdr[hlen] = '\0';
    *data_off = 8 + (size_t)hlen;
    int rc = parse_header(path, hdr, len - *data_off, s, err, n);
    free(hdr);
    return rc;
}

int st_read(const char *path, st_file *f, char *err, size_t n) {
    memset(f, 0, sizeof *f);
    if (!host_is_little_endian()) return errmsg(err, n, "%s: big-endian hosts are not supported", path);
    unsigned char *buf = NULL;
    size_t len = 0, data_off = 0;
    if (read_all(path, &buf, &len, err, n)) return -1;
    st_stream s = {0};
    st_file out = {0};
    int rc = read_header(path, buf, len, len, &s, &data_off, err, n);
    if (!rc) {
        out.tensors = calloc((size_t)(s.n_entries ? s.n_entries : 1), sizeof *out.tensors);
        if (!out.tensors) rc = errmsg(err, n, "%s: out of memory", path);
    }
    for (int i = 0; !rc && i < s.n_entries; i++) {
        st_entry *e = &s.entries[i];
        st_tensor *t = &out.tensors[out.n_tensors++];
        t->name = e->name;
        e->name = NULL;
        t->ndim = e->ndim;
        memcpy(t->shape, e->shape, sizeof t->shape);
        t->numel = e->numel;
        t->data = malloc(e->numel ? e->numel * sizeof(float) : 1);
        if (!t->data) rc = errmsg(err, n, "%s: out of memory for tensor '%s'", path, t->name);
        else convert(e, buf + data_off + e->begin, t->data, e->numel);
    }
    if (!rc) {
        out.meta = s.meta, out.n_meta = s.n_meta;
        s.meta = NULL, s.n_meta = 0;
        *f = out;
    } else {
        st_free(&out);
    }
    free_entries(s.entries, s.n_entries, s.meta, s.n_meta);
    free(buf);
    return rc;
}

// ----------------------------------------------------------------------------
// streaming

int st_open(st_stream *s, const char *path, char *err, size_t n) {
    memset(s, 0, sizeof *s);
    if (!host_is_little_endian()) return errmsg(err, n, "%s: big-endian hosts are not supported", path);
    size_t len, data_off = 0;
    FILE *fp = open_input_file(path, &len, err, n);
    if (!fp) return -1;
    unsigned char b8[8] = {0};
    size_t have = fread(b8, 1, 8, fp);
    unsigned char *head = NULL;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | b8[i];
    // only a header the checks in read_header would accept is read
    if (have == 8 && hlen <= ST_MAX_HEADER && hlen <= len - 8 && (head = malloc(8 + (size_t)hlen))) {
        memcpy(head, b8, 8);
        have += fread(head + 8, 1, (size_t)hlen, fp);
    }
    int rc = read_header(path, head ? head : b8, have, len, s, &data_off, err, n);
    free(head);
    if (rc) {
        fclose(fp);
        free_entries(s->entries, s->n_entries, s->meta, s->n_meta);
        memset(s, 0, sizeof *s);
        return -1;
    }
    s->f = fp;
    s->data_off = data_off;
    snprintf(s->path, sizeof s->path, "%s", path);
    return 0;
}

int st_stream_find(const st_stream *s, const char *name) {
    for (int i = 0; i < s->n_entries; i++)
        if (!strcmp(s->entries[i].name, name)) return i;
    return -1;
}

int st_stream_read(st_stream *s, int i, float *dst, char *err, size_t n) {
    if (i < 0 || i >= s->n_entries) return errmsg(err, n, "%s: no tensor %d", s->path, i);
    const st_entry *e = &s->entries[i];
    if (fseeko(s->f, (off_t)(s->data_off + e->begin), SEEK_SET))
        return errmsg(err, n, "%s: cannot seek to tensor '%s'", s->path, e->name);
    if (e->dtype_size == 4) {
        if (fread(dst, sizeof(float), e->numel, s->f) != e->numel)
            return errmsg(err, n, "%s: read error in tensor '%s'", s->path, e->name);
        return 0;
    }
    // 16-bit values: in chunks, converted in place of a small buffer
    enum { CHUNK = 1 << 20 };
    if (!s->buf && !(s->buf = malloc(2 * (size_t)CHUNK)))
        return errmsg(err, n, "%s: out of memory reading tensor '%s'", s->path, e->name);
    for (size_t k = 0; k < e->numel; k += CHUNK) {
        size_t m = e->numel - k < CHUNK ? e->numel - k : CHUNK;
        if (fread(s->buf, 2, m, s->f) != m) return errmsg(err, n, "%s: read error in tensor '%s'", s->path, e->name);
        convert(e, s->buf, dst + k, m);
    }
    return 0;
}

const char *st_stream_meta(const st_stream *s, const char *key) {
    for (int i = 0; i < s->n_meta; i++)
        if (!strcmp(s->meta[i].key, key)) return s->meta[i].value;
    return NULL;
}

void st_close(st_stream *s) {
    if (s->f) fclose(s->f);
    free(s->buf);
    free_entries(s->entries, s->n_entries, s->meta, s->n_meta);
    memset(s, 0, sizeof *s);
}

// ----------------------------------------------------------------------------
// writing

static int check_tensors(const st_tensor *ts, int nt, const st_meta_kv *meta, int nm, char *err, size_t n) {
    if (nt < 0 || nm < 0 || (nt > 0 && !ts) || (nm > 0 && !meta)) return errmsg(err, n, "invalid tensor/metadata list");
    for (int i = 0; i < nt; i++) {
        const st_tensor *t = &ts[i];
        if (!t->name) return errmsg(err, n, "tensor %d has no name", i);
        if (!strcmp(t->name, "__metadata__")) return errmsg(err, n, "tensor %d is named __metadata__", i);
        for (int j = 0; j < i; j++)
            if (!strcmp(ts[j].name, t->name)) return errmsg(err, n, "duplicate tensor name '%s'", t->name);
        if (t->ndim < 0 || t->ndim > ST_MAX_DIMS)
            return errmsg(err, n, "tensor '%s' has ndim %d (must be 0..%d)", t->name, t->ndim, ST_MAX_DIMS);
        size_t numel = 1;
        for (int d = 0; d < t->ndim; d++) {
            int64_t v = t->shape[d];
            if (v < 0 || (double)v > ST_MAX_EXACT)
                return errmsg(err, n, "tensor '%s' has invalid dimension %lld", t->name, (long long)v);
            if (v != 0 && numel > SIZE_MAX / sizeof(float) / (uint64_t)v)
                return errmsg(err, n, "tensor '%s' shape product overflows", t->name);
            numel *= (size_t)v;
        }
        if (numel != t->numel)
            return errmsg(err, n, "tensor '%s' numel %zu does not match its shape (%zu)", t->name, t->numel, numel);
        if (numel > 0 && !t->data) return errmsg(err, n, "tensor '%s' has no data", t->name);
    }
    for (int i = 0; i < nm; i++) {
        if (!meta[i].key || !meta[i].value) return errmsg(err, n, "metadata entry %d has a NULL key or value", i);
        for (int j = 0; j < i; j++)
            if (!strcmp(meta[j].key, meta[i].key)) return errmsg(err, n, "duplicate metadata key '%s'", meta[i].key);
    }
    return 0;
}

// Builds the unformatted JSON header; data_offsets follow the tensors in order.
static char *build_header(const st_tensor *ts, int nt, const st_meta_kv *meta, int nm) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    int ok = 1;
    if (nm > 0) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        ok = m != NULL;
        for (int i = 0; ok && i < nm; i++)
            ok = cJSON_AddStringToObject(m, meta[i].key, meta[i].value) != NULL;
    }
    uint64_t off = 0;
    for (int i = 0; ok && i < nt; i++) {
        const st_tensor *t = &ts[i];
        cJSON *e = cJSON_AddObjectToObject(root, t->name);
        cJSON *shape = e ? cJSON_AddArrayToObject(e, "shape") : NULL;
        cJSON *offs = e ? cJSON_AddArrayToObject(e, "data_offsets") : NULL;
        ok = e && shape && offs && cJSON_AddStringToObject(e, "dtype", "F32");
        for (int d = 0; ok && d < t->ndim; d++) {
            cJSON *v = cJSON_CreateNumber((double)t->shape[d]);
            ok = v && cJSON_AddItemToArray(shape, v);
        }
        uint64_t end = off + (uint64_t)t->numel * sizeof(float);
        cJSON *b = ok ? cJSON_CreateNumber((double)off) : NULL;
        ok = b && cJSON_AddItemToArray(offs, b);
        cJSON *en = ok ? cJSON_CreateNumber((double)end) : NULL;
        ok = en && cJSON_AddItemToArray(offs, en);
        off = end;
    }
    char *s = ok ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return s;
}

int st_write(const char *path, const st_tensor *ts, int nt, const st_meta_kv *meta, int nm, char *err, size_t n) {
    if (!host_is_little_endian()) return errmsg(err, n, "%s: big-endian hosts are not supported", path);
    if (check_tensors(ts, nt, meta, nm, err, n)) {
        char why[256];
        snprintf(why, sizeof why, "%s", err && n ? err : "");
        return errmsg(err, n, "%s: cannot write: %s", path, why);
    }
    uint64_t total = 0;
    for (int i = 0; i < nt; i++)
        total += (uint64_t)ts[i].numel * sizeof(float);
    if ((double)total > ST_MAX_EXACT) return errmsg(err, n, "%s: cannot write: data too large", path);

    char *json = build_header(ts, nt, meta, nm);
    if (!json) return errmsg(err, n, "%s: out of memory building the header", path);
    // Pad with spaces (valid JSON whitespace) so the data section starts 8-byte aligned.
    size_t jlen = strlen(json), hlen = (jlen + 7) / 8 * 8;
    char *hdr = malloc(8 + hlen);
    if (!hdr) {
        free(json);
        return errmsg(err, n, "%s: out of memory", path);
    }
    for (int i = 0; i < 8; i++)
        hdr[i] = (char)(((uint64_t)hlen >> (8 * i)) & 0xff);
    memcpy(hdr + 8, json, jlen);
    memset(hdr + 8 + jlen, ' ', hlen - jlen);
    free(json);

    out_file o;
    int rc = out_open(&o, path, err, n);
    int ok = !rc && fwrite(hdr, 1, 8 + hlen, o.f) == 8 + hlen;
    for (int i = 0; ok && i < nt; i++)
        if (ts[i].numel) ok = fwrite(ts[i].data, sizeof(float), ts[i].numel, o.f) == ts[i].numel;
    if (ok) ok = fflush(o.f) == 0;
    if (!rc && !ok) {
        errmsg(err, n, "%s: error writing %s: %s", path, o.tmp[0] ? o.tmp : path, strerror(errno));
        out_abort(&o);
        rc = -1;
    } else if (!rc) {
        rc = out_close(&o, err, n);
    }
    free(hdr);
    return rc;
}
