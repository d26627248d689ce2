// test_attn_decode.c: the incremental decoding cache against the batched forward: every output
// row of mta_cache_step equals the forward's row, from an empty cache and after a prefill with
// prompts of different lengths, for plain attention and every MTA step alone and together. A
// prefill takes only q, k and v (whichever backend ran the forward), and the steps after it give
// the same bits as a cache stepped from empty through the prompt. With packed documents the cache
// begins a document where the forward's ids start one (mta_cache_begin_document, or the ids given
// to mta_cache_prefill_documents) and gives the rows of the forward with mta_set_documents.
// The cache sums in another order than the forward: each error is measured against the case's
// own rounding noise (tu_rounding_bound, testutil.h), and a check fails above 1.
#include "testutil.h"

#include <math.h>
#include <omp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

// Largest |a-b| over the row block, relative to the largest |b| of the whole forward output;
// +INFINITY when ref is (a NaN or infinity anywhere in the forward's output, rows only prefilled
// included), where a finite error over it would be 0.
static double row_err(const float *a, const float *b, size_t n, double ref) {
    return ref < INFINITY ? tu_max_abs_diff(a, b, n) / (ref > 1e-12 ? ref : 1.0) : INFINITY;
}

// The H rows (H,d) of position t of sequence b of a (B,H,T,d) tensor.
static void gather_rows(const float *x, int b, int t, int H, int T, int d, float *rows) {
    for (int h = 0; h < H; h++) memcpy(rows + (size_t)h * d, x + (((size_t)b * H + h) * T + t) * d, d * sizeof(float));
}

// The q, k and v rows of position t of sequence b (k and v: the H_kv heads of grouped-query attention).
static void gather_qkv(const tu_case *tc, int b, int t, float *q, float *k, float *v) {
    const mta_config *c = &tc->cfg;
    const int Hkv = c->H_kv > 0 ? c->H_kv : c->H;
    gather_rows(tc->q, b, t, c->H, c->T, c->d, q), gather_rows(tc->k, b, t, Hkv, c->T, c->d, k);
    gather_rows(tc->v, b, t, Hkv, c->T, c->d, v);
}

// The bound on the decoder's rows of case tc (documents doc, NULL: none): the forward's output
// and the cache's are two float32 computations of the same rows, so within
// tu_rounding_bound(tu_rounding_noise) of each other (testutil.h; the noise, the largest over
// the outputs and gradients, is at least the output's own).
static double worst_ratio;  // the largest of decode_error's, printed at the end

static double rows_bound(tu_case *tc, const int32_t *doc, uint64_t seed) {
    tu_case_set_docs(tc, doc);
    assert_int_equal(tu_case_train(tc, NULL), MTA_OK);
    return tu_rounding_bound(tu_rounding_noise(tc, seed));
}

// Runs the forward over the whole case (on cfg's backend), then decodes the same positions
// through a cache: positions 0..lens[b]-1 by prefill (lens NULL: none) and the rest step by step.
// After a prefill, a second cache steps through every position from empty, and the rows after
// the prompt must be the same bits in both (*same = 0 where they are not). doc (B,T): packed
// documents for the forward, the prefill and the steps (NULL: none); a step at a document's first
// position begins it. Returns the largest row error over its bound (rows_bound): > 1 fails.
static double decode_error(const mta_config *cfg, const int *lens, const int32_t *doc, uint64_t seed, int *same) {
    tu_case *tc = tu_case_new(cfg, seed, 1.0f, 0.3f);
    assert_non_null(tc);
    const double bound = rows_bound(tc, doc, seed);
    mta_ctx *ctx;
    assert_int_equal(mta_create(&ctx, cfg, NULL, 0), MTA_OK);
    assert_int_equal(mta_set_documents(ctx, doc), MTA_OK);
    assert_int_equal(mta_forward(ctx, tc->q, tc->k, tc->v, &tc->p, tc->out), MTA_OK);
    mta_config cc = *cfg;
    cc.T = cfg->T + 3;  // capacity need not equal the forward's length
    mta_cache *cache, *stepped = NULL;
    char msg[256];
    assert_int_equal(mta_cache_create(&cache, &cc, msg, sizeof msg), MTA_OK);
    const int B = cfg->B, H = cfg->H, T = cfg->T, d = cfg->d;
    if (lens) {
        if (doc)
            assert_int_equal(mta_cache_prefill_documents(cache, T, tc->q, tc->k, tc->v, &tc->p, lens, doc), MTA_OK);
        else
            assert_int_equal(mta_cache_prefill(cache, T, tc->q, tc->k, tc->v, &tc->p, lens), MTA_OK);
        for (int b = 0; b < B; b++) assert_int_equal(mta_cache_len(cache, b), lens[b]);
        assert_int_equal(mta_cache_create(&stepped, &cc, msg, sizeof msg), MTA_OK);
    }
    float *q = malloc((size_t)3 * H * d * sizeof(float)), *k = q + (size_t)H * d, *v = k + (size_t)H * d;
    float *o = malloc((size_t)2 * H * d * sizeof(float)), *o2 = o + (size_t)H * d;
    float *want = malloc((size_t)H * d * sizeof(float));
    const double ref = tu_max_abs(tc->out, tc->n);
    double worst = 0;
    if (same) *same = 1;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            gather_qkv(tc, b, t, q, k, v);
            const int begins = doc && t > 0 && doc[(size_t)b * T + t] != doc[(size_t)b * T + t - 1];
            if (stepped && begins) assert_int_equal(mta_cache_begin_document(stepped, b), MTA_OK);
            if (stepped) assert_int_equal(mta_cache_step(stepped, b, q, k, v, &tc->p, o2), MTA_OK);
            if (lens && t < lens[b]) continue;
            gather_rows(tc->out, b, t, H, T, d, want);
            if (begins) assert_int_equal(mta_cache_begin_document(cache, b), MTA_OK);
            assert_int_equal(mta_cache_step(cache, b, q, k, v, &tc->p, o), MTA_OK);
            worst = tu_worst(worst, row_err(o, want, (size_t)H * d, ref));
            if (stepped && same && memcmp(o, o2, (size_t)H * d * sizeof(float))) *same = 0;
        }
    free(q), free(o), free(want);
    mta_cache_destroy(cache);
    mta_cache_destroy(stepped);
    mta_destroy(ctx);
    tu_case_free(tc);
    const double ratio = worst < INFINITY && bound < INFINITY ? worst / bound : INFINITY;
    worst_ratio = tu_worst(worst_ratio, ratio);
    return ratio;
}

enum { NVARIANTS = 11 };

static mta_config variant(int k) {
    mta_config c = tu_config_default(2, 4, 17, 6);
    switch (k) {
    case 1: c.pre_cq = 3, c.pre_ck = 5; break;
    case 2: c.pre_head_mix = 1; break;
    case 3: c.post_cq = 2, c.post_ck = 3; break;
    case 4: c.post_ch = 2; break;
    case 5: c.group_norm = 1, c.depth_scale = 1, c.layer_id = 3; break;
    case 6: c.gate = 1; break;
    case 7: c = tu_config_all(2, 4, 17, 6, 3, 5, 4); break;
    case 8: c = tu_config_all(2, 4, 17, 6, 6, 11, 2); break;  // kernels wider than many prompts
    case 9: c.pre_cq = 1, c.pre_ck = 5, c.post_cq = 1, c.post_ck = 3; break;  // c_q = 1: no past rows
    case 10: c = tu_config_all(2, 4, 17, 6, 3, 5, 2), c.H_kv = 2; break;     // grouped-query: H_kv heads of K, V
    default: break;
    }
    return c;
}

static void test_steps_equal_forward(void **s) {
    (void)s;
    for (int k = 0; k <= NVARIANTS - 1; k++) {
        mta_config c = variant(k);
        double e = decode_error(&c, NULL, NULL, 100 + k, NULL);
        if (!(e <= 1)) fail_msg("variant %d: decoding differs from the forward by %.3g of its bound", k, e);
    }
    // rows longer than the decoder's key blocks (512): block edges inside the convolution windows
    mta_config c = tu_config_all(1, 2, 1100, 4, 3, 7, 2);
    const int lens[1] = {700};
    int same;
    double e = decode_error(&c, NULL, NULL, 300, NULL), e2 = decode_error(&c, lens, NULL, 301, &same);
    if (!(e <= 1 && e2 <= 1)) fail_msg("T=1100: decoding differs from the forward by %.3g / %.3g of its bound", e, e2);
    if (!same) fail_msg("T=1100: the prefilled cache decodes other bits than the one stepped from empty");
}

// Every on/off combination of the six steps (tu_combo) on every shape, decoded from an empty
// cache and after a prefill of prompts of different lengths (the prefill from the q, k, v of the
// forward on the tests' backend; the _reference run of this test takes the reference one), and
// the prefilled cache against one stepped through the prompt. One thread: a step is too small to
// share, and threads waiting at its barriers dominate on a busy machine.
static void test_every_combination(void **s) {
    (void)s;
    omp_set_num_threads(1);
    int failed = 0;
    for (int shape = 0; shape < TU_NSHAPES; shape++)
        for (int mask = 0; mask < TU_NCOMBOS; mask++) {
            const mta_config c = tu_combo(shape, mask, 0.0f);
            int lens[2];
            for (int b = 0; b < c.B; b++) lens[b] = 1 + (c.T / 3 + 5 * b) % c.T;
            int same;
            const double e = decode_error(&c, NULL, NULL, 500 + mask, NULL);
            const double e2 = decode_error(&c, lens, NULL, 600 + mask, &same);
            char name[64];
            if (!(e <= 1 && e2 <= 1 && same) && failed++ < 50)
                print_error("shape %d, %s: decoding differs from the forward by %.3g (empty cache), %.3g (after a "
                            "prefill) of its bound%s\n", shape, tu_combo_name(mask, name, sizeof name), e, e2,
                            same ? "" : "; the prefilled cache decodes other bits than the stepped one");
        }
    omp_set_num_threads(omp_get_num_procs());
    if (failed) fail_msg("%d of %d combinations decode differently from the forward", failed, TU_NSHAPES * TU_NCOMBOS);
}

// The start of the document that position L is in, for a prompt that ends right before a document
// starts (L itself when that document starts the sequence: a prompt is never empty).
static int doc_start_at(const int32_t *id, int L) {
    int s = L;
    while (s > 0 && id[s - 1] == id[s]) s--;
    return s > 0 ? s : L;
}

// Packed documents: every combination on the shapes with documents (tu_combo_docs: lengths 1 to
// 13, some shorter than the kernels; grouped-query attention on one), each row decoded against
// the forward with mta_set_documents on the reference backend and on the tests' backend: from an
// empty cache, after prompts that end inside a document (which the steps continue), and after
// prompts that end right before a document starts (the first step begins it), the prefilled
// caches against ones stepped through the prompts. One thread, as test_every_combination.
static void test_documents(void **s) {
    (void)s;
    omp_set_num_threads(1);
    int failed = 0, tried = 0;
    const mta_backend backends[2] = {MTA_BACKEND_REFERENCE, tu_backend()};
    for (int shape = 0; shape < TU_NSHAPES; shape++)
        for (int run = 0; run < TU_NCOMBOS * 2; run++) {
            const int mask = run / 2;
            mta_config c = tu_combo(shape, mask, 0.0f);
            int32_t doc[128];
            assert_true(c.B * c.T <= 128);
            if (!tu_combo_docs(shape, &c, doc) || (run % 2 && backends[1] == backends[0])) continue;
            c.backend = backends[run % 2];
            int lens[2], cut[2];
            for (int b = 0; b < c.B; b++) {
                const int32_t *id = doc + (size_t)b * c.T;
                lens[b] = 1 + (c.T / 3 + 5 * b) % c.T;
                assert_true(lens[b] < c.T && id[lens[b]] == id[lens[b] - 1]);  // inside a document
                cut[b] = doc_start_at(id, lens[b]);
            }
            int same, same2;
            const double e = decode_error(&c, NULL, doc, 700 + mask, NULL);
            const double e2 = decode_error(&c, lens, doc, 800 + mask, &same);
            const double e3 = decode_error(&c, cut, doc, 900 + mask, &same2);
            tried++;
            char name[64];
            if (!(e <= 1 && e2 <= 1 && e3 <= 1 && same && same2) && failed++ < 50)
                print_error("shape %d, %s, documents, %s forward: decoding differs from it by %.3g (empty cache), "
                            "%.3g (prompts end inside a document), %.3g (before a document) of its bound%s\n", shape,
                            tu_combo_name(mask, name, sizeof name), mta_backend_name(c.backend), e, e2, e3,
                            same && same2 ? "" : "; the prefilled cache decodes other bits than the stepped one");
        }
    omp_set_num_threads(omp_get_num_procs());
    assert_int_equal(tried, (backends[1] == backends[0] ? 2 : 4) * TU_NCOMBOS);
    if (failed) fail_msg("%d of %d combinations with documents decode differently from the forward", failed, tried);
}

// mta_cache_reset forgets the document starts: a cache that began a document decodes, after a
// reset, the rows of the forward without documents.
static void test_reset_clears_documents(void **s) {
    (void)s;
    const mta_config c = tu_combo(7, TU_NCOMBOS - 1, 0.0f);
    tu_case *tc = tu_case_new(&c, 11, 1.0f, 0.3f);
    assert_non_null(tc);
    const double bound = rows_bound(tc, NULL, 11);
    mta_cache *cache;
    assert_int_equal(mta_cache_create(&cache, &c, NULL, 0), MTA_OK);
    const int H = c.H, T = c.T, d = c.d;
    float *q = malloc((size_t)4 * H * d * sizeof(float)), *k = q + (size_t)H * d, *v = k + (size_t)H * d;
    float *o = v + (size_t)H * d, *want = malloc((size_t)H * d * sizeof(float));
    for (int t = 0; t < 6; t++) {
        if (t == 4) assert_int_equal(mta_cache_begin_document(cache, 0), MTA_OK);
        gather_qkv(tc, 0, t, q, k, v);
        assert_int_equal(mta_cache_step(cache, 0, q, k, v, &tc->p, o), MTA_OK);
    }
    mta_cache_reset(cache);
    const double ref = tu_max_abs(tc->out, tc->n);
    double worst = 0;
    for (int t = 0; t < T; t++) {
        gather_qkv(tc, 0, t, q, k, v);
        assert_int_equal(mta_cache_step(cache, 0, q, k, v, &tc->p, o), MTA_OK);
        gather_rows(tc->out, 0, t, H, T, d, want);
        worst = tu_worst(worst, row_err(o, want, (size_t)H * d, ref));
    }
    if (!(worst <= bound))
        fail_msg("after a reset, decoding differs from the forward without documents by %.3g of its bound", worst / bound);
    free(q), free(want);
    mta_cache_destroy(cache);
    tu_case_free(tc);
}

static void test_prefill_then_steps(void **s) {
    (void)s;
    const int lens[][2] = {{1, 1}, {5, 9}, {16, 2}, {17, 17}};
    for (int k = 0; k <= NVARIANTS - 1; k++)
        for (int i = 0; i < 4; i++) {
            mta_config c = variant(k);
            int same;
            double e = decode_error(&c, lens[i], NULL, 200 + k, &same);
            if (!(e <= 1)) fail_msg("variant %d, lens %d/%d: decoding differs by %.3g of its bound", k, lens[i][0], lens[i][1], e);
            if (!same) fail_msg("variant %d, lens %d/%d: the prefilled cache decodes other bits than the stepped one", k,
                                lens[i][0], lens[i][1]);
        }
}

static void test_cache_errors(void **s) {
    (void)s;
    mta_config c = variant(7);
    c.T = 2;
    mta_cache *cache;
    char msg[256];
    assert_int_equal(mta_cache_create(&cache, &c, msg, sizeof msg), MTA_OK);
    tu_case *tc = tu_case_new(&c, 1, 1.0f, 0.1f);
    float o[64];
    assert_int_equal(mta_cache_step(cache, 2, tc->q, tc->k, tc->v, &tc->p, o), MTA_ERR_INVALID);
    assert_int_equal(mta_cache_step(cache, 0, tc->q, tc->k, tc->v, &tc->p, o), MTA_OK);
    assert_int_equal(mta_cache_step(cache, 0, tc->q, tc->k, tc->v, &tc->p, o), MTA_OK);
    assert_int_equal(mta_cache_step(cache, 0, tc->q, tc->k, tc->v, &tc->p, o), MTA_ERR_INVALID);  // full
    assert_non_null(strstr(mta_cache_error(cache), "full"));
    assert_int_equal(mta_cache_step(cache, 0, NULL, tc->k, tc->v, &tc->p, o), MTA_ERR_NULL);
    mta_cache_reset(cache);
    assert_int_equal(mta_cache_len(cache, 0), 0);
    const int lens[2] = {1, 1}, bad[2] = {3, 1}, zero[2] = {1, 0};
    assert_int_equal(mta_cache_prefill(cache, c.T, tc->q, tc->k, NULL, &tc->p, lens), MTA_ERR_NULL);
    assert_int_equal(mta_cache_prefill(cache, c.T, tc->q, tc->k, tc->v, NULL, lens), MTA_ERR_NULL);
    assert_int_equal(mta_cache_prefill(cache, c.T, tc->q, tc->k, tc->v, &tc->p, bad), MTA_ERR_INVALID);  // > T
    assert_int_equal(mta_cache_prefill(cache, c.T, tc->q, tc->k, tc->v, &tc->p, zero), MTA_ERR_INVALID);
    assert_int_equal(mta_cache_prefill(cache, 1, tc->q, tc->k, tc->v, &tc->p, (const int[2]){2, 1}), MTA_ERR_INVALID);
    assert_non_null(strstr(mta_cache_error(cache), "prefill"));
    assert_int_equal(mta_cache_len(cache, 0), 0);  // a refused prefill changes nothing
    assert_int_equal(mta_cache_prefill(cache, c.T, tc->q, tc->k, tc->v, &tc->p, lens), MTA_OK);
    assert_int_equal(mta_cache_len(cache, 1), 1);
    assert_int_equal(mta_cache_begin_document(cache, 2), MTA_ERR_INVALID);
    assert_non_null(strstr(mta_cache_error(cache), "begin_document"));
    assert_int_equal(mta_cache_begin_document(cache, -1), MTA_ERR_INVALID);
    assert_int_equal(mta_cache_begin_document(NULL, 0), MTA_ERR_NULL);
    assert_int_equal(mta_cache_begin_document(cache, 1), MTA_OK);
    assert_int_equal(mta_cache_len(cache, 1), 1);  // the next position begins it; nothing else changes
    tu_case_free(tc);
    mta_cache_destroy(cache);
    c.pre_ck = 4;
    assert_int_equal(mta_cache_create(&cache, &c, msg, sizeof msg), MTA_ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_steps_equal_forward), cmocka_unit_test(test_prefill_then_steps),
                                       cmocka_unit_test(test_every_combination), cmocka_unit_test(test_documents),
                                       cmocka_unit_test(test_reset_clears_documents),
                                       cmocka_unit_test(test_cache_errors)};
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    printf("worst decoding error over its bound: %.3g\n", worst_ratio);
    return failed;
}
