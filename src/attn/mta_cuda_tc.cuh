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
// log-sum-exp); the head steps' (k_tc_head_*) own a tile of every head of a group.
//
// Arithmetic: q, k, v are rounded to bf16 once, into the workspace (rows padded to a multiple of
// the tile, d to a multiple of 16, with zeros); P, dO and dS (with the convolution dZ) are rounded
// to bf16 before the products that read them; the products (mma.sync m16n8k16 or nvcuda::wmma
// m16n16k16) accumulate in float32, and the softmax statistics, O, the convolution (Z, S1, dS1), the norm and gate, and
// every gradient are float32.
//
// The head steps' k_tc_head_* kernels use nvcuda::wmma, whose fragment layout is
// unspecified, so their products go through shared memory: a warp stores its
// 16x16 tiles there and per-row work (the softmax, O's rescaling) is done by threads on the stored
// values. A tile of TC_M query rows and TC_N keys has 4 warps; warp w owns rows 16w..16w+15 of
// every product it writes. Deterministic: each output tile belongs to one block, which sums its
// terms in a fixed order (dk, dv: query heads of the kv head, then query tiles, in order).
#ifndef MTAC_ATTN_MTA_CUDA_TC_CUH
#define MTAC_ATTN_MTA_CUDA_TC_CUH

#include <cuda_bf16.h>
#include <mma.h>

#include <type_traits>

namespace wm = nvcuda::wmma;
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
    uint64_t seed;          // dropout (drop_thr = 0: none)
    uint32_t drop_thr;
    float drop_scale;
};

__device__ __forceinline__ size_t tc_kv_slab(const tc_args &a, int bh) {
    return (size_t)(bh / a.H) * a.Hkv + bh % a.H / (a.H / a.Hkv);
}

// The last row (or key) of the tile starting at i0.
__device__ __forceinline__ int tc_last(const tc_args &a, int i0) { return (i0 + TC_M < a.T ? i0 + TC_M : a.T) - 1; }

// Buffers carved one after another in 32-byte steps (wmma's pointer alignment); base NULL only
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

// The kernels' kinds, for their shared memory's size (fa_smem_bytes, fa_conv_bwd_smem_bytes, tc_hsmem_carve).
enum { TC_FWD, TC_DKDV, TC_DQ };

typedef wm::fragment<wm::accumulator, 16, 16, 16, float> acc_frag;

// acc += A B for a 16 x n by n x 16 product of bf16 operands, n a multiple of 16. A row-major is
// a[m*lda + k], column-major a[k*lda + m]; B row-major b[k*ldb + n], column-major b[n*ldb + k].
template <typename LA, typename LB>
__device__ void mma_acc(acc_frag &acc, const bf16 *a, int lda, const bf16 *b, int ldb, int n) {
    const bool a_rows = std::is_same<LA, wm::row_major>::value, b_rows = std::is_same<LB, wm::row_major>::value;
    wm::fragment<wm::matrix_a, 16, 16, 16, bf16, LA> fa;
    wm::fragment<wm::matrix_b, 16, 16, 16, bf16, LB> fb;
    for (int k = 0; k < n; k += 16) {
        wm::load_matrix_sync(fa, a + (a_rows ? k : (size_t)k * lda), lda);
        wm::load_matrix_sync(fb, b + (b_rows ? (size_t)k * ldb : k), ldb);
        wm::mma_sync(acc, fa, fb, acc);
    }
}

// out = x y^T for x (nx, dp) and y (ny, dp) rows, out (nx, ny) float, nx and ny multiples of 16:
// the 16x16 tiles go to the warps in turn (read out after a barrier).
__device__ void tc_products_xyT_n(const bf16 *x, int nx, const bf16 *y, int ny, float *out, int dp) {
    const int tn = ny / 16, nt = nx / 16 * tn;
    for (int f = threadIdx.x / 32; f < nt; f += blockDim.x / 32) {
        const int m = f / tn * 16, n = f % tn * 16;
        acc_frag acc;
        wm::fill_fragment(acc, 0.0f);
        mma_acc<wm::row_major, wm::col_major>(acc, x + (size_t)m * dp, dp, y + (size_t)n * dp, dp, dp);
        wm::store_matrix_sync(out + (size_t)m * ny + n, acc, ny, wm::mem_row_major);
    }
}

// t = A y for a tile of tm rows, in fresh accumulators: A = p (tm, tm) as is (LA row-major) or
// transposed (column-major), y the (tm, dp) rows; t is (tm, dp) float, its 16x16 tiles going to
// the warps in turn (read it after a barrier). The callers add t to their sums entry by entry,
// with the online softmax's per-row rescaling (a fragment's layout is unspecified, so rows
// cannot be rescaled inside one).
template <typename LA> __device__ void tc_product_n(float *t, const bf16 *p, int tm, const bf16 *y, int dp) {
    const bool rows = std::is_same<LA, wm::row_major>::value;
    const int tn = dp / 16, nt = tm / 16 * tn;
    for (int f = threadIdx.x / 32; f < nt; f += blockDim.x / 32) {
        const int m = f / tn * 16, n = f % tn * 16;
        acc_frag acc;
        wm::fill_fragment(acc, 0.0f);
        mma_acc<LA, wm::row_major>(acc, p + (rows ? (size_t)m * tm : (size_t)m), tm, y + n, dp, tm);
        wm::store_matrix_sync(t + (size_t)m * dp + n, acc, dp, wm::mem_row_major);
    }
}

__device__ void tc_zero(float *dst, int n) {
    for (int e = threadIdx.x; e < n; e += blockDim.x) dst[e] = 0.0f;
}

// 1 when row i (< T) may see key j: s_i <= j <= i.
__device__ __forceinline__ int tc_valid(const tc_args &a, int b, int i, int j) {
    return i < a.T && j <= i && j >= mta_row_start(a.ds, a.T, b, i);
}

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

// Backward, per row: D = rowsum(dO * O) and dO rounded to bf16 (zero past T and d) (grid: x rows
// of 128, y B*H). go is dO in (B*H, T, d): float32, or bfloat16 go16 (then copied as it is).
__global__ void k_tc_prep(tc_args a, const float *go, const bf16 *go16, bf16 *dO) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x, bh = blockIdx.y;
    if (i >= a.Tp) return;
    const size_t row = ((size_t)bh * a.T + i) * a.d;
    const float *o = a.o + row;
    bf16 *dst = dO + ((size_t)bh * a.Tp + i) * a.dp;
    float D = 0.0f;
    for (int e = 0; e < a.dp; e++) {
        const bool in = i < a.T && e < a.d;
        const bf16 r = in && go16 ? go16[row + e] : __float2bfloat16_rn(in ? go[row + e] : 0.0f);
        const float x = in && go16 ? __bfloat162float(r) : in ? go[row + e] : 0.0f;
        if (in) D = fmaf(x, o[e], D);
        dst[e] = r;
    }
    if (i < a.T) a.D[(size_t)bh * a.T + i] = D;
}

// ---- The pre-softmax key-query convolution (spec section 2, step 2) ----
//
// S1 = qkconv(Z, w_pre) needs Z on a tile grown by halos: row i reads Z rows i-(c_q-1)..i, and
// column j columns j-p..j+p (p = (c_k-1)/2). Its forward and backward kernels are
// mta_cuda_fa_conv.cuh's and mta_cuda_fa_conv_bwd.cuh's (band MMAs, included below); the kernel
// gradient's partials per query tile are summed here.

__host__ __device__ inline int tc_up16(int n) { return (n + 15) / 16 * 16; }

// n rows of a padded (Tp, dp) slab from row g0 on into shared memory; rows outside 0..Tp-1 are 0.
__device__ void tc_copy_rows(bf16 *dst, const bf16 *slab, int g0, int n, int Tp, int dp) {
    for (int e = threadIdx.x; e < n * dp; e += blockDim.x) {
        const int g = g0 + e / dp;
        dst[e] = g >= 0 && g < Tp ? slab[(size_t)g * dp + e % dp] : __float2bfloat16_rn(0.0f);
    }
}

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
// of them), else the c_h heads of a head-conv group. A block owns a query tile of tm rows of the
// group's G heads and walks the key tiles (tm keys) for all of them; tm = 64, 32 or 16, the
// largest whose G score tiles fit in shared memory (tc_heads_of). Step 3 mixes the scaled scores
// S1 across heads before the softmax. Step 6 mixes the normalised P, known only after a row's last
// key tile: with it the forward walks the key tiles twice, a statistics pass (each head's row max
// and sum) and a pass that recomputes P exactly from them, mixes it and multiplies by v. The
// backward's dQ kernel first sums D = rowsum(P dP) per head in a pass of its own: with step 6 it
// is no longer rowsum(dO O), and with step 3 alone the exact sum keeps the mixing's kernel
// gradient (sum dS2 S1, whose terms cancel almost entirely) clear of O's bf16 rounding.
// One head's q (or dO) and k (or v) tile is staged at a time, reloaded per head; O, dQ and each
// query head's dK, dV are added in global memory by the one block that owns their rows.

// A block's heads and tile (the host fills it per call: tc_heads_of).
struct tc_heads {
    int G, tm;          // heads per block; rows and keys of a tile
    int mix, ch;        // step 3 on; step 6's group size (0: off)
    int nw;             // the kernel gradients' entries per block: (H, H) of w_pre_head, G c_h of w_post_head
    const float *w1;    // w_pre_head (H, H) [out, in]
    const float *w2;    // w_post_head (H/c_h, c_h, c_h) [group, in, out]
};

// The shared memory of the three head kernels; NULL for what a kernel does not use.
struct tc_hsmem {
    bf16 *x, *y;          // one head's rows of q or dO (tm, dp), and of k or v (tm, dp)
    bf16 *pb;             // (tm, tm): one head's P2 or dS1 in bf16, for a product
    float *t;             // (tm, dp): a product
    float *s1, *s2;       // (G, tm, tm): S1 (with mixing), S2 then P; forward: s1 then P2
    float *dd, *dp;       // backward: (G, tm, tm) dP2 = dropout(dO v^T); dP (= dd without step 6), then dS2
    float *w1, *w2, *dw;  // the block's mixings; dQ: the tile's kernel gradient partials (nw)
    float *m, *l, *al;    // (G, tm): max, sum, alpha (forward); lse, D (backward)
};
__host__ __device__ size_t tc_hsmem_carve(int kind, const tc_heads &hd, int dp, unsigned char *base, tc_hsmem *sm) {
    carver cv = {base, 0};
    const size_t tt = (size_t)hd.tm * hd.tm, maps = (size_t)hd.G * tt, rows = (size_t)hd.G * hd.tm;
    const int fwd = kind == TC_FWD;
    sm->x = cv.take<bf16>((size_t)hd.tm * dp), sm->y = cv.take<bf16>((size_t)hd.tm * dp);
    sm->pb = cv.take<bf16>(tt);
    sm->t = cv.take<float>((size_t)hd.tm * dp);
    sm->s1 = cv.take<float>(maps), sm->s2 = cv.take<float>(maps);
    sm->dd = fwd ? NULL : cv.take<float>(maps);
    sm->dp = fwd || !hd.ch ? sm->dd : cv.take<float>(maps);
    sm->w1 = cv.take<float>(hd.mix ? (size_t)hd.G * hd.G : 0);
    sm->w2 = cv.take<float>(hd.ch ? (size_t)hd.G * hd.ch : 0);
    sm->dw = kind == TC_DQ ? cv.take<float>(hd.nw) : NULL;
    sm->m = cv.take<float>(rows), sm->l = cv.take<float>(rows), sm->al = fwd ? cv.take<float>(rows) : NULL;
    return cv.at + 32;
}

// Mixing per entry within groups of c of the G tiles (n entries each): out[g c + a] =
// sum_k W(a, k) in[g c + k], W(a, k) = w[g, a, k] (tr) or w[g, k, a]. Step 3 is (w1, c = G, tr 1),
// its transpose tr 0; step 6 (w2 [in, out]) tr 0, its transpose tr 1.
__device__ void tc_heads_mix(const float *w, int c, int G, int tr, const float *in, float *out, int n) {
    for (int e = threadIdx.x; e < G * n; e += blockDim.x) {
        const int h = e / n, x = e % n, g = h / c, at = h % c;
        const float *wg = w + (size_t)g * c * c, *ig = in + (size_t)g * c * n + x;
        float s = 0.0f;
        for (int k = 0; k < c; k++) s = fmaf(tr ? wg[at * c + k] : wg[k * c + at], ig[(size_t)k * n], s);
        out[e] = s;
    }
}

// The block's mixings into shared memory.
__device__ void tc_head_setup(const tc_args &a, const tc_heads &hd, int bh0, const tc_hsmem &sm) {
    for (int e = threadIdx.x; hd.mix && e < hd.G * hd.G; e += blockDim.x) sm.w1[e] = hd.w1[e];
    const float *w2 = hd.ch ? hd.w2 + (size_t)(bh0 % a.H) * hd.ch : NULL;  // group h0/c_h's c_h^2 on
    for (int e = threadIdx.x; hd.ch && e < hd.G * hd.ch; e += blockDim.x) sm.w2[e] = w2[e];
}

// rows r0.. of head slab dst (T, d): dst = dst alpha[r] + f t (alpha NULL: 1), rows before T.
__device__ void tc_head_add(const tc_args &a, float *dst, const float *alpha, const float *t, float f, int r0, int tm) {
    for (int e = threadIdx.x; e < tm * a.d; e += blockDim.x) {
        const int r = e / a.d, c = e % a.d;
        if (r0 + r >= a.T) break;
        float *x = dst + (size_t)(r0 + r) * a.d + c;
        *x = (alpha ? *x * alpha[r] : *x) + f * t[r * a.dp + c];
    }
}

// x (tm, tm) to bf16 in pb, times dropout's factor of head bh (drop) or as is.
__device__ void tc_head_round(const tc_args &a, int bh, int i0, int j0, int tm, const float *x, int drop, bf16 *pb) {
    for (int e = threadIdx.x; e < tm * tm; e += blockDim.x) {
        const int i = i0 + e / tm, j = j0 + e % tm;
        pb[e] = __float2bfloat16_rn(drop && i < a.T ? x[e] * tc_drop(a, bh, i, j) : x[e]);
    }
}

// t = x_h y_h^T of every head into out (G, tm, tm), masked: f (scale, or dropout's factor when
// f = 0) where the row may see the key, else 0. x, y: the (B*H or B*H_kv, Tp, dp) slabs.
__device__ void tc_head_xyT(const tc_args &a, const tc_heads &hd, const tc_hsmem &sm, int bh0, int i0, int j0,
                            const bf16 *x, const bf16 *y, float f, float *out) {
    const int tm = hd.tm, tt = tm * tm, b = bh0 / a.H;
    for (int n = 0; n < hd.G; n++) {
        tc_copy_rows(sm.x, x + (size_t)(bh0 + n) * a.Tp * a.dp, i0, tm, a.Tp, a.dp);
        tc_copy_rows(sm.y, y + tc_kv_slab(a, bh0 + n) * a.Tp * a.dp, j0, tm, a.Tp, a.dp);
        __syncthreads();
        tc_products_xyT_n(sm.x, tm, sm.y, tm, out + (size_t)n * tt, a.dp);
        __syncthreads();
    }
    for (int e = threadIdx.x; e < hd.G * tt; e += blockDim.x) {
        const int n = e / tt, i = i0 + e % tt / tm, j = j0 + e % tm;
        out[e] = tc_valid(a, b, i, j) ? out[e] * (f ? f : tc_drop(a, bh0 + n, i, j)) : 0.0f;
    }
    __syncthreads();
}

// S2 of every head at the tile pair into s2: S1 = scale q k^T masked, mixed across heads (step 3).
__device__ void tc_head_scores(const tc_args &a, const tc_heads &hd, const tc_hsmem &sm, int bh0, int i0, int j0) {
    tc_head_xyT(a, hd, sm, bh0, i0, j0, a.q, a.k, a.scale, hd.mix ? sm.s1 : sm.s2);
    if (hd.mix) tc_heads_mix(sm.w1, hd.G, hd.G, 1, sm.s1, sm.s2, hd.tm * hd.tm);
    __syncthreads();
}

// The online softmax's statistics of every head's rows (a thread per head and row): the max m,
// the old terms' factor al and the sum l; with keep, s2 becomes P = exp(s2 - m) with dropout.
__device__ void tc_head_online(const tc_args &a, const tc_heads &hd, const tc_hsmem &sm, int bh0, int i0, int j0,
                               int keep) {
    const int tm = hd.tm, b = bh0 / a.H;
    for (int e = threadIdx.x; e < hd.G * tm; e += blockDim.x) {
        const int n = e / tm, i = i0 + e % tm;
        float *sr = sm.s2 + (size_t)e * tm;
        float mx = sm.m[e], sum = 0.0f;
        for (int c = 0; c < tm; c++)
            if (tc_valid(a, b, i, j0 + c)) mx = fmaxf(mx, sr[c]);
        sm.al[e] = mx == -INFINITY ? 1.0f : expf(sm.m[e] - mx);
        for (int c = 0; c < tm; c++) {
            const float p = tc_valid(a, b, i, j0 + c) ? expf(sr[c] - mx) : 0.0f;
            sum += p;
            if (keep) sr[c] = p ? p * tc_drop(a, bh0 + n, i, j0 + c) : 0.0f;
        }
        sm.l[e] = sm.l[e] * sm.al[e] + sum, sm.m[e] = mx;
    }
    __syncthreads();
}

// P = exp(S2 - lse) in place in s2 where the row may see the key, else 0 (lse: m).
__device__ void tc_head_probs(const tc_args &a, const tc_heads &hd, const tc_hsmem &sm, int bh0, int i0, int j0) {
    const int tm = hd.tm, tt = tm * tm, b = bh0 / a.H;
    for (int e = threadIdx.x; e < hd.G * tt; e += blockDim.x) {
        const int r = e / tm, i = i0 + e % tt / tm, j = j0 + e % tm;
        sm.s2[e] = tc_valid(a, b, i, j) ? expf(sm.s2[e] - sm.m[r]) : 0.0f;
    }
    __syncthreads();
}

// The forward with head steps, one block per (query tile, group of G heads) (grid: x tiles of tm
// rows, y B*H/G): without step 6 the online softmax of S2 and O = alpha O + P v per key tile; with
// it a statistics pass, then per key tile P, P2 = the head convolution of P, O += dropout(P2) v.
// O (before norm and gate) is added up in a.o; at the end out = a.o, and each row's log-sum-exp.
// (One block per SM at least: without the bound ptxas keeps 80 registers and spills.)
__global__ void __launch_bounds__(TC_THREADS, 1) k_tc_head_forward(tc_args a, tc_heads hd, float *out) {
    const int tm = hd.tm, G = hd.G, bh0 = blockIdx.y * G, b = bh0 / a.H, i0 = blockIdx.x * tm;
    const int last = (i0 + tm < a.T ? i0 + tm : a.T) - 1, j1 = mta_row_start(a.ds, a.T, b, i0) / tm * tm;
    tc_hsmem sm;
    tc_hsmem_carve(TC_FWD, hd, a.dp, tc_shared(), &sm);
    tc_head_setup(a, hd, bh0, sm);
    for (int e = threadIdx.x; e < G * tm; e += blockDim.x) sm.m[e] = -INFINITY, sm.l[e] = 0.0f;
    for (int e = threadIdx.x; e < G * tm * a.d; e += blockDim.x) {
        const int n = e / (tm * a.d), i = i0 + e % (tm * a.d) / a.d;
        if (i < a.T) a.o[((size_t)(bh0 + n) * a.T + i) * a.d + e % a.d] = 0.0f;
    }
    for (int pass = 0; pass < (hd.ch ? 2 : 1); pass++) {
        if (pass)  // the statistics are final: m becomes the log-sum-exp
            for (int e = threadIdx.x; e < G * tm; e += blockDim.x) sm.m[e] += logf(sm.l[e]);
        for (int j0 = j1; j0 <= last; j0 += tm) {
            tc_head_scores(a, hd, sm, bh0, i0, j0);
            if (hd.ch && !pass) {
                tc_head_online(a, hd, sm, bh0, i0, j0, 0);
                continue;
            }
            const float *p2 = sm.s2;
            if (hd.ch) {
                tc_head_probs(a, hd, sm, bh0, i0, j0);
                tc_heads_mix(sm.w2, hd.ch, G, 0, sm.s2, sm.s1, tm * tm);  // P2 in s1
                p2 = sm.s1;
            } else {
                tc_head_online(a, hd, sm, bh0, i0, j0, 1);
            }
            for (int n = 0; n < G; n++) {
                const int bh = bh0 + n;
                tc_head_round(a, bh, i0, j0, tm, p2 + (size_t)n * tm * tm, hd.ch != 0, sm.pb);
                tc_copy_rows(sm.y, a.v + tc_kv_slab(a, bh) * a.Tp * a.dp, j0, tm, a.Tp, a.dp);
                __syncthreads();
                tc_product_n<wm::row_major>(sm.t, sm.pb, tm, sm.y, a.dp);
                __syncthreads();
                tc_head_add(a, a.o + (size_t)bh * a.T * a.d, hd.ch ? NULL : sm.al + n * tm, sm.t, 1.0f, i0, tm);
                __syncthreads();
            }
        }
        __syncthreads();
    }
    for (int e = threadIdx.x; e < G * tm * a.d; e += blockDim.x) {
        const int n = e / (tm * a.d), r = e % (tm * a.d) / a.d, i = i0 + r;
        const size_t at = ((size_t)(bh0 + n) * a.T + i) * a.d + e % a.d;
        if (i <= last) out[at] = a.o[at] = hd.ch ? a.o[at] : a.o[at] / sm.l[n * tm + r];
    }
    for (int e = threadIdx.x; e < G * tm; e += blockDim.x) {
        const int n = e / tm, i = i0 + e % tm;
        if (i <= last) a.lse[(size_t)(bh0 + n) * a.T + i] = hd.ch ? sm.m[e] : sm.m[e] + logf(sm.l[e]);
    }
}

// The backward's rows of the block's heads: lse in m, D in l (0 past T, and 0 when the dQ kernel
// is to sum it: sum_D).
__device__ void tc_head_row_stats(const tc_args &a, const tc_heads &hd, const tc_hsmem &sm, int bh0, int i0,
                                  int sum_D) {
    for (int e = threadIdx.x; e < hd.G * hd.tm; e += blockDim.x) {
        const int n = e / hd.tm, i = i0 + e % hd.tm;
        const size_t at = (size_t)(bh0 + n) * a.T + i;
        sm.m[e] = i < a.T ? a.lse[at] : 0.0f;
        sm.l[e] = i < a.T && !sum_D ? a.D[at] : 0.0f;
    }
    __syncthreads();
}

// A tile pair's P (in s2) and dP (in dp) of every head: S2 and P as the forward, dP2 =
// dropout(dO v^T) in dd and dP = the transposed head convolution of dP2 (dP2 itself without it).
__device__ void tc_head_p_dp(const tc_args &a, const tc_heads &hd, const tc_hsmem &sm, int bh0, int i0, int j0) {
    tc_head_scores(a, hd, sm, bh0, i0, j0);
    tc_head_probs(a, hd, sm, bh0, i0, j0);
    tc_head_xyT(a, hd, sm, bh0, i0, j0, a.dO, a.v, 0.0f, sm.dd);
    if (hd.ch) tc_heads_mix(sm.w2, hd.ch, hd.G, 1, sm.dd, sm.dp, hd.tm * hd.tm);
    __syncthreads();
}

// D += rowsum(P dP) of every head's rows (a thread per head and row, keys in order).
__device__ void tc_head_D(const tc_heads &hd, const tc_hsmem &sm) {
    for (int e = threadIdx.x; e < hd.G * hd.tm; e += blockDim.x) {
        const float *p = sm.s2 + (size_t)e * hd.tm, *g = sm.dp + (size_t)e * hd.tm;
        float x = sm.l[e];
        for (int c = 0; c < hd.tm; c++) x = fmaf(p[c], g[c], x);
        sm.l[e] = x;
    }
    __syncthreads();
}

// dS2 = P (dP - D) in place in dp; with dw the tile's kernel gradient terms added to it (a thread
// per entry of w_pre_head, then of the block's w_post_head, entries in order): dWh1[h, h'] +=
// sum dS2[h] S1[h'], dWh2[g, n, o] += sum P[g c + n] dP2[g c + o]. Returns dS1: the transposed
// mixing of dS2 in s1 (S1 read), or dS2 without step 3.
__device__ const float *tc_head_ds(const tc_heads &hd, const tc_hsmem &sm, float *dw) {
    const int tm = hd.tm, tt = tm * tm, G = hd.G, n1 = hd.mix ? G * G : 0;
    for (int e = threadIdx.x; e < G * tt; e += blockDim.x) sm.dp[e] = sm.s2[e] * (sm.dp[e] - sm.l[e / tm]);
    __syncthreads();
    for (int e = threadIdx.x; dw && e < hd.nw; e += blockDim.x) {
        const float *x, *y;
        if (e < n1) {
            x = sm.dp + (size_t)(e / G) * tt, y = sm.s1 + (size_t)(e % G) * tt;
        } else {
            const int c = hd.ch, f = e - n1, g = f / (c * c), in = f % (c * c) / c, o = f % c;
            x = sm.s2 + (size_t)(g * c + in) * tt, y = sm.dd + (size_t)(g * c + o) * tt;
        }
        float s = dw[e];
        for (int k = 0; k < tt; k++) s = fmaf(x[k], y[k], s);
        dw[e] = s;
    }
    __syncthreads();
    if (!hd.mix) return sm.dp;
    tc_heads_mix(sm.w1, G, G, 0, sm.dp, sm.s1, tt);
    __syncthreads();
    return sm.s1;
}

// dQ of one query tile of a group's heads with head steps (grid as k_tc_head_forward), and the
// tile's kernel gradient partials into hwp (B*H/G, tiles, nw). A first pass over the key tiles
// sums D = rowsum(P dP) per head and row (written to a.D for the dK/dV kernel, launched after
// this one); then per key tile dS1 and dq += scale dS1 k.
__global__ void __launch_bounds__(TC_THREADS) k_tc_head_dq(tc_args a, tc_heads hd, float *dq, float *hwp) {
    const int tm = hd.tm, G = hd.G, bh0 = blockIdx.y * G, b = bh0 / a.H, i0 = blockIdx.x * tm;
    const int last = (i0 + tm < a.T ? i0 + tm : a.T) - 1, j1 = mta_row_start(a.ds, a.T, b, i0) / tm * tm;
    tc_hsmem sm;
    tc_hsmem_carve(TC_DQ, hd, a.dp, tc_shared(), &sm);
    tc_head_setup(a, hd, bh0, sm);
    tc_zero(sm.dw, hd.nw);
    tc_head_row_stats(a, hd, sm, bh0, i0, 1);
    for (int j0 = j1; j0 <= last; j0 += tm) {
        tc_head_p_dp(a, hd, sm, bh0, i0, j0);
        tc_head_D(hd, sm);
    }
    for (int e = threadIdx.x; e < G * tm; e += blockDim.x)
        if (i0 + e % tm <= last) a.D[(size_t)(bh0 + e / tm) * a.T + i0 + e % tm] = sm.l[e];
    for (int j0 = j1; j0 <= last; j0 += tm) {
        tc_head_p_dp(a, hd, sm, bh0, i0, j0);
        const float *ds1 = tc_head_ds(hd, sm, sm.dw);
        for (int n = 0; n < G; n++) {
            tc_head_round(a, bh0 + n, i0, j0, tm, ds1 + (size_t)n * tm * tm, 0, sm.pb);
            tc_copy_rows(sm.y, a.k + tc_kv_slab(a, bh0 + n) * a.Tp * a.dp, j0, tm, a.Tp, a.dp);
            __syncthreads();
            tc_product_n<wm::row_major>(sm.t, sm.pb, tm, sm.y, a.dp);
            __syncthreads();
            tc_head_add(a, dq + (size_t)(bh0 + n) * a.T * a.d, NULL, sm.t, a.scale, i0, tm);
            __syncthreads();
        }
    }
    float *out = hwp + ((size_t)blockIdx.y * gridDim.x + blockIdx.x) * hd.nw;
    for (int e = threadIdx.x; e < hd.nw; e += blockDim.x) out[e] = sm.dw[e];
}

// Each query head's dK and dV of one key tile (grid: x key tiles of tm, y B*H/G), into dkp, dvp
// (B*H, T, d), over the query tiles from the diagonal on while their rows' documents reach the
// keys: dv += dropout(P2)^T dO, dk += scale dS1^T q. k_tc_head_kv sums them per kv head.
__global__ void __launch_bounds__(TC_THREADS) k_tc_head_dkdv(tc_args a, tc_heads hd, float *dkp, float *dvp) {
    const int tm = hd.tm, G = hd.G, bh0 = blockIdx.y * G, b = bh0 / a.H, j0 = blockIdx.x * tm;
    const int jlast = (j0 + tm < a.T ? j0 + tm : a.T) - 1;
    tc_hsmem sm;
    tc_hsmem_carve(TC_DKDV, hd, a.dp, tc_shared(), &sm);
    tc_head_setup(a, hd, bh0, sm);
    for (int e = threadIdx.x; e < G * tm * a.d; e += blockDim.x) {
        const int n = e / (tm * a.d), j = j0 + e % (tm * a.d) / a.d;
        const size_t at = ((size_t)(bh0 + n) * a.T + j) * a.d + e % a.d;
        if (j <= jlast) dkp[at] = dvp[at] = 0.0f;
    }
    for (int i0 = j0; i0 < a.T && mta_row_start(a.ds, a.T, b, i0) <= jlast; i0 += tm) {
        tc_head_row_stats(a, hd, sm, bh0, i0, 0);
        tc_head_p_dp(a, hd, sm, bh0, i0, j0);
        const float *ds1 = tc_head_ds(hd, sm, NULL), *p2 = sm.s2;
        if (hd.ch) {  // P2 in dd (dP2 was read)
            tc_heads_mix(sm.w2, hd.ch, G, 0, sm.s2, sm.dd, tm * tm);
            p2 = sm.dd;
        }
        __syncthreads();
        for (int n = 0; n < G; n++) {
            const size_t bh = bh0 + n, tt = (size_t)tm * tm;
            tc_head_round(a, (int)bh, i0, j0, tm, p2 + n * tt, 1, sm.pb);
            tc_copy_rows(sm.x, a.dO + bh * a.Tp * a.dp, i0, tm, a.Tp, a.dp);
            __syncthreads();
            tc_product_n<wm::col_major>(sm.t, sm.pb, tm, sm.x, a.dp);
            __syncthreads();
            tc_head_add(a, dvp + bh * a.T * a.d, NULL, sm.t, 1.0f, j0, tm);
            tc_head_round(a, (int)bh, i0, j0, tm, ds1 + n * tt, 0, sm.pb);
            tc_copy_rows(sm.x, a.q + bh * a.Tp * a.dp, i0, tm, a.Tp, a.dp);
            __syncthreads();
            tc_product_n<wm::col_major>(sm.t, sm.pb, tm, sm.x, a.dp);
            __syncthreads();
            tc_head_add(a, dkp + bh * a.T * a.d, NULL, sm.t, a.scale, j0, tm);
            __syncthreads();
        }
    }
}

// dk, dv of each kv head += its query heads' dkp, dvp in order (grid: x entries of 128, y B*H_kv).
__global__ void k_tc_head_kv(const float *dkp, const float *dvp, int H, int Hkv, size_t n, float *dk, float *dv) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x, kvs = blockIdx.y;
    if (e >= n) return;
    const int rep = H / Hkv;
    const size_t h0 = kvs / Hkv * H + kvs % Hkv * rep;
    float x = 0.0f, y = 0.0f;
    for (int r = 0; r < rep; r++) x += dkp[(h0 + r) * n + e], y += dvp[(h0 + r) * n + e];
    dk[kvs * n + e] += x;
    dv[kvs * n + e] += y;
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
#include "attn/mta_cuda_fa_conv.cuh"
#include "attn/mta_cuda_fa_conv_bwd.cuh"
#include "attn/mta_cuda_fa_post.cuh"

// A block's heads for a config, with the largest tile whose kernels fit in smem_max bytes of shared
// memory (the device's opt-in limit per block; tm 0: none does, as for many heads of a mixing group
// at large d; the float32 path runs those).
tc_heads tc_heads_of(const mta_config *c, const mta_params *p, size_t smem_max) {
    tc_heads hd;
    hd.mix = c->pre_head_mix != 0, hd.ch = c->post_ch;
    hd.G = hd.mix ? c->H : c->post_ch;
    hd.nw = (hd.mix ? hd.G * hd.G : 0) + (hd.ch ? hd.G * hd.ch : 0);
    hd.w1 = p ? p->w_pre_head : NULL, hd.w2 = p ? p->w_post_head : NULL;
    for (hd.tm = TC_M; hd.tm >= 16; hd.tm /= 2) {
        tc_hsmem sm;
        int fits = 1;
        for (int kind = TC_FWD; kind <= TC_DQ; kind++)
            fits &= tc_hsmem_carve(kind, hd, tc_dp(c->d), NULL, &sm) <= smem_max;
        if (fits) return hd;
    }
    hd.tm = 0;
    return hd;
}

// The uses the path computes (mta_internal.h; an allow-list): one of the pre-softmax convolution,
// the post-softmax convolution, and the head steps (mixing, head convolution). Whether their tiles
// fit on the device is tc_fits'.
int tc_computes(const mta_config *c, mta_use u) {
    switch (u) {
    case MTA_USE_PRE_CONV: return !c->pre_head_mix && !c->post_ch && !c->post_cq;
    case MTA_USE_POST_CONV: return !c->pre_cq && !c->pre_head_mix && !c->post_ch;
    case MTA_USE_PRE_HEAD_MIX: case MTA_USE_POST_HEAD_CONV: return !c->pre_cq;
    case MTA_USE_GROUP_NORM: case MTA_USE_DEPTH_SCALE: case MTA_USE_GATE: case MTA_USE_DROPOUT:
    case MTA_USE_GQA: case MTA_USE_BF16: case MTA_USE_DOCUMENTS: case MTA_USE_BF16_STORAGE: return 1;
    default: return 0;
    }
}

// 1 when the kernels a config launches fit in smem_max bytes of shared memory per block (the
// device's opt-in limit: 227 KB on an H100, 163 KB on an A100): the convolution's with their halos,
// the head steps' with a tile of their group's heads (tc_heads_of), or the plain ones.
int tc_fits(const mta_config *c, size_t smem_max) {
    if (c->pre_head_mix || c->post_ch) return tc_heads_of(c, NULL, smem_max).tm > 0;
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

// The path's workspace, in the backend's one allocation (cuda_state.mem).
struct tc_ws {
    bf16 *q, *k, *v, *dO;  // rounded, padded (tc_args)
    float *o, *go;         // O before norm and gate; dO before it (with a norm or gate)
    float *lse, *D;
    int *start;            // document starts (B, T)
    double *acc;           // norm and gate gradients per (batch, head, chunk of rows): 2d+1 each
    float *dwp;            // the conv kernel gradient's partial sums per (batch, head, query tile)
    float *dkp, *dvp;      // head steps: each query head's dK, dV (B*H, T, d)
    float *hwp;            // head steps: the head kernels' partial sums per (batch, group, query tile)
};

// Carves w from mem (NULL: counts) and returns the bytes, for a device with smem_max bytes of
// shared memory per block (the head steps' tiles: tc_heads_of).
size_t tc_carve(const mta_config *c, size_t smem_max, void *mem, tc_ws *w) {
    const size_t BH = (size_t)c->B * c->H, BHkv = (size_t)c->B * mta_kv_heads(c), T = c->T, d = c->d;
    const size_t padded = (size_t)tc_tp(c->T) * tc_dp(c->d);
    carver cv = {(unsigned char *)mem, 0};
    tc_ws x;
    x.acc = cv.take<double>(BH * ng_slots(c->T) * (2 * d + 1));
    x.q = cv.take<bf16>(BH * padded), x.k = cv.take<bf16>(BHkv * padded), x.v = cv.take<bf16>(BHkv * padded);
    x.dO = cv.take<bf16>(BH * padded);
    x.o = cv.take<float>(BH * T * d);
    x.go = c->group_norm || c->gate ? cv.take<float>(BH * T * d) : NULL;
    x.lse = cv.take<float>(BH * T), x.D = cv.take<float>(BH * T);
    x.start = cv.take<int>((size_t)c->B * T);
    const size_t taps = (size_t)c->pre_cq * c->pre_ck + (size_t)c->post_cq * c->post_ck;  // one of them is on
    x.dwp = taps ? cv.take<float>(BH * (tc_tp(c->T) / TC_M) * taps) : NULL;
    x.dkp = x.dvp = x.hwp = NULL;
    if (c->pre_head_mix || c->post_ch) {
        const tc_heads hd = tc_heads_of(c, NULL, smem_max);
        x.dkp = cv.take<float>(BH * T * d), x.dvp = cv.take<float>(BH * T * d);
        // query tiles of tm rows (k_tc_head_dq) or of FH_M <= tm (k_fa_head_dq)
        x.hwp = cv.take<float>((size_t)c->B * (c->H / hd.G) * ((c->T + FH_M - 1) / FH_M) * hd.nw);
    }
    if (w) *w = x;
    return cv.at;
}
size_t tc_bytes(const mta_config *c, size_t smem_max) { return tc_carve(c, smem_max, NULL, NULL); }

// The kernels' common arguments for a call.
tc_args tc_args_of(const call *cl, const tc_ws *w, const int *ds) {
    const mta_config *c = cl->c;
    tc_args a;
    a.q = w->q, a.k = w->k, a.v = w->v, a.dO = w->dO;
    a.o = w->o, a.lse = w->lse, a.D = w->D;
    a.ds = ds;
    a.H = c->H, a.Hkv = mta_kv_heads(c), a.T = c->T, a.Tp = tc_tp(c->T), a.d = c->d, a.dp = tc_dp(c->d);
    a.cq = c->pre_cq, a.ck = c->pre_ck, a.pcq = c->post_cq, a.pck = c->post_ck;
    a.scale = cl->scale;
    a.seed = cl->ctx->seed, a.drop_thr = cl->drop_thr, a.drop_scale = cl->drop_scale;
    return a;
}

// The caller's tensor x as bfloat16 when the config stores its tensors so (mta_config.dtype), else NULL.
const bf16 *tc_stored16(const mta_config *c, const float *x) {
    return c->dtype == MTA_DTYPE_BF16 ? (const bf16 *)(const void *)x : NULL;
}

// q, k, v rounded (copied, with bfloat16 storage) into the workspace.
void tc_round_inputs(const call *cl, const tc_ws *w) {
    const mta_config *c = cl->c;
    const int Tp = tc_tp(c->T), dp = tc_dp(c->d), BH = c->B * c->H, BHkv = c->B * mta_kv_heads(c);
    const unsigned x = (unsigned)((Tp * dp + 127) / 128);
    const float *src[3] = {cl->q, cl->k, cl->v};
    bf16 *dst[3] = {w->q, w->k, w->v};
    for (int t = 0; t < 3; t++)
        MTA_LAUNCH(k_tc_round, dim3(x, (unsigned)(t ? BHkv : BH)), 128, 0, cl->s)(
            src[t], tc_stored16(c, src[t]), dst[t], c->T, Tp, c->d, dp);
}

mta_status tc_forward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p, float *out) {
    call cl;
    mta_status s = begin(ctx, &cl, q, k, v, p);
    if (s) return s;
    const mta_config *c = cl.c;
    cuda_state *st = cl.st;
    tc_ws w;
    tc_carve(c, st->smem_max, st->mem, &w);
    st->docs = ctx->doc != NULL;
    if (st->docs) MTA_LAUNCH(k_doc_starts, (c->B + 127) / 128, 128, 0, cl.s)(ctx->doc, c->B, c->T, w.start);
    tc_round_inputs(&cl, &w);
    const tc_args a = tc_args_of(&cl, &w, st->docs ? w.start : NULL);
    if (c->pre_head_mix || c->post_ch) {
        const tc_heads hd = tc_heads_of(c, p, st->smem_max);
        if (hd.G <= FH_MAXG && fh_smem_bytes(hd.G, a.dp) <= st->smem_max) {
            fh_forward(&cl, a, hd, c->B, out);
        } else {
            tc_hsmem hs;
            const size_t sm = tc_hsmem_carve(TC_FWD, hd, a.dp, NULL, &hs);
            tc_smem_optin(k_tc_head_forward, sm);
            const dim3 hgrid((unsigned)((c->T + hd.tm - 1) / hd.tm), (unsigned)(c->B * c->H / hd.G));
            MTA_LAUNCH(k_tc_head_forward, hgrid, TC_THREADS, sm, cl.s)(a, hd, out);
        }
    } else if (c->pre_cq) {
        fa_conv_forward(&cl, a, c->B * c->H, p->w_pre, out);
    } else if (c->post_cq) {
        fa_post_forward(&cl, a, c->B * c->H, p->w_post, out);
    } else {
        fa_forward(&cl, a, c->B * c->H, out);
    }
    if (c->group_norm || c->gate)
        MTA_LAUNCH(k_normgate, dim3((unsigned)c->T, (unsigned)(c->B * c->H)), red_threads(c->d, 128), 0, cl.s)(
            out, (size_t)c->T * c->d, normgate_of(c, p));
    return finish(&cl, "tensor-core forward");
}

// The backward's kernels with head steps: dQ (and D with step 6) before dK, dV, which read D.
void tc_head_backward(const call *cl, const tc_ws *w, const tc_args &a, const mta_params *p, float *dq, float *dk,
                      float *dv, const mta_grads *g) {
    const mta_config *c = cl->c;
    const tc_heads hd = tc_heads_of(c, p, cl->st->smem_max);
    const int groups = c->H / hd.G, fa = hd.G <= FH_MAXG && fhq_smem_bytes(a.dp) <= cl->st->smem_max;
    const int tiles = (c->T + (fa ? FH_M : hd.tm) - 1) / (fa ? FH_M : hd.tm);  // query tiles (hwp's)
    if (fa) {  // k_fa_head_dkdv's shared memory is k_fa_head_dq's less the scratch: it fits too
        const size_t smq = fhq_smem_bytes(a.dp), smk = fhk_smem_bytes(a.dp);
        const unsigned y = (unsigned)(c->B * groups);  // query tiles of FH_M (hwp's), key tiles of FH_N
        tc_smem_optin(k_fa_head_dq, smq);
        tc_smem_optin(k_fa_head_dkdv, smk);
        MTA_LAUNCH(k_fa_head_dq, dim3((unsigned)tiles, y), TC_THREADS, smq, cl->s)(a, hd, dq, w->hwp);
        MTA_LAUNCH(k_fa_head_dkdv, dim3((unsigned)((c->T + FH_N - 1) / FH_N), y), TC_THREADS, smk, cl->s)(
            a, hd, w->dkp, w->dvp);
    } else {
        tc_hsmem sm;
        const size_t sm_q = tc_hsmem_carve(TC_DQ, hd, a.dp, NULL, &sm);
        const size_t sm_kv = tc_hsmem_carve(TC_DKDV, hd, a.dp, NULL, &sm);
        const dim3 grid((unsigned)tiles, (unsigned)(c->B * groups));
        tc_smem_optin(k_tc_head_dq, sm_q);
        tc_smem_optin(k_tc_head_dkdv, sm_kv);
        MTA_LAUNCH(k_tc_head_dq, grid, TC_THREADS, sm_q, cl->s)(a, hd, dq, w->hwp);
        MTA_LAUNCH(k_tc_head_dkdv, grid, TC_THREADS, sm_kv, cl->s)(a, hd, w->dkp, w->dvp);
    }
    const size_t n = (size_t)c->T * c->d;
    MTA_LAUNCH(k_tc_head_kv, dim3((unsigned)((n + 127) / 128), (unsigned)(c->B * a.Hkv)), 128, 0, cl->s)(
        w->dkp, w->dvp, c->H, a.Hkv, n, dk, dv);
    if (g->w_pre_head || g->w_post_head)
        MTA_LAUNCH(k_tc_head_wgrad, dim3((unsigned)((hd.nw + 127) / 128), (unsigned)groups), 128, 0, cl->s)(
            w->hwp, c->B, groups, tiles, hd, g->w_pre_head, g->w_post_head);
}

mta_status tc_backward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                       const float *dout, float *dq, float *dk, float *dv, const mta_grads *g) {
    call cl;
    mta_status s = begin(ctx, &cl, q, k, v, p);
    if (s) return s;
    const mta_config *c = cl.c;
    const int B = c->B, H = c->H, T = c->T, d = c->d, BH = B * H;
    tc_ws w;
    tc_carve(c, cl.st->smem_max, cl.st->mem, &w);
    tc_round_inputs(&cl, &w);
    const tc_args a = tc_args_of(&cl, &w, cl.st->docs ? w.start : NULL);
    // dO through the gate and norm (their parameter gradients summed per head and chunk of rows)
    const float *go = dout;
    const int slots = ng_slots(T);
    if (c->group_norm || c->gate) {
        const cudaError_t e = cudaMemsetAsync(w.acc, 0, (size_t)BH * slots * (2 * d + 1) * sizeof(double), cl.s);
        if (e != cudaSuccess) return cuda_fail(ctx, e, "the backward's clearing of its accumulators");
        normgate_backward(&cl, w.o, dout, w.go, (size_t)T * d, (size_t)T * d, T, T, normgate_of(c, p), w.acc);
        go = w.go;
    }
    // bfloat16 storage: dout as it is, unless the norm's backward made go (its caller widened dout for it)
    const bf16 *go16 = go == dout ? tc_stored16(c, dout) : NULL;
    MTA_LAUNCH(k_tc_prep, dim3((unsigned)((a.Tp + 127) / 128), (unsigned)BH), 128, 0, cl.s)(a, go, go16, w.dO);
    if (c->pre_head_mix || c->post_ch) {
        tc_head_backward(&cl, &w, a, p, dq, dk, dv, g);
    } else if (c->pre_cq || c->post_cq) {  // one convolution: its kernel gradient from the partials
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
