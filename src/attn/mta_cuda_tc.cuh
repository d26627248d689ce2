// mta_cuda_tc.cuh: the CUDA backend's tensor-core path (precision MTA_BF16; docs/cuda.md,
// "Tensor-core path"). Included by mta_cuda.cu, inside its namespace, after the helpers it uses
// (call, begin, finish, normgate_of, normgate_backward, k_sum_grad, k_doc_starts).
//
// It covers the configs with d <= 128: causal softmax attention with dropout, group norm, depth
// scale, gate, grouped-query attention and packed documents, and one of the pre-softmax key-query
// convolution or the post-softmax one where their halos fit in shared memory, or the head steps
// (mixing, head convolution) where a tile of a group's heads fits (tc_covers). It is FlashAttention-2's scheme: one block per (head, tile of query rows) walks the
// key tiles with an online softmax, so no (T,T) map exists; the backward recomputes P from the
// saved log-sum-exp. Without the convolution and the head steps the kernels are
// mta_cuda_fa2.cuh's (k_fa_*: mma.sync with S, P and O in registers). With the convolution the
// forward is mta_cuda_fa_conv.cuh's k_fa_conv_forward (the convolution as banded-Toeplitz MMAs on
// the score tiles with halos), its backward mta_cuda_fa_conv_bwd.cuh's k_fa_conv_dkdv and
// k_fa_conv_dq (the same on the backward's grown tile); the post-softmax convolution's kernels are
// mta_cuda_fa_post.cuh's (k_fa_post_*: band MMAs on P's tiles with halos, after k_fa_forward's
// log-sum-exp); the head steps' (mta_cuda_fa_heads*.cuh, k_fa_head_*: mma.sync) own a tile of
// every head of a group.
//
// Arithmetic: q, k, v are rounded to bf16 once, into the workspace (rows padded to a multiple of
// the tile, d to a multiple of 16, with zeros), or read as they are where the caller's bf16 tensors
// are already so laid out (tc_reads_caller) and the call's may be read in place (tc_in_place);
// P, dO and dS (with the convolution dZ) are rounded
// to bf16 before the products that read them; the products (mma.sync m16n8k16) accumulate in
// float32, and the softmax statistics, O, the convolution (Z, S1, dS1), the norm and gate, and
// every gradient are float32.
//
// A tile of TC_M query rows and TC_N keys has 4 warps; warp w owns rows 16w..16w+15 of
// every product it writes. Deterministic: each output tile belongs to one block, which sums its
// terms in a fixed order (dk, dv: query heads of the kv head, then query tiles, in order).
#ifndef MTAC_ATTN_MTA_CUDA_TC_CUH
#define MTAC_ATTN_MTA_CUDA_TC_CUH

#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

const int TC_M = 64;          // query rows of a tile
const int TC_N = 64;          // keys of a tile (= TC_M: a query tile's diagonal is one key tile)
const int TC_THREADS = 128;   // 4 warps, one per 16 rows of a tile
const int TC_MAX_D = 128;
static_assert(TC_M == TC_N && TC_M == 16 * (TC_THREADS / 32), "a warp per 16 rows; query and key tiles aligned");

int tc_dp(int d) { return (d + 15) / 16 * 16; }              // d padded for the k16 steps
int tc_tp(int T) { return (T + TC_M - 1) / TC_M * TC_M; }    // T padded to whole tiles

// What the kernels read and write besides their own arguments.
struct tc_args {
    const bf16 *q, *k, *v;  // (B*H or B*H_kv, Tp, dp): the rounded inputs, zero past T and d
    const bf16 *dO;         // (B*H, Tp, dp): the rounded output gradient (backward)
    float *o, *lse, *D;     // (B*H, T, d) O before norm and gate; (B*H, T) log-sum-exp, rowsum(dO O)
    const int *ds;          // document starts (B, T), or NULL
    int H, Hkv, T, Tp, d, dp;
    int cq, ck;             // the pre-softmax convolution's kernel (0, 0: none)
    int pcq, pck;           // the post-softmax convolution's kernel (0, 0: none)
    float scale;            // 1/sqrt(d)
    int kv16;               // dk, dv are the caller's bfloat16 tensors (mta_config.dtype: tc_add_kv)
    uint64_t seed;          // dropout (drop_thr = 0: none)
    uint32_t drop_thr;
    float drop_scale;
};

__device__ __forceinline__ size_t tc_kv_slab(const tc_args &a, int bh) {
    return (size_t)(bh / a.H) * a.Hkv + bh % a.H / (a.H / a.Hkv);
}

// dK or dV entry `at` += x, written once per backward: float32, or with a.kv16 the caller's
// bfloat16 widened (exact), added to in float32 and rounded once, as a float32 buffer narrowed
// after the call would be (so no such buffer).
__device__ __forceinline__ void tc_add_kv(const tc_args &a, float *d, size_t at, float x) {
    if (!a.kv16) {
        d[at] += x;
        return;
    }
    bf16 *d16 = (bf16 *)(void *)d;
    d16[at] = __float2bfloat16_rn(__bfloat162float(d16[at]) + x);
}

// The last row (or key) of the tile starting at i0.
__device__ __forceinline__ int tc_last(const tc_args &a, int i0) { return (i0 + TC_M < a.T ? i0 + TC_M : a.T) - 1; }

// Buffers carved one after another in 32-byte steps (ldmatrix and cp.async need 16); base NULL only
// counts the bytes (the host sizes the launches with the same code as the kernels carve).
struct carver {
    unsigned char *base;
    size_t at;
    template <typename T> __host__ __device__ T *take(size_t n) {
        T *p = base ? (T *)(base + at) : NULL;
        at += (n * sizeof(T) + 31) / 32 * 32;
        return p;
    }
};

// The dynamic shared memory of a kernel, aligned to 32 bytes (the launch asks 32 more).
__device__ __forceinline__ unsigned char *tc_shared(void) {
    MTA_DYNAMIC_SHARED(unsigned char, raw);
    return (unsigned char *)(((uintptr_t)raw + 31) & ~(uintptr_t)31);
}

// The kernels' kinds, for their shared memory's size (fa_smem_bytes, fa_conv_bwd_smem_bytes, fh_carve).
enum { TC_FWD, TC_DKDV, TC_DQ };

// Dropout's factor of entry (bh, i, j): 0 or 1/(1-p) (1 without dropout).
__device__ __forceinline__ float tc_drop(const tc_args &a, int bh, int i, int j) {
    if (!a.drop_thr) return 1.0f;
    return mta_dropout_keep(a.seed, ((size_t)bh * a.T + i) * (size_t)a.T + j, a.drop_thr) ? a.drop_scale : 0.0f;
}

// Rows of a (slabs, T, d) tensor to bf16 (slabs, Tp, dp), zero past T and d (grid: x entries of
// 128, y slabs): src float32, rounded, or with bfloat16 storage (mta_config.dtype) src16, copied.
__global__ void k_tc_round(const float *src, const bf16 *src16, bf16 *dst, int T, int Tp, int d, int dp) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x, i = e / dp, c = e % dp;
    if (i >= Tp) return;
    const size_t slab = blockIdx.y, at = (slab * T + i) * d + c;
    const bool in = i < T && c < d;
    dst[(slab * Tp + i) * dp + c] = in && src16 ? src16[at] : __float2bfloat16_rn(in ? src[at] : 0.0f);
}

// Backward, per row: dO rounded to bf16 (zero past T and d) and, with withD, D = rowsum(dO * O)
// (grid: x rows of 128, y B*H). go is dO in (B*H, T, d): float32, or bfloat16 go16 (then copied as
// it is). The kernels whose P v is not O make their own D (tc_backward), so O is not read there.
// dO NULL: the kernels read go16 as it is (tc_reads_dout, tc_in_place), so only D is made.
// With a norm or gate, k_normgate_t writes dO and D so instead (ng_io).
__global__ void k_tc_prep(tc_args a, const float *go, const bf16 *go16, bf16 *dO, int withD) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x, bh = blockIdx.y;
    if (i >= a.Tp) return;
    const size_t row = ((size_t)bh * a.T + i) * a.d;
    const float *o = a.o + row;
    bf16 *dst = dO ? dO + ((size_t)bh * a.Tp + i) * a.dp : NULL;
    float D = 0.0f;
    for (int e = 0; e < a.dp; e++) {
        const bool in = i < a.T && e < a.d;
        const bf16 r = in && go16 ? go16[row + e] : __float2bfloat16_rn(in ? go[row + e] : 0.0f);
        const float x = in && go16 ? __bfloat162float(r) : in ? go[row + e] : 0.0f;
        if (in && withD) D = fmaf(x, o[e], D);
        if (dst) dst[e] = r;
    }
    if (i < a.T && withD) a.D[(size_t)bh * a.T + i] = D;
}

// ---- The pre-softmax key-query convolution (spec section 2, step 2) ----
//
// S1 = qkconv(Z, w_pre) needs Z on a tile grown by halos: row i reads Z rows i-(c_q-1)..i, and
// column j columns j-p..j+p (p = (c_k-1)/2). Its forward and backward kernels are
// mta_cuda_fa_conv.cuh's and mta_cuda_fa_conv_bwd.cuh's (band MMAs, included below); the kernel
// gradient's partials per query tile are summed here.

__host__ __device__ inline int tc_up16(int n) { return (n + 15) / 16 * 16; }

// The kernel gradient from the query tiles' partial sums, one thread per tap of one head (grid: x
// taps of 128, y H), summed over batches and tiles in order (deterministic; in double).
__global__ void k_tc_conv_wgrad(const float *dwp, int B, int H, int tiles, int taps, float *dw) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x, h = blockIdx.y;
    if (e >= taps) return;
    double x = 0.0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < tiles; t++) x += dwp[(((size_t)b * H + h) * tiles + t) * taps + e];
    dw[(size_t)h * taps + e] += (float)x;
}

// ---- Head mixing and head convolution (spec section 2, steps 3 and 6) ----
//
// Both mix every entry across the heads of a group: G = H heads with pre_head_mix (it mixes all
// of them), else the c_h heads of a head-conv group. The kernels are mta_cuda_fa_heads*.cuh's
// (k_fa_head_forward, k_fa_head_dq, k_fa_head_dkdv: mma.sync, a block per 16 query rows or 32 keys
// of a group of up to 32 heads); the two below sum their per-query-head dK, dV and their kernel
// gradients' partials in a fixed order.

// A block's heads (the host fills it per call: tc_heads_of).
struct tc_heads {
    int G, nq;          // heads per block; the mixings' k steps (fh_nq: 1, 2; 0: the kernels do not fit)
    int mix, ch;        // step 3 on; step 6's group size (0: off)
    int nw;             // the kernel gradients' entries per block: (H, H) of w_pre_head, G c_h of w_post_head
    const float *w1;    // w_pre_head (H, H) [out, in]
    const float *w2;    // w_post_head (H/c_h, c_h, c_h) [group, in, out]
};

// The rows of per-query-head dK, dV buffers (dkp, dvp: (B*H, rows, d)): slots of tr rows, slot x
// holding key tile kv_tile(s, x) (rows from its tr x). pc 0: slot x is tile x (rows T: the whole
// tensor). Else a chunk of pc pair ranks from r0 of nt tiles (fe_kv_slots): slot x < pc holds
// tile r0 + x, slot pc + x its mirror nt - 1 - (r0 + x), each tile in one chunk's slot once.
struct kv_slots {
    int rows, tr, nt, pc, r0;
};
__host__ __device__ inline int kv_tile(const kv_slots &s, int x) {
    if (!s.pc) return x;
    const int r = s.r0 + x % s.pc, t = x < s.pc ? r : s.nt - 1 - r;
    return (x < s.pc ? r <= s.nt - 1 - r : t > r) ? t : -1;
}
// Every row of (B*H, T, d) buffers.
inline kv_slots kv_whole(int T) { return kv_slots{T, 1, T, 0, 0}; }

// dk, dv of each kv head += its query heads' dkp, dvp (rows of s) in order (grid: x entries of
// 128 of s.rows * d, y B*H_kv).
__global__ void k_tc_head_kv(tc_args a, const float *dkp, const float *dvp, kv_slots s, float *dk, float *dv) {
    const size_t n = (size_t)s.rows * a.d, e = (size_t)blockIdx.x * blockDim.x + threadIdx.x, kvs = blockIdx.y;
    if (e >= n) return;
    const int row = (int)(e / a.d), t = kv_tile(s, row / s.tr), j = t * s.tr + row % s.tr;
    if (t < 0 || j >= a.T) return;
    const int rep = a.H / a.Hkv;
    const size_t h0 = kvs / a.Hkv * a.H + kvs % a.Hkv * rep, to = (kvs * a.T + j) * a.d + e % a.d;
    float x = 0.0f, y = 0.0f;
    for (int r = 0; r < rep; r++) x += dkp[(h0 + r) * n + e], y += dvp[(h0 + r) * n + e];
    tc_add_kv(a, dk, to, x);
    tc_add_kv(a, dv, to, y);
}
// Launches k_tc_head_kv on the call's stream.
void tc_kv_sums(const call *cl, const tc_args &a, const float *dkp, const float *dvp, kv_slots s, float *dk, float *dv) {
    MTA_LAUNCH(k_tc_head_kv, dim3((unsigned)(((size_t)s.rows * a.d + 127) / 128), (unsigned)(cl->c->B * a.Hkv)), 128, 0,
               cl->s)(a, dkp, dvp, s, dk, dv);
}

// The head kernels' gradients from the dQ tiles' partials, one thread per entry of a block's nw
// (grid: x entries of 128, y H/G groups), summed over batches and tiles in order in double.
__global__ void k_tc_head_wgrad(const float *hwp, int B, int groups, int tiles, tc_heads hd, float *dw1, float *dw2) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x, grp = blockIdx.y, n1 = hd.mix ? hd.G * hd.G : 0;
    if (e >= hd.nw) return;
    double x = 0.0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < tiles; t++) x += hwp[(((size_t)b * groups + grp) * tiles + t) * hd.nw + e];
    if (e < n1 && dw1) dw1[e] += (float)x;
    if (e >= n1 && dw2) dw2[(size_t)grp * hd.G * hd.ch + e - n1] += (float)x;
}

// Dynamic shared memory past 48 KB needs the kernel's opt-in.
template <typename K> void tc_smem_optin(K *kernel, size_t bytes) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

#include "attn/mta_cuda_fa2.cuh"
#include "attn/mta_cuda_fa_heads.cuh"
#include "attn/mta_cuda_fa_heads_dq.cuh"
#include "attn/mta_cuda_fa_heads_dkdv.cuh"
#include "attn/mta_cuda_fa_heads_cl.cuh"
#include "attn/mta_cuda_fa_heads_cl_dkdv.cuh"
#include "attn/mta_cuda_fa_heads_cl_dq.cuh"
#include "attn/mta_cuda_fa_conv.cuh"
#include "attn/mta_cuda_fa_conv_bwd.cuh"
#include "attn/mta_cuda_fa_post.cuh"
#include "attn/mta_cuda_fa_every.cuh"
#include "attn/mta_cuda_fa_every_bwd.cuh"

// A block's heads for a config, and whether the head kernels fit in smem_max bytes of shared memory
// (the device's opt-in limit per block; nq 0: they do not, as for more than 32 heads in a group, or
// 32 at large d on an A100; the float32 path runs those).
tc_heads tc_heads_of(const mta_config *c, const mta_params *p, size_t smem_max) {
    tc_heads hd;
    hd.mix = c->pre_head_mix != 0, hd.ch = c->post_ch;
    hd.G = hd.mix ? c->H : c->post_ch;
    hd.nw = (hd.mix ? hd.G * hd.G : 0) + (hd.ch ? hd.G * hd.ch : 0);
    hd.w1 = p ? p->w_pre_head : NULL, hd.w2 = p ? p->w_post_head : NULL;
    hd.nq = fh_nq(hd.G);
    for (int kind = TC_FWD; kind <= TC_DQ; kind++)
        if (hd.nq && fh_smem_bytes(kind, hd.G, tc_dp(c->d)) > smem_max) hd.nq = 0;
    return hd;
}

// The uses the path computes (mta_internal.h; an allow-list): one of the pre-softmax convolution,
// the post-softmax convolution, and the head steps (mixing, head convolution), or a convolution
// with any of the others (the every-step kernels: fe_takes). Whether their tiles fit on the device
// is tc_fits'.
int tc_computes(const mta_config *c, mta_use u) {
    switch (u) {
    case MTA_USE_PRE_CONV: return fe_takes(c) || (!c->pre_head_mix && !c->post_ch && !c->post_cq);
    case MTA_USE_POST_CONV: return fe_takes(c) || (!c->pre_cq && !c->pre_head_mix && !c->post_ch);
    case MTA_USE_PRE_HEAD_MIX: case MTA_USE_POST_HEAD_CONV: return fe_takes(c) || !c->pre_cq;
    case MTA_USE_GROUP_NORM: case MTA_USE_DEPTH_SCALE: case MTA_USE_GATE: case MTA_USE_DROPOUT:
    case MTA_USE_GQA: case MTA_USE_BF16: case MTA_USE_DOCUMENTS: case MTA_USE_BF16_STORAGE: return 1;
    default: return 0;
    }
}

// 1 when the kernels a config launches fit in smem_max bytes of shared memory per block (the
// device's opt-in limit: 227 KB on an H100, 163 KB on an A100): the every-step kernels' (fe_fits),
// the convolution's with their halos, the head steps' with a tile of their group's heads
// (tc_heads_of), or the plain ones.
int tc_fits(const mta_config *c, size_t smem_max) {
    if (fe_takes(c)) return fe_fits(c, smem_max) && feb_fits(c, smem_max);
    if (c->pre_head_mix || c->post_ch) return tc_heads_of(c, NULL, smem_max).nq > 0;
    if (c->post_cq) {
        const int dp = tc_dp(c->d), cq = c->post_cq, ck = c->post_ck;
        return fa_post_smem_bytes(dp, cq, ck) <= smem_max && fa_post_bwd_smem_bytes(TC_DQ, dp, cq, ck) <= smem_max &&
               fa_post_bwd_smem_bytes(TC_DKDV, dp, cq, ck) <= smem_max;
    }
    for (int kind = TC_FWD; kind <= TC_DQ; kind++) {
        const int dp = tc_dp(c->d);
        const size_t conv = kind == TC_FWD ? fa_conv_smem_bytes(dp, c->pre_cq, c->pre_ck)
                                           : fa_conv_bwd_smem_bytes(kind, c->pre_cq, c->pre_ck);
        if ((c->pre_cq ? conv : fa_smem_bytes(kind, dp)) > smem_max) return 0;
    }
    return 1;
}

// The configs the path runs on a device with smem_max bytes of shared memory per block: precision
// MTA_BF16, d <= 128, every use computed (tc_computes) and the tiles fitting (tc_fits). Others run
// the float32 path.
int tc_covers(const mta_config *c, size_t smem_max) {
    return c->precision == MTA_BF16 && c->d <= TC_MAX_D && mta_first_refused(c, tc_computes) < 0 &&
           tc_fits(c, smem_max);
}

// 1 when the config lets the kernels read the caller's q, k, v as they are: bfloat16 storage
// (mta_config.dtype) already in the padded layout (T whole tiles, d a multiple of 16), so the
// copies would be the same bytes. dout too where the kernels see it unchanged (no norm or gate
// before them: tc_reads_dout). The kernels only read them (tc_args' pointers are const). Whether a
// call's tensor is read in place is the call's (tc_in_place); the workspace has no copies of them.
int tc_reads_caller(const mta_config *c) {
    return c->dtype == MTA_DTYPE_BF16 && c->T % TC_M == 0 && c->d == tc_dp(c->d);
}
int tc_reads_dout(const mta_config *c) { return tc_reads_caller(c) && !c->group_norm && !c->gate; }

// 1 when this call's tensor x (one tc_reads_caller allows) is read in place: it starts at 16 bytes,
// as cp.async's and ldmatrix's rows do, and is device memory (cp.async reads global memory only).
// Else the call reads a padded copy (tc_copy_carve): a view into a tensor, or a host tensor, is
// still taken.
int tc_in_place(const float *x) {
    if ((uintptr_t)x % 16) return 0;
    cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, x) != cudaSuccess) {
        cudaGetLastError();  // a pointer the runtime does not know is not device memory: copied
        return 0;
    }
    return at.type == cudaMemoryTypeDevice || at.type == cudaMemoryTypeManaged;
}

// The path's workspace, in the backend's one allocation (cuda_state.mem).
struct tc_ws {
    bf16 *q, *k, *v, *dO;  // rounded, padded (tc_args); NULL where the caller's may be read (tc_reads_caller)
    float *o;              // O before norm and gate
    float *lse, *D;
    int *start;            // document starts (B, T)
    double *acc;           // norm and gate gradients per (batch, head, chunk of rows): 2d+1 each
    float *dwp;            // the conv kernel gradient's partial sums per (batch, head, query tile)
    float *dkp, *dvp;      // head steps: each query head's dK, dV (B*H, T, d); NULL where tc_adds_kv and
                           // for the every-step kernels (tc_every_backward allocates theirs)
    float *hwp;            // head steps: the head kernels' partial sums per (batch, group, query tile)
};

// 1 where the head steps' dK, dV kernel adds into the caller's dk, dv itself (fhd_adds_kv), on a
// device with smem_max bytes of shared memory per block that launches clusters or not (clusters:
// cuda_state.clusters): no dkp, dvp (tc_carve) and no k_tc_head_kv (tc_head_backward).
int tc_adds_kv(const mta_config *c, size_t smem_max, int clusters) {
    if (fe_takes(c) || !(c->pre_head_mix || c->post_ch)) return 0;
    return fhd_adds_kv(tc_heads_of(c, NULL, smem_max), clusters, tc_dp(c->d), smem_max, c->H / mta_kv_heads(c));
}

// Carves w from mem (NULL: counts) and returns the bytes, for a device with smem_max bytes of
// shared memory per block (the head steps' tiles: tc_heads_of) that launches clusters or not.
size_t tc_carve(const mta_config *c, size_t smem_max, int clusters, void *mem, tc_ws *w) {
    const size_t BH = (size_t)c->B * c->H, BHkv = (size_t)c->B * mta_kv_heads(c), T = c->T, d = c->d;
    const size_t padded = (size_t)tc_tp(c->T) * tc_dp(c->d);
    carver cv = {(unsigned char *)mem, 0};
    tc_ws x;
    x.acc = cv.take<double>(BH * ng_slots(c->T) * (2 * d + 1));
    const int copies = !tc_reads_caller(c);
    x.q = copies ? cv.take<bf16>(BH * padded) : NULL, x.k = copies ? cv.take<bf16>(BHkv * padded) : NULL;
    x.v = copies ? cv.take<bf16>(BHkv * padded) : NULL;
    x.dO = tc_reads_dout(c) ? NULL : cv.take<bf16>(BH * padded);
    x.o = cv.take<float>(BH * T * d);
    x.lse = cv.take<float>(BH * T), x.D = cv.take<float>(BH * T);
    x.start = cv.take<int>((size_t)c->B * T);
    // (the every-step kernels': both convolutions' partials, per query tile of FE_M rows)
    const size_t taps = (size_t)c->pre_cq * c->pre_ck + (size_t)c->post_cq * c->post_ck;
    const size_t tiles = fe_takes(c) ? (T + FE_M - 1) / FE_M : tc_tp(c->T) / TC_M;
    x.dwp = taps ? cv.take<float>(BH * tiles * taps) : NULL;
    x.dkp = x.dvp = x.hwp = NULL;
    if (c->pre_head_mix || c->post_ch || fe_takes(c)) {
        const tc_heads hd = fe_takes(c) ? fe_heads_of(c, NULL) : tc_heads_of(c, NULL, smem_max);
        if (!fe_takes(c) && !tc_adds_kv(c, smem_max, clusters))
            x.dkp = cv.take<float>(BH * T * d), x.dvp = cv.take<float>(BH * T * d);
        // k_fa_head_dq's (k_fa_every_dq's) query tiles of FH_M (FE_M) rows
        x.hwp = cv.take<float>((size_t)c->B * (c->H / hd.G) * ((c->T + FH_M - 1) / FH_M) * hd.nw);
    }
    if (w) *w = x;
    return cv.at;
}
size_t tc_bytes(const mta_config *c, size_t smem_max, int clusters) {
    return tc_carve(c, smem_max, clusters, NULL, NULL);
}

// The copy buffer (cuda_state.copies): a padded slot for each input the workspace has none for
// (q, k, v where tc_reads_caller, dO where tc_reads_dout), for the calls that cannot read that
// input in place (tc_in_place). Carves x (q, k, v, dO; NULL: counts) from mem; returns the bytes.
size_t tc_copy_carve(const mta_config *c, void *mem, bf16 *x[4]) {
    const size_t BH = (size_t)c->B * c->H, BHkv = (size_t)c->B * mta_kv_heads(c);
    const size_t padded = (size_t)tc_tp(c->T) * tc_dp(c->d), n[4] = {BH, BHkv, BHkv, BH};
    carver cv = {(unsigned char *)mem, 0};
    for (int t = 0; t < 4; t++) {
        bf16 *p = (t < 3 ? tc_reads_caller(c) : tc_reads_dout(c)) ? cv.take<bf16>(n[t] * padded) : NULL;
        if (x) x[t] = p;
    }
    return cv.at;
}

// The caller's tensor x as bfloat16 when the config stores its tensors so (mta_config.dtype), else NULL.
const bf16 *tc_stored16(const mta_config *c, const float *x) {
    return c->dtype == MTA_DTYPE_BF16 ? (const bf16 *)(const void *)x : NULL;
}

// The kernels' common arguments for a call (dout: the backward's, or NULL).
tc_args tc_args_of(const call *cl, const tc_ws *w, const int *ds, const float *dout) {
    const mta_config *c = cl->c;
    tc_args a;
    a.q = w->q ? w->q : tc_stored16(c, cl->q), a.k = w->k ? w->k : tc_stored16(c, cl->k);
    a.v = w->v ? w->v : tc_stored16(c, cl->v), a.dO = w->dO ? w->dO : tc_stored16(c, dout);
    a.o = w->o, a.lse = w->lse, a.D = w->D;
    a.ds = ds;
    a.H = c->H, a.Hkv = mta_kv_heads(c), a.T = c->T, a.Tp = tc_tp(c->T), a.d = c->d, a.dp = tc_dp(c->d);
    a.cq = c->pre_cq, a.ck = c->pre_ck, a.pcq = c->post_cq, a.pck = c->post_ck;
    a.scale = cl->scale, a.kv16 = c->dtype == MTA_DTYPE_BF16;
    a.seed = cl->ctx->seed, a.drop_thr = cl->drop_thr, a.drop_scale = cl->drop_scale;
    return a;
}

// The call's inputs: each that the workspace has no slot for (q, k, v, and dout in the backward)
// and this call cannot read in place (tc_in_place) given its slot of the copy buffer, allocated by
// the first call that needs it (counted in ctx->bytes); then q, k, v rounded (copied, with
// bfloat16 storage) into their slots. dO's slot is k_tc_prep's to fill.
mta_status tc_inputs(const call *cl, tc_ws *w, const float *dout) {
    const mta_config *c = cl->c;
    bf16 **slot[4] = {&w->q, &w->k, &w->v, &w->dO};
    const float *in[4] = {cl->q, cl->k, cl->v, dout};
    int copy[4], copies = 0;
    for (int t = 0; t < 4; t++) copies |= copy[t] = !*slot[t] && in[t] && !tc_in_place(in[t]);
    if (copies) {
        const mta_status s = alloc_once(cl->ctx, &cl->st->copies, tc_copy_carve(c, NULL, NULL),
                                        "the padded copies of bfloat16 inputs not read in place");
        if (s) return s;
        bf16 *at[4];
        tc_copy_carve(c, cl->st->copies, at);
        for (int t = 0; t < 4; t++)
            if (copy[t]) *slot[t] = at[t];
    }
    const int Tp = tc_tp(c->T), dp = tc_dp(c->d), BH = c->B * c->H, BHkv = c->B * mta_kv_heads(c);
    const unsigned x = (unsigned)((Tp * dp + 127) / 128);
    const float *src[3] = {cl->q, cl->k, cl->v};
    bf16 *dst[3] = {w->q, w->k, w->v};
    for (int t = 0; t < 3; t++)
        if (dst[t])
            MTA_LAUNCH(k_tc_round, dim3(x, (unsigned)(t ? BHkv : BH)), 128, 0, cl->s)(
                src[t], tc_stored16(c, src[t]), dst[t], c->T, Tp, c->d, dp);
    return MTA_OK;
}

// The kernels that run c (the forward's and the backward's dispatch): the every-step kernels, the
// head kernels, one key-query convolution's (pre or post softmax), or plain attention's.
enum tc_family { TC_EVERY, TC_HEADS, TC_PRE, TC_POST, TC_PLAIN };
static tc_family tc_family_of(const mta_config *c) {
    if (fe_takes(c)) return TC_EVERY;
    if (c->pre_head_mix || c->post_ch) return TC_HEADS;
    return c->pre_cq ? TC_PRE : c->post_cq ? TC_POST : TC_PLAIN;
}

// out: the caller's, bfloat16 with bfloat16 storage (mta_config.dtype).
mta_status tc_forward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p, float *out) {
    call cl;
    mta_status s = begin(ctx, &cl, q, k, v, p);
    if (s) return s;
    const mta_config *c = cl.c;
    cuda_state *st = cl.st;
    tc_ws w;
    tc_carve(c, st->smem_max, st->clusters, st->mem, &w);
    // bfloat16 storage: the kernels write their out to O itself (the same values they write to O),
    // which the norm and gate or k_bf16_narrow round into the caller's out once
    float *const caller_out = out;
    if (c->dtype == MTA_DTYPE_BF16) out = w.o;
    st->docs = ctx->doc != NULL;
    if ((s = tc_inputs(&cl, &w, NULL))) return s;
    if (st->docs) MTA_LAUNCH(k_doc_starts, (c->B + 127) / 128, 128, 0, cl.s)(ctx->doc, c->B, c->T, w.start);
    const tc_args a = tc_args_of(&cl, &w, st->docs ? w.start : NULL, NULL);
    switch (tc_family_of(c)) {
    case TC_EVERY:
        fe_forward(&cl, a, fe_heads_of(c, p), c->B, c->pre_cq ? p->w_pre : NULL, c->post_cq ? p->w_post : NULL, out);
        break;
    case TC_HEADS: {
        const tc_heads hd = tc_heads_of(c, p, st->smem_max);
        const int clf = fh_cl_takes(hd, st->clusters, fhc_smem_bytes(hd.ch, a.dp), st->smem_max);
        if (clf) fh_cl_forward(&cl, a, hd, c->B, out);
        else fh_forward(&cl, a, hd, c->B, out);
        break;
    }
    case TC_PRE: fa_conv_forward(&cl, a, c->B * c->H, p->w_pre, out); break;
    case TC_POST: fa_post_forward(&cl, a, c->B * c->H, p->w_post, out); break;
    case TC_PLAIN: fa_forward(&cl, a, c->B * c->H, out); break;
    }
    bf16 *out16 = out == caller_out ? NULL : (bf16 *)(void *)caller_out;
    if (c->group_norm || c->gate)
        MTA_LAUNCH(k_normgate, dim3((unsigned)c->T, (unsigned)(c->B * c->H)), red_threads(c->d, 128), 0, cl.s)(
            out, out, out16, (size_t)c->T * c->d, normgate_of(c, p));
    else if (out16)
        MTA_LAUNCH(k_bf16_narrow, (unsigned)((q_count(c) + 255) / 256), 256, 0, cl.s)(out, out16, q_count(c));
    return finish(&cl, "tensor-core forward");
}

// The head kernels' gradients from their partials per (batch, group, query tile of FH_M rows), in order.
void tc_head_wgrads(const call *cl, const tc_ws *w, const tc_heads &hd, const mta_grads *g) {
    const mta_config *c = cl->c;
    const int groups = c->H / hd.G, tiles = (c->T + FH_M - 1) / FH_M;
    if (hd.nw && (g->w_pre_head || g->w_post_head))
        MTA_LAUNCH(k_tc_head_wgrad, dim3((unsigned)((hd.nw + 127) / 128), (unsigned)groups), 128, 0, cl->s)(
            w->hwp, c->B, groups, tiles, hd, g->w_pre_head, g->w_post_head);
}

// The backward's kernels with head steps (the cluster kernels where they run, fh_backward's
// others), then the sums of their partials (the cluster dK, dV kernel's own where tc_adds_kv).
void tc_head_backward(const call *cl, const tc_ws *w, const tc_args &a, const mta_params *p, float *dq, float *dk,
                      float *dv, const mta_grads *g) {
    const tc_heads hd = tc_heads_of(cl->c, p, cl->st->smem_max);
    const int clq = fh_cl_takes(hd, cl->st->clusters, fqc_smem_bytes(1, a.dp), cl->st->smem_max);  // dQ on clusters
    const int clk = fh_cl_takes(hd, cl->st->clusters, fhd_smem_bytes(1, a.dp), cl->st->smem_max);  // dK, dV on clusters
    if (clq) fh_cl_dq(cl, a, hd, cl->c->B, dq, w->hwp);  // first: the dK, dV kernels read its D
    if (!clq || !clk) fh_backward(cl, a, hd, cl->c->B, dq, w->hwp, w->dkp, w->dvp, !clq, !clk);
    const int kv = !w->dkp;  // tc_carve took none: tc_adds_kv, which implies clk
    if (clk) fh_cl_dkdv(cl, a, hd, cl->c->B, kv, kv ? dk : w->dkp, kv ? dv : w->dvp);
    if (w->dkp) tc_kv_sums(cl, a, w->dkp, w->dvp, kv_whole(a.T), dk, dv);
    tc_head_wgrads(cl, w, hd, g);
}

// The every-step kernels' backward (fe_backward, which sums dK, dV into dk, dv), then the sums of
// their partials: the head kernels' gradients and each convolution's kernel gradient (the
// pre-softmax one's partials first in dwp, per query tile of FE_M rows). Each query head's dK, dV
// are allocated by the first backward that needs them (a forward needs none): a chunk's rows
// (fe_kv_rows, cl->st->kv_chunk), or without determinism (feb_atomic_kv) whole tensors, cleared
// (cl->st->kv_full).
mta_status tc_every_backward(const call *cl, const tc_ws *w, const tc_args &a, const mta_params *p, float *dq,
                             float *dk, float *dv, const mta_grads *g) {
    const mta_config *c = cl->c;
    const tc_heads hd = fe_heads_of(c, p);
    const int tiles = (c->T + FE_M - 1) / FE_M, taps[2] = {c->pre_cq * c->pre_ck, c->post_cq * c->post_ck};
    const int atomic_kv = feb_atomic_kv(c, cl->ctx->atomics, cl->st->smem_max);
    const size_t rows = atomic_kv ? (size_t)c->T : (size_t)fe_kv_rows(c, hd.G, cl->st->sms);
    const size_t kvn = (size_t)c->B * c->H * rows * c->d;
    void **buf = atomic_kv ? &cl->st->kv_full : &cl->st->kv_chunk;
    const mta_status s = alloc_once(cl->ctx, buf, 2 * kvn * sizeof(float),
                                    atomic_kv ? "each query head's dK, dV (the backward without determinism)"
                                              : "each query head's dK, dV of a chunk of key tiles");
    if (s) return s;
    float *dkp = (float *)*buf, *dvp = dkp + kvn;
    if (atomic_kv) {  // (k_fa_every_dqkv adds into them)
        const cudaError_t e = cudaMemsetAsync(dkp, 0, 2 * kvn * sizeof(float), cl->s);
        if (e != cudaSuccess) return cuda_fail(cl->ctx, e, "the backward's clearing of dK, dV");
    }
    fe_backward(cl, a, hd, c->B, c->pre_cq ? p->w_pre : NULL, c->post_cq ? p->w_post : NULL, atomic_kv, cl->st->sms, dq,
                w->dwp, w->hwp, dkp, dvp, dk, dv);
    tc_head_wgrads(cl, w, hd, g);
    float *gw[2] = {g->w_pre, g->w_post};
    const float *dwp = w->dwp;
    for (int n = 0; n < 2; n++) {
        if (taps[n] && gw[n])
            MTA_LAUNCH(k_tc_conv_wgrad, dim3((unsigned)((taps[n] + 127) / 128), (unsigned)c->H), 128, 0, cl->s)(
                dwp, c->B, c->H, tiles, taps[n], gw[n]);
        dwp += (size_t)c->B * c->H * tiles * taps[n];
    }
    return MTA_OK;
}

mta_status tc_backward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                       const float *dout, float *dq, float *dk, float *dv, const mta_grads *g) {
    call cl;
    mta_status s = begin(ctx, &cl, q, k, v, p);
    if (s) return s;
    const mta_config *c = cl.c;
    const int B = c->B, H = c->H, T = c->T, d = c->d, BH = B * H;
    tc_ws w;
    tc_carve(c, cl.st->smem_max, cl.st->clusters, cl.st->mem, &w);
    if ((s = tc_inputs(&cl, &w, dout))) return s;
    const tc_args a = tc_args_of(&cl, &w, cl.st->docs ? w.start : NULL, dout);
    // dO rounded into w.dO: through the gate and norm (their parameter gradients summed per head
    // and chunk of rows) or as it is (none where the kernels read dout in place); D = rowsum(dO O)
    // only where P v is O (plain, pre-softmax convolution), the other kernels make D. dout is read
    // as bfloat16 with bfloat16 storage.
    const int slots = ng_slots(T);
    const tc_family fam = tc_family_of(c);
    const int withD = fam == TC_PLAIN || fam == TC_PRE;
    if (c->group_norm || c->gate) {
        const cudaError_t e = cudaMemsetAsync(w.acc, 0, (size_t)BH * slots * (2 * d + 1) * sizeof(double), cl.s);
        if (e != cudaSuccess) return cuda_fail(ctx, e, "the backward's clearing of its accumulators");
        ng_io io = {};
        io.go = dout, io.go16 = tc_stored16(c, dout), io.ghs = (size_t)T * d;
        io.dO16 = w.dO, io.D = withD ? w.D : NULL, io.Tp = a.Tp, io.dp = a.dp;
        normgate_backward(&cl, w.o, io, (size_t)T * d, T, T, normgate_of(c, p), w.acc);
    } else if (w.dO || withD) {
        MTA_LAUNCH(k_tc_prep, dim3((unsigned)((a.Tp + 127) / 128), (unsigned)BH), 128, 0, cl.s)(
            a, dout, tc_stored16(c, dout), w.dO, withD);
    }
    if (fam == TC_EVERY) {
        if ((s = tc_every_backward(&cl, &w, a, p, dq, dk, dv, g))) return s;
    } else if (fam == TC_HEADS) {
        tc_head_backward(&cl, &w, a, p, dq, dk, dv, g);
    } else if (fam != TC_PLAIN) {  // one convolution: its kernel gradient from the partials
        if (c->pre_cq) fa_conv_backward(&cl, a, B, p->w_pre, dq, dk, dv, w.dwp);
        else fa_post_backward(&cl, a, B, p->w_post, dq, dk, dv, w.dwp);
        const int taps = c->pre_cq ? a.cq * a.ck : a.pcq * a.pck;
        float *gw = c->pre_cq ? g->w_pre : g->w_post;
        if (gw)
            MTA_LAUNCH(k_tc_conv_wgrad, dim3((unsigned)((taps + 127) / 128), (unsigned)H), 128, 0, cl.s)(
                w.dwp, B, H, a.Tp / TC_M, taps, gw);
    } else {
        fa_backward(&cl, a, B, dq, dk, dv);
    }
    // the norm's and gate's gradients: partials per head and chunk at offsets 0, d, 2d of each 2d+1
    const mta_param_sizes ps = ctx->sizes;
    const int which[3] = {MTA_GN_WEIGHT, MTA_GATE_W, MTA_GATE_B}, off[3] = {0, d, 2 * d};
    for (int n = 0; n < 3; n++) {
        const int i = which[n], count = (int)ps.w[i];
        if (g->w[i] && count)
            MTA_LAUNCH(k_sum_grad, (count + 127) / 128, 128, 0, cl.s)(g->w[i], count, w.acc, (size_t)(2 * d + 1), BH * slots, off[n],
                                                                     H, 0);
    }
    return finish(&cl, "tensor-core backward");
}

#endif
