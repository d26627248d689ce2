// cublas_v2.h of the CUDA emulator: the cuBLAS calls the CUDA backend makes, on OpenBLAS, with
// cuBLAS's column-major layout, transposes and argument checks (cuda_emu.cpp).
#ifndef MTAC_CUDA_EMU_CUBLAS_H
#define MTAC_CUDA_EMU_CUBLAS_H

#include "attn/cuda_emu/cuda_emu.h"

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef struct cuemu_blas *cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
// C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch, column-major, X_i = X + i * strideX;
// C is not read when beta == 0.
cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long sA,
                                         const float *B, int ldb, long long sB, const float *beta, float *C, int ldc,
                                         long long sC, int batch);

#endif
