// test_optim.c: AdamW against torch.optim.AdamW, clip_grad_norm against its closed form and across
// OpenMP thread counts, and the learning-rate schedules at their key steps.
#include "train/optim.h"
#include "testutil.h"

#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include <cmocka.h> // after the standard headers it relies on

// |a - b| <= tol, element by element, with a message naming the first miss; prints the largest
// share of its bound an element reached.
static void expect_close(const float *a, const float *b, int n, const double *tol, const char *what) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        worst = tu_worst(worst, d / tol[i]);
        if (!tu_close(a[i], b[i], tol[i], 0)) {  // a NaN or infinity fails, where d > tol passes a NaN
            print_error("%s[%d]: got %.9g want %.9g (diff %.3g, bound %.3g)\n", what, i, (double)a[i], (double)b[i], d, tol[i]);
            fail();
        }
    }
    fprintf(stderr, "  %s: worst %.2g of its bound\n", what, worst);
}

// ----------------------------------------------------------------------------
// AdamW vs torch

// Expected values from torch 1.13 (Debian python3-torch), float32, produced by:
//
//   import torch
//   p0 = [0.5, -1.25, 2.0, 0.0, -0.3, 1.5, 0.75]
//   grads = [[0.1, -0.2, 0.3, 0.05, -0.5, 1.0, -0.01],
//            [-0.3, 0.25, 0.1, 0.0, 0.4, -2.0, 0.02],
//            [0.2, 0.2, -0.6, 0.15, 0.0, 0.5, -0.03]]
//   a = torch.tensor(p0[:4], dtype=torch.float32, requires_grad=True)  # decayed
//   b = torch.tensor(p0[4:], dtype=torch.float32, requires_grad=True)  # no decay
//   opt = torch.optim.AdamW([{"params": [a], "weight_decay": 0.1},
//                            {"params": [b], "weight_decay": 0.0}],
//                           lr=1e-2, betas=(0.9, 0.95), eps=1e-8, foreach=False)
//   for g in grads:
//       a.grad = torch.tensor(g[:4]); b.grad = torch.tensor(g[4:])
//       opt.step()
//       print("p", ", ".join("%.9gf" % x for x in torch.cat([a, b]).tolist()))
//   print("m", ...torch.cat([opt.state[a]["exp_avg"], opt.state[b]["exp_avg"]])...)
//   print("v", ...torch.cat([opt.state[a]["exp_avg_sq"], opt.state[b]["exp_avg_sq"]])...)
#define NP 7
static const float p0[NP] = {0.5f, -1.25f, 2.0f, 0.0f, -0.3f, 1.5f, 0.75f};
static const float grads[3][NP] = {{0.1f, -0.2f, 0.3f, 0.05f, -0.5f, 1.0f, -0.01f},
                                   {-0.3f, 0.25f, 0.1f, 0.0f, 0.4f, -2.0f, 0.02f},
                                   {0.2f, 0.2f, -0.6f, 0.15f, 0.0f, 0.5f, -0.03f}};
static const unsigned char decay_mask[NP] = {1, 1, 1, 1, 0, 0, 0};
static const float want_p[3][NP] = {
    {0.489500016f, -1.23874998f, 1.98800004f, -0.00999999791f, -0.290000021f, 1.49000001f, 0.75999999f},
    {0.493903458f, -1.23913407f, 1.97721243f, -0.0167764742f, -0.289417148f, 1.49363375f, 0.756366253f},
    {0.493222654f, -1.24234819f, 1.97771382f, -0.0243053362f, -0.288960755f, 1.49500597f, 0.759750307f}};
static const float want_m[NP] = {0.00109999918f, 0.0263f,         -0.0267000012f, 0.0190500002f,
                                 -0.00449999748f, -0.0490000062f, -0.00200999994f};
static const float want_v[NP] = {0.00672625052f, 0.00677375076f, 0.0225362517f,  0.00123781257f,
                                 0.0188812502f,  0.247625008f,   6.85124978e-05f};

// The bounds of the comparison with torch, from the data: the rounding that torch's float32
// AdamW and this one may each commit, replayed in double along the trajectory (u = 2^-24;
// |x (op) y| rounds within u of its result, and a sum within u of the sum of |terms| per add).
//  - m = b1 m + (1-b1) g, which torch computes as m + (1-b1)(g - m) (lerp): three roundings of
//    terms at most |m| + (1-b1)(|g| + |m|) per step (S_m adds them up: m's sum cancels, m[0]
//    ends at 0.0011 from terms of 0.03);
//  - v = b2 v + (1-b2) g^2: four roundings of terms at most b2 v + (1-b2) g^2 (S_v);
//  - p = p (1 - lr wd) + step: the decay and the add round |p| twice, and the step
//    (lr/bc1) m / (sqrt(v/bc2) + eps) carries m's absolute error divided by the denominator,
//    half of v's relative error (the root), and its own four roundings (sqrt, two divisions, the
//    product); an earlier step's error carries over scaled by 1 - lr wd.
// Both sides may err: the bound is twice the sum. A missing term (the decay: lr wd |p| = 1e-3
// |p|, a bias correction: >= 5% of the step) is thousands of times over it.
enum { NSTEPS = 3 };
static const double LR = 1e-2, B1 = 0.9, B2 = 0.95, EPS = 1e-8, WD = 0.1;
static void adamw_bounds(double tol_p[NSTEPS][NP], double tol_m[NP], double tol_v[NP]) {
    const double u = 0x1p-24;
    for (int i = 0; i < NP; i++) {
        double p = p0[i], m = 0, v = 0, sm = 0, sv = 0, ep = 0;
        const double decay = decay_mask[i] ? 1 - LR * WD : 1;
        for (int s = 0; s < NSTEPS; s++) {
            const double g = grads[s][i];
            sm += (2 - B1) * fabs(m) + (1 - B1) * fabs(g), m = B1 * m + (1 - B1) * g;
            sv += B2 * v + (1 - B2) * g * g, v = B2 * v + (1 - B2) * g * g;
            const double bc1 = 1 - pow(B1, s + 1), bc2 = 1 - pow(B2, s + 1), denom = sqrt(v / bc2) + EPS;
            const double step = LR / bc1 * m / denom, em = 3 * u * sm, ev = 4 * u * sv;
            ep = ep * decay + u * (fabs(p * decay) + fabs(p * decay - step)) + LR / bc1 * em / denom +
                 fabs(step) * (ev / (2 * v) + 4 * u);
            p = p * decay - step;
            tol_p[s][i] = 2 * ep;
            tol_m[i] = 2 * em, tol_v[i] = 2 * ev;
        }
    }
}

static void test_adamw_matches_torch(void **state) {
    (void)state;
    adamw o;
    assert_int_equal(adamw_init(&o, NP, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f), 0);
    float p[NP];
    double tol_p[NSTEPS][NP], tol_m[NP], tol_v[NP];
    adamw_bounds(tol_p, tol_m, tol_v);
    memcpy(p, p0, sizeof p);
    for (int s = 0; s < NSTEPS; s++) {
        adamw_update(&o, p, grads[s], NP, o.lr, decay_mask);
        assert_int_equal(o.t, s + 1);
        expect_close(p, want_p[s], NP, tol_p[s], "p");
    }
    expect_close(o.m, want_m, NP, tol_m, "m");
    expect_close(o.v, want_v, NP, tol_v, "v");
    adamw_free(&o);
    assert_null(o.m);
}

// Caller-owned moments, and resuming from saved (m, v, t) continues the same trajectory.
static void test_adamw_caller_state_and_resume(void **state) {
    (void)state;
    float m[NP] = {0}, v[NP] = {0}, p[NP];
    memcpy(p, p0, sizeof p);
    adamw o;
    adamw_init_with(&o, m, v, NP, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f);
    adamw_update(&o, p, grads[0], NP, 1e-2f, decay_mask);
    adamw_update(&o, p, grads[1], NP, 1e-2f, decay_mask);
    // "checkpoint": copy state into a fresh optimizer and take the third step there
    float m2[NP], v2[NP], p2[NP];
    memcpy(m2, m, sizeof m);
    memcpy(v2, v, sizeof v);
    memcpy(p2, p, sizeof p);
    adamw r;
    adamw_init_with(&r, m2, v2, NP, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f);
    r.t = o.t;
    adamw_update(&r, p2, grads[2], NP, 1e-2f, decay_mask);
    double tol_p[NSTEPS][NP], tol_m[NP], tol_v[NP];
    adamw_bounds(tol_p, tol_m, tol_v);
    expect_close(p2, want_p[2], NP, tol_p[2], "p resumed");
    adamw_free(&o); // caller-owned: must not free m, v
    adamw_free(&r);
    assert_true(m[0] != 0.0f);
}

// Mask semantics: NULL decays everything; an all-zero mask equals weight_decay = 0.
static void test_adamw_mask(void **state) {
    (void)state;
    const unsigned char none[NP] = {0}, all[NP] = {1, 1, 1, 1, 1, 1, 1};
    float pa[NP], pb[NP], pc[NP], pd[NP];
    memcpy(pa, p0, sizeof pa);
    memcpy(pb, p0, sizeof pb);
    memcpy(pc, p0, sizeof pc);
    memcpy(pd, p0, sizeof pd);
    adamw a, b, c, d;
    assert_int_equal(adamw_init(&a, NP, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f), 0);
    assert_int_equal(adamw_init(&b, NP, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f), 0);
    assert_int_equal(adamw_init(&c, NP, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f), 0);
    assert_int_equal(adamw_init(&d, NP, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.0f), 0);
    for (int s = 0; s < 3; s++) {
        adamw_update(&a, pa, grads[s], NP, 1e-2f, NULL);
        adamw_update(&b, pb, grads[s], NP, 1e-2f, all);
        adamw_update(&c, pc, grads[s], NP, 1e-2f, none);
        adamw_update(&d, pd, grads[s], NP, 1e-2f, NULL);
    }
    assert_memory_equal(pa, pb, sizeof pa);
    assert_memory_equal(pc, pd, sizeof pc);
    assert_true(pa[0] != pc[0]);
    adamw_free(&a);
    adamw_free(&b);
    adamw_free(&c);
    adamw_free(&d);
}

// Data-parallel shards (train/step.h): each rank's adamw_init_range over its parameters, updated
// with adamw_update_range and its slice of the gradient, gives the bits of one whole update.
static void test_adamw_shards(void **state) {
    (void)state;
    const unsigned char mask[NP] = {1, 0, 1, 1, 0, 1, 1};
    float whole[NP], parts[NP];
    memcpy(whole, p0, sizeof whole);
    memcpy(parts, p0, sizeof parts);
    const size_t cut[] = {0, 2, 3, NP};  // shards of 2, 1 and 4 parameters
    adamw w, sh[3];
    assert_int_equal(adamw_init(&w, NP, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f), 0);
    for (int r = 0; r < 3; r++) assert_int_equal(adamw_init_range(&sh[r], cut[r], cut[r + 1], 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f), 0);
    for (int s = 0; s < 3; s++) {
        adamw_update(&w, whole, grads[s], NP, 1e-2f, mask);
        for (int r = 0; r < 3; r++) adamw_update_range(&sh[r], parts, grads[s] + cut[r], cut[r], cut[r + 1], 1e-2f, mask);
    }
    assert_memory_equal(whole, parts, sizeof whole);
    for (int r = 0; r < 3; r++) {
        assert_int_equal(sh[r].t, 3);
        assert_memory_equal(sh[r].m, w.m + cut[r], (cut[r + 1] - cut[r]) * sizeof(float));
        assert_memory_equal(sh[r].v, w.v + cut[r], (cut[r + 1] - cut[r]) * sizeof(float));
        adamw_free(&sh[r]);
    }
    adamw_free(&w);
}

// ----------------------------------------------------------------------------
// clipping

// The norm from partial sums over any split of the chunk grid (one rank's chunks each) is the
// norm of the whole gradient, bit for bit.
static void test_grad_norm_partials(void **state) {
    (void)state;
    const size_t n = 100003;
    float *g = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) g[i] = (float)sin(0.37 * (double)i) * (float)(1 + i % 97);
    const int splits[] = {0, 1, 300, 301, 1000, GRAD_NORM_CHUNKS};
    double part[GRAD_NORM_CHUNKS];
    for (int k = 0; k + 1 < 6; k++) {
        const int c0 = splits[k], c1 = splits[k + 1];
        grad_norm_partials(g + grad_norm_chunk_start(n, c0), n, c0, c1, part + c0);
    }
    assert_true(grad_norm_total(part) == grad_norm(g, n));
    free(g);
}

static void test_clip_below_and_above(void **state) {
    (void)state;
    float g[4] = {3.0f, 0.0f, -4.0f, 0.0f}; // norm 5
    float keep[4];
    memcpy(keep, g, sizeof g);
    assert_true(clip_grad_norm(g, 4, 10.0) == 5.0);
    assert_memory_equal(g, keep, sizeof g); // below: untouched
    assert_true(clip_grad_norm(g, 4, 0.0) == 5.0);
    assert_memory_equal(g, keep, sizeof g); // max_norm <= 0: measure only

    double total = clip_grad_norm(g, 4, 1.0); // above: scaled by 1 / (5 + 1e-6)
    assert_true(total == 5.0);
    float coef = (float)(1.0 / (5.0 + 1e-6));
    assert_true(g[0] == 3.0f * coef && g[2] == -4.0f * coef && g[1] == 0.0f);
    double after = grad_norm(g, 4);
    // 5 / (5 + 1e-6) = 1 - 2e-7, each entry's g * coef rounded to float32 (relative u/2 = 3e-8):
    // within 2e-7 + u/2 of 1 and below it; 1e-6 (16 u) is above both, a missed scale is off by 4
    assert_true(fabs(after - 1.0) < 1e-6 && after < 1.0);

    // at exactly max_norm torch still scales (coef = 5/(5+1e-6) < 1)
    memcpy(g, keep, sizeof g);
    clip_grad_norm(g, 4, 5.0);
    assert_true(g[0] < 3.0f && g[0] > 2.9999f);

    // empty and non-finite
    assert_true(clip_grad_norm(g, 0, 1.0) == 0.0);
    float bad[2] = {INFINITY, 1.0f};
    assert_false(isfinite(clip_grad_norm(bad, 2, 1.0)));
    assert_true(bad[1] == 1.0f); // left alone
}

// Norm of many random values against a plain double sum, and the same bits for 1..8 threads.
static void test_clip_deterministic_across_threads(void **state) {
    (void)state;
    const size_t n = (1u << 20) + 12345;
    float *g = malloc(n * sizeof(float)), *w = malloc(n * sizeof(float)), *ref = malloc(n * sizeof(float));
    assert_non_null(g);
    assert_non_null(w);
    assert_non_null(ref);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    long double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        g[i] = (float)((double)(s >> 11) / 9007199254740992.0 - 0.5);
        sum += (long double)g[i] * g[i];
    }
    double want = (double)sqrtl(sum);
    double t1 = 0.0;
#ifdef _OPENMP
    int saved = omp_get_max_threads();
    const int threads[] = {1, 2, 3, 8};
#else
    const int threads[] = {1};
#endif
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
#ifdef _OPENMP
        omp_set_num_threads(threads[k]);
#endif
        memcpy(w, g, n * sizeof(float));
        double t = clip_grad_norm(w, n, 1.0);
        if (k == 0) {
            t1 = t;
            memcpy(ref, w, n * sizeof(float));
            // the squares are exact in double; clip_grad_norm adds each chunk of n/1024 of them,
            // then the 1024 partials: within (n/1024 + 1 + 1024) u_d of their sum (positive
            // terms: Higham's gamma, u_d = 2^-53), half of that after the root, plus the root's
            // rounding; want's own sum in long double adds n u_ld
            const double tol = (((double)n / GRAD_NORM_CHUNKS + 1 + GRAD_NORM_CHUNKS) * 0.5 + 1) * DBL_EPSILON / 2 +
                               (double)n * LDBL_EPSILON / 2;
            assert_true(fabs(t - want) <= tol * want);
        } else {
            assert_true(memcmp(&t, &t1, sizeof t) == 0); // bitwise identical total
            assert_memory_equal(w, ref, n * sizeof(float));
        }
    }
#ifdef _OPENMP
    omp_set_num_threads(saved);
#endif
    free(g);
    free(w);
    free(ref);
}

// ----------------------------------------------------------------------------
// schedules

static void expect_lr(const lr_schedule *s, int step, double want) {
    float got = lr_at(s, step);
    // lr and min_lr enter as float32 (each within u/2 of the doubles of want), the schedule
    // rounds its result to float32 (u/2), and a float32 computation of the fraction or the
    // cosine adds a few u: 1e-6 = 16 u. A wrong step or fraction is off by >= 1/W = 10%.
    if (!tu_close(got, want, 1e-12, 1e-6)) {  // a NaN or infinity fails
        print_error("%s step %d: got %.9g want %.9g\n", lr_kind_name(s->kind), step, (double)got, want);
        fail();
    }
}

static void test_schedules(void **state) {
    (void)state;
    char err[256];
    lr_schedule s;
    const double lr = 1e-3, lo = 1e-4;
    const int W = 10, T = 110; // decay spans steps 10..110; step 35 is a quarter of the way

    assert_int_equal(lr_schedule_init(&s, "linear", (float)lr, W, T, (float)lo, err, sizeof err), 0);
    expect_lr(&s, 0, lr / W);                  // (0+1)/W
    expect_lr(&s, W - 1, lr);                  // warmup reaches the peak on its last step
    expect_lr(&s, W, lr);                      // frac 0
    expect_lr(&s, 35, lo + (lr - lo) * 0.75);  // frac 1/4
    expect_lr(&s, 60, lo + (lr - lo) * 0.5);   // mid
    expect_lr(&s, T, lo);                      // floor
    expect_lr(&s, T + 1000, lo);               // beyond

    assert_int_equal(lr_schedule_init(&s, "cosine", (float)lr, W, T, (float)lo, err, sizeof err), 0);
    const double pi = 3.14159265358979323846;
    expect_lr(&s, 0, lr / W);
    expect_lr(&s, W - 1, lr);
    expect_lr(&s, W, lr);
    expect_lr(&s, 35, lo + (lr - lo) * 0.5 * (1.0 + cos(pi * 0.25)));
    expect_lr(&s, 60, lo + (lr - lo) * 0.5);
    expect_lr(&s, T, lo);
    expect_lr(&s, T + 1000, lo);

    // min_lr defaults to 0 in callers; linear then ends at exactly 0
    assert_int_equal(lr_schedule_init(&s, "linear", (float)lr, 0, 100, 0.0f, err, sizeof err), 0);
    expect_lr(&s, 0, lr);
    expect_lr(&s, 50, lr * 0.5);
    assert_true(lr_at(&s, 100) == 0.0f && lr_at(&s, 5000) == 0.0f);

    assert_int_equal(lr_schedule_init(&s, "constant", (float)lr, W, 0, 0.0f, err, sizeof err), 0);
    expect_lr(&s, 0, lr / W);
    expect_lr(&s, W - 1, lr);
    expect_lr(&s, W, lr);
    expect_lr(&s, 100000, lr);
    assert_int_equal(lr_schedule_init(&s, "constant", (float)lr, 0, 0, 0.0f, err, sizeof err), 0);
    expect_lr(&s, 0, lr);

    // warmup == total: straight to the floor after warmup
    assert_int_equal(lr_schedule_init(&s, "cosine", (float)lr, W, W, (float)lo, err, sizeof err), 0);
    expect_lr(&s, W - 1, lr);
    expect_lr(&s, W, lo);
}

static void test_schedule_errors(void **state) {
    (void)state;
    char err[256] = "";
    lr_schedule s;
    assert_int_equal(lr_kind_from_name("cosine"), LR_COSINE);
    assert_int_equal(lr_kind_from_name("linear"), LR_LINEAR);
    assert_int_equal(lr_kind_from_name("constant"), LR_CONSTANT);
    assert_int_equal(lr_kind_from_name("Cosine"), -1);
    assert_int_equal(lr_kind_from_name(NULL), -1);

    assert_int_equal(lr_schedule_init(&s, "cosin", 1e-3f, 0, 10, 0.0f, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown lr schedule 'cosin'"));
    assert_non_null(strstr(err, "constant, linear or cosine"));
    assert_int_equal(lr_schedule_init(&s, "linear", 1e-3f, 20, 10, 0.0f, err, sizeof err), -1);
    assert_non_null(strstr(err, "warmup"));
    assert_int_equal(lr_schedule_init(&s, "linear", 1e-3f, -1, 10, 0.0f, err, sizeof err), -1);
    assert_non_null(strstr(err, "warmup"));
    assert_int_equal(lr_schedule_init(&s, "linear", -1e-3f, 0, 10, 0.0f, err, sizeof err), -1);
    assert_non_null(strstr(err, "lr must be"));
    assert_int_equal(lr_schedule_init(&s, "cosine", 1e-3f, 0, 10, 2e-3f, err, sizeof err), -1);
    assert_non_null(strstr(err, "min_lr"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_matches_torch),
        cmocka_unit_test(test_adamw_caller_state_and_resume),
        cmocka_unit_test(test_adamw_mask),
        cmocka_unit_test(test_adamw_shards),
        cmocka_unit_test(test_grad_norm_partials),
        cmocka_unit_test(test_clip_below_and_above),
        cmocka_unit_test(test_clip_deterministic_across_threads),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_schedule_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
