// mta_cuda_fa_heads.cuh: the head steps' forward on mma.sync (docs/cuda.md, "Head mixing and head
// convolution"): k_fa_head_forward, for groups of G <= 16 heads. Included by mta_cuda_tc.cuh after
// mta_cuda_fa2.cuh (its helpers: fa_ld, fa_xyT, fa_row_reduce, FA_UNROLL).
//
// A block owns FH_M = 16 query rows of the G heads of a group and walks key tiles of FH_N = 32 keys.
// Per key tile, in stages of two heads (cp.async double-buffered: a stage's q and k, or v, tiles):
//   S1[h] = scale q_h k_h^T, masked, into shared memory as [entry][head] (entry = query row, key);
//   step 3 per entry, S2 (entries x heads) = S1 (entries x heads) W1^T: m16n8k16 with K the 16
//   (padded) heads, A from S1 by ldmatrix, B W1's fragment built once per block in registers;
//   the softmax of S2 in registers (a warp owns 4 query rows of every head);
//   step 6 per entry, P2 = P W2' (W2' the group's block-diagonal head convolution), A = P's C
//   fragments in registers; P2 (with dropout) into shared memory as [head][query][key];
//   O_h += P2_h v_h per head, O (float32) added to a.o in global memory.
// The MMAs' inputs are bf16; S1, W1, P and W2 are each split into hi + lo bf16 (x = hi + lo to
// about 2^-17 |x|) and the products summed over hi hi, lo hi and hi lo (three MMAs), so the mixing
// and the head convolution add no rounding beyond the path's (P2 rounded once before P2 v, as P is
// without head steps). Without step 3, W1 is the identity; without step 6, P2 = P.
// With step 6 the forward walks the key tiles twice (statistics, then P from the final ones), as
// k_tc_head_forward does; without it O is rescaled per key tile by the online softmax's alpha.
#ifndef MTAC_ATTN_MTA_CUDA_FA_HEADS_CUH
#define MTAC_ATTN_MTA_CUDA_FA_HEADS_CUH

const int FH_M = 16, FH_N = 32;       // query rows and keys of a tile
const int FH_MAXG = 16;               // heads of a group: the mixing's K
const int FH_E = FH_M * FH_N;         // entries of a tile pair
const int FH_PLD = FH_N + 8;          // P2's leading dimension (bf16): rows 80 bytes apart
const int FH_STAGE = 2 * (FH_M + FH_N);  // rows of a stage buffer: two heads' q and k (or v)

// The shared bytes of k_fa_head_forward for G heads at padded width dp: two stage buffers, S1's hi
// and lo (FH_E rows of 16 heads), P2 (G, FH_M, FH_PLD) and two (16, 16) floats (alpha, sum).
size_t fh_smem_bytes(int G, int dp) {
    return (2 * (size_t)FH_STAGE * fa_ld(dp) + 2 * (size_t)FH_E * FH_MAXG + (size_t)G * FH_M * FH_PLD) * sizeof(bf16) +
           2 * FH_MAXG * FH_M * sizeof(float);
}

// Where head h of entry e lies in an S1 array: rows of 32 bytes, the two 16-byte halves (heads 0-7,
// 8-15) swapped on rows with bit 2 set, so the 8 rows an ldmatrix reads hit distinct banks.
__device__ __forceinline__ int fh_s1_at(int e, int h) { return e * FH_MAXG + ((h / 8) ^ ((e >> 2) & 1)) * 8 + h % 8; }

// x = hi + lo, each rounded to bf16.
__device__ __forceinline__ float fh_hi(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

// A B fragment pair (n-tiles 0 and 1: out heads 0-7, 8-15) of the 16 x 16 matrix B(in, out) =
// f(in, out), split into hi and lo (mma_ptx.cuh: b[0] = B[2t..2t+1][g], b[1] = B[2t+8..2t+9][g]).
template <typename F> __device__ __forceinline__ void fh_b_of(F f, mma_b hi[2], mma_b lo[2]) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int n = 0; n < 2; n++)
        FA_UNROLL
        for (int k = 0; k < 2; k++) {
            const float x0 = f(2 * t + 8 * k, 8 * n + g), x1 = f(2 * t + 8 * k + 1, 8 * n + g);
            hi[n].x[k] = pack_bf16x2(x0, x1);
            lo[n].x[k] = pack_bf16x2(x0 - fh_hi(x0), x1 - fh_hi(x1));
        }
}

// The block's mixing fragments: W1^T (B(in, out) = W1[out][in], the identity without step 3) and
// W2' (B(in, out) = w2[group][in][out] within a group of c_h, 0 across groups); heads past G 0.
template <typename K> __device__ __forceinline__ void fh_weights(const tc_args &a, const tc_heads &hd, int h0, K &k) {
    const int G = hd.G, c = hd.ch;
    fh_b_of(
        [&](int in, int out) {
            if (in >= G || out >= G) return 0.0f;
            return hd.mix ? hd.w1[out * a.H + in] : (float)(in == out);
        },
        k.w1h, k.w1l);
    fh_b_of(
        [&](int in, int out) {
            if (!c || in >= G || out >= G || (h0 + in) / c != (h0 + out) / c) return 0.0f;
            return hd.w2[((size_t)(h0 + in) / c * c + (h0 + in) % c) * c + (h0 + out) % c];
        },
        k.w2h, k.w2l);
}

// c += (A_hi + A_lo) (B_hi + B_lo) less A_lo B_lo, over the two n-tiles.
__device__ __forceinline__ void fh_mma3(mma_c c[2], const mma_a &ah, const mma_a &al, const mma_b bh[2],
                                        const mma_b bl[2]) {
    FA_UNROLL
    for (int n = 0; n < 2; n++) {
        mma_16816(c[n], ah, bh[n]);
        mma_16816(c[n], al, bh[n]);
        mma_16816(c[n], ah, bl[n]);
    }
}

// The hi and lo A fragments of a 16 x 16 chunk held as C fragments (fa_a_of's layout).
__device__ __forceinline__ void fh_split(const mma_c c[2], mma_a &hi, mma_a &lo) {
    FA_UNROLL
    for (int k = 0; k < 4; k++) {
        const float x0 = c[k / 2].x[2 * (k % 2)], x1 = c[k / 2].x[2 * (k % 2) + 1];
        hi.x[k] = pack_bf16x2(x0, x1);
        lo.x[k] = pack_bf16x2(x0 - fh_hi(x0), x1 - fh_hi(x1));
    }
}

// y = x B per 16-entry chunk of a query row (two), x in C fragments split into hi and lo (fh_mma3).
__device__ __forceinline__ void fh_mix_regs(const mma_c x[2][2], const mma_b bh[2], const mma_b bl[2], mma_c y[2][2]) {
    FA_UNROLL
    for (int kc = 0; kc < 2; kc++) {
        mma_a hi, lo;
        fh_split(x[kc], hi, lo);
        y[kc][0] = y[kc][1] = mma_c{};
        fh_mma3(y[kc], hi, lo, bh, bl);
    }
}

// Where the block's stages are: pass (0: statistics, with step 6; dQ: D), query tile i0, key tile
// j0, stage s of kind s / P (P = (G+1)/2 head pairs, s % P the pair): 0 q, k; 1 v (backward: dO,
// v); 2 k (dQ's second pass) or q, dO (dK, dV).
struct fh_pos {
    int pass, i0, j0, s;
};
// The forward and dQ walk the key tiles (from js while j0 <= last, a row of the query tile); the
// dK, dV kernel (qw) the query tiles of its key tile (from js while i0 <= last).
struct fh_walk {
    int npass, js, last, P, bwd, qw;  // passes; the first tile; the last; head pairs; 0 fwd, 1 dQ, 2 dK dV; qw
    int kt;                           // with qw: the key tile
};
__device__ __forceinline__ int fh_stages(const fh_walk &wk, int pass) {
    if (wk.bwd) return (pass || wk.bwd == 2 ? 3 : 2) * wk.P;
    return pass + 1 < wk.npass ? wk.P : 2 * wk.P;
}
__device__ __forceinline__ fh_pos fh_next(const fh_walk &wk, fh_pos p) {
    if (++p.s < fh_stages(wk, p.pass)) return p;
    int &t = wk.qw ? p.i0 : p.j0;
    p.s = 0, t += wk.qw ? FH_M : FH_N;
    if (t > wk.last) t = wk.js, p.pass++;
    return p;
}

// Issues stage p's copies into buf.
__device__ __forceinline__ void fh_stage_load(const tc_args &a, int bh0, int G, const fh_walk &wk, fh_pos p, bf16 *buf) {
    const int dp = a.dp, ld = fa_ld(dp);
    const int kind = p.s / wk.P;
    for (int u = 0; u < 2; u++) {
        const int h = 2 * (p.s % wk.P) + u;
        if (h >= G) break;
        const size_t kv = tc_kv_slab(a, bh0 + h) * a.Tp * dp;
        const size_t qs = (size_t)(bh0 + h) * a.Tp * dp;
        if (kind == 2 && wk.bwd == 2) {  // rows of q then of dO
            bf16 *t = buf + u * 2 * FH_M * ld;
            fa_load_rows(t, a.q + qs, p.i0, FH_M, a.T, dp);
            fa_load_rows(t + FH_M * ld, a.dO + qs, p.i0, FH_M, a.T, dp);
        } else if (kind == 0 || (kind == 1 && wk.bwd)) {  // rows of q (dO) then of k (v)
            bf16 *t = buf + u * (FH_M + FH_N) * ld;
            fa_load_rows(t, (kind ? a.dO : a.q) + qs, p.i0, FH_M, a.T, dp);
            fa_load_rows(t + FH_M * ld, (kind ? a.v : a.k) + kv, p.j0, FH_N, a.T, dp);
        } else {
            fa_load_rows(buf + u * FH_N * ld, (kind == 1 ? a.v : a.k) + kv, p.j0, FH_N, a.T, dp);
        }
    }
}

// The shared arrays and the per-lane state of a block.
struct fh_block {
    bf16 *s1h, *s1l, *p2;  // S1 hi, lo (fh_s1_at); P2 (G, FH_M, FH_PLD)
    float *al, *ls;        // (16 heads, 16 rows): the online softmax's alpha; the sums at the end
    mma_b w1h[2], w1l[2], w2h[2], w2l[2];
    int b, bh0, i0, st[4];  // st: the document starts of the warp's 4 query rows (4w + qq)
    float m[4][4], l[4][4]; // per query row qq and head 8(hh/2) + 2t + hh%2: max (then lse), sum
};

// The products x y^T of heads 2s (warps 0, 1) and 2s+1 (warps 2, 3), keys 16(w%2).. of the tile,
// x and y a stage's rows (q, k or dO, v), 0 where the row does not see the key, into [entry][head]
// arrays: S1 = scale q k^T split into hi and lo, or (DP2) dP2 = dropout(dO v^T) in hi.
template <int DP2>
__device__ __forceinline__ void fh_scores(const tc_args &a, const fh_block &k, int G, int s, int j0, const bf16 *buf,
                                          bf16 *hi, bf16 *lo) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4, h = 2 * s + w / 2, ld = fa_ld(a.dp);
    if (h >= G) return;
    const bf16 *qs = buf + (w / 2) * (FH_M + FH_N) * ld, *ks = qs + (FH_M + 16 * (w % 2)) * ld;
    mma_c c[2] = {};
    fa_xyT(c, qs, ks, ld, a.dp);
    FA_UNROLL
    for (int n = 0; n < 2; n++)
        FA_UNROLL
        for (int x = 0; x < 4; x++) {
            const int r = g + 8 * (x / 2), key = 16 * (w % 2) + 8 * n + 2 * t + x % 2, i = k.i0 + r, j = j0 + key;
            const float f = DP2 ? tc_drop(a, k.bh0 + h, i, j) : a.scale, v = tc_valid(a, k.b, i, j) ? c[n].x[x] * f : 0.0f;
            const int at = fh_s1_at(r * FH_N + key, h);
            hi[at] = __float2bfloat16_rn(v);
            if (!DP2) lo[at] = __float2bfloat16_rn(v - fh_hi(v));
        }
}

// S2 of the warp's query row 4w + qq at the tile's two 16-key chunks: S1 W1^T (fh_mma3).
__device__ __forceinline__ void fh_mix(const fh_block &k, int qq, mma_c s2[2][2]) {
    const int l = threadIdx.x % 32, w = threadIdx.x / 32;
    FA_UNROLL
    for (int kc = 0; kc < 2; kc++) {
        const int e = (4 * w + qq) * FH_N + 16 * kc + l % 16, at = fh_s1_at(e, 8 * (l / 16));
        mma_a ah, al;
        ldsm_x4(ah.x, k.s1h + at);
        ldsm_x4(al.x, k.s1l + at);
        s2[kc][0] = s2[kc][1] = mma_c{};
        fh_mma3(s2[kc], ah, al, k.w1h, k.w1l);
    }
}

// This lane's entry of S2 chunks for head slot hh and row r: s2[kc][hh / 2].x[2 r + hh % 2] (the
// head kernels' headers use it; mta_cuda_fa_heads_dq.cuh, included after, undefines it).
#define FH_AT(s2, kc, hh, r) (s2)[kc][(hh) / 2].x[2 * (r) + (hh) % 2]

// The online statistics of query row qq: per head slot the new max, alpha and sum (rows of the
// key chunks: key 16 kc + g + 8 r); with keep, s2 becomes P = exp(S2 - m) (0 where masked).
__device__ __forceinline__ void fh_online(const tc_args &a, fh_block &k, int qq, int j0, mma_c s2[2][2],
                                          float alpha[4]) {
    const int i = k.i0 + 4 * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4;
    FA_UNROLL
    for (int hh = 0; hh < 4; hh++) {
        float mx = k.m[qq][hh], sum = 0.0f;
        FA_UNROLL
        for (int x = 0; x < 4; x++)
            if (fa_ok(a.T, i, k.st[qq], j0 + 16 * (x / 2) + g + 8 * (x % 2))) mx = fmaxf(mx, FH_AT(s2, x / 2, hh, x % 2));
        FA_UNROLL
        for (int m = 4; m <= 16; m *= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, m));
        alpha[hh] = mx == -INFINITY ? 1.0f : expf(k.m[qq][hh] - mx);
        FA_UNROLL
        for (int x = 0; x < 4; x++) {
            float &v = FH_AT(s2, x / 2, hh, x % 2);
            v = fa_ok(a.T, i, k.st[qq], j0 + 16 * (x / 2) + g + 8 * (x % 2)) ? expf(v - mx) : 0.0f;
            sum += v;
        }
        FA_UNROLL
        for (int m = 4; m <= 16; m *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
        k.l[qq][hh] = k.l[qq][hh] * alpha[hh] + sum, k.m[qq][hh] = mx;
    }
}

// P = exp(S2 - lse) of query row qq where the row sees the key, else 0 (m holds the lse).
__device__ __forceinline__ void fh_probs(const tc_args &a, const fh_block &k, int qq, int j0, mma_c s2[2][2]) {
    const int i = k.i0 + 4 * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4;
    FA_UNROLL
    for (int hh = 0; hh < 4; hh++)
        FA_UNROLL
        for (int x = 0; x < 4; x++) {
            float &v = FH_AT(s2, x / 2, hh, x % 2);
            v = fa_ok(a.T, i, k.st[qq], j0 + 16 * (x / 2) + g + 8 * (x % 2)) ? expf(v - k.m[qq][hh]) : 0.0f;
        }
}

// P2 of query row qq with dropout, to bf16 at at(h, q, key) (heads < G).
template <typename At>
__device__ __forceinline__ void fh_store_p2(const tc_args &a, const fh_block &k, int G, int qq, int j0,
                                            const mma_c p2[2][2], At at) {
    const int q = 4 * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int hh = 0; hh < 4; hh++)
        FA_UNROLL
        for (int x = 0; x < 4; x++) {
            const int h = 8 * (hh / 2) + 2 * t + hh % 2, key = 16 * (x / 2) + g + 8 * (x % 2);
            if (h >= G) continue;
            const float f = k.i0 + q < a.T ? tc_drop(a, k.bh0 + h, k.i0 + q, j0 + key) : 0.0f;
            *at(h, q, key) = __float2bfloat16_rn(FH_AT(p2, x / 2, hh, x % 2) * f);
        }
}

// The softmax and the head convolution of the tile's S1 (after its last q, k stage): with step 6
// in the statistics pass only the statistics; else P2 into p2 and (without step 6) alpha into al.
__device__ __forceinline__ void fh_softmax(const tc_args &a, const tc_heads &hd, fh_block &k, int stats, int j0) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    const auto p2_at = [&](int h, int q, int key) { return k.p2 + (h * FH_M + q) * FH_PLD + key; };
    FA_UNROLL
    for (int qq = 0; qq < 4; qq++) {
        mma_c s2[2][2];
        fh_mix(k, qq, s2);
        float alpha[4];
        if (hd.ch && !stats) {
            fh_probs(a, k, qq, j0, s2);
            mma_c p2[2][2];
            fh_mix_regs(s2, k.w2h, k.w2l, p2);
            fh_store_p2(a, k, hd.G, qq, j0, p2, p2_at);
            continue;
        }
        fh_online(a, k, qq, j0, s2, alpha);
        if (stats) continue;
        fh_store_p2(a, k, hd.G, qq, j0, s2, p2_at);
        FA_UNROLL
        for (int hh = 0; hh < 4; hh++)
            if (g == 0) k.al[(8 * (hh / 2) + 2 * t + hh % 2) * FH_M + 4 * w + qq] = alpha[hh];
    }
}

// dst = alpha dst + f X y for a head's 16 rows from i0 (dst: its (T, d) slab; alpha NULL: 1), X
// (16 x 32) in shared memory, row q's 8 columns from c at x_at(q, c), y the (32, dp) rows of a
// stage; warp w takes the 16-column blocks w % 2, w % 2 + 2, ... With TR, X^T y instead: X
// (16 x 16) read transposed by ldmatrix .trans (fhq_wgrad's addresses), y 16 rows.
template <int TR, typename X>
__device__ __forceinline__ void fh_rows_acc(const tc_args &a, int i0, X x_at, const bf16 *ys, float *dst, float f,
                                            const float *alpha) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, g = l / 4, t = l % 4, ld = fa_ld(a.dp);
    for (int cb = w % 2; cb < a.dp / 16; cb += 2) {
        mma_c acc[2] = {};
        FA_UNROLL
        for (int kc = 0; kc < (TR ? 1 : FH_N / 16); kc++) {
            mma_a pa;
            uint32_t r[4];
            if (TR) ldsm_x4_t(pa.x, x_at(l % 8 + 8 * (l / 16), 8 * (l / 8 % 2)));
            else ldsm_x4(pa.x, x_at(l % 16, 16 * kc + 8 * (l / 16)));
            ldsm_x4_t(r, ys + (16 * kc + l % 16) * ld + 16 * cb + 8 * (l / 16));
            const mma_b b0 = {{r[0], r[1]}}, b1 = {{r[2], r[3]}};
            mma_16816(acc[0], pa, b0);
            mma_16816(acc[1], pa, b1);
        }
        FA_UNROLL
        for (int x = 0; x < 8; x++) {
            const int row = g + 8 * (x % 4 / 2), c = 16 * cb + 8 * (x / 4) + 2 * t + x % 2, i = i0 + row;
            if (i >= a.T || c >= a.d) continue;
            float *y = dst + (size_t)i * a.d + c;
            *y = (alpha ? *y * alpha[row] : *y) + f * acc[x / 4].x[x % 4];
        }
    }
}

// O_h = alpha O_h + P2_h v_h for heads 2s' (warps 0, 1) and 2s'+1 (warps 2, 3) of the v stage;
// O is a.o's rows i0.. of the head (alpha 1 with step 6).
__device__ __forceinline__ void fh_pv(const tc_args &a, const tc_heads &hd, const fh_block &k, int sv,
                                      const bf16 *buf) {
    const int w = threadIdx.x / 32, h = 2 * sv + w / 2;
    if (h >= hd.G) return;
    const bf16 *ps = k.p2 + h * FH_M * FH_PLD;
    fh_rows_acc<0>(a, k.i0, [&](int q, int c) { return ps + q * FH_PLD + c; }, buf + (w / 2) * FH_N * fa_ld(a.dp),
                a.o + (size_t)(k.bh0 + h) * a.T * a.d, 1.0f, hd.ch ? NULL : k.al + h * FH_M);
}

// The state of the query tile k.i0's rows: their document starts, m (bwd: the rows' log-sum-exp,
// else -inf) and l (bwd 2: D, else 0).
__device__ __forceinline__ void fh_rows(const tc_args &a, const tc_heads &hd, fh_block &k, int bwd) {
    const int w = threadIdx.x / 32, t = threadIdx.x % 4;
    FA_UNROLL
    for (int qq = 0; qq < 4; qq++) {
        const int i = k.i0 + 4 * w + qq;
        k.st[qq] = i < a.T ? mta_row_start(a.ds, a.T, k.b, i) : 0;
        FA_UNROLL
        for (int hh = 0; hh < 4; hh++) {
            const int h = 8 * (hh / 2) + 2 * t + hh % 2;
            const size_t at = (size_t)(k.bh0 + h) * a.T + i;
            const int in = i < a.T && h < hd.G;
            k.m[qq][hh] = !bwd ? -INFINITY : in ? a.lse[at] : 0.0f;
            k.l[qq][hh] = bwd == 2 && in ? a.D[at] : 0.0f;
        }
    }
}

// The block's setup: shared arrays, weights, the query tile's rows (fh_rows); S1's (and the
// backward's dP2's) padding heads zero, and the forward's a.o rows.
__device__ __forceinline__ void fh_setup(const tc_args &a, const tc_heads &hd, bf16 *sh, fh_block &k, int bwd) {
    const int ld = fa_ld(a.dp);
    k.s1h = sh + 2 * FH_STAGE * ld, k.s1l = k.s1h + FH_E * FH_MAXG, k.p2 = k.s1l + FH_E * FH_MAXG;
    k.al = (float *)(k.p2 + hd.G * FH_M * FH_PLD), k.ls = k.al + FH_MAXG * FH_M;
    k.bh0 = blockIdx.y * hd.G, k.b = k.bh0 / a.H, k.i0 = (gridDim.x - 1 - blockIdx.x) * FH_M;
    fh_weights(a, hd, k.bh0 % a.H, k);
    fh_rows(a, hd, k, bwd);
    for (int e = threadIdx.x; e < (bwd ? 3 : 2) * FH_E * FH_MAXG; e += TC_THREADS) k.s1h[e] = __float2bfloat16_rn(0.0f);
    for (int e = threadIdx.x; !bwd && e < hd.G * FH_M * a.d; e += TC_THREADS) {
        const int h = e / (FH_M * a.d), i = k.i0 + e % (FH_M * a.d) / a.d;
        if (i < a.T) a.o[((size_t)(k.bh0 + h) * a.T + i) * a.d + e % a.d] = 0.0f;
    }
}

// The end: without step 6 O /= the row's sum; O into out, each row's log-sum-exp into a.lse.
__device__ __forceinline__ void fh_finish(const tc_args &a, const tc_heads &hd, fh_block &k, float *out) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int qq = 0; qq < 4; qq++)
        FA_UNROLL
        for (int hh = 0; hh < 4; hh++) {
            const int h = 8 * (hh / 2) + 2 * t + hh % 2, i = k.i0 + 4 * w + qq;
            if (g || h >= hd.G) continue;
            k.ls[h * FH_M + 4 * w + qq] = hd.ch ? 1.0f : k.l[qq][hh];
            if (i < a.T) a.lse[(size_t)(k.bh0 + h) * a.T + i] = hd.ch ? k.m[qq][hh] : k.m[qq][hh] + logf(k.l[qq][hh]);
        }
    __syncthreads();
    for (int e = threadIdx.x; e < hd.G * FH_M * a.d; e += TC_THREADS) {
        const int h = e / (FH_M * a.d), r = e % (FH_M * a.d) / a.d, i = k.i0 + r;
        const size_t at = ((size_t)(k.bh0 + h) * a.T + i) * a.d + e % a.d;
        if (i < a.T) out[at] = a.o[at] = a.o[at] / k.ls[h * FH_M + r];
    }
}

// Runs a block's stages (fh_walk), cp.async double-buffered in sh: step(p, buf) computes stage p
// from its buffer; switched() runs after a pass's last stage when another pass follows.
template <typename S, typename W>
__device__ __forceinline__ void fh_drive(const tc_args &a, int G, const fh_block &k, const fh_walk &wk, bf16 *sh,
                                         S step, W switched) {
    const int ld = fa_ld(a.dp);
    fh_pos cur = {0, wk.qw ? wk.js : k.i0, wk.qw ? wk.kt : wk.js, 0};
    fh_stage_load(a, k.bh0, G, wk, cur, sh);
    cp_async_commit();
    for (int n = 0; cur.pass < wk.npass; n++) {
        const fh_pos nx = fh_next(wk, cur);
        if (nx.pass < wk.npass) fh_stage_load(a, k.bh0, G, wk, nx, sh + ((n + 1) & 1) * FH_STAGE * ld);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        step(cur, sh + (n & 1) * FH_STAGE * ld);
        __syncthreads();  // before the next stage's copies overwrite this buffer
        if (nx.pass != cur.pass && nx.pass < wk.npass) switched();
        cur = nx;
    }
}

// The forward with head steps for G <= 16 heads, one block per (query tile of FH_M rows, group)
// (grid: x tiles, the last first, y B*H/G): stages as the header says; O (before norm and gate)
// to out and a.o, each row's log-sum-exp to a.lse (of S2 with step 6, as k_tc_head_dq reads it).
__global__ void __launch_bounds__(TC_THREADS) k_fa_head_forward(tc_args a, tc_heads hd, float *out) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    fh_block k;
    fh_setup(a, hd, sh, k, 0);
    fh_walk wk;
    wk.npass = hd.ch ? 2 : 1, wk.P = (hd.G + 1) / 2;
    wk.last = (k.i0 + FH_M < a.T ? k.i0 + FH_M : a.T) - 1;
    wk.js = mta_row_start(a.ds, a.T, k.b, k.i0) / FH_N * FH_N;
    wk.bwd = wk.qw = 0;
    fh_drive(a, hd.G, k, wk, sh,
             [&](fh_pos p, const bf16 *buf) {
                 if (p.s < wk.P) {
                     fh_scores<0>(a, k, hd.G, p.s, p.j0, buf, k.s1h, k.s1l);
                     if (p.s == wk.P - 1) {
                         __syncthreads();
                         fh_softmax(a, hd, k, p.pass + 1 < wk.npass, p.j0);
                     }
                 } else {
                     fh_pv(a, hd, k, p.s - wk.P, buf);
                 }
             },
             [&]() {  // the statistics are final: m becomes the log-sum-exp
                 FA_UNROLL
                 for (int qq = 0; qq < 4; qq++)
                     FA_UNROLL
                     for (int hh = 0; hh < 4; hh++) k.m[qq][hh] += logf(k.l[qq][hh]);
             });
    fh_finish(a, hd, k, out);
}

// The forward's launch (for G <= 16; the caller checks).
void fh_forward(const call *cl, const tc_args &a, const tc_heads &hd, int B, float *out) {
    const size_t sm = fh_smem_bytes(hd.G, a.dp);
    tc_smem_optin(k_fa_head_forward, sm);
    const dim3 grid((unsigned)((a.T + FH_M - 1) / FH_M), (unsigned)(B * a.H / hd.G));
    MTA_LAUNCH(k_fa_head_forward, grid, TC_THREADS, sm, cl->s)(a, hd, out);
}

#endif
