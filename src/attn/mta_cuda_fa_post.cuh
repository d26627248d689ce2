// mta_cuda_fa_post.cuh: the post-softmax key-query convolution (spec section 2, step 5) on mma.sync
// (docs/cuda.md, "The post-softmax convolution"): k_fa_post_forward and the backward's k_fa_post_*
// kernels. Included by mta_cuda_tc.cuh after mta_cuda_fa_conv.cuh, whose halo geometry (fc_geo),
// grown-tile products (fc_z) and band MMAs (fc_setup, fc_band, fc_conv) it shares, and after
// mta_cuda_fa_conv_bwd.cuh, whose kernel gradient's diagonal sums (fcb_dw) it shares.
//
// P1 = mask0(qkconv(P, w_post)) needs the normalised P on a tile grown by its halos, so the forward
// takes two passes, as the head steps' kernels do: k_fa_forward gives each row's log-sum-exp, then
// k_fa_post_forward recomputes, per key tile, P = exp(scale S - lse) exactly on rows
// [i0-rh, i0+64) and columns [j0-p, j0-p+kz) (fc_z with lse), kept in shared memory as bf16
// hi + lo (within 2^-17 |P|), and P1 is the band MMAs of both parts (fc_conv); P1 masked, through
// dropout and rounded to bf16 once is the A operand of O += P1 V, in registers. Rows are not
// renormalised, so O needs no division.
#ifndef MTAC_ATTN_MTA_CUDA_FA_POST_CUH
#define MTAC_ATTN_MTA_CUDA_FA_POST_CUH

// The forward's shared memory: k_fa_conv_forward's (fc_smem) and the log-sum-exp of each of P's
// rows (floats) after it, offsets in bf16.
struct fp_smem {
    fc_smem c;
    size_t lse, total;
};
__host__ __device__ inline fp_smem fp_smem_of(int dp, const fc_geo &g) {
    fp_smem s;
    s.c = fc_smem_of(dp, g), s.lse = s.c.total, s.total = s.lse + tc_up16(2 * g.zr);
    return s;
}
size_t fa_post_smem_bytes(int dp, int cq, int ck) { return fp_smem_of(dp, fc_geo_of(cq, ck)).total * sizeof(bf16); }

// The log-sum-exp of each of P's rows from i0 - rh (0 outside [0, T), where P is 0).
__device__ __forceinline__ void fp_lse(const tc_args &a, const fc_geo &g, int bh, int i0, float *lse) {
    for (int r = threadIdx.x; r < g.zr; r += TC_THREADS) {
        const int i = i0 - g.rh + r;
        lse[r] = i >= 0 && i < a.T ? a.lse[(size_t)bh * a.T + i] : 0.0f;
    }
}

// fc_z's entry map for P: exp(scale S - lse) of the stored row.
struct fp_softmax {
    float scale;
    const float *lse;
    __device__ fp_softmax(const tc_args &a, const float *l) : scale(a.scale), lse(l) {}
    __device__ float operator()(int row, int, int, float x) const { return expf(x * scale - lse[row]); }
};

// s = P1 of this lane's rows i (document starts st) on key tile j0 (8 n-tiles): zero where the
// row may not see the key (step 5's mask), times dropout's factor.
__device__ __forceinline__ void fp_mask_drop(const tc_args &a, int bh, int j0, const int i[2], const int st[2],
                                             mma_c (&s)[8]) {
    const int t = threadIdx.x % 4;
    FA_UNROLL
    for (int n = 0; n < 8; n++)
        FA_UNROLL
        for (int x = 0; x < 4; x++) {
            const int r = x / 2, j = j0 + 8 * n + 2 * t + x % 2;
            s[n].x[x] = fa_ok(a.T, i[r], st[r], j) ? s[n].x[x] * tc_drop(a, bh, i[r], j) : 0.0f;
        }
}

// Forward's second pass, one block per (query tile, head) (grid: x tiles, the last first, y B*H),
// after k_fa_forward wrote each row's log-sum-exp: per key tile P with halos, P1 by the bands
// (fc_walk), O += dropout(P1) V; writes O (before norm and gate) to out and a.o.
template <int DP>
__global__ void __launch_bounds__(TC_THREADS, 2) k_fa_post_forward_t(tc_args a, const float *w_post, float *out) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    const fc_geo g = fc_geo_of(a.pcq, a.pck);
    const fp_smem at = fp_smem_of(a.dp, g);
    const int ld = fa_ld(a.dp), bh = blockIdx.y, i0 = (gridDim.x - 1 - blockIdx.x) * TC_M;
    float *lse = (float *)(sh + at.lse);
    fp_lse(a, g, bh, i0, lse);  // read after fc_walk's first barrier
    int i[2], st[2];
    fa_lane_rows(a, bh / a.H, i0, i, st);
    mma_c o[DP / 8];
    fa_zero(o);
    fc_walk(a, g, at.c, sh, bh, i0, w_post, st, fp_softmax(a, lse), [&](int jt, mma_c (&s)[8], const bf16 *vs) {
        fp_mask_drop(a, bh, jt * TC_N, i, st, s);
        FA_UNROLL
        for (int kc = 0; kc < 4; kc++) fa_acc<DP>(o, fa_a_of(s + 2 * kc), vs + 16 * kc * ld, ld, a.dp);
    });
    fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
        const size_t at_o = ((size_t)bh * a.T + i[r]) * a.d + c;
        if (i[r] < a.T) out[at_o] = a.o[at_o] = o[n].x[x];
    });
}

// The forward's two passes (k_fa_forward for the log-sum-exp, then k_fa_post_forward) at the
// accumulators' width DP for a.dp, through pointers named as the launch record and --plan know them.
template <int DP> void fa_post_forward_at(const call *cl, const tc_args &a, int BH, const float *w_post, float *out) {
    void (*const k_fa_post_forward)(tc_args, const float *, float *) = k_fa_post_forward_t<DP>;
    const size_t sm = fa_post_smem_bytes(a.dp, a.pcq, a.pck);
    tc_smem_optin(k_fa_post_forward, sm);
    fa_forward_at<DP>(cl, a, BH, out);
    MTA_LAUNCH(k_fa_post_forward, dim3((unsigned)(a.Tp / TC_M), (unsigned)BH), TC_THREADS, sm, cl->s)(a, w_post, out);
}
void fa_post_forward(const call *cl, const tc_args &a, int BH, const float *w_post, float *out) {
    if (a.dp <= 64) fa_post_forward_at<64>(cl, a, BH, w_post, out);
    else fa_post_forward_at<128>(cl, a, BH, w_post, out);
}


// ---- The backward ----
//
// dP1 = mask(dropout(dO V^T)) on rows [i0, i0+64+rh) (the rows that read P's rows of the tile:
// row i reads rows i-(c_q-1)..i) and columns [j0-E, j0-E+kz) (E: p rounded up to 8, so that the
// central columns are 16-byte aligned for fcb_dw's ldmatrix), made as P is (fc_z), rounded to
// bf16 once; the transposed convolution dP = qkconv^T(dP1) of the tile is fc_conv with the kernel
// flipped in both directions (fc_band) reading rows i..i+c_q-1 of i's document; dS = P (dP - D)
// with D_i = sum_j P_ij dP_ij (not rowsum(dO O): O is made from P1). k_fa_post_dq walks a query
// tile's key tiles twice, for D (written to a.D) and then dq += scale dS K and the kernel
// gradient's partial sums dw[a,c] += dP1[i,j] P[i-(c_q-1)+a, j-p+c] (fcb_dw: the diagonals of
// dP1^T P_a, as the pre-softmax dQ's); k_fa_post_dkdv walks a key
// tile's query tiles: dv += dropout(P1)^T dO, dk += scale dS^T q, P1 and dS through shared memory.
//
// Shared memory, so that two blocks fit on an H100 SM at d' = 128 with the 6 x 11 kernel: one
// buffer for k and v in turn (v for dP1, then k for P and dq's products), dP1 in one part, and
// dK/dV's dS and P1 tiles in the dP1 and P areas once those are read, its bands in one area (the
// flipped one for dP, then the forward's for P1).

// The backward's shared memory, offsets in bf16: q's zr rows from i0 - rh, dO's zr rows from i0,
// k's or v's kz rows from j0 - p (in dQ also the warps' fcb_dw scratch, once k is read: at small d
// the scratch is the larger), P's hi and lo parts and dP1 (zr x zld each), a band, the document
// start of P's and of dP1's rows, P's rows' lse, and dQ's warps' kernel-gradient sums (fcb_dw).
struct fpb_smem {
    size_t q, dO, kv, phi, plo, dp1, band, stp, std_, lse, dw, total;
};
__host__ __device__ inline fpb_smem fpb_smem_of(int kind, int dp, const fc_geo &g) {
    const size_t ld = fa_ld(dp), z = (size_t)g.zr * g.zld, rows = tc_up16(2 * g.zr);
    const size_t scr = kind == TC_DQ ? 2 * (TC_THREADS / 32) * 16 * FCB_SCR : 0, kv = g.kz * ld;
    fpb_smem s;
    s.q = 0, s.dO = s.q + g.zr * ld, s.kv = s.dO + g.zr * ld, s.phi = s.kv + (kv > scr ? kv : scr);
    s.plo = s.phi + z, s.dp1 = s.plo + z, s.band = s.dp1 + z, s.stp = s.band + (size_t)g.cq * 8 * g.bw;
    s.std_ = s.stp + rows, s.lse = s.std_ + rows, s.dw = s.lse + rows;
    s.total = s.dw + (kind == TC_DQ ? tc_up16(2 * (TC_THREADS / 32) * g.cq * g.ck) : 0);
    return s;
}
// (-1: c_k past what fcb_dw reaches, as the pre-softmax backward's fcb_ok)
size_t fa_post_bwd_smem_bytes(int kind, int dp, int cq, int ck) {
    return ck <= FCB_DW_CK ? fpb_smem_of(kind, dp, fc_geo_of(cq, ck)).total * sizeof(bf16) : (size_t)-1;
}

// The band products' sources: P (rows from i0 - rh, hi and lo) and dP1 (rows from i0, one part),
// with the band area's bands.
__device__ __forceinline__ fc_src fp_src_p(const fc_geo &g, bf16 *sh, const fpb_smem &at) {
    return {sh + at.phi, sh + at.plo, g.zld, g.kz, (const int *)(sh + at.stp), sh + at.band, g.bw, g.dmax};
}
__device__ __forceinline__ fc_src fp_src_dp1(const fc_geo &g, bf16 *sh, const fpb_smem &at) {
    return {sh + at.dp1, NULL, g.zld, g.kz, (const int *)(sh + at.std_), sh + at.band, g.bw, g.dmaxT};
}

// fc_z's entry map for dP1: dO v^T through dropout.
struct fp_dropout {
    const tc_args *a;
    int bh;
    __device__ float operator()(int, int i, int j, float x) const { return x * tc_drop(*a, bh, i, j); }
};

// Per query tile i0 of head bh: the flipped band, P's rows' document starts and lse (from i0 - rh)
// and dP1's rows' document starts (from i0; -1 outside [0, T)).
__device__ __forceinline__ void fp_bwd_setup(const tc_args &a, const fc_geo &g, int bh, int i0, const float *w,
                                             bf16 *sh, const fpb_smem &at) {
    const int b = bh / a.H, h = bh % a.H;
    int *std_ = (int *)(sh + at.std_);
    fc_setup(a, g, b, h, i0, w, sh + at.band, (int *)(sh + at.stp));
    fc_band(g, w + (size_t)h * g.cq * g.ck, 1, g.sh, sh + at.band);  // over fc_setup's, entry by entry in one thread
    fp_lse(a, g, bh, i0, (float *)(sh + at.lse));
    for (int r = threadIdx.x; r < g.zr; r += TC_THREADS) {
        const int i = i0 + r;
        std_[r] = i < a.T ? mta_row_start(a.ds, a.T, b, i) : -1;
    }
}

// P of a central entry: stored row rh + r, column p + c of the hi and lo parts.
__device__ __forceinline__ float fp_p(const fc_geo &g, const bf16 *phi, const bf16 *plo, int r, int c) {
    const int at = (g.rh + r) * g.zld + g.p + c;
    return __bfloat162float(phi[at]) + __bfloat162float(plo[at]);
}

// Copies rows [r0, r0 + n) of a slab into a shared tile and waits for them (every thread's of nt).
__device__ __forceinline__ void fp_load_now(bf16 *tile, const bf16 *slab, int r0, int n, const tc_args &a,
                                            int nt = TC_THREADS) {
    fa_load_rows(tile, slab, r0, n, a.T, a.dp, nt);
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
}

// The grown tiles of query tile i0 (q, dO in shared memory) and key tile j0 (slab the kv head's):
// v into the k/v buffer and dP1, then k there and P; then, after a barrier, this warp's dP of the
// central tile (its rows' document starts st). The buffer keeps k.
__device__ __forceinline__ void fp_tiles(const tc_args &a, const fc_geo &g, int bh, int i0, int j0, size_t slab,
                                         bf16 *sh, const fpb_smem &at, const int st[2], mma_c (&dp)[8]) {
    const int *stp = (const int *)(sh + at.stp), *std_ = (const int *)(sh + at.std_);
    fp_load_now(sh + at.kv, a.v + slab, j0 - g.E, g.kz, a);  // (E + 64 + p <= kz for c_k <= 17)
    fc_z<false>(a, g, i0, j0 - g.sh, sh + at.dO, sh + at.kv, std_, sh + at.dp1, NULL, fp_dropout{&a, bh});
    __syncthreads();  // v is no longer read
    fp_load_now(sh + at.kv, a.k + slab, j0 - g.p, g.kz, a);
    fc_z(a, g, i0 - g.rh, j0, sh + at.q, sh + at.kv, stp, sh + at.phi, sh + at.plo,
         fp_softmax(a, (const float *)(sh + at.lse)));
    __syncthreads();  // the halo rows come from other warps
    fa_zero(dp);
    fc_conv<8, false>(g, fp_src_dp1(g, sh, at), 16 * (threadIdx.x / 32), 0, st, dp);
}

// Issues the copies of query tile i0's q rows from i0 - rh and dO rows from i0 (zr of each).
__device__ __forceinline__ void fp_q_load(const tc_args &a, const fc_geo &g, int bh, int i0, bf16 *qs, bf16 *dos) {
    fa_load_rows(qs, a.q + (size_t)bh * a.Tp * a.dp, i0 - g.rh, g.zr, a.T, a.dp);
    fa_load_rows(dos, a.dO + (size_t)bh * a.Tp * a.dp, i0, g.zr, a.T, a.dp);
}

// dS = P (dP - D) of this lane's entries of the central tile (rows i: D[2]), in place in dp.
__device__ __forceinline__ void fp_ds(const fc_geo &g, const bf16 *phi, const bf16 *plo, const float D[2],
                                      mma_c (&dp)[8]) {
    const int w = threadIdx.x / 32, gq = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int n = 0; n < 8; n++)
        FA_UNROLL
        for (int x = 0; x < 4; x++)
            dp[n].x[x] = fp_p(g, phi, plo, 16 * w + gq + 8 * (x / 2), 8 * n + 2 * t + x % 2) * (dp[n].x[x] - D[x / 2]);
}

// This lane's D[r] (rows g, g+8 of warp w) += sum_j P dP over the central tile's keys.
__device__ __forceinline__ void fp_rowdot(const fc_geo &g, const bf16 *sh, const fpb_smem &at, const mma_c (&dp)[8],
                                          float D[2]) {
    const int w = threadIdx.x / 32, gq = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int n = 0; n < 8; n++)
        FA_UNROLL
        for (int x = 0; x < 4; x++)
            D[x / 2] += fp_p(g, sh + at.phi, sh + at.plo, 16 * w + gq + 8 * (x / 2), 8 * n + 2 * t + x % 2) * dp[n].x[x];
}

// dQ of one query tile of one head with the post-softmax convolution (grid as k_fa_dq) and the
// tile's partial sums of the kernel gradient into dwp (B*H, tiles, c_q*c_k): the key tiles once for
// D (to a.D), then again for dq += scale dS k and dw.
template <int DP>
__global__ void __launch_bounds__(TC_THREADS, 2) k_fa_post_dq_t(tc_args a, const float *w_post, float *dq, float *dwp) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    const fc_geo g = fc_geo_of(a.pcq, a.pck);
    const fpb_smem at = fpb_smem_of(TC_DQ, a.dp, g);
    const int ld = fa_ld(a.dp), taps = g.cq * g.ck, w = threadIdx.x / 32;
    const int bh = blockIdx.y, b = bh / a.H, tile = gridDim.x - 1 - blockIdx.x, i0 = tile * TC_M;
    const int jt0 = mta_row_start(a.ds, a.T, b, i0) / TC_N, jt1 = i0 / TC_N;
    const size_t slab = tc_kv_slab(a, bh) * a.Tp * a.dp;
    float *dw = (float *)(sh + at.dw);
    fp_q_load(a, g, bh, i0, sh + at.q, sh + at.dO);
    fp_bwd_setup(a, g, bh, i0, w_post, sh, at);
    for (int e = threadIdx.x; e < (TC_THREADS / 32) * taps; e += TC_THREADS) dw[e] = 0.0f;
    int i[2], st[2];
    fa_lane_rows(a, b, i0, i, st);
    float D[2] = {0.0f, 0.0f};
    mma_c acc[DP / 8];
    fa_zero(acc);
    for (int pass = 0; pass < 2; pass++) {
        for (int jt = jt0; jt <= jt1; jt++) {
            __syncthreads();  // the last tile's k, P and dP1 are no longer read
            mma_c dp[8];
            fp_tiles(a, g, bh, i0, jt * TC_N, slab, sh, at, st, dp);
            if (pass == 0) {
                fp_rowdot(g, sh, at, dp, D);
                continue;
            }
            fp_ds(g, sh + at.phi, sh + at.plo, D, dp);
            FA_UNROLL
            for (int kc = 0; kc < 4; kc++)
                fa_acc<DP>(acc, fa_a_of(dp + 2 * kc), sh + at.kv + (g.p + 16 * kc) * ld, ld, a.dp);
            __syncthreads();  // every warp's reads of k: its buffer is the warps' scratch now
            float *scr = (float *)(sh + at.kv) + w * 16 * FCB_SCR;
            fcb_dw<false>(g, fp_src_dp1(g, sh, at), fp_src_p(g, sh, at), g.E, 0, scr, dw);
        }
        FA_UNROLL
        for (int r = 0; r < 2 && pass == 0; r++) {
            D[r] = fa_row_reduce(D[r], 1);
            if (i[r] < a.T && threadIdx.x % 4 == 0) a.D[(size_t)bh * a.T + i[r]] = D[r];
        }
    }
    fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
        if (i[r] < a.T) dq[((size_t)bh * a.T + i[r]) * a.d + c] += a.scale * acc[n].x[x];
    });
    fcb_dw_out(dw, taps, 1.0f, dwp + ((size_t)bh * gridDim.x + tile) * taps);
}

// x (a 64 x 64 tile at leading dimension TC_N + FA_PAD, rows the queries) transposed: the A
// fragment of rows m0.. (keys) and k0.. (queries), by ldmatrix .trans of 8 x 8 blocks (mma_ptx.cuh).
__device__ __forceinline__ mma_a fp_aT(const bf16 *x, int m0, int k0) {
    const int l = threadIdx.x % 32;
    mma_a r;
    ldsm_x4_t(r.x, x + (k0 + 8 * (l / 16) + l % 8) * (TC_N + FA_PAD) + m0 + 8 * (l / 8 % 2));
    return r;
}

// Stores this lane's entries of a 16 x 64 tile in C fragments (warp w's rows) to x as bf16.
__device__ __forceinline__ void fp_store(const mma_c (&s)[8], bf16 *x) {
    const int w = threadIdx.x / 32, gq = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int n = 0; n < 8; n++)
        FA_UNROLL
        for (int r = 0; r < 2; r++)
            *(uint32_t *)(x + (16 * w + gq + 8 * r) * (TC_N + FA_PAD) + 8 * n + 2 * t) =
                pack_bf16x2(s[n].x[2 * r], s[n].x[2 * r + 1]);
}

// dK/dV's terms of query tile i0 of head bh (its q, dO and setup loaded; kv slab the kv head's):
// P, dP1, then per warp its 16 query rows' dS and dropout(P1) into the shared tiles (over dP1 and
// P, once read), then per warp its 16 keys' dv, dk.
template <int DP>
__device__ __forceinline__ void fp_dkdv_tile(const tc_args &a, const fc_geo &g, const fpb_smem &at, bf16 *sh, int bh,
                                             size_t slab, int i0, int j0, const float *w_post, mma_c (&dk)[DP / 8],
                                             mma_c (&dv)[DP / 8]) {
    const int ld = fa_ld(a.dp), w = threadIdx.x / 32;
    bf16 *dst = sh + at.dp1, *p1 = sh + at.phi;  // dS and P1, TC_M x (TC_N + FA_PAD) each
    int i[2], st[2];
    fa_lane_rows(a, bh / a.H, i0, i, st);
    float D[2];
    FA_UNROLL
    for (int r = 0; r < 2; r++) D[r] = i[r] < a.T ? a.D[(size_t)bh * a.T + i[r]] : 0.0f;
    mma_c s[8];
    fp_tiles(a, g, bh, i0, j0, slab, sh, at, st, s);
    fp_ds(g, sh + at.phi, sh + at.plo, D, s);
    __syncthreads();  // dP1 and the flipped band are no longer read
    fp_store(s, dst);
    fc_setup(a, g, bh / a.H, bh % a.H, i0, w_post, sh + at.band, (int *)(sh + at.stp));  // the forward's band
    __syncthreads();
    fa_zero(s);
    fc_conv<8>(g, fp_src_p(g, sh, at), 16 * w + g.rh - (g.cq - 1), 0, st, s);
    fp_mask_drop(a, bh, j0, i, st, s);
    __syncthreads();  // P is no longer read
    fp_store(s, p1);
    __syncthreads();
    FA_UNROLL
    for (int qc = 0; qc < 4; qc++) {
        fa_acc<DP>(dv, fp_aT(p1, 16 * w, 16 * qc), sh + at.dO + 16 * qc * ld, ld, a.dp);
        fa_acc<DP>(dk, fp_aT(dst, 16 * w, 16 * qc), sh + at.q + (g.rh + 16 * qc) * ld, ld, a.dp);
    }
}

// dK and dV of one key tile of one kv head with the post-softmax convolution (grid as k_fa_dkdv):
// its query heads in order, each over the query tiles from the diagonal on while their rows'
// documents can reach the tile's keys. After k_fa_post_dq (D).
template <int DP>
__global__ void __launch_bounds__(TC_THREADS, 2) k_fa_post_dkdv_t(tc_args a, const float *w_post, float *dk, float *dv) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    const fc_geo g = fc_geo_of(a.pcq, a.pck);
    const fpb_smem at = fpb_smem_of(TC_DKDV, a.dp, g);
    const int kvs = blockIdx.y, b = kvs / a.Hkv, rep = a.H / a.Hkv, j0 = blockIdx.x * TC_N, jlast = tc_last(a, j0);
    const size_t slab = (size_t)kvs * a.Tp * a.dp;
    mma_c dks[DP / 8], dvs[DP / 8];
    fa_zero(dks);
    fa_zero(dvs);
    for (int h = (kvs % a.Hkv) * rep; h < (kvs % a.Hkv + 1) * rep; h++) {
        const int bh = b * a.H + h;
        for (int i0 = j0; i0 < a.T && mta_row_start(a.ds, a.T, b, i0) <= jlast; i0 += TC_M) {
            __syncthreads();  // the last query tile's rows and tiles are no longer read
            fp_q_load(a, g, bh, i0, sh + at.q, sh + at.dO);
            fp_bwd_setup(a, g, bh, i0, w_post, sh, at);
            fp_dkdv_tile<DP>(a, g, at, sh, bh, slab, i0, j0, w_post, dks, dvs);
        }
    }
    fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
        const int j = j0 + 16 * (threadIdx.x / 32) + threadIdx.x % 32 / 4 + 8 * r;
        const size_t at_k = ((size_t)kvs * a.T + j) * a.d + c;
        if (j <= jlast) tc_add_kv(a, dk, at_k, a.scale * dks[n].x[x]), tc_add_kv(a, dv, at_k, dvs[n].x[x]);
    });
}

// The backward's launches (k_fa_post_dq, which writes D, then k_fa_post_dkdv) at the
// accumulators' width DP for a.dp; B batches, dwp the kernel gradient's partials.
template <int DP>
void fa_post_backward_at(const call *cl, const tc_args &a, int B, const float *w_post, float *dq, float *dk, float *dv,
                         float *dwp) {
    void (*const k_fa_post_dq)(tc_args, const float *, float *, float *) = k_fa_post_dq_t<DP>;
    void (*const k_fa_post_dkdv)(tc_args, const float *, float *, float *) = k_fa_post_dkdv_t<DP>;
    const size_t sm_q = fa_post_bwd_smem_bytes(TC_DQ, a.dp, a.pcq, a.pck);
    const size_t sm_kv = fa_post_bwd_smem_bytes(TC_DKDV, a.dp, a.pcq, a.pck);
    tc_smem_optin(k_fa_post_dq, sm_q);
    tc_smem_optin(k_fa_post_dkdv, sm_kv);
    const unsigned tiles = (unsigned)(a.Tp / TC_M);
    MTA_LAUNCH(k_fa_post_dq, dim3(tiles, (unsigned)(B * a.H)), TC_THREADS, sm_q, cl->s)(a, w_post, dq, dwp);
    MTA_LAUNCH(k_fa_post_dkdv, dim3(tiles, (unsigned)(B * a.Hkv)), TC_THREADS, sm_kv, cl->s)(a, w_post, dk, dv);
}
void fa_post_backward(const call *cl, const tc_args &a, int B, const float *w_post, float *dq, float *dk, float *dv,
                      float *dwp) {
    if (a.dp <= 64) fa_post_backward_at<64>(cl, a, B, w_post, dq, dk, dv, dwp);
    else fa_post_backward_at<128>(cl, a, B, w_post, dq, dk, dv, dwp);
}

#endif
