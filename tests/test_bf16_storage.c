// test_bf16_storage.c [BACKEND]: bfloat16 storage of the tensors (mta_config.dtype =
// MTA_DTYPE_BF16) on the cuda-emu backend (or the one named, cuda on a GPU). The kernels compute
// in float32 from the same bf16 values either way, so a run on bf16 tensors gives exactly the
// bf16 rounding of a run on float32 tensors holding those values: out, and dq, dk, dv after being
// added to (both runs start them at the same bf16 values), bit for bit; the parameters'
// gradients (float32 in both) the same bits. For plain attention with grouped-query heads, the
// pre-softmax convolution with norm and gate, and the head steps, on the float32 path (the
// backend widens the tensors) and the tensor-core path (it reads them as they are). On that path a
// tensor that cannot be read in place (a view 2 bytes into an allocation) is copied, on that call
// only, with the same bits. The host backends refuse bf16 storage with a message that says so.
// Exits 77 (CTest's skip) when the backend cannot run here.
#include "testutil.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static mta_backend backend = MTA_BACKEND_CUDA_EMU;

// A bf16 tensor's entry as a float32 (the inverse of tu_bf16_bits).
static float from_bf16(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

// The case's tensors in mta_backward's order, with their lengths: q, k, v, dout, out, dq, dk, dv.
enum { NT = 8 };
static void tensors_of(tu_case *t, float *x[NT], size_t len[NT]) {
    float *const p[NT] = {t->q, t->k, t->v, t->dout, t->out, t->dq, t->dk, t->dv};
    const size_t n[NT] = {t->n, t->nkv, t->nkv, t->n, t->n, t->n, t->nkv, t->nkv};
    memcpy(x, p, sizeof p);
    memcpy(len, n, sizeof n);
}

// Forward and backward of t's config with the tensors stored as dtype, in the backend's memory,
// on ctx (NULL: a context of its own), each tensor at a 16-byte boundary but tensor `view` (an
// index into tensors_of's order; -1: none), 2 bytes past one, as a view into a tensor may start:
// t's tensors (out written, dq, dk, dv added to) and parameter gradients (zeroed first) come back.
static void run_stored(tu_case *t, int dtype, mta_ctx *ctx, int view) {
    mta_config c = t->cfg;
    c.dtype = dtype;
    const size_t es = dtype == MTA_DTYPE_BF16 ? 2 : 4;
    float *x[NT];
    size_t len[NT], at[NT + 1] = {0}, wat[MTA_N_PARAMS + 1] = {0};
    tensors_of(t, x, len);
    for (int i = 0; i < NT; i++) at[i + 1] = (at[i] + len[i] * es + 2 + 15) / 16 * 16;  // room for the view's 2 bytes
    at[view < 0 ? NT : view] += view < 0 ? 0 : 2;  // (at[NT] is not a tensor's start)
    for (int i = 0; i < MTA_N_PARAMS; i++) wat[i + 1] = wat[i] + t->wn[i] * sizeof(float);
    const size_t bytes = at[NT] + 2 * wat[MTA_N_PARAMS];
    unsigned char *h = malloc(bytes);
    assert_non_null(h);
    for (int i = 0; i < NT; i++)
        for (size_t e = 0; e < len[i]; e++) {
            if (es == 2) ((uint16_t *)(h + at[i]))[e] = tu_bf16_bits(x[i][e]);
            else ((float *)(h + at[i]))[e] = x[i][e];
        }
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        if (t->wn[i]) memcpy(h + at[NT] + wat[i], t->w[i], t->wn[i] * sizeof(float));
        memset(h + at[NT] + wat[MTA_N_PARAMS] + wat[i], 0, t->wn[i] * sizeof(float));
    }
    unsigned char *d = NULL;
    assert_int_equal(mta_backend_alloc(backend, bytes, (void **)&d), MTA_OK);
    assert_int_equal(mta_backend_upload(backend, d, h, bytes), MTA_OK);
    float *dx[NT];
    mta_params p;
    mta_grads g;
    for (int i = 0; i < NT; i++) dx[i] = (float *)(d + at[i]);  // bf16 storage: cast, as mta.h says
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        p.w[i] = t->wn[i] ? (const float *)(d + at[NT] + wat[i]) : NULL;
        g.w[i] = t->wn[i] ? (float *)(d + at[NT] + wat[MTA_N_PARAMS] + wat[i]) : NULL;
    }
    mta_ctx *own = NULL;
    char err[256];
    if (!ctx) assert_int_equal(mta_create(&own, &c, err, sizeof err), MTA_OK);
    assert_int_equal(mta_forward(own ? own : ctx, dx[0], dx[1], dx[2], &p, dx[4]), MTA_OK);
    assert_int_equal(mta_backward(own ? own : ctx, dx[0], dx[1], dx[2], &p, dx[3], dx[5], dx[6], dx[7], &g), MTA_OK);
    mta_destroy(own);
    assert_int_equal(mta_backend_synchronize(backend), MTA_OK);
    assert_int_equal(mta_backend_download(backend, h, d, bytes), MTA_OK);
    mta_backend_free(backend, d);
    // q, k, v, dout are inputs (the tensor-core path may read bf16 ones in place): same bytes
    for (int i = 0; i < 4; i++)
        for (size_t e = 0; e < len[i]; e++)
            if (es == 2 ? tu_bf16_bits(x[i][e]) != ((const uint16_t *)(h + at[i]))[e]
                        : memcmp(&x[i][e], (const float *)(h + at[i]) + e, sizeof(float)))
                fail_msg("input %d changed at %zu", i, e);
    for (int i = 4; i < NT; i++)
        for (size_t e = 0; e < len[i]; e++)
            x[i][e] = es == 2 ? from_bf16(((const uint16_t *)(h + at[i]))[e]) : ((const float *)(h + at[i]))[e];
    for (int i = 0; i < MTA_N_PARAMS; i++)
        if (t->wn[i]) memcpy(t->gw[i], h + at[NT] + wat[MTA_N_PARAMS] + wat[i], t->wn[i] * sizeof(float));
    free(h);
}

// A case of c whose q, k, v, dout, and dq, dk, dv (set to q, k, v: nonzero, so that "added to"
// is seen) hold bf16 values.
static tu_case *bf16_case(const mta_config *c, uint64_t seed) {
    tu_case *t = tu_case_new(c, seed, 1.0f, 0.3f);
    assert_non_null(t);
    float *x[NT];
    size_t len[NT];
    tensors_of(t, x, len);
    for (int i = 0; i < 4; i++)
        for (size_t e = 0; e < len[i]; e++) x[i][e] = tu_bf16_round(x[i][e]);
    for (int i = 5; i < NT; i++) memcpy(x[i], x[i - 5], len[i] * sizeof(float));
    return t;
}

// Fails on the first entry where run a is not run b's bf16 rounding (out, dq, dk, dv: b's bits
// where b ran on bf16 tensors) or its bits (parameter gradients).
static void expect_rounding_of(tu_case *a, tu_case *b, const char *label) {
    static const char *names[NT] = {"q", "k", "v", "dout", "out", "dq", "dk", "dv"};
    float *x[NT], *y[NT];
    size_t len[NT];
    tensors_of(a, x, len);
    tensors_of(b, y, len);
    for (int i = 4; i < NT; i++)
        for (size_t e = 0; e < len[i]; e++)
            if (memcmp(&x[i][e], &(float){tu_bf16_round(y[i][e])}, sizeof(float)))
                fail_msg("%s: %s[%zu] = %.9g, against %.9g (bf16: %.9g)", label, names[i], e,
                         x[i][e], y[i][e], tu_bf16_round(y[i][e]));
    for (int i = 0; i < MTA_N_PARAMS; i++)
        if (a->wn[i] && memcmp(a->gw[i], b->gw[i], a->wn[i] * sizeof(float)))
            fail_msg("%s: the gradient of %s differs between the runs", label, mta_param_info(i)->name);
}

// Runs c on bf16 and on float32 tensors of the same values: the first the rounding of the second.
static void same_as_float32(const mta_config *c, const char *label) {
    tu_case *a = bf16_case(c, 46), *b = bf16_case(c, 46);
    run_stored(a, MTA_DTYPE_BF16, NULL, -1);
    run_stored(b, MTA_DTYPE_F32, NULL, -1);
    expect_rounding_of(a, b, label);
    tu_case_free(a);
    tu_case_free(b);
}

// Plain attention (4 query heads on 2 kv heads), the pre-softmax convolution with norm and gate,
// head mixing with the head convolution, the post-softmax convolution with a gate, and both
// convolutions (the every-step kernels): each with precision MTA_FP32 (the float32 path) and
// MTA_BF16 (the tensor-core path, which these configs are on: checked). At T = 19 the tensor-core
// path copies q, k, v, dout into padded buffers; at T = 64 (whole tiles, d = 16) it reads the
// bf16 tensors in place (but dout after the norm or gate), as they start at 16 bytes here.
static void test_same_as_float32(void **s) {
    (void)s;
    static const char *names[5] = {"plain", "pre-softmax conv", "head steps", "post-softmax conv", "both convs"};
    for (int T = 19; T <= 64; T += 45)
        for (int k = 0; k < 5; k++)
            for (int prec = MTA_FP32; prec <= MTA_BF16; prec++) {
                mta_config c = mta_config_default(2, 4, T, 16);
                c.backend = backend, c.precision = prec;
                if (k == 0) c.H_kv = 2;
                if (k == 1) c.pre_cq = 3, c.pre_ck = 5, c.group_norm = 1, c.gate = 1;
                if (k == 2) c.pre_head_mix = 1, c.post_ch = 2;
                if (k == 3) c.post_cq = 2, c.post_ck = 3, c.gate = 1;
                if (k == 4) c.pre_cq = 2, c.pre_ck = 3, c.post_cq = 2, c.post_ck = 3, c.H_kv = 2;
                char why[256];
                assert_int_equal(mta_tensor_core_path(&c, why, sizeof why), prec == MTA_BF16);
                char label[80];
                snprintf(label, sizeof label, "%s, T=%d, precision %s", names[k], T, prec == MTA_BF16 ? "bf16" : "fp32");
                same_as_float32(&c, label);
            }
}

// The launches on ctx (recorded) of the kernels that copy bf16 inputs: k_tc_round (q, k, v) and
// k_tc_prep (which, at the post-softmax convolution, runs only to copy dout).
static int copy_launches(const mta_ctx *ctx) {
    int n = 0, times;
    for (int i = 0; mta_ctx_launch(ctx, i, &times); i++)
        if (!strcmp(mta_ctx_launch(ctx, i, NULL), "k_tc_round") || !strcmp(mta_ctx_launch(ctx, i, NULL), "k_tc_prep"))
            n += times;
    return n;
}

// At T = 64, d = 16 the tensor-core path reads bf16 q, k, v, dout in place where they start at 16
// bytes in device memory; a view 2 bytes (one bf16) into an allocation is copied instead, on that
// call only: q by k_tc_round in the forward and the backward (2 launches), dout by k_tc_prep (1),
// none on a later aligned call on the same context. The same bits as an aligned run every time.
// The post-softmax convolution without a gate, so that k_tc_prep (no D to make) copies or is absent.
static void test_views_copied(void **s) {
    (void)s;
    mta_config c = mta_config_default(2, 4, 64, 16);
    c.backend = backend, c.precision = MTA_BF16, c.dtype = MTA_DTYPE_BF16, c.H_kv = 2, c.post_cq = 2, c.post_ck = 3;
    assert_int_equal(mta_tensor_core_path(&c, NULL, 0), 1);
    tu_case *ref = bf16_case(&c, 46);
    run_stored(ref, MTA_DTYPE_BF16, NULL, -1);
    mta_ctx *ctx;
    char err[256];
    assert_int_equal(mta_create(&ctx, &c, err, sizeof err), MTA_OK);
    static const int views[3] = {0, 3, -1}, copies[3] = {2, 1, 0};
    static const char *label[3] = {"q 2 bytes in", "dout 2 bytes in", "aligned after views"};
    for (int i = 0; i < 3; i++) {
        tu_case *t = bf16_case(&c, 46);
        assert_int_equal(mta_ctx_record_launches(ctx, 1), MTA_OK);  // (cleared)
        run_stored(t, MTA_DTYPE_BF16, ctx, views[i]);
        if (copy_launches(ctx) != copies[i])
            fail_msg("%s: %d launches copy inputs, not %d", label[i], copy_launches(ctx), copies[i]);
        expect_rounding_of(t, ref, label[i]);
        tu_case_free(t);
    }
    mta_destroy(ctx);
    tu_case_free(ref);
}

// The host backends refuse bf16 storage, naming it.
static void test_host_backends_refuse(void **s) {
    (void)s;
    const mta_backend hosts[2] = {MTA_BACKEND_REFERENCE, MTA_BACKEND_FUSED};
    for (int i = 0; i < 2; i++) {
        mta_config c = mta_config_default(1, 2, 8, 4);
        c.backend = hosts[i], c.dtype = MTA_DTYPE_BF16;
        char msg[256] = "";
        mta_ctx *ctx = NULL;
        assert_int_equal(mta_create(&ctx, &c, msg, sizeof msg), MTA_ERR_INVALID);
        assert_null(ctx);
        assert_non_null(strstr(msg, "does not compute bfloat16 tensors"));
        c.dtype = 2;
        assert_int_equal(mta_config_check(&c, msg, sizeof msg), MTA_ERR_INVALID);
        assert_non_null(strstr(msg, "dtype=2"));
    }
}

int main(int argc, char **argv) {
    if (argc > 2 || (argc == 2 && mta_backend_from_name(argv[1], &backend))) {
        fprintf(stderr, "usage: test_bf16_storage [cuda|cuda-emu]\n");
        return 2;
    }
    if (!mta_backend_available(backend)) {
        printf("test_bf16_storage: the %s backend cannot run here; skipped\n", mta_backend_name(backend));
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_as_float32),
        cmocka_unit_test(test_views_copied),
        cmocka_unit_test(test_host_backends_refuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
