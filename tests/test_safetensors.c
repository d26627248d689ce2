// test_safetensors.c: round trips and every malformed-file case of the safetensors reader/writer.
#include "io/safetensors.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h> // after the standard headers it relies on

// ----------------------------------------------------------------------------
// helpers

// Writes len bytes to a fresh temp file; the caller unlinks path.
static void write_temp(const void *bytes, size_t len, char path[64]) {
    strcpy(path, "/tmp/mtac_st_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
    close(fd);
}

// Builds a safetensors file from a raw length field, header text and data bytes.
static size_t build_raw(unsigned char *out, uint64_t hlen_field, const char *json, size_t jlen, const void *data,
                        size_t dlen) {
    for (int i = 0; i < 8; i++)
        out[i] = (unsigned char)(hlen_field >> (8 * i));
    memcpy(out + 8, json, jlen);
    if (dlen) memcpy(out + 8 + jlen, data, dlen);
    return 8 + jlen + dlen;
}

// Reads a file made of json + dlen data bytes, expects failure with want in the message.
static void expect_fail_bytes(const void *bytes, size_t len, const char *want) {
    char path[64], err[512] = "";
    write_temp(bytes, len, path);
    st_file f;
    memset(&f, 0xab, sizeof f); // st_read must zero it even on failure
    int rc = st_read(path, &f, err, sizeof err);
    if (rc != -1 || !strstr(err, want) || !strstr(err, path))
        print_error("rc=%d err='%s' (wanted '%s')\n", rc, err, want);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err, want));
    assert_non_null(strstr(err, path)); // the message names the file
    assert_null(f.tensors);
    assert_null(f.meta);
    assert_int_equal(f.n_tensors, 0);
    assert_int_equal(f.n_meta, 0);
    // the streaming reader makes the same checks from the header and the file's size
    st_stream s;
    char err2[512] = "";
    rc = st_open(&s, path, err2, sizeof err2);
    if (rc != -1 || strcmp(err, err2)) print_error("st_open: rc=%d err='%s' (st_read: '%s')\n", rc, err2, err);
    assert_int_equal(rc, -1);
    assert_string_equal(err, err2);
    assert_null(s.entries);
    assert_null(s.f);
    unlink(path);
}

static void expect_fail_json(const char *json, size_t dlen, const char *want) {
    size_t jlen = strlen(json);
    unsigned char *buf = calloc(8 + jlen + dlen + 1, 1);
    assert_non_null(buf);
    unsigned char *zeros = calloc(dlen + 1, 1);
    size_t len = build_raw(buf, jlen, json, jlen, zeros, dlen);
    expect_fail_bytes(buf, len, want);
    free(zeros);
    free(buf);
}

static void tmp_name(char path[64]) {
    // A unique name to write to: make a temp file and remove it so st_write creates it.
    write_temp("", 0, path);
    unlink(path);
}

static unsigned char *slurp(const char *path, size_t *len) {
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)n + 1);
    assert_int_equal(fread(b, 1, (size_t)n, fp), (size_t)n);
    fclose(fp);
    *len = (size_t)n;
    return b;
}

// A small valid set: a 4-d tensor, a scalar, an empty tensor and a vector last (so truncation always
// cuts real data).
static float q_data[2 * 3 * 4], s_data[1] = {3.5f}, b_data[5];
static st_tensor good[4];
static const st_meta_kv good_meta[2] = {{"layer_id", "3"}, {"depth_scale", "1"}};

static void init_good(void) {
    for (int i = 0; i < 24; i++)
        q_data[i] = (float)i * 0.25f - 1.0f;
    for (int i = 0; i < 5; i++)
        b_data[i] = -(float)i;
    good[0] = (st_tensor){.name = "q", .ndim = 4, .shape = {1, 2, 3, 4}, .numel = 24, .data = q_data};
    good[1] = (st_tensor){.name = "scalar", .ndim = 0, .numel = 1, .data = s_data};
    good[2] = (st_tensor){.name = "empty", .ndim = 2, .shape = {3, 0}, .numel = 0, .data = NULL};
    good[3] = (st_tensor){.name = "gate_w", .ndim = 1, .shape = {5}, .numel = 5, .data = b_data};
}

static void write_good(const char *path) {
    char err[256] = "";
    init_good();
    int rc = st_write(path, good, 4, good_meta, 2, err, sizeof err);
    if (rc) print_error("%s\n", err);
    assert_int_equal(rc, 0);
}

static void check_good(const char *path) {
    char err[256] = "";
    st_file f;
    int rc = st_read(path, &f, err, sizeof err);
    if (rc) print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(f.n_tensors, 4);
    assert_int_equal(f.n_meta, 2);
    for (int i = 0; i < 4; i++) {
        const st_tensor *t = st_find(&f, good[i].name);
        assert_non_null(t);
        assert_ptr_equal(t, &f.tensors[i]); // written and read in the given order
        assert_int_equal(t->ndim, good[i].ndim);
        assert_int_equal(t->numel, good[i].numel);
        for (int d = 0; d < t->ndim; d++)
            assert_int_equal(t->shape[d], good[i].shape[d]);
        if (t->numel) assert_memory_equal(t->data, good[i].data, t->numel * sizeof(float));
    }
    assert_null(st_find(&f, "nope"));
    assert_string_equal(st_meta_get(&f, "layer_id"), "3");
    assert_string_equal(st_meta_get(&f, "depth_scale"), "1");
    assert_null(st_meta_get(&f, "nope"));
    st_free(&f);
    st_free(&f); // zeroed by the first call, so a no-op
}

// ----------------------------------------------------------------------------
// round trips

static void test_round_trip(void **state) {
    (void)state;
    char path[64];
    tmp_name(path);
    write_good(path);
    check_good(path);

    // Data section starts on a multiple of 8; the temp file is gone.
    size_t len;
    unsigned char *b = slurp(path, &len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | b[i];
    assert_int_equal((8 + hlen) % 8, 0);
    assert_int_equal(len, 8 + hlen + (24 + 1 + 0 + 5) * 4);
    free(b);
    char tmp[80];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_not_equal(access(tmp, F_OK), 0);
    unlink(path);
}

// F16 and BF16 tensors read as float32, whole and streamed: 1, -2, 0.5 and the smallest
// subnormal half 2^-24 (F16); 1, -2, 0.5 and 2^-133 (a subnormal bfloat16).
static void test_half_dtypes(void **state) {
    (void)state;
    const char *j = "{\"h\":{\"dtype\":\"F16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[8,16]},"
                    "\"f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]}}";
    const unsigned char data[20] = {0x00, 0x3c, 0x00, 0xc0, 0x00, 0x38, 0x01, 0x00,   // F16
                                    0x80, 0x3f, 0x00, 0xc0, 0x00, 0x3f, 0x01, 0x00,   // BF16
                                    0x00, 0x00, 0x40, 0x40};                          // 3.0f
    size_t jlen = strlen(j);
    unsigned char buf[512];
    size_t len = build_raw(buf, jlen, j, jlen, data, sizeof data);
    char path[64], err[512] = "";
    write_temp(buf, len, path);
    const float want_h[4] = {1.0f, -2.0f, 0.5f, 0x1p-24f}, want_b[4] = {1.0f, -2.0f, 0.5f, 0x1p-133f};
    st_file f;
    assert_int_equal(st_read(path, &f, err, sizeof err), 0);
    assert_memory_equal(st_find(&f, "h")->data, want_h, sizeof want_h);
    assert_memory_equal(st_find(&f, "b")->data, want_b, sizeof want_b);
    assert_true(st_find(&f, "f")->data[0] == 3.0f);
    st_free(&f);
    st_stream s;
    float x[4];
    assert_int_equal(st_open(&s, path, err, sizeof err), 0);
    assert_int_equal(s.n_entries, 3);
    assert_int_equal(st_stream_find(&s, "nope"), -1);
    assert_int_equal(st_stream_read(&s, st_stream_find(&s, "b"), x, err, sizeof err), 0);
    assert_memory_equal(x, want_b, sizeof want_b);
    assert_int_equal(st_stream_read(&s, st_stream_find(&s, "h"), x, err, sizeof err), 0);
    assert_memory_equal(x, want_h, sizeof want_h);
    assert_int_equal(st_stream_read(&s, st_stream_find(&s, "f"), x, err, sizeof err), 0);
    assert_true(x[0] == 3.0f);
    assert_int_equal(s.entries[st_stream_find(&s, "h")].ndim, 2);
    st_close(&s);
    unlink(path);
}

static void test_empty_file_set(void **state) {
    (void)state;
    char path[64], err[256] = "";
    tmp_name(path);
    assert_int_equal(st_write(path, NULL, 0, NULL, 0, err, sizeof err), 0);
    st_file f;
    assert_int_equal(st_read(path, &f, err, sizeof err), 0);
    assert_int_equal(f.n_tensors, 0);
    assert_int_equal(f.n_meta, 0);
    st_free(&f);
    unlink(path);
}

static void test_unaligned_offsets(void **state) {
    (void)state;
    // A hand-made file whose tensor starts at an odd offset: must be copied, not cast.
    const char *j = "{\"pad\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                    "\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[3,11]}}";
    unsigned char data[11] = {0};
    float v[2] = {1.5f, -2.0f};
    memcpy(data + 3, v, 8);
    unsigned char buf[256];
    size_t len = build_raw(buf, strlen(j), j, strlen(j), data, sizeof data);
    char path[64], err[256] = "";
    write_temp(buf, len, path);
    st_file f;
    assert_int_equal(st_read(path, &f, err, sizeof err), 0);
    const st_tensor *x = st_find(&f, "x");
    assert_non_null(x);
    assert_memory_equal(x->data, v, sizeof v);
    st_free(&f);
    unlink(path);
}

static void test_free_zeroed(void **state) {
    (void)state;
    st_file f = {0};
    st_free(&f);
    st_free(&f);
    assert_null(f.tensors);
}

// ----------------------------------------------------------------------------
// malformed files

static void test_missing_file(void **state) {
    (void)state;
    char err[256] = "";
    st_file f;
    assert_int_equal(st_read("/tmp/mtac_no_such_dir/x.safetensors", &f, err, sizeof err), -1);
    assert_non_null(strstr(err, "No such file or directory"));
    assert_non_null(strstr(err, "/tmp/mtac_no_such_dir/x.safetensors"));
    assert_int_equal(f.n_tensors, 0);
}

static void test_short_file(void **state) {
    (void)state;
    expect_fail_bytes("\x02\0\0\0\0", 5, "shorter than");
}

static void test_header_larger_than_file(void **state) {
    (void)state;
    unsigned char buf[64];
    size_t len = build_raw(buf, 40, "{}", 2, NULL, 0);
    expect_fail_bytes(buf, len, "larger than the file");
}

static void test_header_absurd(void **state) {
    (void)state;
    unsigned char buf[64];
    size_t len = build_raw(buf, 200u * 1000u * 1000u, "{}", 2, NULL, 0);
    expect_fail_bytes(buf, len, "absurd");
    len = build_raw(buf, UINT64_MAX, "{}", 2, NULL, 0);
    expect_fail_bytes(buf, len, "absurd");
}

static void test_embedded_nul(void **state) {
    (void)state;
    unsigned char buf[64];
    size_t len = build_raw(buf, 4, "{}\0 ", 4, NULL, 0);
    expect_fail_bytes(buf, len, "not valid JSON");
}

// A header the reader refuses (with dlen zero bytes of data after it) and what the error says.
typedef struct {
    const char *json;
    size_t dlen;
    const char *needle;
} bad_header;

#define Q_F32(rest) "{\"q\":{\"dtype\":\"F32\"," rest "}}"  // tensor q of float32: the rest of its entry
static const char *const BAD_OFFSETS = "data_offsets must be two non-negative integers";

static const bad_header bad_headers[] = {
    {"{\"q\":", 0, "not valid JSON"},
    {"{} trailing", 0, "not valid JSON"},
    {"", 0, "not valid JSON"},
    {"[1,2]", 0, "not a JSON object"},
    {"\"str\"", 0, "not a JSON object"},
    {"{\"q\":5}", 0, "tensor 'q' is not an object"},
    // dtype
    {"{\"q\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype"},
    {"{\"q\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype"},
    {"{\"q\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
     "unsupported dtype F64 for tensor 'q' (F32, F16 or BF16)"},
    // a 16-bit dtype needs 2 bytes a value, not 4
    {"{\"q\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "span 8 bytes but shape needs 4"},
    // shape
    {Q_F32("\"data_offsets\":[0,4]"), 4, "no shape array"},
    {Q_F32("\"shape\":4,\"data_offsets\":[0,4]"), 4, "no shape array"},
    {Q_F32("\"shape\":[-1],\"data_offsets\":[0,4]"), 4, "negative dimension"},
    {Q_F32("\"shape\":[1.5],\"data_offsets\":[0,4]"), 4, "not an integer"},
    {Q_F32("\"shape\":[\"1\"],\"data_offsets\":[0,4]"), 4, "not an integer"},
    {Q_F32("\"shape\":[1e16],\"data_offsets\":[0,4]"), 4, "not an integer"},
    {Q_F32("\"shape\":[1e400],\"data_offsets\":[0,4]"), 4, "not an integer"},
    {Q_F32("\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]"), 4, "ndim 9"},
    {Q_F32("\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,4]"), 4, "overflows"},
    // fits in size_t as a count, but not as a byte count
    {Q_F32("\"shape\":[4294967296,1073741824],\"data_offsets\":[0,4]"), 4, "overflows"},
    // data_offsets
    {Q_F32("\"shape\":[1]"), 8, BAD_OFFSETS},
    {Q_F32("\"shape\":[1],\"data_offsets\":4"), 8, BAD_OFFSETS},
    {Q_F32("\"shape\":[1],\"data_offsets\":[4]"), 8, BAD_OFFSETS},
    {Q_F32("\"shape\":[1],\"data_offsets\":[0,4,8]"), 8, BAD_OFFSETS},
    {Q_F32("\"shape\":[1],\"data_offsets\":[-4,0]"), 8, BAD_OFFSETS},
    {Q_F32("\"shape\":[1],\"data_offsets\":[0.5,4.5]"), 8, BAD_OFFSETS},
    {Q_F32("\"shape\":[1],\"data_offsets\":[\"0\",\"4\"]"), 8, BAD_OFFSETS},
    {Q_F32("\"shape\":[1],\"data_offsets\":[0,1e17]"), 8, BAD_OFFSETS},
    {Q_F32("\"shape\":[1],\"data_offsets\":[8,4]"), 8, "begin 8 > end 4"},
    {Q_F32("\"shape\":[2],\"data_offsets\":[0,8]"), 4, "beyond the data section"},
    {Q_F32("\"shape\":[2],\"data_offsets\":[0,4]"), 8, "span 4 bytes"},
    {Q_F32("\"shape\":[],\"data_offsets\":[0,0]"), 8, "span 0 bytes"},
    // names and metadata
    {"{\"q\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"q\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
     8, "duplicate header entry 'q'"},
    {"{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate header entry '__metadata__'"},
    {"{\"__metadata__\":{\"layer_id\":\"1\",\"x\":\"y\",\"layer_id\":\"2\"}}", 0, "duplicate __metadata__ key 'layer_id'"},
    {"{\"__metadata__\":[\"a\"]}", 0, "__metadata__ is not an object"},
    {"{\"__metadata__\":{\"layer_id\":3}}", 0, "__metadata__ value for 'layer_id' is not a string"},
    {"{\"__metadata__\":{\"a\":\"b\",\"c\":{}}}", 0, "__metadata__ value for 'c' is not a string"},
    // a good tensor followed by a bad one: the first must be freed (ASan checks the leak)
    {"{\"__metadata__\":{\"a\":\"b\"},\"ok\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"q\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[4,5]}}",
     5, "unsupported dtype I8"},
};

static void test_bad_headers(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof bad_headers / sizeof *bad_headers; i++)
        expect_fail_json(bad_headers[i].json, bad_headers[i].dlen, bad_headers[i].needle);
}

static void test_not_regular_file(void **state) {
    (void)state;
    // A directory opens fine on Linux; it must be refused before its bogus size is trusted.
    char dir[64] = "/tmp/mtac_st_dir_XXXXXX", err[256] = "";
    assert_non_null(mkdtemp(dir));
    st_file f;
    assert_int_equal(st_read(dir, &f, err, sizeof err), -1);
    assert_non_null(strstr(err, dir));
    assert_non_null(strstr(err, "not a regular file"));
    assert_null(f.tensors);
    assert_int_equal(rmdir(dir), 0);
}

static void test_truncated(void **state) {
    (void)state;
    char path[64];
    tmp_name(path);
    write_good(path);
    size_t len;
    unsigned char *b = slurp(path, &len);
    for (size_t cut = 0; cut < len; cut++) {
        char p2[64], err[512] = "";
        write_temp(b, cut, p2);
        st_file f;
        int rc = st_read(p2, &f, err, sizeof err);
        if (rc != -1) print_error("cut at %zu of %zu was accepted\n", cut, len);
        assert_int_equal(rc, -1);
        assert_non_null(strstr(err, p2));
        assert_int_equal(f.n_tensors, 0);
        assert_null(f.tensors);
        unlink(p2);
    }
    free(b);
    unlink(path);
}

// ----------------------------------------------------------------------------
// write failures

static void test_write_missing_dir(void **state) {
    (void)state;
    init_good();
    char err[512] = "";
    const char *path = "/tmp/mtac_no_such_dir/sub/out.safetensors";
    assert_int_equal(st_write(path, good, 4, good_meta, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "No such file or directory"));
}

static void test_write_invalid_tensors(void **state) {
    (void)state;
    char path[64], err[512];
    tmp_name(path);
    float x[2] = {1, 2};
    st_tensor t = {.name = "x", .ndim = 1, .shape = {2}, .numel = 3, .data = x};
    assert_int_equal(st_write(path, &t, 1, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "does not match its shape"));
    t.numel = 2, t.name = NULL;
    assert_int_equal(st_write(path, &t, 1, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "no name"));
    t.name = "x", t.data = NULL;
    assert_int_equal(st_write(path, &t, 1, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "no data"));
    t.data = x, t.shape[0] = -2;
    assert_int_equal(st_write(path, &t, 1, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "invalid dimension"));
    t.shape[0] = 2, t.ndim = ST_MAX_DIMS + 1;
    assert_int_equal(st_write(path, &t, 1, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "ndim 9"));
    t.ndim = 1;
    st_tensor two[2] = {t, t};
    assert_int_equal(st_write(path, two, 2, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, "duplicate tensor name 'x'"));
    const st_meta_kv meta[2] = {{"layer_id", "1"}, {"layer_id", "2"}};
    assert_int_equal(st_write(path, &t, 1, meta, 2, err, sizeof err), -1);
    assert_non_null(strstr(err, "duplicate metadata key 'layer_id'"));
    assert_non_null(strstr(err, path));
    assert_int_not_equal(access(path, F_OK), 0); // nothing was created
}

static void test_failed_write_keeps_old_file(void **state) {
    (void)state;
    char path[64], tmp[80], err[512] = "";
    tmp_name(path);
    write_good(path);

    // 1. Invalid input: rejected before anything is written.
    float x[1] = {9};
    st_tensor bad = {.name = "x", .ndim = 1, .shape = {1}, .numel = 2, .data = x};
    assert_int_equal(st_write(path, &bad, 1, NULL, 0, err, sizeof err), -1);
    check_good(path);

    // 2. The temp file cannot be created (a directory is in the way): the old file survives
    //    and the directory (not ours) is left alone.
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(mkdir(tmp, 0700), 0);
    bad.numel = 1;
    assert_int_equal(st_write(path, &bad, 1, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, path));
    check_good(path);
    assert_int_equal(rmdir(tmp), 0);

    // 3. Once it can, the write replaces the file.
    assert_int_equal(st_write(path, &bad, 1, NULL, 0, err, sizeof err), 0);
    st_file f;
    assert_int_equal(st_read(path, &f, err, sizeof err), 0);
    assert_int_equal(f.n_tensors, 1);
    st_free(&f);
    unlink(path);
}

static void test_write_error_keeps_old_file(void **state) {
    (void)state;
    // The temp path is a symlink to /dev/full, so the data cannot be written (ENOSPC): the
    // error is reported, the temp path removed, and the old file left as it was.
    if (access("/dev/full", W_OK) != 0) skip();
    char path[64], tmp[80], err[512] = "";
    tmp_name(path);
    write_good(path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(symlink("/dev/full", tmp), 0);
    float x[1] = {9};
    st_tensor t = {.name = "x", .ndim = 1, .shape = {1}, .numel = 1, .data = x};
    assert_int_equal(st_write(path, &t, 1, NULL, 0, err, sizeof err), -1);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "error writing"));
    struct stat sb;
    assert_int_not_equal(lstat(tmp, &sb), 0); // the temp path is gone
    check_good(path);
    unlink(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_empty_file_set),
        cmocka_unit_test(test_half_dtypes),
        cmocka_unit_test(test_unaligned_offsets),
        cmocka_unit_test(test_free_zeroed),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_short_file),
        cmocka_unit_test(test_header_larger_than_file),
        cmocka_unit_test(test_header_absurd),
        cmocka_unit_test(test_embedded_nul),
        cmocka_unit_test(test_bad_headers),
        cmocka_unit_test(test_not_regular_file),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_write_missing_dir),
        cmocka_unit_test(test_write_invalid_tensors),
        cmocka_unit_test(test_failed_write_keeps_old_file),
        cmocka_unit_test(test_write_error_keeps_old_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
