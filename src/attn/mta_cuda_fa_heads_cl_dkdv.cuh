// mta_cuda_fa_heads_cl_dkdv.cuh: the head steps' dK, dV for groups of G <= 16 heads on thread block
// clusters (sm_90, attn/cluster_ptx.cuh): k_fa_head_cl_dkdv. Included by mta_cuda_tc.cuh after
// mta_cuda_fa_heads_cl.cuh (FHC_N, FHC_E, FHC_WLD, FHC_WSZ, fhc_mix) and the head kernels' headers
// (fh_s1_at, fh_wval; D from k_fa_head_dq).
//
// k_fa_head_dkdv has one block hold a key tile of all G heads and add dK, dV of every head into
// global memory for every query tile it walks. Here a cluster of C = ceil(G / 8) blocks of 8 warps
// shares a key tile of FHC_N = 16 keys: block rank r owns heads 8r..8r+7 (warp w head 8r + w, where
// it exists), keeps their k and v in shared memory and their dK, dV in registers (warp w's C
// fragments: 16 keys by dp) for the whole walk, and streams only their q and dO per query tile
// (cp.async, double-buffered where shared memory allows, else one buffer refilled after the tile).
// It walks the query tiles of FH_M rows as k_fa_head_dkdv (from the diagonal while their rows'
// documents reach the keys). What the head mixing needs of the other heads comes through
// distributed shared memory, two all-gathers per query tile into every block's [entry][head]
// arrays (fh_s1_at; a block's 8 heads of an entry are one 16-byte unit, one cl_st16):
//   X1: S1 = scale q_h k_h^T (hi, lo) and dP2 = dropout(dO_h v_h^T) (hi) of the own heads; cl_sync();
//   each warp's query rows 2w, 2w + 1, own output heads only (m16n8k16, N = 8): S2 = S1 W1^T,
//   P = exp(S2 - lse), dP = dP2 W2'^T, dS2 = P (dP - D);
//   X2: dS2 (hi, lo) and, with step 6, P (hi, lo) of the own heads; cl_sync();
//   dS1 = dS2 W1 and P2 = P W2' (without step 6 P2 = P, from the first mixing's registers) with
//   dropout, for the own heads, bf16 into the block's [head][query][key] arrays;
//   dV_h += P2_h^T dO_h and dK_h += dS1_h^T q_h in warp w's registers (scale once at the end),
//   at the end summed per kv head and added into the caller's dk, dv where a block holds each kv
//   head's query heads (fhd_adds_kv, fhd_finish_kv), else written once into the workspace's
//   per-query-head rows that k_tc_head_kv sums.
// The numerics are k_fa_head_dkdv's: S1, W1, P, dS2 and W2 split into hi + lo bf16 with three MMAs
// (dP2 hi only, two), P2 and dS1 rounded once, the same masking, dropout (tc_drop), document starts.
//
// Synchronisation. X1's and X2's arrays alternate, so each needs one buffer and one cl_sync() per
// exchange: a block stores into X1's arrays (its own and the others') only after it waited on the
// previous tile's X2 cl_sync(), at which every block arrives only after its first mixing, the last
// reads of X1's arrays; it stores into X2's only after the tile's X1 cl_sync(), at which every
// block arrives only after the previous tile's second mixing, the last reads of X2's. A cl_sync()
// after the setup orders each block's zeroing of its arrays (the heads past G of X1, and with
// G <= 8 the unit of rank 1, are read, never written) before the others' stores; the kernel ends with cl_arrive_relaxed(); cl_wait().
//
// Why these sizes: a warp per head gives every warp one dK and one dV in registers (dp floats a
// lane), so one block of 8 warps per SM (k_fa_every_dkdv's reason too: the working set, with 8
// heads' k, v, q and dO, is past the 113 KB of two blocks); 8 heads a block make 16 heads a
// cluster of 2, whose all-gathers store each value into 1 other block, against 3 with 4 blocks.
#ifndef MTAC_ATTN_MTA_CUDA_FA_HEADS_CL_DKDV_CUH
#define MTAC_ATTN_MTA_CUDA_FA_HEADS_CL_DKDV_CUH

const int FHD_HB = 8, FHD_THREADS = 32 * FHD_HB;  // heads (and warps) of a block; its threads
const int FHD_ARR = FHC_E * 16;                    // bf16 of an [entry][head] array

// The cluster's blocks for a group of G heads.
__host__ __device__ inline int fhd_cs(int G) { return (G + FHD_HB - 1) / FHD_HB; }

// The shared arrays of a block (nbuf stage buffers).
struct fhd_smem {
    bf16 *kv;          // the own heads' k then v rows of the key tile: (2, 8, FHC_N, fa_ld)
    bf16 *stage;       // nbuf stage buffers: the own heads' q then dO rows of a query tile (2, 8, FH_M, fa_ld)
    size_t sbuf;       // bf16 of a stage buffer
    bf16 *x1, *x2;     // X1: S1 hi, lo, dP2; X2: dS2 hi, lo, P hi, lo (FHD_ARR each)
    bf16 *p2, *ds1;    // (8, FH_M, FHC_N): P2 and dS1 of the own heads (fhd_pa)
    bf16 *w;           // the mixing blocks FHC_W1, FHC_W2T, FHC_W2, FHC_W1T (fhc_weights)
    float *al, *ls;    // (8, FH_M): the query tile's log-sum-exp and D of the own heads
};
__host__ __device__ inline size_t fhd_carve(int nbuf, int dp, unsigned char *base, fhd_smem *s) {
    const size_t rows = (size_t)FHD_HB * fa_ld(dp), pa = (size_t)FHD_HB * FH_M * FHC_N;
    carver cv = {base, 0};
    s->sbuf = 2 * rows * FH_M;
    s->kv = cv.take<bf16>(2 * rows * FHC_N), s->stage = cv.take<bf16>(nbuf * s->sbuf);
    s->x1 = cv.take<bf16>(3 * (size_t)FHD_ARR), s->x2 = cv.take<bf16>(4 * (size_t)FHD_ARR);
    s->p2 = cv.take<bf16>(pa), s->ds1 = cv.take<bf16>(pa);
    s->w = cv.take<bf16>(8 * (size_t)FHC_WSZ);
    s->al = cv.take<float>(FHD_HB * FH_M), s->ls = cv.take<float>(FHD_HB * FH_M);
    return cv.at;
}
size_t fhd_smem_bytes(int nbuf, int dp) {
    fhd_smem s;
    return fhd_carve(nbuf, dp, NULL, &s);
}

// Where own head lh's query row q, key lies in p2 and ds1: rows of 16 keys (32 bytes), their 16-byte
// units XOR q / 4 % 2, so that the 8 rows an ldmatrix reads hit distinct banks (no padding: with it
// two stage buffers at d = 96 are past an H100's 227 KB).
__device__ __forceinline__ int fhd_pa(int lh, int q, int key) {
    return (lh * FH_M + q) * FHC_N + ((key / 8) ^ (q / 4 % 2)) * 8 + key % 8;
}

// A block's arrays and per-lane state.
template <int DP> struct fhd_block {
    fhd_smem s;
    int b, bh0, j0, r, C, nbuf;  // batch, the group's first (batch, head), key tile, rank, cluster size
    int i0, st[2], stq[2];       // query tile; document starts of rows g, g + 8 (S1) and 2w + qq (mixing)
    mma_c dk[DP / 8], dv[DP / 8];  // dK / scale and dV of head 8r + w, keys g, g + 8
};

// The query tile i0's state: the document starts of this lane's rows, lse and D of the own heads.
template <int DP> __device__ __forceinline__ void fhd_rows(const tc_args &a, const tc_heads &hd, fhd_block<DP> &k, int i0) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
    k.i0 = i0;
    FA_UNROLL
    for (int r = 0; r < 2; r++) {
        const int i = i0 + g + 8 * r, iq = i0 + 2 * w + r;
        k.st[r] = i < a.T ? mta_row_start(a.ds, a.T, k.b, i) : 0;
        k.stq[r] = iq < a.T ? mta_row_start(a.ds, a.T, k.b, iq) : 0;
    }
    for (int e = threadIdx.x; e < FHD_HB * FH_M; e += FHD_THREADS) {
        const int h = FHD_HB * k.r + e / FH_M, i = i0 + e % FH_M, in = i < a.T && h < hd.G;
        const size_t at = (size_t)(k.bh0 + h) * a.T + i;
        k.s.al[e] = in ? a.lse[at] : 0.0f;
        k.s.ls[e] = in ? a.D[at] : 0.0f;
    }
}

// Head h of a cluster kernel's 16 query rows from i0 (document starts st of rows g, g + 8) and 16
// keys from j0: S1 = scale q k^T split into hi, lo and dP2 = dropout(dO v^T) (hi), 0 where the row
// does not see the key, into the X1 arrays x (S1 hi, lo, dP2, FHD_ARR apart). q: the head's q rows,
// its dO rows qd further; k: its k rows, its v rows kd further.
__device__ __forceinline__ void fhd_x1(const tc_args &a, int bh0, int h, int i0, int j0, const int st[2], const bf16 *q,
                                       size_t qd, const bf16 *k, size_t kd, bf16 *x) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int x2 = 0; x2 < 2; x2++) {
        mma_c c[2] = {};
        fa_xyT(c, q + x2 * qd, k + x2 * kd, fa_ld(a.dp), a.dp);
        FA_UNROLL
        for (int n = 0; n < 2; n++)
            FA_UNROLL
            for (int e = 0; e < 4; e++) {
                const int r = g + 8 * (e / 2), key = 8 * n + 2 * t + e % 2, i = i0 + r, j = j0 + key;
                const int at = fh_s1_at<1>(r * FHC_N + key, h);
                float v = 0.0f;
                if (fa_ok(a.T, i, st[e / 2], j)) v = c[n].x[e] * (x2 ? tc_drop(a, bh0 + h, i, j) : a.scale);
                if (x2) x[2 * FHD_ARR + at] = __float2bfloat16_rn(v);
                else bf16_split(v, x[at], x[FHD_ARR + at]);
            }
    }
}

// Warp w's head 8r + w into the block's X1 arrays (buf: the stage of q and dO).
template <int DP>
__device__ __forceinline__ void fhd_scores(const tc_args &a, const tc_heads &hd, const fhd_block<DP> &k, const bf16 *buf) {
    const int w = threadIdx.x / 32, h = FHD_HB * k.r + w, ld = fa_ld(a.dp);
    if (h >= hd.G) return;
    fhd_x1(a, k.bh0, h, k.i0, k.j0, k.st, buf + w * FH_M * ld, (size_t)FHD_HB * FH_M * ld, k.s.kv + w * FHC_N * ld,
           (size_t)FHD_HB * FHC_N * ld, k.s.x1);
}

// The block's unit (heads 8r..8r+7) of every entry of its first na arrays from x into the same
// arrays of the cluster's other blocks, 16 bytes a store (k: a cluster kernel's block, its rank r of C).
template <typename K> __device__ __forceinline__ void fhd_share(const K &k, const bf16 *x, int na) {
    for (int e = threadIdx.x; e < na * FHC_E; e += FHD_THREADS) {
        const bf16 *src = x + e / FHC_E * FHD_ARR + fh_s1_at<1>(e % FHC_E, FHD_HB * k.r);
        const uint32_t *v = (const uint32_t *)src;
        const uint32_t v0 = v[0], v1 = v[1], v2 = v[2], v3 = v[3];
        for (int q = 1; q < k.C; q++) cl_st16(cl_map(src, (k.r + q) % k.C), v0, v1, v2, v3);
    }
}

// P2 of warp w's row 2w + qq (y: keys g, g + 8 of own heads 2t + hh, 0 where unseen) with dropout,
// bf16 into p2 (own heads < G).
template <int DP>
__device__ __forceinline__ void fhd_store_p2(const tc_args &a, const tc_heads &hd, const fhd_block<DP> &k, int qq,
                                             const mma_c &y) {
    const int q = 2 * (threadIdx.x / 32) + qq, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int x = 0; x < 4; x++) {
        const int lh = 2 * t + x % 2, h = FHD_HB * k.r + lh, key = g + 8 * (x / 2);
        if (h >= hd.G) continue;
        const float f = y.x[x] != 0.0f ? tc_drop(a, k.bh0 + h, k.i0 + q, k.j0 + key) : 0.0f;
        k.s.p2[fhd_pa(lh, q, key)] = __float2bfloat16_rn(y.x[x] * f);
    }
}

// x's pairs (own heads 2t, 2t + 1 at keys g, g + 8 of row q) split into hi, lo [entry][head] arrays.
template <typename K> __device__ __forceinline__ void fhd_put(const K &k, bf16 *hi, bf16 *lo, int q, const mma_c &x) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int r = 0; r < 2; r++) {
        const int at = fh_s1_at<1>(q * FHC_N + g + 8 * r, FHD_HB * k.r + 2 * t);
        bf16x2_split(x.x[2 * r], x.x[2 * r + 1], *(uint32_t *)(hi + at), *(uint32_t *)(lo + at));
    }
}

// The first mixing, warp w's rows 2w + qq: S2, P, dP, dS2 = P (dP - D) of the own heads; dS2 and
// (with step 6) P into the X2 arrays, else P2 = P into p2.
template <int DP> __device__ __forceinline__ void fhd_mix1(const tc_args &a, const tc_heads &hd, fhd_block<DP> &k) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int qq = 0; qq < 2; qq++) {
        const int q = 2 * w + qq, e0 = q * FHC_N;
        mma_c p, dp;
        fhc_mix<1>(k.s.x1, k.s.x1 + FHD_ARR, k.s.w, e0, p);
        fhc_mix<0>(k.s.x1 + 2 * FHD_ARR, NULL, k.s.w + 2 * FHC_WSZ, e0, dp);
        FA_UNROLL
        for (int x = 0; x < 4; x++) {
            const int lh = 2 * t + x % 2;
            float &v = p.x[x];
            v = fa_ok(a.T, k.i0 + q, k.stq[qq], k.j0 + g + 8 * (x / 2)) ? expf(v - k.s.al[lh * FH_M + q]) : 0.0f;
            dp.x[x] = v * (dp.x[x] - k.s.ls[lh * FH_M + q]);  // dS2
        }
        fhd_put(k, k.s.x2, k.s.x2 + FHD_ARR, q, dp);
        if (hd.ch) fhd_put(k, k.s.x2 + 2 * FHD_ARR, k.s.x2 + 3 * FHD_ARR, q, p);
        else fhd_store_p2(a, hd, k, qq, p);
    }
}

// dS1 = dS2 W1 of query row q (x: X2's dS2 hi, lo; m: the FHC_W1T block) for the own heads < G, bf16
// into ds1 (fhd_pa).
template <typename K>
__device__ __forceinline__ void fhd_ds1(const K &k, int G, const bf16 *x, const bf16 *m, int q, bf16 *ds1) {
    const int g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    mma_c y;
    fhc_mix<1>(x, x + FHD_ARR, m, q * FHC_N, y);
    FA_UNROLL
    for (int e = 0; e < 4; e++) {
        const int lh = 2 * t + e % 2;
        if (FHD_HB * k.r + lh < G) ds1[fhd_pa(lh, q, g + 8 * (e / 2))] = __float2bfloat16_rn(y.x[e]);
    }
}

// The second mixing, warp w's rows 2w + qq: with step 6 P2 = P W2' into p2; dS1 = dS2 W1 into ds1.
template <int DP> __device__ __forceinline__ void fhd_mix2(const tc_args &a, const tc_heads &hd, fhd_block<DP> &k) {
    const int w = threadIdx.x / 32;
    FA_UNROLL
    for (int qq = 0; qq < 2; qq++) {
        const int q = 2 * w + qq, e0 = q * FHC_N;
        mma_c y;
        if (hd.ch) {
            fhc_mix<1>(k.s.x2 + 2 * FHD_ARR, k.s.x2 + 3 * FHD_ARR, k.s.w + 4 * FHC_WSZ, e0, y);
            fhd_store_p2(a, hd, k, qq, y);
        }
        fhd_ds1(k, hd.G, k.s.x2, k.s.w + 6 * FHC_WSZ, q, k.s.ds1);
    }
}

// dV += P2^T dO and dK += dS1^T q of warp w's head (A: its [query][key] rows read by ldmatrix .trans,
// fh_rows_acc's TR addresses).
template <int DP>
__device__ __forceinline__ void fhd_acc(const tc_args &a, const tc_heads &hd, fhd_block<DP> &k, const bf16 *buf) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, ld = fa_ld(a.dp);
    if (FHD_HB * k.r + w >= hd.G) return;
    const int at = fhd_pa(w, l % 8 + 8 * (l / 16), 8 * (l / 8 % 2));
    mma_a pa;
    ldsm_x4_t(pa.x, k.s.p2 + at);
    fa_acc<DP>(k.dv, pa, buf + (FHD_HB + w) * FH_M * ld, ld, a.dp);
    ldsm_x4_t(pa.x, k.s.ds1 + at);
    fa_acc<DP>(k.dk, pa, buf + w * FH_M * ld, ld, a.dp);
}

// One query tile (its q, dO stage in buf), as the header says.
template <int DP>
__device__ __forceinline__ void fhd_tile(const tc_args &a, const tc_heads &hd, fhd_block<DP> &k, int i0, const bf16 *buf) {
    fhd_rows(a, hd, k, i0);
    fhd_scores(a, hd, k, buf);
    __syncthreads();  // the block's heads of each entry are in place
    fhd_share(k, k.s.x1, 3);
    cl_sync();  // and every block's
    fhd_mix1(a, hd, k);
    __syncthreads();
    fhd_share(k, k.s.x2, hd.ch ? 4 : 2);
    cl_sync();
    fhd_mix2(a, hd, k);
    __syncthreads();  // p2 and ds1 of every own head are in place
    fhd_acc(a, hd, k, buf);
}

// Issues the copies of query tile i0's q and dO rows of the own heads into buf.
template <int DP>
__device__ __forceinline__ void fhd_stage_load(const tc_args &a, const tc_heads &hd, const fhd_block<DP> &k, int i0,
                                               bf16 *buf) {
    const int ld = fa_ld(a.dp);
    for (int u = 0; u < FHD_HB && FHD_HB * k.r + u < hd.G; u++) {
        const size_t qs = (size_t)(k.bh0 + FHD_HB * k.r + u) * a.Tp * a.dp;
        fa_load_rows(buf + u * FH_M * ld, a.q + qs, i0, FH_M, a.T, a.dp, FHD_THREADS);
        fa_load_rows(buf + (FHD_HB + u) * FH_M * ld, a.dO + qs, i0, FH_M, a.T, a.dp, FHD_THREADS);
    }
}

// The block's setup: shared arrays, rank, key tile (the clusters' first the longest walk), mixing
// blocks, zeroed exchange arrays and registers; k and v's copies issued (committed with the first
// stage's).
template <int DP>
__device__ __forceinline__ void fhd_setup(const tc_args &a, const tc_heads &hd, unsigned char *sh, int nbuf,
                                          fhd_block<DP> &k) {
    const int ld = fa_ld(a.dp);
    fhd_carve(nbuf, a.dp, sh, &k.s);
    k.nbuf = nbuf, k.r = (int)cl_rank(), k.C = (int)cl_size();
    k.bh0 = blockIdx.y * hd.G, k.b = k.bh0 / a.H, k.j0 = blockIdx.x / k.C * FHC_N;
    fhc_weights<FHC_W1, FHC_W2T, FHC_W2, FHC_W1T>(a, hd, k.bh0, k.r, k.s.w);
    fa_zero(k.dk), fa_zero(k.dv);
    const bf16 zero = __float2bfloat16_rn(0.0f);
    for (int e = threadIdx.x; e < 7 * FHD_ARR; e += FHD_THREADS) (e < 3 * FHD_ARR ? k.s.x1 : k.s.x2 - 3 * FHD_ARR)[e] = zero;
    for (int u = 0; u < FHD_HB && FHD_HB * k.r + u < hd.G; u++) {
        const size_t kv = tc_kv_slab(a, k.bh0 + FHD_HB * k.r + u) * a.Tp * a.dp;
        fa_load_rows(k.s.kv + u * FHC_N * ld, a.k + kv, k.j0, FHC_N, a.T, a.dp, FHD_THREADS);
        fa_load_rows(k.s.kv + (FHD_HB + u) * FHC_N * ld, a.v + kv, k.j0, FHC_N, a.T, a.dp, FHD_THREADS);
    }
}

// 1 where k_fa_head_cl_dkdv runs hd's groups (fh_cl_takes; clusters: cuda_state.clusters) and each
// kv head's rep = H / H_kv query heads lie in one block of a cluster: rep divides G (the groups start
// at multiples of G) and the block's heads (8, or G when G <= 8). Its blocks then add each kv head's
// dK, dV into the caller's dk, dv themselves (fhd_finish_kv): no per-query-head dK, dV in the
// workspace (tc_carve) and no k_tc_head_kv (tc_head_sums). The one decision of both.
int fhd_adds_kv(const tc_heads &hd, int clusters, int dp, size_t smem_max, int rep) {
    return fh_cl_takes(hd, clusters, fhd_smem_bytes(1, dp), smem_max) && hd.G % rep == 0 &&
           (hd.G <= FHD_HB || FHD_HB % rep == 0);
}

// The end, per query head: dK (scaled) and dV of warp w's head into dkp, dvp's rows of the key tile.
template <int DP>
__device__ __forceinline__ void fhd_finish(const tc_args &a, const tc_heads &hd, const fhd_block<DP> &k, float *dkp,
                                           float *dvp) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4;
    if (FHD_HB * k.r + w >= hd.G) return;
    const size_t bh = (size_t)k.bh0 + FHD_HB * k.r + w;
    fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
        const int j = k.j0 + g + 8 * r;
        const size_t at = (bh * a.T + j) * a.d + c;
        if (j < a.T) dkp[at] = a.scale * k.dk[n].x[x], dvp[at] = k.dv[n].x[x];
    });
}

// The end with fhd_adds_kv: warp w's dK (scaled) and dV staged as float32 (2, 8, FHC_N, d) over the
// block's kv and stage arrays, the first of its shared memory sh (fhd_carve; 2 (1 + nbuf) 8 FHC_N
// fa_ld bf16, at least the 2 8 FHC_N d floats; free after the walk: its copies waited on, their last
// reads before the loop's last barrier), then each kv head's dK, dV at the key tile: its rep query
// heads summed from 0 in order, as k_tc_head_kv sums dkp, dvp (the same bits), and added into dk,
// dv (B*H_kv, T, d) by tc_add_kv. (sh itself, not k.s.kv: through the carver's NULL case nvcc loses
// that the pointer is shared memory.)
template <int DP>
__device__ __forceinline__ void fhd_finish_kv(const tc_args &a, const tc_heads &hd, const fhd_block<DP> &k,
                                              unsigned char *sh, float *dk, float *dv) {
    const int w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, rep = a.H / a.Hkv;
    const int nh = hd.G - FHD_HB * k.r < FHD_HB ? hd.G - FHD_HB * k.r : FHD_HB;  // the block's heads
    float *const sk = (float *)(void *)sh, *const sv = sk + FHD_HB * FHC_N * a.d;
    if (w < nh)
        fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
            const int at = (w * FHC_N + g + 8 * r) * a.d + c;
            sk[at] = a.scale * k.dk[n].x[x], sv[at] = k.dv[n].x[x];
        });
    __syncthreads();  // every warp's tiles are staged
    for (int e = threadIdx.x; e < nh / rep * FHC_N * a.d; e += FHD_THREADS) {
        const int m = e / (FHC_N * a.d), at = e % (FHC_N * a.d), j = k.j0 + at / a.d;
        if (j >= a.T) continue;
        float x = 0.0f, y = 0.0f;
        for (int u = 0, h = m * rep; u < rep; u++, h++) x += sk[h * FHC_N * a.d + at], y += sv[h * FHC_N * a.d + at];
        const size_t to = (tc_kv_slab(a, k.bh0 + FHD_HB * k.r + m * rep) * a.T + j) * a.d + at % a.d;
        tc_add_kv(a, dk, to, x);
        tc_add_kv(a, dv, to, y);
    }
}

// dK, dV of each query head of G <= 16 heads on clusters of fhd_cs(G) blocks (grid: x the key tiles
// of FHC_N keys times the cluster size, y B*H/G) into dkp, dvp (B*H, T, d), over the query tiles
// from the diagonal on while their rows' documents reach the keys; nbuf stage buffers (fh_cl_nbuf).
// With kv (fhd_adds_kv) dkp, dvp are the caller's dk, dv and each block adds its kv heads' sums there.
template <int DP>
__global__ void __launch_bounds__(FHD_THREADS, 1) k_fa_head_cl_dkdv_t(tc_args a, tc_heads hd, int nbuf, int kv,
                                                                      float *dkp, float *dvp) {
    MTA_DYNAMIC_SHARED(unsigned char, sh);
    fhd_block<DP> k;
    fhd_setup(a, hd, sh, nbuf, k);
    const int jlast = (k.j0 + FHC_N < a.T ? k.j0 + FHC_N : a.T) - 1;
    int last = k.j0;
    while (last + FH_M < a.T && mta_row_start(a.ds, a.T, k.b, last + FH_M) <= jlast) last += FH_M;
    fhd_stage_load(a, hd, k, k.j0, k.s.stage);
    cp_async_commit();
    cl_sync();  // every block's arrays are zeroed before any block writes into them
    for (int n = 0, i0 = k.j0; i0 <= last; n++, i0 += FH_M) {
        const int more = i0 + FH_M <= last;
        bf16 *const buf = k.s.stage + (nbuf == 2 ? (n & 1) : 0) * k.s.sbuf;
        if (nbuf == 2) {
            if (more) fhd_stage_load(a, hd, k, i0 + FH_M, k.s.stage + ((n + 1) & 1) * k.s.sbuf);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        fhd_tile(a, hd, k, i0, buf);
        __syncthreads();  // before the next stage's copies overwrite a buffer and the tile's arrays
        if (nbuf == 1 && more) fhd_stage_load(a, hd, k, i0 + FH_M, buf), cp_async_commit();
    }
    if (kv) fhd_finish_kv(a, hd, k, sh, dkp, dvp);
    else fhd_finish(a, hd, k, dkp, dvp);
    cl_arrive_relaxed();  // other blocks may still write this block's arrays until all arrive
    cl_wait();
}

// The launch, at dK and dV's width DP for a.dp (the caller checks fh_cl_takes; kv: fhd_adds_kv).
template <int DP>
void fhd_dkdv_at(const call *cl, const tc_args &a, const tc_heads &hd, int B, int kv, float *dkp, float *dvp) {
    void (*const k_fa_head_cl_dkdv)(tc_args, tc_heads, int, int, float *, float *) = k_fa_head_cl_dkdv_t<DP>;
    const int nbuf = fh_cl_nbuf(fhd_smem_bytes, a.dp, cl->st->smem_max);
    const size_t sm = fhd_smem_bytes(nbuf, a.dp);
    const unsigned cs = (unsigned)fhd_cs(hd.G);
    tc_smem_optin(k_fa_head_cl_dkdv, sm);
    const dim3 grid((unsigned)((a.T + FHC_N - 1) / FHC_N) * cs, (unsigned)(B * a.H / hd.G));
    MTA_LAUNCH_CLUSTER(k_fa_head_cl_dkdv, grid, FHD_THREADS, sm, cl->s, cs)(a, hd, nbuf, kv, dkp, dvp);
}
void fh_cl_dkdv(const call *cl, const tc_args &a, const tc_heads &hd, int B, int kv, float *dkp, float *dvp) {
    if (a.dp <= 64) fhd_dkdv_at<64>(cl, a, hd, B, kv, dkp, dvp);
    else fhd_dkdv_at<128>(cl, a, hd, B, kv, dkp, dvp);
}

#endif
