// cuda_emu_ptx.cuh: the kernels of test_cuda_emu.cpp on the tensor-core primitives of
// src/attn/mma_ptx.cuh (mma.sync, ldmatrix, cp.async), in plain CUDA: the test runs them in the
// CUDA emulator, and cuda_emu_ptx_nvcc.cu compiles them with nvcc to show they are valid CUDA.
// Each takes per-lane inputs and writes per-lane outputs, so the test checks every lane's
// registers against the PTX ISA's layout tables.
#ifndef MTAC_TESTS_CUDA_EMU_PTX_CUH
#define MTAC_TESTS_CUDA_EMU_PTX_CUH

#ifdef __CUDACC__
#define PTX_SHARED(T, name, n) __shared__ __align__(128) T name[n]
#else
#define PTX_SHARED(T, name, n) T *const name = (T *)::cuemu::shared_array((n) * sizeof(T), 128)
#endif
#include "attn/mma_ptx.cuh"

// One warp: lane l's d = a b + c from its own registers a[4 l..], b[2 l..], c[4 l..]; d[4 l..].
__global__ void k_mma_lanes(const uint32_t *a, const uint32_t *b, const float *c, float *d) {
    const int l = threadIdx.x;
    mma_a fa;
    mma_b fb;
    mma_c acc;
    for (int i = 0; i < 4; i++) fa.x[i] = a[4 * l + i], acc.x[i] = c[4 * l + i];
    for (int i = 0; i < 2; i++) fb.x[i] = b[2 * l + i];
    mma_16816(acc, fa, fb);
    for (int i = 0; i < 4; i++) d[4 * l + i] = acc.x[i];
}

// One warp: a table of 32 rows of 8 b16 (rows 16 elements apart in shared memory) copied from
// tab; lane l gives the address of row rowof[l] (-1: a null address, for the lanes whose address
// ldmatrix ignores; -2: 2 bytes past row 0, misaligned; -3: tab itself, global memory), and
// r[4 l..] gets its registers of ldmatrix .xn (.trans when trans).
__global__ void k_ldmatrix_lanes(const uint16_t *tab, const int *rowof, int n, int trans, uint32_t *r) {
    PTX_SHARED(uint16_t, sh, 32 * 16);
    const int l = threadIdx.x;
    for (int i = l; i < 32 * 16; i += 32) sh[i] = tab[i];
    __syncwarp();
    const void *p = rowof[l] >= 0 ? (const void *)(sh + 16 * rowof[l]) : rowof[l] == -1 ? (const void *)0
                    : rowof[l] == -2                                   ? (const void *)(sh + 1)
                                                                       : (const void *)tab;
    uint32_t x[4] = {0, 0, 0, 0};
    if (n == 1) ldsm_x1(x, p);
    if (n == 2 && !trans) ldsm_x2(x, p);
    if (n == 2 && trans) ldsm_x2_t(x, p);
    if (n == 4 && !trans) ldsm_x4(x, p);
    if (n == 4 && trans) ldsm_x4_t(x, p);
    for (int i = 0; i < 4; i++) r[4 * l + i] = x[i];
}

// C (64 x 64, float, row-major) = A (64 x 128, bf16, row-major) B (128 x 64), one block of 4 warps,
// warp w owning rows 16w..16w+15. B is given n-major (bt[n][k], as K in Q K^T; b_kmajor = 0) or
// k-major (bk[k][n], as V in P V; b_kmajor = 1). Both tiles are loaded with cp.async, 16 bytes a
// copy: A into rows padded to 136 elements (272 bytes: the 8 rows of an ldmatrix fall on 8
// different 16-byte bank groups), B into unpadded rows whose 16-byte chunks are XOR-swizzled in
// groups of 8 by the row (chunk c of row r at c ^ (r % 8)), as FlashAttention stores its tiles.
const int PC_M = 64, PC_N = 64, PC_K = 128, PC_LDA = PC_K + 8;
__device__ __forceinline__ int pc_swizzle(int r, int chunk) { return chunk ^ (r % 8); }

__global__ void k_product_chain(const __nv_bfloat16 *A, const __nv_bfloat16 *B, int b_kmajor, float *C) {
    PTX_SHARED(__nv_bfloat16, as, PC_M * PC_LDA);
    PTX_SHARED(__nv_bfloat16, bs, PC_K * PC_N);
    const int t = threadIdx.x, w = t / 32, l = t % 32, g = l / 4, q = l % 4;
    for (int i = t; i < PC_M * PC_K / 8; i += blockDim.x) {  // 16 bytes: 8 elements of row r
        const int r = i / (PC_K / 8), c8 = i % (PC_K / 8);
        cp_async16(as + r * PC_LDA + 8 * c8, A + r * PC_K + 8 * c8, true);
    }
    cp_async_commit();
    // B's rows: n-major, 64 rows of 128 k (16 chunks); k-major, 128 rows of 64 n (8 chunks). The
    // swizzle permutes the 8 chunks of each 128-byte half-row.
    const int brow = b_kmajor ? PC_N : PC_K, nchunk = brow / 8;
    for (int i = t; i < PC_K * PC_N / 8; i += blockDim.x) {
        const int r = i / nchunk, c8 = i % nchunk, sw = c8 / 8 * 8 + pc_swizzle(r, c8 % 8);
        cp_async16(bs + r * brow + 8 * sw, B + r * brow + 8 * c8, true);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
    mma_c acc[PC_N / 8];
    for (int j = 0; j < PC_N / 8; j++)
        for (int i = 0; i < 4; i++) acc[j].x[i] = 0.0f;
    for (int k0 = 0; k0 < PC_K; k0 += 16) {
        mma_a fa;  // lanes 0..15 give rows 16w + l of columns k0.., lanes 16..31 of columns k0 + 8..
        ldsm_x4(fa.x, as + (16 * w + l % 16) * PC_LDA + k0 + 8 * (l / 16));
        for (int j = 0; j < PC_N / 8; j++) {
            mma_b fb;
            if (!b_kmajor) {  // matrices: rows n = 8j.., k chunks k0 / 8 and k0 / 8 + 1
                const int n = 8 * j + l % 8, c8 = k0 / 8 + (l / 8) % 2;
                ldsm_x2(fb.x, bs + n * PC_K + 8 * (c8 / 8 * 8 + pc_swizzle(n, c8 % 8)));
            } else {  // rows k = k0 + l (lanes 0..15), n chunk j, transposed
                const int k = k0 + l % 16;
                ldsm_x2_t(fb.x, bs + k * PC_N + 8 * pc_swizzle(k, j));
            }
            mma_16816(acc[j], fa, fb);
        }
    }
    for (int j = 0; j < PC_N / 8; j++)
        for (int i = 0; i < 4; i++) C[(16 * w + g + 8 * (i / 2)) * PC_N + 8 * j + 2 * q + i % 2] = acc[j].x[i];
}

// One warp, each lane copying its 16 bytes (4 floats) of src with cp.async into shared memory
// that it wrote before (as a double-buffered tile's previous contents), and recording what it
// reads there at each stage in out[128 stage + 4 lane ..]:
//   how 0: stage 0 after the issue, 1 after commit and __syncthreads(), 2 after wait_group 0;
//   how 1: two groups (src[0..128) then src[128..256)); stages 0, 1 the first and second after
//          wait_group 1, stages 2, 3 after wait_group 0;
//   how 2: zero fill (full = false), stage 0 after wait_group 0;
//   how 3: a copy not committed: stage 0 after wait_group 0, stage 1 after commit and wait 0;
//   how 4: exits with a committed copy not waited for; 5: a destination 8 bytes off alignment;
//   6: a destination in global memory; 7: a source 8 bytes off alignment.
__global__ void k_cp_async(const float *src, float *out, float *global_dst, int how) {
    PTX_SHARED(float, sh, 2 * 128);
    const int l = threadIdx.x;
    float *mine = sh + 4 * l, *second = sh + 128 + 4 * l;
    const float *from = src + 4 * l;
    float *to = mine;
    if (how == 5) to = mine + 2;
    if (how == 6) to = global_dst + 4 * l;
    for (int e = 0; e < 4; e++) mine[e] = second[e] = -1.0f;  // written before: the issue poisons it again
    cp_async16(to, how == 7 ? from + 2 : from, how != 2);
    if (how == 1) {
        cp_async_commit();
        cp_async16(second, src + 128 + 4 * l, true);
    }
    if (how == 0)
        for (int e = 0; e < 4; e++) out[4 * l + e] = mine[e];
    if (how != 3) cp_async_commit();
    if (how == 0) {
        __syncthreads();
        for (int e = 0; e < 4; e++) out[128 + 4 * l + e] = mine[e];
    }
    if (how == 1) {
        cp_async_wait<1>();
        for (int e = 0; e < 4; e++) out[4 * l + e] = mine[e], out[128 + 4 * l + e] = second[e];
    }
    if (how >= 4) return;
    cp_async_wait<0>();
    const int stage = how == 0 ? 2 : how == 1 ? 2 : 0;
    for (int e = 0; e < 4; e++) out[128 * stage + 4 * l + e] = mine[e];
    if (how == 1)
        for (int e = 0; e < 4; e++) out[128 * 3 + 4 * l + e] = second[e];
    if (how == 3) {
        cp_async_commit();
        cp_async_wait<0>();
        for (int e = 0; e < 4; e++) out[128 + 4 * l + e] = mine[e];
    }
}

// Shuffles with partial masks, one warp (lane l holds v = 100 l + 7). how 0: lanes 0..15 swap with
// their neighbour (mask 0x0000ffff) while lanes 16..31 read lane 16 + (l + 3) % 16 (mask
// 0xffff0000), then the even lanes read lane l ^ 2 (mask 0x55555555) while the odd ones meet at
// __syncwarp(0xaaaaaaaa); out[l] and out[32 + l]. The wrong masks, each fatal: how 1, every lane
// executes a shuffle whose mask names lanes 0..15 only; 2, lanes 0..15 execute one whose mask
// names all 32; 3, lanes 0..15 (mask 0x0000ffff) read lanes 16..31.
__global__ void k_shfl_masks(int *out, int how) {
    const int l = threadIdx.x, v = 100 * l + 7;
    int x = -1, y = -1;
    if (how == 0) {
        if (l < 16) x = __shfl_xor_sync(0x0000ffffu, v, 1);
        else x = __shfl_sync(0xffff0000u, v, 16 + (l + 3) % 16);
        if (l % 2 == 0) y = __shfl_xor_sync(0x55555555u, v, 2);
        else __syncwarp(0xaaaaaaaau);
    }
    if (how == 1) x = __shfl_xor_sync(0x0000ffffu, v, 1);
    if (how == 2 && l < 16) x = __shfl_xor_sync(0xffffffffu, v, 1);
    if (how == 3 && l < 16) x = __shfl_xor_sync(0x0000ffffu, v, 16);
    out[l] = x, out[32 + l] = y;
}

// A double-buffered loop as the k_fa_* kernels run theirs, two warps: tile jt + 1 (256 floats of
// src, a 16-byte cp.async per thread) is copied into one buffer while tile jt, waited for and
// behind a barrier, is read from the other; each lane sums 8 of its floats (lane l: l, l + 32,
// ...: both warps' copies) and the warp's shuffles sum the tile; out[w] is warp w's sum of the
// NB_TILES tiles. Without the barrier at the end of a tile (end_barrier 0), a warp that gets a
// whole tile ahead issues tile jt + 2's copies into the buffer the other warp has yet to read,
// which the issue poisons.
const int NB_TILES = 4, NB_TILE = 256;
__global__ void k_double_buffer(const float *src, float *out, int end_barrier) {
    PTX_SHARED(float, buf, 2 * NB_TILE);
    const int t = threadIdx.x, l = t % 32;
    cp_async16(buf + 4 * t, src + 4 * t, true);
    cp_async_commit();
    float acc = 0.0f;
    for (int jt = 0; jt < NB_TILES; jt++) {
        if (jt + 1 < NB_TILES) cp_async16(buf + (jt + 1) % 2 * NB_TILE + 4 * t, src + (jt + 1) * NB_TILE + 4 * t, true);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const float *tile = buf + jt % 2 * NB_TILE;
        float x = 0.0f;
        for (int e = 0; e < NB_TILE / 32; e++) x += tile[l + 32 * e];
        for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
        acc += x;
        if (end_barrier) __syncthreads();  // before the next tile's copies overwrite this one
    }
    if (l == 0) out[t / 32] = acc;
}

// Thread block clusters (attn/cluster_ptx.cuh): an all-gather of CLG_T threads' values over the
// cluster's blocks. Thread t of rank r has the values v(r, t, j) = 5 (block's id CLG_T + t) + j,
// j < 5 (block's id: blockIdx.y gridDim.x + blockIdx.x); in the end every block holds all ranks'
// values, slot q CLG_T + t of buf (j < 4) and tag (j = 4), and copies them to out's
// CLG_SLOTS values for that block, and its cl_rank() and cl_size() to ranks[2 id..]. how:
//   CL_PUSH: each thread stores its values into every rank's slots (cl_st16, cl_st4), cl_sync(),
//     reads its own block's; ends with cl_arrive_relaxed(); cl_wait() (a block's memory is
//     written by others until every block has passed the cl_sync, so this one is not needed; the
//     pull's is);
//   CL_PUSH_NO_SYNC: without the cl_sync (another block may not have pushed yet);
//   CL_PUSH_OWN_RANK: each thread pushes into its own rank's slots only (a wrong rank);
//   CL_PULL: each thread stores its values in its own block's slots, cl_sync(), then loads every
//     rank's (cl_ld4), and ends with cl_arrive_relaxed(); cl_wait(): a block is read by others
//     until they all arrive there;
//   CL_PULL_NO_EXIT_SYNC: without that end (a block may exit while another still reads it);
//   the rules broken (fatal in the emulator): CL_ARRIVE_TWICE, CL_WAIT_FIRST (waits without
//   arriving), CL_RANK1_EXITS (rank 1's threads exit, the others wait at the cluster barrier),
//   CL_DEADLOCK (warp 0 waits at __syncthreads() before it arrives, warp 1 at the cluster barrier
//   before __syncthreads()), CL_MAP_GLOBAL (cl_map of global memory), CL_MAP_RANK (of rank
//   cl_size()), CL_MISALIGNED (cl_st4 2 bytes off), CL_PAST_ARRAY (cl_st4 one past tag's end).
const int CLG_T = 64, CLG_MAX = 8, CLG_SLOTS = CLG_MAX * CLG_T * 5;
enum {
    CL_PUSH, CL_PUSH_NO_SYNC, CL_PUSH_OWN_RANK, CL_PULL, CL_PULL_NO_EXIT_SYNC, CL_ARRIVE_TWICE, CL_WAIT_FIRST,
    CL_RANK1_EXITS, CL_DEADLOCK, CL_MAP_GLOBAL, CL_MAP_RANK, CL_MISALIGNED, CL_PAST_ARRAY, CL_HOWS
};
#include "attn/cluster_ptx.cuh"

__device__ __forceinline__ void clg_rules(int how, unsigned *out, uint32_t *tag) {
    if (how == CL_ARRIVE_TWICE) cl_arrive(), cl_arrive();
    if (how == CL_WAIT_FIRST) cl_wait();
    if (how == CL_RANK1_EXITS && cl_rank() == 1) return;
    if (how == CL_DEADLOCK && threadIdx.x < 32) __syncthreads();
    if (how == CL_MAP_GLOBAL) cl_st4(cl_map(out, 0), 1);
    if (how == CL_MAP_RANK) cl_st4(cl_map(tag, cl_size()), 1);
    if (how == CL_MISALIGNED) cl_st4(cl_off(cl_map(tag, 0), 2), 1);
    if (how == CL_PAST_ARRAY) cl_st4(cl_off(cl_map(tag + CLG_MAX * CLG_T - 1, 0), 4), 1);
    cl_sync();
    if (how == CL_DEADLOCK && threadIdx.x >= 32) __syncthreads();
}

__global__ void k_cl_gather(unsigned *out, unsigned *ranks, int how) {
    PTX_SHARED(uint32_t, buf, CLG_MAX * CLG_T * 4);
    PTX_SHARED(uint32_t, tag, CLG_MAX * CLG_T);
    const unsigned t = threadIdx.x, r = cl_rank(), n = cl_size(), id = blockIdx.y * gridDim.x + blockIdx.x;
    if (how >= CL_ARRIVE_TWICE) return clg_rules(how, out, tag);
    const unsigned v = 5 * (id * CLG_T + t), at = r * CLG_T + t;
    const bool pull = how == CL_PULL || how == CL_PULL_NO_EXIT_SYNC;
    if (pull) {
        for (int j = 0; j < 4; j++) buf[4 * at + j] = v + j;
        tag[at] = v + 4;
    } else {
        for (unsigned d = 0; d < n; d++) {
            const unsigned to = how == CL_PUSH_OWN_RANK ? r : d;
            cl_st16(cl_map(buf + 4 * at, to), v, v + 1, v + 2, v + 3);
            cl_st4(cl_map(tag + at, to), v + 4);
        }
    }
    if (how != CL_PUSH_NO_SYNC) cl_sync();
    unsigned *o = out + (size_t)id * CLG_SLOTS;
    for (unsigned q = 0; q < n; q++) {
        const unsigned s = q * CLG_T + t;
        for (int j = 0; j < 4; j++) o[5 * s + j] = pull ? cl_ld4(cl_map(buf + 4 * s + j, q)) : buf[4 * s + j];
        o[5 * s + 4] = pull ? cl_ld4(cl_map(tag + s, q)) : tag[s];
    }
    if (t == 0) ranks[2 * id] = r, ranks[2 * id + 1] = n;
    if (how != CL_PULL_NO_EXIT_SYNC) cl_arrive_relaxed(), cl_wait();
}

#endif
