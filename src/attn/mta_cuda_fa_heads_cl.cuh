// mta_cuda_fa_heads_cl.cuh: the head steps' forward for groups of G <= 16 heads on thread block
// clusters (sm_90, attn/cluster_ptx.cuh): k_fa_head_cl_forward. Included by mta_cuda_tc.cuh after
// the head kernels' headers (mta_cuda_fa_heads.cuh: fh_s1_at, fh_wval; mta_cuda_fa2.cuh: fa_xyT,
// fa_acc, fa_load_rows).
//
// k_fa_head_forward has one block hold the 16 query rows (FH_M) of every head of a group: per key
// tile it reloads q and k of each head pair and adds O of every head into a.o in global memory.
// Here a cluster of C = ceil(G / 8) blocks (FHC_HB = 8 heads a block, 8 warps) shares the query
// tile: block rank r owns heads 8r..8r+7 (warp w head 8r + w, where it exists), keeps their q in
// shared memory for the whole walk and their O in registers (warp w's C fragments: 16 rows by
// dp), and reads only their k and v (cp.async double-buffered; a stage is the 8 heads' k, or v, of
// a key tile). What the head mixing needs of the other heads comes through distributed shared
// memory. Per key tile of FHC_N = 16 keys:
//   S1[h] = scale q_h k_h^T (warp w, head 8r + w), masked, split into hi + lo, into the block's
//   [entry][head] arrays (fh_s1_at); then the block's 8 heads of each entry, one 16-byte half of
//   it, into the other blocks' same arrays (cl_st16, a store per entry; padding heads go as the
//   zeros they are); cl_sync();
//   S2 = S1 W1^T for the block's own 8 output heads only (m16n8k16, N = 8);
//   the online softmax of S2 (warp w: query rows 2w, 2w + 1);
//   without step 6, P2 = P with dropout into shared memory as [head][query][key] and alpha per row;
//   with step 6 (the second pass), P (hi + lo) of the own heads from the C fragments into every
//   block's P arrays (cl_st4), cl_sync(), P2 = P W2' for the own heads;
//   O_h = alpha O_h + P2_h v_h in warp w's registers; out, a.o and a.lse written once at the end.
// The numerics are k_fa_head_forward's: S1, W1, P, W2 split into hi + lo bf16 with three MMAs,
// P2 rounded once before P2 v, the same masking, dropout (tc_drop), document starts, log-sum-exp
// (of S2 with step 6, two passes), so the backward kernels read the same lse.
//
// Why these sizes: a warp per head gives every warp one S1 and one O (two heads a warp would
// double O's registers, past 255 at d = 128). 8 heads a block make C = 2 for 16 heads: every block
// sends its entries to one other, a third of the bytes of 4 blocks of 4 heads, each sending to 3.
// A block of 8 warps runs alone on an H100 SM (its registers, and at d = 128 its shared memory,
// are over half the SM's; tests/tools/check_sass.py's ONE_BLOCK), which still has 8 warps. A tile
// has 16 keys, not FH_N's 32: the S1 arrays are double-buffered and step 6 adds P's, 3 x 2 x 16 KB
// at 32 keys; at 16 they are half. The query tile stays FH_M rows: O of a head in registers is 16
// rows a warp.
//
// Synchronisation. The S1 arrays are double-buffered by the parity of the exchange (counted, so
// that the parity alternates across the passes too), so one cl_sync() per exchange suffices:
// exchange n writes buffer n % 2 of every block only after its block waited on exchange n-1's
// cl_sync(), at which every block arrives only after its mixing of exchange n-2, the last reads of
// that buffer. The P arrays need one buffer: a tile writes them after its S1 cl_sync(), at which
// every block arrives only after reading the previous tile's P. A cl_sync() after the setup
// orders each block's zeroing of its arrays (the padding heads are read, never written) before
// the others' writes; the kernel ends with cl_arrive_relaxed(); cl_wait() (cluster_ptx.cuh).
#ifndef MTAC_ATTN_MTA_CUDA_FA_HEADS_CL_CUH
#define MTAC_ATTN_MTA_CUDA_FA_HEADS_CL_CUH

#include "attn/cluster_ptx.cuh"

const int FHC_N = 16, FHC_HB = 8;    // keys of a tile; heads (and warps) of a block
const int FHC_THREADS = 32 * FHC_HB;
const int FHC_QW = FH_M / FHC_HB;    // query rows of a warp in the softmax
// fhc_mix's N is one n-tile of 8 heads; fhc_share's cl_st16 sends a block's heads as one 16-byte
// half of an entry (fh_s1_at<1>: heads 8x..8x+7 of an entry are 16 contiguous, aligned bytes).
static_assert(FHC_HB == 8 && FH_M % FHC_HB == 0, "8 heads a block: an n-tile, half an entry");
const int FHC_E = FH_M * FHC_N;      // entries of a tile
const int FHC_PLD = FHC_N + 8;       // P2's leading dimension: ldmatrix rows 48 bytes apart, distinct banks
const int FHC_WLD = 16 + 8;          // a mixing block's: 8 own out heads of 16 in heads
const int FHC_WSZ = 8 * FHC_WLD;

// The cluster's blocks for a group of G heads.
__host__ __device__ inline int fhc_cs(int G) { return (G + FHC_HB - 1) / FHC_HB; }

// The shared arrays of a block (ch: step 6 on).
struct fhc_smem {
    bf16 *q, *stage;  // the own heads' q (8, FH_M, fa_ld); two stage buffers of their k or v (8, FHC_N, fa_ld)
    bf16 *s1;         // S1 [parity][hi, lo]: FHC_E entries of 16 heads each (fh_s1_at; fhc_s1)
    bf16 *p[2];       // step 6: P hi, lo, as S1
    bf16 *p2;         // (8, FH_M, FHC_PLD): P2 of the own heads
    bf16 *w;          // the mixing blocks FHC_W1, FHC_W2 (fhc_weights), hi and lo FHC_WSZ each
    float *al, *ls;   // (8, FH_M): alpha of a tile; the sums at the end
};
__host__ __device__ inline size_t fhc_carve(int ch, int dp, unsigned char *base, fhc_smem *s) {
    const size_t rows = (size_t)FHC_HB * fa_ld(dp), e = (size_t)FHC_E * 16;
    carver cv = {base, 0};
    s->q = cv.take<bf16>(rows * FH_M), s->stage = cv.take<bf16>(2 * rows * FHC_N);
    s->s1 = cv.take<bf16>(4 * e);
    s->p[0] = cv.take<bf16>(ch ? e : 0), s->p[1] = cv.take<bf16>(ch ? e : 0);
    s->p2 = cv.take<bf16>((size_t)FHC_HB * FH_M * FHC_PLD);
    s->w = cv.take<bf16>(4 * (size_t)FHC_WSZ);
    s->al = cv.take<float>(FHC_HB * FH_M), s->ls = cv.take<float>(FHC_HB * FH_M);
    return cv.at;
}
// S1 of exchange parity par, part x (0 hi, 1 lo).
__device__ __forceinline__ bf16 *fhc_s1(const fhc_smem &s, int par, int x) { return s.s1 + (2 * par + x) * FHC_E * 16; }
size_t fhc_smem_bytes(int ch, int dp) {
    fhc_smem s;
    return fhc_carve(ch, dp, NULL, &s);
}

// 1 when a cluster kernel runs hd's groups: G <= 16 (fh_nq 1), on a device and build that launch
// clusters (clusters: the backend's cuda_state.clusters), the least shared memory it can run with
// (least) fitting.
int fh_cl_takes(const tc_heads &hd, int clusters, size_t least, size_t smem_max) {
    return hd.nq == 1 && clusters && least <= smem_max;
}
// The stage buffers a launch of a cluster kernel gets whose shared memory with n of them is
// bytes(n, dp) (fhd_smem_bytes, fqc_smem_bytes): 2 when they fit, else 1; 0 when not even one does.
int fh_cl_nbuf(size_t (*bytes)(int, int), int dp, size_t smem_max) {
    return bytes(2, dp) <= smem_max ? 2 : bytes(1, dp) <= smem_max ? 1 : 0;
}

// A block's arrays and per-lane state.
template <int DP> struct fhc_block {
    fhc_smem s;
    int b, bh0, i0, r, C, x;  // batch, the group's first (batch, head), query tile, rank, cluster size, exchanges
    int st[FHC_QW], st2[2];   // document starts of rows FHC_QW w + qq (statistics) and g, g + 8 (S1, O)
    float m[FHC_QW][2], l[FHC_QW][2];  // per row qq and slot hh (own head 2t + hh): max (then lse), sum
    mma_c o[DP / 8];          // O of head 8r + w, rows g, g + 8
};

// The mixing blocks of the cluster kernels, each [n][k] for own head 8r + n (n < 8) and every head
// k < 16 (fh_wval's entries; 0 past G), as their MMAs read it (fhc_mix): FHC_W1, W1[n][k] (S2 = S1
// W1^T); FHC_W1T, W1[k][n] (dS1 = dS2 W1); FHC_W2, W2'(k, n) (P2 = P W2'); FHC_W2T, W2'(n, k) (dP =
// dP2 W2'^T). The code is 2 m + transposed, m fh_wval's matrix (0 W1, 1 W2'^T).
enum { FHC_W1, FHC_W1T, FHC_W2, FHC_W2T };
// The codes of B..., 2 bits each, the first lowest.
template <int... B> __host__ __device__ constexpr unsigned fhc_codes(void) {
    const int list[] = {B...};
    unsigned c = 0;
    for (int b = 0; b < (int)sizeof...(B); b++) c |= (unsigned)list[b] << 2 * b;
    return c;
}
// The blocks B..., in that order, of rank r's own out heads (group at bh0) into w, each split into
// hi and lo: block b's hi at 2 b FHC_WSZ, lo FHC_WSZ after.
template <int... B>
__device__ __forceinline__ void fhc_weights(const tc_args &a, const tc_heads &hd, int bh0, int r, bf16 *w) {
    constexpr unsigned codes = fhc_codes<B...>();
    for (int e = threadIdx.x; e < (int)sizeof...(B) * 8 * 16; e += FHC_THREADS) {
        const int b = e / 128, code = codes >> 2 * b & 3, tr = code % 2;
        const int n = e % 128 / 16, kk = e % 16, h = FHC_HB * r + n;
        const float x = fh_wval(a, hd, bh0 % a.H, code / 2, tr ? kk : h, tr ? h : kk);
        bf16_split(x, w[2 * b * FHC_WSZ + n * FHC_WLD + kk], w[(2 * b + 1) * FHC_WSZ + n * FHC_WLD + kk]);
    }
}

// y (one n-tile: own heads 2t, 2t + 1 at entries g, g + 8) = x m for the 16 entries from e0, x =
// xh + xl (AL 0: xh only, xl not read) in fh_s1_at arrays (A by ldmatrix, as fh_mix), m a block of
// fhc_weights (lo at m + FHC_WSZ; B n-major, as fh_xyT1's y): three MMAs (AL 0:
// two), as fh_mma3.
template <int AL = 1>
__device__ __forceinline__ void fhc_mix(const bf16 *xh, const bf16 *xl, const bf16 *m, int e0, mma_c &y) {
    const int l = threadIdx.x % 32, at = fh_s1_at<1>(e0 + l % 16, 8 * (l / 16));
    const bf16 *ml = m + (l % 8) * FHC_WLD + 8 * (l / 8 % 2);
    mma_a ah, al = {};
    mma_b bh, bl;
    ldsm_x4(ah.x, xh + at);
    if (AL) ldsm_x4(al.x, xl + at);
    ldsm_x2(bh.x, ml);
    ldsm_x2(bl.x, ml + FHC_WSZ);
    y = mma_c{};
    mma_16816(y, ah, bh);
    if (AL) mma_16816(y, al, bh);
    mma_16816(y, ah, bl);
}

// S1 of warp w's head 8r + w for key tile j0 (its k rows in the stage buf): scale q k^T, 0 where
// the row does not see the key, split into the block's arrays hi, lo.
template <int DP>
__device__ __forceinline__ void fhc_scores(const tc_args &a, const tc_heads &hd, const fhc_block<DP> &k, int j0,
                                           const bf16 *buf, bf16 *hi, bf16 *lo) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4, h = FHC_HB * k.r + w;
    const int ld = fa_ld(a.dp);
    if (h >= hd.G) return;
    mma_c c[2] = {};
    fa_xyT(c, k.s.q + w * FH_M * ld, buf + w * FHC_N * ld, ld, a.dp);
    FA_UNROLL
    for (int n = 0; n < 2; n++)
        FA_UNROLL
        for (int x = 0; x < 4; x++) {
            const int r = g + 8 * (x / 2), key = 8 * n + 2 * t + x % 2;
            const float v = fa_ok(a.T, k.i0 + r, k.st2[x / 2], j0 + key) ? c[n].x[x] * a.scale : 0.0f;
            const int at = fh_s1_at<1>(r * FHC_N + key, h);
            bf16_split(v, hi[at], lo[at]);
        }
}

// The block's heads of every entry of its arrays hi, lo into the same arrays of the cluster's
// other blocks: their 16-byte half of the entry a store (heads past G as their zeros).
struct alignas(16) fhc_x4 {
    uint32_t x[4];
};
template <int DP> __device__ __forceinline__ void fhc_share(const fhc_block<DP> &k, bf16 *hi, bf16 *lo) {
    for (int e = threadIdx.x; e < 2 * FHC_E; e += FHC_THREADS) {
        const bf16 *src = (e / FHC_E ? lo : hi) + fh_s1_at<1>(e % FHC_E, FHC_HB * k.r);
        const fhc_x4 v = *(const fhc_x4 *)src;
        for (int q = 1; q < k.C; q++) cl_st16(cl_map(src, (k.r + q) % k.C), v.x[0], v.x[1], v.x[2], v.x[3]);
    }
}

// The online statistics of warp w's query row FHC_QW w + qq from its S2 y (keys g, g + 8 of own heads
// 2t + hh): per slot the new max, alpha and sum; y becomes P = exp(S2 - m) (0 where masked).
template <int DP>
__device__ __forceinline__ void fhc_online(const tc_args &a, fhc_block<DP> &k, int qq, int j0, mma_c &y, float alpha[2]) {
    const int i = k.i0 + FHC_QW * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4;
    FA_UNROLL
    for (int hh = 0; hh < 2; hh++) {
        float mx = k.m[qq][hh], sum = 0.0f;
        FA_UNROLL
        for (int r = 0; r < 2; r++)
            if (fa_ok(a.T, i, k.st[qq], j0 + g + 8 * r)) mx = fmaxf(mx, y.x[2 * r + hh]);
        mx = fa_row_reduce<4, 16>(mx, 0);
        alpha[hh] = mx == -INFINITY ? 1.0f : expf(k.m[qq][hh] - mx);
        FA_UNROLL
        for (int r = 0; r < 2; r++) {
            float &v = y.x[2 * r + hh];
            v = fa_ok(a.T, i, k.st[qq], j0 + g + 8 * r) ? expf(v - mx) : 0.0f;
            sum += v;
        }
        k.l[qq][hh] = k.l[qq][hh] * alpha[hh] + fa_row_reduce<4, 16>(sum, 1), k.m[qq][hh] = mx;
    }
}

// Step 6's P of warp w's row FHC_QW w + qq (y: S2 as fhc_online's; m the final lse), split into hi +
// lo, into the P arrays of every block of the cluster: lane t holds heads 2t, 2t + 1 of an entry
// (cl_st4: the 4 lanes of an entry write its block's 16 contiguous bytes).
template <int DP>
__device__ __forceinline__ void fhc_put_p(const tc_args &a, const tc_heads &hd, const fhc_block<DP> &k, int qq, int j0,
                                          const mma_c &y) {
    const int q = FHC_QW * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4, h = FHC_HB * k.r + 2 * (threadIdx.x % 4);
    if (h >= hd.G) return;
    FA_UNROLL
    for (int r = 0; r < 2; r++) {
        float p[2];
        FA_UNROLL
        for (int hh = 0; hh < 2; hh++)
            p[hh] = fa_ok(a.T, k.i0 + q, k.st[qq], j0 + g + 8 * r) ? expf(y.x[2 * r + hh] - k.m[qq][hh]) : 0.0f;
        uint32_t hi, lo;
        bf16x2_split(p[0], p[1], hi, lo);
        const int at = fh_s1_at<1>(q * FHC_N + g + 8 * r, h);
        uint32_t *ph = (uint32_t *)(k.s.p[0] + at), *pl = (uint32_t *)(k.s.p[1] + at);
        *ph = hi, *pl = lo;
        for (int c = 1; c < k.C; c++) {
            cl_st4(cl_map(ph, (k.r + c) % k.C), hi);
            cl_st4(cl_map(pl, (k.r + c) % k.C), lo);
        }
    }
}

// P2 of warp w's row FHC_QW w + qq (y: keys g, g + 8 of own heads 2t + hh) with dropout, to bf16 in p2
// (own heads < G).
template <int DP>
__device__ __forceinline__ void fhc_store_p2(const tc_args &a, const tc_heads &hd, const fhc_block<DP> &k, int qq,
                                             int j0, const mma_c &y) {
    const int q = FHC_QW * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int hh = 0; hh < 2; hh++)
        FA_UNROLL
        for (int r = 0; r < 2; r++) {
            const int lh = 2 * t + hh, h = FHC_HB * k.r + lh, key = g + 8 * r;
            if (h >= hd.G) continue;
            const float v = y.x[2 * r + hh];  // 0 where the row does not see the key
            const float f = v != 0.0f ? tc_drop(a, k.bh0 + h, k.i0 + q, j0 + key) : 0.0f;
            k.s.p2[(lh * FH_M + q) * FHC_PLD + key] = __float2bfloat16_rn(v * f);
        }
}

// The softmax and the head convolution of the tile's S1 (exchange parity par), warp w's rows:
// with step 6 in the statistics pass only the statistics; else P2 into p2 and (without step 6)
// alpha into al. With step 6 P goes to every block first (fhc_put_p), then P2 = P W2'.
template <int DP>
__device__ __forceinline__ void fhc_softmax(const tc_args &a, const tc_heads &hd, fhc_block<DP> &k, int stats, int j0,
                                            int par) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4, p6 = hd.ch && !stats;
    FA_UNROLL
    for (int qq = 0; qq < FHC_QW; qq++) {
        mma_c y;
        fhc_mix(fhc_s1(k.s, par, 0), fhc_s1(k.s, par, 1), k.s.w, (FHC_QW * w + qq) * FHC_N, y);
        if (p6) {
            fhc_put_p(a, hd, k, qq, j0, y);
            continue;
        }
        float alpha[2];
        fhc_online(a, k, qq, j0, y, alpha);
        if (stats) continue;
        fhc_store_p2(a, hd, k, qq, j0, y);
        FA_UNROLL
        for (int hh = 0; hh < 2; hh++)
            if (g == 0) k.s.al[(2 * t + hh) * FH_M + FHC_QW * w + qq] = alpha[hh];
    }
    if (!p6) return;
    cl_sync();  // every block's P of the tile is in place
    FA_UNROLL
    for (int qq = 0; qq < FHC_QW; qq++) {
        mma_c y;
        fhc_mix(k.s.p[0], k.s.p[1], k.s.w + 2 * FHC_WSZ, (FHC_QW * w + qq) * FHC_N, y);
        fhc_store_p2(a, hd, k, qq, j0, y);
    }
}

// The k stage of key tile j0: S1 of the own heads into every block's arrays of this exchange's
// parity, then the softmax (fhc_softmax).
template <int DP>
__device__ __forceinline__ void fhc_tile(const tc_args &a, const tc_heads &hd, fhc_block<DP> &k, int stats, int j0,
                                         const bf16 *buf) {
    const int par = k.x++ & 1;
    bf16 *hi = fhc_s1(k.s, par, 0), *lo = fhc_s1(k.s, par, 1);
    fhc_scores(a, hd, k, j0, buf, hi, lo);
    __syncthreads();  // the block's heads of each entry are in place
    fhc_share(k, hi, lo);
    cl_sync();  // and every block's
    fhc_softmax(a, hd, k, stats, j0, par);
}

// The v stage: O_h = alpha O_h + P2_h v_h for warp w's head (alpha 1 with step 6; v's rows in buf).
template <int DP>
__device__ __forceinline__ void fhc_pv(const tc_args &a, const tc_heads &hd, fhc_block<DP> &k, const bf16 *buf) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, g = l / 4, ld = fa_ld(a.dp);
    if (FHC_HB * k.r + w >= hd.G) return;
    if (!hd.ch) {
        const float a0 = k.s.al[w * FH_M + g], a1 = k.s.al[w * FH_M + g + 8];
        FA_UNROLL
        for (int n = 0; n < DP / 8; n++) k.o[n].x[0] *= a0, k.o[n].x[1] *= a0, k.o[n].x[2] *= a1, k.o[n].x[3] *= a1;
    }
    mma_a pa;
    ldsm_x4(pa.x, k.s.p2 + (w * FH_M + l % 16) * FHC_PLD + 8 * (l / 16));
    fa_acc<DP>(k.o, pa, buf + w * FHC_N * ld, ld, a.dp);
}

// The block's setup: shared arrays, rank, query tile (the clusters' last first), mixing blocks,
// row state, zeroed S1 and P arrays and O; q's copies issued (committed with the first stage's).
template <int DP>
__device__ __forceinline__ void fhc_setup(const tc_args &a, const tc_heads &hd, unsigned char *sh, fhc_block<DP> &k) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, ld = fa_ld(a.dp);
    fhc_carve(hd.ch, a.dp, sh, &k.s);
    k.r = (int)cl_rank(), k.C = (int)cl_size(), k.x = 0;
    k.bh0 = blockIdx.y * hd.G, k.b = k.bh0 / a.H, k.i0 = (gridDim.x / k.C - 1 - blockIdx.x / k.C) * FH_M;
    fhc_weights<FHC_W1, FHC_W2>(a, hd, k.bh0, k.r, k.s.w);
    FA_UNROLL
    for (int qq = 0; qq < FHC_QW; qq++) {
        const int i = k.i0 + FHC_QW * w + qq;
        k.st[qq] = i < a.T ? mta_row_start(a.ds, a.T, k.b, i) : 0;
        k.m[qq][0] = k.m[qq][1] = -INFINITY, k.l[qq][0] = k.l[qq][1] = 0.0f;
    }
    FA_UNROLL
    for (int r = 0; r < 2; r++) {
        const int i = k.i0 + g + 8 * r;
        k.st2[r] = i < a.T ? mta_row_start(a.ds, a.T, k.b, i) : 0;
    }
    fa_zero(k.o);
    const bf16 zero = __float2bfloat16_rn(0.0f);
    for (int e = threadIdx.x; e < FHC_E * 16; e += FHC_THREADS) {
        FA_UNROLL
        for (int x = 0; x < 4; x++) k.s.s1[x * FHC_E * 16 + e] = zero;
        if (hd.ch) k.s.p[0][e] = k.s.p[1][e] = zero;
    }
    for (int u = 0; u < FHC_HB && FHC_HB * k.r + u < hd.G; u++)
        fa_load_rows(k.s.q + u * FH_M * ld, a.q + (size_t)(k.bh0 + FHC_HB * k.r + u) * a.Tp * a.dp, k.i0, FH_M, a.T,
                     a.dp, FHC_THREADS);
}

// A stage of the walk: pass (0: statistics, with step 6), key tile j0, kind 0 (k) or 1 (v); the
// statistics pass has no v stages.
struct fhc_pos {
    int pass, j0, kind;
};
__device__ __forceinline__ fhc_pos fhc_next(fhc_pos p, int npass, int js, int last) {
    if (!p.kind && p.pass + 1 == npass) {
        p.kind = 1;
        return p;
    }
    p.kind = 0, p.j0 += FHC_N;
    if (p.j0 > last) p.j0 = js, p.pass++;
    return p;
}
// Issues stage p's copies into buf: the own heads' FHC_N rows of k or v from p.j0.
template <int DP>
__device__ __forceinline__ void fhc_stage_load(const tc_args &a, const tc_heads &hd, const fhc_block<DP> &k, fhc_pos p,
                                               bf16 *buf) {
    for (int u = 0; u < FHC_HB && FHC_HB * k.r + u < hd.G; u++) {
        const size_t slab = tc_kv_slab(a, k.bh0 + FHC_HB * k.r + u) * a.Tp * a.dp;
        fa_load_rows(buf + u * FHC_N * fa_ld(a.dp), (p.kind ? a.v : a.k) + slab, p.j0, FHC_N, a.T, a.dp, FHC_THREADS);
    }
}

// The end: each own head's row sums (1 with step 6) into ls and log-sum-exp into a.lse; then O /
// the sum of warp w's head into out and a.o.
template <int DP> __device__ __forceinline__ void fhc_finish(const tc_args &a, const tc_heads &hd, fhc_block<DP> &k, float *out) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int qq = 0; qq < FHC_QW; qq++)
        FA_UNROLL
        for (int hh = 0; hh < 2; hh++) {
            const int lh = 2 * t + hh, h = FHC_HB * k.r + lh, i = k.i0 + FHC_QW * w + qq;
            if (g || h >= hd.G) continue;
            k.s.ls[lh * FH_M + FHC_QW * w + qq] = hd.ch ? 1.0f : k.l[qq][hh];
            if (i < a.T) a.lse[(size_t)(k.bh0 + h) * a.T + i] = hd.ch ? k.m[qq][hh] : k.m[qq][hh] + logf(k.l[qq][hh]);
        }
    __syncthreads();
    if (FHC_HB * k.r + w >= hd.G) return;
    const size_t bh = (size_t)k.bh0 + FHC_HB * k.r + w;
    fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
        const int row = g + 8 * r, i = k.i0 + row;
        const size_t at = (bh * a.T + i) * a.d + c;
        if (i < a.T) out[at] = a.o[at] = k.o[n].x[x] / k.s.ls[w * FH_M + row];
    });
}

// The forward with head steps for G <= 16 heads on clusters of fhc_cs(G) blocks (grid: x the
// query tiles of FH_M rows times the cluster size, the last tile's cluster first; y B*H/G): as the
// header says; O (before norm and gate) to out and a.o, each row's log-sum-exp to a.lse.
template <int DP>
__global__ void __launch_bounds__(FHC_THREADS, 1) k_fa_head_cl_forward_t(tc_args a, tc_heads hd, float *out) {
    MTA_DYNAMIC_SHARED(unsigned char, sh);
    fhc_block<DP> k;
    fhc_setup(a, hd, sh, k);
    const int npass = hd.ch ? 2 : 1, last = (k.i0 + FH_M < a.T ? k.i0 + FH_M : a.T) - 1;
    const int js = mta_row_start(a.ds, a.T, k.b, k.i0) / FHC_N * FHC_N;
    const size_t sbuf = (size_t)FHC_HB * FHC_N * fa_ld(a.dp);
    fhc_pos cur = {0, js, 0};
    fhc_stage_load(a, hd, k, cur, k.s.stage);
    cp_async_commit();
    cl_sync();  // every block's arrays are zeroed before any block writes into them
    for (int n = 0; cur.pass < npass; n++) {
        const fhc_pos nx = fhc_next(cur, npass, js, last);
        if (nx.pass < npass) fhc_stage_load(a, hd, k, nx, k.s.stage + ((n + 1) & 1) * sbuf);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const bf16 *buf = k.s.stage + (n & 1) * sbuf;
        if (cur.kind) fhc_pv(a, hd, k, buf);
        else fhc_tile(a, hd, k, cur.pass + 1 < npass, cur.j0, buf);
        __syncthreads();  // before the next stage's copies overwrite this buffer
        if (nx.pass != cur.pass && nx.pass < npass) {  // the statistics are final: m becomes the log-sum-exp
            FA_UNROLL
            for (int qq = 0; qq < FHC_QW; qq++) k.m[qq][0] += logf(k.l[qq][0]), k.m[qq][1] += logf(k.l[qq][1]);
        }
        cur = nx;
    }
    fhc_finish(a, hd, k, out);
    cl_arrive_relaxed();  // other blocks may still write this block's arrays until all arrive
    cl_wait();
}

// The launch, at O's width DP for a.dp (the caller checks fh_cl_takes).
template <int DP> void fhc_forward_at(const call *cl, const tc_args &a, const tc_heads &hd, int B, float *out) {
    void (*const k_fa_head_cl_forward)(tc_args, tc_heads, float *) = k_fa_head_cl_forward_t<DP>;
    const size_t sm = fhc_smem_bytes(hd.ch, a.dp);
    const unsigned cs = (unsigned)fhc_cs(hd.G);
    tc_smem_optin(k_fa_head_cl_forward, sm);
    const dim3 grid((unsigned)((a.T + FH_M - 1) / FH_M) * cs, (unsigned)(B * a.H / hd.G));
    MTA_LAUNCH_CLUSTER(k_fa_head_cl_forward, grid, FHC_THREADS, sm, cl->s, cs)(a, hd, out);
}
void fh_cl_forward(const call *cl, const tc_args &a, const tc_heads &hd, int B, float *out) {
    if (a.dp <= 64) fhc_forward_at<64>(cl, a, hd, B, out);
    else fhc_forward_at<128>(cl, a, hd, B, out);
}

#endif
