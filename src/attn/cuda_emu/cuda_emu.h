// cuda_emu.h: the subset of CUDA that the CUDA backend's kernels use, executed on the CPU, so that
// src/attn/mta_cuda.cu and cuda_kernels.cuh run unchanged under the host C++ compiler (the
// `cuda-emu` backend, -DMTAC_CUDA_EMU=ON; docs/cuda.md). The emulated GPU checks what a GPU would
// refuse or leave undefined, where a CPU would let it pass:
//   - each thread block's threads are cooperative fibers: __syncthreads() is a real barrier, and a
//     block whose threads do not all reach the same barrier (some exit, some wait) is an error;
//   - between two barriers ("a pass") the threads run one after another, in order, reversed or in
//     a seeded shuffle, a different order on each pass and each launch; blocks too. A missing
//     barrier or a race between threads changes the result from one order to the next;
//   - shared memory (cuda_kernels.cuh's MTA_SHARED, MTA_DYNAMIC_SHARED) is per block, a heap allocation of exactly its
//     size (AddressSanitizer sees a read past it) that starts as NaN, like every fresh device
//     allocation (cudaMalloc): a read of memory no thread wrote shows;
//   - launches are checked as a GPU checks them: threads per block <= 1024 (x, y <= 1024,
//     z <= 64), grid y, z <= 65535, x < 2^31, dynamic shared memory over 48 KB only after
//     cudaFuncSetAttribute's opt-in, and at most the device's opt-in limit (an H100's 227 KB, or
//     what a test sets: cuda_emu_ctl.h); a refused launch sets the error that
//     cudaGetLastError returns, as the runtime does;
//   - device memory is host heap memory (ASan sees kernels' out-of-bounds reads and writes), 4 GiB
//     of it in all; a refused cudaMalloc sets the last error too. Streams, events and async copies
//     run synchronously, in the order they are called.
// Shared arrays start 128-byte aligned.
// Warps: threads 32w..32w+31 of a block (by linear index), each lane holding only its own
// registers. A warp-collective operation is an exchange: the lanes its mask names each deposit
// their own registers (or row address), wait until all of them have arrived at the same
// operation, then each computes only its own results from what the others deposited; the slots
// are reused only after every lane has read them. So a wrong lane layout gives wrong numbers, as
// on a GPU. The operations: attn/mma_ptx.cuh's mma.sync and ldmatrix (full mask), __syncwarp(mask),
// __shfl_sync and __shfl_xor_sync on 32-bit values with PTX's mask rules (the calling lane must be
// named; a read from a lane not named is fatal; lanes of disjoint masks meet apart). A lane named in a mask that never
// arrives (it exits, waits at __syncthreads() or at another operation) is an error. A pass ends
// at either kind of barrier: released lanes run on in the next pass, in its order. Nothing else is
// warp-synchronous: between barriers lanes do not run in lockstep.
// cp.async (per thread): a copy poisons its 16 destination bytes (NaN) at the issue and is made
// when a cp.async.wait_group completes its commit group (reading the source then); copies not yet
// committed are in no group; __syncthreads() completes nothing; a thread that exits with copies
// pending is an error, as are a misaligned address or a destination outside the block's shared
// memory.
// Thread block clusters (attn/cluster_ptx.cuh): a launch with cluster = cs > 1 (grid.x a multiple
// of cs, cs <= 8, else cudaErrorInvalidClusterSize) runs the cs blocks of each cluster together as
// one set of fibers, each block with its own shared memory, __syncthreads() and warps; a pass runs
// all the cluster's threads in its order, and the block orders permute clusters. A plain launch
// is a cluster of one block. barrier.cluster releases its waiters (at the end of the pass) when
// every thread of the cluster has arrived (from schedule 3 up a block at a time: cuda_emu_ctl.h). Fatal: arriving twice or waiting without arriving,
// threads that exit while others wait at it, a deadlock between it and __syncthreads(), cluster_map
// of an address outside the caller's shared memory or of a rank past the cluster, and a DSMEM store
// or load not within one shared array of a block of the cluster, misaligned, or into a block whose
// threads have all exited.
// Tensor cores: include/cuda_bf16.h and cuda_fp16.h give __nv_bfloat16 and __half with CUDA's
// conversions (round to nearest even, NaN to 0x7fff, overflow to inf, denormals kept). There is
// no nvcuda::wmma: its fragments' lane layout is unspecified, so the emulator could not hold each
// lane to its own registers; the kernels use mma.sync and ldmatrix (attn/mma_ptx.cuh), whose
// layouts the PTX ISA fixes.
#ifndef MTAC_CUDA_EMU_H
#define MTAC_CUDA_EMU_H

#include "mta.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Compiled for sm_90 (what a GPU build of this tree targets), for the backend's capability check.
#define MTAC_CUDA_EMU_ARCH 90

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
    unsigned x, y, z;
};

enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorInvalidClusterSize = 912,
};
typedef enum cudaError cudaError_t;
typedef struct cuemu_stream *cudaStream_t;
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr {
    cudaDevAttrMultiProcessorCount = 16,
    cudaDevAttrComputeCapabilityMajor = 75,
    cudaDevAttrComputeCapabilityMinor = 76,
    cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
    cudaDevAttrClusterLaunch = 120
};

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerBlockOptin;
    int major, minor, multiProcessorCount, maxThreadsPerBlock, warpSize;
    int maxThreadsDim[3], maxGridSize[3];
};

// cudaPointerGetAttributes: type cudaMemoryTypeDevice when p lies within a device allocation
// (cudaMalloc), else cudaMemoryTypeUnregistered (host memory, as the runtime reports memory it
// never registered); device 0, devicePointer p or NULL, hostPointer NULL or p. The emulator has
// no managed or registered host memory.
enum cudaMemoryType {
    cudaMemoryTypeUnregistered = 0,
    cudaMemoryTypeHost = 1,
    cudaMemoryTypeDevice = 2,
    cudaMemoryTypeManaged = 3
};
struct cudaPointerAttributes {
    enum cudaMemoryType type;
    int device;
    void *devicePointer, *hostPointer;
};

cudaError_t cudaMalloc(void **p, size_t bytes);
template <typename T> cudaError_t cudaMalloc(T **p, size_t bytes) { return cudaMalloc((void **)p, bytes); }
cudaError_t cudaFree(void *p);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *at, const void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t s = 0);
cudaError_t cudaMemset(void *p, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s = 0);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int dev);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int dev);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaFuncSetAttribute(const void *kernel, cudaFuncAttribute attr, int value);
template <typename F> cudaError_t cudaFuncSetAttribute(F *kernel, cudaFuncAttribute attr, int value) {
    return cudaFuncSetAttribute((const void *)kernel, attr, value);
}

namespace cuemu {

// The running thread's coordinates (set by the scheduler on every switch). __thread, not
// thread_local: constant-initialised, so a kernel reads them without the TLS init function's check
// (in a template kernel, GCC's UBSan build reported a null pointer at that check).
extern __thread uint3 thread_idx, block_idx;
extern __thread dim3 block_dim, grid_dim;

void syncthreads(void);
// The calling block's n-th static shared array (every thread of a block declares the same arrays
// in the same order, as a kernel's __shared__ declarations) and its dynamic shared memory.
void *shared_array(size_t bytes, size_t align);
void *dynamic_shared(void);
// Warp-collective points (a warp: threads 32w..32w+31 of the block's linear index). The calling
// thread waits until all the lanes of the mask (warp_sync: all 32) have called the same op; fatal
// outside a kernel, in a block that is not a whole number of warps, from a lane the mask does not
// name, or when lanes of the mask exit, wait at __syncthreads() or reach another operation instead.
void warp_sync(const char *op);
void syncwarp(unsigned mask);
// A shuffle of the 32-bit value v: from lane arg modulo width of the lane's segment of width
// lanes, or (butterfly) from lane ^ arg (the lane's own v when that is past its segment); the
// source must be a lane of the mask.
uint32_t warp_shuffle(const char *op, unsigned mask, uint32_t v, int arg, int width, int butterfly);

// The tensor-core primitives of attn/mma_ptx.cuh (its header gives the PTX ISA's lane layouts),
// warp-collective like warp_sync: each lane passes and gets only its own registers.
// mma.sync m16n8k16 bf16 x bf16 + f32: d = a b + d, the lane's fragments. Each d[i] is the
// accumulator plus its 16 products added in k order in float32: products of bf16 are exact in
// float32, so only the additions round (to nearest). A GPU adds in another order and internal
// precision; both are within about 16 2^-24 of the sum of the terms' magnitudes per mma.
void mma_16816_bf16(float d[4], const uint32_t a[4], const uint32_t b[2]);
// ldmatrix of n = 1, 2 or 4 8x8 b16 matrices from shared memory (trans: .trans), p the lane's row
// (lanes 0..8n-1; each row 16-byte aligned within the block's shared memory, else fatal). The
// rows are read when the whole warp has arrived.
void ldmatrix(uint32_t *r, const void *p, int n, int trans);
// cp.async of bytes (4, 8 or 16; aligned to it on both sides) from device to shared memory
// (full = 0: zeros, nothing read), and the calling thread's commit_group and wait_group n (all
// but the n most recent committed groups complete).
void cp_async(void *dst, const void *src, size_t bytes, bool full);
void cp_async_commit(void);
void cp_async_wait(int n);

// Thread block clusters (attn/cluster_ptx.cuh, whose header gives the rules): the calling block's
// rank in its cluster and the cluster's blocks; p (in the calling block's shared memory) as the same
// offset in block rank's; a store or load of bytes through such an address; barrier.cluster's two
// halves (release: cl_arrive, else cl_arrive_relaxed).
unsigned cluster_rank(void);
unsigned cluster_size(void);
void *cluster_map(const void *p, unsigned rank);
void cluster_store(void *dst, const void *src, size_t bytes);
void cluster_load(void *dst, const void *src, size_t bytes);
void cluster_arrive(int release);
void cluster_wait(void);

// Runs fn(arg) as every thread of every block of the launch (the launch's checks first), and adds
// the warp-level operations it executed to *ops (when not NULL; mta.h's mta_kernel_ops says how
// each is counted). cluster: the blocks along x of a thread block cluster (1: none).
void launch_grid(const char *name, const void *kernel, dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
                 void (*fn)(void *), void *arg, mta_kernel_ops *ops, unsigned cluster);

// MTA_LAUNCH(k, grid, block, shmem, stream)(args...): the kernel's parameters are converted once
// from the arguments, as a call converts them, and each thread gets its own copy.
template <typename... P>
struct launcher {
    const char *name;
    void (*kernel)(P...);
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    mta_kernel_ops *ops;
    unsigned cluster;
    template <typename... A>
    void operator()(A &&...a) const {
        struct call {
            void (*kernel)(P...);
            std::tuple<P...> args;
        } c{kernel, std::tuple<P...>(std::forward<A>(a)...)};
        launch_grid(name, (const void *)kernel, grid, block, shmem, stream,
                    [](void *p) { std::apply(((call *)p)->kernel, ((call *)p)->args); }, &c, ops, cluster);
    }
};
template <typename... P>
launcher<P...> launch(const char *name, void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
                      mta_kernel_ops *ops = nullptr, unsigned cluster = 1) {
    return launcher<P...>{name, kernel, grid, block, shmem, s, ops, cluster};
}

}  // namespace cuemu

#define threadIdx (::cuemu::thread_idx)
#define blockIdx (::cuemu::block_idx)
#define blockDim (::cuemu::block_dim)
#define gridDim (::cuemu::grid_dim)
#define __syncthreads() ::cuemu::syncthreads()

constexpr int warpSize = 32;
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::cuemu::syncwarp(mask); }
template <typename T> inline T cuemu_shuffle(const char *op, unsigned mask, T v, int arg, int width, int butterfly) {
    static_assert(sizeof(T) == 4 && std::is_trivially_copyable<T>::value, "cuda-emu: shuffles of 32-bit values only");
    uint32_t u;
    memcpy(&u, &v, 4);
    u = ::cuemu::warp_shuffle(op, mask, u, arg, width, butterfly);
    memcpy(&v, &u, 4);
    return v;
}
// atomicAdd on float32 memory, returning the old value: a block's threads are fibers of one CPU
// thread, but blocks run on several, so a compare-and-swap loop on the word's bits, each addition
// rounded to nearest as the GPU's (which also flushes subnormal results to zero; this keeps them).
inline float atomicAdd(float *p, float v) {
    uint32_t *w = (uint32_t *)(void *)p, old = __atomic_load_n(w, __ATOMIC_RELAXED), next;
    float x;
    do {
        memcpy(&x, &old, 4);
        x += v;
        memcpy(&next, &x, 4);
    } while (!__atomic_compare_exchange_n(w, &old, next, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
    memcpy(&x, &old, 4);  // (the word the swap replaced)
    return x;
}
template <typename T> inline T __shfl_sync(unsigned mask, T v, int src_lane, int width = warpSize) {
    return cuemu_shuffle("__shfl_sync", mask, v, src_lane, width, 0);
}
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = warpSize) {
    return cuemu_shuffle("__shfl_xor_sync", mask, v, lane_mask, width, 1);
}

#endif
