// cuda_emu_ctl.h: the CUDA emulator's settings, for the tests (C and C++).
#ifndef MTAC_CUDA_EMU_CTL_H
#define MTAC_CUDA_EMU_CTL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// The thread and block orders (cuda_emu.h): pass p of launch l of a block runs its threads in order
// when (p + l + schedule) % 3 is 0, reversed when 1, in a shuffle seeded by (schedule, l, block, p)
// when 2; blocks likewise with p = 0. Schedules 0, 1 and 2 start each launch with a different one
// of the three orders, and a warp released by a warp-collective operation runs on in the next
// pass, so that warps advance one such operation a pass, in step. From 3 up, warps run ahead:
// the same orders, but a warp released runs on at once, before the rest of the pass, to its next
// __syncthreads() or its exit, so between two block barriers the warps run one after another,
// the first to gather first (the first warp in order, the last reversed, any shuffled); a warp
// then finishes whole tiles while others have not started them, as on a GPU. From 3 up the blocks
// of a thread block cluster lag one another too: one starts, and when a barrier.cluster phase
// completes one block's waiters go on, each block running to its next barrier.cluster wait (or its
// exit) before the next is released, so a block writes another's shared memory before that one has
// read what the last barrier published there (a write-after-read race gives wrong numbers). Default 0.
void mta_cuda_emu_set_schedule(uint64_t schedule);
// The blocks' order in every launch from now on: 0 in order, 1 reversed, 2 shuffled (as above);
// -1, the default, restores the schedule's. For tests that compare sums made by atomics in the
// order the blocks run (with one CPU thread: a launch of fewer than 16384 threads has one).
void mta_cuda_emu_set_block_order(int order);
// The emulated device's opt-in limit of dynamic shared memory per block, in bytes (what
// cudaDevAttrMaxSharedMemoryPerBlockOptin reports, and cudaFuncSetAttribute and launches are
// checked against): 0 restores the default, an H100's 227 KB; an A100's is 163 KB; at least the
// 48 KB every block has. A CUDA backend's context asks for it on its first call.
void mta_cuda_emu_set_shared_optin(size_t bytes);
// Whether the emulated device launches thread block clusters (what cudaDevAttrClusterLaunch
// reports): 1, the default, as a device of compute capability 9.0; 0 as an A100, so that the
// backend runs its kernels without clusters (k_fa_head_forward for k_fa_head_cl_forward,
// k_fa_head_dkdv for k_fa_head_cl_dkdv). A CUDA backend's context asks on its first call.
void mta_cuda_emu_set_clusters(int on);
// The emulated device's multiprocessors (what cudaDevAttrMultiProcessorCount and
// cudaGetDeviceProperties report; the blocks still run as they do): n > 0, else 1, the default.
// A CUDA backend's context asks on its first call (the bf16 dK/dV kernel's chunks: fe_kv_chunks_of).
void mta_cuda_emu_set_sms(int n);
// Kernel launches so far, in this process.
uint64_t mta_cuda_emu_launches(void);

#ifdef __cplusplus
}
#endif
#endif
