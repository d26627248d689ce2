// testutil.h: shared helpers for the C tests: random problems and error measures.
#ifndef MTAC_TESTUTIL_H
#define MTAC_TESTUTIL_H

#include "attn_cases.h"
#include "mta.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// A whole operator problem: inputs, parameters, outputs and gradients, in one allocation.
typedef struct {
    mta_config cfg;
    size_t n;                       // B*H*T*d
    size_t nkv;                     // B*H_kv*T*d: the floats of k, v, dk, dv that are used (each has n)
    float *q, *k, *v, *dout, *out, *dq, *dk, *dv;
    float *w[MTA_N_PARAMS], *gw[MTA_N_PARAMS];  // parameters and their gradients (MTA_W_PRE ...), NULL if off
    size_t wn[MTA_N_PARAMS];
    mta_params p;
    mta_grads g;
    int32_t *doc;                   // (B,T) document ids, read when docs is set (tu_case_set_docs)
    int docs;
    int atomics;                    // runs call mta_set_deterministic(ctx, 0)
    float *mem;                     // all of the above: 8 n floats, the parameters, the document ids
                                    // (B*T), the parameters' gradients
    size_t nmem, ngrad;             // floats of mem, and where the parameters' gradients start
} tu_case;

// Draws q, k, v (normal, std qk_scale for q and k) and dout; parameters are identity plus
// noise*normal (gate_w is noise*normal). seed fixes everything.
tu_case *tu_case_new(const mta_config *cfg, uint64_t seed, float qk_scale, float noise);
void tu_case_free(tu_case *c);
// Runs of c from now on pass these (B,T) document ids to mta_set_documents (copied; NULL: none).
void tu_case_set_docs(tu_case *c, const int32_t *doc);

// forward (+ backward with zeroed gradients); returns the status.
mta_status tu_case_run(tu_case *c, int backward);
// A forward alone; *bytes gets the context's workspace after it.
mta_status tu_case_forward(tu_case *c, size_t *bytes);
// Forward and backward as tu_case_run, training (dropout on, seed 1234) when the config has
// dropout; *bytes (if not NULL) gets the context's workspace bytes.
mta_status tu_case_train(tu_case *c, size_t *bytes);
// The forward alone of tu_case_train (training when the config has dropout).
mta_status tu_case_train_forward(tu_case *c);
// 1 when two runs gave the same bits in every output and gradient.
int tu_same_bits(const tu_case *a, const tu_case *b);
// The same in out, dq and every parameter gradient, dk and dv aside.
int tu_same_bits_but_kv(const tu_case *a, const tu_case *b);

// A standard normal draw as a float (xorshift64* uniforms through rng_box_muller, util/rng.h).
float tu_randn(uint64_t *s);
// x rounded to bfloat16, to nearest even (as __float2bfloat16_rn; finite x), as a float32.
float tu_bf16_round(float x);
// x rounded to bfloat16 (tu_bf16_round) as its 16 bits, a float32's upper half: a bf16 tensor's entry.
uint16_t tu_bf16_bits(float x);
// Largest |a| and largest |a - b|; +INFINITY when a (or b) holds a NaN or an infinity, so that
// both `e > tol` and `e <= tol` checks fail on it (fmax would drop a NaN and pass a backend that
// never wrote its output). No reference tensor of these tests is legitimately non-finite.
double tu_max_abs(const float *a, size_t n);
double tu_max_abs_diff(const float *a, const float *b, size_t n);
// fmax(worst, e) for accumulating a worst error, but +INFINITY once either is NaN or infinite
// (fmax(worst, NaN) is worst: a NaN error would vanish).
double tu_worst(double worst, double e);
// 1 when a and b are finite and |a - b| <= atol + rtol * |b|. Write tolerance checks with it (or
// as !(err <= tol)): `if (fabs(a - b) > tol) fail` passes a NaN.
int tu_close(double a, double b, double atol, double rtol);

// gamma_n = n u / (1 - n u), u = 2^-24: a float32 sum of n products (a dot product) in any order,
// with or without FMAs, is within gamma_n * sum|products| of the exact sum (Higham, Accuracy and
// Stability of Numerical Algorithms, 2nd ed., section 3.1). A worst case, so a bound on any
// machine; a wrong index or a missing term is off by a whole term, n u times the bound's scale.
double tu_gamma(double n);
// |got - ref| over gamma_n * abs (abs: the sum of the |products|, ref the exact sum, both in
// double): > 1 fails; 0 when got == ref; +INFINITY for a NaN or an infinity.
double tu_sum_ratio(double got, double ref, double abs, double n);

// The backend the operator and model tests run on: MTAC_BACKEND (fused or reference; CTest's
// *_reference variants set it), else fused. The library itself reads no environment variable.
mta_backend tu_backend(void);
// mta_config_default on tu_backend().
mta_config tu_config_default(int B, int H, int T, int d);

// A config with every step of the 830M layer on, small kernels (mta_layer_all_steps).
mta_config tu_config_all(int B, int H, int T, int d, int cq, int ck, int ch);
// The 830M layer (mta_layer_830m) at these sizes.
mta_config tu_config_830m(int B, int H, int T, int d);

// Case t of the list (attn_cases.h) on tu_backend().
mta_config tu_config_of(const tc_case *t);
// The document ids of case t for config c (its B and T, which the caller may have changed):
// fills doc (B*T) and returns 1, or returns 0 for a case without documents.
int tu_case_docs(const tc_case *t, const mta_config *c, int32_t *doc);

// Every on/off combination of the six optional steps over shapes that reach every edge of the
// backends: bit TU_PRE (pre-softmax conv), TU_MIX (head mixing), TU_POST (post-softmax conv),
// TU_HCONV (head conv), TU_GN (group norm), TU_GATE (gate) of mask switch them on. The shapes
// (TU_NSHAPES of them) have H = 1, odd H with c_h = 1 and c_h = H, 1 < c_h < H, B > 1, c_q = 1,
// c_q and c_k wider than T or than a strip, T a multiple of no block, odd and tail-sized d, and
// grouped-query attention (shapes 5 and 6: H_kv = 2 of H = 4, H_kv = 1 of H = 6), and packed
// documents (shapes 7 and 8, the second with H_kv = 2 of H = 6: tu_combo_docs): the TC_COMBO
// cases of the list (TU_NSHAPES of them; attn_cases_json checks the count).
enum { TU_PRE = 1, TU_MIX = 2, TU_POST = 4, TU_HCONV = 8, TU_GN = 16, TU_GATE = 32, TU_NCOMBOS = 64, TU_NSHAPES = 9 };
mta_config tu_combo(int shape, int mask, float dropout);
// The document ids of a shape with packed documents for config c (its B and T): documents of
// 1 to 13 positions, some shorter than the kernels, their ids alternating 0 and 1 (a document is
// a run of equal ids, not every position of an id). Fills doc (B*T) and returns 1, or returns 0
// for a shape without documents.
int tu_combo_docs(int shape, const mta_config *c, int32_t *doc);
// Ids of documents with the given lengths, cycled from offset `first` until T positions are
// filled (the last cut at T), per sequence b starting at first + 3b; ids alternate 0, 1.
void tu_docs_cycle(const int *lens, int nlens, int first, int B, int T, int32_t *doc);
// "pre+mix+post+hconv+gn+gate" for the steps of mask ("plain" for none), into buf.
const char *tu_combo_name(int mask, char *buf, size_t n);

// Largest difference of every output and gradient of a from those of the reference run r,
// relative to the reference tensor's largest entry (gradients that are near zero or one number
// at the scale of related ones); *which names the worst tensor when which is not NULL.
// +INFINITY (never NaN) when a NaN or infinity is in either run's tensors.
double tu_rel_diff(const tu_case *a, const tu_case *r, const char **which);

// How tolerances are set (docs/testing.md). Two float32 computations of one problem (two
// backends, packed documents or each alone, another summation order) differ by their rounding
// errors, whose size depends on the data: the lengths of the sums and how much they cancel, the
// softmax, the group norm's division by a row's rms. tu_rounding_noise measures that on the
// problem itself: r's problem is run again (tu_case_train, r's backend and documents) with every
// input, dout and parameter multiplied by 1 + u x, x uniform in [-1, 1], u = 2^-24 (one float32
// rounding each), and the noise is tu_rel_diff of that run from r, the largest over the tensors
// (the largest: a tensor of a few entries measures its own on a few samples, and a single number
// may not move at all). A float32 step's rounding moves its result by as much as a rounding of
// each of its inputs does (the same sums, the same cancellation, the same later divisions), so
// each step of the longest chain adds at most about the noise, in each of the two computations.
// That chain is the backward of every step: scores, convolution, mixing, max, exp, sum, divide,
// convolution, head convolution, P v, norm, gate, and their transposes: at most 16 steps, so
// TU_ROUNDING_STEPS = 2 * 16, and the bound is TU_ROUNDING_STEPS max(noise, u). A wrong index or
// a missing term moves a tensor by a fraction of its size, thousands of times more.
enum { TU_ROUNDING_STEPS = 32 };
double tu_rounding_noise(const tu_case *r, uint64_t seed);
// A copy of r's problem (config, documents) with every input, dout and parameter multiplied by
// 1 + u x as tu_rounding_noise does, not yet run; NULL when out of memory.
tu_case *tu_case_perturbed(const tu_case *r, uint64_t seed);
double tu_rounding_bound(double noise);
// tu_rel_diff(a, r) over tu_rounding_bound(tu_rounding_noise(r, seed)): > 1 fails (+INFINITY on
// a NaN); *which (when not NULL) names the worst tensor.
double tu_rounding_check(const tu_case *a, const tu_case *r, uint64_t seed, const char **which);

// Hand-picked configs that reach the backends' edges (k < TU_NVARIANTS): plain attention, each
// step alone, the 830M pattern, T < c_k, c_q = 1, dropout with every step, d = 20, grouped-query
// attention with every step: the TC_VARIANT cases of the list, on tu_backend().
enum { TU_NVARIANTS = 16 };
mta_config tu_variant(int k);

#ifdef __cplusplus
}
#endif

#endif
