// mta_cuda_fa_heads_cl_dq.cuh: the head steps' dQ for groups of G <= 16 heads on thread block
// clusters (sm_90, attn/cluster_ptx.cuh): k_fa_head_cl_dq. Included by mta_cuda_tc.cuh after
// mta_cuda_fa_heads_cl_dkdv.cuh (fhc_weights, fhc_mix; fhd_x1, fhd_share, fhd_put, fhd_ds1, fhd_pa).
//
// k_fa_head_dq has one block hold 16 query rows of all G heads and reload q and dO of every head
// pair per key tile. Here a cluster of C = ceil(G / 8) blocks of 8 warps shares the query tile of
// FH_M = 16 rows: block rank r owns heads 8r..8r+7 (warp w head 8r + w, where it exists), keeps
// their q and dO in shared memory and their dq in registers (warp w's C fragments: 16 rows by dp)
// for the whole walk, and streams only their k and v per key tile of FHC_N = 16 keys (cp.async,
// double-buffered where shared memory allows, else one buffer refilled after the tile). It walks
// the key tiles twice, as k_fa_head_dq. Per key tile, through distributed shared memory into every
// block's [entry][head] arrays (fh_s1_at; a block's 8 heads of an entry one 16-byte cl_st16):
//   X1: S1 = scale q_h k_h^T (hi, lo) and dP2 = dropout(dO_h v_h^T) (hi) of the own heads
//   (k_fa_head_cl_dkdv's fhd_x1); cl_sync();
//   each warp's query rows 2w, 2w + 1, own output heads only (m16n8k16, N = 8): S2 = S1 W1^T,
//   P = exp(S2 - lse), dP = dP2 W2'^T; pass 0 adds the rows' P dP to D (registers; written to a.D
//   for k_fa_head_cl_dkdv at the pass's end); pass 1 makes dS2 = P (dP - D) and adds the kernel
//   gradients' terms of the block's entries: dW1[o][in] += dS2^T S1 for its own output heads o,
//   dW2'(in, o) += P^T dP2 for its own input heads in (S1 and dP2 of every head are in X1; dS2 of
//   the own heads goes through the block's own unit of X2 and P through the row's own unit of S1
//   (hi, lo), once the warp has read the row's S1, read back by ldmatrix .trans);
//   X2 (pass 1): dS2 (hi, lo) of the own heads; cl_sync();
//   dS1 = dS2 W1 for the own heads, bf16 into the block's [head][query][key] array;
//   dq_h += dS1_h k_h in warp w's registers; dq (scaled once) added once at the end.
// The numerics are k_fa_head_dq's: S1, W1, P, dS2 and W2 split into hi + lo bf16 with three MMAs
// (dP2 hi only, two), dS1 rounded once, the same masking, dropout (tc_drop), document starts. Each
// warp sums its kernel gradient terms in entry order and the block its 8 warps in order into the
// entries of the group's partial (per batch, group, query tile: hwp) that its heads own, so that
// k_tc_head_wgrad sums the partials as k_fa_head_dq's.
//
// Synchronisation. X1's arrays are double-buffered by the parity of the exchange (counted over both
// passes): exchange n stores into buffer n % 2 of a block only after its own block waited on
// exchange n - 1's cl_sync(), at which every block arrives only after its reads of exchange n - 2
// (the mixing and the kernel gradients, before X2). X2 needs one buffer: a block stores into it
// only after the tile's X1 cl_sync(), at which every block arrives only after the previous tile's
// dS1 mixing, its last reads. P over S1 needs no barrier: only warp w reads the own unit of rows 2w,
// 2w + 1 of its block's X1 after the exchange's cl_sync(), the other blocks store the unit only at
// exchange n + 2 (as above), and P of heads past G is 0, so that their S1 stays the zeros of the
// setup. A cl_sync() after the setup orders each block's zeroing of its arrays
// (the heads past G, and with G <= 8 the unit of rank 1, are read, never written) before the
// others' stores; the kernel ends with cl_arrive_relaxed(); cl_wait().
//
// Why these sizes: a warp per head gives every warp one dq in registers (dp floats a lane), so one
// block of 8 warps per SM, as k_fa_head_cl_dkdv; 8 heads a block make 16 heads a cluster of 2, each
// block's exchanges stored into 1 other block.
#ifndef MTAC_ATTN_MTA_CUDA_FA_HEADS_CL_DQ_CUH
#define MTAC_ATTN_MTA_CUDA_FA_HEADS_CL_DQ_CUH

// The shared arrays of a block (nbuf stage buffers).
struct fqc_smem {
    bf16 *qdo;       // the own heads' q then dO rows of the query tile: (2, 8, FH_M, fa_ld)
    bf16 *stage;     // nbuf stage buffers: the own heads' k then v rows of a key tile (2, 8, FHC_N, fa_ld)
    size_t sbuf;     // bf16 of a stage buffer
    bf16 *x1;        // X1 [parity]: S1 hi, lo (with step 6 the own unit's P in pass 1), dP2 (FHD_ARR each)
    bf16 *x2;        // X2: dS2 hi, lo
    bf16 *ds1;       // (8, FH_M, FHC_N): dS1 of the own heads (fhd_pa)
    bf16 *w;         // the mixing blocks FHC_W1, FHC_W2T, FHC_W1T (fhc_weights)
};
__host__ __device__ inline size_t fqc_carve(int nbuf, int dp, unsigned char *base, fqc_smem *s) {
    const size_t rows = (size_t)FHC_HB * fa_ld(dp);
    carver cv = {base, 0};
    s->sbuf = 2 * rows * FHC_N;
    s->qdo = cv.take<bf16>(2 * rows * FH_M), s->stage = cv.take<bf16>(nbuf * s->sbuf);
    s->x1 = cv.take<bf16>(6 * (size_t)FHD_ARR), s->x2 = cv.take<bf16>(2 * (size_t)FHD_ARR);
    s->ds1 = cv.take<bf16>((size_t)FHC_HB * FH_M * FHC_N);
    s->w = cv.take<bf16>(6 * (size_t)FHC_WSZ);
    return cv.at;
}
size_t fqc_smem_bytes(int nbuf, int dp) {
    fqc_smem s;
    return fqc_carve(nbuf, dp, NULL, &s);
}

// A block's arrays and per-lane state.
template <int DP> struct fqc_block {
    fqc_smem s;
    int b, bh0, i0, r, C, x;     // batch, the group's first (batch, head), query tile, rank, cluster size, X1 exchanges
    int st[2], stq[2];           // document starts of rows g, g + 8 (S1, dP2) and 2w + qq (mixing)
    float lse[2][2], D[2][2];    // rows 2w + qq, own heads 2t + hh: log-sum-exp; D (pass 0 sums it)
    mma_c dq[DP / 8];            // dq / scale of head 8r + w, rows g, g + 8
    mma_c dw1, dw2;              // this warp's sums: dW1 [in g, g + 8][own out 2t..]; dW2' [out][own in]
};

// This warp's kernel gradient terms of query row q: dW1 += S1^T dS2 and dW2' += dP2^T P (x1: this
// tile's X1; dS2 of the own heads in X2's own unit, p: P, stored over the row's own unit of S1 once
// read). A (16 heads x the row's 16 entries) by ldmatrix .trans from X1 (fhq_wgrad's addresses), B
// (16 entries x 8 own heads) by ldmatrix .trans; three MMAs (S1, dS2 split), two for dW2' (dP2 hi, P
// split), as k_fa_head_dq's.
template <int DP>
__device__ __forceinline__ void fqc_wgrad(const tc_heads &hd, fqc_block<DP> &k, bf16 *x1, int q, const mma_c &p) {
    const int l = threadIdx.x % 32, e0 = q * FHC_N;
    const int ea = fh_s1_at<1>(e0 + l % 8 + 8 * (l / 16), 8 * (l / 8 % 2)), eb = fh_s1_at<1>(e0 + l % 16, FHC_HB * k.r);
    __syncwarp();  // the warp's lanes stored the row's dS2
    mma_a ah, al;
    mma_b bh, bl;
    if (hd.mix) {
        ldsm_x4_t(ah.x, x1 + ea);
        ldsm_x4_t(al.x, x1 + FHD_ARR + ea);
        ldsm_x2_t(bh.x, k.s.x2 + eb);
        ldsm_x2_t(bl.x, k.s.x2 + FHD_ARR + eb);
        mma_16816(k.dw1, ah, bh);
        mma_16816(k.dw1, al, bh);
        mma_16816(k.dw1, ah, bl);
    }
    if (hd.ch) {
        ldsm_x4_t(ah.x, x1 + 2 * FHD_ARR + ea);
        __syncwarp();  // the warp's lanes read the row's S1 (here and in fqc_mix1)
        fhd_put(k, x1, x1 + FHD_ARR, q, p);
        __syncwarp();  // and stored its P
        ldsm_x2_t(bh.x, x1 + eb);
        ldsm_x2_t(bl.x, x1 + FHD_ARR + eb);
        mma_16816(k.dw2, ah, bh);
        mma_16816(k.dw2, ah, bl);
    }
}

// The first mixing, warp w's rows 2w + qq, own heads: S2, P, dP from X1 (x1); pass 0 adds P dP to
// D; pass 1 dS2 = P (dP - D) into X2's own unit and the kernel gradient terms (P 0 past G).
template <int DP>
__device__ __forceinline__ void fqc_mix1(const tc_args &a, const tc_heads &hd, fqc_block<DP> &k, int pass, int j0,
                                         bf16 *x1) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int qq = 0; qq < 2; qq++) {
        const int q = 2 * w + qq, e0 = q * FHC_N;
        mma_c p, dp;
        fhc_mix<1>(x1, x1 + FHD_ARR, k.s.w, e0, p);
        fhc_mix<0>(x1 + 2 * FHD_ARR, NULL, k.s.w + 2 * FHC_WSZ, e0, dp);
        float sum[2] = {0.0f, 0.0f};
        FA_UNROLL
        for (int e = 0; e < 4; e++) {
            float &v = p.x[e];
            const int h = FHC_HB * k.r + 2 * t + e % 2, j = j0 + g + 8 * (e / 2);
            v = h < hd.G && fa_ok(a.T, k.i0 + q, k.stq[qq], j) ? expf(v - k.lse[qq][e % 2]) : 0.0f;
            if (!pass) sum[e % 2] += v * dp.x[e];
            else dp.x[e] = v * (dp.x[e] - k.D[qq][e % 2]);  // dS2
        }
        if (!pass) {  // the tile's terms of the row: its 8 lanes of equal t
            FA_UNROLL
            for (int hh = 0; hh < 2; hh++) k.D[qq][hh] += fa_row_reduce<4, 16>(sum[hh], 1);
            continue;
        }
        fhd_put(k, k.s.x2, k.s.x2 + FHD_ARR, q, dp);
        fqc_wgrad(hd, k, x1, q, p);
    }
}

// One key tile j0 of pass (its k, v stage in buf), as the header says.
template <int DP>
__device__ __forceinline__ void fqc_tile(const tc_args &a, const tc_heads &hd, fqc_block<DP> &k, int pass, int j0,
                                         const bf16 *buf) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, h = FHC_HB * k.r + w, ld = fa_ld(a.dp);
    const size_t rq = (size_t)FHC_HB * FH_M * ld, rk = (size_t)FHC_HB * FHC_N * ld;
    bf16 *const x1 = k.s.x1 + (k.x++ & 1) * 3 * FHD_ARR;
    if (h < hd.G) fhd_x1(a, k.bh0, h, k.i0, j0, k.st, k.s.qdo + w * FH_M * ld, rq, buf + w * FHC_N * ld, rk, x1);
    __syncthreads();  // the block's heads of each entry are in place
    fhd_share(k, x1, 3);
    cl_sync();  // and every block's
    fqc_mix1(a, hd, k, pass, j0, x1);
    if (!pass) return;
    __syncthreads();  // the block's dS2 unit is in place
    fhd_share(k, k.s.x2, 2);
    cl_sync();  // X2: every block's dS2
    FA_UNROLL
    for (int qq = 0; qq < 2; qq++) fhd_ds1(k, hd.G, k.s.x2, k.s.w + 4 * FHC_WSZ, 2 * w + qq, k.s.ds1);
    __syncthreads();  // dS1 of every own head is in place
    if (h >= hd.G) return;
    mma_a pa;
    ldsm_x4(pa.x, k.s.ds1 + fhd_pa(w, l % 16, 8 * (l / 16)));
    fa_acc<DP>(k.dq, pa, buf + w * FHC_N * ld, ld, a.dp);
}

// Issues the copies of key tile j0's k and v rows of the own heads into buf.
template <int DP>
__device__ __forceinline__ void fqc_stage_load(const tc_args &a, const tc_heads &hd, const fqc_block<DP> &k, int j0,
                                               bf16 *buf) {
    const int ld = fa_ld(a.dp);
    for (int u = 0; u < FHC_HB && FHC_HB * k.r + u < hd.G; u++) {
        const size_t kv = tc_kv_slab(a, k.bh0 + FHC_HB * k.r + u) * a.Tp * a.dp;
        fa_load_rows(buf + u * FHC_N * ld, a.k + kv, j0, FHC_N, a.T, a.dp, FHC_THREADS);
        fa_load_rows(buf + (FHC_HB + u) * FHC_N * ld, a.v + kv, j0, FHC_N, a.T, a.dp, FHC_THREADS);
    }
}

// The block's setup: shared arrays, rank, query tile (the clusters' last first), mixing blocks, row
// state, zeroed exchange arrays and registers; q and dO's copies issued (committed with the first
// stage's).
template <int DP>
__device__ __forceinline__ void fqc_setup(const tc_args &a, const tc_heads &hd, unsigned char *sh, int nbuf,
                                          fqc_block<DP> &k) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4, ld = fa_ld(a.dp);
    fqc_carve(nbuf, a.dp, sh, &k.s);
    k.r = (int)cl_rank(), k.C = (int)cl_size(), k.x = 0;
    k.bh0 = blockIdx.y * hd.G, k.b = k.bh0 / a.H, k.i0 = (gridDim.x / k.C - 1 - blockIdx.x / k.C) * FH_M;
    fhc_weights<FHC_W1, FHC_W2T, FHC_W1T>(a, hd, k.bh0, k.r, k.s.w);
    FA_UNROLL
    for (int r = 0; r < 2; r++) {
        const int i = k.i0 + g + 8 * r, iq = k.i0 + 2 * w + r;
        k.st[r] = i < a.T ? mta_row_start(a.ds, a.T, k.b, i) : 0;
        k.stq[r] = iq < a.T ? mta_row_start(a.ds, a.T, k.b, iq) : 0;
        FA_UNROLL
        for (int hh = 0; hh < 2; hh++) {
            const int h = FHC_HB * k.r + 2 * t + hh;
            k.lse[r][hh] = iq < a.T && h < hd.G ? a.lse[(size_t)(k.bh0 + h) * a.T + iq] : 0.0f;
            k.D[r][hh] = 0.0f;
        }
    }
    fa_zero(k.dq);
    k.dw1 = k.dw2 = mma_c{};
    const bf16 zero = __float2bfloat16_rn(0.0f);
    for (int e = threadIdx.x; e < 8 * FHD_ARR; e += FHC_THREADS)
        (e < 6 * FHD_ARR ? k.s.x1 : k.s.x2 - 6 * FHD_ARR)[e] = zero;
    for (int u = 0; u < FHC_HB && FHC_HB * k.r + u < hd.G; u++) {
        const size_t qs = (size_t)(k.bh0 + FHC_HB * k.r + u) * a.Tp * a.dp;
        fa_load_rows(k.s.qdo + u * FH_M * ld, a.q + qs, k.i0, FH_M, a.T, a.dp, FHC_THREADS);
        fa_load_rows(k.s.qdo + (FHC_HB + u) * FH_M * ld, a.dO + qs, k.i0, FH_M, a.T, a.dp, FHC_THREADS);
    }
}

// Pass 0's end: D of the own heads (< G) at the warp's rows into a.D, for k_fa_head_cl_dkdv.
template <int DP> __device__ __forceinline__ void fqc_D(const tc_args &a, const tc_heads &hd, const fqc_block<DP> &k) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int qq = 0; qq < 2; qq++)
        FA_UNROLL
        for (int hh = 0; hh < 2; hh++) {
            const int h = FHC_HB * k.r + 2 * t + hh, i = k.i0 + 2 * w + qq;
            if (g == 0 && h < hd.G && i < a.T) a.D[(size_t)(k.bh0 + h) * a.T + i] = k.D[qq][hh];
        }
}

// The end: dq (scaled) of warp w's head added to dq's rows; the block's entries of the tile's kernel
// gradient partial into hwp (hd.nw entries per (batch, group, query tile)): the warps' sums through
// the stage buffer (done), added in warp order. The block's entries: those of W1 [o][in] whose
// output head o, and those of W2' (in, o) whose input head in, is an own head.
template <int DP>
__device__ __forceinline__ void fqc_finish(const tc_args &a, const tc_heads &hd, const fqc_block<DP> &k, float *dq,
                                           float *hwp) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4, G = hd.G, c = hd.ch;
    float *const sum = (float *)k.s.stage;  // [warp][matrix][16][8]
    FA_UNROLL
    for (int x = 0; x < 4; x++) {
        const int at = (g + 8 * (x / 2)) * 8 + 2 * t + x % 2;
        sum[2 * w * 128 + at] = k.dw1.x[x], sum[(2 * w + 1) * 128 + at] = k.dw2.x[x];
    }
    if (FHC_HB * k.r + w < G) {
        const size_t bh = (size_t)k.bh0 + FHC_HB * k.r + w;
        fa_each<DP>(a.d, [&](int r, int col, int n, int x) {
            const int i = k.i0 + g + 8 * r;
            if (i < a.T) dq[(bh * a.T + i) * a.d + col] += a.scale * k.dq[n].x[x];
        });
    }
    __syncthreads();
    const int n1 = hd.mix ? G * G : 0;
    float *out = hwp + ((size_t)blockIdx.y * (gridDim.x / k.C) + k.i0 / FH_M) * hd.nw;
    for (int e = threadIdx.x; e < hd.nw; e += FHC_THREADS) {
        int m = 0, own = e / G, at = e % G * 8 + own % 8;  // W1[own][in] at [in][own]
        if (e >= n1) {
            const int f = e - n1, grp = f / (c * c);
            own = grp * c + f % (c * c) / c, m = 1;
            at = (grp * c + f % c) * 8 + own % 8;  // W2'(own, out) at [out][own]
        }
        if (own / FHC_HB != k.r) continue;
        float x = 0.0f;
        for (int v = 0; v < FHC_HB; v++) x += sum[(2 * v + m) * 128 + at];
        out[e] = x;
    }
}

// dQ of 16 query rows of a group's G <= 16 heads on clusters of fhc_cs(G) blocks (grid: x the
// query tiles of FH_M rows times the cluster size, the last tile's cluster first; y B*H/G), with D
// (to a.D, for k_fa_head_cl_dkdv) and the tile's kernel gradient partial (hwp); nbuf stage buffers
// (fh_cl_nbuf).
template <int DP>
__global__ void __launch_bounds__(FHC_THREADS, 1) k_fa_head_cl_dq_t(tc_args a, tc_heads hd, int nbuf, float *dq,
                                                                    float *hwp) {
    MTA_DYNAMIC_SHARED(unsigned char, sh);
    fqc_block<DP> k;
    fqc_setup(a, hd, sh, nbuf, k);
    const int last = (k.i0 + FH_M < a.T ? k.i0 + FH_M : a.T) - 1;
    const int js = mta_row_start(a.ds, a.T, k.b, k.i0) / FHC_N * FHC_N;
    fqc_stage_load(a, hd, k, js, k.s.stage);
    cp_async_commit();
    cl_sync();  // every block's arrays are zeroed before any block writes into them
    for (int n = 0, pass = 0, j0 = js; pass < 2; n++) {
        const int np = j0 + FHC_N > last ? pass + 1 : pass, nj = np != pass ? js : j0 + FHC_N;
        bf16 *const buf = k.s.stage + (nbuf == 2 ? (n & 1) : 0) * k.s.sbuf;
        if (nbuf == 2) {
            if (np < 2) fqc_stage_load(a, hd, k, nj, k.s.stage + ((n + 1) & 1) * k.s.sbuf);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        fqc_tile(a, hd, k, pass, j0, buf);
        __syncthreads();  // before the next stage's copies overwrite a buffer and the tile's arrays
        if (nbuf == 1 && np < 2) fqc_stage_load(a, hd, k, nj, buf), cp_async_commit();
        if (np != pass) fqc_D(a, hd, k);
        pass = np, j0 = nj;
    }
    fqc_finish(a, hd, k, dq, hwp);
    cl_arrive_relaxed();  // other blocks may still write this block's arrays until all arrive
    cl_wait();
}

// The launch, at dq's width DP for a.dp (the caller checks fh_cl_takes).
template <int DP> void fqc_dq_at(const call *cl, const tc_args &a, const tc_heads &hd, int B, float *dq, float *hwp) {
    void (*const k_fa_head_cl_dq)(tc_args, tc_heads, int, float *, float *) = k_fa_head_cl_dq_t<DP>;
    const int nbuf = fh_cl_nbuf(fqc_smem_bytes, a.dp, cl->st->smem_max);
    const size_t sm = fqc_smem_bytes(nbuf, a.dp);
    const unsigned cs = (unsigned)fhc_cs(hd.G);
    tc_smem_optin(k_fa_head_cl_dq, sm);
    const dim3 grid((unsigned)((a.T + FH_M - 1) / FH_M) * cs, (unsigned)(B * a.H / hd.G));
    MTA_LAUNCH_CLUSTER(k_fa_head_cl_dq, grid, FHC_THREADS, sm, cl->s, cs)(a, hd, nbuf, dq, hwp);
}
void fh_cl_dq(const call *cl, const tc_args &a, const tc_heads &hd, int B, float *dq, float *hwp) {
    if (a.dp <= 64) fqc_dq_at<64>(cl, a, hd, B, dq, hwp);
    else fqc_dq_at<128>(cl, a, hd, B, dq, hwp);
}

#endif
