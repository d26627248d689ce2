// mta_cuda_fa_heads_dq.cuh: the head steps' dQ on mma.sync, k_fa_head_dq (docs/cuda.md, "Head
// mixing and head convolution"), for groups of G <= 32 heads (NQ as the forward's). Included by mta_cuda_tc.cuh after
// mta_cuda_fa_heads.cuh, whose tiles, S1 layout and helpers it shares.
//
// A block owns 16 query rows of the group's G heads, as the forward, and walks the key tiles twice:
// pass 0 sums D = rowsum(P dP) per head and row; pass 1 adds scale dS1 k to dq and the kernel
// gradients' terms. Per key tile, stages of two heads: q, k (S1 as the forward), dO, v
// (dP2 = dropout(dO v^T) into shared memory as [entry][head], bf16), and in pass 1 k (dq). After
// the last dO, v stage each warp takes 4 query rows of every head: S2 = S1 W1^T, P = exp(S2 - lse),
// dP = dP2 W2'^T (the transposed head convolution; the MMA's B is W2' read transposed), and in
// pass 1 dS2 = P (dP - D), dS1 = dS2 W1 (into the warp's rows of S1's lo array, which it has read:
// [head][key] per query row, 16-byte units XOR-swizzled by the row so an ldmatrix's 8 rows hit
// distinct banks), dW1 += dS2^T S1 and dW2' += P^T dP2 (MMAs with the entries as K: dS2 and P go
// through the warp's scratch as [entry][head] hi and lo and are read back transposed by
// ldmatrix .trans; the scratch lies in the stage buffer just done). The kernel gradients are
// summed per warp over the block's entries in order, then over the 4 warps in order into the
// block's partial (hwp).
#ifndef MTAC_ATTN_MTA_CUDA_FA_HEADS_DQ_CUH
#define MTAC_ATTN_MTA_CUDA_FA_HEADS_DQ_CUH

// dS1 of head h, query row q, key: in S1's lo array, the row's fh_keys x 16 NQ bf16 ([head][key],
// 16-byte units XOR q % 8).
template <int NQ> __device__ __forceinline__ int fhq_ds_at(int h, int q, int key) {
    constexpr int N = fh_keys(NQ);
    return q * N * 16 * NQ + (((h * N + key) / 8) ^ (q % 8)) * 8 + key % 8;
}

// The warp's kernel gradient sums, (out, in) of W1 and (in, out) of W2', are C fragments (16-row
// tiles, n-tiles) in registers with NQ 1; with NQ 2 W1's are (32 registers) and W2's are in
// shared memory (dws: the warp's 32 x 32 floats; 32 more registers would spill), each row's terms
// added there in order (fhq_wgrad_sum).
template <int NQ> struct fhq_block {
    fh_block<NQ> f;                      // the forward's arrays and state (al: lse; ls: D)
    bf16 *d2;                            // dP2 (fh_s1_at)
    float *dws;                          // NQ 2: this warp's sums of W2's
    mma_c dw1[NQ][2 * NQ], dw2[1][2 * NQ];  // this warp's sums: W1's; W2's with NQ 1
};

// dP of query row qq's two chunks: dP2 W2'^T (hi of dP2 by W2's hi and lo: fh_mixmat without A lo).
template <int NQ>
__device__ __forceinline__ void fhq_dp(const fhq_block<NQ> &k, int qq, mma_c dp[fh_kc(NQ)][2 * NQ]) {
    const int l = threadIdx.x % 32, w = threadIdx.x / 32;
    FA_UNROLL
    for (int kc = 0; kc < fh_kc(NQ); kc++) {
        mma_a d[NQ];
        const int e = (4 * w + qq) * fh_keys(NQ) + 16 * kc + l % 16;
        FA_UNROLL
        for (int ks = 0; ks < NQ; ks++) ldsm_x4(d[ks].x, k.d2 + fh_s1_at<NQ>(e, 16 * ks + 8 * (l / 16)));
        fh_mixmat<NQ, 0>(dp[kc], d, d, k.f.w + 2 * fh_wsize(NQ), 1);
    }
}

// This warp's scratch scr: x (C fragments of 16 entries x 16 NQ heads per chunk) as hi, then lo
// [entry][head] (scr is an argument, not a member of the block, so that nvcc sees its space:
// stores to it are STS).
template <int NQ> __device__ __forceinline__ void fhq_to_scratch(bf16 *scr, const mma_c x[fh_kc(NQ)][2 * NQ]) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int kc = 0; kc < fh_kc(NQ); kc++)
        FA_UNROLL
        for (int n = 0; n < 2 * NQ; n++)
            FA_UNROLL
            for (int i = 0; i < 4; i++) {
                const int at = fh_s1_at<NQ>(16 * kc + g + 8 * (i / 2), 8 * n + 2 * t + i % 2);
                bf16_split(x[kc][n].x[i], scr[at], scr[fh_keys(NQ) * 16 * NQ + at]);
            }
    __syncwarp();
}

// acc (16 x 16 NQ: the scratch scr's heads 16 mt.. as rows) += scratch^T Y over query row qq's
// fh_keys entries, Y [entry][head] rows of S1 (yh, yl; yl NULL: hi only) at entry e0: A from the scratch by
// ldmatrix .trans (matrix j = l / 8: entries 8 (j / 2).., heads 16 mt + 8 (j % 2)..), B from Y the
// same way as fa_acc's (entries l % 16, heads 16 nb + 8 (l / 16)..).
template <int NQ>
__device__ __forceinline__ void fhq_wgrad(const bf16 *scr, const bf16 *yh, const bf16 *yl, int e0, int mt,
                                          mma_c acc[2 * NQ]) {
    const int l = threadIdx.x % 32;
    FA_UNROLL
    for (int kc = 0; kc < fh_kc(NQ); kc++) {
        mma_a ah, al;
        const int ea = 16 * kc + l % 8 + 8 * (l / 16), eb = e0 + 16 * kc + l % 16;
        ldsm_x4_t(ah.x, scr + fh_s1_at<NQ>(ea, 16 * mt + 8 * (l / 8 % 2)));
        ldsm_x4_t(al.x, scr + fh_keys(NQ) * 16 * NQ + fh_s1_at<NQ>(ea, 16 * mt + 8 * (l / 8 % 2)));
        FA_UNROLL
        for (int nb = 0; nb < NQ; nb++) {
            uint32_t r[4];
            ldsm_x4_t(r, yh + fh_s1_at<NQ>(eb, 16 * nb + 8 * (l / 16)));
            const mma_b bh[2] = {{{r[0], r[1]}}, {{r[2], r[3]}}};
            mma_b bl[2] = {};
            if (yl) {
                ldsm_x4_t(r, yl + fh_s1_at<NQ>(eb, 16 * nb + 8 * (l / 16)));
                bl[0] = mma_b{{r[0], r[1]}}, bl[1] = mma_b{{r[2], r[3]}};
            }
            fh_mma3(acc + 2 * nb, ah, al, bh, bl);
        }
    }
    __syncwarp();
}

// The terms of query row qq (scratch scr) added to the warp's kernel gradient sum m (0: W1's, in
// sum; 1: W2's, in sum with NQ 1, in dws with NQ 2).
template <int NQ>
__device__ __forceinline__ void fhq_wgrad_sum(const fhq_block<NQ> &k, const bf16 *scr, const bf16 *yh,
                                              const bf16 *yl, int e0, mma_c sum[][2 * NQ], int m) {
    if (NQ == 1 || m == 0) {
        FA_UNROLL
        for (int mt = 0; mt < NQ; mt++) fhq_wgrad<NQ>(scr, yh, yl, e0, mt, sum[mt]);
        return;
    }
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    float *d = k.dws;
    FA_UNROLL
    for (int mt = 0; mt < NQ; mt++) {  // an m-tile at a time: fewer registers
        mma_c acc[2 * NQ] = {};
        fhq_wgrad<NQ>(scr, yh, yl, e0, mt, acc);
        FA_UNROLL
        for (int n = 0; n < 2 * NQ; n++)
            FA_UNROLL
            for (int x = 0; x < 4; x++) d[(16 * mt + g + 8 * (x / 2)) * 32 + 8 * n + 2 * t + x % 2] += acc[n].x[x];
    }
}

// dS1 = dS2 W1 of query row qq into its rows of S1's lo array (fhq_ds_at), heads < G: a 16-key chunk
// at a time (fh_mix_regs' product per chunk; fewer registers).
template <int NQ>
__device__ __forceinline__ void fhq_store_ds(const fhq_block<NQ> &k, int G, int qq,
                                             const mma_c ds2[fh_kc(NQ)][2 * NQ]) {
    const int q = 4 * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4;
    __syncwarp();  // the warp's lanes have read the row's S1 lo (fh_mix, fhq_wgrad)
    FA_UNROLL
    for (int kc = 0; kc < fh_kc(NQ); kc++) {
        mma_a hi[NQ], lo[NQ];
        mma_c ds1[2 * NQ];
        FA_UNROLL
        for (int ks = 0; ks < NQ; ks++) fh_split(ds2[kc] + 2 * ks, hi[ks], lo[ks]);
        fh_mixmat<NQ, 1>(ds1, hi, lo, k.f.w, 1);
        FA_UNROLL
        for (int hh = 0; hh < 4 * NQ; hh++)
            FA_UNROLL
            for (int r = 0; r < 2; r++) {
                const int h = fh_head(hh), key = 16 * kc + g + 8 * r;
                if (h < G) k.f.s1l[fhq_ds_at<NQ>(h, q, key)] = __float2bfloat16_rn(ds1[hh / 2].x[2 * r + hh % 2]);
            }
    }
}

// The tile's work after its last dO, v stage, per query row of the warp: P and dP; pass 0 adds
// P dP to this lane's D terms; pass 1 the kernel gradients' terms and dS1, or with KV (the dK, dV
// kernel) dS1 and P2 with dropout, over the row's S1 hi (read) as dS1 over its lo (fhq_ds_at).
// scr: this warp's scratch (dQ's pass 1).
template <int NQ, int KV>
__device__ __forceinline__ void fhq_step(const tc_args &a, const tc_heads &hd, fhq_block<NQ> &k, int pass, int j0,
                                         bf16 *scr) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
    FA_UNROLL
    for (int qq = 0; qq < 4; qq++) {
        const int row = 4 * w + qq;
        mma_c p[fh_kc(NQ)][2 * NQ], dp[fh_kc(NQ)][2 * NQ];
        fh_mix(k.f, qq, p);
        fh_probs(a, k.f, qq, j0, p, [&](int hh) { return k.f.al[fh_head(hh) * FH_M + row]; });
        fhq_dp(k, qq, dp);
        FA_UNROLL
        for (int hh = 0; hh < 4 * NQ; hh++) {
            float *D = k.f.ls + fh_head(hh) * FH_M + row, sum = 0.0f;
            FA_UNROLL
            for (int x = 0; x < 2 * fh_kc(NQ); x++) {
                float &v = FH_AT(dp, x / 2, hh, x % 2);
                const float pv = FH_AT(p, x / 2, hh, x % 2);
                if (!pass) sum += pv * v;
                else v = pv * (v - *D);  // dS2
            }
            if (pass) continue;
            sum = fa_row_reduce<4, 16>(sum, 1);  // the tile's terms of the row: its 8 lanes of equal t
            if (g == 0) *D += sum;
        }
        if (!pass) continue;
        const int e0 = (4 * w + qq) * fh_keys(NQ);
        if (KV) {
            fhq_store_ds(k, hd.G, qq, dp);
            const auto at = [&](int h, int q, int key) { return k.f.s1h + fhq_ds_at<NQ>(h, q, key); };
            mma_c p2[fh_kc(NQ)][2 * NQ];
            if (hd.ch) {
                fh_mix_regs<NQ>(p, k.f.w + 2 * fh_wsize(NQ), 0, p2);
                fh_store_p2(a, k.f, hd.G, qq, j0, p2, at);
            } else {
                fh_store_p2(a, k.f, hd.G, qq, j0, p, at);
            }
            continue;
        }
        if (hd.ch) {  // first: P is not needed after it
            fhq_to_scratch<NQ>(scr, p);
            fhq_wgrad_sum(k, scr, k.d2, (const bf16 *)NULL, e0, k.dw2, 1);
        }
        if (hd.mix) {
            fhq_to_scratch<NQ>(scr, dp);
            fhq_wgrad_sum(k, scr, k.f.s1h, k.f.s1l, e0, k.dw1, 0);
        }
        fhq_store_ds(k, hd.G, qq, dp);
    }
}
#undef FH_AT

// dq_h += scale dS1_h k_h for heads 2s' (warps 0, 1) and 2s'+1 (warps 2, 3) of the k stage.
template <int NQ>
__device__ __forceinline__ void fhq_dq(const tc_args &a, const tc_heads &hd, const fhq_block<NQ> &k, int sk,
                                       const bf16 *buf, float *dq) {
    const int w = threadIdx.x / 32, h = 2 * sk + w / 2;
    if (h >= hd.G) return;
    const bf16 *ds = k.f.s1l;
    fh_rows_acc<0, fh_kc(NQ)>(a, k.f.i0, [&](int q, int c) { return ds + fhq_ds_at<NQ>(h, q, c); },
                              buf + (w / 2) * fh_keys(NQ) * fa_ld(a.dp), dq + (size_t)(k.f.bh0 + h) * a.T * a.d,
                              a.scale, (const float *)NULL);
}

// D final (the key tiles' terms summed in ls, in order): written to a.D for k_fa_head_dkdv.
template <int NQ> __device__ __forceinline__ void fhq_D(const tc_args &a, const tc_heads &hd, fhq_block<NQ> &k) {
    for (int e = threadIdx.x; e < hd.G * FH_M; e += TC_THREADS) {
        const int h = e / FH_M, i = k.f.i0 + e % FH_M;
        if (i < a.T) a.D[(size_t)(k.f.bh0 + h) * a.T + i] = k.f.ls[e];
    }
}

// The block's kernel gradient partial (hd.nw entries) into hwp: the warps' sums added in order
// (those in registers through shared memory, over S1's hi array, which they fit: sum(v, m) is
// warp v's matrix m).
template <int NQ> __device__ __forceinline__ void fhq_partial(const tc_heads &hd, fhq_block<NQ> &k, float *hwp) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4, G = hd.G, c = hd.ch, mg = 16 * NQ;
    static_assert(fh_e(NQ) * 16 * NQ * sizeof(bf16) >= 4 * (NQ == 1 ? 2 : 1) * 16 * NQ * 16 * NQ * sizeof(float),
                  "the registers' sums fit S1's hi array");
    float *const regs = (float *)k.f.s1h, *const dws = k.dws - w * mg * mg;
    const auto sum = [&](int v, int m) {
        return NQ == 1 ? regs + (v * 2 + m) * mg * mg : m ? dws + v * mg * mg : regs + v * mg * mg;
    };
    FA_UNROLL
    for (int mt = 0; mt < NQ; mt++)
        FA_UNROLL
        for (int n = 0; n < 2 * NQ; n++)
            FA_UNROLL
            for (int x = 0; x < 4; x++) {
                const int at = (16 * mt + g + 8 * (x / 2)) * mg + 8 * n + 2 * t + x % 2;
                sum(w, 0)[at] = k.dw1[mt][n].x[x];
                if (NQ == 1) sum(w, 1)[at] = k.dw2[0][n].x[x];
            }
    __syncthreads();
    const int n1 = hd.mix ? G * G : 0;
    float *out = hwp + ((size_t)blockIdx.y * gridDim.x + k.f.i0 / FH_M) * hd.nw;
    for (int e = threadIdx.x; e < hd.nw; e += TC_THREADS) {
        int m = 0, at = e / G * mg + e % G;
        if (e >= n1) {
            const int f = e - n1, grp = f / (c * c);
            m = 1, at = (grp * c + f % (c * c) / c) * mg + grp * c + f % c;
        }
        float x = 0.0f;
        for (int v = 0; v < 4; v++) x += sum(v, m)[at];
        out[e] = x;
    }
}

// dQ of 16 query rows of a group's G <= 16 NQ heads (grid: x tiles of 16 rows, the last first, y
// B*H/G), with D (to a.D, for k_fa_head_dkdv) and the tile's kernel gradient partial (hwp).
template <int NQ>
__global__ void __launch_bounds__(TC_THREADS, 2) k_fa_head_dq_t(tc_args a, tc_heads hd, float *dq, float *hwp) {
    MTA_DYNAMIC_SHARED(unsigned char, sh);
    fhq_block<NQ> k;
    const fh_smem s = fh_setup(a, hd, sh, k.f, TC_DQ);
    k.d2 = k.f.p2;
    k.dws = s.dws ? s.dws + threadIdx.x / 32 * 32 * 32 : NULL;
    for (int e = threadIdx.x; NQ == 2 && e < 4 * 32 * 32; e += TC_THREADS) s.dws[e] = 0.0f;
    FA_UNROLL
    for (int n = 0; n < 2 * NQ; n++) {
        FA_UNROLL
        for (int mt = 0; mt < NQ; mt++) k.dw1[mt][n] = mma_c{};
        k.dw2[0][n] = mma_c{};
    }
    fh_walk wk;
    wk.npass = 2, wk.bwd = 1, wk.qw = 0, wk.P = (hd.G + 1) / 2;
    wk.last = (k.f.i0 + FH_M < a.T ? k.f.i0 + FH_M : a.T) - 1;
    wk.js = mta_row_start(a.ds, a.T, k.f.b, k.f.i0) / fh_keys(NQ) * fh_keys(NQ);
    fh_drive(a, hd.G, k.f, wk, s,
             [&](fh_pos p, bf16 *buf) {
                 const int kind = p.s / wk.P;
                 if (kind == 0) {
                     fh_scores<NQ, 0>(a, k.f, hd.G, p.s, p.j0, buf, k.f.s1h, k.f.s1l);
                 } else if (kind == 1) {
                     fh_scores<NQ, 1>(a, k.f, hd.G, p.s % wk.P, p.j0, buf, k.d2, (bf16 *)NULL);
                     if (p.s % wk.P == wk.P - 1) {
                         __syncthreads();  // the stage's reads are done: its buffer takes the scratch
                         bf16 *const scr = buf + threadIdx.x / 32 * 2 * fh_keys(NQ) * 16 * NQ;
                         fhq_step<NQ, 0>(a, hd, k, p.pass, p.j0, scr);
                     }
                 } else {
                     fhq_dq(a, hd, k, p.s % wk.P, buf, dq);
                 }
             },
             [&]() { fhq_D(a, hd, k); });
    __syncthreads();
    fhq_partial(hd, k, hwp);
}

#endif
