// swiglu.c: the feed-forward gate of model.c's block. Its own file so that it is compiled like
// the attention kernels (CMakeLists.txt: no trapping math, multiply-adds) and its sigmoid's exp
// (exp_approx) runs in vectors: with libm's expf, a call per element, the gate's loops took about
// 4% of an lm10m-baseline training step (AVX-512, 2 threads: 0.872 s per step, 0.840-0.843 s
// after).
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
