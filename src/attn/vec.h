// vec.h: sixteen floats as one value, for the register-tiled map kernels (conv.c, matmul.c).
// GCC/Clang vector extension: one AVX-512 register, or two AVX ones, or four SSE ones, whatever
// the target has. Loads and stores go through memcpy, which compiles to unaligned vector moves.
#ifndef MTAC_ATTN_VEC_H
#define MTAC_ATTN_VEC_H

#include <string.h>

typedef float vf __attribute__((vector_size(64)));
enum { VL = 16 };

static inline vf vload(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void vstore(float *p, vf v) { memcpy(p, &v, sizeof v); }

#endif
