// test_launch_record.c: the launch record (mta_ctx_record_launches, mta_ctx_launch) and the
// tensor-core path's verdict (mta_tensor_core_path) that `mtac attn --plan` prints, on cuda-emu:
// off records nothing, on records the kernels of the calls after it (cleared by each call that
// turns it on), a host backend records nothing; the emulator's counts of a kernel's warp
// operations (mta_ctx_launch_ops) are those of its loops; the verdict follows the allow-list.
#include "mta.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

// One forward of c (every parameter the identity, inputs 0.1) on its backend's memory; the
// kernels recorded by then, counted.
static int forward_records(mta_ctx *ctx, const mta_config *c) {
    const size_t n = (size_t)c->B * c->H * c->T * c->d;
    const mta_param_sizes ps = mta_param_sizes_of(c);
    size_t np = 0;
    for (int i = 0; i < MTA_N_PARAMS; i++) np += ps.w[i];
    float *h = malloc((4 * n + np) * sizeof(float));
    assert_non_null(h);
    for (size_t i = 0; i < 4 * n + np; i++) h[i] = 0.1f;
    void *d = NULL;
    assert_int_equal(mta_backend_alloc(c->backend, (4 * n + np) * sizeof(float), &d), MTA_OK);
    assert_int_equal(mta_backend_upload(c->backend, d, h, (4 * n + np) * sizeof(float)), MTA_OK);
    float *x = d, *w = x + 4 * n;
    mta_params p;
    for (int i = 0; i < MTA_N_PARAMS; i++) p.w[i] = ps.w[i] ? w : NULL, w += ps.w[i];
    assert_int_equal(mta_forward(ctx, x, x + n, x + 2 * n, &p, x + 3 * n), MTA_OK);
    mta_backend_free(c->backend, d);
    free(h);
    int k = 0, times;
    while (mta_ctx_launch(ctx, k, &times)) assert_true(times >= 1), k++;
    return k;
}

// A context of plain attention at (B, H, T, d) on cuda-emu, precision bf16, its config in *c.
static mta_ctx *emu_ctx(mta_config *c, int B, int H, int T, int d) {
    *c = mta_config_default(B, H, T, d);
    c->backend = MTA_BACKEND_CUDA_EMU, c->precision = MTA_BF16;
    mta_ctx *ctx = NULL;
    assert_int_equal(mta_create(&ctx, c, NULL, 0), MTA_OK);
    return ctx;
}

static void test_record(void **s) {
    (void)s;
    mta_config c;
    mta_ctx *ctx = emu_ctx(&c, 1, 2, 70, 16);
    assert_int_equal(forward_records(ctx, &c), 0);  // off
    assert_int_equal(mta_ctx_record_launches(ctx, 1), MTA_OK);
    assert_true(forward_records(ctx, &c) > 0);
    int tc = 0;
    for (int i = 0; mta_ctx_launch(ctx, i, NULL); i++) tc |= !strncmp(mta_ctx_launch(ctx, i, NULL), "k_tc_", 5);
    assert_true(tc);  // plain attention at bf16: the tensor-core kernels
    assert_int_equal(mta_ctx_launches_lost(ctx), 0);
    assert_int_equal(mta_ctx_record_launches(ctx, 1), MTA_OK);  // cleared
    assert_null(mta_ctx_launch(ctx, 0, NULL));
    assert_int_equal(mta_ctx_record_launches(ctx, 0), MTA_OK);
    assert_int_equal(forward_records(ctx, &c), 0);
    mta_destroy(ctx);
    assert_int_equal(mta_ctx_record_launches(NULL, 1), MTA_ERR_NULL);
    assert_null(mta_ctx_launch(NULL, 0, NULL));

    c.backend = MTA_BACKEND_FUSED, c.precision = MTA_FP32;
    assert_int_equal(mta_create(&ctx, &c, NULL, 0), MTA_OK);
    assert_int_equal(mta_ctx_record_launches(ctx, 1), MTA_OK);
    assert_int_equal(forward_records(ctx, &c), 0);  // a host backend launches nothing
    mta_destroy(ctx);
}

// The emulator's count of k_fa_forward's mma.sync instructions (mta_ctx_launch_ops), against the
// kernel's loops (src/attn/mta_cuda_fa2.cuh) at plain attention, B = 1, H = 1, T = 128, d = 64:
//   blocks: one per 64-row query tile: Tp / 64 = 2 (rows 0..63 and 64..127), 4 warps each;
//   key tiles a block walks: jt0 = 0 to its diagonal jt1 = i0 / 64: 1 and 2, so 3 in all;
//   per warp and key tile: S = q k^T in 4 chunks (fa_xyT), each dp / 16 = 4 k-steps of 2 mma: 32;
//     O += P V in 4 chunks (fa_acc), each DP / 16 = 4 n-pairs of 2 mma: 32; so 64;
//   total: 3 key tiles x 4 warps x 64 = 768, once per warp instruction (per lane it would be 32x).
// The ldmatrix count follows from the same loops: per warp and key tile 4 x 4 x 2 (fa_xyT's x4 of
// q and of k) + 4 x 4 (fa_acc's x4.trans of v) = 48, 576 in all, 512 bytes each.
static void test_ops_fa_forward(void **s) {
    (void)s;
    mta_config c;
    mta_ctx *ctx = emu_ctx(&c, 1, 1, 128, 64);
    assert_int_equal(mta_ctx_record_launches(ctx, 1), MTA_OK);
    forward_records(ctx, &c);
    mta_kernel_ops ops, sum = {0};
    int fa = -1;
    const char *name;
    for (int i = 0; (name = mta_ctx_launch_ops(ctx, i, &ops)); i++) {
        if (!strcmp(name, "k_fa_forward")) fa = i;
        else sum.mma += ops.mma;  // the rest of the call (rounding q, k, v) has no MMA
    }
    assert_true(fa >= 0);
    mta_ctx_launch_ops(ctx, fa, &ops);
    assert_int_equal(ops.mma, 3 * 4 * 64);
    assert_int_equal(ops.ldmatrix, 3 * 4 * 48);
    assert_int_equal(ops.ldmatrix_bytes, 3 * 4 * 48 * 512);
    assert_true(ops.cp_async > 0 && ops.cp_async_bytes == 16 * ops.cp_async && ops.shfl > 0);
    assert_int_equal(sum.mma, 0);
    assert_null(mta_ctx_launch_ops(ctx, 99, &ops));
    mta_destroy(ctx);
}

static void test_verdict(void **s) {
    (void)s;
    char why[512];
    mta_config c = mta_config_default(1, 4, 64, 32);
    c.backend = MTA_BACKEND_CUDA_EMU, c.precision = MTA_BF16;
    assert_int_equal(mta_tensor_core_path(&c, why, sizeof why), 1);
    assert_string_equal(why, "");
    c.precision = MTA_FP32;
    assert_int_equal(mta_tensor_core_path(&c, why, sizeof why), 0);
    assert_non_null(strstr(why, "MTA_FP32"));
    // with the head steps: the every-step kernels (no step combination is refused any more; the
    // allow-list's refusal is test_backend_support's dummy step)
    c.precision = MTA_BF16, c.post_cq = 2, c.post_ck = 3, c.post_ch = 2;
    assert_int_equal(mta_tensor_core_path(&c, why, sizeof why), 1);
    c.post_ch = 0;  // alone too
    assert_int_equal(mta_tensor_core_path(&c, why, sizeof why), 1);
    c.post_cq = c.post_ck = 0, c.d = 4096;  // no tile of the path takes it
    assert_int_equal(mta_tensor_core_path(&c, why, sizeof why), 0);
    c.d = 32, c.backend = MTA_BACKEND_FUSED;
    assert_int_equal(mta_tensor_core_path(&c, why, sizeof why), -1);
    assert_non_null(strstr(why, "fused backend has no tensor-core path"));
    assert_int_equal(mta_tensor_core_path(NULL, why, sizeof why), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_record), cmocka_unit_test(test_ops_fa_forward),
                                       cmocka_unit_test(test_verdict)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
