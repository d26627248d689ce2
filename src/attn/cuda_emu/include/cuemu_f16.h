// cuemu_f16.h of the CUDA emulator (cuda_emu.h): the one shape of the toolkit's 16-bit float
// classes, which cuda_fp16.h (__half) and cuda_bf16.h (__nv_bfloat16) instantiate with their own
// raw struct and conversions. As the toolkit's classes: 16-bit storage, converted from float by
// Conv::from (rounding to nearest even) and to float exactly by Conv::to; no arithmetic
// operators: compute in float.
#ifndef MTAC_CUDA_EMU_F16_H
#define MTAC_CUDA_EMU_F16_H

#include "attn/cuda_emu/cuda_emu.h"

// A float's bits, and the float of given bits.
__host__ __device__ inline uint32_t cuemu_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
__host__ __device__ inline float cuemu_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

template <class Raw, class Conv>
struct cuemu_f16 {
    typedef Raw raw;
    unsigned short __x;
    cuemu_f16() = default;
    __host__ __device__ cuemu_f16(const Raw &r) : __x(r.x) {}
    __host__ __device__ cuemu_f16(float f) : __x(Conv::from(f)) {}
    __host__ __device__ operator float() const { return Conv::to(__x); }
    __host__ __device__ operator Raw() const { return Raw{__x}; }
};

// The toolkit's functions of a 16-bit type T whose name in them is S (half, bfloat16):
// __ushort_as_S, __S_as_ushort, __float2S_rn, __float2S (the same rounding) and __S2float.
#define CUEMU_F16_FUNCTIONS(T, S, Conv)                                                                   \
    __host__ __device__ inline T __ushort_as_##S(unsigned short u) { return T(typename T::raw{u}); }      \
    __host__ __device__ inline unsigned short __##S##_as_ushort(T h) { return h.__x; }                    \
    __host__ __device__ inline T __float2##S##_rn(float f) { return __ushort_as_##S(Conv::from(f)); }     \
    __host__ __device__ inline T __float2##S(float f) { return __float2##S##_rn(f); }                     \
    __host__ __device__ inline float __##S##2float(T h) { return Conv::to(h.__x); }

#endif
