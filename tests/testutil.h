// testutil.h: shared helpers for the C tests: random problems and error measures.
#ifndef MTAC_TESTUTIL_H
#define MTAC_TESTUTIL_H

#include "mta.h"

#include <stddef.h>
#include <stdint.h>

// A whole operator problem: inputs, parameters, outputs and gradients, in one allocation.
typedef struct {
    mta_config cfg;
    size_t n;                       // B*H*T*d
    float *q, *k, *v, *dout, *out, *dq, *dk, *dv;
    float *w[7], *gw[7];            // parameters and their gradients (mta_params order), NULL if off
    size_t wn[7];
    mta_params p;
    mta_grads g;
    float *mem;
} tu_case;

// Draws q, k, v (normal, std qk_scale for q and k) and dout; parameters are identity plus
// noise*normal (gate_w is noise*normal). seed fixes everything.
tu_case *tu_case_new(const mta_config *cfg, uint64_t seed, float qk_scale, float noise);
void tu_case_free(tu_case *c);

// forward (+ backward with zeroed gradients); returns the status.
mta_status tu_case_run(tu_case *c, int backward);

float tu_randn(uint64_t *s);
double tu_max_abs(const float *a, size_t n);
double tu_max_abs_diff(const float *a, const float *b, size_t n);

// A config with every step of the 830M layer on, small kernels.
mta_config tu_config_all(int B, int H, int T, int d, int cq, int ck, int ch);

#endif
