// swiglu.h: the feed-forward block's gate and its backward (spec section 3), over n entries.
#ifndef MTAC_MODEL_SWIGLU_H
#define MTAC_MODEL_SWIGLU_H

#include <stddef.h>

// hg = silu(h1) * h3, silu(x) = x * sigmoid(x).   h1, h3, hg: (N,F) as n = N*F floats
void swiglu_forward(float *hg, const float *h1, const float *h3, size_t n);

// From g = dL/dhg: dh3 = g * silu(h1), and g is overwritten with dL/dh1 = g * h3 * silu'(h1),
// silu'(x) = s (1 + x (1 - s)), s = sigmoid(x).
void swiglu_backward(float *g, float *dh3, const float *h1, const float *h3, size_t n);

#endif
