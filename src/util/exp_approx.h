// exp_approx.h: exp(x) written so that GCC vectorises it, for the loops that take an exp per
// element (the softmax in src/attn/conv.c, the feed-forward gate in src/model/swiglu.c): libm's
// expf is a call per element. x = n*ln2 + r with |r| <= ln2/2, exp(r) by a degree-6 polynomial
// (Cephes' expf, within 2 ulp), 2^n built in the exponent bits. Inputs are clamped to [-87, 88]
// (exp(-87) = 1.6e-38 stands in for anything smaller, exp(88) = 1.7e38 for anything larger). A
// NaN passes the clamps and comes out NaN through r; its n, whose conversion to int would be
// undefined, takes 0 for the exponent bits. The clamps and selects vectorise only without
// trapping math (-fno-trapping-math: CMakeLists.txt compiles the files that use it so).
#ifndef MTAC_EXP_APPROX_H
#define MTAC_EXP_APPROX_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float exp_approx(float x) {
    x = x < -87.0f ? -87.0f : x;
    x = x > 88.0f ? 88.0f : x;
    const float n = rintf(x * 1.44269504088896341f), ni = n == n ? n : 0.0f;
    const float r = x - n * 0.693359375f + n * 2.12194440e-4f;
    float q = 1.9875691500e-4f;
    q = q * r + 1.3981999507e-3f;
    q = q * r + 8.3334519073e-3f;
    q = q * r + 4.1665795894e-2f;
    q = q * r + 1.6666665459e-1f;
    q = q * r + 5.0000001201e-1f;
    const int32_t bits = ((int32_t)ni + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return (q * r * r + r + 1.0f) * scale;
}

#endif
