// mta_cuda_fa_conv_bwd.cuh: the pre-softmax key-query convolution's backward on mma.sync band MMAs
// (docs/cuda.md, "The pre-softmax convolution"): k_fa_conv_dq (template k_fa_conv_dq_t<DP>).
// Included by mta_cuda_tc.cuh after mta_cuda_fa_conv.cuh, whose geometry (fc_geo_of(.., 1)), bands
// and band products (fc_conv) it uses.
//
// Per (query tile i0, key tile j0) the block recomputes, on the grown tile (fc_geo: S1 and dS1 on
// sr rows from i0 and kd columns from j0 - E, Z on zr rows from i0 - rh and kz columns from
// j0 - E - p; 96 x 96 and 80 x 80 for 6x11 and 17x17):
//   Z = Q K^T, masked, into shared memory as hi + lo bf16 (as the forward);
//   dP2 = dO V^T in registers, S1 by the forward's band products on Z, P from the log-sum-exp and
//   dS1 = P (dP - D) (fa_grad), into shared memory as hi + lo;
//   dZ = the transposed convolution: the same band products on dS1's rows shifted down by a' with
//   the flipped kernel w[c_q-1-a', c_k-1-c] (fc_band with flip; the band is shifted by sh = E - e,
//   e = c_k-1-p, so that dS1's columns start 8-aligned), masked where the row may see the key, and
//   as A fragments (C to A in registers) dq += dZ K;
//   the kernel gradient dw[a, c] += sum dS1[i, j] Z[i-(c_q-1)+a, j-p+c] over the central tile as
//   MMAs M_a = dS1^T Z_a (keys x Z's columns, dS1 and Z hi/lo: three products), whose diagonals
//   are dw[a, .]: each warp's 16 x 16 halves go through its scratch in shared memory and lane c
//   sums diagonal c in a fixed order; the 4 warps' partials are summed in order at the end and
//   written per (batch, head, query tile) for k_tc_conv_wgrad (deterministic: no atomics).
//
// Shared memory: Z's and dS1's hi and lo (40 + 28 KB for 6x11) leave too little of an H100 SM's
// half (113 KB, for 2 blocks) for q, k, dO, v tiles of d' = 128 columns (91 KB), so the operands
// are streamed in slices of FCB_SL columns of d through a double-buffered stage (cp.async): per key
// tile Z's slices (q's zr rows, k's kz rows), dP's (dO's sr rows, v's kd rows), then k's central
// 64 rows for dq; the products accumulate over the slices in registers (Z's and dP's chunks, at most
// FCB_ZC and FCB_PC per warp: fcb_ok). The bytes do not depend on d: 113,056 for 6x11.
#ifndef MTAC_ATTN_MTA_CUDA_FA_CONV_BWD_CUH
#define MTAC_ATTN_MTA_CUDA_FA_CONV_BWD_CUH

const int FCB_SL = 32;                // columns of d staged at a time
const int FCB_SLD = FCB_SL + FA_PAD;  // a staged row: 80 bytes, an odd multiple of 16
const int FCB_ZC = 9;                 // Z's 16 x 16 chunks per warp, at most (96 x 96)
const int FCB_PC = 8;                 // dP's chunks per warp, at most (80 x 96)
const int FCB_SCR = 20;               // a warp's scratch row (floats) for the diagonal sums

// The backward's shared memory, offsets in bf16 (multiples of 8): Z's hi and lo, dS1's hi and lo,
// the bands and transposed bands, two stage buffers, the warps' scratch and kernel-gradient
// partials (floats), the document start of each of Z's rows (ints).
struct fcb_smem {
    size_t zhi, zlo, dhi, dlo, band, bandT, stage, scr, dw, st, total;
};
__host__ __device__ inline int fcb_stage_rows(const fc_geo &g) {
    const int z = g.zr + g.kz, p = g.sr + g.kd;
    return z > p ? z : p;  // (> TC_N, k's central rows)
}
__host__ __device__ inline fcb_smem fcb_smem_of(const fc_geo &g) {
    const size_t z = (size_t)g.zr * g.zld, d = (size_t)g.sr * g.dld, band = (size_t)g.cq * 8 * g.bw;
    fcb_smem s;
    s.zhi = 0, s.zlo = z, s.dhi = 2 * z, s.dlo = s.dhi + d, s.band = s.dlo + d, s.bandT = s.band + band;
    s.stage = s.bandT + band, s.scr = s.stage + 2 * (size_t)fcb_stage_rows(g) * FCB_SLD;
    s.dw = s.scr + 2 * (size_t)(TC_THREADS / 32) * 16 * FCB_SCR;
    s.st = s.dw + (2 * (size_t)(TC_THREADS / 32) * g.cq * g.ck + 7) / 8 * 8;
    s.total = s.st + tc_up16(2 * g.zr);
    return s;
}
// 1 when the grown tile's chunks fit the warps' registers and dw's two 16-column halves reach
// every tap (c_k <= 17, c_q <= 17: rh = 16, sr = 80).
__host__ __device__ inline int fcb_ok(const fc_geo &g) {
    const int warps = TC_THREADS / 32;
    return g.ck <= 17 && g.cq <= 17 && g.zr / 16 * (g.kz / 16) <= warps * FCB_ZC &&
           g.sr / 16 * (g.kd / 16) <= warps * FCB_PC;
}
size_t fa_conv_dq_smem_bytes(int cq, int ck) {
    const fc_geo g = fc_geo_of(cq, ck, 1);
    return fcb_ok(g) ? fcb_smem_of(g).total * sizeof(bf16) : (size_t)-1;
}

// A block's walk through its staged slices: item it is, per key tile jt0 + it / (3 ns), Z's ns
// slices, dP's, then k's central rows', each into stage buffer it & 1.
struct fcb_pipe {
    int bh, i0, jt0, ns, items, rows, it;
    bf16 *stage;
};

// Issues item n's copies: columns [32 s, 32 s + 32) of q's rows from i0 - rh and k's from
// j0 - E - p (Z), of dO's from i0 and v's from j0 - E (dP), or of k's from j0 (dq).
__device__ __forceinline__ void fcb_issue(const tc_args &a, const fc_geo &g, const fcb_pipe &p, int n) {
    const int per = 3 * p.ns, j0 = (p.jt0 + n / per) * TC_N, ph = n % per / p.ns, c0 = n % p.ns * FCB_SL;
    const int w = a.dp - c0 < FCB_SL ? a.dp - c0 : FCB_SL;
    const size_t qs = (size_t)p.bh * a.Tp * a.dp, kv = tc_kv_slab(a, p.bh) * a.Tp * a.dp;
    bf16 *x = p.stage + (n & 1) * p.rows * FCB_SLD;
    if (ph == 0) {
        fa_load_cols(x, FCB_SLD, a.q + qs, p.i0 - g.rh, g.zr, a.T, a.dp, c0, w);
        fa_load_cols(x + g.zr * FCB_SLD, FCB_SLD, a.k + kv, j0 - g.E - g.p, g.kz, a.T, a.dp, c0, w);
    } else if (ph == 1) {
        fa_load_cols(x, FCB_SLD, a.dO + qs, p.i0, g.sr, a.T, a.dp, c0, w);
        fa_load_cols(x + g.sr * FCB_SLD, FCB_SLD, a.v + kv, j0 - g.E, g.kd, a.T, a.dp, c0, w);
    } else {
        fa_load_cols(x, FCB_SLD, a.k + kv, j0, TC_N, a.T, a.dp, c0, w);
    }
}

// The next item's stage: issues the copies of the one after it, waits for its own (every thread's).
__device__ __forceinline__ const bf16 *fcb_next(const tc_args &a, const fc_geo &g, fcb_pipe &p) {
    if (p.it + 1 < p.items) fcb_issue(a, g, p, p.it + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    return p.stage + (p.it++ & 1) * p.rows * FCB_SLD;
}

// The width of slice s of d.
__device__ __forceinline__ int fcb_width(const tc_args &a, int s) {
    return a.dp - s * FCB_SL < FCB_SL ? a.dp - s * FCB_SL : FCB_SL;
}

// c[m] = x y^T over the ns slices of the next items for the chunks f = w + 4m < nf of an
// (nx/16) x cc grid (x's nx rows, then y's, in each stage buffer).
template <int NC>
__device__ __forceinline__ void fcb_products(const tc_args &a, const fc_geo &g, fcb_pipe &p, int nx, int cc, int nf,
                                             mma_c (&c)[NC][2]) {
    const int w = threadIdx.x / 32;
    FA_UNROLL
    for (int m = 0; m < NC; m++) fa_zero(c[m]);
    for (int s = 0; s < p.ns; s++) {
        const bf16 *x = fcb_next(a, g, p), *y = x + nx * FCB_SLD;
        FA_UNROLL
        for (int m = 0; m < NC; m++) {
            const int f = w + 4 * m;
            if (f < nf) fa_xyT(c[m], x + f / cc * 16 * FCB_SLD, y + f % cc * 16 * FCB_SLD, FCB_SLD, fcb_width(a, s));
        }
        __syncthreads();  // before the stage buffer is refilled
    }
}

// dS1 of the grown tile of key tile j0 into dhi and dlo: dP2 = dO V^T from the next ns items, S1
// by the bands on Z (zhi, zlo, stored by the last item's warps: its barrier is behind), P, dS1.
__device__ __forceinline__ void fcb_ds1(const tc_args &a, const fc_geo &g, fcb_pipe &p, int j0, const fc_src &z,
                                        bf16 *dhi, bf16 *dlo) {
    const int w = threadIdx.x / 32, gq = threadIdx.x % 32 / 4, t = threadIdx.x % 4, cc = g.kd / 16;
    const int nf = g.sr / 16 * cc;
    mma_c d[FCB_PC][2];
    fcb_products(a, g, p, g.sr, cc, nf, d);
    FA_UNROLL
    for (int m = 0; m < FCB_PC; m++) {
        const int f = w + 4 * m, R = f / cc, C = f % cc;
        if (f >= nf) break;
        int i[2], st[2];
        float lse[2], D[2];
        FA_UNROLL
        for (int r = 0; r < 2; r++) {
            i[r] = p.i0 + 16 * R + gq + 8 * r, st[r] = z.st[g.rh + 16 * R + gq + 8 * r];
            lse[r] = i[r] < a.T ? a.lse[(size_t)p.bh * a.T + i[r]] : 0.0f;
            D[r] = i[r] < a.T ? a.D[(size_t)p.bh * a.T + i[r]] : 0.0f;
        }
        mma_c s1[2];
        fa_zero(s1);
        fc_conv<2>(g, z, 16 * R + g.rh - (g.cq - 1), 2 * C, st, s1);
        FA_UNROLL
        for (int n = 0; n < 2; n++) {
            FA_UNROLL
            for (int x = 0; x < 4; x++)
                fa_grad(a, p.bh, i[x / 2], st[x / 2], j0 - g.E + 16 * C + 8 * n + 2 * t + x % 2, lse[x / 2], D[x / 2],
                        s1[n].x[x], d[m][n].x[x]);
            FA_UNROLL
            for (int r = 0; r < 2; r++) {
                uint32_t hi, lo;
                fc_split(s1[n].x[2 * r], s1[n].x[2 * r + 1], hi, lo);
                const int at = (16 * R + gq + 8 * r) * g.dld + 16 * C + 8 * n + 2 * t;
                *(uint32_t *)(dhi + at) = hi;
                *(uint32_t *)(dlo + at) = lo;
            }
        }
    }
}

// dZ of warp w's 16 central rows (this lane's rows i, document starts st) as 4 A fragments: the
// transposed band products on dS1 (ds: rows from i0, flipped bands), 0 where the row may not see
// the key.
__device__ __forceinline__ void fcb_dz(const tc_args &a, int j0, const fc_geo &g, const fc_src &ds, const int i[2],
                                       const int st[2], mma_a dz[4]) {
    const int t = threadIdx.x % 4;
    mma_c s[8];
    fa_zero(s);
    fc_conv<8>(g, ds, 16 * (threadIdx.x / 32), 0, st, s);
    FA_UNROLL
    for (int n = 0; n < 8; n++)
        FA_UNROLL
        for (int x = 0; x < 4; x++)
            if (!fa_ok(a.T, i[x / 2], st[x / 2], j0 + 8 * n + 2 * t + x % 2)) s[n].x[x] = 0.0f;
    FA_UNROLL
    for (int kc = 0; kc < 4; kc++) dz[kc] = fa_a_of(s + 2 * kc);
}

// The A fragment's query rows (k) 16 ks + 2t, +1 (a[0], a[1]) and +8, +9 (a[2], a[3]) kept when
// row r's source row r + zrow - rh of Z is in its document.
__device__ __forceinline__ void fcb_keep_k(mma_a &x, const fc_geo &g, const int *stz, int ks, int zrow) {
    const int t = threadIdx.x % 4;
    FA_UNROLL
    for (int h = 0; h < 2; h++) {
        const int r = 16 * ks + 2 * t + 8 * h;
        const uint32_t m = (stz[zrow + r] == stz[g.rh + r] ? 0xffffu : 0u) |
                           (stz[zrow + r + 1] == stz[g.rh + r + 1] ? 0xffff0000u : 0u);
        x.x[h * 2] &= m, x.x[h * 2 + 1] &= m;
    }
}

// dw[w][a][c] += the central tile's terms for warp w's keys 16w..16w+15: per a, M = dS1^T Z_a on
// those keys and Z's 32 columns from theirs (two halves of 16), dS1 and Z hi + lo (three
// products); diagonal c of M (column = key + c) is dw[a, c]: a half goes through the warp's
// scratch, lane c < c_k adds its diagonal, in order.
__device__ __forceinline__ void fcb_dw(const fc_geo &g, const fc_src &ds, const fc_src &z, float *scr, float *dw) {
    const int l = threadIdx.x % 32, w = threadIdx.x / 32, t = l % 4, gq = l / 4, col = g.E + 16 * w;
    FC_ROLLED
    for (int a = 0; a < g.cq; a++) {
        const int zrow = g.rh - (g.cq - 1) + a;  // Z's row of dS1's row 0 for kernel row a
        float x = 0.0f;
        FC_ROLLED
        for (int hf = 0; hf < 2; hf++) {
            mma_c m[2];
            fa_zero(m);
            FC_ROLLED
            for (int ks = 0; ks < TC_M / 16; ks++) {
                mma_a ah, al;
                const int at = (16 * ks + l % 8 + 8 * (l / 16)) * ds.ld + col + 8 * (l / 8 % 2);
                ldsm_x4_t(ah.x, ds.hi + at);
                ldsm_x4_t(al.x, ds.lo + at);
                fcb_keep_k(ah, g, z.st, ks, zrow);
                fcb_keep_k(al, g, z.st, ks, zrow);
                uint32_t bh[4], bl[4];
                const int zb = (16 * ks + zrow + l % 16) * z.ld + col + 16 * hf + 8 * (l / 16);
                ldsm_x4_t(bh, z.hi + zb);
                ldsm_x4_t(bl, z.lo + zb);
                FA_UNROLL
                for (int n = 0; n < 2; n++) {
                    const mma_b h = {{bh[2 * n], bh[2 * n + 1]}}, o = {{bl[2 * n], bl[2 * n + 1]}};
                    mma_16816(m[n], ah, h);
                    mma_16816(m[n], ah, o);
                    mma_16816(m[n], al, h);
                }
            }
            FA_UNROLL
            for (int n = 0; n < 2; n++)
                FA_UNROLL
                for (int e = 0; e < 4; e++) scr[(gq + 8 * (e / 2)) * FCB_SCR + 8 * n + 2 * t + e % 2] = m[n].x[e];
            __syncwarp();
            if (l < g.ck)
                for (int jj = 0; jj < 16; jj++) {
                    const int c = jj + l - 16 * hf;
                    if (c >= 0 && c < 16) x += scr[jj * FCB_SCR + c];
                }
            __syncwarp();
        }
        if (l < g.ck) dw[(w * g.cq + a) * g.ck + l] += x;
    }
}

// dQ of one query tile of one head with the convolution, and the tile's partial sums of the
// kernel gradient into dwp (B*H, tiles, c_q*c_k) (grid as k_fa_dq: x query tiles, the last first,
// y B*H): per key tile Z, dS1 on the grown tile, dZ, dw += the central tile's terms, dq += scale dZ k.
template <int DP>
__global__ void __launch_bounds__(TC_THREADS, 2) k_fa_conv_dq_t(tc_args a, const float *w_pre, float *dq, float *dwp) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    const fc_geo g = fc_geo_of(a.cq, a.ck, 1);
    const fcb_smem at = fcb_smem_of(g);
    const int w = threadIdx.x / 32, bh = blockIdx.y, b = bh / a.H, tile = gridDim.x - 1 - blockIdx.x;
    const int taps = g.cq * g.ck, warps = TC_THREADS / 32;
    bf16 *zhi = sh + at.zhi, *zlo = sh + at.zlo, *dhi = sh + at.dhi, *dlo = sh + at.dlo;
    int *stz = (int *)(sh + at.st);
    float *scr = (float *)(sh + at.scr) + w * 16 * FCB_SCR, *dw = (float *)(sh + at.dw);
    fcb_pipe p;
    p.bh = bh, p.i0 = tile * TC_M, p.jt0 = mta_row_start(a.ds, a.T, b, p.i0) / TC_N;
    const int jt1 = p.i0 / TC_N;
    p.ns = (a.dp + FCB_SL - 1) / FCB_SL, p.items = (jt1 - p.jt0 + 1) * 3 * p.ns, p.rows = fcb_stage_rows(g), p.it = 0;
    p.stage = sh + at.stage;
    fcb_issue(a, g, p, 0);
    cp_async_commit();
    fc_setup(a, g, b, bh % a.H, p.i0, w_pre, sh + at.band, stz);
    fc_band(g, w_pre + (size_t)(bh % a.H) * taps, 1, g.sh, sh + at.bandT);
    for (int e = threadIdx.x; e < warps * taps; e += TC_THREADS) dw[e] = 0.0f;
    const fc_src zs = {zhi, zlo, g.zld, g.kz, stz, sh + at.band, g.bw, g.dmax};
    const fc_src ds = {dhi, dlo, g.dld, g.kd, stz + g.rh, sh + at.bandT, g.bw, g.dmaxT};
    int i[2], st[2];
    fa_lane_rows(a, b, p.i0, i, st);
    mma_c acc[DP / 8];
    fa_zero(acc);
    for (int jt = p.jt0; jt <= jt1; jt++) {
        const int j0 = jt * TC_N, cc = g.kz / 16;
        {
            mma_c z[FCB_ZC][2];
            fcb_products(a, g, p, g.zr, cc, g.zr / 16 * cc, z);
            FA_UNROLL
            for (int m = 0; m < FCB_ZC; m++) {
                const int f = w + 4 * m;
                if (f < g.zr / 16 * cc) fc_z_store(a, g, p.i0, j0 - g.E - g.p, f / cc * 16, f % cc * 16, z[m], stz, zhi, zlo);
            }
        }
        fcb_ds1(a, g, p, j0, zs, dhi, dlo);
        mma_a dz[4];
        for (int s = 0; s < p.ns; s++) {
            const bf16 *ks = fcb_next(a, g, p);  // (its barrier: every warp's dS1 is stored)
            if (s == 0) {
                fcb_dz(a, j0, g, ds, i, st, dz);
                fcb_dw(g, ds, zs, scr, dw);
            }
            FA_UNROLL
            for (int kc = 0; kc < 4; kc++)
                fa_acc<DP>(acc, dz[kc], ks + 16 * kc * FCB_SLD, FCB_SLD, s * FCB_SL + fcb_width(a, s), s * FCB_SL);
            __syncthreads();  // before the stage buffer is refilled, and Z and dS1 rewritten
        }
    }
    fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
        if (i[r] < a.T) dq[((size_t)bh * a.T + i[r]) * a.d + c] += a.scale * acc[n].x[x];
    });
    __syncthreads();  // every warp's kernel-gradient partials
    float *out = dwp + ((size_t)bh * gridDim.x + tile) * taps;
    for (int e = threadIdx.x; e < taps; e += TC_THREADS) {
        float x = 0.0f;
        for (int v = 0; v < warps; v++) x += dw[v * taps + e];
        out[e] = a.scale * x;  // Z here is unscaled
    }
}

// The dQ kernel's launch, at the accumulators' width DP for a.dp, through a pointer named as the
// launch record and --plan know it.
template <int DP>
void fa_conv_dq_at(const call *cl, const tc_args &a, int BH, const float *w_pre, float *dq, float *dwp) {
    void (*const k_fa_conv_dq)(tc_args, const float *, float *, float *) = k_fa_conv_dq_t<DP>;
    const size_t sm = fa_conv_dq_smem_bytes(a.cq, a.ck);
    tc_smem_optin(k_fa_conv_dq, sm);
    MTA_LAUNCH(k_fa_conv_dq, dim3((unsigned)(a.Tp / TC_M), (unsigned)BH), TC_THREADS, sm, cl->s)(a, w_pre, dq, dwp);
}
void fa_conv_dq(const call *cl, const tc_args &a, int BH, const float *w_pre, float *dq, float *dwp) {
    if (a.dp <= 64) fa_conv_dq_at<64>(cl, a, BH, w_pre, dq, dwp);
    else fa_conv_dq_at<128>(cl, a, BH, w_pre, dq, dwp);
}

#endif
