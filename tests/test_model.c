// test_model.c: the MTA transformer: config parsing, presets and parameter counts, gradients
// against finite differences, identity MTA == baseline, causality, dropout, weights round trip.
#include "model/model.h"
#include "model_tol.h"
#include "testutil.h"
#include "data/tokenizer.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *TINY_MTA =
    "{\"dim\": 8, \"n_layers\": 2, \"n_heads\": 2, \"vocab_size\": 11, \"hidden_dim\": 12,"
    " \"mta\": {\"qk_layers\": [1], \"pre_cq\": 2, \"pre_ck\": 3, \"post_cq\": 2, \"post_ck\": 3,"
    " \"pre_head_mix\": true, \"post_ch\": 2, \"group_norm\": true, \"depth_scale\": true, \"gate\": true}}";

static model *make(const char *json, uint64_t seed) {
    model_config c;
    char msg[256];
    if (model_config_from_json(json, &c, msg, sizeof msg)) fail_msg("%s", msg);
    model *m = model_create(&c, msg, sizeof msg);
    if (!m) fail_msg("%s", msg);
    model_set_backend(m, tu_backend());
    model_init(m, seed);
    return m;
}

static void tokens_for(int *tok, int *tgt, int n, int V, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
        tok[i] = (int)((seed >> 33) % V);
        tgt[i] = (i % 4 == 3) ? -1 : (int)((seed >> 13) % V);  // some ignored targets
    }
}

static void test_presets_and_counts(void **s) {
    (void)s;
    model_config c;
    char msg[256];
    assert_int_equal(model_preset("830m", &c), 0);
    model *m = model_create(&c, msg, sizeof msg);
    assert_non_null(m);
    assert_int_equal(model_num_params(m), 876583320);  // the paper's MTA count
    model_free(m);
    assert_int_equal(model_preset("830m-baseline", &c), 0);
    m = model_create(&c, msg, sizeof msg);
    assert_int_equal(model_num_params(m), 876553728);  // the paper's baseline count
    model_free(m);
    const char *ok[] = {"toy", "toy-baseline", "lm1m", "lm10m-baseline", "300m"};
    for (int i = 0; i < 5; i++) {
        assert_int_equal(model_preset(ok[i], &c), 0);
        assert_int_equal(model_config_check(&c, msg, sizeof msg), 0);
    }
    assert_int_equal(model_preset("830m-base", &c), -1);
    assert_int_equal(model_preset("nope", &c), -1);
}

// Writes *c as JSON and reads it back: the same config, bit for bit. Returns the text (to free).
static char *written_again(const model_config *c) {
    model_config c2;
    char msg[256];
    char *js = model_config_to_json(c);
    if (model_config_from_json(js, &c2, msg, sizeof msg)) fail_msg("%s\n%s", msg, js);
    assert_memory_equal(c, &c2, sizeof *c);
    return js;
}

static void expect_bad(const char *json, const char *needle) {
    model_config c;
    char msg[256] = "";
    assert_int_equal(model_config_from_json(json, &c, msg, sizeof msg), -1);
    if (!strstr(msg, needle)) fail_msg("'%s' does not mention '%s'", msg, needle);
}

static void test_config_errors(void **s) {
    (void)s;
    expect_bad("{", "not a JSON object");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"dim\": 16}", "key 'dim' appears twice");
    expect_bad("{\"dim\": 8, \"n_layers\": 2, \"n_heads\": 2, \"vocab_size\": 5, \"mta\": {\"gate\": true, \"gate\": false}}",
               "key 'gate' appears twice in 'mta'");
    // nothing after the object but white space (cJSON_Parse alone ignores the rest)
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5}}", "not a JSON object");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5} {\"dim\": 4}", "not a JSON object");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"dmi\": 3}", "unknown key 'dmi'");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 3, \"vocab_size\": 5}", "not divisible");
    expect_bad("{\"dim\": 8.5, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5}", "integer");
    expect_bad("{\"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5}", "required");
    expect_bad("{\"dim\": 6, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5}", "even");
    expect_bad("{\"dim\": 8, \"n_layers\": 2, \"n_heads\": 2, \"vocab_size\": 5, \"mta\": {\"qk_layers\": [2]}}",
               "qk_layers");
    expect_bad("{\"dim\": 8, \"n_layers\": 2, \"n_heads\": 2, \"vocab_size\": 5, \"mta\": {\"pre_cq\": 2, \"pre_ck\": 4}}",
               "odd");
    expect_bad("{\"dim\": 8, \"n_layers\": 2, \"n_heads\": 2, \"vocab_size\": 5, \"mta\": {\"gate\": 1}}", "true or false");
    expect_bad("{\"dim\": 8, \"n_layers\": 2, \"n_heads\": 2, \"vocab_size\": 5, \"mta\": {\"post_ch\": 3}}", "divide");
    expect_bad("{\"dim\": 8, \"n_layers\": 2, \"n_heads\": 2, \"vocab_size\": 5, \"attn_dropout\": 1.5}", "dropout");
    // Floats must be finite float32 values in their ranges, and the message names the key: a
    // rope_theta of 1e39 used to become inf, train, and be written back as null.
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"rope_theta\": 1e39}",
               "'rope_theta' = 1e+39 is outside the range of a float32");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"rope_theta\": 1e999}",
               "'rope_theta' = inf");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"rope_theta\": 0}", "rope_theta must be");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"rope_theta\": -2}", "rope_theta must be");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"norm_eps\": 1e-50}",
               "'norm_eps' = 1e-50 is outside the range of a float32");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"norm_eps\": 0}", "norm_eps must be");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"norm_eps\": -1e-5}", "norm_eps must be");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"attn_dropout\": 1}", "attn_dropout must be");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"attn_dropout\": -0.1}", "attn_dropout must be");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"attn_dropout\": \"0.1\"}", "must be a number");
    // and the round trip through JSON
    model_config c;
    char msg[256];
    assert_int_equal(model_config_from_json(TINY_MTA, &c, msg, sizeof msg), 0);
    free(written_again(&c));
    // Configs made in code go through the same checks (the preset path of mtac train).
    assert_int_equal(model_preset("lm1m", &c), 0);
    c.rope_theta = INFINITY;
    assert_int_equal(model_config_check(&c, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "rope_theta"));
    c.rope_theta = 1e4f, c.norm_eps = NAN;
    assert_int_equal(model_config_check(&c, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "norm_eps"));
}

// Whatever the checks accept is written back in a form they accept again, bit for bit: the
// extremes of every float (the largest float32, the smallest subnormal, dropout just below 1).
static void test_config_round_trip_extremes(void **s) {
    (void)s;
    model_config c;
    char msg[256];
    assert_int_equal(model_config_from_json(TINY_MTA, &c, msg, sizeof msg), 0);
    const float theta[] = {FLT_MAX, 1e-45f, 1.0f, 10000.0f}, eps[] = {1e-45f, FLT_MIN, 3e38f, 1e-5f},
                drop[] = {0.99999994f, 0.0f, 0.1f, 1e-45f};
    for (int i = 0; i < 4; i++) {
        c.rope_theta = theta[i], c.norm_eps = eps[i], c.attn_dropout = drop[i];
        assert_int_equal(model_config_check(&c, msg, sizeof msg), 0);
        free(written_again(&c));
    }
}

static double loss_of(model *m, const int *tok, const int *tgt, int B, int T) {
    float loss;
    char msg[256];
    if (model_forward(m, tok, tgt, B, T, &loss, msg, sizeof msg)) fail_msg("%s", msg);
    return loss;
}

// Every parameter tensor: central differences of the loss against the backward.
static void gradcheck_model(const char *json, float dropout) {
    model_config c;
    char msg[256];
    assert_int_equal(model_config_from_json(json, &c, msg, sizeof msg), 0);
    c.attn_dropout = dropout;
    model *m = model_create(&c, msg, sizeof msg);
    model_set_backend(m, tu_backend());
    model_init(m, 3);
    // perturb MTA kernels away from identity so every path carries gradient
    int nt;
    const model_tensor *ts = model_tensors(m, &nt);
    uint64_t sd = 77;
    for (int i = 0; i < nt; i++)
        if (strstr(ts[i].name, ".mta.") || strstr(ts[i].name, "norm"))
            for (size_t j = 0; j < ts[i].numel; j++) model_params(m)[ts[i].offset + j] += 0.2f * tu_randn(&sd);
    const int B = 2, T = 6;
    int tok[12], tgt[12];
    tokens_for(tok, tgt, B * T, c.vocab_size, 5);
    model_set_training(m, dropout > 0, 1234);
    model_zero_grad(m);
    loss_of(m, tok, tgt, B, T);
    assert_int_equal(model_backward(m, msg, sizeof msg), 0);
    float *g = malloc(model_num_params(m) * sizeof(float));
    memcpy(g, model_grads(m), model_num_params(m) * sizeof(float));
    int bad = 0, checked = 0;
    double worst = 0;  // the largest error's share of its bound
    // small: the loss curves fast in the MTA kernels; large against the rounding of the loss
    // (u |L| / eps ~ 5e-5, of gradients ~ 0.04)
    const float eps = 3e-3f;
    for (int i = 0; i < nt; i++) {
        size_t stride = ts[i].numel > 12 ? ts[i].numel / 12 : 1;
        for (size_t j = 0; j < ts[i].numel; j += stride) {
            float *p = model_params(m) + ts[i].offset + j;
            float p0 = *p;
            *p = p0 + eps;
            double lp = loss_of(m, tok, tgt, B, T);
            *p = p0 - eps;
            double lm = loss_of(m, tok, tgt, B, T);
            *p = p0 + 2 * eps;
            double lp2 = loss_of(m, tok, tgt, B, T);
            *p = p0 - 2 * eps;
            double lm2 = loss_of(m, tok, tgt, B, T);
            *p = p0;
            const double fd = (lp - lm) / (2 * eps), fd2 = (lp2 - lm2) / (4 * eps), an = g[ts[i].offset + j];
            // The central difference's error, from the data: its truncation, eps^2 |L'''| / 6, is
            // a quarter of fd2's, so |fd2 - fd| is three times it (Richardson), and it also holds
            // both differences' rounding noise; twice that, against the next order's terms. A
            // floor for rounding where fd2 and fd agree by chance: each float32 loss is rounded to
            // within u|L|/2, and the losses at nearby points share their summation orders, so
            // lp - lm carries a few ulps of L: 4 u |L| / eps. A wrong gradient is off by about
            // itself, typically 100 times this bound.
            const double tol = 2 * fabs(fd2 - fd) + 4 * MT_U * fabs(lp) / eps;
            checked++, worst = tu_worst(worst, fabs(fd - an) / tol);
            if (!tu_close(fd, an, tol, 0)) {  // a NaN or infinity in either fails
                if (bad < 8) fprintf(stderr, "  %s[%zu]: analytic %.6g, finite difference %.6g (bound %.3g)\n", ts[i].name, j, an, fd, tol);
                bad++;
            }
        }
    }
    fprintf(stderr, "  %d of %d parameter entries agree with finite differences (worst: %.2g of its bound)\n", checked - bad,
            checked, worst);
    free(g);
    model_free(m);
    assert_int_equal(bad, 0);
}

static void test_gradcheck_mta(void **s) {
    (void)s;
    gradcheck_model(TINY_MTA, 0.0f);
}

static void test_gradcheck_baseline(void **s) {
    (void)s;
    gradcheck_model("{\"dim\": 8, \"n_layers\": 2, \"n_heads\": 2, \"vocab_size\": 11, \"hidden_dim\": 12}", 0.0f);
}

static void test_gradcheck_dropout(void **s) {
    (void)s;
    gradcheck_model(TINY_MTA, 0.3f);  // a fixed seed fixes the mask, so the loss is smooth
}

// Identity kernels (no norm, no gate) reproduce the baseline with the same other weights.
static void test_identity_mta_equals_baseline(void **s) {
    (void)s;
    const char *mj = "{\"dim\": 16, \"n_layers\": 2, \"n_heads\": 4, \"vocab_size\": 13, \"hidden_dim\": 24,"
                     " \"mta\": {\"qk_layers\": [0, 1], \"pre_cq\": 3, \"pre_ck\": 5, \"post_cq\": 2, \"post_ck\": 3,"
                     " \"pre_head_mix\": true, \"post_ch\": 2}}";
    model *a = make(mj, 9);
    model *b = make("{\"dim\": 16, \"n_layers\": 2, \"n_heads\": 4, \"vocab_size\": 13, \"hidden_dim\": 24}", 9);
    // every baseline tensor of a into b by name (the MTA tensors are identity in a)
    assert_int_equal(model_copy_matching(b, a), 2 + 2 * 9);  // embedding, final norm; 9 per layer
    int tok[2 * 9], tgt[2 * 9];
    tokens_for(tok, tgt, 18, 13, 2);
    double la = loss_of(a, tok, tgt, 2, 9), lb = loss_of(b, tok, tgt, 2, 9);
    // identity kernels multiply by 1 and add zeros, but the MTA path may sum in another order
    // (model_tol.h); the loss, a mean of log-softmaxes of the logits, inherits their relative
    // error, with |loss| ~ ln V of the same order as the largest logit's scale
    const double tol = mt_tol_logits(model_cfg(a), 9);
    assert_true(mt_within("identity MTA against baseline, loss", fabs(la - lb) / fabs(lb), tol));
    assert_true(mt_within("identity MTA against baseline, logits",
                          tu_max_abs_diff(model_logits(a), model_logits(b), 2 * 9 * 13) / tu_max_abs(model_logits(b), 2 * 9 * 13), tol));
    model_free(a);
    model_free(b);
}

// mtac convert --add-mta's promise: `c` (base's configuration with MTA steps) given identity kernels
// and base's other weights (n_copied tensors) computes base's logits. The fused backend (the
// default) gives the same bits: identity kernels multiply by 1 and add zeros. The reference
// backend sums the MTA path in another order: float32 round-off.
static void expect_retrofit_equal(model *base, const model_config *c, uint64_t seed, int n_copied, const char *what) {
    char msg[256];
    model *mta = model_create(c, msg, sizeof msg);
    assert_non_null(mta);
    model_set_backend(mta, tu_backend());
    model_init(mta, seed);
    assert_int_equal(model_copy_matching(mta, base), n_copied);
    const int V = c->vocab_size, n = 2 * 20 * V;
    int tok[2 * 20], tgt[2 * 20];
    tokens_for(tok, tgt, 40, V, 4);
    loss_of(base, tok, tgt, 2, 20);
    loss_of(mta, tok, tgt, 2, 20);
    const double diff = tu_max_abs_diff(model_logits(base), model_logits(mta), n);
    if (tu_backend() == MTA_BACKEND_FUSED) assert_true(diff == 0);
    else assert_true(mt_within(what, diff / tu_max_abs(model_logits(base), n), mt_tol_logits(model_cfg(mta), 20)));
    model_free(mta);
}

// mtac convert --add-mta's model: the paper's pattern without norm and gate, identity kernels, the
// baseline's other weights: the same logits as the baseline (layer 2 has the convolutions).
static void test_retrofit_equals_baseline(void **s) {
    (void)s;
    model *base = make("{\"dim\": 16, \"n_layers\": 3, \"n_heads\": 4, \"vocab_size\": 13, \"hidden_dim\": 24}", 5);
    model_config c = *model_cfg(base);
    model_config_mta_pattern(&c, 0);
    assert_int_equal(c.qk_layer[2], 1);
    expect_retrofit_equal(base, &c, 77, 2 + 3 * 9, "retrofit against baseline, reference backend");
    model_free(base);
}

// Logits at position t do not depend on tokens after t.
static void test_causal(void **s) {
    (void)s;
    model *m = make(TINY_MTA, 4);
    int tok[10], tgt[10];
    tokens_for(tok, tgt, 10, 11, 8);
    loss_of(m, tok, tgt, 1, 10);
    float ref[10 * 11];
    memcpy(ref, model_logits(m), sizeof ref);
    tok[7] = (tok[7] + 1) % 11, tok[9] = (tok[9] + 5) % 11;
    loss_of(m, tok, tgt, 1, 10);
    assert_memory_equal(ref, model_logits(m), 7 * 11 * sizeof(float));
    const double moved = tu_max_abs_diff(ref + 7 * 11, model_logits(m) + 7 * 11, 11);
    assert_true(moved > 0 && moved < INFINITY);  // infinite: a NaN, not a change
    model_free(m);
}

static void test_dropout_modes(void **s) {
    (void)s;
    model_config c;
    char msg[256];
    assert_int_equal(model_config_from_json(TINY_MTA, &c, msg, sizeof msg), 0);
    model *plain = model_create(&c, msg, sizeof msg);
    c.attn_dropout = 0.5f;
    model *drop = model_create(&c, msg, sizeof msg);
    model_set_backend(plain, tu_backend()), model_set_backend(drop, tu_backend());
    model_init(plain, 1), model_init(drop, 1);
    int tok[12], tgt[12];
    tokens_for(tok, tgt, 12, 11, 3);
    double l0 = loss_of(plain, tok, tgt, 2, 6), le = loss_of(drop, tok, tgt, 2, 6);
    assert_true(l0 == le);  // evaluation: no dropout
    model_set_training(drop, 1, 42);
    double l1 = loss_of(drop, tok, tgt, 2, 6), l1b = loss_of(drop, tok, tgt, 2, 6);
    model_set_training(drop, 1, 43);
    double l2 = loss_of(drop, tok, tgt, 2, 6);
    assert_true(l1 == l1b);  // same seed, same mask
    assert_true(l1 != l0 && l2 != l1);
    model_free(plain);
    model_free(drop);
}

// Grouped-query attention (n_kv_heads): 4 query heads on 2 kv heads, every MTA step.
#define GQA_BASE "\"dim\": 16, \"n_layers\": 2, \"n_heads\": 4, \"vocab_size\": 11, \"hidden_dim\": 12"
static const char *GQA_MTA =
    "{" GQA_BASE ", \"n_kv_heads\": 2, \"mta\": {\"qk_layers\": [1], \"pre_cq\": 2, \"pre_ck\": 3, \"post_cq\": 2,"
    " \"post_ck\": 3, \"pre_head_mix\": true, \"post_ch\": 2, \"group_norm\": true, \"depth_scale\": true, \"gate\": true}}";

static void test_gqa_config_errors(void **s) {
    (void)s;
    const struct {
        const char *kv, *needle;
    } bad[] = {{"3", "n_kv_heads=3 must divide n_heads=4"},
               {"8", "must divide"},
               {"-1", "'n_kv_heads' must be an integer"},
               {"1.5", "'n_kv_heads' must be an integer"}};
    char js[128];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(js, sizeof js, "{" GQA_BASE ", \"n_kv_heads\": %s}", bad[i].kv);
        expect_bad(js, bad[i].needle);
    }
}

static void test_gqa_config(void **s) {
    (void)s;
    model_config c, c2;
    char msg[256];
    // written only when below n_heads: n_kv_heads = n_heads (or 0) reads and writes as without it
    assert_int_equal(model_config_from_json("{" GQA_BASE "}", &c, msg, sizeof msg), 0);
    char *plain = written_again(&c);
    assert_null(strstr(plain, "n_kv_heads"));
    const char *same[2] = {"{" GQA_BASE ", \"n_kv_heads\": 4}", "{" GQA_BASE ", \"n_kv_heads\": 0}"};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(model_config_from_json(same[i], &c2, msg, sizeof msg), 0);
        assert_memory_equal(&c, &c2, sizeof c);
        char *js = model_config_to_json(&c2);
        assert_string_equal(js, plain);
        free(js);
    }
    free(plain);
    assert_int_equal(model_config_from_json(GQA_MTA, &c, msg, sizeof msg), 0);
    assert_int_equal(c.n_kv_heads, 2);
    char *js = written_again(&c);
    assert_non_null(strstr(js, "\"n_kv_heads\":\t2"));
    free(js);
    // configs made in code: the same check
    c.n_kv_heads = 3;
    assert_int_equal(model_config_check(&c, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "n_kv_heads"));
    // wk, wv (n_kv_heads * head_dim, dim); the layer's operator config takes H_kv
    c.n_kv_heads = 2;
    model *m = model_create(&c, msg, sizeof msg);
    assert_non_null(m);
    int nt, seen = 0;
    const model_tensor *ts = model_tensors(m, &nt);
    for (int i = 0; i < nt; i++)
        if (strstr(ts[i].name, "attention.wk.") || strstr(ts[i].name, "attention.wv.")) {
            assert_int_equal(ts[i].shape[0], 8);
            assert_int_equal(ts[i].shape[1], 16);
            seen++;
        } else if (strstr(ts[i].name, "attention.wq.") || strstr(ts[i].name, "attention.wo.")) {
            assert_int_equal(ts[i].shape[0], 16);
        }
    assert_int_equal(seen, 4);
    assert_int_equal(model_layer_mta_config(&c, 1, 2, 5).H_kv, 2);
    assert_int_equal(model_layer_mta_config(&c, 1, 2, 5).H, 4);
    model_free(m);
}

static void test_gradcheck_gqa(void **s) {
    (void)s;
    gradcheck_model(GQA_MTA, 0.0f);
    gradcheck_model("{" GQA_BASE ", \"n_kv_heads\": 1}", 0.0f);
}

// n_kv_heads = n_heads is the model without it, bit for bit (weights, loss, gradients); a model
// on 2 kv heads equals the one on 4 whose wk, wv repeat each kv head's rows for its query heads.
static void test_gqa_equals_repeated(void **s) {
    (void)s;
    const char *mj = "\"mta\": {\"qk_layers\": [0, 1], \"pre_cq\": 2, \"pre_ck\": 3, \"post_cq\": 2, \"post_ck\": 3,"
                     " \"pre_head_mix\": true, \"post_ch\": 2, \"group_norm\": true, \"gate\": true}}";
    char j_full[512], j_same[512], j_gqa[512];
    snprintf(j_full, sizeof j_full, "{" GQA_BASE ", %s", mj);
    snprintf(j_same, sizeof j_same, "{" GQA_BASE ", \"n_kv_heads\": 4, %s", mj);
    snprintf(j_gqa, sizeof j_gqa, "{" GQA_BASE ", \"n_kv_heads\": 2, %s", mj);
    model *a = make(j_full, 4), *b = make(j_same, 4), *g = make(j_gqa, 4);
    assert_int_equal(model_num_params(a), model_num_params(b));
    assert_memory_equal(model_params(a), model_params(b), model_num_params(a) * sizeof(float));
    int tok[2 * 7], tgt[2 * 7];
    tokens_for(tok, tgt, 14, 11, 6);
    char msg[256];
    model_zero_grad(a), model_zero_grad(b);
    const double la = loss_of(a, tok, tgt, 2, 7), lb = loss_of(b, tok, tgt, 2, 7);
    assert_memory_equal(&la, &lb, sizeof la);
    assert_int_equal(model_backward(a, msg, sizeof msg), 0);
    assert_int_equal(model_backward(b, msg, sizeof msg), 0);
    assert_memory_equal(model_grads(a), model_grads(b), model_num_params(a) * sizeof(float));
    // a takes g's weights, wk and wv with kv head h/2's rows for head h
    const int d = 4, D = 16;
    model_weights wa = model_weights_of(a, model_params(a)), wg = model_weights_of(g, model_params(g));
    assert_int_equal(model_copy_matching(a, g), 2 + 2 * (7 + 7));  // all but wk, wv (7 MTA tensors a layer)
    for (int l = 0; l < 2; l++)
        for (int h = 0; h < 4; h++) {
            memcpy(wa.layer[l].wk + (size_t)h * d * D, wg.layer[l].wk + (size_t)(h / 2) * d * D, (size_t)d * D * sizeof(float));
            memcpy(wa.layer[l].wv + (size_t)h * d * D, wg.layer[l].wv + (size_t)(h / 2) * d * D, (size_t)d * D * sizeof(float));
        }
    // the same sums in another order (grouped heads share a product): model_tol.h; the loss as
    // in test_identity_mta_equals_baseline
    const double l1 = loss_of(a, tok, tgt, 2, 7), l2 = loss_of(g, tok, tgt, 2, 7), tol = mt_tol_logits(model_cfg(g), 7);
    assert_true(mt_within("grouped-query against repeated heads, loss", fabs(l1 - l2) / fabs(l2), tol));
    assert_true(mt_within("grouped-query against repeated heads, logits",
                          tu_max_abs_diff(model_logits(a), model_logits(g), 2 * 7 * 11) / tu_max_abs(model_logits(g), 2 * 7 * 11), tol));
    model_free(a), model_free(b), model_free(g);
}

// Packed documents (doc_mask): 2 heads, vocabulary of bytes and the special tokens (EOS = 257),
// every MTA step in both layers, so the convolution windows would reach across documents.
#define DOC_BASE "\"dim\": 16, \"n_layers\": 2, \"n_heads\": 2, \"vocab_size\": 259, \"hidden_dim\": 24"
#define DOC_MTA                                                                                                     \
    "\"mta\": {\"qk_layers\": [0, 1], \"pre_cq\": 2, \"pre_ck\": 3, \"post_cq\": 3, \"post_ck\": 3,"               \
    " \"pre_head_mix\": true, \"post_ch\": 2, \"group_norm\": true, \"depth_scale\": true, \"gate\": true}}"

static void test_doc_mask_config(void **s) {
    (void)s;
    expect_bad("{" DOC_BASE ", \"doc_mask\": 2}", "'doc_mask' must be an integer in [0, 1]");
    expect_bad("{" DOC_BASE ", \"doc_mask\": true}", "'doc_mask' must be an integer");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 257, \"doc_mask\": 1}", "no EOS token");
    model_config c, c2;
    char msg[256];
    // written only when on: 0 or absent read and write as before
    assert_int_equal(model_config_from_json("{" DOC_BASE ", " DOC_MTA, &c, msg, sizeof msg), 0);
    char *plain = model_config_to_json(&c);
    assert_null(strstr(plain, "doc_mask"));
    assert_int_equal(model_config_from_json("{" DOC_BASE ", \"doc_mask\": 0, " DOC_MTA, &c2, msg, sizeof msg), 0);
    assert_memory_equal(&c, &c2, sizeof c);
    free(plain);
    assert_int_equal(model_config_from_json("{" DOC_BASE ", \"doc_mask\": 1, " DOC_MTA, &c, msg, sizeof msg), 0);
    assert_int_equal(c.doc_mask, 1);
    char *js = model_config_to_json(&c);
    assert_non_null(strstr(js, "\"doc_mask\":\t1"));
    assert_int_equal(model_config_from_json(js, &c2, msg, sizeof msg), 0);
    free(js);
    assert_memory_equal(&c, &c2, sizeof c);
    c.doc_mask = 2;  // configs made in code: the same check
    assert_int_equal(model_config_check(&c, msg, sizeof msg), -1);
}

static model *make_doc(int doc_mask, uint64_t seed) {
    char js[512];
    snprintf(js, sizeof js, "{" DOC_BASE ", \"doc_mask\": %d, " DOC_MTA, doc_mask);
    model *m = make(js, seed);
    int nt;
    const model_tensor *ts = model_tensors(m, &nt);
    uint64_t sd = seed + 1;  // kernels away from the identity: the windows mix neighbours
    for (int i = 0; i < nt; i++)
        if (strstr(ts[i].name, ".mta."))
            for (size_t j = 0; j < ts[i].numel; j++) model_params(m)[ts[i].offset + j] += 0.3f * tu_randn(&sd);
    return m;
}

// A packed batch (rows of documents of 1 to 9 tokens, each but a row's last ending with EOS)
// computes each document's logits as the document alone does, and its gradient is the sum of
// the documents' gradients weighted by their share of the targets (the loss is the mean).
static void test_packed_equals_alone(void **s) {
    (void)s;
    enum { B = 2, T = 16, V = 259 };
    const int lens[B][4] = {{5, 7, 4, 0}, {1, 9, 6, 0}};
    int tok[B * T], tgt[B * T];
    tokens_for(tok, tgt, B * T, 256, 9);  // bytes: no EOS but those placed below
    for (int b = 0; b < B; b++)
        for (int i = 0, at = 0; lens[b][i]; at += lens[b][i++])
            if (lens[b][i + 1]) tok[b * T + at + lens[b][i] - 1] = TOK_EOS;
    model *m = make_doc(1, 21);
    const size_t np = model_num_params(m);
    model_zero_grad(m);
    loss_of(m, tok, tgt, B, T);
    assert_int_equal(model_backward(m, (char[256]){0}, 256), 0);
    float *packed = malloc((size_t)B * T * V * sizeof(float)), *g = malloc(np * sizeof(float)), *sum = calloc(np, sizeof(float));
    memcpy(packed, model_logits(m), (size_t)B * T * V * sizeof(float));
    memcpy(g, model_grads(m), np * sizeof(float));
    int valid = 0;
    for (int i = 0; i < B * T; i++) valid += tgt[i] >= 0;
    double worst = 0, scale = 0;
    for (int b = 0; b < B; b++)
        for (int i = 0, at = 0; lens[b][i]; at += lens[b][i++]) {
            const int n = lens[b][i], *dt = tok + b * T + at, *dg = tgt + b * T + at;
            int dvalid = 0;
            for (int t = 0; t < n; t++) dvalid += dg[t] >= 0;
            model_zero_grad(m);
            loss_of(m, dt, dg, 1, n);
            if (dvalid) assert_int_equal(model_backward(m, (char[256]){0}, 256), 0);
            for (size_t j = 0; dvalid && j < np; j++) sum[j] += model_grads(m)[j] * ((float)dvalid / valid);
            for (size_t j = 0; j < (size_t)n * V; j++) {
                const double want = packed[((size_t)b * T + at) * V + j];
                worst = tu_worst(worst, fabs(model_logits(m)[j] - want)), scale = fmax(scale, fabs(want));
            }
        }
    // the same sums over other lengths and blocks (model_tol.h); the weighted sum of the
    // documents' gradients adds one rounding per document, within the B*T term
    assert_true(mt_within("packed logits against each document alone", worst / scale, mt_tol_logits(model_cfg(m), T)));
    worst = scale = 0;
    for (size_t j = 0; j < np; j++) worst = tu_worst(worst, fabs(g[j] - sum[j])), scale = fmax(scale, fabs(sum[j]));
    assert_true(mt_within("packed gradient against the documents' weighted sum", worst / scale, mt_tol_grads(model_cfg(m), B, T)));
    free(packed), free(g), free(sum);
    model_free(m);
}

// doc_mask on tokens without an EOS (or with one only at a row's end) gives the same bits as
// without it: one document per row, the operator without ids.
static void test_doc_mask_one_document_same_bits(void **s) {
    (void)s;
    enum { B = 2, T = 9, V = 259 };
    int tok[B * T], tgt[B * T];
    tokens_for(tok, tgt, B * T, 256, 4);
    tok[T - 1] = TOK_EOS;
    model *a = make_doc(0, 5), *b = make_doc(1, 5);
    const size_t np = model_num_params(a);
    char msg[256];
    model_zero_grad(a), model_zero_grad(b);
    const double la = loss_of(a, tok, tgt, B, T), lb = loss_of(b, tok, tgt, B, T);
    assert_memory_equal(&la, &lb, sizeof la);
    assert_memory_equal(model_logits(a), model_logits(b), (size_t)B * T * V * sizeof(float));
    assert_int_equal(model_backward(a, msg, sizeof msg), 0);
    assert_int_equal(model_backward(b, msg, sizeof msg), 0);
    assert_memory_equal(model_grads(a), model_grads(b), np * sizeof(float));
    model_free(a), model_free(b);
}

static void test_weights_round_trip(void **s) {
    (void)s;
    model *a = make(TINY_MTA, 11), *b = make(TINY_MTA, 12);
    char msg[512];
    const char *path = "/tmp/mtac_test_model.safetensors";
    assert_int_equal(model_save_weights(a, path, msg, sizeof msg), 0);
    assert_int_equal(model_load_weights(b, path, msg, sizeof msg), 0);
    assert_memory_equal(model_params(a), model_params(b), model_num_params(a) * sizeof(float));
    model *c = make("{\"dim\": 8, \"n_layers\": 2, \"n_heads\": 2, \"vocab_size\": 11, \"hidden_dim\": 12}", 1);
    assert_int_equal(model_load_weights(c, path, msg, sizeof msg), -1);  // extra MTA tensors
    assert_non_null(strstr(msg, "unexpected tensor"));
    model_free(a), model_free(b), model_free(c);
    remove(path);
}

static void test_bad_tokens(void **s) {
    (void)s;
    model *m = make(TINY_MTA, 1);
    int tok[4] = {1, 2, 11, 0}, tgt[4] = {1, 1, 1, 1};
    char msg[256];
    float loss;
    assert_int_equal(model_forward(m, tok, tgt, 1, 4, &loss, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "outside"));
    tok[2] = 3, tgt[1] = -2;
    assert_int_equal(model_forward(m, tok, tgt, 1, 4, &loss, msg, sizeof msg), -1);
    assert_int_equal(model_forward(m, tok, tgt, 0, 4, &loss, msg, sizeof msg), -1);
    model_free(m);
}

// An imported model's config: untied output projection, llama3 RoPE scaling, 4 heads on 2 kv
// heads. Head dim 8 (pairs of inverse frequency 1, 0.056, 0.0032, 0.00018 at theta 1e5, wavelengths
// 6.3, 112, 2e3, 3.5e4) against orig_ctx 256 / high 4 = 64 and 256 / low 1 = 256: pair 0 kept,
// pair 1 interpolated, pairs 2 and 3 stretched by the factor.
#define UNTIED_BASE                                                                                                 \
    "\"dim\": 32, \"n_layers\": 2, \"n_heads\": 4, \"n_kv_heads\": 2, \"vocab_size\": 11, \"hidden_dim\": 12,"       \
    " \"tie_embeddings\": false, \"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1,"   \
    " \"high_freq_factor\": 4, \"original_max_position_embeddings\": 256}"
static const char *UNTIED_MTA =
    "{" UNTIED_BASE ", \"mta\": {\"qk_layers\": [1], \"pre_cq\": 2, \"pre_ck\": 3, \"post_cq\": 2, \"post_ck\": 3,"
    " \"pre_head_mix\": true, \"post_ch\": 2, \"group_norm\": true, \"gate\": true}}";

static void test_untied_rope_errors(void **s) {
    (void)s;
    expect_bad("{" UNTIED_BASE ", \"tie_embeddings\": 0}", "key 'tie_embeddings' appears twice");
    expect_bad("{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"tie_embeddings\": 0}", "true or false");
    const char *rs = "{\"dim\": 8, \"n_layers\": 1, \"n_heads\": 2, \"vocab_size\": 5, \"rope_scaling\": ";
    char js[512];
    const struct {
        const char *scaling, *needle;
    } bad[] = {
        {"3}", "'rope_scaling' must be an object"},
        {"{\"rope_type\": \"linear\", \"factor\": 2}}", "rope_type must be \"llama3\""},
        {"{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4}}",
         "'original_max_position_embeddings' is required"},
        {"{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 4, \"high_freq_factor\": 4,"
         " \"original_max_position_embeddings\": 8192}}", "low_freq_factor < high_freq_factor"},
        {"{\"rope_type\": \"llama3\", \"factor\": 0, \"low_freq_factor\": 1, \"high_freq_factor\": 4,"
         " \"original_max_position_embeddings\": 8192}}", "factor must be > 0"},
        {"{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4,"
         " \"original_max_position_embeddings\": 0}}", "original_max_position_embeddings' must be an integer"},
        {"{\"rope_type\": \"llama3\", \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4,"
         " \"original_max_position_embeddings\": 8192, \"type\": 1}}", "unknown key 'type' in 'rope_scaling'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(js, sizeof js, "%s%s", rs, bad[i].scaling);
        expect_bad(js, bad[i].needle);
    }
}

static void test_untied_rope_config(void **s) {
    (void)s;
    model_config c, c2;
    char msg[256];
    // tied and unscaled: neither key is written, so those configs read and write as before
    assert_int_equal(model_config_from_json(TINY_MTA, &c, msg, sizeof msg), 0);
    assert_int_equal(c.tie_embeddings, 1);
    assert_true(c.rope_factor == 0);
    char *plain = written_again(&c);
    assert_null(strstr(plain, "tie_embeddings"));
    assert_null(strstr(plain, "rope_scaling"));
    free(plain);
    assert_int_equal(model_config_from_json(UNTIED_MTA, &c, msg, sizeof msg), 0);
    assert_int_equal(c.tie_embeddings, 0);
    assert_true(c.rope_factor == 8 && c.rope_low_freq == 1 && c.rope_high_freq == 4 && c.rope_orig_ctx == 256);
    char *w = written_again(&c);
    assert_non_null(strstr(w, "\"tie_embeddings\":\tfalse"));
    assert_non_null(strstr(w, "\"rope_type\":\t\"llama3\""));
    free(w);
    // configs made in code: the same checks
    c2.rope_high_freq = 0.5f;
    assert_int_equal(model_config_check(&c2, msg, sizeof msg), -1);
    c2 = c, c2.rope_factor = 0;
    assert_int_equal(model_config_check(&c2, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "without a factor"));
    c2 = c, c2.tie_embeddings = 2;
    assert_int_equal(model_config_check(&c2, msg, sizeof msg), -1);
    // output.weight (V, D) last, after norm.weight; the tied model has none
    model *m = model_create(&c, msg, sizeof msg);
    assert_non_null(m);
    int nt;
    const model_tensor *ts = model_tensors(m, &nt);
    assert_string_equal(ts[nt - 2].name, "norm.weight");
    assert_string_equal(ts[nt - 1].name, "output.weight");
    assert_int_equal(ts[nt - 1].shape[0], 11);
    assert_int_equal(ts[nt - 1].shape[1], 32);
    assert_int_equal(ts[nt - 1].offset + ts[nt - 1].numel, model_num_params(m));
    model_weights w0 = model_weights_of(m, model_params(m));
    assert_ptr_equal(w0.output, model_params(m) + ts[nt - 1].offset);
    model_free(m);
    m = make(TINY_MTA, 1);
    assert_null(model_weights_of(m, model_params(m)).output);
    model_free(m);
}

// The untied output projection is the logits' weight, and its own: the output and the embedding
// are drawn apart, and logits move when output.weight moves, not when the embedding rows of
// tokens absent from the batch move. Weights round trip through safetensors.
static void test_untied_output(void **s) {
    (void)s;
    model *m = make(UNTIED_MTA, 2);
    model_weights w = model_weights_of(m, model_params(m));
    const size_t VD = 11 * 32;
    assert_true(memcmp(w.output, w.tok_embeddings, VD * sizeof(float)) != 0);
    int tok[6] = {1, 2, 3, 1, 2, 3}, tgt[6] = {2, 3, 1, 2, 3, 1};
    loss_of(m, tok, tgt, 1, 6);
    float ref[6 * 11];
    memcpy(ref, model_logits(m), sizeof ref);
    for (size_t j = 5 * 32; j < 6 * 32; j++) w.tok_embeddings[j] += 1.0f;  // token 5: not in the batch
    loss_of(m, tok, tgt, 1, 6);
    assert_memory_equal(ref, model_logits(m), sizeof ref);
    w.output[5 * 32] += 1.0f;  // the logit of token 5
    loss_of(m, tok, tgt, 1, 6);
    assert_true(model_logits(m)[5] != ref[5]);
    assert_true(model_logits(m)[4] == ref[4]);
    char msg[512];
    const char *path = "/tmp/mtac_test_model_untied.safetensors";
    model *b = make(UNTIED_MTA, 9);
    assert_int_equal(model_save_weights(m, path, msg, sizeof msg), 0);
    assert_int_equal(model_load_weights(b, path, msg, sizeof msg), 0);
    assert_memory_equal(model_params(m), model_params(b), model_num_params(m) * sizeof(float));
    model *tied = make(TINY_MTA, 1);
    assert_int_equal(model_load_weights(tied, path, msg, sizeof msg), -1);
    model_free(m), model_free(b), model_free(tied);
    remove(path);
}

// The grad hook's ranges tile the gradient in the order of model.h: norm with the untied output,
// the layers last to first, the embedding.
static void hook_record(void *arg, size_t lo, size_t hi) {
    size_t *r = arg;
    r[2 * r[0] + 1] = lo, r[2 * r[0] + 2] = hi, r[0]++;
}

static void test_untied_grad_hook(void **s) {
    (void)s;
    model *m = make(UNTIED_MTA, 3);
    size_t r[1 + 2 * 8] = {0};
    model_set_grad_hook(m, hook_record, r);
    int tok[6] = {1, 2, 3, 1, 2, 3}, tgt[6] = {2, 3, 1, 2, 3, 1};
    char msg[256];
    loss_of(m, tok, tgt, 1, 6);
    assert_int_equal(model_backward(m, msg, sizeof msg), 0);
    assert_int_equal(r[0], 4);
    model_weights g = model_weights_of(m, model_grads(m));
    const float *G = model_grads(m);
    assert_int_equal(r[1], (size_t)(g.norm - G));
    assert_int_equal(r[2], model_num_params(m));  // through output.weight, the last tensor
    assert_int_equal(r[3], (size_t)(g.layer[1].attn_norm - G));
    assert_int_equal(r[4], r[1]);  // layer 1 ends where the norm begins
    assert_int_equal(r[5], (size_t)(g.layer[0].attn_norm - G));
    assert_int_equal(r[6], r[3]);
    assert_int_equal(r[7], 0);     // the embedding
    assert_int_equal(r[8], r[5]);
    model_free(m);
}

// mtac convert --add-mta on an imported model's kind (untied, llama3 RoPE, GQA), the key-query
// convolutions in a chosen layer (--layers 0): identity kernels keep the logits, bit for bit on the
// fused backend.
static void test_retrofit_untied_equals_base(void **s) {
    (void)s;
    model *base = make("{" UNTIED_BASE "}", 6);
    model_config c = *model_cfg(base);
    model_config_mta_pattern(&c, 0);
    memset(c.qk_layer, 0, sizeof c.qk_layer);
    c.qk_layer[0] = 1;
    // embedding, norm, output; 9 per layer
    expect_retrofit_equal(base, &c, 78, 3 + 2 * 9, "untied retrofit against its base, reference backend");
    model_free(base);
}

static void test_gradcheck_untied(void **s) {
    (void)s;
    gradcheck_model(UNTIED_MTA, 0.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_and_counts),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_round_trip_extremes),
        cmocka_unit_test(test_gradcheck_mta),
        cmocka_unit_test(test_gradcheck_baseline),
        cmocka_unit_test(test_gradcheck_dropout),
        cmocka_unit_test(test_identity_mta_equals_baseline),
        cmocka_unit_test(test_retrofit_equals_baseline),
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_dropout_modes),
        cmocka_unit_test(test_weights_round_trip),
        cmocka_unit_test(test_bad_tokens),
        cmocka_unit_test(test_gqa_config_errors),
        cmocka_unit_test(test_gqa_config),
        cmocka_unit_test(test_gradcheck_gqa),
        cmocka_unit_test(test_gqa_equals_repeated),
        cmocka_unit_test(test_doc_mask_config),
        cmocka_unit_test(test_packed_equals_alone),
        cmocka_unit_test(test_doc_mask_one_document_same_bits),
        cmocka_unit_test(test_untied_rope_errors),
        cmocka_unit_test(test_untied_rope_config),
        cmocka_unit_test(test_untied_output),
        cmocka_unit_test(test_untied_grad_hook),
        cmocka_unit_test(test_gradcheck_untied),
        cmocka_unit_test(test_retrofit_untied_equals_base),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
