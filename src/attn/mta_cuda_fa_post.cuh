// mta_cuda_fa_post.cuh: the post-softmax key-query convolution (spec section 2, step 5) on mma.sync
// (docs/cuda.md, "The post-softmax convolution"): k_fa_post_forward and the backward's k_fa_post_*
// kernels. Included by mta_cuda_tc.cuh after mta_cuda_fa_conv.cuh, whose halo geometry (fc_geo),
// grown-tile products (fc_z) and band MMAs (fc_setup, fc_conv) it shares.
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
// after k_fa_forward wrote each row's log-sum-exp: per key tile P with halos, P1 by the bands,
// O += dropout(P1) V; writes O (before norm and gate) to out and a.o.
template <int DP>
__global__ void __launch_bounds__(TC_THREADS, 2) k_fa_post_forward_t(tc_args a, const float *w_post, float *out) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    const fc_geo g = fc_geo_of(a.pcq, a.pck);
    const fp_smem at = fp_smem_of(a.dp, g);
    const int dp = a.dp, ld = fa_ld(dp);
    const int bh = blockIdx.y, b = bh / a.H, i0 = (gridDim.x - 1 - blockIdx.x) * TC_M;
    bf16 *qs = sh + at.c.q, *ks = sh + at.c.k, *vb = sh + at.c.v, *phi = sh + at.c.zhi, *plo = sh + at.c.zlo;
    const bf16 *band = sh + at.c.band;
    int *stz = (int *)(sh + at.c.st);
    float *lse = (float *)(sh + at.lse);
    const size_t slab = tc_kv_slab(a, bh) * a.Tp * dp;
    const int jt0 = mta_row_start(a.ds, a.T, b, i0) / TC_N, jt1 = i0 / TC_N;
    fa_load_rows(qs, a.q + (size_t)bh * a.Tp * dp, i0 - g.rh, g.zr, a.T, dp);
    fc_kv_load(a, g, slab, jt0, ks, vb);
    cp_async_commit();
    fc_setup(a, g, b, bh % a.H, i0, w_post, sh + at.c.band, stz);
    fp_lse(a, g, bh, i0, lse);
    int i[2], st[2];
    fa_lane_rows(a, b, i0, i, st);
    mma_c o[DP / 8];
    fa_zero(o);
    for (int jt = jt0; jt <= jt1; jt++) {
        const bf16 *vs = vb + ((jt - jt0) & 1) * TC_N * ld;
        cp_async_wait<0>();  // this thread's copies of tile jt are done,
        __syncthreads();     // and every thread's; and the last tile's P and v are no longer read
        fc_z(a, g, i0, jt * TC_N, qs, ks, stz, lse, phi, plo);
        __syncthreads();  // P's halo rows come from other warps; k is no longer read
        if (jt < jt1) fc_kv_load(a, g, slab, jt + 1, ks, vb + ((jt - jt0 + 1) & 1) * TC_N * ld);
        cp_async_commit();
        mma_c s[8];
        fa_zero(s);
        fc_conv(g, i, st, phi, plo, band, s);
        fp_mask_drop(a, bh, jt * TC_N, i, st, s);
        FA_UNROLL
        for (int kc = 0; kc < 4; kc++) fa_acc<DP>(o, fa_a_of(s + 2 * kc), vs + 16 * kc * ld, ld, dp);
    }
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

#endif
