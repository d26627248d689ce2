// test_checkpoint.c: training checkpoints (docs/checkpoints.md). A resume reads the training state
// from the metadata only when every value is whole and in range (step, adam_t, data_state,
// best_val_loss); the checksum covers the metadata; version-1 files (checksum over the tensors
// only) still load; no checkpoint holding a NaN or infinite value is written or loaded; a run whose
// loss, gradients or weights stop being finite stops with TRAIN_NONFINITE and saves nothing.
// A run flushes subnormal numbers to zero on every thread, OpenBLAS's included.
#include "data/shard.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"
#include "train/train.h"
#include "util/fpenv.h"

#include <cblas.h>
#include <omp.h>

#include <inttypes.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64], data[128], run[128], ckpt[192], good[192];

static const char *MODEL_JSON = "{\"dim\": 16, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 259, \"hidden_dim\": 32}";

// A tiny run: steps steps of 2 x 16 tokens, constant lr, no evaluation until the end.
static void config(train_config *c, int steps) {
    char err[256];
    train_config_default(c);
    assert_int_equal(model_config_from_json(MODEL_JSON, &c->model, err, sizeof err), 0);
    c->have_model = 1;
    c->steps = steps, c->batch_size = 2, c->seq_len = 16, c->warmup = 0, c->eval_every = 0, c->eval_batches = 1;
    c->save_every = 0, c->log_every = 1000;
    snprintf(c->schedule, sizeof c->schedule, "constant");
    snprintf(c->data, sizeof c->data, "%s", data);
    snprintf(c->out, sizeof c->out, "%s", run);
    assert_int_equal(train_config_finish(c, err, sizeof err), 0);
}

static void copy_file(const char *from, const char *to) {
    FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
    assert_non_null(a);
    assert_non_null(b);
    char buf[4096];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, a)) > 0) assert_int_equal(fwrite(buf, 1, k, b), k);
    fclose(a);
    assert_int_equal(fclose(b), 0);
}

// The whole file, malloc'd, its size in *len.
static unsigned char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    rewind(f);
    unsigned char *b = malloc(*len + 1);
    assert_int_equal(fread(b, 1, *len, f), *len);
    fclose(f);
    return b;
}

// The checkpoint reset to the good one: its bytes (to free), their count in *len, to see whether a
// run or a refused save changes it.
static unsigned char *reset_ckpt(size_t *len) {
    copy_file(good, ckpt);
    return slurp(ckpt, len);
}

// Whether the checkpoint on disk still holds the len bytes `before`.
static int ckpt_holds(const unsigned char *before, size_t len) {
    size_t n;
    unsigned char *now = slurp(ckpt, &n);
    const int same = n == len && !memcmp(before, now, len);
    free(now);
    return same;
}

// A model of c's configuration and zeroed Adam moments of its size (*mo, *v: to free).
static model *model_with_moments(const train_config *c, float **mo, float **v) {
    char err[256];
    model *m = model_create(&c->model, err, sizeof err);
    assert_non_null(m);
    *mo = calloc(model_num_params(m), sizeof(float));
    *v = calloc(model_num_params(m), sizeof(float));
    assert_true(*mo && *v);
    return m;
}

// The step of the checkpoint, loaded into a model of c's configuration (which fails the test when
// it does not load: a NaN, a bad checksum).
static int ckpt_step(const train_config *c) {
    char err[512];
    float *mo, *v;
    model *m = model_with_moments(c, &mo, &v);
    st_file f;
    if (checkpoint_load(ckpt, m, mo, v, &f, err, sizeof err)) fail_msg("%s", err);
    const int step = atoi(st_meta_get(&f, "step"));
    st_free(&f);
    free(mo), free(v);
    model_free(m);
    return step;
}

// Shards and a 2-step run whose checkpoint is kept as good.safetensors.
static int setup(void **s) {
    (void)s;
    snprintf(dir, sizeof dir, "/tmp/mtac-ckpt-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    snprintf(data, sizeof data, "%s/data", dir);
    snprintf(run, sizeof run, "%s/run", dir);
    snprintf(ckpt, sizeof ckpt, "%s/checkpoint.safetensors", run);
    snprintf(good, sizeof good, "%s/good.safetensors", dir);
    char path[256], err[256];
    snprintf(path, sizeof path, "mkdir -p %s", data);
    if (system(path)) return -1;
    enum { N = 3000 };
    uint32_t tok[N];
    for (size_t i = 0; i < N; i++) tok[i] = (uint32_t)(i * 7919 % 256);
    snprintf(path, sizeof path, "%s/train.bin", data);
    if (shard_write(path, tok, N, SHARD_U16, err, sizeof err)) return -1;
    snprintf(path, sizeof path, "%s/val.bin", data);
    if (shard_write(path, tok, N / 2, SHARD_U16, err, sizeof err)) return -1;
    train_config c;
    config(&c, 2);
    if (train_run(&c, 0, NULL, err, sizeof err)) return -1;
    copy_file(ckpt, good);
    return 0;
}

static int teardown(void **s) {
    (void)s;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) ? -1 : 0;
}

// Resumes the run for one more step: its return code, message in err.
static int resume(char *err, size_t n) {
    train_config c;
    config(&c, 3);
    return train_run(&c, 1, NULL, err, n);
}

// Rewrites the run's checkpoint from good.safetensors through checkpoint_save (so its checksum is
// valid) with metadata key set to value (NULL: removed).
static void rewrite_meta(const char *key, const char *value) {
    train_config c;
    config(&c, 3);
    char err[512];
    model *m = model_create(&c.model, err, sizeof err);
    assert_non_null(m);
    const size_t P = model_num_params(m);
    float *mo = malloc(P * sizeof(float)), *v = malloc(P * sizeof(float));
    st_file f;
    assert_int_equal(checkpoint_load(good, m, mo, v, &f, err, sizeof err), 0);
    st_meta_kv kv[16];
    int nkv = 0;
    for (int i = 0; i < f.n_meta; i++) {
        const char *k = f.meta[i].key;
        if (!strcmp(k, "checksum") || !strcmp(k, "checkpoint_version") || !strcmp(k, key)) continue;
        kv[nkv++] = f.meta[i];
    }
    if (value) kv[nkv].key = (char *)key, kv[nkv++].value = (char *)value;
    assert_int_equal(checkpoint_save(ckpt, m, mo, v, kv, nkv, err, sizeof err), 0);
    st_free(&f);
    free(mo), free(v);
    model_free(m);
}

static void expect_refused(const char *key, const char *value, const char *needle) {
    rewrite_meta(key, value);
    char err[1024] = "";
    assert_int_equal(resume(err, sizeof err), TRAIN_ERROR);
    if (!strstr(err, needle) || !strstr(err, ckpt)) fail_msg("%s = '%s': message '%s' lacks '%s'", key, value, err, needle);
}

static void test_metadata_checked(void **s) {
    (void)s;
    char err[1024];
    rewrite_meta("step", "2");  // as written: resumes
    assert_int_equal(resume(err, sizeof err), 0);
    rewrite_meta("best_val_loss", "inf");  // no evaluation yet
    assert_int_equal(resume(err, sizeof err), 0);

    expect_refused("step", "-5", "'step'");
    expect_refused("step", "2147483647", "'step'");  // step + 1 would overflow
    expect_refused("step", "99999999999999999999", "'step'");
    expect_refused("step", "2x", "'step'");
    expect_refused("step", " 2", "'step'");
    expect_refused("step", "+2", "'step'");
    expect_refused("step", "", "'step'");
    expect_refused("step", NULL, "'step'");
    expect_refused("adam_t", "-1", "'adam_t'");  // would divide by 1 - beta^0 = 0
    expect_refused("adam_t", "3", "must be equal");
    expect_refused("data_state", "zz", "'data_state'");
    expect_refused("data_state", NULL, "'data_state'");
    expect_refused("best_val_loss", "nan", "'best_val_loss'");
    expect_refused("best_val_loss", "-1", "'best_val_loss'");
    expect_refused("best_val_loss", "1.5e", "'best_val_loss'");
}

// FNV-1a 64 as docs/checkpoints.md defines it.
static uint64_t fnv1a(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001B3ULL;
    return h;
}

// Writes the good checkpoint's tensors (with value at index at of tensor bad_name, if given) as
// a version-1 file: no checkpoint_version key, the checksum over the tensors alone.
static void write_v1(const char *bad_name, size_t at, float value) {
    st_file f;
    char err[512];
    assert_int_equal(st_read(good, &f, err, sizeof err), 0);
    train_config c;
    config(&c, 3);
    model *m = model_create(&c.model, err, sizeof err);
    int nt;
    const model_tensor *mt = model_tensors(m, &nt);
    st_tensor *ts = calloc((size_t)nt * 3, sizeof *ts);
    uint64_t h = 0xcbf29ce484222325ULL;
    const char *prefix[3] = {"", "optim.m.", "optim.v."};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < nt; i++) {
            char name[128];
            snprintf(name, sizeof name, "%s%s", prefix[k], mt[i].name);
            const st_tensor *t = st_find(&f, name);
            assert_non_null(t);
            ts[k * nt + i] = *t;
            if (bad_name && !strcmp(name, bad_name)) t->data[at] = value;
            h = fnv1a(h, t->data, t->numel * sizeof(float));
        }
    char hex[20];
    snprintf(hex, sizeof hex, "%016" PRIx64, h);
    st_meta_kv kv[16];
    int nkv = 0;
    for (int i = 0; i < f.n_meta; i++)
        if (strcmp(f.meta[i].key, "checksum") && strcmp(f.meta[i].key, "checkpoint_version")) kv[nkv++] = f.meta[i];
    kv[nkv].key = "checksum", kv[nkv++].value = hex;
    assert_int_equal(st_write(ckpt, ts, nt * 3, kv, nkv, err, sizeof err), 0);
    free(ts);
    st_free(&f);
    model_free(m);
}

// An older mtac's checkpoint still resumes.
static void test_version1_loads(void **s) {
    (void)s;
    char err[1024];
    write_v1(NULL, 0, 0);
    assert_int_equal(resume(err, sizeof err), 0);
}

// A whole file (its checksum right) with a NaN, an infinity or a negative second moment is refused,
// naming the tensor and the index.
static void test_nonfinite_load(void **s) {
    (void)s;
    char err[1024];
    const struct {
        const char *name;
        float value;
        const char *needle;
    } bad[] = {{"tok_embeddings.weight", NAN, "nan"},
               {"layers.0.attention.wk.weight", INFINITY, "inf"},
               {"optim.m.norm.weight", -INFINITY, "-inf"},
               {"optim.v.layers.0.feed_forward.w2.weight", -1.0f, "cannot be negative"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_v1(bad[i].name, 5, bad[i].value);
        assert_int_equal(resume(err, sizeof err), TRAIN_ERROR);
        if (!strstr(err, bad[i].name) || !strstr(err, bad[i].needle) || !strstr(err, "index 5"))
            fail_msg("%s: message '%s'", bad[i].name, err);
    }
}

// Version 2 checksums the metadata: a changed data position is a corrupt file.
static void test_checksum_covers_metadata(void **s) {
    (void)s;
    st_file f;
    char err[1024];
    assert_int_equal(st_read(good, &f, err, sizeof err), 0);
    assert_string_equal(st_meta_get(&f, "checkpoint_version"), "2");
    for (int i = 0; i < f.n_meta; i++)
        if (!strcmp(f.meta[i].key, "data_state")) f.meta[i].value[0] = f.meta[i].value[0] == '0' ? '1' : '0';
    assert_int_equal(st_write(ckpt, f.tensors, f.n_tensors, f.meta, f.n_meta, err, sizeof err), 0);
    st_free(&f);
    assert_int_equal(resume(err, sizeof err), TRAIN_ERROR);
    assert_non_null(strstr(err, "checksum mismatch"));

    assert_int_equal(st_read(good, &f, err, sizeof err), 0);
    for (int i = 0; i < f.n_meta; i++)
        if (!strcmp(f.meta[i].key, "checkpoint_version")) f.meta[i].value[0] = '3';
    assert_int_equal(st_write(ckpt, f.tensors, f.n_tensors, f.meta, f.n_meta, err, sizeof err), 0);
    st_free(&f);
    assert_int_equal(resume(err, sizeof err), TRAIN_ERROR);
    assert_non_null(strstr(err, "checkpoint_version '3'"));
}

// checkpoint_save writes nothing from a NaN weight or moment: the file on disk stays as it was.
static void test_save_refuses_nonfinite(void **s) {
    (void)s;
    size_t len0;
    unsigned char *before = reset_ckpt(&len0);
    train_config c;
    config(&c, 3);
    char err[512];
    float *mo, *v;
    model *m = model_with_moments(&c, &mo, &v);
    const size_t P = model_num_params(m);
    st_meta_kv kv[1] = {{"step", "0"}};
    model_params(m)[P - 1] = NAN;
    assert_int_equal(checkpoint_save(ckpt, m, mo, v, kv, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "norm.weight"));
    model_params(m)[P - 1] = 0;
    v[0] = INFINITY;
    assert_int_equal(checkpoint_save(ckpt, m, mo, v, kv, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "optim.v.tok_embeddings.weight"));
    assert_true(ckpt_holds(before, len0));
    free(before);
    free(mo), free(v);
    model_free(m);
}

// A learning rate and weight decay of 10 multiply every weight by 1 - 100 each step: the run
// diverges within a few steps, stops with TRAIN_NONFINITE, and leaves its checkpoint untouched.
static void test_divergence_stops(void **s) {
    (void)s;
    train_config c;
    config(&c, 50);
    c.lr = 10, c.weight_decay = 10, c.save_every = 1;
    char err[1024] = "";
    // from the good checkpoint at step 2, saving after every step until the bad one
    size_t len0;
    unsigned char *before = reset_ckpt(&len0);
    assert_int_equal(train_run(&c, 1, NULL, err, sizeof err), TRAIN_NONFINITE);
    assert_non_null(strstr(err, "step "));
    assert_non_null(strstr(err, "still holds step"));
    int stop = atoi(strstr(err, "step ") + 5), held = atoi(strstr(err, "holds step ") + 11);
    assert_true(stop > 3);
    assert_int_equal(held, stop - 1);
    assert_false(ckpt_holds(before, len0));  // replaced by the good steps' saves ...
    free(before);
    assert_int_equal(ckpt_step(&c), stop - 1);  // ... and the last of them loads: finite
}

// The run's model.safetensors carries weights_checksum: one changed byte of a weight is refused,
// naming the file; a file without the key (an older mtac's, a hand-made one) still loads; a
// checkpoint (whose checksum is another) is refused for its optimizer tensors, not its checksum.
static void test_weights_checksum(void **s) {
    (void)s;
    train_config c;
    config(&c, 2);
    char err[1024], weights[256], path[256];
    snprintf(weights, sizeof weights, "%s/model.safetensors", run);
    snprintf(path, sizeof path, "%s/weights.safetensors", dir);
    model *m = model_create(&c.model, err, sizeof err);
    assert_non_null(m);
    assert_int_equal(model_load_weights(m, weights, err, sizeof err), 0);
    st_file f;
    assert_int_equal(st_read(weights, &f, err, sizeof err), 0);
    assert_non_null(st_meta_get(&f, "weights_checksum"));
    ((unsigned char *)f.tensors[f.n_tensors - 1].data)[1] ^= 0x10;  // a low mantissa bit: still finite
    assert_int_equal(st_write(path, f.tensors, f.n_tensors, f.meta, f.n_meta, err, sizeof err), 0);
    assert_int_equal(model_load_weights(m, path, err, sizeof err), -1);
    if (!strstr(err, "checksum mismatch") || !strstr(err, path)) fail_msg("message '%s'", err);
    assert_int_equal(st_write(path, f.tensors, f.n_tensors, NULL, 0, err, sizeof err), 0);
    assert_int_equal(model_load_weights(m, path, err, sizeof err), 0);
    assert_int_equal(model_load_weights(m, good, err, sizeof err), -1);  // optim.* are not weights...
    assert_non_null(strstr(err, "unexpected tensor"));                   // ...but no checksum error first
    st_free(&f);
    model_free(m);
}

// What the threads of a training run do with subnormal numbers, seen from inside the run (its
// start event): bad counts the threads or products that kept one.
typedef struct {
    int events, bad_threads, threads, bad_gemm;
} flush_seen;

static void check_flushing(void *arg, const train_event *e) {
    flush_seen *f = arg;
    if (e->kind != TRAIN_EV_START) return;
    f->events++;
    int bad = 0, threads = 0;
#pragma omp parallel reduction(+ : bad, threads)
    {
        // 2^-100 * 2^-30 = 2^-130 is subnormal: FTZ writes 0. 2^-140 read by DAZ is 0.
        volatile float a = 0x1p-100f, b = 0x1p-30f, sub = 0x1p-140f;
        const float prod = a * b, in = sub * 1.0f;
        bad += !fp_flushing() || prod != 0 || in != 0;
        threads++;
    }
    f->bad_threads = bad, f->threads = threads;
    // OpenBLAS (its OpenMP build) on the OpenMP threads: C = A B with A all 2^-140 (subnormal)
    // and B all 2^20. Each product, 2^-120, is normal, and so is each sum, 256 * 2^-120: only DAZ
    // (A read as 0) makes C exactly 0. 256^3 multiply-adds: enough for OpenBLAS to use its threads.
    enum { M = 256 };
    float *A = malloc(sizeof(float) * M * M), *B = malloc(sizeof(float) * M * M), *C = calloc((size_t)M * M, sizeof(float));
    assert_non_null(A);
    assert_non_null(B);
    assert_non_null(C);
    for (int i = 0; i < M * M; i++) A[i] = 0x1p-140f, B[i] = 0x1p20f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, M, M, 1.0f, A, M, B, M, 0.0f, C, M);
    for (int i = 0; i < M * M; i++) f->bad_gemm += C[i] != 0;
    free(A), free(B), free(C);
}

// A run turns flushing on in every thread (checked from inside it) and restores the caller's
// setting when it returns.
static void test_flushes_subnormals(void **s) {
    (void)s;
    char err[512];
    train_config c;
    config(&c, 3);
    snprintf(c.out, sizeof c.out, "%s/ftz", dir);
    const int was = fp_flushing();
    // Off in every thread of the pool first (they exist already, and keep their mode between
    // regions), so that only the run can have turned it on in them.
    fp_flush_subnormals(0);
    flush_seen f = {0};
    const train_hooks h = {NULL, NULL, check_flushing, &f};
    assert_int_equal(train_run(&c, 0, &h, err, sizeof err), 0);
    assert_int_equal(f.events, 1);
    if (FP_FLUSH_BITS) {
        assert_true(f.threads >= 1);
        assert_int_equal(f.bad_threads, 0);
        assert_int_equal(f.bad_gemm, 0);
    }
    int on = 0;
#pragma omp parallel reduction(+ : on)
    on += fp_flushing();
    assert_int_equal(on, 0);
    fp_flush_subnormals(was);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metadata_checked), cmocka_unit_test(test_version1_loads),
        cmocka_unit_test(test_nonfinite_load), cmocka_unit_test(test_checksum_covers_metadata),
        cmocka_unit_test(test_save_refuses_nonfinite), cmocka_unit_test(test_divergence_stops),
        cmocka_unit_test(test_weights_checksum), cmocka_unit_test(test_flushes_subnormals)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
