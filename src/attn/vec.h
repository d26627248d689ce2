// vec.h: one hardware vector of floats as one value, for the register-tiled map kernels (conv.c,
// matmul.c), and the register-tile sizes that go with it.
//
// The width is the target's, chosen at compile time: 16 floats (one zmm register) with AVX-512,
// else 8 (one ymm register). A vector wider than the registers does not work: with 64-byte
// vectors on AVX2, GCC moved each load through general registers and 16-byte stack stores
// (which then failed store forwarding into the 32-byte loads) and kept the accumulators on the
// stack, and the strip products ran far below sgemm's rate (docs/fused.md, "AVX2").
//
// The tile sizes keep every accumulator, the operand vectors and a broadcast in registers: 32
// of them with AVX-512 (24 accumulators), 16 with AVX2 (12). Loads and stores go through memcpy,
// which compiles to unaligned vector moves.
#ifndef MTAC_ATTN_VEC_H
#define MTAC_ATTN_VEC_H

#include <string.h>
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#ifdef __AVX512F__
typedef float vf __attribute__((vector_size(64)));
enum {
    VL = 16,
    MM_NV = 4,    // matmul.c, C = A B: vectors of d per tile (by MM_NI rows)
    CONV_NV = 4,  // conv.c: vectors of keys per convolution tile (by 4 output rows)
    WG_ACC = 24,  // conv.c: accumulators of a kernel-gradient block (kernel rows x tap columns)
    DM_NA = 4,    // conv.c: head-mixing gradient tile, DM_NA x DM_NB entries
    DM_NB = 4,
    MIX_NV = 2    // conv.c: vectors of keys per head-mixing tile (by 8 output heads)
};
#else
typedef float vf __attribute__((vector_size(32)));
enum { VL = 8, MM_NV = 2, CONV_NV = 2, WG_ACC = 12, DM_NA = 2, DM_NB = 4, MIX_NV = 1 };
#endif
enum { MM_NI = 6 };  // matmul.c, C = A B: rows per tile

static inline vf vload(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }

// The first n lanes (0 < n <= VL) of a vector at p, zeros elsewhere, and their store: masked
// moves, which touch no memory past p[n-1] (the last row of a tensor whose width is not a
// multiple of VL, e.g. d = 40 with AVX-512, ends there).
static inline vf vload_part(const float *p, int n) {
#if defined(__AVX512F__)
    return (vf)_mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
#elif defined(__AVX2__)
    return (vf)_mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
#else
    vf v = {0};
    memcpy(&v, p, (size_t)n * sizeof(float));
    return v;
#endif
}

static inline void vstore_part(float *p, vf v, int n) {
#if defined(__AVX512F__)
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), (__m512)v);
#elif defined(__AVX2__)
    _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)), (__m256)v);
#else
    memcpy(p, &v, (size_t)n * sizeof(float));
#endif
}

// The tiles load each operand vector once and multiply it into every accumulator that reads
// it. With AVX2's 16 registers a tile needs nearly all of them, and GCC then drops the loaded
// vector and folds a fresh load into each multiply-add instead (one load per product, and the
// tile is bound by loads). An empty asm that takes the vector in a register and gives it back
// keeps GCC from redoing the load (docs/fused.md has the speed it gave the convolutions). x86
// only (its "v" register class holds a whole vector); elsewhere nothing.
static inline __attribute__((always_inline)) void keep_in_register(vf *x) {
#if defined(__x86_64__) || defined(__i386__)
    __asm__("" : "+v"(*x));
#else
    (void)x;
#endif
}

#endif
