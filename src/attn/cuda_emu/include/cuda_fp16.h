// cuda_fp16.h of the CUDA emulator (cuda_emu.h): __half (IEEE binary16: sign, 5 exponent bits of
// bias 15, 10 mantissa bits; largest finite 65504, denormals down to 2^-24) and the conversions the
// kernels use, exact as CUDA defines them.
#ifndef MTAC_CUDA_EMU_FP16_H
#define MTAC_CUDA_EMU_FP16_H

#include "attn/cuda_emu/cuda_emu.h"
#include "cuemu_f16.h"

struct __half_raw {
    unsigned short x;
};

// m >> shift, rounded to nearest with ties to even.
__host__ __device__ inline uint32_t cuemu_shift_rne(uint32_t m, int shift) {
    const uint32_t q = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    return q + (rem > half || (rem == half && (q & 1u)));
}

// The conversions (the class's, and the functions' below).
struct cuemu_half_conv {
    // Round to nearest, ties to even. NaN becomes the canonical 0x7fff, as the conversion on a GPU;
    // 65520 (halfway to the next power of two) and above overflow to inf; below 2^-14 the result is
    // a denormal, a multiple of 2^-24, and 2^-25 and below round to zero (2^-25 itself is a tie).
    __host__ __device__ static unsigned short from(float f) {
        const uint32_t u = cuemu_bits(f);
        const unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
        const uint32_t a = u & 0x7fffffffu;
        if (a > 0x7f800000u) return 0x7fff;
        if (a >= 0x477ff000u) return (unsigned short)(sign | 0x7c00);  // >= 65520
        if (a < 0x33000000u) return sign;                            // < 2^-25
        const int e = (int)(a >> 23) - 127;
        const uint32_t m = (a & 0x7fffffu) | 0x800000u;  // |f| = m 2^(e-23)
        if (e < -14)  // a denormal h 2^-24 with h = m 2^(e+1); rounding up to 0x400 is 2^-14, the smallest normal
            return (unsigned short)(sign | cuemu_shift_rne(m, -(e + 1)));
        // a carry out of the 10 mantissa bits raises the exponent field, as it should
        return (unsigned short)(sign | (((uint32_t)(e + 15) << 10) + cuemu_shift_rne(m, 13) - 0x400u));
    }
    __host__ __device__ static float to(unsigned short x) {
        const uint32_t sign = (uint32_t)(x & 0x8000u) << 16, e = (x >> 10) & 0x1fu, m = x & 0x3ffu;
        if (e == 0x1f) return cuemu_float(sign | 0x7f800000u | m << 13);  // inf, or NaN with its payload
        if (e == 0) return cuemu_float(sign | cuemu_bits((float)m * 0x1p-24f));  // a denormal (or zero): exact in float
        return cuemu_float(sign | (e - 15 + 127) << 23 | m << 13);
    }
};
typedef cuemu_f16<__half_raw, cuemu_half_conv> __half;

CUEMU_F16_FUNCTIONS(__half, half, cuemu_half_conv)

#endif
