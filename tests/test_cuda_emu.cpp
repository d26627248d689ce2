// test_cuda_emu.cpp: the CUDA emulator (src/attn/cuda_emu/) against what CUDA specifies: barriers
// that hold a block's threads, per-block shared memory and NaN-filled fresh memory, the thread
// orders of its schedules, the launch limits an H100 checks, the runtime's errors and last-error
// rule, and cuBLAS's column-major strided-batched product against direct sums in double.
#include "attn/cuda_emu/cuda_emu.h"
#include "attn/cuda_emu/cuda_emu_ctl.h"
#include "attn/cuda_emu/include/cublas_v2.h"

#include <initializer_list>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern "C" {
#include <cmocka.h>
}

#define LAUNCH(k, grid, block, shmem) ::cuemu::launch(#k, k, grid, block, shmem, 0)

static float *dev_floats(size_t n) {
    void *p = NULL;
    assert_int_equal(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
    return (float *)p;
}

// ---- barriers and shared memory ----

// out[t] = what thread t+1 wrote to shared memory: right only when the barrier holds every thread.
__global__ void k_rotate(float *out, int with_barrier) {
    float *sh = (float *)::cuemu::shared_array(256 * sizeof(float), alignof(float));
    const unsigned t = threadIdx.x, n = blockDim.x;
    sh[t] = (float)t;
    if (with_barrier) __syncthreads();
    out[blockIdx.x * n + t] = sh[(t + 1) % n];
}

static void test_barrier_holds_the_block(void **s) {
    (void)s;
    float *out = dev_floats(2 * 64), host[2 * 64];
    for (uint64_t sched = 0; sched < 3; sched++) {
        mta_cuda_emu_set_schedule(sched);
        for (int rep = 0; rep < 3; rep++) {  // three launches: each starts its passes in another order
            LAUNCH(k_rotate, 2, 64, 0)(out, 1);
            assert_int_equal(cudaGetLastError(), cudaSuccess);
            assert_int_equal(cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
            for (int i = 0; i < 2 * 64; i++) assert_true(host[i] == (float)((i % 64 + 1) % 64));
        }
    }
    mta_cuda_emu_set_schedule(0);
    cudaFree(out);
}

// Without the barrier, some launch of the three orders reads a slot no thread had written yet:
// the shared memory's NaN fill shows it.
static void test_missing_barrier_shows(void **s) {
    (void)s;
    float *out = dev_floats(64), host[64];
    int wrong = 0;
    for (int rep = 0; rep < 3; rep++) {
        LAUNCH(k_rotate, 1, 64, 0)(out, 0);
        assert_int_equal(cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
        for (int i = 0; i < 64; i++) wrong += isnan(host[i]);
    }
    assert_true(wrong > 0);
    cudaFree(out);
}

// Each block has its own shared memory, NaN until written; dynamic shared memory too.
__global__ void k_block_shared(float *out) {
    float *sh = (float *)::cuemu::shared_array(4 * sizeof(float), alignof(float));
    float *dyn = (float *)::cuemu::dynamic_shared();
    if (threadIdx.x == 0) out[3 * blockIdx.x] = sh[0] + dyn[0];  // read before any write: NaN
    __syncthreads();
    if (threadIdx.x == 1) sh[0] = (float)blockIdx.x, dyn[0] = 2.0f * blockIdx.x;
    __syncthreads();
    if (threadIdx.x == 0) out[3 * blockIdx.x + 1] = sh[0], out[3 * blockIdx.x + 2] = dyn[0];
}

static void test_shared_memory_is_per_block_and_poisoned(void **s) {
    (void)s;
    float *out = dev_floats(3 * 5), host[3 * 5];
    LAUNCH(k_block_shared, 5, 32, 16)(out);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int b = 0; b < 5; b++) {
        assert_true(isnan(host[3 * b]));
        assert_true(host[3 * b + 1] == (float)b && host[3 * b + 2] == 2.0f * b);
    }
    cudaFree(out);
}

// A block whose threads do not all reach the barrier (some exit) is an error that stops the
// program, as compute-sanitizer's synccheck would report it.
__global__ void k_divergent(float *out) {
    if (threadIdx.x < 16) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

static void test_barrier_divergence_aborts(void **s) {
    (void)s;
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(2);
        float *out = dev_floats(32);
        LAUNCH(k_divergent, 1, 32, 0)(out);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT);
}

// ---- the orders ----

__global__ void k_record(unsigned *order, unsigned *at, int passes) {
    for (int p = 0; p < passes; p++) {
        order[p * blockDim.x + (*at)++ % blockDim.x] = threadIdx.x;  // one thread runs at a time
        __syncthreads();
    }
}

// Over three passes the threads run in order, reversed and shuffled; the schedule says which
// comes first.
static void test_orders(void **s) {
    (void)s;
    const unsigned n = 16;
    unsigned *order, *at;
    assert_int_equal(cudaMalloc(&order, 3 * n * sizeof(unsigned)), cudaSuccess);
    assert_int_equal(cudaMalloc(&at, sizeof(unsigned)), cudaSuccess);
    for (uint64_t sched = 0; sched < 3; sched++) {
        mta_cuda_emu_set_schedule(sched);
        unsigned host[3 * 16];
        int seen[3] = {0, 0, 0};  // in order, reversed, neither (a shuffle)
        for (int rep = 0; rep < 3; rep++) {
            assert_int_equal(cudaMemset(at, 0, sizeof(unsigned)), cudaSuccess);
            LAUNCH(k_record, 1, n, 0)(order, at, 3);
            assert_int_equal(cudaMemcpy(host, order, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
            for (int p = 0; p < 3; p++) {
                int fwd = 1, rev = 1, hit[16] = {0};
                for (unsigned i = 0; i < n; i++) {
                    fwd &= host[p * n + i] == i, rev &= host[p * n + i] == n - 1 - i;
                    hit[host[p * n + i] % n]++;
                }
                for (unsigned i = 0; i < n; i++) assert_int_equal(hit[i], 1);  // each thread once a pass
                seen[fwd ? 0 : rev ? 1 : 2]++;
            }
        }
        assert_true(seen[0] == 3 && seen[1] == 3 && seen[2] == 3);
    }
    mta_cuda_emu_set_schedule(0);
    cudaFree(order);
    cudaFree(at);
}

// ---- launch checks and the runtime's errors ----

__global__ void k_touch(float *out) { out[0] = 1.0f; }

static void refused(dim3 grid, dim3 block, size_t shmem, cudaError_t want) {
    float *out = dev_floats(1), host = 0;
    LAUNCH(k_touch, grid, block, shmem)(out);
    assert_int_equal(cudaGetLastError(), want);
    assert_int_equal(cudaGetLastError(), cudaSuccess);  // read once, then cleared
    assert_int_equal(cudaMemcpy(&host, out, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_true(isnan(host));  // the kernel did not run
    cudaFree(out);
}

static void test_launch_limits(void **s) {
    (void)s;
    refused(1, 1025, 0, cudaErrorInvalidConfiguration);
    refused(1, dim3(32, 33, 1), 0, cudaErrorInvalidConfiguration);
    refused(1, dim3(1, 1, 65), 0, cudaErrorInvalidConfiguration);
    refused(dim3(1, 65536, 1), 1, 0, cudaErrorInvalidConfiguration);
    refused(dim3(1, 1, 65536), 1, 0, cudaErrorInvalidConfiguration);
    refused(0, 1, 0, cudaErrorInvalidConfiguration);
    refused(1, 1, 48 * 1024 + 1, cudaErrorInvalidValue);
    float *out = dev_floats(1);
    LAUNCH(k_touch, dim3(1, 65535, 1), 1, 0)(out);  // the limits themselves run
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    LAUNCH(k_touch, 1, 1, 48 * 1024)(out);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    LAUNCH(k_touch, 1, 1024, 0)(out);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaFuncSetAttribute(k_touch, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024 + 1),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    assert_int_equal(cudaFuncSetAttribute(k_touch, cudaFuncAttributeMaxDynamicSharedMemorySize, 100 * 1024), cudaSuccess);
    LAUNCH(k_touch, 1, 1, 100 * 1024)(out);  // after the opt-in
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    cudaFree(out);
}

static void test_runtime_memory(void **s) {
    (void)s;
    float *p = dev_floats(10), host[12];
    assert_int_equal(cudaMemcpy(host, p, 10 * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    for (int i = 0; i < 10; i++) assert_true(isnan(host[i]));  // fresh memory is NaN
    // copies and memsets past the allocation, or of host memory named device memory, are refused
    assert_int_equal(cudaMemcpy(host, p, 11 * sizeof(float), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpy(p + 1, host, 10 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpy(host, host + 1, sizeof(float), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    assert_int_equal(cudaMemset(p, 0, 11 * sizeof(float)), cudaErrorInvalidValue);
    assert_int_equal(cudaFree(host), cudaErrorInvalidDevicePointer);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidDevicePointer);  // the last one
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    // more than the device has: refused, and the error stays until read
    void *big = NULL;
    assert_int_equal(cudaMalloc(&big, (size_t)5 << 30), cudaErrorMemoryAllocation);
    assert_null(big);
    assert_int_equal(cudaPeekAtLastError(), cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaErrorMemoryAllocation);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    int major = 0;
    assert_int_equal(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
    assert_int_equal(major, 9);
    assert_int_equal(cudaFree(p), cudaSuccess);
}

// ---- cuBLAS ----

// C = alpha op(A) op(B) + beta C, column-major, in double.
static double ref_entry(int ta, int tb, int k, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                        float c, int r, int col) {
    double sum = 0;
    for (int x = 0; x < k; x++) {
        const double a = ta ? A[r * lda + x] : A[x * lda + r];
        const double b = tb ? B[x * ldb + col] : B[col * ldb + x];
        sum += a * b;
    }
    return alpha * sum + (beta == 0.0f ? 0.0 : beta * (double)c);
}

static void test_cublas_sgemm_strided_batched(void **s) {
    (void)s;
    const int m = 5, n = 7, k = 3, batch = 2, lda = 9, ldb = 8, ldc = 6;
    const long long sA = lda * 9, sB = ldb * 9, sC = ldc * n + 3;
    float *A = dev_floats(batch * sA), *B = dev_floats(batch * sB), *C = dev_floats(batch * sC);
    static float hA[2 * 81], hB[2 * 72], hC[2 * 45], c0[2 * 45];
    uint64_t r = 1;
    for (float *x : {hA, hB}) {
        const int len = x == hA ? 2 * 81 : 2 * 72;
        for (int i = 0; i < len; i++) r = r * 6364136223846793005ULL + 1, x[i] = (float)((r >> 40) % 1000) / 500.0f - 1.0f;
    }
    cudaMemcpy(A, hA, sizeof hA, cudaMemcpyHostToDevice);
    cudaMemcpy(B, hB, sizeof hB, cudaMemcpyHostToDevice);
    cublasHandle_t h;
    assert_int_equal(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int bi = 0; bi < 2; bi++) {
                const float alpha = 0.5f, beta = bi ? 2.0f : 0.0f;
                for (int i = 0; i < 2 * 45; i++) c0[i] = beta == 0.0f ? NAN : (float)(i % 7) - 3.0f;  // beta 0: C not read
                cudaMemcpy(C, c0, sizeof c0, cudaMemcpyHostToDevice);
                assert_int_equal(cublasSgemmStridedBatched(h, ta ? CUBLAS_OP_T : CUBLAS_OP_N, tb ? CUBLAS_OP_T : CUBLAS_OP_N, m,
                                                           n, k, &alpha, A, lda, sA, B, ldb, sB, &beta, C, ldc, sC, batch),
                                 CUBLAS_STATUS_SUCCESS);
                cudaMemcpy(hC, C, sizeof hC, cudaMemcpyDeviceToHost);
                for (int b = 0; b < batch; b++)
                    for (int col = 0; col < n; col++)
                        for (int row = 0; row < ldc && b * sC + col * ldc + row < 2 * 45; row++) {
                            const size_t at = b * sC + col * ldc + row;
                            if (row >= m) {  // between the columns: untouched
                                assert_true(memcmp(&hC[at], &c0[at], sizeof(float)) == 0);
                                continue;
                            }
                            const double want = ref_entry(ta, tb, k, alpha, hA + b * sA, lda, hB + b * sB, ldb, beta, c0[at], row, col);
                            assert_true(fabs(hC[at] - want) <= 1e-5 * (1 + fabs(want)));
                        }
            }
    const float one = 1.0f;
    // leading dimensions below the rows they hold, and negative sizes, are refused as cuBLAS does
    assert_int_equal(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, m - 1, sA, B, ldb, sB, &one, C,
                                               ldc, sC, 1),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSgemmStridedBatched(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, A, k - 1, sA, B, ldb, sB, &one, C,
                                               ldc, sC, 1),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_T, m, n, k, &one, A, lda, sA, B, n - 1, sB, &one, C,
                                               ldc, sC, 1),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, lda, sA, B, ldb, sB, &one, C,
                                               m - 1, sC, 1),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, -1, n, k, &one, A, lda, sA, B, ldb, sB, &one, C,
                                               ldc, sC, 1),
                     CUBLAS_STATUS_INVALID_VALUE);
    assert_int_equal(cublasSgemmStridedBatched(NULL, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, A, lda, sA, B, ldb, sB, &one, C,
                                               ldc, sC, 1),
                     CUBLAS_STATUS_NOT_INITIALIZED);
    cublasDestroy(h);
    cudaFree(A), cudaFree(B), cudaFree(C);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_barrier_holds_the_block),
        cmocka_unit_test(test_missing_barrier_shows),
        cmocka_unit_test(test_shared_memory_is_per_block_and_poisoned),
        cmocka_unit_test(test_barrier_divergence_aborts),
        cmocka_unit_test(test_orders),
        cmocka_unit_test(test_launch_limits),
        cmocka_unit_test(test_runtime_memory),
        cmocka_unit_test(test_cublas_sgemm_strided_batched),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
