// test_attn_backends.c BACKEND: a backend against the reference backend on the same inputs, for
// every on/off combination of the MTA steps on shapes that reach every edge, with and without
// dropout, and hand-picked variants; for the fused backend with strips of 1 to 64 rows (so
// strips shorter and longer than the convolutions' halos) and one or several threads (whole
// units per thread, or a unit's heads shared). Also: its results do not depend on the thread
// count or on keep_o, and the fused backend's workspace holds no (T,T) map and follows its
// memory budget.
// Exits 77 (CTest's skip) when the backend cannot run here (a GPU backend without a GPU).
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

#ifdef MTAC_HAVE_CUDA_EMU
#include "attn/cuda_emu/cuda_emu_ctl.h"
#endif

// Forward and backward of a case on a fresh context (training with a fixed dropout seed when
// the config has dropout). Returns the context's workspace bytes.
static size_t run(tu_case *c) {
    size_t bytes;
    assert_int_equal(tu_case_train(c, &bytes), MTA_OK);
    return bytes;
}

static mta_backend backend;  // the backend under test (argv[1])
// MTAC_BF16_CASE (a part of a name: the bf16 test runs only the list's cases and the combos
// whose name or label contains it) and MTAC_BF16_FORWARD=1 (it compares the forward's out only): for a new
// kernel's author, before its backward exists. Unset, every case runs forward and backward.
static const char *bf16_only_case;
static int bf16_forward_only;
// MTAC_SWEEP: quick (for the GPU's sanitizers: one shape, two strip sizes, no long sequences),
// the default, or full (scripts/sweep.sh).
static enum { SWEEP_QUICK, SWEEP_DEFAULT, SWEEP_FULL } sweep = SWEEP_DEFAULT;

// The strip sizes and thread counts a backend is run with: the strips of a backend that walks
// them (all but the reference one) and the threading paths of one on the CPU's threads (a
// backend on a device's memory runs on the device's: one run each).
typedef struct {
    int rows[20], threads[4], nrows, nthreads;
} run_grid;

static run_grid grid(const int *rows, int nrows, const int *threads, int nthreads) {
    run_grid g = {{0}, {omp_get_num_procs()}, 1, 1};
    if (backend == MTA_BACKEND_REFERENCE) return g;
    memcpy(g.rows, rows, (size_t)nrows * sizeof(int));
    g.nrows = nrows;
    if (mta_backend_device_memory(backend)) return g;
    memcpy(g.threads, threads, (size_t)nthreads * sizeof(int));
    g.nthreads = nthreads;
    return g;
}

// Runs the problem of config c (any backend) and seed on the reference backend, then on the
// backend under test at every strip size and thread count of gr; prints each run that differs
// by more than float32 rounding allows (label names the case) while *printed < 50. Returns the
// failing runs and adds the runs made to *runs.
// The bound is computed from the problem (tu_rounding_check, docs/testing.md): each output and
// gradient within TU_ROUNDING_STEPS times what one rounding of every input moves it on the
// reference backend. That follows the data's conditioning, e.g. a group norm dividing by a small
// row rms in a short document with keys dropped, where a fixed bound had to be loose everywhere
// (and still failed one build); a wrong index or a missing term is hundreds of times over it.
// worst_ratio: the largest difference over its bound seen in this program (printed at the end).
static double worst_ratio;

// doc: the (B,T) document ids of packed documents, or NULL.
static int against_reference(const mta_config *c, const int32_t *doc, uint64_t seed, const run_grid *gr,
                             const char *label, int *runs, int *printed) {
    mta_config rc = *c;
    rc.backend = MTA_BACKEND_REFERENCE;
    tu_case *ref = tu_case_new(&rc, seed, 1.0f, 0.3f);
    assert_non_null(ref);
    tu_case_set_docs(ref, doc);
    run(ref);
    const double bound = tu_rounding_bound(tu_rounding_noise(ref, seed));
    mta_config fc = *c;
    fc.backend = backend;
    tu_case *f = tu_case_new(&fc, seed, 1.0f, 0.3f);
    assert_non_null(f);
    tu_case_set_docs(f, doc);
    int failed = 0;
    for (int ri = 0; ri < gr->nrows; ri++)
        for (int ti = 0; ti < gr->nthreads; ti++) {
            f->cfg.strip_rows = gr->rows[ri];
            omp_set_num_threads(gr->threads[ti]);
            run(f);
            const char *which;
            const double e = tu_rel_diff(f, ref, &which), q = e / bound;
            worst_ratio = tu_worst(worst_ratio, q);
            if (!(q <= 1)) {
                failed++;
                if ((*printed)++ < 50)
                    print_error("%s, %d rows per strip (0: default), %d threads: %s %s differs from the reference by "
                                "%.3g, %.3g times its bound %.3g\n",
                                label, gr->rows[ri], gr->threads[ti], mta_backend_name(backend), which, e, q, bound);
            }
            (*runs)++;
        }
    tu_case_free(f);
    tu_case_free(ref);
    omp_set_num_threads(omp_get_num_procs());
    return failed;
}

static void test_variants(void **s) {
    (void)s;
    const int rows[] = {1, 2, 5, 16, 64}, threads[] = {1, 3};
    const run_grid gr = grid(sweep == SWEEP_QUICK ? rows + 2 : rows, sweep == SWEEP_QUICK ? 1 : 5, threads, 2);
    int runs = 0, printed = 0, failed = 0;
    for (int k = 0; k < TU_NVARIANTS; k++) {
        char label[32];
        snprintf(label, sizeof label, "variant %d", k);
        const mta_config c = tu_variant(k);
        failed += against_reference(&c, NULL, 40 + k, &gr, label, &runs, &printed);
    }
    if (failed) fail_msg("%d of %d runs differ from the reference", failed, runs);
}

// Every on/off combination of the six steps (tu_combo), on every shape, with and without
// dropout: strips of 1, 3 and 16 rows and the default size, whole units per thread (1 thread)
// and a unit's strips shared (3 threads), against the reference backend. Every failing case is
// listed before the test fails. MTAC_SWEEP=full (scripts/sweep.sh) takes every strip size from 1
// to 17, 64 and the default, and 1 to 4 threads.
// T of tu_combo's shapes for a backend of device memory: shorter, for the CUDA emulator's sake (a
// block's threads are fibers; the matrix's cost grows with T), still past every kernel width, past
// a 16-row strip and a multiple of neither 3 nor 16.
static const int device_T[TU_NSHAPES] = {7, 13, 17, 19, 23, 19, 17, 19, 17};

static void test_every_combination(void **s) {
    (void)s;
    const int full = sweep == SWEEP_FULL;
    int rows[20] = {1, 3, 16, 0}, threads[4] = {1, 3}, nrows = sweep == SWEEP_QUICK ? 2 : 4, nthreads = 2;
    if (sweep == SWEEP_QUICK) rows[0] = 3, rows[1] = 0;
    if (full) {
        for (nrows = 0; nrows < 17; nrows++) rows[nrows] = nrows + 1;
        rows[nrows++] = 64, rows[nrows++] = 0;
        for (nthreads = 0; nthreads < 4; nthreads++) threads[nthreads] = nthreads + 1;
    }
    const run_grid gr = grid(rows, nrows, threads, nthreads);
    const float drops[] = {0.0f, 0.25f};
    int cases = 0, failed = 0, printed = 0;
    const int shape0 = sweep == SWEEP_QUICK ? 3 : 0, shape1 = sweep == SWEEP_QUICK ? 4 : TU_NSHAPES;
    for (int shape = shape0; shape < shape1; shape++)
        for (int mask = 0; mask < TU_NCOMBOS; mask++)
            for (int di = 0; di < 2; di++) {
                char name[64], label[128];
                snprintf(label, sizeof label, "shape %d, %s, dropout %.2f", shape, tu_combo_name(mask, name, sizeof name),
                         drops[di]);
                mta_config c = tu_combo(shape, mask, drops[di]);
                if (mta_backend_device_memory(backend)) c.T = device_T[shape];
                int32_t doc[64 * 2];
                const int docs = tu_combo_docs(shape, &c, doc);
                failed += against_reference(&c, docs ? doc : NULL, 1000 + 128 * shape + 2 * mask + di, &gr, label, &cases,
                                            &printed);
            }
    if (failed) fail_msg("%d of %d runs differ from the reference", failed, cases);
    assert_int_equal(cases, (shape1 - shape0) * TU_NCOMBOS * 2 * gr.nrows * gr.nthreads);
}

// The TC_LARGE cases of the list: the 830M layer over several default strips and T not a multiple
// of a strip (d = 64 with 8 heads, d = 96 with B = 2 and dropout), and packed documents of 1 to
// 300 positions past the products' key blocks with grouped-query attention and dropout; the
// default strips and 24 rows.
static void test_large(void **s) {
    (void)s;
    if (sweep == SWEEP_QUICK) skip();
    const int rows[] = {0, 24}, threads[] = {2};
    const run_grid gr = grid(rows, 2, threads, 1);
    int runs = 0, printed = 0, failed = 0;
    const tc_case *t;
    for (int k = 0; (t = tc_nth(TC_LARGE, k)); k++) {
        const mta_config c = tu_config_of(t);
        int32_t *doc = malloc((size_t)c.B * c.T * sizeof(int32_t));
        assert_non_null(doc);
        const int docs = tu_case_docs(t, &c, doc);
        failed += against_reference(&c, docs ? doc : NULL, 91 + k, &gr, t->name, &runs, &printed);
        free(doc);
    }
    if (failed) fail_msg("%d of %d runs differ from the reference", failed, runs);
}

// The same inputs give the same bits on every run (kernel gradients are reduced in a fixed order,
// with no atomics), with and without dropout.
static void test_repeatable(void **s) {
    (void)s;
    for (int drop = 0; drop < 2; drop++) {
        mta_config c = tu_config_830m(2, 4, 45, 8);
        c.backend = backend, c.dropout = drop ? 0.2f : 0.0f;
        tu_case *a = tu_case_new(&c, 11, 1.0f, 0.3f), *b = tu_case_new(&c, 11, 1.0f, 0.3f);
        run(a);
        run(b);
        if (!tu_same_bits(a, b)) fail_msg("two runs on the same inputs differ (dropout %.1f)", (double)c.dropout);
        tu_case_free(a);
        tu_case_free(b);
    }
}

// A workspace the device refuses (152 GB: more memory than any GPU has) fails with
// MTA_ERR_NOMEM, and the next context, a small one, runs as if nothing had happened (a refused
// allocation is not left behind as the device's last error).
static void test_refused_allocation(void **s) {
    (void)s;
    if (!mta_backend_device_memory(backend)) skip();
    mta_config big = tu_config_830m(4, 1, 131072, 1);
    big.backend = backend, big.strip_rows = 4096;
    tu_case *a = tu_case_new(&big, 1, 1.0f, 0.3f);
    assert_non_null(a);
    assert_int_equal(tu_case_forward(a, NULL), MTA_ERR_NOMEM);
    tu_case_free(a);
    const run_grid gr = grid((const int[]){0}, 1, (const int[]){1}, 1);
    int runs = 0, printed = 0;
    const mta_config c = tu_variant(6);
    if (against_reference(&c, NULL, 46, &gr, "after a refused allocation", &runs, &printed)) fail_msg("the small context failed");
}

// The cases of issue 15 (the list's TC_ISSUE15), where the fused dq and dk were wrong, within
// float32 rounding of the reference (tu_rounding_check).
static void test_mix_post_hconv_without_pre(void **s) {
    (void)s;
    const tc_case *t;
    for (int i = 0; (t = tc_nth(TC_ISSUE15, i)); i++) {
        mta_config c = tu_config_of(t);
        c.backend = MTA_BACKEND_REFERENCE;
        tu_case *ref = tu_case_new(&c, 77 + i, 1.0f, 0.3f);
        run(ref);
        c.backend = backend;
        tu_case *f = tu_case_new(&c, 77 + i, 1.0f, 0.3f);
        run(f);
        const char *which;
        const double q = tu_rounding_check(f, ref, 77 + i, &which);
        worst_ratio = tu_worst(worst_ratio, q);
        if (!(q <= 1)) fail_msg("%s: %s differs from the reference by %.3g times its bound", t->name, which, q);
        tu_case_free(f);
        tu_case_free(ref);
    }
}

// The same inputs give the same bits whatever the thread count (for the fused backend: whether
// one thread does a unit or several share it; with grouped-query attention, a chain of units
// sharing kv heads on one thread, or a shared unit's heads in rounds).
static void test_thread_count_invariant(void **s) {
    (void)s;
    for (int k = 6; k <= 10; k++) {
        mta_config c = k <= 8 ? tu_variant(k) : tu_variant(15);
        if (k == 10)  // units of 2 heads (head conv, no mixing) on one kv head
            c.B = 1, c.pre_head_mix = 0, c.dropout = 0.0f;
        c.backend = backend, c.strip_rows = 7;
        tu_case *a = tu_case_new(&c, 7, 1.0f, 0.3f), *b = tu_case_new(&c, 7, 1.0f, 0.3f);
        omp_set_num_threads(1);
        run(a);
        omp_set_num_threads(4);
        run(b);
        assert_true(tu_same_bits(a, b));
        tu_case_free(a);
        tu_case_free(b);
    }
    omp_set_num_threads(omp_get_num_procs());
}

// keep_o (the forward keeps O for the backward) gives the same bits as recomputing it, for every
// combination of the steps with and without dropout, whole units per thread and a unit shared,
// and holds one more (B,H,T,d) tensor where there is a norm or gate (other backends ignore it).
static void test_keep_o_same_bits(void **s) {
    (void)s;
    const float drops[] = {0.0f, 0.25f};
    int failed = 0, printed = 0;
    for (int mask = 0; mask < TU_NCOMBOS; mask++)
        for (int di = 0; di < 2; di++)
            for (int th = 1; th <= 3; th += 2) {
                mta_config c = tu_combo(1, mask, drops[di]);
                c.backend = backend;
                tu_case *a = tu_case_new(&c, 500 + mask, 1.0f, 0.3f);
                c.keep_o = 1;
                tu_case *b = tu_case_new(&c, 500 + mask, 1.0f, 0.3f);
                omp_set_num_threads(th);
                const size_t without = run(a), with = run(b);
                const size_t extra = backend == MTA_BACKEND_FUSED && (c.group_norm || c.gate)
                                         ? (size_t)c.B * c.H * c.T * c.d * sizeof(float)
                                         : 0;
                char name[64];
                if (!tu_same_bits(a, b) || with != without + extra) {
                    failed++;
                    if (printed++ < 20)
                        print_error("%s, dropout %.2f, %d threads: keep_o %s (workspace %zu bytes, %zu without)\n",
                                    tu_combo_name(mask, name, sizeof name), drops[di], th,
                                    tu_same_bits(a, b) ? "holds the wrong amount" : "changes the results", with, without);
                }
                tu_case_free(a);
                tu_case_free(b);
            }
    omp_set_num_threads(omp_get_num_procs());
    if (failed) fail_msg("%d runs with keep_o differ from those without", failed);
}

// The workspace a forward leaves for its backward.
static size_t forward_workspace(const mta_config *c) {
    tu_case *a = tu_case_new(c, 3, 1.0f, 0.3f);
    assert_non_null(a);
    size_t bytes = 0;
    assert_int_equal(tu_case_forward(a, &bytes), MTA_OK);
    tu_case_free(a);
    return bytes;
}

// The workspace grows like T * strip, not T^2: at T = 1024 the fused backend's is a small
// fraction of the (B,H,T,T) maps the reference path holds several of, and with strips of 16 rows
// every backend's grows about linearly from T = 512 to 1024 and stays below one map.
static void test_workspace_has_no_map(void **s) {
    (void)s;
    mta_config c = tu_config_830m(1, 2, 1024, 4);
    c.backend = backend;
    if (backend == MTA_BACKEND_FUSED) {
        const size_t bytes = forward_workspace(&c), map = (size_t)c.B * c.H * c.T * c.T * sizeof(float);
        if (bytes * 4 > map) fail_msg("workspace %zu bytes, a quarter of one (B,H,T,T) map is %zu", bytes, map / 4);
    }
    c.strip_rows = 16;
    const size_t at1024 = forward_workspace(&c);
    c.T = 512;
    const size_t at512 = forward_workspace(&c), map = (size_t)c.B * c.H * 1024 * 1024 * sizeof(float);
    if (!(at512 > 0 && at1024 < 2.2 * at512 && at1024 < map))
        fail_msg("workspace %zu bytes at T = 512, %zu at T = 1024 (one map: %zu)", at512, at1024, map);
}

// The strip size follows the memory budget (all workers' windows within 3/8 of the output and
// gradients) whatever the thread count: one thread running the unit alone, two sharing its
// strips (as in `mtac bench attn`), and two batch elements run side by side with a set of
// windows each. For the 830M layer at d = 64 R = 16 would exceed it and the default strips are
// smaller; at d = 128 one set of windows allows R = 16.
static void test_strip_size_budget(void **s) {
    (void)s;
    if (backend != MTA_BACKEND_FUSED) skip();
    const int ds[2] = {64, 128}, threads[3] = {1, 2, 2}, batch[3] = {1, 1, 2};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < 2; i++) {
            omp_set_num_threads(threads[t]);
            mta_config c = tu_config_830m(batch[t], 8, 512, ds[i]);
            c.backend = MTA_BACKEND_FUSED;
            tu_case *a = tu_case_new(&c, 5, 1.0f, 0.3f);
            const size_t chosen = run(a);
            a->cfg.strip_rows = 16;
            const size_t r16 = run(a);
            const double grads = 4.0 * a->n * sizeof(float);  // out, dq, dk, dv
            if (ds[i] == 64 && !(chosen < r16 && r16 > 0.45 * grads))
                fail_msg("d = 64, %d threads, B = %d: workspace %zu bytes by default, %zu with R = 16 (out and gradients: %.0f)",
                         threads[t], batch[t], chosen, r16, grads);
            if (ds[i] == 128 && batch[t] == 1 && chosen != r16)
                fail_msg("d = 128, %d threads: workspace %zu bytes, %zu with R = 16", threads[t], chosen, r16);
            // the windows' 3/8, their rows' padding and the row statistics and strip buffers
            if (chosen > 0.45 * grads)
                fail_msg("d = %d, %d threads, B = %d: workspace %zu bytes, %.2f of the output and gradients", ds[i],
                         threads[t], batch[t], chosen, chosen / grads);
            tu_case_free(a);
        }
    omp_set_num_threads(omp_get_num_procs());
}

// Runs config c with precision MTA_BF16 on the backend under test and in float32 on the reference
// backend, both on the same q, k, v rounded to bf16 first; returns tu_rel_diff's difference.
static int bf16_atomics;  // bf16_against_reference runs the path with mta_set_deterministic(ctx, 0)
static double bf16_against_reference(const mta_config *c, const int32_t *doc, uint64_t seed, const char **which) {
    mta_config rc = *c, fc = *c;
    rc.backend = MTA_BACKEND_REFERENCE, rc.precision = MTA_FP32;
    fc.backend = backend, fc.precision = MTA_BF16;
    tu_case *ref = tu_case_new(&rc, seed, 1.0f, 0.3f), *f = tu_case_new(&fc, seed, 1.0f, 0.3f);
    assert_non_null(ref);
    assert_non_null(f);
    f->atomics = bf16_atomics;
    for (size_t i = 0; i < ref->n; i++) {
        ref->q[i] = f->q[i] = tu_bf16_round(ref->q[i]);
        ref->k[i] = f->k[i] = tu_bf16_round(ref->k[i]);
        ref->v[i] = f->v[i] = tu_bf16_round(ref->v[i]);
    }
    // the path rounds the convolutions' kernels to bf16 as it rounds q, k, v (its bands' B operand)
    for (int n = 0; n < 2; n++) {
        const int kw = n ? MTA_W_POST : MTA_W_PRE;
        for (size_t i = 0; i < ref->wn[kw]; i++) ref->w[kw][i] = f->w[kw][i] = tu_bf16_round(ref->w[kw][i]);
    }
    tu_case_set_docs(ref, doc);
    tu_case_set_docs(f, doc);
    double e;
    if (bf16_forward_only) {
        assert_int_equal(tu_case_train_forward(ref), MTA_OK);
        assert_int_equal(tu_case_train_forward(f), MTA_OK);
        e = tu_max_abs_diff(f->out, ref->out, f->n) / fmax(1e-6, tu_max_abs(ref->out, ref->n));
        *which = "out (forward only)";
    } else {
        run(ref);
        run(f);
        e = tu_rel_diff(f, ref, which);
    }
    tu_case_free(f);
    tu_case_free(ref);
    return e;
}

// The tolerance of the tensor-core path's test (test_bf16_tensor_cores) (docs/cuda.md, "Tensor-core path"). A bf16 rounding has relative error at most
// u = 2^-9; the products' float32 sums add about 2^-24 per term, nothing next to u. An entry of a
// result is a sum of terms, and a relative error e of each term moves it by at most e times the
// sum of the terms' magnitudes. The longest chain of roundings is three: dq and dk come from dS
// (or, with the convolution, dZ) rounded, dS (dS1) from dP = dO v^T with dO rounded, and from
// D = rowsum(dO O) with O made from P rounded (with head steps D = rowsum(P dP), summed exactly);
// out and the norm's and gate's gradients have one (P), dv and the kernel gradients of the
// convolution (dS1 Z, Z from the rounded q, k exactly), of the mixing (dS2 S1) and of the head
// convolution (P dP2) two. The convolution's kernel w_pre is rounded to bf16 like q, k, v (the
// forward's band operand; the test rounds it for both backends), and the forward's MMAs take Z as
// two bf16 parts hi + lo, within 2^-17 |Z|: one bf16 Z would move S1, P's exponent, by up to
// u sum |w||Z| (about 13u on these kernels), which no term-wise bound above covers. The head
// steps' k_fa_head_* kernels do their mixings as MMAs on bf16 inputs: S1, W1, P, W2 and dS2 are
// split into hi + lo bf16 (x - hi - lo about 2^-17 |x|, three MMAs a product), which adds about
// 2^-16 of the terms, nothing next to u; their dQ rounds dP2 = dropout(dO v^T) once, so dq's
// chain is dO, dP2, dS1 (three, as above) and the kernel gradients' dO, dP2 (two). The post-softmax
// convolution's kernels (k_fa_post_*) recompute P as hi + lo bf16 (within 2^-17 |P|) and its kernel
// w_post is rounded like w_pre (the test rounds it for both backends), so P1 = the band MMAs is
// float32-exact; P1 is rounded once, for P1 v (out: one rounding; dv: P1 and dO, two). The backward
// rounds dP1 = dropout(dO v^T) once, convolves it back in float32 (dP), sums D = rowsum(P dP) in
// float32 and rounds dS: dq and dk have dO, dP1, dS (three), w_post's dP1 P has dO, dP1 (two). The
// every-step backward (k_fa_every_*) keeps S1, P, dS2 and dS1 as hi + lo and rounds dP2 = dropout(dO
// v^T) and, for want of shared memory, dP1 = W2'^T dP2 once each, and dZ for dq and dk: four
// roundings there (4u instead of 3u per unit of kappa), two or three for the kernel gradients; its
// cases' worst difference is 18u (w_post_head with the group norm, bf16_every_post_ch), the
// others' below 3u. So
// each result is within 3u (the every-step dq, dk: 4u, so kappa 7.5 there) times the sum of its
// terms' magnitudes. That sum is a multiple kappa of
// the tensor's largest entry (the test's scale): the terms cancel, most in dq and dk, whose dS rows
// sum to zero. kappa is not bounded a priori for random data; on these cases it stays below 6
// without the group norm (the worst difference seen is 17u), and the tolerance allows kappa = 10:
// 30u, about 0.059. The group norm's backward divides by the row's rms of O, which cancellation in
// P v can make several times smaller than its terms (a row of a short document with keys dropped
// by dropout: rms 0.15 where the v entries are about 1), so an error of O relative to its terms is
// multiplied there: with the norm the tolerance allows kappa = 20 (the worst seen is 36u, dq of
// such a row with the convolution; 69u, past it, with Z as one bf16; the post-softmax convolution's
// cases reach 15u without the norm and 10u with it). With one head the mixing's kernel gradient is one number, the
// sum of all of dS2 S1, whose terms cancel almost entirely (each row of dS2 sums to zero): there
// kappa reaches 31 with the norm, and the tolerance allows twice the others'.
static double bf16_tolerance(const mta_config *c) {
    return 3.0 * (c->group_norm ? 20.0 : 10.0) * (c->pre_head_mix && c->H == 1 ? 2.0 : 1.0) / 512.0;
}

// A sanitizer build runs the emulator's fibers several times slower (the whole list took 590 s of
// a 1,070 s ASan suite, the quick one 170 s): there the tensor-core test takes the quick list's
// shapes with group norm, gate and dropout only (every step combination, each tile edge) and the
// paper's 6x11 convolution at d = 64 across a document start, unless
// MTAC_SWEEP=full; the release build runs every case.
#if defined(__SANITIZE_ADDRESS__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

// The worst bf16 difference over the cases so far, the cases run and those that failed (the first
// 20 printed).
typedef struct {
    double worst;
    int cases, failed;
} bf16_tally;

// Runs c (documents doc or NULL) against the reference (bf16_against_reference) into tl; label
// names the case in a failure's line.
static int bf16_heads_only;  // the run without clusters (test_bf16_tensor_cores): the head kernels' cases only
static void bf16_case(const mta_config *c, const int32_t *doc, uint64_t seed, const char *label, bf16_tally *tl) {
    if (bf16_heads_only && !((c->pre_head_mix || c->post_ch) && !c->pre_cq && !c->post_cq)) return;
    const char *which;
    const double e = bf16_against_reference(c, doc, seed, &which);
    tl->worst = tu_worst(tl->worst, e);
    tl->cases++;
    if (!(e <= bf16_tolerance(c)) && tl->failed++ < 20)
        print_error("%s, T = %d, dropout %.2f: %s differs from the reference by %.3g\n", label, c->T, (double)c->dropout,
                    which, e);
}

// A sanitizer build's list (unless MTAC_SWEEP=full), MTAC_SWEEP=quick's (the GPU's sanitizers), or
// every case.
static int bf16_asan(void) { return SANITIZED && sweep != SWEEP_FULL; }
static int bf16_quick(void) { return sweep == SWEEP_QUICK || bf16_asan(); }

// tu_combo's shapes at T past one and two tiles of 64 rows besides their own, with the steps the
// path covers: without and with the pre-softmax convolution, head mixing, head convolution, both,
// the post-softmax convolution, and every step at once (the every-step kernels); group norm (depth scale off and on) and gate; dropout 0 and 0.25. Quick: packed documents
// with grouped-query attention over three tiles; sanitized: there, norm and gate with dropout.
static void bf16_combos(bf16_tally *tl) {
    static const int extra_T[TU_NSHAPES] = {64, 70, 0, 131, 0, 97, 70, 150, 129};
    const int masks[6] = {0, TU_GN, TU_GN, TU_GATE, TU_GN | TU_GATE, TU_GN | TU_GATE};
    const int steps[7] = {0, TU_PRE, TU_MIX, TU_HCONV, TU_MIX | TU_HCONV, TU_POST, TU_PRE | TU_MIX | TU_POST | TU_HCONV};
    const float drops[] = {0.0f, 0.25f};
    const int asan = bf16_asan(), quick = bf16_quick();
    for (int shape = quick ? 8 : 0; shape < TU_NSHAPES; shape++)
        for (int t = quick; t < 2; t++)
            for (int st = 0; st < 7; st++)
                for (int m = 0; m < 6; m++)
                    for (int di = 0; di < 2; di++) {
                        if (st >= 2 && (m == 1 || m == 5)) continue;  // head steps, post conv: depth scale on gn, off gn+gate
                        if (asan && (m != 4 || di != 1)) continue;       // norm and gate, dropout
                        const int mask = masks[m] | steps[st];
                        mta_config c = tu_combo(shape, mask, drops[di]);
                        if (t && !extra_T[shape]) continue;
                        if (t) c.T = extra_T[shape];
                        if (mask & TU_GN) c.depth_scale = m >= 2 && m != 4;  // off, on; gate: off, on
                        int32_t doc[2 * 150];
                        const int docs = tu_combo_docs(shape, &c, doc);
                        char name[64], label[128];
                        snprintf(label, sizeof label, "shape %d, %s%s", shape, tu_combo_name(mask, name, sizeof name),
                                 c.depth_scale ? " (depth scale)" : "");
                        if (bf16_only_case && !strstr(label, bf16_only_case)) continue;
                        bf16_case(&c, docs ? doc : NULL, 3000 + 64 * shape + 8 * m + di, label, tl);
                    }
}

// The CUDA backend's tensor-core path (precision MTA_BF16; docs/cuda.md, "Tensor-core path") on
// every config it covers: tu_combo's shapes (bf16_combos) and the list's TC_BF16 cases (d up to
// 128; the convolution over documents that start just before a tile's end; head steps on tiles of
// 32 and 16 rows). The reference runs in float32 on the same bf16-rounded q, k, v, so only the
// path's own roundings differ.
static void bf16_cases(bf16_tally *tl) {
    bf16_combos(tl);
    const int only = bf16_asan() ? TC_SANITIZED : bf16_quick() ? TC_QUICK : 0;
    const tc_case *t;
    for (int k = 0; (t = tc_nth(TC_BF16, k)); k++) {
        if (only && !(t->sweeps & only)) continue;
        if (bf16_only_case && !strstr(t->name, bf16_only_case)) continue;
        const mta_config c = tu_config_of(t);
        int32_t doc[2 * 200];
        const int docs = tu_case_docs(t, &c, doc);
        bf16_case(&c, docs ? doc : NULL, (uint64_t)t->seed, t->name, tl);
    }
}
// On the emulator the head kernels' cases run twice: with clusters (an H100's k_fa_head_cl_forward,
// k_fa_head_cl_dq and k_fa_head_cl_dkdv, for groups of up to 16 heads) and without (an A100's,
// k_fa_head_forward, k_fa_head_dq and k_fa_head_dkdv).
static void test_bf16_tensor_cores(void **s) {
    (void)s;
    if (backend != MTA_BACKEND_CUDA && backend != MTA_BACKEND_CUDA_EMU) skip();
    bf16_tally tl = {0};
    bf16_cases(&tl);
#ifdef MTAC_HAVE_CUDA_EMU
    if (backend == MTA_BACKEND_CUDA_EMU) {
        mta_cuda_emu_set_clusters(0);  // a context asks on its first call
        bf16_heads_only = 1;
        bf16_cases(&tl);
        bf16_heads_only = 0;
        mta_cuda_emu_set_clusters(1);
    }
#endif
    print_message("bf16 tensor-core path: %d cases, worst difference %.3g (tolerance %.3g, %.3g with the group norm, twice "
                  "that for one head mixed)\n",
                  tl.cases, tl.worst, 30.0 / 512.0, 60.0 / 512.0);
    if (tl.failed)
        fail_msg("%d of %d bf16 runs differ from the reference by more than their tolerance", tl.failed, tl.cases);
}

// 1 when two runs of c (documents doc or NULL) on the same inputs give the same bits.
static int same_bits_twice(const mta_config *c, const int32_t *doc, uint64_t seed) {
    tu_case *a = tu_case_new(c, seed, 1.0f, 0.3f), *b = tu_case_new(c, seed, 1.0f, 0.3f);
    tu_case_set_docs(a, doc);
    tu_case_set_docs(b, doc);
    run(a);
    run(b);
    const int same = tu_same_bits(a, b);
    tu_case_free(a);
    tu_case_free(b);
    return same;
}

// The tensor-core path gives the same bits on a second run (in the emulator, every pass of every
// launch in another thread order).
static void test_bf16_repeatable(void **s) {
    (void)s;
    if (backend != MTA_BACKEND_CUDA && backend != MTA_BACKEND_CUDA_EMU) skip();
    const int steps[3] = {TU_PRE, TU_MIX | TU_HCONV, TU_PRE | TU_MIX | TU_POST | TU_HCONV};
    const char *what[3] = {"convolution", "head steps", "every step"};
    for (int k = 0; k < 3; k++) {  // the convolution; the head steps; every step (k_fa_every_*)
        mta_config c = tu_combo(8, steps[k] | TU_GN | TU_GATE, 0.25f);
        c.T = k ? 70 : 150, c.backend = backend, c.precision = MTA_BF16;
        int32_t doc[2 * 150];
        tu_combo_docs(8, &c, doc);
        if (!same_bits_twice(&c, doc, 60)) fail_msg("two bf16 runs on the same inputs differ (%s)", what[k]);
    }
}

// Without determinism (mta_set_deterministic(ctx, 0)) the every-step backward runs k_fa_every_dqkv:
// k_fa_every_dq's chain with each tile pair's dk, dv terms added by atomicAdd. Its out, dq and
// kernel gradients are the deterministic run's to the bit (the same chain and sums); its dk, dv are
// the same terms summed in the order the query tiles' blocks run. On the emulator, with the blocks
// reversed (query tiles in ascending order, k_fa_every_dkdv's order; these launches have one CPU
// thread) every bit equals the deterministic run's, and with the blocks in order (descending) dk or
// dv differ somewhere, which only sums made in block order do (in the first config: the second's
// documents, of at most 13 positions, give a key tile at most two query tiles, and a + b is b + a
// in float32 too). Everywhere the runs are within the
// bf16 tolerance of the reference (bf16_case). The 830M layer 2 at 16 heads with dropout, and
// tu_combo's shape 8 (grouped-query attention, 6 heads: padding heads, documents) at T = 70.
static void test_bf16_atomic_kv(void **s) {
    (void)s;
    if (backend != MTA_BACKEND_CUDA && backend != MTA_BACKEND_CUDA_EMU) skip();
    mta_config cs[2] = {tu_config_830m(1, 16, 64, 32), tu_combo(8, TU_PRE | TU_MIX | TU_POST | TU_HCONV | TU_GN | TU_GATE, 0.25f)};
    cs[0].dropout = 0.25f, cs[1].T = 70;
    bf16_tally tl = {0};
    for (int k = 0; k < 2; k++) {
        mta_config c = cs[k];
        c.backend = backend, c.precision = MTA_BF16;
        int32_t doc[2 * 150];
        const int docs = k && tu_combo_docs(8, &c, doc);
        bf16_atomics = 1;
        bf16_case(&c, docs ? doc : NULL, 70 + k, k ? "shape 8, every step, atomics" : "830M layer 2, atomics", &tl);
        bf16_atomics = 0;
#ifdef MTAC_HAVE_CUDA_EMU
        if (backend != MTA_BACKEND_CUDA_EMU) continue;
        tu_case *det = tu_case_new(&c, 80 + k, 1.0f, 0.3f), *at = tu_case_new(&c, 80 + k, 1.0f, 0.3f);
        tu_case_set_docs(det, docs ? doc : NULL);
        tu_case_set_docs(at, docs ? doc : NULL);
        at->atomics = 1;
        mta_cuda_emu_set_block_order(1);
        run(det);
        run(at);
        const int reversed = tu_same_bits(det, at);
        mta_cuda_emu_set_block_order(0);
        run(at);
        mta_cuda_emu_set_block_order(-1);
        const int in_order = tu_same_bits_but_kv(det, at), kv = !memcmp(det->dk, at->dk, 2 * det->n * sizeof(float));
        tu_case_free(det);
        tu_case_free(at);
        if (!reversed) fail_msg("config %d: atomics in k_fa_every_dkdv's order differ from the deterministic run", k);
        if (!in_order) fail_msg("config %d: out, dq or a kernel gradient depends on the blocks' order", k);
        if (kv && !k) fail_msg("config %d: dk, dv do not depend on the blocks' order (k_fa_every_dqkv did not run?)", k);
#endif
    }
    if (tl.failed) fail_msg("%d of %d runs without determinism differ from the reference by more than their tolerance", tl.failed, tl.cases);
}

// One config of test_bf16_gqa_sums: 1 when dk, dv are the sums of the repeated heads' bits.
static int gqa_sums_exact(const mta_config *gqa, uint64_t seed) {
    mta_config c = *gqa;
    const int H = c.H, Hkv = c.H_kv, rep = H / Hkv;
    const size_t Td = (size_t)c.T * c.d;
    tu_case *g = tu_case_new(&c, seed, 1.0f, 0.3f);
    c.H_kv = H;
    tu_case *m = tu_case_new(&c, seed, 1.0f, 0.3f);  // the same q, dout and parameters
    for (int b = 0; b < c.B; b++)
        for (int h = 0; h < H; h++) {
            memcpy(m->k + ((size_t)b * H + h) * Td, g->k + ((size_t)b * Hkv + h / rep) * Td, Td * sizeof(float));
            memcpy(m->v + ((size_t)b * H + h) * Td, g->v + ((size_t)b * Hkv + h / rep) * Td, Td * sizeof(float));
        }
    run(g);
    run(m);
    int same = !memcmp(g->out, m->out, g->n * sizeof(float)) && !memcmp(g->dq, m->dq, g->n * sizeof(float));
    for (int t = 0; t < 2; t++)
        for (size_t kv = 0; kv < (size_t)c.B * Hkv; kv++)
            for (size_t e = 0; e < Td; e++) {
                float x = 0.0f;  // in head order from 0, as the path sums
                for (int r = 0; r < rep; r++) x += (t ? m->dv : m->dk)[(kv * rep + r) * Td + e];
                same &= (t ? g->dv : g->dk)[kv * Td + e] == x;
            }
    tu_case_free(g);
    tu_case_free(m);
    return same;
}

// Grouped-query attention on the tensor-core path with head steps: out and dq are multi-head
// attention's on k, v repeated over each kv head's query heads, and dk, dv of a kv head its query
// heads' dk, dv there summed from 0 in head order in float32, to the bit: each query head's dK, dV
// depend only on its own q, k, v and the shared maps, the path sums them in that order (k_tc_head_kv,
// or the cluster dK/dV kernel's blocks themselves: fhd_adds_kv), and float32 storage adds each sum
// once into the zeroed dk, dv. 4 query heads a kv head (the cluster kernel's sums where clusters
// run; with dropout), 16 (k_tc_head_kv's), 4 of groups of 4 (the head convolution alone); on the
// emulator also without clusters (k_fa_head_dkdv).
static void test_bf16_gqa_sums(void **s) {
    (void)s;
    if (backend != MTA_BACKEND_CUDA && backend != MTA_BACKEND_CUDA_EMU) skip();
    const int hkv[3] = {4, 1, 4}, mix[3] = {1, 1, 0}, ch[3] = {0, 0, 4};
    const int passes = backend == MTA_BACKEND_CUDA_EMU ? 2 : 1;
    for (int cl = 0; cl < passes; cl++) {
#ifdef MTAC_HAVE_CUDA_EMU
        if (backend == MTA_BACKEND_CUDA_EMU) mta_cuda_emu_set_clusters(!cl);  // a context asks on its first call
#endif
        for (int k = 0; k < 3; k++) {
            mta_config c = tu_config_default(2, 16, 45, 40);
            c.H_kv = hkv[k], c.pre_head_mix = mix[k], c.post_ch = ch[k], c.dropout = k ? 0.0f : 0.25f;
            c.backend = backend, c.precision = MTA_BF16;
            if (!gqa_sums_exact(&c, 95 + k))
                fail_msg("H_kv = %d of 16 heads%s: dk, dv are not the repeated heads' sums in order", hkv[k],
                         cl ? " without clusters" : "");
        }
    }
#ifdef MTAC_HAVE_CUDA_EMU
    if (backend == MTA_BACKEND_CUDA_EMU) mta_cuda_emu_set_clusters(1);
#endif
}

// The norm and gate backward in chunks of rows (mta_cuda.cu's ng_rows: 8 rows at this T), each
// chunk's parameter gradients in a slot of its own, the slots summed in order: over 3 chunks and
// a ragged one, with packed documents, on the float32 path (strips of the default, one span of
// 4 chunks, and of 16 rows, 2 chunks each and a ragged strip) and the tensor-core path (one span
// of T), the gradients are the reference's within their bounds, and a second run gives the same
// bits (in the emulator, with the blocks in another order).
static void test_normgate_chunks(void **s) {
    (void)s;
    const int rows[] = {0, 16}, threads[] = {1};
    const run_grid gr = grid(rows, 2, threads, 1);
    int runs = 0, printed = 0;
    const int tc = backend == MTA_BACKEND_CUDA || backend == MTA_BACKEND_CUDA_EMU;
    for (int bf = 0; bf <= tc; bf++) {
        mta_config c = tu_combo(8, TU_PRE | TU_GN | TU_GATE, 0.0f);
        c.T = 29, c.backend = backend, c.precision = bf ? MTA_BF16 : MTA_FP32;
        int32_t doc[2 * 29];
        tu_combo_docs(8, &c, doc);
        bf16_tally tl = {0};
        if (bf) bf16_case(&c, doc, 81, "norm and gate in chunks", &tl);
        else if (against_reference(&c, doc, 81, &gr, "norm and gate in chunks", &runs, &printed)) tl.failed = 1;
        if (tl.failed) fail_msg("the norm and gate in chunks (%s) differ from the reference", bf ? "bf16" : "float32");
        c.strip_rows = bf ? 0 : 16;
        if (!same_bits_twice(&c, doc, 82)) fail_msg("two runs differ (%s)", bf ? "bf16" : "float32");
    }
}

#ifdef MTAC_HAVE_CUDA_EMU
// The tensor-core path's kernels sized from the device's opt-in shared memory per block: the 830M
// conv layer's every step at d = 64, whose every-step dQ kernel needs 219 KB, runs the float32 path
// (the same bits as MTA_FP32) on an A100's 163 KB, and the tensor-core path (other bits) on an
// H100's 227.
static void test_bf16_smem_optin(void **s) {
    (void)s;
    if (backend != MTA_BACKEND_CUDA_EMU) skip();
    mta_config c = tu_config_default(1, 16, 19, 64);
    c.pre_cq = c.post_cq = 6, c.pre_ck = c.post_ck = 11;
    c.pre_head_mix = 1, c.post_ch = 16, c.backend = backend;
    tu_case *f = tu_case_new(&c, 90, 1.0f, 0.3f);
    run(f);
    c.precision = MTA_BF16;
    for (int a100 = 1; a100 >= 0; a100--) {
        mta_cuda_emu_set_shared_optin(a100 ? 163 * 1024 : 0);  // a context asks on its first call
        tu_case *b = tu_case_new(&c, 90, 1.0f, 0.3f);
        run(b);
        if (tu_same_bits(f, b) != a100)
            fail_msg("with %d KB per block, bf16 %s the float32 path's bits", a100 ? 163 : 227, a100 ? "differs from" : "gives");
        tu_case_free(b);
    }
    tu_case_free(f);
}

// The every-step dK/dV kernel runs in chunks of key-tile pairs sized by the device's
// multiprocessors (fe_kv_pairs), its dK, dV buffers a chunk's rows: with 1, 2 and 1000 emulated
// SMs (chunks of 2 and 4 tiles of 5, the middle tile alone in its pair, a chunk's last pair empty;
// one chunk of all), the same bits in every output, and buffers 2 x B*H x rows x d floats: rows
// 32, 64, T.
static void test_bf16_kv_chunks(void **s) {
    (void)s;
    if (backend != MTA_BACKEND_CUDA_EMU) skip();
    mta_config c = tu_config_830m(1, 16, 76, 32);
    c.backend = backend, c.precision = MTA_BF16;
    const int sms[3] = {1000, 2, 1}, rows[3] = {76, 64, 32};
    tu_case *r[3];
    size_t ws[3];
    for (int n = 0; n < 3; n++) {
        mta_cuda_emu_set_sms(sms[n]);  // a context asks on its first call
        r[n] = tu_case_new(&c, 92, 1.0f, 0.3f);
        ws[n] = run(r[n]);
    }
    mta_cuda_emu_set_sms(0);
    for (int n = 1; n < 3; n++) {
        if (!tu_same_bits(r[0], r[n])) fail_msg("with %d SMs the bits differ from one chunk's", sms[n]);
        const size_t less = 2 * (size_t)c.B * c.H * (rows[0] - rows[n]) * c.d * sizeof(float);
        if (ws[0] - ws[n] != less)
            fail_msg("with %d SMs the workspace is %zu bytes, not %zu less than one chunk's %zu", sms[n], ws[n], less, ws[0]);
    }
    for (int n = 0; n < 3; n++) tu_case_free(r[n]);
}
#endif

// More (batch, head) pairs than a CUDA grid has blocks along y (65,535), on either path: a clear
// refusal (MTA_ERR_INVALID) at the first call, not a failed launch.
static void test_grid_limit(void **s) {
    (void)s;
    if (backend != MTA_BACKEND_CUDA && backend != MTA_BACKEND_CUDA_EMU) skip();
    for (int bf16 = 0; bf16 < 2; bf16++) {
        mta_config c = tu_config_default(4096, 16, 2, 4);
        c.backend = backend, c.precision = bf16 ? MTA_BF16 : MTA_FP32;
        tu_case *f = tu_case_new(&c, 91, 1.0f, 0.3f);
        assert_non_null(f);
        assert_int_equal(tu_case_train_forward(f), MTA_ERR_INVALID);
        tu_case_free(f);
    }
}

// A config the tensor-core path does not cover (a convolution with another step whose kernel the
// every-step kernels do not take: c_q over 16 or c_k over 17; d > 128, a pre-softmax kernel
// whose halos do not fit in shared memory, a head group whose tiles do not) runs the float32 path
// with precision MTA_BF16: the same bits as MTA_FP32.
static void test_bf16_fallback_same_bits(void **s) {
    (void)s;
    if (backend != MTA_BACKEND_CUDA && backend != MTA_BACKEND_CUDA_EMU) skip();
    const int others[5] = {TU_PRE | TU_MIX, TU_PRE | TU_HCONV, TU_POST | TU_HCONV, TU_MIX | TU_POST,
                           TU_PRE | TU_POST | TU_GN | TU_GATE};
    for (int k = 0; k < 8; k++) {
        mta_config c = k < 5 ? tu_combo(5, others[k], 0.25f)
                             : tu_config_default(1, k == 7 ? 64 : 2, 19, k == 5 ? 129 : 100);
        if (k == 0 || k == 4) c.pre_cq = 17;  // over 16 rows
        if (k == 1) c.pre_ck = 19;            // over 17 columns
        if (k == 2 || k == 3) c.post_ck = 21;
        if (k == 6) c.pre_cq = c.pre_ck = 33;  // 33x33 at d = 100: the backward's tiles need over 227 KB
        if (k == 7) c.pre_head_mix = 1;        // 64 heads mixed: their 16-row tiles need over 227 KB
        c.backend = backend;
        tu_case *a = tu_case_new(&c, 70 + k, 1.0f, 0.3f);
        c.precision = MTA_BF16;
        tu_case *b = tu_case_new(&c, 70 + k, 1.0f, 0.3f);
        run(a);
        run(b);
        if (!tu_same_bits(a, b)) fail_msg("a config the tensor-core path does not cover (%d) differs from float32", k);
        tu_case_free(a);
        tu_case_free(b);
    }
}

int main(int argc, char **argv) {
    const char *schedule = NULL, *only = NULL;
    int bad = argc < 2 || mta_backend_from_name(argv[1], &backend);
    for (int i = 2; i + 1 < argc && !bad; i += 2) {
        if (!strcmp(argv[i], "--schedule")) schedule = argv[i + 1];
        else if (!strcmp(argv[i], "--only")) only = argv[i + 1];
        else bad = 1;
    }
    if (bad || argc % 2) {
        fprintf(stderr, "usage: test_attn_backends BACKEND [--schedule N] [--only TEST]: the backend (");
        for (int b = 0, n = 0; b < MTA_N_BACKENDS; b++)
            if (b != MTA_BACKEND_REFERENCE) fprintf(stderr, "%s%s", n++ ? ", " : "", mta_backend_name((mta_backend)b));
        fprintf(stderr, ")\n"
                        "against the reference. --schedule: the cuda-emu thread orders (src/attn/cuda_emu/cuda_emu_ctl.h);\n"
                        "--only: the tests whose names match (a pattern: test_every_*); MTAC_SWEEP=quick or full: fewer or\n"
                        "more cases\n");
        return 2;
    }
    bf16_only_case = getenv("MTAC_BF16_CASE");
    bf16_forward_only = getenv("MTAC_BF16_FORWARD") && !strcmp(getenv("MTAC_BF16_FORWARD"), "1");
    const char *sw = getenv("MTAC_SWEEP");
    if (sw && !strcmp(sw, "quick")) sweep = SWEEP_QUICK;
    else if (sw && !strcmp(sw, "full")) sweep = SWEEP_FULL;
    else if (sw && *sw) {
        fprintf(stderr, "test_attn_backends: MTAC_SWEEP=%s: quick or full\n", sw);
        return 2;
    }
    if (schedule) {
#ifdef MTAC_HAVE_CUDA_EMU
        mta_cuda_emu_set_schedule(strtoull(schedule, NULL, 10));
#else
        fprintf(stderr, "test_attn_backends: --schedule needs a build with the CUDA emulator (-DMTAC_CUDA_EMU=ON)\n");
        return 2;
#endif
    }
    if (!mta_backend_available(backend)) {
        printf("test_attn_backends: the %s backend cannot run here; skipped\n", argv[1]);
        return 77;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_variants),
        cmocka_unit_test(test_every_combination),
        cmocka_unit_test(test_large),
        cmocka_unit_test(test_repeatable),
        cmocka_unit_test(test_refused_allocation),
        cmocka_unit_test(test_mix_post_hconv_without_pre),
        cmocka_unit_test(test_thread_count_invariant),
        cmocka_unit_test(test_keep_o_same_bits),
        cmocka_unit_test(test_workspace_has_no_map),
        cmocka_unit_test(test_strip_size_budget),
        cmocka_unit_test(test_bf16_tensor_cores),
        cmocka_unit_test(test_bf16_repeatable),
        cmocka_unit_test(test_bf16_gqa_sums),
        cmocka_unit_test(test_bf16_atomic_kv),
        cmocka_unit_test(test_bf16_fallback_same_bits),
        cmocka_unit_test(test_normgate_chunks),
        cmocka_unit_test(test_grid_limit),
#ifdef MTAC_HAVE_CUDA_EMU
        cmocka_unit_test(test_bf16_smem_optin),
        cmocka_unit_test(test_bf16_kv_chunks),
#endif
    };
    if (only) cmocka_set_test_filter(only);
    const int failed = cmocka_run_group_tests(tests, NULL, NULL);
    printf("test_attn_backends %s: worst difference from the reference, over its float32 bound: %.3g\n", argv[1],
           worst_ratio);
    return failed;
}
