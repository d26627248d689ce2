// test_attn_invariants.c: properties the operator must have whatever its parameters:
// identity kernels reproduce plain attention, causality, determinism, and a clear error for
// every kind of bad input.
#include "testutil.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

// With identity kernels every convolution and mixing step is the identity, so MTA must equal
// plain causal attention, forward and backward (spec section 2, "Initialisation").
static void identity_case(const tc_case *t) {
    const mta_config id = tu_config_of(t), plain = tu_config_default(id.B, id.H, id.T, id.d);
    tu_case *a = tu_case_new(&plain, 5, 1.5f, 0.0f), *b = tu_case_new(&id, 5, 1.5f, 0.0f);
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(tu_case_run(a, 1), MTA_OK);
    assert_int_equal(tu_case_run(b, 1), MTA_OK);
    // within float32 rounding (tu_rounding_check): identity kernels multiply by 1 and add zeros,
    // exactly, but the fused backend may block the products differently for the two configs
    const char *which;
    const double q = tu_rounding_check(b, a, 5, &which);
    if (!(q <= 1)) fail_msg("%s: %s of identity kernels differs from plain attention by %.3g times its bound", t->name, which, q);
    // and the output is not trivially zero
    assert_true(tu_max_abs(a->out, a->n) > 0.1);
    tu_case_free(a);
    tu_case_free(b);
}

static void test_identity_equals_plain(void **s) {
    (void)s;
    const tc_case *t;
    for (int k = 0; (t = tc_nth(TC_IDENTITY, k)); k++) identity_case(t);
}

// out[i] may depend only on positions <= i: changing q, k, v after i leaves rows <= i unchanged.
static void test_causality(void **s) {
    (void)s;
    mta_config cfg = tu_config_all(2, 4, 23, 8, 3, 5, 2);
    tu_case *a = tu_case_new(&cfg, 9, 1.0f, 0.3f);
    assert_non_null(a);
    assert_int_equal(tu_case_run(a, 0), MTA_OK);
    float *ref = malloc(a->n * sizeof(float));
    assert_non_null(ref);
    memcpy(ref, a->out, a->n * sizeof(float));
    const int T = cfg.T, d = cfg.d;
    for (int cut = 0; cut < T - 1; cut += 5) {
        uint64_t sd = 100 + cut;
        for (int bh = 0; bh < cfg.B * cfg.H; bh++)
            for (int t = cut + 1; t < T; t++)
                for (int e = 0; e < d; e++) {
                    size_t i = ((size_t)bh * T + t) * d + e;
                    a->q[i] = tu_randn(&sd), a->k[i] = tu_randn(&sd), a->v[i] = tu_randn(&sd);
                }
        assert_int_equal(tu_case_run(a, 0), MTA_OK);
        for (int bh = 0; bh < cfg.B * cfg.H; bh++)
            for (int t = 0; t <= cut; t++)
                for (int e = 0; e < d; e++) {
                    size_t i = ((size_t)bh * T + t) * d + e;
                    assert_true(a->out[i] == ref[i]);
                }
        memcpy(ref, a->out, a->n * sizeof(float));
    }
    free(ref);
    tu_case_free(a);
}

// A problem of cfg and seed (inputs std 1, parameters identity plus 0.3 noise), run forward and
// backward.
static tu_case *ran_case(const mta_config *cfg, uint64_t seed) {
    tu_case *c = tu_case_new(cfg, seed, 1.0f, 0.3f);
    assert_non_null(c);
    assert_int_equal(tu_case_run(c, 1), MTA_OK);
    return c;
}

// Same inputs, same results bit for bit (fixed-order reductions), also across runs.
static void test_deterministic(void **s) {
    (void)s;
    const mta_config cfg = tu_config_all(2, 4, 50, 8, 3, 5, 4);
    tu_case *a = ran_case(&cfg, 3), *b = ran_case(&cfg, 3);
    assert_memory_equal(a->mem, b->mem, (8 * a->n) * sizeof(float));
    assert_true(tu_same_bits(a, b));  // and the parameters' gradients
    tu_case_free(a);
    tu_case_free(b);
}

// Non-finite inputs propagate as NaN without undefined behaviour (mta.h; the UBSan build checks
// it): a NaN query, and finite q and k whose scores overflow float32 (1e30 * 1e30).
static void test_nonfinite_propagates(void **s) {
    (void)s;
    for (int kind = 0; kind < 2; kind++) {
        mta_config plain = tu_config_default(1, 1, 1, 1);
        tu_case *a = tu_case_new(&plain, 9, 1.0f, 0.0f);
        if (kind == 0) a->q[0] = NAN;
        else a->q[0] = a->k[0] = 1e30f;
        assert_int_equal(tu_case_run(a, 1), MTA_OK);
        assert_true(isnan(a->out[0]));
        tu_case_free(a);
    }
    // every step on: the NaN reaches the rows whose scores the convolutions draw from it
    mta_config all = tu_config_all(1, 2, 12, 4, 2, 3, 2);
    tu_case *b = tu_case_new(&all, 9, 1.0f, 0.3f);
    b->q[5 * 4] = NAN;  // head 0, row 5
    assert_int_equal(tu_case_run(b, 1), MTA_OK);
    assert_true(isnan(b->out[5 * 4]));
    tu_case_free(b);
}

// Gradients are added to the buffers given (the documented convention): a second backward into
// the first one's gradients gives twice them. Adding the second pass's terms onto the first's
// sums is another float32 computation of 2 g than doubling g (exact), so the two are within the
// problem's measured bound (tu_rounding_bound, testutil.h); gradients not added (overwritten, or
// one term left out) are off by half their size.
static void test_backward_accumulates(void **s) {
    (void)s;
    mta_config cfg = tu_config_all(1, 2, 7, 4, 2, 3, 2);
    tu_case *a = ran_case(&cfg, 4), *twice = ran_case(&cfg, 4);
    const double bound = tu_rounding_bound(tu_rounding_noise(twice, 4));
    for (size_t i = 0; i < 3 * twice->n; i++) twice->dq[i] *= 2;  // dq, dk, dv are consecutive
    for (int i = 0; i < MTA_N_PARAMS; i++)
        for (size_t j = 0; j < twice->wn[i]; j++) twice->gw[i][j] *= 2;
    mta_ctx *ctx;
    assert_int_equal(mta_create(&ctx, &cfg, NULL, 0), MTA_OK);
    assert_int_equal(mta_forward(ctx, a->q, a->k, a->v, &a->p, a->out), MTA_OK);
    assert_int_equal(mta_backward(ctx, a->q, a->k, a->v, &a->p, a->dout, a->dq, a->dk, a->dv, &a->g), MTA_OK);
    const char *which;
    const double e = tu_rel_diff(a, twice, &which);
    if (!(e <= bound)) fail_msg("a second backward gives %s %.3g of its bound from twice the first", which, e / bound);
    mta_destroy(ctx);
    tu_case_free(a), tu_case_free(twice);
}

static void expect_config_error(mta_config c, mta_status want, const char *needle) {
    char msg[256] = "";
    mta_ctx *ctx = (mta_ctx *)1;
    assert_int_equal(mta_create(&ctx, &c, msg, sizeof msg), want);
    assert_null(ctx);
    if (!strstr(msg, needle)) fail_msg("message '%s' does not mention '%s'", msg, needle);
}

// mta_attention_map returns the map that multiplied V: without group norm and gate the output is
// exactly map @ v, with every convolution and head mixing on and non-identity kernels; the map is
// zero above the diagonal. Before a forward, or outside (B,H), it is an error.
static void test_attention_map(void **s) {
    (void)s;
    mta_config c = tu_config_all(2, 4, 13, 5, 2, 3, 2);
    c.group_norm = 0, c.depth_scale = 0, c.gate = 0;
    c.backend = MTA_BACKEND_REFERENCE;  // the fused backend keeps no maps (checked at the end)
    tu_case *a = tu_case_new(&c, 11, 1.0f, 0.3f);
    assert_non_null(a);
    const int T = c.T, d = c.d;
    float *m = malloc((size_t)T * T * sizeof(float));
    mta_ctx *ctx;
    assert_int_equal(mta_create(&ctx, &c, NULL, 0), MTA_OK);
    assert_int_equal(mta_attention_map(ctx, 0, 0, m), MTA_ERR_STATE);
    assert_int_equal(mta_forward(ctx, a->q, a->k, a->v, &a->p, a->out), MTA_OK);
    // each output a float32 sum of the i + 1 products of the map's row with v's column: within
    // gamma_{i+1} of their |values| (tu_sum_ratio), if the map is the one that multiplied v
    double worst = 0;
    for (int b = 0; b < c.B; b++)
        for (int h = 0; h < c.H; h++) {
            assert_int_equal(mta_attention_map(ctx, b, h, m), MTA_OK);
            const size_t base = ((size_t)b * c.H + h) * T * d;
            for (int i = 0; i < T; i++) {
                for (int j = i + 1; j < T; j++) assert_true(m[(size_t)i * T + j] == 0.0f);
                for (int e = 0; e < d; e++) {
                    double o = 0, abs = 0;
                    for (int j = 0; j <= i; j++) {
                        const double t = (double)m[(size_t)i * T + j] * a->v[base + (size_t)j * d + e];
                        o += t, abs += fabs(t);
                    }
                    worst = tu_worst(worst, tu_sum_ratio(a->out[base + (size_t)i * d + e], o, abs, i + 1));
                }
            }
        }
    if (!(worst <= 1)) fail_msg("out differs from the map times v by %.3g of the bound", worst);
    assert_true(tu_max_abs(a->out, a->n) > 1e-2);
    assert_int_equal(mta_attention_map(ctx, c.B, 0, m), MTA_ERR_INVALID);
    assert_int_equal(mta_attention_map(ctx, 0, -1, m), MTA_ERR_INVALID);
    assert_int_equal(mta_attention_map(ctx, 0, 0, NULL), MTA_ERR_NULL);
    mta_destroy(ctx);
    c.backend = MTA_BACKEND_FUSED;
    assert_int_equal(mta_create(&ctx, &c, NULL, 0), MTA_OK);
    assert_int_equal(mta_forward(ctx, a->q, a->k, a->v, &a->p, a->out), MTA_OK);
    assert_int_equal(mta_attention_map(ctx, 0, 0, m), MTA_ERR_INVALID);
    mta_destroy(ctx);
    free(m);
    tu_case_free(a);
}

static void test_bad_configs(void **s) {
    (void)s;
    mta_config ok = tu_config_default(1, 4, 8, 8), c;
    c = ok, c.T = 0;
    expect_config_error(c, MTA_ERR_INVALID, "sizes must be >= 1");
    c = ok, c.B = -3;
    expect_config_error(c, MTA_ERR_INVALID, "sizes must be >= 1");
    c = ok, c.d = 0;
    expect_config_error(c, MTA_ERR_INVALID, "sizes must be >= 1");
    c = ok, c.pre_cq = 2, c.pre_ck = 4;
    expect_config_error(c, MTA_ERR_INVALID, "must be odd");
    c = ok, c.post_cq = 2, c.post_ck = 6;
    expect_config_error(c, MTA_ERR_INVALID, "must be odd");
    c = ok, c.pre_cq = 0, c.pre_ck = 3;
    expect_config_error(c, MTA_ERR_INVALID, "both must be >= 1");
    c = ok, c.post_cq = -1, c.post_ck = 3;
    expect_config_error(c, MTA_ERR_INVALID, "both must be >= 1");
    c = ok, c.post_ch = 3;
    expect_config_error(c, MTA_ERR_INVALID, "must divide H");
    c = ok, c.post_ch = -1;
    expect_config_error(c, MTA_ERR_INVALID, "must divide H");
    c = ok, c.H_kv = 3;
    expect_config_error(c, MTA_ERR_INVALID, "H_kv=3 must divide");
    c = ok, c.H_kv = 8;
    expect_config_error(c, MTA_ERR_INVALID, "H_kv=8 must divide");
    c = ok, c.H_kv = -1;
    expect_config_error(c, MTA_ERR_INVALID, "H_kv=-1 must divide");
    c = ok, c.gate = 2;
    expect_config_error(c, MTA_ERR_INVALID, "flags");
    c = ok, c.precision = 2;
    expect_config_error(c, MTA_ERR_INVALID, "precision=2 must be MTA_FP32 (0) or MTA_BF16 (1)");
    c = ok, c.precision = MTA_BF16;  // host backends compute in float32 only
    expect_config_error(c, MTA_ERR_INVALID, "computes in float32 only");
    c = ok, c.depth_scale = 1;
    expect_config_error(c, MTA_ERR_INVALID, "group_norm");
    c = ok, c.group_norm = 1, c.layer_id = -1;
    expect_config_error(c, MTA_ERR_INVALID, "layer_id");
    c = ok, c.backend = (mta_backend)7;
    expect_config_error(c, MTA_ERR_INVALID, "backend");
    c = tu_config_default(1 << 30, 1 << 30, 1 << 30, 64);
    expect_config_error(c, MTA_ERR_OVERFLOW, "overflow");
    c = tu_config_default(1, 1, 1 << 30, 1 << 30);
    expect_config_error(c, MTA_ERR_OVERFLOW, "overflow");
    assert_int_equal(mta_config_check(NULL, NULL, 0), MTA_ERR_NULL);
    assert_int_equal(mta_create(NULL, &ok, NULL, 0), MTA_ERR_NULL);
}

static void test_bad_calls(void **s) {
    (void)s;
    mta_config cfg = tu_config_all(1, 2, 5, 4, 2, 3, 2);
    tu_case *a = tu_case_new(&cfg, 1, 1.0f, 0.1f);
    mta_ctx *ctx;
    assert_int_equal(mta_create(&ctx, &cfg, NULL, 0), MTA_OK);
    // backward before any forward
    assert_int_equal(mta_backward(ctx, a->q, a->k, a->v, &a->p, a->dout, a->dq, a->dk, a->dv, &a->g), MTA_ERR_STATE);
    assert_non_null(strstr(mta_ctx_error(ctx), "before"));
    // NULL tensors
    assert_int_equal(mta_forward(ctx, NULL, a->k, a->v, &a->p, a->out), MTA_ERR_NULL);
    assert_int_equal(mta_forward(ctx, a->q, a->k, a->v, &a->p, NULL), MTA_ERR_NULL);
    assert_int_equal(mta_forward(NULL, a->q, a->k, a->v, &a->p, a->out), MTA_ERR_NULL);
    // a parameter missing for an enabled step
    mta_params p = a->p;
    p.w_post = NULL;
    assert_int_equal(mta_forward(ctx, a->q, a->k, a->v, &p, a->out), MTA_ERR_NULL);
    assert_non_null(strstr(mta_ctx_error(ctx), "w_post"));
    assert_int_equal(mta_forward(ctx, a->q, a->k, a->v, NULL, a->out), MTA_ERR_NULL);
    // a failed forward leaves no state for a backward
    assert_int_equal(mta_backward(ctx, a->q, a->k, a->v, &a->p, a->dout, a->dq, a->dk, a->dv, &a->g), MTA_ERR_STATE);
    assert_int_equal(mta_forward(ctx, a->q, a->k, a->v, &a->p, a->out), MTA_OK);
    assert_int_equal(mta_backward(ctx, a->q, a->k, a->v, &a->p, NULL, a->dq, a->dk, a->dv, &a->g), MTA_ERR_NULL);
    mta_destroy(ctx);
    // a parameter given for a step that is off
    mta_config plain = tu_config_default(1, 2, 5, 4);
    assert_int_equal(mta_create(&ctx, &plain, NULL, 0), MTA_OK);
    mta_params extra = {0};
    extra.gn_weight = a->w[4];
    assert_int_equal(mta_forward(ctx, a->q, a->k, a->v, &extra, a->out), MTA_ERR_INVALID);
    assert_non_null(strstr(mta_ctx_error(ctx), "gn_weight"));
    mta_destroy(ctx);
    mta_destroy(NULL);
    tu_case_free(a);
}

static void test_param_sizes_and_identity(void **s) {
    (void)s;
    mta_config cfg = tu_config_all(1, 4, 8, 6, 3, 5, 2);
    mta_param_sizes ps = mta_param_sizes_of(&cfg);
    assert_int_equal(ps.w_pre, 4 * 3 * 5);
    assert_int_equal(ps.w_pre_head, 16);
    assert_int_equal(ps.w_post_head, 4 * 2);
    assert_int_equal(ps.gn_weight, 6);
    assert_int_equal(ps.gate_b, 1);
    float w[60], hc[8];
    mta_params_init_identity(&cfg, w, NULL, NULL, hc, NULL, NULL);
    for (int h = 0; h < 4; h++)
        for (int a = 0; a < 3; a++)
            for (int c = 0; c < 5; c++) assert_true(w[(h * 3 + a) * 5 + c] == ((a == 2 && c == 2) ? 1.0f : 0.0f));
    float want_hc[8] = {1, 0, 0, 1, 1, 0, 0, 1};
    assert_memory_equal(hc, want_hc, sizeof hc);
    // Each side: the product -0.3 l, expf (within an ulp), the product by 0.6 and two
    // subtractions, of values below 1: under 4 u apart from the exact value each, so 8 u.
    const double u = 0x1p-24;
    assert_true(tu_close(mta_depth_scale(0), 0.8f, 8 * u, 0));
    assert_true(tu_close(mta_depth_scale(3), 1.0f - (0.8f - 0.6f * expf(-0.9f)), 8 * u, 0));
}

// The parameter table (mta_param_info, mta_param_shape) agrees with the named members and sizes.
static void test_param_table(void **s) {
    (void)s;
    static const char *const names[MTA_N_PARAMS] = {"w_pre", "w_pre_head", "w_post", "w_post_head",
                                                    "gn_weight", "gate_w", "gate_b"};
    mta_config cfg = tu_config_all(1, 4, 8, 6, 3, 5, 2), off = tu_config_default(1, 4, 8, 6);
    const mta_param_sizes ps = mta_param_sizes_of(&cfg);
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        const mta_param_desc *d = mta_param_info(i);
        assert_non_null(d);
        assert_string_equal(d->name, names[i]);
        assert_int_equal(mta_param_index(names[i]), i);
        assert_true(d->spec_step >= 2 && d->spec_step <= 9 && d->about[0]);
        int64_t sh[3];
        const int nd = mta_param_shape(&cfg, i, sh);
        size_t numel = 1;
        for (int j = 0; j < nd; j++) numel *= (size_t)sh[j];
        assert_int_equal(numel, ps.w[i]);
        assert_int_equal(mta_param_shape(&off, i, sh), 0);
    }
    assert_null(mta_param_info(MTA_N_PARAMS));
    assert_null(mta_param_info(-1));
    assert_int_equal(mta_param_index("w_nothing"), -1);
    assert_int_equal(mta_param_index(NULL), -1);
    assert_int_equal(ps.w[MTA_W_POST_HEAD], ps.w_post_head);
    // the array view and the named members are the same storage
    mta_params p = {.gate_b = cfg.T ? (const float *)&cfg : NULL};
    assert_ptr_equal(p.w[MTA_GATE_B], &cfg);
    mta_grads g = {{0}};
    g.w[MTA_W_PRE_HEAD] = (float *)&cfg;
    assert_ptr_equal(g.w_pre_head, &cfg);
    assert_int_equal(mta_abi_sizeof(MTA_ABI_CONFIG), sizeof(mta_config));
    assert_int_equal(mta_abi_sizeof(MTA_ABI_PARAMS), MTA_N_PARAMS * sizeof(void *));
    assert_int_equal(mta_abi_sizeof(MTA_ABI_N), 0);
}

// The table read both ways: the shapes mta_param_shape gives a config's parameters, given to
// mta_config_from_shapes, set exactly that config's step settings, for every step combination;
// shapes that do not fit are refused naming the tensor, and a step's tensors come together.
static void test_config_from_shapes(void **s) {
    (void)s;
    for (int shape = 0; shape < TU_NSHAPES; shape++)
        for (int mask = 0; mask < TU_NCOMBOS; mask++) {
            const mta_config want = tu_combo(shape, mask, 0.0f);
            mta_config got = mta_config_default(want.B, want.H, want.T, want.d);
            got.backend = want.backend, got.layer_id = want.layer_id, got.depth_scale = want.depth_scale;
            got.H_kv = want.H_kv;
            got.strip_rows = want.strip_rows, got.threads = want.threads, got.keep_o = want.keep_o;
            int64_t sh[MTA_N_PARAMS][3];
            int nd[MTA_N_PARAMS];
            const int64_t *ptr[MTA_N_PARAMS];
            for (int i = 0; i < MTA_N_PARAMS; i++) {
                nd[i] = mta_param_shape(&want, i, sh[i]);
                ptr[i] = nd[i] ? sh[i] : NULL;
            }
            char msg[256];
            assert_int_equal(mta_config_from_shapes(&got, nd, ptr, msg, sizeof msg), MTA_OK);
            assert_memory_equal(&got, &want, sizeof got);
        }
    const struct {
        int i, nd;
        int64_t sh[3];
        const char *msg;
    } bad[] = {
        {MTA_W_PRE, 2, {4, 3}, "tensor 'w_pre' has shape (4,3), expected (H, c_q, c_k)"},
        {MTA_W_PRE, 3, {4, 3, 4}, "tensor 'w_pre' of shape (4,3,4): pre-softmax conv kernel key size c_k=4 must be odd"},
        {MTA_W_PRE, 3, {4, 0, 3}, "tensor 'w_pre' has shape (4,0,3)"},
        {MTA_W_POST_HEAD, 3, {1, 3, 3}, "tensor 'w_post_head' of shape (1,3,3): head conv group size c_h=3 must divide H=4"},
        {MTA_GATE_W, 1, {6}, "gate_w and gate_b go together: give both or neither (gate_b is missing)"},
        {MTA_GATE_B, 0, {0}, "gate_w and gate_b go together: give both or neither (gate_w is missing)"},
        {MTA_GN_WEIGHT, 2, {6, 1}, "tensor 'gn_weight' has shape (6,1), expected (d)"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        mta_config c = mta_config_default(1, 4, 8, 6);
        int nd[MTA_N_PARAMS] = {0};
        const int64_t *ptr[MTA_N_PARAMS] = {0};
        nd[bad[k].i] = bad[k].nd, ptr[bad[k].i] = bad[k].sh;
        char msg[256] = "";
        assert_int_not_equal(mta_config_from_shapes(&c, nd, ptr, msg, sizeof msg), MTA_OK);
        if (strncmp(msg, bad[k].msg, strlen(bad[k].msg))) fail_msg("message '%s', expected '%s...'", msg, bad[k].msg);
    }
    // mta_config's fields, in order, each 4 bytes, as bindings mirror them.
    size_t off = 0;
    int i = 0;
    for (const mta_config_field_desc *f; (f = mta_config_field(i)); i++, off += 4) {
        assert_int_equal(f->offset, off);
        assert_true(f->kind == MTA_FIELD_INT || f->kind == (strcmp(f->name, "dropout") ? -1 : MTA_FIELD_FLOAT));
    }
    assert_int_equal(off, sizeof(mta_config));
    assert_string_equal(mta_config_field(4)->name, "H_kv");
    assert_string_equal(mta_config_field(5)->name, "pre_cq");
    assert_int_equal(mta_config_field(5)->offset, offsetof(mta_config, pre_cq));
    assert_null(mta_config_field(-1));
}

// Dropout: off outside training, a fixed seed fixes the mask, and about p of the weights drop.
static void test_dropout(void **s) {
    (void)s;
    mta_config cfg = tu_config_all(1, 2, 64, 8, 2, 3, 2), dcfg = cfg;
    dcfg.dropout = 0.25f;
    tu_case *a = tu_case_new(&cfg, 2, 1.0f, 0.2f), *b = tu_case_new(&dcfg, 2, 1.0f, 0.2f);
    assert_int_equal(tu_case_run(a, 0), MTA_OK);
    assert_int_equal(tu_case_run(b, 0), MTA_OK);  // a new context is not training
    assert_memory_equal(a->out, b->out, a->n * sizeof(float));
    mta_ctx *ctx;
    assert_int_equal(mta_create(&ctx, &dcfg, NULL, 0), MTA_OK);
    float *o1 = malloc(a->n * sizeof(float)), *o2 = malloc(a->n * sizeof(float));
    mta_set_dropout(ctx, 1, 99);
    assert_int_equal(mta_forward(ctx, b->q, b->k, b->v, &b->p, o1), MTA_OK);
    assert_int_equal(mta_forward(ctx, b->q, b->k, b->v, &b->p, o2), MTA_OK);
    assert_memory_equal(o1, o2, a->n * sizeof(float));
    const double moved = tu_max_abs_diff(o1, a->out, a->n);
    // Dropping a quarter of the map's entries moves outputs of order 1 by a fraction of
    // themselves; the same bits otherwise (no dropout: nothing moves). 1e-3 lies between.
    assert_true(moved > 1e-3 && moved < INFINITY);  // infinite: a NaN, not dropout
    mta_destroy(ctx);
    // the fraction dropped, seen through plain attention with v = one-hot of the key position
    mta_config pc = tu_config_default(1, 1, 200, 200);
    pc.dropout = 0.25f;
    size_t n = 200 * 200;
    float *q = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float)), *o = calloc(n, sizeof(float));
    for (int t = 0; t < 200; t++) v[t * 200 + t] = 1.0f;  // o[i,j] = dropped-and-scaled P[i,j]
    assert_int_equal(mta_create(&ctx, &pc, NULL, 0), MTA_OK);
    mta_set_dropout(ctx, 1, 5);
    assert_int_equal(mta_forward(ctx, q, q, v, NULL, o), MTA_OK);
    long zeros = 0, total = 0;
    for (int i = 0; i < 200; i++)
        for (int j = 0; j <= i; j++) zeros += o[i * 200 + j] == 0.0f, total++;
    double frac = (double)zeros / total;
    assert_true(frac > 0.23 && frac < 0.27);
    mta_destroy(ctx);
    free(q), free(v), free(o), free(o1), free(o2);
    tu_case_free(a), tu_case_free(b);
}

// Grouped-query attention with H_kv = H is multi-head attention: the same bits as H_kv = 0 (the
// path every config took before H_kv existed), every step and dropout on.
static void test_gqa_full_heads_same_bits(void **s) {
    (void)s;
    mta_config c = tu_variant(11);
    c.H_kv = 0;
    tu_case *a = tu_case_new(&c, 5, 1.0f, 0.3f);
    c.H_kv = c.H;
    tu_case *b = tu_case_new(&c, 5, 1.0f, 0.3f);
    assert_int_equal(tu_case_train(a, NULL), MTA_OK);
    assert_int_equal(tu_case_train(b, NULL), MTA_OK);
    assert_true(tu_same_bits(a, b));
    tu_case_free(a), tu_case_free(b);
}

// Grouped-query attention equals multi-head attention on k and v repeated over each kv head's
// query heads (the authors' repeat_kv): the output, dq and the parameter gradients, and dk, dv
// of a kv head against the sum of its repeated heads' dk, dv, each relative to its largest entry,
// within float32 rounding of the multi-head problem (tu_rounding_bound; the sum over the repeated
// heads is one more rounding step, within the bound's steps).
static void test_gqa_equals_repeated_kv(void **s) {
    (void)s;
    mta_config cfgs[3] = {tu_variant(11), tu_combo(6, TU_NCOMBOS - 1, 0.0f), tu_combo(5, TU_PRE | TU_POST | TU_GN, 0.0f)};
    cfgs[0].H_kv = 2;
    for (int k = 0; k < 3; k++) {
        mta_config c = cfgs[k];
        const int B = c.B, H = c.H, Hkv = c.H_kv, T = c.T, d = c.d, rep = H / Hkv;
        tu_case *g = tu_case_new(&c, 17, 1.0f, 0.3f);
        c.H_kv = H;
        tu_case *m = tu_case_new(&c, 17, 1.0f, 0.3f);  // the same q, dout and parameters
        const size_t Td = (size_t)T * d;
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++) {
                memcpy(m->k + ((size_t)b * H + h) * Td, g->k + ((size_t)b * Hkv + h / rep) * Td, Td * sizeof(float));
                memcpy(m->v + ((size_t)b * H + h) * Td, g->v + ((size_t)b * Hkv + h / rep) * Td, Td * sizeof(float));
            }
        assert_int_equal(tu_case_train(g, NULL), MTA_OK);
        assert_int_equal(tu_case_train(m, NULL), MTA_OK);
        const double eo = tu_max_abs_diff(g->out, m->out, g->n) / tu_max_abs(m->out, m->n);
        const double eq = tu_max_abs_diff(g->dq, m->dq, g->n) / tu_max_abs(m->dq, m->n);
        // dk, dv of the repeated heads summed per kv head, in head order
        float *sum = calloc(2 * g->nkv, sizeof(float));
        assert_non_null(sum);
        for (int t = 0; t < 2; t++)
            for (int b = 0; b < B; b++)
                for (int h = 0; h < H; h++)
                    for (size_t e = 0; e < Td; e++)
                        sum[t * g->nkv + ((size_t)b * Hkv + h / rep) * Td + e] += (t ? m->dv : m->dk)[((size_t)b * H + h) * Td + e];
        const double ek = tu_max_abs_diff(g->dk, sum, g->nkv) / tu_max_abs(sum, g->nkv);
        const double ev = tu_max_abs_diff(g->dv, sum + g->nkv, g->nkv) / tu_max_abs(sum + g->nkv, g->nkv);
        double ew = 0;
        for (int i = 0; i < MTA_N_PARAMS; i++)
            if (g->wn[i]) ew = tu_worst(ew, tu_max_abs_diff(g->gw[i], m->gw[i], g->wn[i]) / fmax(1e-6, tu_max_abs(m->gw[i], m->wn[i])));
        const double bound = tu_rounding_bound(tu_rounding_noise(m, 17));
        if (!(tu_worst(tu_worst(eo, eq), tu_worst(tu_worst(ek, ev), ew)) <= bound))
            fail_msg("case %d (H=%d, H_kv=%d): grouped-query differs from repeated k, v: out %.3g, dq %.3g, dk %.3g, dv %.3g, "
                     "parameters %.3g (bound %.3g)", k, H, Hkv, eo, eq, ek, ev, ew, bound);
        free(sum);
        tu_case_free(g), tu_case_free(m);
    }
}

// Rows [s,e) of every head of (b, heads, T, d) tensor x copied into y (heads, e-s, d) (to = 1),
// or y's rows copied back into x's (to = 0).
static void doc_rows(float *x, float *y, int b, int heads, int T, int d, int s, int e, int to) {
    for (int h = 0; h < heads; h++) {
        float *xr = x + (((size_t)b * heads + h) * T + s) * d, *yr = y + (size_t)h * (e - s) * d;
        memcpy(to ? yr : xr, to ? xr : yr, (size_t)(e - s) * d * sizeof(float));
    }
}

// One packed case against its documents run alone: every document of every sequence becomes a
// case of B = 1, T = its length, with the packed case's rows of q, k, v, dout and its
// parameters; the packed out, dq, dk, dv are assembled from the documents' and the parameter
// gradients summed over them. Returns the worst difference over its float32 bound
// (tu_rounding_check on the packed run), *which the tensor.
static double packed_vs_alone(const mta_config *c, const int32_t *doc, uint64_t seed, const char **which) {
    const int B = c->B, H = c->H, Hkv = c->H_kv ? c->H_kv : c->H, T = c->T, d = c->d;
    tu_case *p = tu_case_new(c, seed, 1.0f, 0.3f), *a = tu_case_new(c, seed, 1.0f, 0.3f);
    assert_non_null(p);
    assert_non_null(a);
    tu_case_set_docs(p, doc);
    assert_int_equal(tu_case_train(p, NULL), MTA_OK);
    for (int i = 0; i < MTA_N_PARAMS; i++)
        if (a->wn[i]) memset(a->gw[i], 0, a->wn[i] * sizeof(float));
    for (int b = 0; b < B; b++)
        for (int s0 = 0, e; s0 < T; s0 = e) {
            for (e = s0 + 1; e < T && doc[(size_t)b * T + e] == doc[(size_t)b * T + e - 1];) e++;
            mta_config one = *c;
            one.B = 1, one.T = e - s0;
            tu_case *x = tu_case_new(&one, 1, 1.0f, 0.0f);
            assert_non_null(x);
            doc_rows(p->q, x->q, b, H, T, d, s0, e, 1), doc_rows(p->dout, x->dout, b, H, T, d, s0, e, 1);
            doc_rows(p->k, x->k, b, Hkv, T, d, s0, e, 1), doc_rows(p->v, x->v, b, Hkv, T, d, s0, e, 1);
            for (int i = 0; i < MTA_N_PARAMS; i++)
                if (x->wn[i]) memcpy(x->w[i], p->w[i], x->wn[i] * sizeof(float));
            assert_int_equal(tu_case_run(x, 1), MTA_OK);
            doc_rows(a->out, x->out, b, H, T, d, s0, e, 0), doc_rows(a->dq, x->dq, b, H, T, d, s0, e, 0);
            doc_rows(a->dk, x->dk, b, Hkv, T, d, s0, e, 0), doc_rows(a->dv, x->dv, b, Hkv, T, d, s0, e, 0);
            for (int i = 0; i < MTA_N_PARAMS; i++)
                for (size_t j = 0; j < x->wn[i]; j++) a->gw[i][j] += x->gw[i][j];
            tu_case_free(x);
        }
    const double q = tu_rounding_check(a, p, seed, which);
    tu_case_free(p), tu_case_free(a);
    return q;
}

// Packed documents (mta_set_documents) equal each document run alone, for every combination of
// the steps on the shapes with documents (one with grouped-query attention), within float32
// rounding (tu_rounding_check: the packed sums run over more, zero, terms and the parameters'
// gradients are summed in another order); and a sequence of one document gives the same bits as
// no documents.
static void test_packed_equals_alone(void **s) {
    (void)s;
    int failed = 0;
    double worst = 0;
    for (int shape = 0; shape < TU_NSHAPES; shape++)
        for (int mask = 0; mask < TU_NCOMBOS; mask++) {
            const mta_config c = tu_combo(shape, mask, 0.0f);
            int32_t doc[128];
            assert_true(c.B * c.T <= 128);
            if (!tu_combo_docs(shape, &c, doc)) continue;
            const char *which;
            const double q = packed_vs_alone(&c, doc, 300 + mask, &which);
            worst = tu_worst(worst, q);
            char name[64];
            if (!(q <= 1) && failed++ < 20)
                print_error("shape %d, %s: packed documents' %s differs from the documents alone by %.3g times its "
                            "bound\n", shape, tu_combo_name(mask, name, sizeof name), which, q);
        }
    print_message("packed documents against each alone: worst difference over its bound %.3g\n", worst);
    if (failed) fail_msg("%d combinations differ", failed);
    mta_config c = tu_combo(8, TU_NCOMBOS - 1, 0.25f);
    tu_case *a = tu_case_new(&c, 9, 1.0f, 0.3f), *b = tu_case_new(&c, 9, 1.0f, 0.3f);
    int32_t one[128] = {0};
    for (int i = 0; i < c.B * c.T; i++) one[i] = 7 + i / c.T;  // each sequence one id
    tu_case_set_docs(b, one);
    assert_int_equal(tu_case_train(a, NULL), MTA_OK);
    assert_int_equal(tu_case_train(b, NULL), MTA_OK);
    assert_true(tu_same_bits(a, b));
    tu_case_free(a), tu_case_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_packed_equals_alone),
        cmocka_unit_test(test_gqa_full_heads_same_bits), cmocka_unit_test(test_gqa_equals_repeated_kv),
        cmocka_unit_test(test_identity_equals_plain), cmocka_unit_test(test_causality),
        cmocka_unit_test(test_deterministic),         cmocka_unit_test(test_backward_accumulates),
        cmocka_unit_test(test_bad_configs),           cmocka_unit_test(test_bad_calls),
        cmocka_unit_test(test_param_sizes_and_identity), cmocka_unit_test(test_param_table),
        cmocka_unit_test(test_config_from_shapes),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_attention_map),     cmocka_unit_test(test_nonfinite_propagates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
