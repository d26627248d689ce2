// mta_cuda_fa_heads_dq.cuh: the head steps' dQ on mma.sync, k_fa_head_dq (docs/cuda.md, "Head
// mixing and head convolution"), for groups of G <= 16 heads. Included by mta_cuda_tc.cuh after
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
// ldmatrix .trans). The kernel gradients are summed per warp over the block's entries in order,
// then over the 4 warps in order into the block's partial (hwp).
#ifndef MTAC_ATTN_MTA_CUDA_FA_HEADS_DQ_CUH
#define MTAC_ATTN_MTA_CUDA_FA_HEADS_DQ_CUH

const int FHQ_SCRATCH = 2 * FH_N * FH_MAXG;  // bf16 per warp: 32 entries x 16 heads, hi and lo

// The shared bytes of k_fa_head_dq at padded width dp: two stage buffers, S1's hi and lo, dP2, the
// warps' scratch.
size_t fhq_smem_bytes(int dp) {
    return (2 * (size_t)FH_STAGE * fa_ld(dp) + 3 * (size_t)FH_E * FH_MAXG + 4 * (size_t)FHQ_SCRATCH) * sizeof(bf16);
}

// dS1 of head h, query row q, key: in S1's lo array, the row's 1 KB ([head][key], 16-byte units
// XOR q % 8).
__device__ __forceinline__ int fhq_ds_at(int h, int q, int key) {
    return q * FH_N * FH_MAXG + (((h * FH_N + key) / 8) ^ (q % 8)) * 8 + key % 8;
}

struct fhq_block {
    fh_block f;                   // the forward's arrays and state (m: lse; l: D)
    bf16 *d2, *scr;               // dP2 (fh_s1_at); this warp's scratch (hi, then lo)
    mma_b w1th[2], w1tl[2], w2th[2], w2tl[2];  // W1 transposed (B(out, in) = W1[out][in]), W2' transposed
    mma_c dw1[2], dw2[2];         // this warp's kernel gradient sums: (out, in) of W1, (in, out) of W2'
};

// dP of query row qq's two chunks: dP2 W2'^T (hi of dP2 by W2's hi and lo).
__device__ __forceinline__ void fhq_dp(const fhq_block &k, int qq, mma_c dp[2][2]) {
    const int l = threadIdx.x % 32, w = threadIdx.x / 32;
    FA_UNROLL
    for (int kc = 0; kc < 2; kc++) {
        mma_a d;
        ldsm_x4(d.x, k.d2 + fh_s1_at((4 * w + qq) * FH_N + 16 * kc + l % 16, 8 * (l / 16)));
        dp[kc][0] = dp[kc][1] = mma_c{};
        FA_UNROLL
        for (int n = 0; n < 2; n++) {
            mma_16816(dp[kc][n], d, k.w2th[n]);
            mma_16816(dp[kc][n], d, k.w2tl[n]);
        }
    }
}

// This warp's scratch: x (C fragments of 16 entries x 16 heads per chunk) as hi and lo [entry][head].
__device__ __forceinline__ void fhq_to_scratch(const fhq_block &k, const mma_c x[2][2]) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int kc = 0; kc < 2; kc++)
        FA_UNROLL
        for (int n = 0; n < 2; n++)
            FA_UNROLL
            for (int i = 0; i < 4; i++) {
                const float v = x[kc][n].x[i], hi = fh_hi(v);
                const int at = fh_s1_at(16 * kc + g + 8 * (i / 2), 8 * n + 2 * t + i % 2);
                k.scr[at] = __float2bfloat16_rn(hi), k.scr[FH_N * FH_MAXG + at] = __float2bfloat16_rn(v - hi);
            }
    __syncwarp();
}

// acc (16 x 16, rows the heads of the scratch) += scratch^T Y over query row qq's 32 entries, Y
// [entry][head] rows of S1 (yh, yl; yl NULL: hi only) at entry e0: A from the scratch by ldmatrix
// .trans (matrix j = l / 8: entries 8 (j / 2).., heads 8 (j % 2)..), B from Y the same way as
// fa_acc's (entries l % 16, heads 8 (l / 16)..).
__device__ __forceinline__ void fhq_wgrad(const fhq_block &k, const bf16 *yh, const bf16 *yl, int e0, mma_c acc[2]) {
    const int l = threadIdx.x % 32;
    FA_UNROLL
    for (int kc = 0; kc < 2; kc++) {
        mma_a ah, al;
        const int ea = 16 * kc + l % 8 + 8 * (l / 16), eb = e0 + 16 * kc + l % 16;
        ldsm_x4_t(ah.x, k.scr + fh_s1_at(ea, 8 * (l / 8 % 2)));
        ldsm_x4_t(al.x, k.scr + FH_N * FH_MAXG + fh_s1_at(ea, 8 * (l / 8 % 2)));
        uint32_t r[4];
        ldsm_x4_t(r, yh + fh_s1_at(eb, 8 * (l / 16)));
        const mma_b bh[2] = {{{r[0], r[1]}}, {{r[2], r[3]}}};
        mma_b bl[2] = {};
        if (yl) {
            ldsm_x4_t(r, yl + fh_s1_at(eb, 8 * (l / 16)));
            bl[0] = mma_b{{r[0], r[1]}}, bl[1] = mma_b{{r[2], r[3]}};
        }
        fh_mma3(acc, ah, al, bh, bl);
    }
    __syncwarp();
}

// The transposed mixings' fragments: B(out, in) = W1[out][in] (the identity without step 3) and
// B(out, in) = W2'(in, out).
__device__ __forceinline__ void fhq_weights(const tc_args &a, const tc_heads &hd, fhq_block &k) {
    const int G = hd.G, c = hd.ch, h0 = k.f.bh0 % a.H;
    fh_b_of(
        [&](int out, int in) {
            if (in >= G || out >= G) return 0.0f;
            return hd.mix ? hd.w1[in + out * a.H] : (float)(in == out);
        },
        k.w1th, k.w1tl);
    fh_b_of(
        [&](int out, int in) {
            if (in >= G || out >= G) return 0.0f;
            if (!c) return (float)(in == out);
            if ((h0 + in) / c != (h0 + out) / c) return 0.0f;
            return hd.w2[((size_t)(h0 + in) / c * c + (h0 + in) % c) * c + (h0 + out) % c];
        },
        k.w2th, k.w2tl);
}

// dS1 = dS2 W1 of query row qq into its rows of S1's lo array (fhq_ds_at), heads < G.
__device__ __forceinline__ void fhq_store_ds(const fhq_block &k, int G, int qq, const mma_c ds2[2][2]) {
    const int q = 4 * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    mma_c ds1[2][2];
    fh_mix_regs(ds2, k.w1th, k.w1tl, ds1);
    __syncwarp();  // the warp's lanes have read the row's S1 lo (fh_mix, fhq_wgrad)
    FA_UNROLL
    for (int hh = 0; hh < 4; hh++)
        FA_UNROLL
        for (int x = 0; x < 4; x++) {
            const int h = 8 * (hh / 2) + 2 * t + hh % 2, key = 16 * (x / 2) + g + 8 * (x % 2);
            if (h < G) k.f.s1l[fhq_ds_at(h, q, key)] = __float2bfloat16_rn(FH_AT(ds1, x / 2, hh, x % 2));
        }
}

// The tile's work after its last dO, v stage, per query row of the warp: P and dP; pass 0 adds
// P dP to this lane's D terms; pass 1 the kernel gradients' terms and dS1, or with KV (the dK, dV
// kernel) dS1 and P2 with dropout, over the row's S1 hi (read) as dS1 over its lo (fhq_ds_at).
template <int KV>
__device__ __forceinline__ void fhq_step(const tc_args &a, const tc_heads &hd, fhq_block &k, int pass, int j0) {
    const int w = threadIdx.x / 32;
    FA_UNROLL
    for (int qq = 0; qq < 4; qq++) {
        mma_c p[2][2], dp[2][2];
        fh_mix(k.f, qq, p);
        fh_probs(a, k.f, qq, j0, p);
        fhq_dp(k, qq, dp);
        FA_UNROLL
        for (int hh = 0; hh < 4; hh++)
            FA_UNROLL
            for (int x = 0; x < 4; x++) {
                float &v = FH_AT(dp, x / 2, hh, x % 2);
                const float pv = FH_AT(p, x / 2, hh, x % 2);
                if (!pass) k.f.l[qq][hh] += pv * v;
                else v = pv * (v - k.f.l[qq][hh]);  // dS2
            }
        if (!pass) continue;
        const int e0 = (4 * w + qq) * FH_N;
        if (KV) {
            fhq_store_ds(k, hd.G, qq, dp);
            const auto at = [&](int h, int q, int key) { return k.f.s1h + fhq_ds_at(h, q, key); };
            mma_c p2[2][2];
            if (hd.ch) {
                fh_mix_regs(p, k.f.w2h, k.f.w2l, p2);
                fh_store_p2(a, k.f, hd.G, qq, j0, p2, at);
            } else {
                fh_store_p2(a, k.f, hd.G, qq, j0, p, at);
            }
            continue;
        }
        if (hd.mix) {
            fhq_to_scratch(k, dp);
            fhq_wgrad(k, k.f.s1h, k.f.s1l, e0, k.dw1);
        }
        if (hd.ch) {
            fhq_to_scratch(k, p);
            fhq_wgrad(k, k.d2, NULL, e0, k.dw2);
        }
        fhq_store_ds(k, hd.G, qq, dp);
    }
}
#undef FH_AT

// dq_h += scale dS1_h k_h for heads 2s' (warps 0, 1) and 2s'+1 (warps 2, 3) of the k stage.
__device__ __forceinline__ void fhq_dq(const tc_args &a, const tc_heads &hd, const fhq_block &k, int sk,
                                       const bf16 *buf, float *dq) {
    const int w = threadIdx.x / 32, h = 2 * sk + w / 2;
    if (h >= hd.G) return;
    const bf16 *ds = k.f.s1l;
    fh_rows_acc<0>(a, k.f.i0, [&](int q, int c) { return ds + fhq_ds_at(h, q, c); }, buf + (w / 2) * FH_N * fa_ld(a.dp),
                dq + (size_t)(k.f.bh0 + h) * a.T * a.d, a.scale, (const float *)NULL);
}

// D final: this lane's terms summed over the 8 lanes of its t, written to a.D (lanes g = 0).
__device__ __forceinline__ void fhq_D(const tc_args &a, const tc_heads &hd, fhq_block &k) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int qq = 0; qq < 4; qq++)
        FA_UNROLL
        for (int hh = 0; hh < 4; hh++) {
            float x = k.f.l[qq][hh];
            FA_UNROLL
            for (int m = 4; m <= 16; m *= 2) x += __shfl_xor_sync(0xffffffffu, x, m);
            k.f.l[qq][hh] = x;
            const int h = 8 * (hh / 2) + 2 * t + hh % 2, i = k.f.i0 + 4 * w + qq;
            if (g == 0 && h < hd.G && i < a.T) a.D[(size_t)(k.f.bh0 + h) * a.T + i] = x;
        }
}

// The block's kernel gradient partial (hd.nw entries) into hwp: the warps' sums added in order
// (through shared memory, over S1's arrays).
__device__ __forceinline__ void fhq_partial(const tc_heads &hd, fhq_block &k, float *hwp) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4, G = hd.G, c = hd.ch;
    float *sum = (float *)k.f.s1h;  // (4 warps, 2 matrices, 16 x 16)
    FA_UNROLL
    for (int n = 0; n < 2; n++)
        FA_UNROLL
        for (int x = 0; x < 4; x++) {
            const int at = (g + 8 * (x / 2)) * 16 + 8 * n + 2 * t + x % 2;
            sum[(w * 2 + 0) * 256 + at] = k.dw1[n].x[x];
            sum[(w * 2 + 1) * 256 + at] = k.dw2[n].x[x];
        }
    __syncthreads();
    const int n1 = hd.mix ? G * G : 0;
    float *out = hwp + ((size_t)blockIdx.y * gridDim.x + k.f.i0 / FH_M) * hd.nw;
    for (int e = threadIdx.x; e < hd.nw; e += TC_THREADS) {
        int m = 0, at = e / G * 16 + e % G;
        if (e >= n1) {
            const int f = e - n1, grp = f / (c * c);
            m = 1, at = (grp * c + f % (c * c) / c) * 16 + grp * c + f % c;
        }
        float x = 0.0f;
        for (int v = 0; v < 4; v++) x += sum[(v * 2 + m) * 256 + at];
        out[e] = x;
    }
}

// dQ of 16 query rows of a group's G <= 16 heads (grid: x tiles of 16 rows, the last first, y
// B*H/G), with D (to a.D, for k_tc_head_dkdv) and the tile's kernel gradient partial (hwp).
__global__ void __launch_bounds__(TC_THREADS) k_fa_head_dq(tc_args a, tc_heads hd, float *dq, float *hwp) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    fhq_block k;
    fh_setup(a, hd, sh, k.f, 1);
    k.d2 = k.f.p2, k.scr = k.d2 + FH_E * FH_MAXG + threadIdx.x / 32 * FHQ_SCRATCH;
    fhq_weights(a, hd, k);
    FA_UNROLL
    for (int n = 0; n < 2; n++) k.dw1[n] = k.dw2[n] = mma_c{};
    fh_walk wk;
    wk.npass = 2, wk.bwd = 1, wk.qw = 0, wk.P = (hd.G + 1) / 2;
    wk.last = (k.f.i0 + FH_M < a.T ? k.f.i0 + FH_M : a.T) - 1;
    wk.js = mta_row_start(a.ds, a.T, k.f.b, k.f.i0) / FH_N * FH_N;
    fh_drive(a, hd.G, k.f, wk, sh,
             [&](fh_pos p, const bf16 *buf) {
                 const int kind = p.s / wk.P;
                 if (kind == 0) {
                     fh_scores<0>(a, k.f, hd.G, p.s, p.j0, buf, k.f.s1h, k.f.s1l);
                 } else if (kind == 1) {
                     fh_scores<1>(a, k.f, hd.G, p.s % wk.P, p.j0, buf, k.d2, NULL);
                     if (p.s % wk.P == wk.P - 1) {
                         __syncthreads();
                         fhq_step<0>(a, hd, k, p.pass, p.j0);
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
