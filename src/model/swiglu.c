// swiglu.c: the feed-forward gate of model.c's block. Its own file so that it is compiled like
// the attention kernels (CMakeLists.txt: no trapping math, multiply-adds) and its sigmoid's exp
// (exp_approx) runs in vectors: libm's expf is a call per element, which kept the gate's loops
// from vectorizing.
#include "model/swiglu.h"
#include "util/exp_approx.h"

static inline float sigmoid(float x) { return 1.0f / (1.0f + exp_approx(-x)); }

void swiglu_forward(float *hg, const float *h1, const float *h3, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) hg[i] = h1[i] * sigmoid(h1[i]) * h3[i];
}

void swiglu_backward(float *g, float *dh3, const float *h1, const float *h3, size_t n) {
    #pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n; i++) {
        const float s = sigmoid(h1[i]), gg = g[i];
        dh3[i] = gg * h1[i] * s;
        g[i] = gg * h3[i] * s * (1.0f + h1[i] * (1.0f - s));
    }
}
