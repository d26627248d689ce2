// test_decode.c: incremental decoding of the model with KV/MTA caches. For the baseline and every
// MTA variant (and grouped-query attention), with kernels moved away from the identity, the logits of prefill + token-by-token
// decoding equal those of one forward over the same tokens at every step (within the bound
// of model_tol.h, relative to the largest logit), for several prompts of different lengths in one batch, with the prompts
// prefilled by a forward on the fused backend (which holds no (T,T) map) and on the reference
// one, each against the one forward on the tests' backend; with packed documents (doc_mask) too.
#include "model/model.h"
#include "model_tol.h"
#include "testutil.h"
#include "util/tokens.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#define BASE "\"dim\": 16, \"n_layers\": 3, \"n_heads\": 4, \"vocab_size\": 13, \"hidden_dim\": 24"
static const char *const CONFIGS[] = {
    "{" BASE "}",
    "{" BASE ", \"mta\": {\"qk_layers\": [0, 1, 2], \"pre_cq\": 2, \"pre_ck\": 9}}",  // the toy pattern
    "{" BASE ", \"mta\": {\"qk_layers\": [1], \"pre_cq\": 3, \"pre_ck\": 5, \"post_cq\": 2, \"post_ck\": 3,"
    " \"pre_head_mix\": true, \"post_ch\": 4, \"group_norm\": true, \"gate\": true}}",  // the 830M pattern
    "{" BASE ", \"mta\": {\"qk_layers\": [0, 2], \"pre_cq\": 6, \"pre_ck\": 11, \"post_cq\": 6, \"post_ck\": 11,"
    " \"pre_head_mix\": true, \"post_ch\": 2, \"group_norm\": true, \"depth_scale\": true, \"gate\": true}}",
    "{" BASE ", \"mta\": {\"qk_layers\": [0], \"post_cq\": 4, \"post_ck\": 7}}",
    // grouped-query attention: caches of 2 and of 1 kv heads for 4 query heads
    "{" BASE ", \"n_kv_heads\": 2, \"mta\": {\"qk_layers\": [1], \"pre_cq\": 3, \"pre_ck\": 5, \"post_cq\": 2,"
    " \"post_ck\": 3, \"pre_head_mix\": true, \"post_ch\": 4, \"group_norm\": true, \"gate\": true}}",
    "{" BASE ", \"n_kv_heads\": 1}",
    // an imported model's: untied output projection and llama3 RoPE scaling (head dim 4: pair 0
    // kept, pair 1 of wavelength 2 pi 316 stretched, against orig_ctx 64 / low 1), GQA
    "{" BASE ", \"n_kv_heads\": 2, \"tie_embeddings\": false, \"rope_scaling\": {\"rope_type\": \"llama3\","
    " \"factor\": 8, \"low_freq_factor\": 1, \"high_freq_factor\": 4, \"original_max_position_embeddings\": 64},"
    " \"mta\": {\"qk_layers\": [1], \"pre_cq\": 3, \"pre_ck\": 5, \"post_cq\": 2, \"post_ck\": 3,"
    " \"pre_head_mix\": true, \"post_ch\": 4, \"group_norm\": true, \"gate\": true}}",
};

static model *make(const char *json, uint64_t seed) {
    model_config c;
    char msg[256];
    if (model_config_from_json(json, &c, msg, sizeof msg)) fail_msg("%s", msg);
    model *m = model_create(&c, msg, sizeof msg);
    assert_non_null(m);
    model_set_backend(m, tu_backend());
    model_init(m, seed);
    int nt;
    const model_tensor *ts = model_tensors(m, &nt);
    uint64_t sd = seed + 1;
    for (int i = 0; i < nt; i++)
        if (strstr(ts[i].name, ".mta.") || strstr(ts[i].name, "norm"))
            for (size_t j = 0; j < ts[i].numel; j++) model_params(m)[ts[i].offset + j] += 0.3f * tu_randn(&sd);
    return m;
}

// Decodes the rows of tok (B,T) through the model's decoder (its backend runs the prefill's
// forward): prompts of lens[b] tokens, then the rest one token per step (sequences that are done
// keep decoding past T on a token of their own; only positions < T are compared against ref, the
// (B,T,V) logits of one forward, scale its largest magnitude).
static void check_decoder(model *m, const int *tok, const float *ref, double scale, const int *lens, int B, int T,
                          const char *json, int backend) {
    const int V = model_cfg(m)->vocab_size;
    char msg[256];
    model_decoder *dec = model_decoder_create(m, B, 2 * T, msg, sizeof msg);
    assert_non_null(dec);
    assert_int_equal(model_decoder_prefill(dec, tok, T, lens, msg, sizeof msg), 0);
    double worst = 0;
    int compared = 0, minlen = T;
    for (int b = 0; b < B; b++) minlen = lens[b] < minlen ? lens[b] : minlen;
    for (int step = 0;; step++) {
        for (int b = 0; b < B; b++) {
            const int pos = lens[b] - 1 + step;  // the logits just computed are at this position
            if (pos >= T) continue;
            const float *got = model_decoder_logits(dec) + (size_t)b * V, *want = ref + ((size_t)b * T + pos) * V;
            for (int j = 0; j < V; j++) worst = tu_worst(worst, fabs(got[j] - want[j]) / scale);
            compared++;
        }
        if (minlen + step >= T) break;
        int next[8];
        for (int b = 0; b < B; b++) {
            const int pos = lens[b] + step;
            next[b] = pos < T ? tok[(size_t)b * T + pos] : 1;
        }
        if (model_decoder_step(dec, next, msg, sizeof msg)) fail_msg("step %d: %s", step, msg);
    }
    int expect = 0;
    for (int b = 0; b < B; b++) expect += T - lens[b] + 1;
    assert_int_equal(compared, expect);
    // the decoder sums a row's products in other orders and blocks than the batched forward
    // (model_tol.h)
    if (!mt_within("decoded logits against one forward", worst, mt_tol_logits(model_cfg(m), T)))
        fail_msg("%s, prefill on the %s backend: decoded logits differ by %.3g (relative)", json,
                 mta_backend_name((mta_backend)backend), worst);
    model_decoder_free(dec);
}

// The decoder against one forward over tok (B,T), with prompts of lens[b] tokens.
static void check_tokens(const char *json, const int *tok, const int *lens, int B, int T) {
    model *m = make(json, 5);
    const int V = model_cfg(m)->vocab_size;
    char msg[256];
    // the reference: one forward over every token
    assert_int_equal(model_forward(m, tok, NULL, B, T, NULL, msg, sizeof msg), 0);
    float *ref = malloc((size_t)B * T * V * sizeof(float));
    memcpy(ref, model_logits(m), (size_t)B * T * V * sizeof(float));
    const double scale = tu_max_abs(ref, (size_t)B * T * V);
    assert_true(scale < INFINITY);  // a NaN or infinity in the reference would make every error 0 or NaN
    for (int be = 0; be < MTA_N_BACKENDS; be++) {
        // the model's tensors are on the host: the CPU backends only
        if (mta_backend_device_memory((mta_backend)be) || !mta_backend_available((mta_backend)be)) continue;
        model_set_backend(m, (mta_backend)be);
        check_decoder(m, tok, ref, scale, lens, B, T, json, be);
    }
    free(ref);
    model_free(m);
}

static void check_config(const char *json, const int *lens, int B, int T) {
    int *tok = malloc((size_t)B * T * sizeof(int));
    uint64_t sd = 9;
    int V = 0;
    sscanf(strstr(json, "\"vocab_size\":"), "\"vocab_size\": %d", &V);
    for (int i = 0; i < B * T; i++) tok[i] = (int)(fabsf(tu_randn(&sd)) * 1000) % V;
    check_tokens(json, tok, lens, B, T);
    free(tok);
}

static void test_decode_equals_forward(void **s) {
    (void)s;
    const int lens3[3] = {1, 6, 14}, lens1[1] = {4};
    for (size_t i = 0; i < sizeof CONFIGS / sizeof CONFIGS[0]; i++) {
        check_config(CONFIGS[i], lens3, 3, 14);
        check_config(CONFIGS[i], lens1, 1, 19);
    }
}

// Every on/off combination of the six MTA steps (tu_combo's bits) in a model whose second layer
// has the key-query convolutions, on two head shapes: 4 heads with head-conv groups of 2, and 3
// heads of 6 with one group of 3, c_q = 1 before the softmax and depth scaling.
static void test_every_combination(void **s) {
    (void)s;
    const struct {
        const char *base;
        int pre_cq, pre_ck, post_cq, post_ck, ch, depth;
    } shapes[2] = {{BASE, 3, 5, 2, 3, 2, 0},
                   {"\"dim\": 18, \"n_layers\": 2, \"n_heads\": 3, \"vocab_size\": 11, \"hidden_dim\": 20", 1, 3, 4, 7, 3, 1}};
    const int lens3[3] = {1, 6, 14};
    for (int sh = 0; sh < 2; sh++)
        for (int mask = 0; mask < TU_NCOMBOS; mask++) {
            char json[512];
            int at = snprintf(json, sizeof json, "{%s, \"mta\": {\"qk_layers\": [1]", shapes[sh].base);
            if (mask & TU_PRE) at += snprintf(json + at, sizeof json - at, ", \"pre_cq\": %d, \"pre_ck\": %d", shapes[sh].pre_cq,
                                              shapes[sh].pre_ck);
            if (mask & TU_MIX) at += snprintf(json + at, sizeof json - at, ", \"pre_head_mix\": true");
            if (mask & TU_POST) at += snprintf(json + at, sizeof json - at, ", \"post_cq\": %d, \"post_ck\": %d",
                                               shapes[sh].post_cq, shapes[sh].post_ck);
            if (mask & TU_HCONV) at += snprintf(json + at, sizeof json - at, ", \"post_ch\": %d", shapes[sh].ch);
            if (mask & TU_GN)
                at += snprintf(json + at, sizeof json - at, ", \"group_norm\": true, \"depth_scale\": %s",
                               shapes[sh].depth ? "true" : "false");
            if (mask & TU_GATE) at += snprintf(json + at, sizeof json - at, ", \"gate\": true");
            snprintf(json + at, sizeof json - at, "}}");
            check_config(json, lens3, 3, 14);
        }
}

// Packed documents (doc_mask): the EOS tokens of a prompt make its documents (the prefill's) and
// a step after an EOS starts one (RoPE from 0). Sequence 0 steps through EOS tokens (one document
// of a single EOS among them); 1's prompt holds two documents and steps into a third; 2's prompt
// ends with an EOS, so its first step starts a document. Every MTA step on, with the key-query
// convolutions in two layers; with 2 kv heads too.
static void test_documents(void **s) {
    (void)s;
    enum { B = 3, T = 20 };
    const int lens[B] = {1, 6, 14}, eos[B][4] = {{3, 4, 11, -1}, {0, 2, 7, 19}, {5, 13, -1, -1}};
    int tok[B * T];
    uint64_t sd = 3;
    for (int i = 0; i < B * T; i++) tok[i] = (int)(fabsf(tu_randn(&sd)) * 1000) % 256;
    for (int b = 0; b < B; b++)
        for (int i = 0; i < 4 && eos[b][i] >= 0; i++) tok[b * T + eos[b][i]] = TOK_EOS;
#define DOC_BASE "\"dim\": 16, \"n_layers\": 3, \"n_heads\": 4, \"vocab_size\": 259, \"hidden_dim\": 24, \"doc_mask\": 1"
    check_tokens("{" DOC_BASE "}", tok, lens, B, T);
    check_tokens("{" DOC_BASE ", \"mta\": {\"qk_layers\": [0, 2], \"pre_cq\": 3, \"pre_ck\": 5, \"post_cq\": 2,"
                 " \"post_ck\": 3, \"pre_head_mix\": true, \"post_ch\": 2, \"group_norm\": true, \"depth_scale\": true,"
                 " \"gate\": true}}", tok, lens, B, T);
    check_tokens("{" DOC_BASE ", \"n_kv_heads\": 2, \"mta\": {\"qk_layers\": [1], \"pre_cq\": 2, \"pre_ck\": 3,"
                 " \"post_cq\": 3, \"post_ck\": 3, \"post_ch\": 4, \"gate\": true}}", tok, lens, B, T);
#undef DOC_BASE
}

static void test_decoder_errors(void **s) {
    (void)s;
    model *m = make(CONFIGS[2], 1);
    char msg[256];
    assert_null(model_decoder_create(m, 0, 4, msg, sizeof msg));
    model_decoder *dec = model_decoder_create(m, 2, 4, msg, sizeof msg);
    assert_non_null(dec);
    int tok[6] = {1, 2, 3, 4, 5, 6}, lens[2] = {3, 0};
    assert_int_equal(model_decoder_prefill(dec, tok, 3, lens, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "prompt 1"));
    lens[1] = 2;
    assert_int_equal(model_decoder_prefill(dec, tok, 3, lens, msg, sizeof msg), 0);
    assert_int_equal(model_decoder_len(dec, 0), 3);
    int next[2] = {1, 99};
    assert_int_equal(model_decoder_step(dec, next, msg, sizeof msg), -1);
    assert_non_null(strstr(msg, "outside"));
    next[1] = 2;
    assert_int_equal(model_decoder_step(dec, next, msg, sizeof msg), 0);
    assert_int_equal(model_decoder_len(dec, 0), 4);
    assert_int_equal(model_decoder_step(dec, next, msg, sizeof msg), -1);  // sequence 0 is full
    assert_non_null(strstr(msg, "full"));
    model_decoder_free(dec);
    model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_decode_equals_forward), cmocka_unit_test(test_every_combination),
                                       cmocka_unit_test(test_documents),
                                       cmocka_unit_test(test_decoder_errors)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
