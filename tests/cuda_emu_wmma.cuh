// cuda_emu_wmma.cuh: the wmma kernels of test_cuda_emu.cpp, in plain CUDA: the test runs them in the
// CUDA emulator, and cuda_emu_wmma_nvcc.cu compiles them with nvcc to show they are valid CUDA:
//   nvcc -arch=sm_90 -std=c++17 -c tests/cuda_emu_wmma_nvcc.cu -o /tmp/cuda_emu_wmma.o
#ifndef MTAC_TESTS_CUDA_EMU_WMMA_CUH
#define MTAC_TESTS_CUDA_EMU_WMMA_CUH

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#define TILE_SHARED(T, name, n) __shared__ __align__(128) T name[n]
#else
#include "attn/cuda_emu/include/mma.h"
#define TILE_SHARED(T, name, n) T *const name = (T *)::cuemu::shared_array((n) * sizeof(T), 128)
#endif

namespace wmma = nvcuda::wmma;

template <typename L> struct is_row_major { static const bool value = false; };
template <> struct is_row_major<wmma::row_major> { static const bool value = true; };

// One warp: d = a b + c on one 16x16x16 tile, a and b of layouts LA and LB with ldm 16, c and d of
// layout cl. With twice set, a second product is added in place (d aliasing c): d = 2 a b + c.
template <typename T, typename LA, typename LB>
__global__ void k_wmma_tile(const T *a, const T *b, const float *c, float *d, int c_row_major, int twice) {
    const wmma::layout_t cl = c_row_major ? wmma::mem_row_major : wmma::mem_col_major;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::load_matrix_sync(acc, c, 16, cl);
    wmma::mma_sync(acc, fa, fb, acc);
    if (twice) wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(d, acc, 16, cl);
}

// D (32x48) = A (32x64) B (64x48) + C, one block of six warps, warp w owning the output tile at
// rows 16 (w / 3), columns 16 (w % 3). A is row-major (ld 64) or column-major (ld 32) as LA says,
// B row-major (ld 48) or column-major (ld 64) as LB says, C and D as cl says. Each step of 16
// along k, the block stages A's 32x16 and B's 16x48 slices in shared memory, in the same layouts.
template <typename T, typename LA, typename LB>
__global__ void k_wmma_tiled(const T *A, const T *B, const float *C, float *D, int c_row_major) {
    const int M = 32, N = 48, K = 64, KS = 16;
    const bool ar = is_row_major<LA>::value, br = is_row_major<LB>::value;
    const wmma::layout_t cl = c_row_major ? wmma::mem_row_major : wmma::mem_col_major;
    TILE_SHARED(T, sa, M * KS);
    TILE_SHARED(T, sb, KS * N);
    const int warp = threadIdx.x / 32, wr = warp / 3, wc = warp % 3;
    const int ldc = c_row_major ? N : M;
    const size_t at = c_row_major ? (size_t)16 * wr * N + 16 * wc : (size_t)16 * wc * M + 16 * wr;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::load_matrix_sync(acc, C + at, ldc, cl);
    for (int k0 = 0; k0 < K; k0 += KS) {
        for (int i = threadIdx.x; i < M * KS; i += blockDim.x) {  // element (r, k) of A's slice
            const int r = i / KS, k = i % KS;
            sa[ar ? r * KS + k : k * M + r] = A[ar ? r * K + k0 + k : (k0 + k) * M + r];
        }
        for (int i = threadIdx.x; i < KS * N; i += blockDim.x) {  // element (k, n) of B's slice
            const int k = i / N, n = i % N;
            sb[br ? k * N + n : n * KS + k] = B[br ? (k0 + k) * N + n : n * K + k0 + k];
        }
        __syncthreads();
        wmma::load_matrix_sync(fa, ar ? sa + 16 * wr * KS : sa + 16 * wr, ar ? KS : M);
        wmma::load_matrix_sync(fb, br ? sb + 16 * wc : sb + 16 * wc * KS, br ? N : KS);
        wmma::mma_sync(acc, fa, fb, acc);
        __syncthreads();  // before the next slice overwrites these
    }
    wmma::store_matrix_sync(D + at, acc, ldc, cl);
}

// D (16 W x 16) = A (16 W x K, row-major) B (K x 16, row-major) + C (row-major), one block of W
// warps, warp w owning rows 16w..16w+15, its sum kept in shared memory and accumulated in place:
// each slice of 16 along k loads the sum, adds a b and stores it back. Right only when the warp's
// lanes all load before any stores, as a warp does on a GPU (each op waits for every lane).
template <typename T>
__global__ void k_wmma_accumulate(const T *A, const T *B, const float *C, float *D, int K) {
    const int W = blockDim.x / 32, w = threadIdx.x / 32;
    TILE_SHARED(float, sum, 16 * 16 * 8);  // up to 8 warps
    for (int i = threadIdx.x; i < 16 * W * 16; i += blockDim.x) sum[i] = C[i];
    __syncthreads();
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    for (int k0 = 0; k0 < K; k0 += 16) {
        wmma::load_matrix_sync(acc, sum + 16 * 16 * w, 16, wmma::mem_row_major);
        wmma::load_matrix_sync(fa, A + (size_t)16 * w * K + k0, K);
        wmma::load_matrix_sync(fb, B + (size_t)k0 * 16, 16);
        wmma::mma_sync(acc, fa, fb, acc);
        wmma::store_matrix_sync(sum + 16 * 16 * w, acc, 16, wmma::mem_row_major);
        __syncwarp();  // the stores before the next slice's load (memory order between the lanes)
    }
    __syncthreads();
    for (int i = threadIdx.x; i < 16 * W * 16; i += blockDim.x) D[i] = sum[i];
}

#endif
