// mma_ptx.cuh: the tensor-core path's primitives, each a PTX instruction behind a small inline
// function, with the per-lane layouts of the PTX ISA ("Warp-level matrix fragments", "ldmatrix",
// "cp.async"). Under nvcc they are inline PTX (sm_80 and later); in the CUDA emulator
// (MTAC_CUDA_EMU, cuda_emu/cuda_emu.h) each lane holds only its own registers and the warp
// exchanges them as a GPU's warp does, so a wrong lane layout gives wrong numbers there too.
//
// Lanes: lane = 4 g + t, g = lane / 4 in 0..7 (the "groupID"), t = lane % 4. A b16x2 register holds
// two bf16, the lower column (or k) index in its low 16 bits.
//
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: D (16 x 8) = A (16 x 16) B (16 x 8) + C.
//   A, m x k:     a[0] = A[g][2t..2t+1],   a[1] = A[g+8][2t..2t+1],
//                 a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9]
//   B, k x n:     b[0] = B[2t..2t+1][g],   b[1] = B[2t+8..2t+9][g]
//   C, D, float:  c[0], c[1] = C[g][2t], C[g][2t+1];  c[2], c[3] = C[g+8][2t], C[g+8][2t+1]
//
// ldmatrix.sync.aligned.m8n8.xN[.trans].shared.b16: N = 1, 2, 4 matrices of 8 x 8 b16 from shared
// memory. Lane l gives the address of row l % 8 of matrix l / 8 (lanes 0..8N-1; each row 16
// contiguous, 16-byte aligned bytes); register r[m] of lane l then holds matrix m's
// row g, columns 2t..2t+1 (without .trans), or its rows 2t..2t+1 of column g (with .trans: the
// transposed matrix's row g). So for a row-major 16 x 16 tile X at leading dimension ld (b16),
// lane l's address X + (l % 16) ld + 8 (l / 16) gives, with x4, A's a[0..3] above; for a tile
// stored n-major (K rows, as in Q K^T) the rows n, columns k give B's b[] without .trans; for one
// stored k-major (V rows, as in P V) with .trans.
//
// cp.async.cg.shared.global: 16 bytes from global to shared memory, asynchronously: the data is
// there only after cp_async_wait<N>() has returned for its group (cp_async_commit() closes the
// calling thread's group of copies; wait<N> waits until at most the N most recent groups are
// pending) and, for other threads to read it, after a barrier. With full = false nothing is read
// and the 16 bytes are zeros (a tile's rows past T).
#ifndef MTAC_ATTN_MMA_PTX_CUH
#define MTAC_ATTN_MMA_PTX_CUH

#include <cuda_bf16.h>
#include <stdint.h>

struct mma_a { uint32_t x[4]; };
struct mma_b { uint32_t x[2]; };
struct mma_c { float x[4]; };

// Two floats rounded to bf16 (nearest even) in one b16x2 register, lo in the low half.
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
    return (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) |
           (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16;
}

// x split into hi = bf16(x) and lo = bf16(x - hi): x = hi + lo to about 2^-17 |x|, so that a product
// of bf16 MMAs on (hi, lo) keeps a float map's precision (docs/cuda.md, "Splits for accuracy").
__device__ __forceinline__ void bf16_split(float x, __nv_bfloat16 &hi, __nv_bfloat16 &lo) {
    hi = __float2bfloat16_rn(x);
    lo = __float2bfloat16_rn(x - __bfloat162float(hi));
}

// The same for two floats into b16x2 registers (x0 in the low halves).
__device__ __forceinline__ void bf16x2_split(float x0, float x1, uint32_t &hi, uint32_t &lo) {
    __nv_bfloat16 h0, l0, h1, l1;
    bf16_split(x0, h0, l0);
    bf16_split(x1, h1, l1);
    hi = (uint32_t)__bfloat16_as_ushort(h0) | (uint32_t)__bfloat16_as_ushort(h1) << 16;
    lo = (uint32_t)__bfloat16_as_ushort(l0) | (uint32_t)__bfloat16_as_ushort(l1) << 16;
}

#ifdef MTAC_CUDA_EMU

__device__ __forceinline__ void mma_16816(mma_c &d, const mma_a &a, const mma_b &b) {
    ::cuemu::mma_16816_bf16(d.x, a.x, b.x);
}
__device__ __forceinline__ void ldsm_x1(uint32_t r[1], const void *p) { ::cuemu::ldmatrix(r, p, 1, 0); }
__device__ __forceinline__ void ldsm_x2(uint32_t r[2], const void *p) { ::cuemu::ldmatrix(r, p, 2, 0); }
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) { ::cuemu::ldmatrix(r, p, 4, 0); }
__device__ __forceinline__ void ldsm_x2_t(uint32_t r[2], const void *p) { ::cuemu::ldmatrix(r, p, 2, 1); }
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void *p) { ::cuemu::ldmatrix(r, p, 4, 1); }
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool full) {
    ::cuemu::cp_async(dst, src, 16, full);
}
__device__ __forceinline__ void cp_async_commit(void) { ::cuemu::cp_async_commit(); }
template <int N> __device__ __forceinline__ void cp_async_wait(void) { ::cuemu::cp_async_wait(N); }

#else

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mma_16816(mma_c &d, const mma_a &a, const mma_b &b) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3])
                 : "r"(a.x[0]), "r"(a.x[1]), "r"(a.x[2]), "r"(a.x[3]), "r"(b.x[0]), "r"(b.x[1]));
}
__device__ __forceinline__ void ldsm_x1(uint32_t r[1], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n" : "=r"(r[0]) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x2(uint32_t r[2], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n" : "=r"(r[0]), "=r"(r[1]) : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x2_t(uint32_t r[2], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void cp_async16(void *dst, const void *src, bool full) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(full ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void cp_async_wait(void) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

#endif

#endif
