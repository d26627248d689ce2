// cuda_bf16.h of the CUDA emulator (cuda_emu.h): __nv_bfloat16 and the conversions the kernels use,
// exact as CUDA defines them. bfloat16 is float32's upper half: sign, the same 8 exponent bits,
// 7 mantissa bits, so float32's denormals, infinities and range carry over.
#ifndef MTAC_CUDA_EMU_BF16_H
#define MTAC_CUDA_EMU_BF16_H

#include "attn/cuda_emu/cuda_emu.h"

struct __nv_bfloat16_raw {
    unsigned short x;
};

struct __nv_bfloat16;
__host__ __device__ inline __nv_bfloat16 __float2bfloat16_rn(float f);
__host__ __device__ inline float __bfloat162float(__nv_bfloat16 h);

// 16-bit storage; converts from float by rounding to nearest even and to float exactly, as the
// toolkit's class does. No arithmetic operators: compute in float.
struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __host__ __device__ __nv_bfloat16(const __nv_bfloat16_raw &r) : __x(r.x) {}
    __host__ __device__ __nv_bfloat16(float f) : __x(__float2bfloat16_rn(f).__x) {}
    __host__ __device__ operator float() const { return __bfloat162float(*this); }
    __host__ __device__ operator __nv_bfloat16_raw() const { return __nv_bfloat16_raw{__x}; }
};

__host__ __device__ inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short u) { return __nv_bfloat16_raw{u}; }
__host__ __device__ inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.__x; }

// Round to nearest, ties to even: add just under half of the dropped 16 bits' unit, plus the kept
// part's lowest bit, and truncate. A carry out of the mantissa raises the exponent, and past the
// largest finite value gives inf. NaN becomes the canonical 0x7fff, as the conversion on a GPU.
__host__ __device__ inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __ushort_as_bfloat16(0x7fff);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __ushort_as_bfloat16((unsigned short)(u >> 16));
}
__host__ __device__ inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }

__host__ __device__ inline float __bfloat162float(__nv_bfloat16 h) {
    const uint32_t u = (uint32_t)h.__x << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

#endif
