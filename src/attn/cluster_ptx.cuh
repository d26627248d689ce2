// cluster_ptx.cuh: thread block clusters (sm_90) behind small inline functions, as mma_ptx.cuh
// does for the tensor cores: the blocks of a cluster run at once on one GPC, and each block's
// shared memory can be written and read by the others (distributed shared memory, DSMEM).
// Under nvcc they are inline PTX (PTX ISA "Thread block clusters", "mapa", "ld/st .shared::cluster",
// "barrier.cluster"); in the CUDA emulator (MTAC_CUDA_EMU, cuda_emu/cuda_emu.h) a cluster's blocks
// run as one set of fibers, so a missing cluster barrier or a wrong rank gives wrong numbers there too.
//
// A cluster of n blocks (MTA_LAUNCH_CLUSTER's cs along x: blocks x = cs c .. cs c + cs - 1 form
// cluster c) numbers its blocks cl_rank() = 0..n-1 (= blockIdx.x % cs).
//   cl_map(p, r):  p, an address in this block's shared memory, as the same offset in block r's;
//   cl_st16, cl_st4, cl_ld4: 16 (16-byte aligned) or 4 bytes to or from such an address;
//   cl_arrive(), cl_wait(): barrier.cluster in two halves; every thread of every block of the
//     cluster arrives, then waits until all have arrived. cl_arrive() releases this thread's
//     earlier writes (shared, distributed shared and global) and cl_wait() acquires the others',
//     so after cl_sync() each thread sees what every thread of the cluster wrote before it.
//     cl_arrive_relaxed() orders nothing: for a barrier that only keeps a block's shared memory
//     alive, as the one before a block exits while others may still write or read its memory.
// The rules (a GPU's, which the emulator checks): the calls are made by every thread of a block
// (.aligned: by whole warps at once); a thread waits only after it arrived, and arrives again only
// after it waited; a block's shared memory is reached by others only while all its threads are
// in the kernel, so a cluster kernel ends with cl_arrive_relaxed(); cl_wait(); when any block
// reached another's memory. Remote stores are fire and forget: another block sees them only after
// a barrier between the store and its read.
//
// In SASS a store through cl_map is a generic ST.E (its address in the shared window, SR_SWINHI),
// and cl_arrive() is preceded by MEMBAR.ALL.GPU (release orders global writes too).
#ifndef MTAC_ATTN_CLUSTER_PTX_CUH
#define MTAC_ATTN_CLUSTER_PTX_CUH

#include "attn/mma_ptx.cuh"

#ifdef MTAC_CUDA_EMU

struct cl_ptr {
    void *p;
};
__device__ __forceinline__ unsigned cl_rank(void) { return ::cuemu::cluster_rank(); }
__device__ __forceinline__ unsigned cl_size(void) { return ::cuemu::cluster_size(); }
__device__ __forceinline__ cl_ptr cl_map(const void *p, unsigned rank) { return cl_ptr{::cuemu::cluster_map(p, rank)}; }
__device__ __forceinline__ cl_ptr cl_off(cl_ptr x, ptrdiff_t bytes) { return cl_ptr{(char *)x.p + bytes}; }
__device__ __forceinline__ void cl_st16(cl_ptr d, uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3) {
    const uint32_t v[4] = {x0, x1, x2, x3};
    ::cuemu::cluster_store(d.p, v, 16);
}
__device__ __forceinline__ void cl_st4(cl_ptr d, uint32_t x) { ::cuemu::cluster_store(d.p, &x, 4); }
__device__ __forceinline__ uint32_t cl_ld4(cl_ptr s) {
    uint32_t x;
    ::cuemu::cluster_load(&x, s.p, 4);
    return x;
}
__device__ __forceinline__ void cl_arrive(void) { ::cuemu::cluster_arrive(1); }
__device__ __forceinline__ void cl_arrive_relaxed(void) { ::cuemu::cluster_arrive(0); }
__device__ __forceinline__ void cl_wait(void) { ::cuemu::cluster_wait(); }

#else

// The instructions exist from sm_90 on; an sm_80 build compiles the cluster kernels' bodies to a
// trap (the backend launches them only on devices of compute capability 9.0 and later).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define MTA_CLUSTER_PTX(...) __trap()
#else
#define MTA_CLUSTER_PTX(...) asm volatile(__VA_ARGS__)
#endif

struct cl_ptr {
    uint32_t a;  // a .shared::cluster address
};
__device__ __forceinline__ unsigned cl_rank(void) {
    unsigned r = 0;
    MTA_CLUSTER_PTX("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ unsigned cl_size(void) {
    unsigned r = 1;
    MTA_CLUSTER_PTX("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
    return r;
}
__device__ __forceinline__ cl_ptr cl_map(const void *p, unsigned rank) {
    uint32_t r = 0;
    MTA_CLUSTER_PTX("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(smem_u32(p)), "r"(rank));
    return cl_ptr{r};
}
__device__ __forceinline__ cl_ptr cl_off(cl_ptr x, ptrdiff_t bytes) { return cl_ptr{x.a + (uint32_t)bytes}; }
__device__ __forceinline__ void cl_st16(cl_ptr d, uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3) {
    MTA_CLUSTER_PTX("st.shared::cluster.v4.b32 [%0], {%1,%2,%3,%4};\n" ::"r"(d.a), "r"(x0), "r"(x1), "r"(x2), "r"(x3)
                    : "memory");
}
__device__ __forceinline__ void cl_st4(cl_ptr d, uint32_t x) {
    MTA_CLUSTER_PTX("st.shared::cluster.b32 [%0], %1;\n" ::"r"(d.a), "r"(x) : "memory");
}
__device__ __forceinline__ uint32_t cl_ld4(cl_ptr s) {
    uint32_t x = 0;
    MTA_CLUSTER_PTX("ld.shared::cluster.b32 %0, [%1];\n" : "=r"(x) : "r"(s.a) : "memory");
    return x;
}
__device__ __forceinline__ void cl_arrive(void) {
    MTA_CLUSTER_PTX("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cl_arrive_relaxed(void) {
    MTA_CLUSTER_PTX("barrier.cluster.arrive.relaxed.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cl_wait(void) { MTA_CLUSTER_PTX("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }

#endif

__device__ __forceinline__ void cl_sync(void) {
    cl_arrive();
    cl_wait();
}

#endif
