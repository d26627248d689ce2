// vec.h: one hardware vector of floats as one value, for the register-tiled map kernels (conv.c,
// matmul.c), and the register-tile sizes that go with it.
//
// The width is the target's, chosen at compile time: 16 floats (one zmm register) with AVX-512,
// else 8 (one ymm register). A vector wider than the registers does not work: with 64-byte
// vectors on AVX2, GCC moved each load through general registers and 16-byte stack stores
// (which then failed store forwarding into the 32-byte loads) and kept the accumulators on the
// stack, and the strip products ran at 5% of sgemm (docs/fused.md, "AVX2").
//
// The tile sizes keep every accumulator, the operand vectors and a broadcast in registers: 32
// of them with AVX-512 (24 accumulators), 16 with AVX2 (12). Loads and stores go through memcpy,
// which compiles to unaligned vector moves.
#ifndef MTAC_ATTN_VEC_H
#define MTAC_ATTN_VEC_H

#include <string.h>

#ifdef __AVX512F__
typedef float vf __attribute__((vector_size(64)));
enum {
    VL = 16,
    MM_NV = 4,    // matmul.c, C = A B: vectors of d per tile (by MM_NI rows)
    CONV_NV = 4,  // conv.c: vectors of keys per convolution tile (by 4 output rows)
    WG_ACC = 24   // conv.c: accumulators of a kernel-gradient block (kernel rows x tap columns)
};
#else
typedef float vf __attribute__((vector_size(32)));
enum { VL = 8, MM_NV = 2, CONV_NV = 2, WG_ACC = 12 };
#endif
enum { MM_NI = 6 };  // matmul.c, C = A B: rows per tile

static inline vf vload(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }

#endif
