// cuda_bf16.h of the CUDA emulator (cuda_emu.h): __nv_bfloat16 and the conversions the kernels use,
// exact as CUDA defines them. bfloat16 is float32's upper half: sign, the same 8 exponent bits,
// 7 mantissa bits, so float32's denormals, infinities and range carry over.
#ifndef MTAC_CUDA_EMU_BF16_H
#define MTAC_CUDA_EMU_BF16_H

#include "attn/cuda_emu/cuda_emu.h"
#include "cuemu_f16.h"

struct __nv_bfloat16_raw {
    unsigned short x;
};

// The conversions (the class's, and the functions' below). Round to nearest, ties to even: add
// just under half of the dropped 16 bits' unit, plus the kept part's lowest bit, and truncate. A
// carry out of the mantissa raises the exponent, and past the largest finite value gives inf. NaN
// becomes the canonical 0x7fff, as the conversion on a GPU.
struct cuemu_bf16_conv {
    __host__ __device__ static unsigned short from(float f) {
        uint32_t u = cuemu_bits(f);
        if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
        u += 0x7fffu + ((u >> 16) & 1u);
        return (unsigned short)(u >> 16);
    }
    __host__ __device__ static float to(unsigned short x) { return cuemu_float((uint32_t)x << 16); }
};
typedef cuemu_f16<__nv_bfloat16_raw, cuemu_bf16_conv> __nv_bfloat16;

CUEMU_F16_FUNCTIONS(__nv_bfloat16, bfloat16, cuemu_bf16_conv)

#endif
