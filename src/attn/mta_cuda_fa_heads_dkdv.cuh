// mta_cuda_fa_heads_dkdv.cuh: the head steps' dK, dV on mma.sync, k_fa_head_dkdv (docs/cuda.md,
// "Head mixing and head convolution"), for groups of G <= 32 heads (NQ as the forward's). Included
// by mta_cuda_tc.cuh after mta_cuda_fa_heads_dq.cuh, whose block, stages and per-row step it runs.
//
// A block owns a key tile of fh_keys(NQ) keys (32, or 16 with NQ 2) of the group's G heads and
// walks the query tiles of 16 rows from the diagonal while their documents reach the keys
// (fh_walk's qw). Per query tile,
// stages of two heads: q, k (S1 as the forward), dO, v (dP2), and q, dO. After the last dO, v
// stage each warp takes 4 query rows of every head as k_fa_head_dq does (fhq_step): S2, P, dP,
// dS2 = P (dP - D) with D from k_fa_head_dq, dS1 = dS2 W1 over the row's S1 lo and P2 = P W2' with
// dropout over its S1 hi (both [head][key] per row, fhq_ds_at). A q, dO stage adds, for head
// 2s + w / 2 (warps w, w ^ 1 splitting the columns), dV += P2^T dO and dK += scale dS1^T q
// (ldmatrix .trans of the [head][key] rows: fh_rows_acc's TR) to the head's own rows of the
// workspace's per-query-head dK, dV, which k_tc_head_kv sums per kv head.
#ifndef MTAC_ATTN_MTA_CUDA_FA_HEADS_DKDV_CUH
#define MTAC_ATTN_MTA_CUDA_FA_HEADS_DKDV_CUH

// dV += P2^T dO and dK += scale dS1^T q of the q, dO stage's head 2s + w / 2 at the tile's keys
// (warps w and w ^ 1 split the columns).
template <int NQ>
__device__ __forceinline__ void fhk_acc(const tc_args &a, const tc_heads &hd, const fhq_block<NQ> &k, int s, int j0,
                                        const bf16 *buf, float *dkp, float *dvp) {
    const int w = threadIdx.x / 32, h = 2 * s + w / 2, ld = fa_ld(a.dp);
    if (h >= hd.G) return;
    const bf16 *qs = buf + (w / 2) * 2 * FH_M * ld;
    const size_t at = (size_t)(k.f.bh0 + h) * a.T * a.d;
    for (int half = 0; half < fh_kc(NQ); half++) {  // fh_rows_acc's warps split the columns: each 16 keys
        const int r0 = j0 + 16 * half;
        fh_rows_acc<1>(a, r0, [&](int q, int c) { return k.f.s1h + fhq_ds_at<NQ>(h, q, 16 * half + c); },
                       qs + FH_M * ld, dvp + at, 1.0f, (const float *)NULL);
        fh_rows_acc<1>(a, r0, [&](int q, int c) { return k.f.s1l + fhq_ds_at<NQ>(h, q, 16 * half + c); }, qs,
                       dkp + at, a.scale, (const float *)NULL);
    }
}

// Each query head's dK and dV of one key tile of fh_keys(NQ) keys (grid: x key tiles, y B*H/G) into dkp,
// dvp (B*H, T, d), over the query tiles from the diagonal on while their rows' documents reach the
// keys.
template <int NQ>
__global__ void __launch_bounds__(TC_THREADS, 2) k_fa_head_dkdv_t(tc_args a, tc_heads hd, float *dkp, float *dvp) {
    MTA_DYNAMIC_SHARED(unsigned char, sh);
    constexpr int N = fh_keys(NQ);
    fhq_block<NQ> k;
    const fh_smem s = fh_setup(a, hd, sh, k.f, TC_DKDV);
    k.d2 = k.f.p2;
    const int j0 = blockIdx.x * N, jlast = (j0 + N < a.T ? j0 + N : a.T) - 1;
    for (int e = threadIdx.x; e < hd.G * N * a.d; e += TC_THREADS) {
        const int n = e / (N * a.d), j = j0 + e % (N * a.d) / a.d;
        const size_t at = ((size_t)(k.f.bh0 + n) * a.T + j) * a.d + e % a.d;
        if (j <= jlast) dkp[at] = dvp[at] = 0.0f;
    }
    fh_walk wk;
    wk.npass = 1, wk.bwd = 2, wk.qw = 1, wk.P = (hd.G + 1) / 2, wk.kt = j0, wk.js = j0, wk.last = j0;
    while (wk.last + FH_M < a.T && mta_row_start(a.ds, a.T, k.f.b, wk.last + FH_M) <= jlast) wk.last += FH_M;
    __syncthreads();  // dkp, dvp cleared before the q, dO stages add to them
    fh_drive(a, hd.G, k.f, wk, s,
             [&](fh_pos p, const bf16 *buf) {
                 const int kind = p.s / wk.P;
                 if (p.s == 0) k.f.i0 = p.i0, fh_rows(a, hd, k.f, 2);
                 if (kind == 0) {
                     fh_scores<NQ, 0>(a, k.f, hd.G, p.s, j0, buf, k.f.s1h, k.f.s1l);
                 } else if (kind == 1) {
                     fh_scores<NQ, 1>(a, k.f, hd.G, p.s % wk.P, j0, buf, k.d2, (bf16 *)NULL);
                     if (p.s % wk.P == wk.P - 1) {
                         __syncthreads();
                         fhq_step<NQ, 1>(a, hd, k, 1, j0, (bf16 *)NULL);
                     }
                 } else {
                     fhk_acc(a, hd, k, p.s % wk.P, j0, buf, dkp, dvp);
                 }
             },
             [&]() {});
}

// The backward's two head kernels: dQ (with D and the kernel partials in hwp, query tiles of FH_M)
// before dK, dV (key tiles of fh_keys(NQ)), which read D; q 0: dK, dV only (the caller ran the
// cluster dQ), kv 0: dQ only (the caller runs the cluster dK, dV).
template <int NQ>
void fh_backward_t(const call *cl, const tc_args &a, const tc_heads &hd, int B, float *dq, float *hwp, float *dkp,
                   float *dvp, int q, int kv) {
    void (*const k_fa_head_dq)(tc_args, tc_heads, float *, float *) = k_fa_head_dq_t<NQ>;
    void (*const k_fa_head_dkdv)(tc_args, tc_heads, float *, float *) = k_fa_head_dkdv_t<NQ>;
    const size_t smq = fh_smem_bytes(TC_DQ, hd.G, a.dp), smk = fh_smem_bytes(TC_DKDV, hd.G, a.dp);
    const unsigned y = (unsigned)(B * a.H / hd.G);
    if (q) {
        tc_smem_optin(k_fa_head_dq, smq);
        MTA_LAUNCH(k_fa_head_dq, dim3((unsigned)((a.T + FH_M - 1) / FH_M), y), TC_THREADS, smq, cl->s)(a, hd, dq, hwp);
    }
    if (!kv) return;
    tc_smem_optin(k_fa_head_dkdv, smk);
    const unsigned kt = (unsigned)((a.T + fh_keys(NQ) - 1) / fh_keys(NQ));
    MTA_LAUNCH(k_fa_head_dkdv, dim3(kt, y), TC_THREADS, smk, cl->s)(a, hd, dkp, dvp);
}
void fh_backward(const call *cl, const tc_args &a, const tc_heads &hd, int B, float *dq, float *hwp, float *dkp,
                 float *dvp, int q, int kv) {
    if (hd.nq == 2) fh_backward_t<2>(cl, a, hd, B, dq, hwp, dkp, dvp, q, kv);
    else fh_backward_t<1>(cl, a, hd, B, dq, hwp, dkp, dvp, q, kv);
}

#endif
