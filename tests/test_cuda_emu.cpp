// test_cuda_emu.cpp: the CUDA emulator (src/attn/cuda_emu/) against what CUDA specifies: barriers
// that hold a block's threads, per-block shared memory and NaN-filled fresh memory, the thread
// orders of its schedules, the launch limits an H100 checks (and a device's opt-in shared memory
// limit that a test sets), the runtime's errors and last-error
// rule, cuBLAS's column-major strided-batched product against direct sums in double, the bf16 and
// fp16 conversions against hand-computed bit patterns, and warps: __syncwarp's and ldmatrix's warp
// barriers, the shuffles against their definition, and a warp whose lanes do not all arrive; the tensor-core
// primitives of attn/mma_ptx.cuh (cuda_emu_ptx.cuh's kernels): each lane's mma.sync and ldmatrix
// registers against the PTX ISA's tables, a product chain against double sums, cp.async's groups,
// and shuffles with partial and wrong masks; thread block clusters (attn/cluster_ptx.cuh): an
// all-gather through distributed shared memory under every schedule, a missing cluster barrier and
// a wrong rank that show, each rule a GPU imposes broken once (fatal), and the launch checks.
#include "attn/cuda_emu/cuda_emu.h"
#include "attn/cuda_emu/cuda_emu_ctl.h"
#include "attn/cuda_emu/include/cublas_v2.h"
#include "attn/cuda_emu/include/cuda_fp16.h"
#define MTAC_CUDA_EMU 1
#include "cuda_emu_ptx.cuh"
#include "testutil.h"

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

__global__ void k_record(unsigned *order, unsigned *at, int passes, int warp) {
    for (int p = 0; p < passes; p++) {
        order[p * blockDim.x + (*at)++ % blockDim.x] = threadIdx.x;  // one thread runs at a time
        if (warp) __syncwarp();
        else __syncthreads();
    }
}

// Over three passes the threads run in order, reversed and shuffled; the schedule says which
// comes first. Passes end at block barriers, or at warp barriers (warp set; a block of one warp).
static void check_orders(int warp) {
    const unsigned n = 32;
    unsigned *order, *at;
    assert_int_equal(cudaMalloc(&order, 3 * n * sizeof(unsigned)), cudaSuccess);
    assert_int_equal(cudaMalloc(&at, sizeof(unsigned)), cudaSuccess);
    for (uint64_t sched = 0; sched < 3; sched++) {
        mta_cuda_emu_set_schedule(sched);
        unsigned host[3 * n];
        int seen[3] = {0, 0, 0};  // in order, reversed, neither (a shuffle)
        for (int rep = 0; rep < 3; rep++) {
            assert_int_equal(cudaMemset(at, 0, sizeof(unsigned)), cudaSuccess);
            LAUNCH(k_record, 1, n, 0)(order, at, 3, warp);
            assert_int_equal(cudaMemcpy(host, order, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
            for (int p = 0; p < 3; p++) {
                int fwd = 1, rev = 1, hit[n] = {0};
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

static void test_orders(void **s) {
    (void)s;
    check_orders(0);
    check_orders(1);
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

// The device's opt-in limit (cudaDevAttrMaxSharedMemoryPerBlockOptin): an H100's 227 KB unless a
// test sets another (an A100's 163 KB here); opt-ins and launches past it are refused, a launch
// past it too when the kernel opted in while the limit was higher.
__global__ void k_touch_big(float *out) { out[0] = 2.0f; }
static void test_shared_optin_limit(void **s) {
    (void)s;
    int v = 0;
    assert_int_equal(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
    assert_int_equal(v, 227 * 1024);
    assert_int_equal(cudaFuncSetAttribute(k_touch_big, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024), cudaSuccess);
    mta_cuda_emu_set_shared_optin(163 * 1024);
    assert_int_equal(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
    assert_int_equal(v, 163 * 1024);
    cudaDeviceProp prop;
    assert_int_equal(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    assert_int_equal(prop.sharedMemPerBlockOptin, 163 * 1024);
    assert_int_equal(cudaFuncSetAttribute(k_touch, cudaFuncAttributeMaxDynamicSharedMemorySize, 163 * 1024 + 1),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    float *out = dev_floats(1), host = 0;
    LAUNCH(k_touch_big, 1, 1, 163 * 1024 + 1)(out);  // opted in to 200 KB, on a device of 163
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    assert_int_equal(cudaMemcpy(&host, out, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_true(isnan(host));  // the kernel did not run
    LAUNCH(k_touch_big, 1, 1, 163 * 1024)(out);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    mta_cuda_emu_set_shared_optin(0);  // the default again
    assert_int_equal(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0), cudaSuccess);
    assert_int_equal(v, 227 * 1024);
    LAUNCH(k_touch_big, 1, 1, 200 * 1024)(out);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    cudaFree(out);
}

// atomicAdd across blocks that run on several CPU threads (a launch of at least 16384 threads is
// shared among OpenMP's): every thread adds 1 to one counter and keeps the value it replaced. The
// counter ends at the number of threads and the old values are 0, 1, ..., n - 1, each once (all
// exact in float32 below 2^24); an addition that read the counter and wrote it back separately
// would lose another thread's in between, and two threads would see the same old value.
__global__ void k_count(float *counter, float *olds) {
    const unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
    olds[t] = atomicAdd(counter, 1.0f);
}

static void test_atomic_add(void **s) {
    (void)s;
    const unsigned blocks = 128, threads = 512, n = blocks * threads;
    float *d = dev_floats(n + 1), *h = (float *)malloc((n + 1) * sizeof(float));
    assert_non_null(h);
    assert_int_equal(cudaMemset(d, 0, sizeof(float)), cudaSuccess);
    LAUNCH(k_count, blocks, threads, 0)(d, d + 1);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    assert_int_equal(cudaMemcpy(h, d, (n + 1) * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    assert_true(h[0] == (float)n);
    char *seen = (char *)calloc(n, 1);
    assert_non_null(seen);
    for (unsigned t = 0; t < n; t++) {
        const float x = h[1 + t];
        assert_true(x >= 0.0f && x < (float)n && x == floorf(x) && !seen[(unsigned)x]);
        seen[(unsigned)x] = 1;
    }
    free(seen);
    free(h);
    cudaFree(d);
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
    // a pointer into an allocation is device memory; host memory, and the allocation once freed, not
    cudaPointerAttributes at;
    assert_int_equal(cudaPointerGetAttributes(&at, (char *)p + 2), cudaSuccess);
    assert_int_equal(at.type, cudaMemoryTypeDevice);
    assert_int_equal(cudaPointerGetAttributes(&at, host), cudaSuccess);
    assert_int_equal(at.type, cudaMemoryTypeUnregistered);
    assert_int_equal(cudaFree(p), cudaSuccess);
    assert_int_equal(cudaPointerGetAttributes(&at, p), cudaSuccess);
    assert_int_equal(at.type, cudaMemoryTypeUnregistered);
}

// ---- cuBLAS ----

// C = alpha op(A) op(B) + beta C, column-major, in double.
// The exact entry (r, col) of alpha op(A) op(B) + beta c, and in *abs the sum of its terms' |values|.
static double ref_entry(int ta, int tb, int k, float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                        float c, int r, int col, double *abs) {
    double sum = 0, sa = 0;
    for (int x = 0; x < k; x++) {
        const double a = ta ? A[r * lda + x] : A[x * lda + r];
        const double b = tb ? B[x * ldb + col] : B[col * ldb + x];
        sum += a * b, sa += fabs(a * b);
    }
    const double cb = beta == 0.0f ? 0.0 : beta * (double)c;
    *abs = fabs(alpha) * sa + fabs(cb);
    return alpha * sum + cb;
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
                            double abs;
                            const double want =
                                ref_entry(ta, tb, k, alpha, hA + b * sA, lda, hB + b * sB, ldb, beta, c0[at], row, col, &abs);
                            // a float32 sum of k products, alpha's product and beta's sum: within
                            // gamma_{k+2} of the |terms| (tu_sum_ratio)
                            assert_true(tu_sum_ratio(hC[at], want, abs, k + 2) <= 1);
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

// ---- bf16 and fp16 conversions ----

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

// {float32 bits, the 16-bit result}: each by hand from the formats' definitions.
static const uint32_t to_bf16[][2] = {
    {0x3f800000, 0x3f80},  // 1
    {0x3f808000, 0x3f80},  // 1 + 2^-8: halfway between 0x3f80 and 0x3f81, to the even one
    {0x3f818000, 0x3f82},  // halfway between 0x3f81 and 0x3f82, to the even one
    {0x3f808001, 0x3f81},  // just past halfway
    {0x3f807fff, 0x3f80},  // just below
    {0xbf818000, 0xbf82},  // negative ties alike
    {0x80000000, 0x8000},  // -0
    {0x7f800000, 0x7f80},  // inf
    {0xff800000, 0xff80},  // -inf
    {0x7f7f7fff, 0x7f7f},  // just below halfway past the largest bf16: the largest
    {0x7f7f8000, 0x7f80},  // halfway past the largest (odd): overflows to inf
    {0x7f7fffff, 0x7f80},  // float's largest overflows too
    {0xff7fffff, 0xff80},
    {0x7fc00000, 0x7fff},  // NaN: canonical
    {0xffc00001, 0x7fff},
    {0x7f800001, 0x7fff},  // a NaN whose upper half alone would read as inf
    {0x00000001, 0x0000},  // denormals: the smallest float one rounds to 0
    {0x00008000, 0x0000},  // halfway to the smallest bf16 denormal: to even, 0
    {0x00018000, 0x0002},  // halfway between 1 and 2 ulps: 2
    {0x80008001, 0x8001},  // past halfway, negative
    {0x007fffff, 0x0080},  // the largest float denormal rounds up to the smallest normal
};
static const uint32_t to_fp16[][2] = {
    {0x3f800000, 0x3c00},  // 1
    {0x3f801000, 0x3c00},  // 1 + 2^-11: halfway between 0x3c00 and 0x3c01, to the even one
    {0x3f803000, 0x3c02},  // 1 + 3 2^-11: halfway between 0x3c01 and 0x3c02
    {0x3f801001, 0x3c01},  // just past halfway
    {0xbf803000, 0xbc02},  // negative
    {0x80000000, 0x8000},  // -0
    {0x477fe000, 0x7bff},  // 65504, the largest
    {0x477fefff, 0x7bff},  // just below 65520
    {0x477ff000, 0x7c00},  // 65520, halfway past the largest (odd): overflows to inf
    {0x501502f9, 0x7c00},  // 1e10
    {0xc77ff000, 0xfc00},
    {0x7f800000, 0x7c00},  // inf
    {0xff800000, 0xfc00},
    {0x7fc00000, 0x7fff},  // NaN: canonical
    {0xff800001, 0x7fff},
    {0x38800000, 0x0400},  // 2^-14, the smallest normal
    {0x387fc000, 0x03ff},  // 1023 2^-24, the largest denormal
    {0x387fe000, 0x0400},  // 1023.5 2^-24: a tie, to the even 0x400 (the smallest normal)
    {0x38000000, 0x0200},  // 2^-15
    {0x33800000, 0x0001},  // 2^-24, the smallest denormal
    {0x33c00000, 0x0002},  // 1.5 2^-24: a tie, to the even 2
    {0x33000000, 0x0000},  // 2^-25: a tie, to the even 0
    {0x33000001, 0x0001},  // just past it
    {0xb3800000, 0x8001},
    {0x00000001, 0x0000},  // a float denormal
};

static void test_bf16_fp16_conversions(void **s) {
    (void)s;
    for (const auto &c : to_bf16) {
        const float f = from_bits(c[0]);
        assert_int_equal(__bfloat16_as_ushort(__float2bfloat16_rn(f)), c[1]);
        assert_int_equal(__bfloat16_as_ushort(__float2bfloat16(f)), c[1]);
        const __nv_bfloat16 h = f;  // the class converts as __float2bfloat16_rn
        assert_int_equal(__bfloat16_as_ushort(h), c[1]);
        // back to float: the upper half, exactly (NaN stays NaN)
        const float back = __bfloat162float(h);
        if (c[1] == 0x7fff) assert_true(isnan(back) && isnan((float)h));
        else assert_int_equal(to_bits(back), c[1] << 16), assert_int_equal(to_bits((float)h), c[1] << 16);
    }
    for (const auto &c : to_fp16) {
        const float f = from_bits(c[0]);
        assert_int_equal(__half_as_ushort(__float2half_rn(f)), c[1]);
        assert_int_equal(__half_as_ushort(__float2half(f)), c[1]);
        const __half h = f;
        assert_int_equal(__half_as_ushort(h), c[1]);
    }
    // fp16 to float: {fp16, float32}
    static const uint32_t from_fp16[][2] = {
        {0x3c00, 0x3f800000}, {0x3c01, 0x3f802000}, {0x7bff, 0x477fe000}, {0x0400, 0x38800000},
        {0x03ff, 0x387fc000}, {0x0001, 0x33800000}, {0x8001, 0xb3800000}, {0x0200, 0x38000000},
        {0x8000, 0x80000000}, {0x7c00, 0x7f800000}, {0xfc00, 0xff800000}, {0xc000, 0xc0000000},
    };
    for (const auto &c : from_fp16) {
        assert_int_equal(to_bits(__half2float(__ushort_as_half((unsigned short)c[0]))), c[1]);
        assert_int_equal(to_bits((float)__ushort_as_half((unsigned short)c[0])), c[1]);
    }
    // poisoned memory (every byte 0xff) is NaN in both formats
    assert_true(isnan(__half2float(__ushort_as_half(0xffff))) && isnan(__half2float(__ushort_as_half(0x7e00))));
    assert_true(isnan(__bfloat162float(__ushort_as_bfloat16(0xffff))));
    // every fp16 survives float and back
    for (uint32_t u = 0; u < 0x10000; u++) {
        const __half h = __ushort_as_half((unsigned short)u);
        if (!isnan(__half2float(h))) assert_int_equal(__half_as_ushort(__float2half_rn(__half2float(h))), u);
    }
}

// ---- helpers ----

static float uniform(uint64_t *r) {  // in [-1, 1), with every bit of a float's mantissa used
    *r = *r * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((double)(*r >> 11) * 0x1p-52 - 1.0);
}

// got (m x n, row-major or not) against times * A B + C summed in double: summing K products
// exactly in float32, in any order, errs by at most K 2^-24 (1 + K 2^-24) times the sum of the
// terms' magnitudes (the standard bound for recursive summation, with float's unit roundoff 2^-24).
static void check_product(const float *got, int row_major, int m, int n, int K, const float *A, const float *B,
                          const float *C, int times) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            const size_t at = row_major ? (size_t)i * n + j : (size_t)j * m + i;
            double want = C[at], mag = fabs(C[at]);
            for (int k = 0; k < K; k++) {
                const double p = (double)A[i * K + k] * B[k * n + j];
                want += times * p, mag += times * fabs(p);
            }
            const double adds = times * K, u = 0x1p-24;
            if (!(fabs(got[at] - want) <= adds * u * (1 + adds * u) * mag)) {
                fprintf(stderr, "(%d, %d): %.9g, want %.9g\n", i, j, got[at], want);
                fail();
            }
        }
}

// fn() in a child process: 1 when it aborts (the emulator's fatal errors).
static int aborts(void (*fn)(void)) {
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(2);
        fn();
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

// ---- warps ----

// out[t] = what the next lane of t's warp wrote to shared memory: right only when __syncwarp
// holds the warp (two warps).
__global__ void k_rotate_warp(float *out, int with_barrier) {
    float *sh = (float *)::cuemu::shared_array(64 * sizeof(float), alignof(float));
    const unsigned t = threadIdx.x, base = t / 32 * 32;
    sh[t] = (float)t;
    if (with_barrier) __syncwarp();
    out[t] = sh[base + (t + 1) % 32];
}

static void test_syncwarp(void **s) {
    (void)s;
    float *out = dev_floats(64), host[64];
    int wrong = 0;
    for (uint64_t sched = 0; sched < 3; sched++) {
        mta_cuda_emu_set_schedule(sched);
        for (int rep = 0; rep < 3; rep++) {
            LAUNCH(k_rotate_warp, 1, 64, 0)(out, 1);
            assert_int_equal(cudaGetLastError(), cudaSuccess);
            assert_int_equal(cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
            for (int t = 0; t < 64; t++) assert_true(host[t] == (float)(t / 32 * 32 + (t + 1) % 32));
            LAUNCH(k_rotate_warp, 1, 64, 0)(out, 0);  // without it, some order reads an unwritten slot
            assert_int_equal(cudaMemcpy(host, out, sizeof host, cudaMemcpyDeviceToHost), cudaSuccess);
            for (int t = 0; t < 64; t++) wrong += isnan(host[t]);
        }
    }
    mta_cuda_emu_set_schedule(0);
    assert_true(wrong > 0);
    cudaFree(out);
}

// Every shuffle of a warp with every width and lane argument, in one kernel (one after another,
// so a value overwritten before every lane has read it shows), and a butterfly sum.
const int SHFL_WIDTHS = 6, SHFL_ARGS = 36;  // widths 1..32; arguments -2..33
__global__ void k_shuffles(int *out, float *sums) {
    const unsigned t = threadIdx.x, n = blockDim.x;
    const int v = 100 * (int)t + 7;
    for (int wi = 0; wi < SHFL_WIDTHS; wi++)
        for (int a = 0; a < SHFL_ARGS; a++) {
            const size_t at = ((size_t)(wi * SHFL_ARGS + a) * 2) * n + t;
            out[at] = __shfl_xor_sync(0xffffffffu, v, a - 2, 1 << wi);
            out[at + n] = __shfl_sync(0xffffffffu, v, a - 2, 1 << wi);
        }
    float x = (float)t;  // a warp's sum, as a row-wise softmax's warp would reduce a row
    for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
    sums[t] = x;
}

// CUDA's definitions (PTX's shfl.sync): lanes form segments of `width`; __shfl_sync reads lane
// srcLane modulo width of the segment; __shfl_xor_sync reads lane ^ laneMask (its low 5 bits), or
// keeps its own value when that lane lies in a later segment.
static void test_shuffles(void **s) {
    (void)s;
    const unsigned n = 64;
    const size_t cases = (size_t)SHFL_WIDTHS * SHFL_ARGS * 2 * n;
    int *out = NULL, *host = (int *)malloc(cases * sizeof(int));
    float *sums = dev_floats(n), hsums[n];
    assert_int_equal(cudaMalloc(&out, cases * sizeof(int)), cudaSuccess);
    for (uint64_t sched = 0; sched < 3; sched++) {
        mta_cuda_emu_set_schedule(sched);
        LAUNCH(k_shuffles, 1, n, 0)(out, sums);
        assert_int_equal(cudaGetLastError(), cudaSuccess);
        cudaMemcpy(host, out, cases * sizeof(int), cudaMemcpyDeviceToHost);
        cudaMemcpy(hsums, sums, sizeof hsums, cudaMemcpyDeviceToHost);
        for (int wi = 0; wi < SHFL_WIDTHS; wi++)
            for (int a = 0; a < SHFL_ARGS; a++)
                for (unsigned t = 0; t < n; t++) {
                    const int width = 1 << wi, arg = a - 2, lane = (int)t % 32, warp0 = (int)t - lane;
                    const int seg = lane / width * width, x = lane ^ (arg & 31);
                    const int from_xor = x < seg + width ? x : lane, from_idx = seg + ((arg % width) + width) % width;
                    const size_t at = ((size_t)(wi * SHFL_ARGS + a) * 2) * n + t;
                    assert_int_equal(host[at], 100 * (warp0 + from_xor) + 7);
                    assert_int_equal(host[at + n], 100 * (warp0 + from_idx) + 7);
                }
        for (unsigned t = 0; t < n; t++) assert_true(hsums[t] == (float)(t / 32 * 32 * 32 + 31 * 32 / 2));
    }
    mta_cuda_emu_set_schedule(0);
    free(host);
    cudaFree(out), cudaFree(sums);
}

// Lanes 16..31 of each warp do something else than lanes 0..15 (how), or all do the same (0).
__global__ void k_warp_split(int how) {
    __nv_bfloat16 *sh = (__nv_bfloat16 *)::cuemu::shared_array(32 * 8 * sizeof(__nv_bfloat16), 16);
    const bool low = threadIdx.x % 32 < 16;
    uint32_t r[4];
    if (how == 0) __syncwarp();
    if (how == 1 && !low) return;  // exit while the others wait
    if (how == 2) {                // wait at the block's barrier instead
        if (low) __syncwarp();
        else __syncthreads();
    }
    if (how == 3) {  // another warp operation
        if (low) __syncwarp();
        else (void)__shfl_sync(0xffffffffu, 1, 0);
    }
    if (how == 4 && low) ldsm_x4(r, sh + 8 * (threadIdx.x % 32));  // an ldmatrix in half the warp
    if (how == 5) __syncwarp(0xffffu);                              // a mask that does not name lanes 16..31
    if (how <= 1) ldsm_x4(r, sh + 8 * (threadIdx.x % 32));
}

static void warp_split(int how, unsigned threads) { LAUNCH(k_warp_split, 1, threads, 0)(how); }

// A warp whose lanes do not all reach the same warp operation is fatal, as are a mask that does
// not name the lane executing it and a warp operation in a block that is not a whole number of warps.
static void test_warp_divergence_aborts(void **s) {
    (void)s;
    assert_false(aborts([] { warp_split(0, 64); }));
    assert_true(aborts([] { warp_split(1, 64); }));
    assert_true(aborts([] { warp_split(2, 64); }));
    assert_true(aborts([] { warp_split(3, 64); }));
    assert_true(aborts([] { warp_split(4, 64); }));
    assert_true(aborts([] { warp_split(5, 64); }));
    assert_true(aborts([] { warp_split(0, 48); }));
}

// ---- the tensor-core primitives (mma_ptx.cuh): each lane's registers ----

// The PTX ISA's tables ("Matrix Fragments for mma.m16n8k16 with floating point type", and
// ldmatrix's), transcribed: lane = 4 groupID + threadID_in_group; element i of a fragment sits in
// register i / 2, the even one in the low 16 bits.
static void isa_a(int lane, int i, int *row, int *col) {  // a0..a7 of the 16 x 16 A
    const int g = lane >> 2, t = lane % 4;
    *row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
    *col = i < 4 ? t * 2 + (i & 1) : t * 2 + 8 + (i & 1);
}
static void isa_b(int lane, int i, int *row, int *col) {  // b0..b3 of the 16 x 8 B
    const int g = lane >> 2, t = lane % 4;
    *row = i < 2 ? t * 2 + (i & 1) : t * 2 + 8 + (i & 1);
    *col = g;
}
static void isa_c(int lane, int i, int *row, int *col) {  // c0..c3 (and d) of the 16 x 8 C
    const int g = lane >> 2, t = lane % 4;
    *row = i < 2 ? g : g + 8;
    *col = t * 2 + (i & 1);
}

static uint16_t bf16_bits(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
static float bf16_value(uint16_t u) { return __bfloat162float(__ushort_as_bfloat16(u)); }

// Random bf16 A (16 x 16), B (16 x 8) and float C (16 x 8), given to the lanes by the ISA's tables;
// each lane's d against the double sum of C and the 16 products. The emulator sums in float32,
// in k order; the products of bf16 are exact in float32, so its error is that of 16 rounded
// additions: at most 16 u (1 + 16 u) times the sum of the terms' magnitudes, u = 2^-24 (a GPU
// adds in another order and internal precision: within a bound of the same form, not equal).
static void test_mma_layout(void **s) {
    (void)s;
    uint64_t r = 5;
    float A[16][16], B[16][8], C[16][8];
    uint32_t a[32 * 4] = {0}, b[32 * 2] = {0};
    float c[32 * 4], d[32 * 4];
    for (int rep = 0; rep < 3; rep++) {
        for (auto &row : A)
            for (float &x : row) x = bf16_value(bf16_bits(uniform(&r)));
        for (auto &row : B)
            for (float &x : row) x = bf16_value(bf16_bits(uniform(&r)));
        for (auto &row : C)
            for (float &x : row) x = uniform(&r);
        memset(a, 0, sizeof a), memset(b, 0, sizeof b);
        for (int l = 0; l < 32; l++) {
            int row, col;
            for (int i = 0; i < 8; i++) isa_a(l, i, &row, &col), a[4 * l + i / 2] |= (uint32_t)bf16_bits(A[row][col]) << 16 * (i % 2);
            for (int i = 0; i < 4; i++) isa_b(l, i, &row, &col), b[2 * l + i / 2] |= (uint32_t)bf16_bits(B[row][col]) << 16 * (i % 2);
            for (int i = 0; i < 4; i++) isa_c(l, i, &row, &col), c[4 * l + i] = C[row][col];
        }
        uint32_t *da = NULL, *db = NULL;
        float *dc = dev_floats(128), *dd = dev_floats(128);
        assert_int_equal(cudaMalloc(&da, sizeof a), cudaSuccess);
        assert_int_equal(cudaMalloc(&db, sizeof b), cudaSuccess);
        cudaMemcpy(da, a, sizeof a, cudaMemcpyHostToDevice), cudaMemcpy(db, b, sizeof b, cudaMemcpyHostToDevice);
        cudaMemcpy(dc, c, sizeof c, cudaMemcpyHostToDevice);
        LAUNCH(k_mma_lanes, 1, 32, 0)(da, db, dc, dd);
        assert_int_equal(cudaGetLastError(), cudaSuccess);
        cudaMemcpy(d, dd, sizeof d, cudaMemcpyDeviceToHost);
        for (int l = 0; l < 32; l++)
            for (int i = 0; i < 4; i++) {
                int row, col;
                isa_c(l, i, &row, &col);
                double want = C[row][col], mag = fabs(C[row][col]);
                for (int k = 0; k < 16; k++) want += (double)A[row][k] * B[k][col], mag += fabs((double)A[row][k] * B[k][col]);
                const double u = 0x1p-24;
                if (!(fabs(d[4 * l + i] - want) <= 16 * u * (1 + 16 * u) * mag)) {
                    fprintf(stderr, "lane %d d%d (%d, %d): %.9g, want %.9g\n", l, i, row, col, d[4 * l + i], want);
                    fail();
                }
            }
        cudaFree(da), cudaFree(db), cudaFree(dc), cudaFree(dd);
    }
}

// ldmatrix: a table of 32 rows of 8 b16 whose entry (R, c) is the code 256 R + c. Lane l < 8 n
// gives the address of table row rowof[l] = (5 l + 3) % 32 (a permutation: each lane's own address
// is what counts), the others a null address (ignored, as PTX says for .x1 and .x2). Per the ISA,
// matrix j's row i is the row lane 8 j + i addressed, and lane l's register j holds matrix j's row
// l / 4, columns 2 (l % 4) + h in half h; with .trans, the transposed matrix's: row 2 (l % 4) + h,
// column l / 4.
static void check_ldmatrix(int n, int trans, int bad_lane = -1, int bad = 0) {
    uint16_t tab[32 * 16];
    int rowof[32];
    for (int R = 0; R < 32; R++)
        for (int c = 0; c < 16; c++) tab[16 * R + c] = (uint16_t)(c < 8 ? 256 * R + c : 0xdead);
    for (int l = 0; l < 32; l++) rowof[l] = l < 8 * n ? (5 * l + 3) % 32 : -1;
    if (bad_lane >= 0) rowof[bad_lane] = bad;
    uint16_t *dtab = NULL;
    int *drow = NULL;
    uint32_t *dr = NULL, got[32 * 4];
    assert_int_equal(cudaMalloc(&dtab, sizeof tab), cudaSuccess);
    assert_int_equal(cudaMalloc(&drow, sizeof rowof), cudaSuccess);
    assert_int_equal(cudaMalloc(&dr, sizeof got), cudaSuccess);
    cudaMemcpy(dtab, tab, sizeof tab, cudaMemcpyHostToDevice), cudaMemcpy(drow, rowof, sizeof rowof, cudaMemcpyHostToDevice);
    LAUNCH(k_ldmatrix_lanes, 1, 32, 0)(dtab, drow, n, trans, dr);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
    cudaMemcpy(got, dr, sizeof got, cudaMemcpyDeviceToHost);
    for (int l = 0; l < 32; l++)
        for (int j = 0; j < 4; j++)
            for (int h = 0; h < 2; h++) {
                const unsigned half = got[4 * l + j] >> 16 * h & 0xffff;
                const int row = trans ? 2 * (l % 4) + h : l / 4, col = trans ? l / 4 : 2 * (l % 4) + h;
                const unsigned want = j < n ? 256u * (unsigned)rowof[8 * j + row] + (unsigned)col : 0;
                if (half != want) {
                    fprintf(stderr, "x%d%s lane %d r%d half %d: 0x%04x, want 0x%04x\n", n, trans ? ".trans" : "", l, j, h, half, want);
                    fail();
                }
            }
    cudaFree(dtab), cudaFree(drow), cudaFree(dr);
}

static void test_ldmatrix_layout(void **s) {
    (void)s;
    check_ldmatrix(1, 0), check_ldmatrix(2, 0), check_ldmatrix(4, 0);
    check_ldmatrix(2, 1), check_ldmatrix(4, 1);
    check_ldmatrix(1, 0, 8, -2);  // lanes past 8 n give no address: anything goes
    // a lane's row misaligned or outside shared memory is fatal (a GPU faults or misreads)
    assert_true(aborts([] { check_ldmatrix(4, 0, 31, -2); }));
    assert_true(aborts([] { check_ldmatrix(2, 1, 9, -3); }));
    assert_true(aborts([] { check_ldmatrix(1, 0, 0, -2); }));
}

// A 64 x 64 x 128 product as 64 m16n8k16 products per warp from ldmatrix on cp.async tiles
// (padded and swizzled, B n-major and k-major), against double sums: each entry is 128 products
// summed in float32 in k order from 0 (exact products), so within 128 u (1 + 128 u) of the sum
// of their magnitudes (check_product's bound). Every schedule: a missing barrier shows.
static void test_mma_product_chain(void **s) {
    (void)s;
    uint64_t r = 13;
    static float A[PC_M * PC_K], B[PC_K * PC_N], Z[PC_M * PC_N], D[PC_M * PC_N];
    static __nv_bfloat16 ha[PC_M * PC_K], hb[PC_K * PC_N];
    for (int i = 0; i < PC_M * PC_K; i++) ha[i] = uniform(&r), A[i] = (float)ha[i];
    for (int i = 0; i < PC_K * PC_N; i++) B[i] = (float)__nv_bfloat16(uniform(&r));
    __nv_bfloat16 *da = NULL, *db = NULL;
    float *dd = dev_floats(PC_M * PC_N);
    assert_int_equal(cudaMalloc(&da, sizeof ha), cudaSuccess);
    assert_int_equal(cudaMalloc(&db, sizeof hb), cudaSuccess);
    cudaMemcpy(da, ha, sizeof ha, cudaMemcpyHostToDevice);
    for (int kmajor = 0; kmajor < 2; kmajor++) {
        for (int k = 0; k < PC_K; k++)
            for (int n = 0; n < PC_N; n++) hb[kmajor ? k * PC_N + n : n * PC_K + k] = B[k * PC_N + n];
        cudaMemcpy(db, hb, sizeof hb, cudaMemcpyHostToDevice);
        for (uint64_t sched = 0; sched < 3; sched++) {
            mta_cuda_emu_set_schedule(sched);
            LAUNCH(k_product_chain, 1, 128, 0)(da, db, kmajor, dd);
            assert_int_equal(cudaGetLastError(), cudaSuccess);
            cudaMemcpy(D, dd, sizeof D, cudaMemcpyDeviceToHost);
            check_product(D, 1, PC_M, PC_N, PC_K, A, B, Z, 1);
        }
    }
    mta_cuda_emu_set_schedule(0);
    cudaFree(da), cudaFree(db), cudaFree(dd);
}

static int cp_async_run(int how, float *got) {
    float src[256], *dsrc = dev_floats(256), *dout = dev_floats(4 * 128), *dglobal = dev_floats(128);
    for (int i = 0; i < 256; i++) src[i] = (float)(i + 1);
    cudaMemcpy(dsrc, src, sizeof src, cudaMemcpyHostToDevice);
    LAUNCH(k_cp_async, 1, 32, 0)(dsrc, dout, dglobal, how);
    const int e = cudaGetLastError();
    if (got) cudaMemcpy(got, dout, 4 * 128 * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(dsrc), cudaFree(dout), cudaFree(dglobal);
    return e;
}

// stage k of got (k_cp_async's out) is entirely NaN (nan), zero (zero) or the source from `from`.
static int stage_is(const float *got, int k, int what, int from) {
    for (int i = 0; i < 128; i++) {
        const float x = got[128 * k + i];
        if (what == 0 ? !isnan(x) : what == 1 ? x != 0.0f : x != (float)(from + i + 1)) return 0;
    }
    return 1;
}

// cp.async's data is there only after the wait_group that completes its group: NaN before (the
// destination is poisoned at the issue), even past __syncthreads(); wait_group 1 with two groups
// completes the first only; a zero fill writes zeros; a copy not committed is in no group, so
// wait_group 0 leaves it; a thread that exits with copies pending, a misaligned address or a
// destination outside shared memory is fatal.
static void test_cp_async(void **s) {
    (void)s;
    static float got[4 * 128];
    const int NAN_ = 0, ZERO = 1, DATA = 2;
    assert_int_equal(cp_async_run(0, got), cudaSuccess);
    assert_true(stage_is(got, 0, NAN_, 0) && stage_is(got, 1, NAN_, 0) && stage_is(got, 2, DATA, 0));
    assert_int_equal(cp_async_run(1, got), cudaSuccess);
    assert_true(stage_is(got, 0, DATA, 0) && stage_is(got, 1, NAN_, 0));
    assert_true(stage_is(got, 2, DATA, 0) && stage_is(got, 3, DATA, 128));
    assert_int_equal(cp_async_run(2, got), cudaSuccess);
    assert_true(stage_is(got, 0, ZERO, 0));
    assert_int_equal(cp_async_run(3, got), cudaSuccess);
    assert_true(stage_is(got, 0, NAN_, 0) && stage_is(got, 1, DATA, 0));
    assert_true(aborts([] { cp_async_run(4, NULL); }));
    assert_true(aborts([] { cp_async_run(5, NULL); }));
    assert_true(aborts([] { cp_async_run(6, NULL); }));
    assert_true(aborts([] { cp_async_run(7, NULL); }));
}

static void shfl_masks(int how, int *got) {
    int *d = NULL;
    assert_int_equal(cudaMalloc(&d, 64 * sizeof(int)), cudaSuccess);
    LAUNCH(k_shfl_masks, 1, 32, 0)(d, how);
    if (got) cudaMemcpy(got, d, 64 * sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d);
}

// Partial masks as PTX's shfl.sync and bar.warp.sync define them: the lanes a mask names meet,
// apart from the others; a lane executing a shuffle its mask does not name, a named lane that
// never comes, and a read from a lane outside the mask are fatal.
static void test_shuffle_masks(void **s) {
    (void)s;
    int got[64];
    for (uint64_t sched = 0; sched < 3; sched++) {
        mta_cuda_emu_set_schedule(sched);
        shfl_masks(0, got);
        for (int l = 0; l < 32; l++) {
            const int from = l < 16 ? l ^ 1 : 16 + (l + 3) % 16;
            assert_int_equal(got[l], 100 * from + 7);
            assert_int_equal(got[32 + l], l % 2 == 0 ? 100 * (l ^ 2) + 7 : -1);
        }
    }
    mta_cuda_emu_set_schedule(0);
    assert_true(aborts([] { shfl_masks(1, NULL); }));
    assert_true(aborts([] { shfl_masks(2, NULL); }));
    assert_true(aborts([] { shfl_masks(3, NULL); }));
}

// Schedules 0, 1 and 2 advance warps in step, one warp operation a pass, so no warp gets a whole
// tile ahead: k_double_buffer without its end-of-tile barrier gives the right sums on every launch.
// From 3 up a released warp runs on to its next block barrier first, and the warp that leads
// poisons, with the copies of the tile after next, a buffer the other warp has yet to read (at
// least one of its lanes has not run when the leader gathers): every launch gives a NaN. With the
// barrier, every schedule gives the right sums. The tiles' values are small integers: every sum
// is exact in any order.
static void test_warps_run_ahead(void **s) {
    (void)s;
    static float src[NB_TILES * NB_TILE];
    float sum = 0.0f, got[2];
    for (int i = 0; i < NB_TILES * NB_TILE; i++) src[i] = (float)(i % 7), sum += src[i];
    float *dsrc = dev_floats(NB_TILES * NB_TILE), *dout = dev_floats(2);
    cudaMemcpy(dsrc, src, sizeof src, cudaMemcpyHostToDevice);
    for (uint64_t sched = 0; sched < 6; sched++) {
        mta_cuda_emu_set_schedule(sched);
        for (int rep = 0; rep < 3; rep++)
            for (int end_barrier = 1; end_barrier >= 0; end_barrier--) {
                LAUNCH(k_double_buffer, 1, 64, 0)(dsrc, dout, end_barrier);
                assert_int_equal(cudaGetLastError(), cudaSuccess);
                cudaMemcpy(got, dout, sizeof got, cudaMemcpyDeviceToHost);
                const int right = got[0] == sum && got[1] == sum, poisoned = isnan(got[0]) || isnan(got[1]);
                assert_true(end_barrier || sched < 3 ? right : poisoned);
            }
    }
    mta_cuda_emu_set_schedule(0);
    cudaFree(dsrc), cudaFree(dout);
}

// ---- thread block clusters ----

// k_cl_gather (cuda_emu_ptx.cuh) in clusters of cs blocks over grid; its out and ranks to got and
// ranks (when not NULL), its counts added to *ops (when not NULL). Returns the launch's error.
static cudaError_t cl_gather(int how, unsigned cs, dim3 grid, unsigned *got, unsigned *ranks, mta_kernel_ops *ops) {
    const size_t nb = (size_t)grid.x * grid.y;
    unsigned *dout = NULL, *dranks = NULL;
    assert_int_equal(cudaMalloc(&dout, nb * CLG_SLOTS * sizeof(unsigned)), cudaSuccess);
    assert_int_equal(cudaMalloc(&dranks, 2 * nb * sizeof(unsigned)), cudaSuccess);
    ::cuemu::launch("k_cl_gather", k_cl_gather, grid, CLG_T, 0, 0, ops, cs)(dout, dranks, how);
    const cudaError_t e = cudaGetLastError();
    if (got) cudaMemcpy(got, dout, nb * CLG_SLOTS * sizeof(unsigned), cudaMemcpyDeviceToHost);
    if (ranks) cudaMemcpy(ranks, dranks, 2 * nb * sizeof(unsigned), cudaMemcpyDeviceToHost);
    cudaFree(dout), cudaFree(dranks);
    return e;
}

// 1 when every block holds every value of its cluster's ranks (k_cl_gather's comment: rank q's
// thread t's value j is 5 (id CLG_T + t) + j, id the block x0 + q of the cluster's row), and
// knows its rank as blockIdx.x % cs and its cluster's size as cs.
static int cl_gathered(const unsigned *got, const unsigned *ranks, unsigned cs, dim3 grid) {
    for (unsigned by = 0; by < grid.y; by++)
        for (unsigned bx = 0; bx < grid.x; bx++) {
            const unsigned id = by * grid.x + bx, x0 = bx - bx % cs;
            if (ranks[2 * id] != bx % cs || ranks[2 * id + 1] != cs) return 0;
            for (unsigned q = 0; q < cs; q++)
                for (unsigned t = 0; t < (unsigned)CLG_T; t++)
                    for (unsigned j = 0; j < 5; j++)
                        if (got[(size_t)id * CLG_SLOTS + 5 * (q * CLG_T + t) + j] != 5 * ((by * grid.x + x0 + q) * CLG_T + t) + j)
                            return 0;
        }
    return 1;
}

// The all-gather, pushed (cl_st16, cl_st4) and pulled (cl_ld4), gives every value in every block
// under every schedule, with clusters of 1 (a plain launch: cl_rank() 0, cl_size() 1, as on a GPU),
// 2, 4 and 8 blocks, on a grid of two rows of two clusters (the block-to-cluster map in x and y);
// the counts are the stores, loads and barriers the kernel makes.
static void test_cluster_gather(void **s) {
    (void)s;
    static unsigned got[32 * CLG_SLOTS], ranks[2 * 32];  // up to 4 clusters of 8
    for (unsigned cs : {1u, 2u, 4u, 8u})
        for (uint64_t sched = 0; sched < 6; sched++) {
            mta_cuda_emu_set_schedule(sched);
            for (int how : {CL_PUSH, CL_PULL})
                for (int rep = 0; rep < 2; rep++) {
                    assert_int_equal(cl_gather(how, cs, dim3(2 * cs, 2), got, ranks, NULL), cudaSuccess);
                    assert_true(cl_gathered(got, ranks, cs, dim3(2 * cs, 2)));
                }
        }
    mta_cuda_emu_set_schedule(0);
    // 16 blocks of 64 threads in clusters of 4: a push is, per thread and rank, one cl_st16 and
    // one cl_st4 (20 bytes); a pull five cl_ld4; both make two cluster barriers a block.
    const uint64_t calls = 16 * CLG_T * 4;
    mta_kernel_ops ops = {};
    assert_int_equal(cl_gather(CL_PUSH, 4, dim3(8, 2), NULL, NULL, &ops), cudaSuccess);
    assert_true(ops.dsmem_stores == 2 * calls && ops.dsmem_store_bytes == 20 * calls && ops.dsmem_loads == 0);
    assert_true(ops.cluster_barriers == 2 * 16 && ops.mma == 0 && ops.shfl == 0);
    ops = mta_kernel_ops{};
    assert_int_equal(cl_gather(CL_PULL, 4, dim3(8, 2), NULL, NULL, &ops), cudaSuccess);
    assert_true(ops.dsmem_loads == 5 * calls && ops.dsmem_load_bytes == 20 * calls && ops.dsmem_stores == 0);
    assert_true(ops.cluster_barriers == 2 * 16);
}

// Without the cluster barrier between the pushes and the reads, some schedule reads a slot that
// another block has not pushed yet (the shared memory's NaN fill, 0xffffffff); with a wrong rank
// (each thread pushes into its own block only) the other ranks' slots stay unwritten.
static void test_cluster_races_show(void **s) {
    (void)s;
    static unsigned got[4 * CLG_SLOTS], ranks[2 * 4];
    int wrong = 0;
    for (uint64_t sched = 0; sched < 6; sched++) {
        mta_cuda_emu_set_schedule(sched);
        for (int rep = 0; rep < 3; rep++) {
            assert_int_equal(cl_gather(CL_PUSH_NO_SYNC, 2, dim3(4), got, ranks, NULL), cudaSuccess);
            wrong += !cl_gathered(got, ranks, 2, dim3(4));
        }
        assert_int_equal(cl_gather(CL_PUSH_OWN_RANK, 2, dim3(4), got, ranks, NULL), cudaSuccess);
        assert_false(cl_gathered(got, ranks, 2, dim3(4)));
    }
    mta_cuda_emu_set_schedule(0);
    assert_true(wrong > 0);
}

// fn() in a child process: 1 when it aborts with a message on stderr that contains what.
static int aborts_saying(void (*fn)(void), const char *what) {
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        if (dup2(fd[1], 2) < 0) _exit(2);
        fn();
        _exit(0);
    }
    close(fd[1]);
    char msg[4096];
    size_t n = 0;
    for (ssize_t k; n < sizeof msg - 1 && (k = read(fd[0], msg + n, sizeof msg - 1 - n)) > 0;) n += (size_t)k;
    msg[n] = 0;
    close(fd[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    const int ok = WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(msg, what);
    if (!ok) fprintf(stderr, "expected an abort saying \"%s\"; got: %s\n", what, msg);
    return ok;
}

static int cl_how;
static void cl_gather_how(void) { cl_gather(cl_how, 2, dim3(4), NULL, NULL, NULL); }

// The rules of cluster_ptx.cuh, each broken once: fatal, with the emulator's message.
static void test_cluster_rules_abort(void **s) {
    (void)s;
    static const struct {
        int how;
        const char *what;
    } cases[] = {
        {CL_PULL_NO_EXIT_SYNC, "ld.shared::cluster: the block whose shared memory it reaches has exited"},
        {CL_ARRIVE_TWICE, "arrives twice without waiting"},
        {CL_WAIT_FIRST, "waits without having arrived"},
        {CL_RANK1_EXITS, "some threads of the cluster exited while others wait at barrier.cluster"},
        {CL_DEADLOCK, "deadlock"},
        {CL_MAP_GLOBAL, "mapa: the address is not in the calling block's shared memory"},
        {CL_MAP_RANK, "mapa: the rank is not that of a block of the cluster"},
        {CL_MISALIGNED, "st.shared::cluster: the address is not aligned"},
        {CL_PAST_ARRAY, "st.shared::cluster: the address is not within one shared array"},
    };
    for (const auto &c : cases) {
        cl_how = c.how;
        assert_true(aborts_saying(cl_gather_how, c.what));
    }
    assert_true(aborts_saying([] { (void)::cuemu::cluster_rank(); }, "called outside a kernel"));
}

// The largest cluster, 8 blocks of 1024 threads (8192 fibers at once): each thread pushes its
// value into its slot of the next rank's array (static, or the dynamic shared memory); after the
// barrier each reads what the previous rank pushed.
__global__ void k_cl_ring(unsigned *out, int dynamic) {
    unsigned *sh = dynamic ? (unsigned *)::cuemu::dynamic_shared()
                           : (unsigned *)::cuemu::shared_array(1024 * sizeof(unsigned), alignof(unsigned));
    const unsigned t = threadIdx.x, v = blockIdx.x * 1024 + t;
    cl_st4(cl_map(sh + t, (cl_rank() + 1) % cl_size()), v);
    cl_sync();
    out[blockIdx.x * 1024 + t] = sh[t];
    cl_arrive_relaxed();
    cl_wait();
}

static void test_cluster_of_8192_threads(void **s) {
    (void)s;
    static unsigned got[16 * 1024];
    unsigned *d = NULL;
    assert_int_equal(cudaMalloc(&d, sizeof got), cudaSuccess);
    for (int dynamic = 0; dynamic < 2; dynamic++) {
        ::cuemu::launch("k_cl_ring", k_cl_ring, 16, 1024, dynamic ? 4096 : 0, 0, NULL, 8)(d, dynamic);
        assert_int_equal(cudaGetLastError(), cudaSuccess);
        cudaMemcpy(got, d, sizeof got, cudaMemcpyDeviceToHost);
        for (unsigned b = 0; b < 16; b++)
            for (unsigned t = 0; t < 1024; t++) assert_int_equal(got[b * 1024 + t], (b / 8 * 8 + (b + 7) % 8) * 1024 + t);
    }
    cudaFree(d);
}

// A cluster launch is checked as the runtime checks it: grid.x a multiple of the cluster's
// blocks, 1 to 8 of them (the portable size); refused, nothing runs and the error is the last.
static void test_cluster_launch_checks(void **s) {
    (void)s;
    const uint64_t before = mta_cuda_emu_launches();
    assert_int_equal(cl_gather(CL_PUSH, 2, dim3(3), NULL, NULL, NULL), cudaErrorInvalidClusterSize);
    assert_int_equal(cl_gather(CL_PUSH, 16, dim3(16), NULL, NULL, NULL), cudaErrorInvalidClusterSize);
    assert_int_equal(cl_gather(CL_PUSH, 0, dim3(4), NULL, NULL, NULL), cudaErrorInvalidClusterSize);
    assert_int_equal(mta_cuda_emu_launches(), before);
    assert_int_equal(cl_gather(CL_PUSH, 8, dim3(8), NULL, NULL, NULL), cudaSuccess);
    assert_int_equal(cudaGetLastError(), cudaSuccess);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_barrier_holds_the_block),
        cmocka_unit_test(test_missing_barrier_shows),
        cmocka_unit_test(test_shared_memory_is_per_block_and_poisoned),
        cmocka_unit_test(test_barrier_divergence_aborts),
        cmocka_unit_test(test_orders),
        cmocka_unit_test(test_launch_limits),
        cmocka_unit_test(test_shared_optin_limit),
        cmocka_unit_test(test_runtime_memory),
        cmocka_unit_test(test_atomic_add),
        cmocka_unit_test(test_cublas_sgemm_strided_batched),
        cmocka_unit_test(test_bf16_fp16_conversions),
        cmocka_unit_test(test_syncwarp),
        cmocka_unit_test(test_shuffles),
        cmocka_unit_test(test_warp_divergence_aborts),
        cmocka_unit_test(test_mma_layout),
        cmocka_unit_test(test_ldmatrix_layout),
        cmocka_unit_test(test_mma_product_chain),
        cmocka_unit_test(test_cp_async),
        cmocka_unit_test(test_shuffle_masks),
        cmocka_unit_test(test_warps_run_ahead),
        cmocka_unit_test(test_cluster_gather),
        cmocka_unit_test(test_cluster_races_show),
        cmocka_unit_test(test_cluster_rules_abort),
        cmocka_unit_test(test_cluster_launch_checks),
        cmocka_unit_test(test_cluster_of_8192_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
