// mta_cuda_fa_heads.cuh: the head steps' forward on mma.sync (docs/cuda.md, "Head mixing and head
// convolution"): k_fa_head_forward, for groups of G <= 32 heads. Included by mta_cuda_tc.cuh after
// mta_cuda_fa2.cuh (its helpers: fa_ld, fa_xyT, fa_row_reduce, FA_UNROLL).
//
// A block owns FH_M = 16 query rows of the G heads of a group and walks key tiles of fh_keys(NQ) keys.
// The kernels are instantiated for NQ = 1 (G <= 16) and NQ = 2 (G <= 32): the mixings' K (and N) is
// the group's heads padded to 16 NQ, so NQ k steps of m16n8k16 and 2 NQ n-tiles of 8 heads. A tile
// holds per entry every head's S1 (hi and lo) and P2 or dP2, so NQ 2 halves the tile's keys (16,
// not 32): each kernel then fits, at d <= 128, the 113 KB a block has with 2 blocks per H100 SM.
// Per key tile, in stages of two heads (cp.async double-buffered: a stage's q and k, or v, tiles):
//   S1[h] = scale q_h k_h^T, masked, into shared memory as [entry][head] (entry = query row, key);
//   step 3 per entry, S2 (entries x heads) = S1 (entries x heads) W1^T: m16n8k16 with K the
//   (padded) heads, A from S1 by ldmatrix, B from W1 in shared memory by ldmatrix;
//   the softmax of S2 in registers (a warp owns 4 query rows of every head);
//   step 6 per entry, P2 = P W2' (W2' the group's block-diagonal head convolution), A = P's C
//   fragments in registers; P2 (with dropout) into shared memory as [head][query][key];
//   O_h += P2_h v_h per head, O (float32) added to a.o in global memory.
// The MMAs' inputs are bf16; S1, W1, P and W2 are each split into hi + lo bf16 (bf16_split) and the
// products summed over hi hi, lo hi and hi lo (three MMAs), so the mixing and the head convolution
// add no rounding beyond the path's (P2 rounded once before P2 v, as P is without head steps).
// Without step 3, W1 is the identity; without step 6, P2 = P.
// With step 6 the forward walks the key tiles twice (statistics, then P from the final ones);
// without it O is rescaled per key tile by the online softmax's alpha.
#ifndef MTAC_ATTN_MTA_CUDA_FA_HEADS_CUH
#define MTAC_ATTN_MTA_CUDA_FA_HEADS_CUH

const int FH_M = 16, FH_N = 32;       // query rows of a tile; keys of a tile with NQ 1
const int FH_MAXG = 32;               // heads of a group: two k steps of the mixing's K

// The mixings' k steps for a group of G heads: 1 (G <= 16), 2 (G <= 32), 0 (more: no kernel).
__host__ __device__ inline int fh_nq(int G) { return G <= 16 ? 1 : G <= FH_MAXG ? 2 : 0; }

// With nq k steps: the tile's keys, their 16-key chunks, the tile pair's entries, P2's leading
// dimension (bf16: rows 80 or 48 bytes apart, so an ldmatrix's 8 rows hit distinct banks) and the
// rows of a stage buffer (two heads' q and k, or v; or the dK, dV kernel's q and dO).
__host__ __device__ constexpr int fh_keys(int nq) { return FH_N / nq; }
__host__ __device__ constexpr int fh_kc(int nq) { return fh_keys(nq) / 16; }
__host__ __device__ constexpr int fh_e(int nq) { return FH_M * fh_keys(nq); }
__host__ __device__ constexpr int fh_pld(int nq) { return fh_keys(nq) + 8; }
__host__ __device__ constexpr int fh_stage(int nq) { return 2 * (FH_M + fh_keys(nq)); }

// A mixing matrix's leading dimension (bf16): 16 nq heads and 8 of padding, so that the 8 rows an
// ldmatrix reads (48 or 80 bytes apart) hit distinct banks.
__host__ __device__ inline int fh_wld(int nq) { return 16 * nq + 8; }
__host__ __device__ inline int fh_wsize(int nq) { return 16 * nq * fh_wld(nq); }

// The shared arrays of a head kernel (kind TC_FWD, TC_DQ or TC_DKDV) for G heads at padded width dp.
struct fh_smem {
    bf16 *stage;     // two stage buffers of sbuf bf16 each
    size_t sbuf;     // fh_sbuf
    bf16 *s1h, *s1l; // S1 hi, lo: fh_e entries of 16 nq heads (fh_s1_at)
    bf16 *p2;        // forward: P2 (G, FH_M, fh_pld); backward: dP2 as S1
    float *dws;      // dQ with nq 2: the 4 warps' sums of W2's kernel gradient, (16 nq)^2 each
    bf16 *w;         // the mixing matrices W1 hi, lo and W2'^T hi, lo (fh_weights)
    float *al, *ls;  // (16 nq heads, FH_M rows): forward, the online softmax's alpha and the sums at
                     // the end; backward, each row's log-sum-exp and D
};
// The bf16 of a stage buffer: fh_stage rows at fa_ld(dp); dQ's also hold its 4 warps' scratch
// (fhq_block), used once the buffer's stage is done.
__host__ __device__ inline size_t fh_sbuf(int kind, int nq, int dp) {
    const size_t rows = (size_t)fh_stage(nq) * fa_ld(dp), scr = 4 * 2 * (size_t)fh_keys(nq) * 16 * nq;
    return kind == TC_DQ && scr > rows ? scr : rows;
}
__host__ __device__ inline size_t fh_carve(int kind, int G, int dp, unsigned char *base, fh_smem *s) {
    const int nq = fh_nq(G), fwd = kind == TC_FWD;  // the row statistics in shared memory for the
                                                    // backward: registers run out (forward: per lane)
    const size_t e = (size_t)fh_e(nq) * 16 * nq;
    carver cv = {base, 0};
    s->sbuf = fh_sbuf(kind, nq, dp);
    s->stage = cv.take<bf16>(2 * s->sbuf);
    s->s1h = cv.take<bf16>(e), s->s1l = cv.take<bf16>(e);
    s->p2 = cv.take<bf16>(fwd ? (size_t)G * FH_M * fh_pld(nq) : e);
    s->dws = cv.take<float>(kind == TC_DQ && nq == 2 ? 4 * (size_t)32 * 32 : 0);
    s->w = cv.take<bf16>(4 * (size_t)fh_wsize(nq));
    s->al = cv.take<float>((size_t)16 * nq * FH_M), s->ls = cv.take<float>((size_t)16 * nq * FH_M);
    return cv.at;
}
size_t fh_smem_bytes(int kind, int G, int dp) {
    fh_smem s;
    return fh_carve(kind, G, dp, NULL, &s);
}

// Where head h of entry e lies in an S1 array of NQ: rows of 16 NQ heads (32 NQ bytes), their
// 16-byte units XOR the row's line index (rows e / (4 / NQ) share a 128-byte line), so the 8 rows
// an ldmatrix reads hit distinct banks.
template <int NQ> __device__ __forceinline__ int fh_s1_at(int e, int h) {
    return e * 16 * NQ + ((h / 8) ^ (e / (4 / NQ) % (2 * NQ))) * 8 + h % 8;
}

// The head of this lane's slot hh (of 4 NQ) in a C fragment of heads: n-tile hh / 2, column 2t + hh % 2.
__device__ __forceinline__ int fh_head(int hh) { return 8 * (hh / 2) + 2 * (threadIdx.x % 4) + hh % 2; }

// The block's mixing matrices into w, each (16 NQ, fh_wld) as [out][in], split into hi and lo:
// W1[out][in] (the identity without step 3) and W2'^T[out][in] = W2'(in, out) = w2[group][in][out]
// within a group of c_h, 0 across groups (the identity without step 6); heads past G 0. The
// forward's mixings read them as B(in, out), the backward's transposed ones as B(out, in) (fh_wfrag).
// nt: the block's threads. fh_wval: entry [out][in] of matrix m (0 W1, 1 W2'^T) of the group at h0.
__device__ __forceinline__ float fh_wval(const tc_args &a, const tc_heads &hd, int h0, int m, int out, int in) {
    const int G = hd.G, c = hd.ch;
    if (in >= G || out >= G) return 0.0f;
    if (m == 0) return hd.mix ? hd.w1[out * a.H + in] : (float)(in == out);
    if (!c) return (float)(in == out);
    if ((h0 + in) / c != (h0 + out) / c) return 0.0f;
    return hd.w2[((size_t)(h0 + in) / c * c + (h0 + in) % c) * c + (h0 + out) % c];
}
template <int NQ>
__device__ __forceinline__ void fh_weights(const tc_args &a, const tc_heads &hd, int h0, bf16 *w, int nt = TC_THREADS) {
    const int mg = 16 * NQ, ld = fh_wld(NQ), sz = fh_wsize(NQ);
    for (int e = threadIdx.x; e < 2 * mg * mg; e += nt) {
        const int m = e / (mg * mg), out = e % (mg * mg) / mg, in = e % mg;
        bf16_split(fh_wval(a, hd, h0, m, out, in), w[2 * m * sz + out * ld + in], w[(2 * m + 1) * sz + out * ld + in]);
    }
}

// The B fragments of n-tiles 2 nb, 2 nb + 1 at k step ks of mixing matrix m ([out][in]): tr 0,
// B(in, out) = m[out][in] (rows n-major, as k in Q K^T); tr 1, B(out, in) = m[out][in] (k-major,
// .trans, as v in P v).
template <int NQ> __device__ __forceinline__ void fh_wfrag(const bf16 *m, int tr, int ks, int nb, mma_b b[2]) {
    const int l = threadIdx.x % 32, ld = fh_wld(NQ);
    uint32_t r[4];
    if (tr) ldsm_x4_t(r, m + (16 * ks + l % 16) * ld + 16 * nb + 8 * (l / 16));
    else ldsm_x4(r, m + (16 * nb + l % 8 + 8 * (l / 16)) * ld + 16 * ks + 8 * (l / 8 % 2));
    b[0] = mma_b{{r[0], r[1]}}, b[1] = mma_b{{r[2], r[3]}};
}

// c += (A_hi + A_lo) (B_hi + B_lo) less A_lo B_lo, over two n-tiles (AL 0: A_lo is 0, two MMAs).
template <int AL = 1>
__device__ __forceinline__ void fh_mma3(mma_c c[2], const mma_a &ah, const mma_a &al, const mma_b bh[2],
                                        const mma_b bl[2]) {
    FA_UNROLL
    for (int n = 0; n < 2; n++) {
        mma_16816(c[n], ah, bh[n]);
        if (AL) mma_16816(c[n], al, bh[n]);
        mma_16816(c[n], ah, bl[n]);
    }
}

// y (a 16-entry chunk's 2 NQ n-tiles of out heads) = x m over the NQ k steps, x = ah + al per k
// step, m a mixing matrix (lo at m + fh_wsize) read as fh_wfrag's tr (fh_mma3).
template <int NQ, int AL>
__device__ __forceinline__ void fh_mixmat(mma_c y[2 * NQ], const mma_a ah[NQ], const mma_a al[NQ], const bf16 *m, int tr) {
    FA_UNROLL
    for (int n = 0; n < 2 * NQ; n++) y[n] = mma_c{};
    FA_UNROLL
    for (int nb = 0; nb < NQ; nb++)
        FA_UNROLL
        for (int ks = 0; ks < NQ; ks++) {
            mma_b bh[2], bl[2];
            fh_wfrag<NQ>(m, tr, ks, nb, bh);
            fh_wfrag<NQ>(m + fh_wsize(NQ), tr, ks, nb, bl);
            fh_mma3<AL>(y + 2 * nb, ah[ks], al[ks], bh, bl);
        }
}

// The hi and lo A fragments of a 16 x 16 chunk held as C fragments (fa_a_of's layout).
__device__ __forceinline__ void fh_split(const mma_c c[2], mma_a &hi, mma_a &lo) {
    FA_UNROLL
    for (int k = 0; k < 4; k++) bf16x2_split(c[k / 2].x[2 * (k % 2)], c[k / 2].x[2 * (k % 2) + 1], hi.x[k], lo.x[k]);
}

// y = x m per 16-entry chunk of a query row (fh_kc), x in C fragments split into hi and lo (fh_mixmat).
template <int NQ>
__device__ __forceinline__ void fh_mix_regs(const mma_c x[fh_kc(NQ)][2 * NQ], const bf16 *m, int tr,
                                            mma_c y[fh_kc(NQ)][2 * NQ]) {
    FA_UNROLL
    for (int kc = 0; kc < fh_kc(NQ); kc++) {
        mma_a hi[NQ], lo[NQ];
        FA_UNROLL
        for (int ks = 0; ks < NQ; ks++) fh_split(x[kc] + 2 * ks, hi[ks], lo[ks]);
        fh_mixmat<NQ, 1>(y[kc], hi, lo, m, tr);
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
template <int NQ> __device__ __forceinline__ fh_pos fh_next(const fh_walk &wk, fh_pos p) {
    if (++p.s < fh_stages(wk, p.pass)) return p;
    int &t = wk.qw ? p.i0 : p.j0;
    p.s = 0, t += wk.qw ? FH_M : fh_keys(NQ);
    if (t > wk.last) t = wk.js, p.pass++;
    return p;
}

// Issues stage p's copies into buf.
template <int NQ>
__device__ __forceinline__ void fh_stage_load(const tc_args &a, int bh0, int G, const fh_walk &wk, fh_pos p, bf16 *buf) {
    const int dp = a.dp, ld = fa_ld(dp), N = fh_keys(NQ);
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
            bf16 *t = buf + u * (FH_M + N) * ld;
            fa_load_rows(t, (kind ? a.dO : a.q) + qs, p.i0, FH_M, a.T, dp);
            fa_load_rows(t + FH_M * ld, (kind ? a.v : a.k) + kv, p.j0, N, a.T, dp);
        } else {
            fa_load_rows(buf + u * N * ld, (kind == 1 ? a.v : a.k) + kv, p.j0, N, a.T, dp);
        }
    }
}

// The shared arrays and the per-lane state of a block (NQ: fh_nq of its G).
template <int NQ> struct fh_block {
    bf16 *s1h, *s1l, *p2;  // S1 hi, lo (fh_s1_at); P2 (G, FH_M, fh_pld), or the backward's dP2
    bf16 *w;               // the mixing matrices (fh_weights): W1 at w, W2'^T at w + 2 fh_wsize
    float *al, *ls;        // (16 NQ heads, 16 rows): forward, alpha and the sums at the end; backward,
                           // the rows' log-sum-exp and D (fh_smem)
    int b, bh0, i0, st[4];  // st: the document starts of the warp's 4 query rows (4w + qq)
    float m[4][4 * NQ], l[4][4 * NQ];  // forward: per query row qq and head slot hh (fh_head): max (then lse), sum
};

// x y^T for 16 rows of x and 8 of y, one n-tile (fa_xyT's first): y's B fragments by ldmatrix x2,
// whose addresses lanes 0-15 give (fa_xyT's).
__device__ __forceinline__ void fh_xyT1(mma_c &c, const bf16 *x, const bf16 *y, int ld, int dp) {
    const int l = threadIdx.x % 32;
    const bf16 *xl = x + (l % 16) * ld + 8 * (l / 16), *yl = y + (l % 8) * ld + 8 * (l / 8 % 2);
    for (int k = 0; k < dp; k += 16) {
        mma_a xa;
        mma_b yb;
        ldsm_x4(xa.x, xl + k);
        ldsm_x2(yb.x, yl + k);
        mma_16816(c, xa, yb);
    }
}

// The products x y^T of heads 2s (warps 0, 1) and 2s+1 (warps 2, 3), warp w the keys of half w % 2
// of the tile (NT n-tiles), x and y a stage's rows (q, k or dO, v), 0 where the row does not see the
// key, into [entry][head] arrays: S1 = scale q k^T split into hi and lo, or (DP2) dP2 = dropout(dO v^T) in hi.
template <int NQ, int DP2>
__device__ __forceinline__ void fh_scores(const tc_args &a, const fh_block<NQ> &k, int G, int s, int j0,
                                          const bf16 *buf, bf16 *hi, bf16 *lo) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4, h = 2 * s + w / 2, ld = fa_ld(a.dp);
    constexpr int N = fh_keys(NQ), NT = N / 16;
    if (h >= G) return;
    const bf16 *qs = buf + (w / 2) * (FH_M + N) * ld, *ks = qs + (FH_M + N / 2 * (w % 2)) * ld;
    mma_c c[NT] = {};
    if constexpr (NT == 2) fa_xyT(c, qs, ks, ld, a.dp);
    else fh_xyT1(c[0], qs, ks, ld, a.dp);
    int st[2];  // the document starts of this lane's rows g, g + 8
    FA_UNROLL
    for (int r = 0; r < 2; r++) st[r] = k.i0 + g + 8 * r < a.T ? mta_row_start(a.ds, a.T, k.b, k.i0 + g + 8 * r) : 0;
    FA_UNROLL
    for (int n = 0; n < NT; n++)
        FA_UNROLL
        for (int x = 0; x < 4; x++) {
            const int r = g + 8 * (x / 2), key = N / 2 * (w % 2) + 8 * n + 2 * t + x % 2, i = k.i0 + r, j = j0 + key;
            float v = 0.0f;
            if (fa_ok(a.T, i, st[x / 2], j)) v = c[n].x[x] * (DP2 ? tc_drop(a, k.bh0 + h, i, j) : a.scale);
            const int at = fh_s1_at<NQ>(r * N + key, h);
            if (DP2) hi[at] = __float2bfloat16_rn(v);
            else bf16_split(v, hi[at], lo[at]);
        }
}

// S2 of the warp's query row 4w + qq at the tile's 16-key chunks: S1 W1^T (fh_mixmat).
template <int NQ>
__device__ __forceinline__ void fh_mix(const fh_block<NQ> &k, int qq, mma_c s2[fh_kc(NQ)][2 * NQ]) {
    const int l = threadIdx.x % 32, w = threadIdx.x / 32;
    FA_UNROLL
    for (int kc = 0; kc < fh_kc(NQ); kc++) {
        mma_a ah[NQ], al[NQ];
        FA_UNROLL
        for (int ks = 0; ks < NQ; ks++) {
            const int e = (4 * w + qq) * fh_keys(NQ) + 16 * kc + l % 16;
            const int at = fh_s1_at<NQ>(e, 16 * ks + 8 * (l / 16));
            ldsm_x4(ah[ks].x, k.s1h + at);
            ldsm_x4(al[ks].x, k.s1l + at);
        }
        fh_mixmat<NQ, 1>(s2[kc], ah, al, k.w, 0);
    }
}

// This lane's entry of S2 chunks for head slot hh and row r: s2[kc][hh / 2].x[2 r + hh % 2] (the
// head kernels' headers use it; mta_cuda_fa_heads_dq.cuh, included after, undefines it).
#define FH_AT(s2, kc, hh, r) (s2)[kc][(hh) / 2].x[2 * (r) + (hh) % 2]

// The online statistics of query row qq: per head slot the new max, alpha and sum (rows of the
// key chunks: key 16 kc + g + 8 r); with keep, s2 becomes P = exp(S2 - m) (0 where masked).
template <int NQ>
__device__ __forceinline__ void fh_online(const tc_args &a, fh_block<NQ> &k, int qq, int j0,
                                          mma_c s2[fh_kc(NQ)][2 * NQ], float alpha[4 * NQ]) {
    const int i = k.i0 + 4 * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4;
    FA_UNROLL
    for (int hh = 0; hh < 4 * NQ; hh++) {
        float mx = k.m[qq][hh], sum = 0.0f;
        FA_UNROLL
        for (int x = 0; x < 2 * fh_kc(NQ); x++)
            if (fa_ok(a.T, i, k.st[qq], j0 + 16 * (x / 2) + g + 8 * (x % 2))) mx = fmaxf(mx, FH_AT(s2, x / 2, hh, x % 2));
        mx = fa_row_reduce<4, 16>(mx, 0);
        alpha[hh] = mx == -INFINITY ? 1.0f : expf(k.m[qq][hh] - mx);
        FA_UNROLL
        for (int x = 0; x < 2 * fh_kc(NQ); x++) {
            float &v = FH_AT(s2, x / 2, hh, x % 2);
            v = fa_ok(a.T, i, k.st[qq], j0 + 16 * (x / 2) + g + 8 * (x % 2)) ? expf(v - mx) : 0.0f;
            sum += v;
        }
        k.l[qq][hh] = k.l[qq][hh] * alpha[hh] + fa_row_reduce<4, 16>(sum, 1), k.m[qq][hh] = mx;
    }
}

// P = exp(S2 - lse) of query row qq where the row sees the key, else 0 (lse(hh): head slot hh's).
template <int NQ, typename L>
__device__ __forceinline__ void fh_probs(const tc_args &a, const fh_block<NQ> &k, int qq, int j0,
                                         mma_c s2[fh_kc(NQ)][2 * NQ], L lse) {
    const int i = k.i0 + 4 * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4;
    FA_UNROLL
    for (int hh = 0; hh < 4 * NQ; hh++)
        FA_UNROLL
        for (int x = 0; x < 2 * fh_kc(NQ); x++) {
            float &v = FH_AT(s2, x / 2, hh, x % 2);
            v = fa_ok(a.T, i, k.st[qq], j0 + 16 * (x / 2) + g + 8 * (x % 2)) ? expf(v - lse(hh)) : 0.0f;
        }
}

// P2 of query row qq with dropout, to bf16 at at(h, q, key) (heads < G).
template <int NQ, typename At>
__device__ __forceinline__ void fh_store_p2(const tc_args &a, const fh_block<NQ> &k, int G, int qq, int j0,
                                            const mma_c p2[fh_kc(NQ)][2 * NQ], At at) {
    const int q = 4 * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4;
    FA_UNROLL
    for (int hh = 0; hh < 4 * NQ; hh++)
        FA_UNROLL
        for (int x = 0; x < 2 * fh_kc(NQ); x++) {
            const int h = fh_head(hh), key = 16 * (x / 2) + g + 8 * (x % 2);
            if (h >= G) continue;
            const float v = FH_AT(p2, x / 2, hh, x % 2);  // 0 where the row does not see the key
            const float f = v != 0.0f ? tc_drop(a, k.bh0 + h, k.i0 + q, j0 + key) : 0.0f;
            *at(h, q, key) = __float2bfloat16_rn(v * f);
        }
}

// The softmax and the head convolution of the tile's S1 (after its last q, k stage): with step 6
// in the statistics pass only the statistics; else P2 into p2 and (without step 6) alpha into al.
template <int NQ>
__device__ __forceinline__ void fh_softmax(const tc_args &a, const tc_heads &hd, fh_block<NQ> &k, int stats, int j0) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
    const auto p2_at = [&](int h, int q, int key) { return k.p2 + (h * FH_M + q) * fh_pld(NQ) + key; };
    FA_UNROLL
    for (int qq = 0; qq < 4; qq++) {
        mma_c s2[fh_kc(NQ)][2 * NQ];
        fh_mix(k, qq, s2);
        float alpha[4 * NQ];
        if (hd.ch && !stats) {
            fh_probs(a, k, qq, j0, s2, [&](int hh) { return k.m[qq][hh]; });
            mma_c p2[fh_kc(NQ)][2 * NQ];
            fh_mix_regs<NQ>(s2, k.w + 2 * fh_wsize(NQ), 0, p2);
            fh_store_p2(a, k, hd.G, qq, j0, p2, p2_at);
            continue;
        }
        fh_online(a, k, qq, j0, s2, alpha);
        if (stats) continue;
        fh_store_p2(a, k, hd.G, qq, j0, s2, p2_at);
        FA_UNROLL
        for (int hh = 0; hh < 4 * NQ; hh++)
            if (g == 0) k.al[fh_head(hh) * FH_M + 4 * w + qq] = alpha[hh];
    }
}

// dst = alpha dst + f X y for a head's 16 rows from i0 (dst: its (T, d) slab; alpha NULL: 1), X
// (16 x 16 KC) in shared memory, row q's 8 columns from c at x_at(q, c), y the (16 KC, dp) rows of a
// stage; of the nw warps that share the head, warp w takes the 16-column blocks w % nw, w % nw + nw,
// ... (each entry one lane's: the same sums for any nw). With TR, X^T y instead: X (16 x 16) read
// transposed by ldmatrix .trans (fhq_wgrad's addresses), y 16 rows. KC: X's 16-column chunks
// without TR (fh_kc; the every-step kernels' tiles have one). ATOMIC: dst += f X y by atomicAdd
// (alpha NULL), for sums whose terms several blocks add in no fixed order. dst's first row is row
// row0 (a buffer of some rows of the slab: k_fa_every_dkdv's chunks).
template <int TR, int KC = FH_N / 16, bool ATOMIC = false, typename X>
__device__ __forceinline__ void fh_rows_acc(const tc_args &a, int i0, X x_at, const bf16 *ys, float *dst, float f,
                                            const float *alpha, int nw = 2, int row0 = 0) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, g = l / 4, t = l % 4, ld = fa_ld(a.dp);
    for (int cb = w % nw; cb < a.dp / 16; cb += nw) {
        mma_c acc[2] = {};
        FA_UNROLL
        for (int kc = 0; kc < (TR ? 1 : KC); kc++) {
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
            float *y = dst + (size_t)(i - row0) * a.d + c;
            if (ATOMIC) atomicAdd(y, f * acc[x / 4].x[x % 4]);
            else *y = (alpha ? *y * alpha[row] : *y) + f * acc[x / 4].x[x % 4];
        }
    }
}

// O_h = alpha O_h + P2_h v_h for heads 2s' (warps 0, 1) and 2s'+1 (warps 2, 3) of the v stage;
// O is a.o's rows i0.. of the head (alpha 1 with step 6).
template <int NQ>
__device__ __forceinline__ void fh_pv(const tc_args &a, const tc_heads &hd, const fh_block<NQ> &k, int sv,
                                      const bf16 *buf) {
    const int w = threadIdx.x / 32, h = 2 * sv + w / 2;
    if (h >= hd.G) return;
    const bf16 *ps = k.p2 + h * FH_M * fh_pld(NQ);
    fh_rows_acc<0, fh_kc(NQ)>(a, k.i0, [&](int q, int c) { return ps + q * fh_pld(NQ) + c; },
                   buf + (w / 2) * fh_keys(NQ) * fa_ld(a.dp),
                   a.o + (size_t)(k.bh0 + h) * a.T * a.d, 1.0f, hd.ch ? NULL : k.al + h * FH_M);
}

// The state of the query tile k.i0's rows: their document starts; forward, m = -inf and l = 0;
// backward, the rows' log-sum-exp into al and D (bwd 2; else 0) into ls (heads past G 0).
template <int NQ> __device__ __forceinline__ void fh_rows(const tc_args &a, const tc_heads &hd, fh_block<NQ> &k, int bwd) {
    const int w = threadIdx.x / 32;
    FA_UNROLL
    for (int qq = 0; qq < 4; qq++) {
        const int i = k.i0 + 4 * w + qq;
        k.st[qq] = i < a.T ? mta_row_start(a.ds, a.T, k.b, i) : 0;
        FA_UNROLL
        for (int hh = 0; hh < 4 * NQ && !bwd; hh++) k.m[qq][hh] = -INFINITY, k.l[qq][hh] = 0.0f;
    }
    for (int e = threadIdx.x; bwd && e < 16 * NQ * FH_M; e += TC_THREADS) {
        const int h = e / FH_M, i = k.i0 + e % FH_M, in = i < a.T && h < hd.G;
        const size_t at = (size_t)(k.bh0 + h) * a.T + i;
        k.al[e] = in ? a.lse[at] : 0.0f;
        k.ls[e] = bwd == 2 && in ? a.D[at] : 0.0f;
    }
}

// f(h, r, at) for each entry at of a.o (and out) of the block's rows i0 + r < T (r < FH_M) and
// heads bh0 + h (h < G): the forward's O zeroed before it accumulates there, and copied out at the
// end (here and in the every-step forward, FE_M = FH_M).
template <typename F> __device__ __forceinline__ void fh_o_rows(const tc_args &a, int G, int bh0, int i0, F f) {
    for (int e = threadIdx.x; e < G * FH_M * a.d; e += TC_THREADS) {
        const int h = e / (FH_M * a.d), r = e % (FH_M * a.d) / a.d;
        if (i0 + r < a.T) f(h, r, ((size_t)(bh0 + h) * a.T + i0 + r) * a.d + e % a.d);
    }
}

// The block's setup for kernel kind: shared arrays (fh_carve), the mixing matrices, the query
// tile's rows (fh_rows); S1's (and the backward's dP2's) padding heads zero, and the forward's a.o
// rows.
template <int NQ>
__device__ __forceinline__ fh_smem fh_setup(const tc_args &a, const tc_heads &hd, unsigned char *sh, fh_block<NQ> &k,
                                            int kind) {
    fh_smem s;
    fh_carve(kind, hd.G, a.dp, sh, &s);
    k.s1h = s.s1h, k.s1l = s.s1l, k.p2 = s.p2, k.w = s.w, k.al = s.al, k.ls = s.ls;
    k.bh0 = blockIdx.y * hd.G, k.b = k.bh0 / a.H, k.i0 = (gridDim.x - 1 - blockIdx.x) * FH_M;
    fh_weights<NQ>(a, hd, k.bh0 % a.H, k.w);
    fh_rows(a, hd, k, kind == TC_DKDV ? 2 : kind == TC_DQ);
    const bf16 zero = __float2bfloat16_rn(0.0f);
    for (int e = threadIdx.x; e < fh_e(NQ) * 16 * NQ; e += TC_THREADS) {
        k.s1h[e] = k.s1l[e] = zero;
        if (kind != TC_FWD) k.p2[e] = zero;
    }
    if (kind == TC_FWD) fh_o_rows(a, hd.G, k.bh0, k.i0, [&](int, int, size_t at) { a.o[at] = 0.0f; });
    return s;
}

// The end: without step 6 O /= the row's sum; O into out, each row's log-sum-exp into a.lse.
template <int NQ> __device__ __forceinline__ void fh_finish(const tc_args &a, const tc_heads &hd, fh_block<NQ> &k, float *out) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
    FA_UNROLL
    for (int qq = 0; qq < 4; qq++)
        FA_UNROLL
        for (int hh = 0; hh < 4 * NQ; hh++) {
            const int h = fh_head(hh), i = k.i0 + 4 * w + qq;
            if (g || h >= hd.G) continue;
            k.ls[h * FH_M + 4 * w + qq] = hd.ch ? 1.0f : k.l[qq][hh];
            if (i < a.T) a.lse[(size_t)(k.bh0 + h) * a.T + i] = hd.ch ? k.m[qq][hh] : k.m[qq][hh] + logf(k.l[qq][hh]);
        }
    __syncthreads();
    fh_o_rows(a, hd.G, k.bh0, k.i0,
              [&](int h, int r, size_t at) { out[at] = a.o[at] = a.o[at] / k.ls[h * FH_M + r]; });
}

// Runs a block's stages (fh_walk), cp.async double-buffered in s's stage buffers: step(p, buf)
// computes stage p from its buffer; switched() runs after a pass's last stage when another pass
// follows.
template <int NQ, typename S, typename W>
__device__ __forceinline__ void fh_drive(const tc_args &a, int G, const fh_block<NQ> &k, const fh_walk &wk,
                                         const fh_smem &s, S step, W switched) {
    fh_pos cur = {0, wk.qw ? wk.js : k.i0, wk.qw ? wk.kt : wk.js, 0};
    fh_stage_load<NQ>(a, k.bh0, G, wk, cur, s.stage);
    cp_async_commit();
    for (int n = 0; cur.pass < wk.npass; n++) {
        const fh_pos nx = fh_next<NQ>(wk, cur);
        if (nx.pass < wk.npass) fh_stage_load<NQ>(a, k.bh0, G, wk, nx, s.stage + ((n + 1) & 1) * s.sbuf);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        step(cur, s.stage + (n & 1) * s.sbuf);
        __syncthreads();  // before the next stage's copies overwrite this buffer
        if (nx.pass != cur.pass && nx.pass < wk.npass) switched();
        cur = nx;
    }
}

// The forward with head steps for G <= 16 NQ heads, one block per (query tile of FH_M rows, group)
// (grid: x tiles, the last first, y B*H/G): stages as the header says; O (before norm and gate)
// to out and a.o, each row's log-sum-exp to a.lse (of S2 with step 6, as k_fa_head_dq reads it).
template <int NQ>
__global__ void __launch_bounds__(TC_THREADS, 2) k_fa_head_forward_t(tc_args a, tc_heads hd, float *out) {
    MTA_DYNAMIC_SHARED(unsigned char, sh);
    fh_block<NQ> k;
    const fh_smem s = fh_setup(a, hd, sh, k, TC_FWD);
    fh_walk wk;
    wk.npass = hd.ch ? 2 : 1, wk.P = (hd.G + 1) / 2;
    wk.last = (k.i0 + FH_M < a.T ? k.i0 + FH_M : a.T) - 1;
    wk.js = mta_row_start(a.ds, a.T, k.b, k.i0) / fh_keys(NQ) * fh_keys(NQ);
    wk.bwd = wk.qw = 0;
    fh_drive(a, hd.G, k, wk, s,
             [&](fh_pos p, const bf16 *buf) {
                 if (p.s < wk.P) {
                     fh_scores<NQ, 0>(a, k, hd.G, p.s, p.j0, buf, k.s1h, k.s1l);
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
                     for (int hh = 0; hh < 4 * NQ; hh++) k.m[qq][hh] += logf(k.l[qq][hh]);
             });
    fh_finish(a, hd, k, out);
}

// The forward's launch (hd.nq 1 or 2; the caller checks that its shared memory fits).
template <int NQ> void fh_forward_t(const call *cl, const tc_args &a, const tc_heads &hd, int B, float *out) {
    void (*const k_fa_head_forward)(tc_args, tc_heads, float *) = k_fa_head_forward_t<NQ>;
    const size_t sm = fh_smem_bytes(TC_FWD, hd.G, a.dp);
    tc_smem_optin(k_fa_head_forward, sm);
    const dim3 grid((unsigned)((a.T + FH_M - 1) / FH_M), (unsigned)(B * a.H / hd.G));
    MTA_LAUNCH(k_fa_head_forward, grid, TC_THREADS, sm, cl->s)(a, hd, out);
}
void fh_forward(const call *cl, const tc_args &a, const tc_heads &hd, int B, float *out) {
    if (hd.nq == 2) fh_forward_t<2>(cl, a, hd, B, out);
    else fh_forward_t<1>(cl, a, hd, B, out);
}

#endif
