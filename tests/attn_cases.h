// attn_cases.h: the one list of attention problems that the operator's tests, its gradient
// checks, the PyTorch fixtures and the GPU benchmark draw from (as ggml's test-backend-ops
// drives its test, gradient and perf modes from one list). A case is sizes and steps; each use
// takes the cases marked with its mode, in the list's order. The Python side reads the list from
// tests/ref/attn_cases.json, which `attn_cases_json` writes and the test of that name checks.
#ifndef MTAC_ATTN_CASES_H
#define MTAC_ATTN_CASES_H

#include "mta.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TC_FIXTURE = 1,    // tests/fixtures/NAME.safetensors, the float64 reference (tests/ref/gen_fixtures.py)
    TC_GRAD = 2,       // test_attn_gradcheck: gradients against finite differences
    TC_COMBO = 4,      // tu_combo's shapes: every on/off combination of the steps given here
    TC_VARIANT = 8,    // tu_variant: hand-picked configs against the reference backend
    TC_IDENTITY = 16,  // test_attn_invariants: identity kernels reproduce plain attention
    TC_LARGE = 32,     // test_attn_backends: the 830M layer over several strips, long documents
    TC_BF16 = 64,      // test_attn_backends: the tensor-core path's cases beyond tu_combo's shapes
    TC_PERF = 128,     // bench_cuda's default: one case per T (its sizes and layer: the first case's)
    TC_ISSUE15 = 256,  // test_attn_backends: the configs of a past bug (issue 15)
} tc_mode;

enum { TC_MAX_DOCS = 10 };

typedef struct {
    const char *name;
    int modes;                                       // tc_mode bits
    int B, H, H_kv, T, d;                            // H_kv 0: H (no grouped-query attention)
    int pre_cq, pre_ck, mix, post_cq, post_ck, ch;   // a convolution of size 0, mix 0, ch 0: off
    int gn, depth_scale, layer_id, gate;
    int all;    // every step (mta_layer_all_steps): the post-softmax kernel pre_cq x pre_ck, ch, norm, gate
    int l830m;  // the 830M layer (mta_layer_830m): its steps and kernels, whatever the fields above say
    float dropout;
    int docs[TC_MAX_DOCS], docs_first;               // packed documents of these lengths (0-ended;
                                                     // tu_docs_cycle from docs_first), none if docs[0] = 0
    int seed;                                        // its inputs' seed where the mode takes it from here
    int sweeps;                                      // tc_sweep bits: the shorter sweeps it is in
} tc_case;

// The shorter lists a slow mode runs (test_attn_backends): MTAC_SWEEP=quick, and a sanitizer build.
typedef enum { TC_QUICK = 1, TC_SANITIZED = 2 } tc_sweep;

extern const tc_case TC_CASES[];
extern const int TC_NCASES;

// The k-th case of mode (in the list's order), NULL past the last.
const tc_case *tc_nth(int mode, int k);
// How many cases have mode.
int tc_count(int mode);
// The case's config on the default backend (mta_config_default: fused), dropout included.
mta_config tc_config(const tc_case *c);
// The case's document lengths and how many (0: none).
int tc_docs(const tc_case *c, const int **lens);

#ifdef __cplusplus
}
#endif

#endif
