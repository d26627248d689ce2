// mta_cuda_fa_heads_dkdv.cuh: the head steps' dK, dV on mma.sync, k_fa_head_dkdv (docs/cuda.md,
// "Head mixing and head convolution"), for groups of G <= 16 heads. Included by mta_cuda_tc.cuh
// after mta_cuda_fa_heads_dq.cuh, whose block, stages and per-row step it runs.
//
// A block owns a key tile of FH_N = 32 keys of the group's G heads and walks the query tiles of 16
// rows from the diagonal while their documents reach the keys (fh_walk's qw). Per query tile,
// stages of two heads: q, k (S1 as the forward), dO, v (dP2), and q, dO. After the last dO, v
// stage each warp takes 4 query rows of every head as k_fa_head_dq does (fhq_step): S2, P, dP,
// dS2 = P (dP - D) with D from k_fa_head_dq, dS1 = dS2 W1 over the row's S1 lo and P2 = P W2' with
// dropout over its S1 hi (both [head][key] per row, fhq_ds_at). A q, dO stage adds, for head
// 2s + w / 2 (warps w, w ^ 1 splitting the columns), dV += P2^T dO and dK += scale dS1^T q
// (ldmatrix .trans of the [head][key] rows: fh_rows_acc's TR) to the head's own rows of the
// workspace's per-query-head dK, dV, which k_tc_head_kv sums per kv head.
#ifndef MTAC_ATTN_MTA_CUDA_FA_HEADS_DKDV_CUH
#define MTAC_ATTN_MTA_CUDA_FA_HEADS_DKDV_CUH

// The shared bytes of k_fa_head_dkdv at padded width dp: two stage buffers, S1's hi and lo, dP2.
size_t fhk_smem_bytes(int dp) { return (2 * (size_t)FH_STAGE * fa_ld(dp) + 3 * (size_t)FH_E * FH_MAXG) * sizeof(bf16); }

// dV += P2^T dO and dK += scale dS1^T q of the q, dO stage's head 2s + w / 2 at the tile's keys
// (warps w and w ^ 1 split the columns).
__device__ __forceinline__ void fhk_acc(const tc_args &a, const tc_heads &hd, const fhq_block &k, int s, int j0,
                                        const bf16 *buf, float *dkp, float *dvp) {
    const int w = threadIdx.x / 32, h = 2 * s + w / 2, ld = fa_ld(a.dp);
    if (h >= hd.G) return;
    const bf16 *qs = buf + (w / 2) * 2 * FH_M * ld;
    const size_t at = (size_t)(k.f.bh0 + h) * a.T * a.d;
    for (int half = 0; half < 2; half++) {  // fh_rows_acc's warps split the columns: both key halves
        const int r0 = j0 + 16 * half;
        fh_rows_acc<1>(a, r0, [&](int q, int c) { return k.f.s1h + fhq_ds_at(h, q, 16 * half + c); }, qs + FH_M * ld,
                       dvp + at, 1.0f, (const float *)NULL);
        fh_rows_acc<1>(a, r0, [&](int q, int c) { return k.f.s1l + fhq_ds_at(h, q, 16 * half + c); }, qs, dkp + at,
                       a.scale, (const float *)NULL);
    }
}

// Each query head's dK and dV of one key tile of FH_N keys (grid: x key tiles, y B*H/G) into dkp,
// dvp (B*H, T, d), over the query tiles from the diagonal on while their rows' documents reach the
// keys.
__global__ void __launch_bounds__(TC_THREADS) k_fa_head_dkdv(tc_args a, tc_heads hd, float *dkp, float *dvp) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    fhq_block k;
    fh_setup(a, hd, sh, k.f, 1);
    k.d2 = k.f.p2, k.scr = NULL;
    fhq_weights(a, hd, k);
    const int j0 = blockIdx.x * FH_N, jlast = (j0 + FH_N < a.T ? j0 + FH_N : a.T) - 1;
    for (int e = threadIdx.x; e < hd.G * FH_N * a.d; e += TC_THREADS) {
        const int n = e / (FH_N * a.d), j = j0 + e % (FH_N * a.d) / a.d;
        const size_t at = ((size_t)(k.f.bh0 + n) * a.T + j) * a.d + e % a.d;
        if (j <= jlast) dkp[at] = dvp[at] = 0.0f;
    }
    fh_walk wk;
    wk.npass = 1, wk.bwd = 2, wk.qw = 1, wk.P = (hd.G + 1) / 2, wk.kt = j0, wk.js = j0, wk.last = j0;
    while (wk.last + FH_M < a.T && mta_row_start(a.ds, a.T, k.f.b, wk.last + FH_M) <= jlast) wk.last += FH_M;
    __syncthreads();  // dkp, dvp cleared before the q, dO stages add to them
    fh_drive(a, hd.G, k.f, wk, sh,
             [&](fh_pos p, const bf16 *buf) {
                 const int kind = p.s / wk.P;
                 if (p.s == 0) k.f.i0 = p.i0, fh_rows(a, hd, k.f, 2);
                 if (kind == 0) {
                     fh_scores<0>(a, k.f, hd.G, p.s, j0, buf, k.f.s1h, k.f.s1l);
                 } else if (kind == 1) {
                     fh_scores<1>(a, k.f, hd.G, p.s % wk.P, j0, buf, k.d2, NULL);
                     if (p.s % wk.P == wk.P - 1) {
                         __syncthreads();
                         fhq_step<1>(a, hd, k, 1, j0);
                     }
                 } else {
                     fhk_acc(a, hd, k, p.s % wk.P, j0, buf, dkp, dvp);
                 }
             },
             [&]() {});
}

#endif
