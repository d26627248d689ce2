// mta_cuda_fa2.cuh: the tensor-core path's attention without convolution or head steps, as
// FlashAttention-2 computes it (docs/cuda.md, "Tensor-core path"): k_fa_forward, k_fa_dq and
// k_fa_dkdv (templates k_fa_*_t<DP>) on mma_ptx.cuh's primitives (mma.sync m16n8k16, ldmatrix, cp.async). Included by
// mta_cuda_tc.cuh, inside mta_cuda.cu's namespace, after tc_args, tc_last, tc_kv_slab, tc_drop and
// tc_smem_optin; mta_cuda.cu includes mma_ptx.cuh at file scope.
//
// A block has 4 warps and a tile of 64 rows (query rows in the forward and dQ, keys in dK/dV); warp
// w owns rows 16w..16w+15 and keeps its products in registers in mma's C layout (mma_ptx.cuh: lane
// 4g+t holds rows g and g+8, columns 2t and 2t+1 of each 8-column n-tile), so a row's statistics
// are reduced over the 4 lanes t of its group with __shfl_xor_sync. A score tile is computed in
// 16 x 16 chunks, two n-tiles each; a chunk's C fragments rounded to bf16 are, unchanged, the A
// fragment of the product that reads it (P V, dS K, P^T dO, dS^T Q: A's a[0..3] are rows g, g+8 at
// k 2t and 2t+8, the chunk's two n-tiles). dK/dV computes S^T = K Q^T and dP^T = V dO^T, whose
// chunks are P^T's and dS^T's in that layout, so no product goes through shared memory.
//
// Shared memory: bf16 tiles of 64 rows at leading dimension dp + 8, in the dynamic __shared__
// array. dp is a multiple of 16, so rows are an odd multiple of 16 bytes apart and the 8 rows of
// an 8x8 matrix that ldmatrix reads fall in 8 distinct 16-byte bank groups. Tiles are filled by
// cp.async (16 bytes a copy, rows past T zero-filled); the tiles a block walks (k, v in the
// forward and dQ; q, dO in dK/dV) are double-buffered: the next tile's copies are issued before
// the current tile is computed, and waited for (cp_async_wait<1>, then a barrier) after.
//
// Accumulators are mma_c arrays of DP/8 n-tiles, DP = 64 or 128 (a template parameter: registers
// need indices known at compile time); n-tiles past the padded width dp are skipped.
#ifndef MTAC_ATTN_MTA_CUDA_FA2_CUH
#define MTAC_ATTN_MTA_CUDA_FA2_CUH

#include "attn/mma_ptx.cuh"

// Loops over register arrays unrolled, so that their indices are known at compile time (g++, for the
// emulator, has no such pragma and needs none).
#ifdef MTAC_CUDA_EMU
#define FA_UNROLL
#else
#define FA_UNROLL _Pragma("unroll")
#endif

const int FA_PAD = 8;  // bf16 past each row of a shared tile
static_assert(TC_THREADS == 128 && TC_M == 64 && TC_N == 64, "4 warps of 16 rows; 4 chunks of 16 per tile");

__host__ __device__ inline int fa_ld(int dp) { return dp + FA_PAD; }
__host__ __device__ inline size_t fa_tile_bytes(int dp) { return (size_t)TC_M * fa_ld(dp) * sizeof(bf16); }

// dK/dV's per query row of a tile: log-sum-exp, D, document start (0 past T).
struct fa_rows {
    float lse[TC_M], D[TC_M];
    int start[TC_M];
};

// The shared bytes of a kernel (TC_FWD, TC_DKDV, TC_DQ) at padded width dp: the forward's q tile and
// two buffers of k, v; dQ's q and dO tiles and two buffers of k, v; dK/dV's k and v tiles, two
// buffers of q, dO and two of the rows' fa_rows.
size_t fa_smem_bytes(int kind, int dp) {
    const size_t tiles = kind == TC_FWD ? 5 : 6;
    return tiles * fa_tile_bytes(dp) + (kind == TC_DKDV ? 2 * sizeof(fa_rows) : 0);
}

// Issues the copies of rows [r0, r0 + n), columns [c0, c0 + w) of a padded (Tp, dp) slab into a
// shared tile at leading dimension ld (c0, w multiples of 8); rows outside [0, T) are zero-filled
// (not read); nt: the block's threads. fa_load_rows: every column, at fa_ld(dp); fa_load: a tile's 64 rows.
__device__ __forceinline__ void fa_load_cols(bf16 *tile, int ld, const bf16 *slab, int r0, int n, int T, int dp, int c0,
                                             int w, int nt = TC_THREADS) {
    const int per_row = w / 8;
    for (int e = threadIdx.x; e < n * per_row; e += nt) {
        const int r = e / per_row, c = e % per_row * 8, row = r0 + r, in = row >= 0 && row < T;
        cp_async16(tile + r * ld + c, slab + (size_t)(in ? row : 0) * dp + c0 + c, in);
    }
}
__device__ __forceinline__ void fa_load_rows(bf16 *tile, const bf16 *slab, int r0, int n, int T, int dp,
                                             int nt = TC_THREADS) {
    fa_load_cols(tile, fa_ld(dp), slab, r0, n, T, dp, 0, dp, nt);
}
__device__ __forceinline__ void fa_load(bf16 *tile, const bf16 *slab, int r0, int T, int dp) {
    fa_load_rows(tile, slab, r0, TC_M, T, dp);
}

// c[0], c[1] += the 16 x 16 chunk X Y^T over dp columns: x, y the first of 16 rows of shared tiles
// (Y n-major: its rows are the chunk's columns). ldmatrix x4 gives A's a[0..3] from lane l's row
// l % 16, column 8 (l / 16) of X, and two n-tiles' b[0..1] from row l % 8 + 8 (l / 16), column
// 8 (l / 8 % 2) of Y.
__device__ __forceinline__ void fa_xyT(mma_c c[2], const bf16 *x, const bf16 *y, int ld, int dp) {
    const int l = threadIdx.x % 32;
    const bf16 *xl = x + (l % 16) * ld + 8 * (l / 16), *yl = y + (l % 8 + 8 * (l / 16)) * ld + 8 * (l / 8 % 2);
    for (int k = 0; k < dp; k += 16) {
        mma_a a;
        uint32_t r[4];
        ldsm_x4(a.x, xl + k);
        ldsm_x4(r, yl + k);
        const mma_b b0 = {{r[0], r[1]}}, b1 = {{r[2], r[3]}};
        mma_16816(c[0], a, b0);
        mma_16816(c[1], a, b1);
    }
}

// acc += A Y for A a 16 x 16 chunk and y the first of its 16 rows of a shared tile (k-major: its
// rows are A's columns), over the n-tiles of acc's columns [c0, dp) (y's column 0 is acc's column
// c0: a slice of d). ldmatrix x4 .trans from lane l's row l % 16, column n + 8 (l / 16) gives
// n-tiles n and n + 8's b[0..1].
template <int DP>
__device__ __forceinline__ void fa_acc(mma_c (&acc)[DP / 8], const mma_a &a, const bf16 *y, int ld, int dp,
                                       int c0 = 0) {
    const int l = threadIdx.x % 32;
    const bf16 *yl = y + (l % 16) * ld + 8 * (l / 16);
    FA_UNROLL
    for (int n = 0; n < DP / 16; n++) {
        if (n * 16 >= dp) break;
        if (n * 16 < c0) continue;
        uint32_t r[4];
        ldsm_x4_t(r, yl + (n * 16 - c0));
        const mma_b b0 = {{r[0], r[1]}}, b1 = {{r[2], r[3]}};
        mma_16816(acc[2 * n], a, b0);
        mma_16816(acc[2 * n + 1], a, b1);
    }
}

// The A fragment of a chunk held as C fragments c[0] (columns 0..7) and c[1] (8..15), rounded to bf16.
__device__ __forceinline__ mma_a fa_a_of(const mma_c c[2]) {
    mma_a a;
    a.x[0] = pack_bf16x2(c[0].x[0], c[0].x[1]);  // row g, k 2t, 2t+1
    a.x[1] = pack_bf16x2(c[0].x[2], c[0].x[3]);  // row g+8
    a.x[2] = pack_bf16x2(c[1].x[0], c[1].x[1]);  // row g, k 8+2t, 9+2t
    a.x[3] = pack_bf16x2(c[1].x[2], c[1].x[3]);  // row g+8
    return a;
}

template <int N> __device__ __forceinline__ void fa_zero(mma_c (&c)[N]) {
    FA_UNROLL
    for (int n = 0; n < N; n++) c[n].x[0] = c[n].x[1] = c[n].x[2] = c[n].x[3] = 0.0f;
}

// 1 when row i (< T) may see key j: st <= j <= i, st its document start.
__device__ __forceinline__ int fa_ok(int T, int i, int st, int j) { return i < T && j <= i && j >= st; }

// The max (op 0) or sum (op 1) of v over the 4 lanes of a row group (lanes xor 1, 2); with FIRST = 4,
// LAST = 16 over the 8 lanes of equal t instead (a column of C fragments: the head kernels' rows).
template <int FIRST = 1, int LAST = 2> __device__ __forceinline__ float fa_row_reduce(float v, int op) {
    FA_UNROLL
    for (int m = FIRST; m <= LAST; m *= 2) {
        const float o = __shfl_xor_sync(0xffffffffu, v, m);
        v = op ? v + o : fmaxf(v, o);
    }
    return v;
}

// The online softmax of a warp's rows i[0..1] (this lane's: g and g+8; document starts st) over the
// key tile j0 with scores s (8 n-tiles): the new max m, the sum l of this lane's columns (its 4
// lanes are summed at the end), the old terms' factor alpha, and s replaced by
// P = exp(scale s - m) times dropout's factor (the index ((b*H + h)*T + i)*T + j of every backend).
__device__ __forceinline__ void fa_softmax(const tc_args &a, int bh, int j0, const int i[2], const int st[2],
                                           mma_c (&s)[8], float m[2], float l[2], float alpha[2]) {
    const int t = threadIdx.x % 4;
    FA_UNROLL
    for (int r = 0; r < 2; r++) {
        float mx = m[r];
        FA_UNROLL
        for (int n = 0; n < 8; n++)
            FA_UNROLL
            for (int e = 0; e < 2; e++)
                if (fa_ok(a.T, i[r], st[r], j0 + 8 * n + 2 * t + e)) mx = fmaxf(mx, s[n].x[2 * r + e] * a.scale);
        mx = fa_row_reduce(mx, 0);
        // mx is -inf while the row has seen no key (a document starting after j0): nothing to rescale
        alpha[r] = mx == -INFINITY ? 1.0f : expf(m[r] - mx);
        float sum = 0.0f;
        FA_UNROLL
        for (int n = 0; n < 8; n++)
            FA_UNROLL
            for (int e = 0; e < 2; e++) {
                const int j = j0 + 8 * n + 2 * t + e;
                float p = 0.0f, f = 0.0f;
                if (fa_ok(a.T, i[r], st[r], j)) p = expf(s[n].x[2 * r + e] * a.scale - mx), f = tc_drop(a, bh, i[r], j);
                sum += p;
                s[n].x[2 * r + e] = p * f;
            }
        l[r] = l[r] * alpha[r] + sum, m[r] = mx;
    }
}

// Key tiles jt0..jt1's k and v, double-buffered at kv (buffer n: k at kv + 2n tile, v a tile
// after it, slab the kv head's): fa_kv_load issues a tile's copies into a buffer; fa_kv_next issues
// tile jt + 1's into the other buffer (when jt < jt1), waits for tile jt's and returns its buffer.
__device__ __forceinline__ void fa_kv_load(const tc_args &a, size_t slab, int jt, bf16 *buf) {
    fa_load(buf, a.k + slab, jt * TC_N, a.T, a.dp);
    fa_load(buf + TC_M * fa_ld(a.dp), a.v + slab, jt * TC_N, a.T, a.dp);
}
__device__ __forceinline__ const bf16 *fa_kv_next(const tc_args &a, size_t slab, bf16 *kv, int jt0, int jt, int jt1) {
    const int tile = TC_M * fa_ld(a.dp);
    if (jt < jt1) fa_kv_load(a, slab, jt + 1, kv + 2 * ((jt - jt0 + 1) & 1) * tile);
    cp_async_commit();
    cp_async_wait<1>();  // this thread's copies of tile jt are done,
    __syncthreads();     // and every thread's
    return kv + 2 * ((jt - jt0) & 1) * tile;
}

// Calls f(r, c, n, x) for this lane's entries of a 16 x dp accumulator in C fragments: its row r
// (0: g, 1: g+8), column c < d, fragment n and index x in it.
template <int DP, typename F> __device__ __forceinline__ void fa_each(int d, F f) {
    const int t = threadIdx.x % 4;
    FA_UNROLL
    for (int r = 0; r < 2; r++)
        FA_UNROLL
        for (int n = 0; n < DP / 8; n++)
            FA_UNROLL
            for (int e = 0; e < 2; e++)
                if (8 * n + 2 * t + e < d) f(r, 8 * n + 2 * t + e, n, 2 * r + e);
}

// This lane's query rows i (rows g and g+8 of warp w's 16 from i0) and their document starts.
__device__ __forceinline__ void fa_lane_rows(const tc_args &a, int b, int i0, int i[2], int st[2]) {
    FA_UNROLL
    for (int r = 0; r < 2; r++) {
        i[r] = i0 + 16 * (threadIdx.x / 32) + threadIdx.x % 32 / 4 + 8 * r;
        st[r] = i[r] < a.T ? mta_row_start(a.ds, a.T, b, i[r]) : 0;
    }
}

// A forward warp's rows: this lane's rows i (g and g+8 of the warp's 16) and their document
// starts, the online softmax's max m and sum l (this lane's columns) and factor alpha, and O.
template <int DP> struct fa_fwd {
    int i[2], st[2];
    float m[2], l[2], alpha[2];
    mma_c o[DP / 8];
};
template <int DP> __device__ __forceinline__ void fa_fwd_init(fa_fwd<DP> &f, const tc_args &a, int b, int i0) {
    fa_lane_rows(a, b, i0, f.i, f.st);
    f.m[0] = f.m[1] = -INFINITY, f.l[0] = f.l[1] = 0.0f;
    fa_zero(f.o);
}

// Key tile jt of a forward warp, from its scores s (8 n-tiles): the online softmax, then
// O = alpha O + P V, v's rows at vs.
template <int DP>
__device__ __forceinline__ void fa_fwd_tile(const tc_args &a, int bh, int jt, fa_fwd<DP> &f, mma_c (&s)[8],
                                            const bf16 *vs, int ld) {
    fa_softmax(a, bh, jt * TC_N, f.i, f.st, s, f.m, f.l, f.alpha);
    FA_UNROLL
    for (int n = 0; n < DP / 8; n++) {
        f.o[n].x[0] *= f.alpha[0], f.o[n].x[1] *= f.alpha[0];
        f.o[n].x[2] *= f.alpha[1], f.o[n].x[3] *= f.alpha[1];
    }
    FA_UNROLL
    for (int kc = 0; kc < 4; kc++) fa_acc<DP>(f.o, fa_a_of(s + 2 * kc), vs + 16 * kc * ld, ld, a.dp);
}

// The forward's end: each row's log-sum-exp m + log l (l summed over its 4 lanes) and O / l to
// out and a.o.
template <int DP> __device__ __forceinline__ void fa_fwd_out(const tc_args &a, int bh, fa_fwd<DP> &f, float *out) {
    FA_UNROLL
    for (int r = 0; r < 2; r++) {
        f.l[r] = fa_row_reduce(f.l[r], 1);
        if (f.i[r] < a.T && threadIdx.x % 4 == 0) a.lse[(size_t)bh * a.T + f.i[r]] = f.m[r] + logf(f.l[r]);
    }
    fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
        const size_t at = ((size_t)bh * a.T + f.i[r]) * a.d + c;
        if (f.i[r] < a.T) out[at] = a.o[at] = f.o[n].x[x] / f.l[r];
    });
}

// Forward, one block per (query tile, head) (grid: x tiles, the last first, y B*H): the key tiles
// from the first document start of the tile's rows to the diagonal, with an online softmax; writes
// O (before norm and gate) to out and a.o, and each row's log-sum-exp.
template <int DP> __global__ void __launch_bounds__(TC_THREADS) k_fa_forward_t(tc_args a, float *out) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    const int dp = a.dp, ld = fa_ld(dp), tile = TC_M * ld, w = threadIdx.x / 32;
    const int bh = blockIdx.y, b = bh / a.H, i0 = (gridDim.x - 1 - blockIdx.x) * TC_M;
    bf16 *qs = sh, *kv = sh + tile;
    const size_t slab = tc_kv_slab(a, bh) * a.Tp * dp;
    const int jt0 = mta_row_start(a.ds, a.T, b, i0) / TC_N, jt1 = i0 / TC_N;
    fa_load(qs, a.q + (size_t)bh * a.Tp * dp, i0, a.T, dp);
    fa_kv_load(a, slab, jt0, kv);
    cp_async_commit();
    fa_fwd<DP> f;
    fa_fwd_init(f, a, b, i0);
    for (int jt = jt0; jt <= jt1; jt++) {
        const bf16 *ks = fa_kv_next(a, slab, kv, jt0, jt, jt1), *vs = ks + tile;
        mma_c s[8];
        fa_zero(s);
        FA_UNROLL
        for (int kc = 0; kc < 4; kc++) fa_xyT(s + 2 * kc, qs + 16 * w * ld, ks + 16 * kc * ld, ld, dp);
        fa_fwd_tile(a, bh, jt, f, s, vs, ld);
        __syncthreads();  // before the next tile's copies overwrite this one
    }
    fa_fwd_out(a, bh, f, out);
}

// The backward's two chunks of a 16 x 16 block: s = x y^T (scores) and dp2 = x2 y2^T (dO V^T),
// from zero (the arguments as fa_xyT's).
__device__ __forceinline__ void fa_chunks(mma_c s[2], mma_c dp2[2], const bf16 *x, const bf16 *y, const bf16 *x2,
                                          const bf16 *y2, int ld, int dp) {
    FA_UNROLL
    for (int n = 0; n < 2; n++)
        FA_UNROLL
        for (int k = 0; k < 4; k++) s[n].x[k] = dp2[n].x[k] = 0.0f;
    fa_xyT(s, x, y, ld, dp);
    fa_xyT(dp2, x2, y2, ld, dp);
}

// One entry (i, j) of the backward from its score s and dP2 = (dO V^T) entry: P = exp(scale s - lse)
// (0 outside the entry's causal and document block), dP = dP2 through dropout; s becomes
// dS = P (dP - D) and dp2 becomes P2 = P with dropout.
__device__ __forceinline__ void fa_grad(const tc_args &a, int bh, int i, int st, int j, float lse, float D, float &s,
                                        float &dp2) {
    float p = 0.0f, f = 0.0f;
    if (fa_ok(a.T, i, st, j)) p = expf(s * a.scale - lse), f = tc_drop(a, bh, i, j);
    s = p * (dp2 * f - D);
    dp2 = p * f;
}

// dQ of one query tile of one head (grid: x query tiles, the last first, y B*H): the key tiles from
// its first document start to the diagonal. dq += scale dS k.
template <int DP> __global__ void __launch_bounds__(TC_THREADS) k_fa_dq_t(tc_args a, float *dq) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    const int dp = a.dp, ld = fa_ld(dp), tile = TC_M * ld, w = threadIdx.x / 32, t = threadIdx.x % 4;
    const int bh = blockIdx.y, b = bh / a.H, i0 = (gridDim.x - 1 - blockIdx.x) * TC_M;
    bf16 *qs = sh, *dos = sh + tile, *kv = sh + 2 * tile;
    const size_t slab = tc_kv_slab(a, bh) * a.Tp * dp;
    const int jt0 = mta_row_start(a.ds, a.T, b, i0) / TC_N, jt1 = i0 / TC_N;
    fa_load(qs, a.q + (size_t)bh * a.Tp * dp, i0, a.T, dp);
    fa_load(dos, a.dO + (size_t)bh * a.Tp * dp, i0, a.T, dp);
    fa_kv_load(a, slab, jt0, kv);
    cp_async_commit();
    int i[2], st[2];
    fa_lane_rows(a, b, i0, i, st);
    float lse[2], D[2];
    FA_UNROLL
    for (int r = 0; r < 2; r++) {
        lse[r] = i[r] < a.T ? a.lse[(size_t)bh * a.T + i[r]] : 0.0f;
        D[r] = i[r] < a.T ? a.D[(size_t)bh * a.T + i[r]] : 0.0f;
    }
    mma_c acc[DP / 8];
    fa_zero(acc);
    for (int jt = jt0; jt <= jt1; jt++) {
        const bf16 *ks = fa_kv_next(a, slab, kv, jt0, jt, jt1), *vs = ks + tile;
        FA_UNROLL
        for (int kc = 0; kc < 4; kc++) {
            mma_c s[2], dp2[2];
            fa_chunks(s, dp2, qs + 16 * w * ld, ks + 16 * kc * ld, dos + 16 * w * ld, vs + 16 * kc * ld, ld, dp);
            FA_UNROLL
            for (int n = 0; n < 2; n++)
                FA_UNROLL
                for (int x = 0; x < 4; x++)
                    fa_grad(a, bh, i[x / 2], st[x / 2], jt * TC_N + 16 * kc + 8 * n + 2 * t + x % 2, lse[x / 2],
                            D[x / 2], s[n].x[x], dp2[n].x[x]);
            fa_acc<DP>(acc, fa_a_of(s), ks + 16 * kc * ld, ld, dp);
        }
        __syncthreads();  // before the next tile's copies overwrite this one
    }
    fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
        if (i[r] < a.T) dq[((size_t)bh * a.T + i[r]) * a.d + c] += a.scale * acc[n].x[x];
    });
}

// Issues dK/dV's copies of query tile i0 of head bh: q and dO into qd (q, then dO a tile after),
// and its rows' lse, D and document starts (plain stores: they are not 16-byte aligned).
__device__ __forceinline__ void fa_load_queries(const tc_args &a, int bh, int i0, bf16 *qd, fa_rows *rows) {
    const int dp = a.dp, b = bh / a.H;
    fa_load(qd, a.q + (size_t)bh * a.Tp * dp, i0, a.T, dp);
    fa_load(qd + TC_M * fa_ld(dp), a.dO + (size_t)bh * a.Tp * dp, i0, a.T, dp);
    for (int r = threadIdx.x; r < TC_M; r += TC_THREADS) {
        const int i = i0 + r, in = i < a.T;
        rows->lse[r] = in ? a.lse[(size_t)bh * a.T + i] : 0.0f;
        rows->D[r] = in ? a.D[(size_t)bh * a.T + i] : 0.0f;
        rows->start[r] = in ? mta_row_start(a.ds, a.T, b, i) : 0;
    }
}

// dK/dV's terms of one query tile (i0 of head bh; q, dO at qs and a tile after, rows its fa_rows):
// warp w's 16 keys from j0 + 16w against the tile's 4 chunks of 16 queries.
template <int DP>
__device__ __forceinline__ void fa_dkdv_tile(const tc_args &a, int bh, int i0, int j0, const bf16 *ks, const bf16 *vs,
                                             const bf16 *qs, const fa_rows &rows, mma_c (&dk)[DP / 8],
                                             mma_c (&dv)[DP / 8]) {
    const int dp = a.dp, ld = fa_ld(dp), w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    const bf16 *dos = qs + TC_M * ld;
    FA_UNROLL
    for (int qc = 0; qc < 4; qc++) {
        mma_c s[2], dp2[2];  // S^T, dP2^T: rows the keys, columns the queries
        fa_chunks(s, dp2, ks + 16 * w * ld, qs + 16 * qc * ld, vs + 16 * w * ld, dos + 16 * qc * ld, ld, dp);
        FA_UNROLL
        for (int n = 0; n < 2; n++)
            FA_UNROLL
            for (int e = 0; e < 2; e++) {
                const int c = 16 * qc + 8 * n + 2 * t + e;
                FA_UNROLL
                for (int r = 0; r < 2; r++)
                    fa_grad(a, bh, i0 + c, rows.start[c], j0 + 16 * w + g + 8 * r, rows.lse[c], rows.D[c],
                            s[n].x[2 * r + e], dp2[n].x[2 * r + e]);
            }
        fa_acc<DP>(dv, fa_a_of(dp2), dos + 16 * qc * ld, ld, dp);  // P2^T dO
        fa_acc<DP>(dk, fa_a_of(s), qs + 16 * qc * ld, ld, dp);     // dS^T q
    }
}

// dK and dV of one key tile of one kv head (grid: x key tiles, the first (longest) first, y
// B*H_kv): its query heads in order, each over the query tiles from the diagonal on while their
// rows' documents can reach the tile's keys. dk += scale dS^T q, dv += P2^T dO.
template <int DP> __global__ void __launch_bounds__(TC_THREADS) k_fa_dkdv_t(tc_args a, float *dk, float *dv) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    const int dp = a.dp, ld = fa_ld(dp), tile = TC_M * ld, g = threadIdx.x % 32 / 4;
    const int kvs = blockIdx.y, b = kvs / a.Hkv, rep = a.H / a.Hkv, j0 = blockIdx.x * TC_N, jlast = tc_last(a, j0);
    bf16 *ks = sh, *vs = sh + tile, *qd = sh + 2 * tile;  // q of buffer n at qd + 2n tile, dO after it
    fa_rows *rows = (fa_rows *)(sh + 6 * tile);           // buffer n's rows at rows + n
    const int h1 = (kvs % a.Hkv + 1) * rep;
    int h = h1 - rep, i0 = j0;
    fa_load(ks, a.k + (size_t)kvs * a.Tp * dp, j0, a.T, dp);
    fa_load(vs, a.v + (size_t)kvs * a.Tp * dp, j0, a.T, dp);
    fa_load_queries(a, b * a.H + h, i0, qd, rows);
    cp_async_commit();
    mma_c dks[DP / 8], dvs[DP / 8];
    fa_zero(dks);
    fa_zero(dvs);
    for (int n = 0; h < h1; n++) {
        // the next query tile: rows from i0 on start their documents at or after row i0's start
        int hn = h, in = i0 + TC_M;
        if (in >= a.T || mta_row_start(a.ds, a.T, b, in) > jlast) hn = h + 1, in = j0;
        const int buf = n & 1;
        if (hn < h1) fa_load_queries(a, b * a.H + hn, in, qd + 2 * (buf ^ 1) * tile, rows + (buf ^ 1));
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        fa_dkdv_tile<DP>(a, b * a.H + h, i0, j0, ks, vs, qd + 2 * buf * tile, rows[buf], dks, dvs);
        __syncthreads();  // before the next tile's copies overwrite this one
        h = hn, i0 = in;
    }
    fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
        const int j = j0 + 16 * (threadIdx.x / 32) + g + 8 * r;
        const size_t at = ((size_t)kvs * a.T + j) * a.d + c;
        if (j <= jlast) tc_add_kv(a, dk, at, a.scale * dks[n].x[x]), tc_add_kv(a, dv, at, dvs[n].x[x]);
    });
}

// The forward's and the backward's launches, at the accumulators' width DP for a.dp. The kernels
// are launched through pointers named as the launch record and --plan know them (without <DP>).
template <int DP> void fa_forward_at(const call *cl, const tc_args &a, int BH, float *out) {
    void (*const k_fa_forward)(tc_args, float *) = k_fa_forward_t<DP>;
    const size_t sm = fa_smem_bytes(TC_FWD, a.dp);
    tc_smem_optin(k_fa_forward, sm);
    MTA_LAUNCH(k_fa_forward, dim3((unsigned)(a.Tp / TC_M), (unsigned)BH), TC_THREADS, sm, cl->s)(a, out);
}
template <int DP> void fa_backward_at(const call *cl, const tc_args &a, int B, float *dq, float *dk, float *dv) {
    void (*const k_fa_dkdv)(tc_args, float *, float *) = k_fa_dkdv_t<DP>;
    void (*const k_fa_dq)(tc_args, float *) = k_fa_dq_t<DP>;
    const size_t sm_kv = fa_smem_bytes(TC_DKDV, a.dp), sm_q = fa_smem_bytes(TC_DQ, a.dp);
    tc_smem_optin(k_fa_dkdv, sm_kv);
    tc_smem_optin(k_fa_dq, sm_q);
    const unsigned tiles = (unsigned)(a.Tp / TC_M);
    MTA_LAUNCH(k_fa_dkdv, dim3(tiles, (unsigned)(B * a.Hkv)), TC_THREADS, sm_kv, cl->s)(a, dk, dv);
    MTA_LAUNCH(k_fa_dq, dim3(tiles, (unsigned)(B * a.H)), TC_THREADS, sm_q, cl->s)(a, dq);
}
void fa_forward(const call *cl, const tc_args &a, int BH, float *out) {
    if (a.dp <= 64) fa_forward_at<64>(cl, a, BH, out);
    else fa_forward_at<128>(cl, a, BH, out);
}
void fa_backward(const call *cl, const tc_args &a, int B, float *dq, float *dk, float *dv) {
    if (a.dp <= 64) fa_backward_at<64>(cl, a, B, dq, dk, dv);
    else fa_backward_at<128>(cl, a, B, dq, dk, dv);
}

#endif
