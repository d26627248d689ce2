// cuda_emu_wmma_nvcc.cu: the kernels test_cuda_emu.cpp runs in the CUDA emulator
// (cuda_emu_wmma.cuh, cuda_emu_ptx.cuh), compiled by nvcc in every variant the test runs, to show
// they are valid CUDA (not built by CMake; no GPU needed):
//   nvcc -arch=sm_90 -std=c++17 -I src -c tests/cuda_emu_wmma_nvcc.cu -o /tmp/cuda_emu_wmma.o
#include "cuda_emu_ptx.cuh"
#include "cuda_emu_wmma.cuh"

#define VARIANTS(T, LA, LB)                                                                               \
    template __global__ void k_wmma_tile<T, LA, LB>(const T *, const T *, const float *, float *, int, int); \
    template __global__ void k_wmma_tiled<T, LA, LB>(const T *, const T *, const float *, float *, int);
#define LAYOUTS(T)                                  \
    VARIANTS(T, wmma::row_major, wmma::row_major)   \
    VARIANTS(T, wmma::row_major, wmma::col_major)   \
    VARIANTS(T, wmma::col_major, wmma::row_major)   \
    VARIANTS(T, wmma::col_major, wmma::col_major)
LAYOUTS(__nv_bfloat16)
LAYOUTS(__half)
#define ACCUMULATE(T) template __global__ void k_wmma_accumulate<T>(const T *, const T *, const float *, float *, int);
ACCUMULATE(__nv_bfloat16)
ACCUMULATE(__half)
