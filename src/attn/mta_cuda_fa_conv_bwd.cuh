// mta_cuda_fa_conv_bwd.cuh: the pre-softmax key-query convolution's backward on mma.sync band MMAs
// (docs/cuda.md, "The pre-softmax convolution"): k_fa_conv_dkdv and k_fa_conv_dq (templates
// k_fa_conv_*_t<DP>). Included by mta_cuda_tc.cuh after mta_cuda_fa_conv.cuh, whose geometry
// (fc_geo_of(.., 1)), bands and band products (fc_conv) it uses.
//
// Per (query tile i0, key tile j0) both kernels recompute, on the grown tile (fc_geo: S1 and dS1
// on sr rows from i0 and kd columns from j0 - E, Z on zr rows from i0 - rh and kz columns from
// j0 - E - p; 96 x 96 and 80 x 80 for 6x11 and 17x17):
//   Z = Q K^T, masked, into shared memory as hi + lo bf16 (as the forward);
//   dP2 = dO V^T in registers, S1 by the forward's band products on Z, P from the log-sum-exp and
//   dS1 = P (dP - D) (fa_grad), into shared memory as hi + lo;
//   dZ = the transposed convolution: the same band products on dS1's rows shifted down by a' with
//   the flipped kernel w[c_q-1-a', c_k-1-c] (fc_band with flip; the band is shifted by sh = E - e,
//   e = c_k-1-p, so that dS1's central columns start 16-byte aligned), masked where the row may
//   see the key.
// dQ: dq += dZ K with dZ's C fragments as A fragments, and the kernel gradient
//   dw[a, c] += sum dS1[i, j] Z[i-(c_q-1)+a, j-p+c] over the central tile as MMAs
//   M_a = dS1^T Z_a (keys x Z's columns, dS1 and Z hi/lo: three products), whose diagonals are
//   dw[a, .]: each warp's 16 x 16 halves go through its scratch in shared memory and lane c sums
//   diagonal c in a fixed order; the 4 warps' partials are summed in order at the end and written
//   per (batch, head, query tile) for k_tc_conv_wgrad (deterministic: no atomics).
// dK/dV: dZ and P2's central tiles through shared memory as bf16, their transposes' A fragments
//   by ldmatrix.trans: dk += dZ^T Q, dv += P2^T dO. dK's and dV's accumulators stay in
//   registers, so Z is computed in three passes of chunks and dP in two.
//
// Shared memory: Z's and dS1's hi and lo (40 + 28 KB for 6x11) leave too little of an H100 SM's
// half (113 KB, for 2 blocks) for q, k, dO, v tiles of d' = 128 columns (91 KB), so the operands
// are streamed in slices of d (32 columns for dQ, 16 for dK/dV, whose P2 tile takes the
// difference) through a double-buffered stage (cp.async): per pair Z's slices (q's zr rows, k's
// kz rows), dP's (dO's sr rows, v's kd rows), then the central rows the last products read; the
// products accumulate over the slices in registers (Z's and dP's chunks, at most FCB_ZC and
// FCB_PC per warp: fcb_ok). The bytes do not depend on d: 113,056 (dQ) and 103,808 (dK/dV) for
// 6x11.
#ifndef MTAC_ATTN_MTA_CUDA_FA_CONV_BWD_CUH
#define MTAC_ATTN_MTA_CUDA_FA_CONV_BWD_CUH

const int FCB_ZC = 9;    // Z's 16 x 16 chunks per warp, at most (96 x 96)
const int FCB_PC = 8;    // dP's chunks per warp, at most (80 x 96)
const int FCB_SCR = 20;  // a warp's scratch row (floats) for the diagonal sums
const int FCB_P2LD = TC_N + FA_PAD;  // dK/dV's P2 and dZ tiles (64 queries x 64 keys)
const int FCB_DW_CK = 17;  // the widest kernel fcb_dw's two 16-column halves reach every tap of

// The columns of d a kernel stages at a time: 32 for dQ, 16 for dK/dV (whose P2 tile takes the
// difference; a staged row is then 80 or 48 bytes, an odd multiple of 16).
__host__ __device__ inline int fcb_sl(int kind) { return kind == TC_DQ ? 32 : 16; }

// The backward's shared memory, offsets in bf16 (multiples of 8): Z's hi and lo (dK/dV: then dZ),
// dS1's hi and lo, the bands and transposed bands, two stage buffers, dQ's warps' scratch and
// kernel-gradient partials (floats) or dK/dV's P2 tile, the document start of each of Z's rows.
struct fcb_smem {
    size_t zhi, zlo, dhi, dlo, band, bandT, stage, scr, dw, p2, st, total;
};
__host__ __device__ inline int fcb_stage_rows(const fc_geo &g) {
    const int z = g.zr + g.kz, p = g.sr + g.kd;
    return z > p ? z : p;  // (> 2 TC_M, the last items' rows)
}
__host__ __device__ inline fcb_smem fcb_smem_of(const fc_geo &g, int kind) {
    const size_t z = (size_t)g.zr * g.zld, d = (size_t)g.sr * g.dld, band = (size_t)g.cq * 8 * g.bw;
    const size_t warps = TC_THREADS / 32, dq = kind == TC_DQ;
    fcb_smem s;
    s.zhi = 0, s.zlo = z, s.dhi = 2 * z, s.dlo = s.dhi + d, s.band = s.dlo + d, s.bandT = s.band + band;
    s.stage = s.bandT + band, s.scr = s.stage + 2 * (size_t)fcb_stage_rows(g) * (fcb_sl(kind) + FA_PAD);
    s.dw = s.scr + (dq ? 2 * warps * 16 * FCB_SCR : 0);
    s.p2 = s.dw + (dq ? (2 * warps * g.cq * g.ck + 7) / 8 * 8 : 0);
    s.st = s.p2 + (dq ? 0 : (size_t)TC_M * FCB_P2LD);
    s.total = s.st + tc_up16(2 * g.zr);
    return s;
}
// 1 when the grown tile's chunks fit the warps' registers and dw's two 16-column halves reach
// every tap (c_k <= 17, c_q <= 17: rh = 16, sr = 80).
__host__ __device__ inline int fcb_ok(const fc_geo &g) {
    const int warps = TC_THREADS / 32;
    return g.ck <= FCB_DW_CK && g.cq <= 17 && g.zr / 16 * (g.kz / 16) <= warps * FCB_ZC &&
           g.sr / 16 * (g.kd / 16) <= warps * FCB_PC;
}
size_t fa_conv_bwd_smem_bytes(int kind, int cq, int ck) {
    const fc_geo g = fc_geo_of(cq, ck, 1);
    return fcb_ok(g) ? fcb_smem_of(g, kind).total * sizeof(bf16) : (size_t)-1;
}

// A block's walk through its staged slices, pair after pair of (query tile i0 of head bh, key
// tile j0): per pair zp passes of Z's ns slices, pp of dP's, then the last ns (k's central rows
// for dq; q's and dO's for dK/dV), item it into stage buffer it & 1. The next pair (nbh, ni0,
// nj0; more: one exists) is known before its first item is issued.
struct fcb_pipe {
    int bh, i0, j0, nbh, ni0, nj0, more;
    int kind, ns, sl, sld, zp, pp, per, rows, it, pair;
    bf16 *stage;
};
__device__ __forceinline__ void fcb_pipe_init(fcb_pipe &p, const tc_args &a, const fc_geo &g, int kind, int sl, int zp,
                                              int pp, bf16 *stage) {
    p.kind = kind, p.sl = sl, p.sld = sl + FA_PAD, p.zp = zp, p.pp = pp, p.stage = stage;
    p.ns = (a.dp + sl - 1) / sl, p.per = (zp + pp + 1) * p.ns, p.it = 0, p.pair = 0;
    p.rows = fcb_stage_rows(g);
}

// Issues item n's copies: columns [sl s, sl s + sl) of q's rows from i0 - rh and k's from
// j0 - E - p (Z), of dO's from i0 and v's from j0 - E (dP), or of k's from j0 (dq's last), q's and
// dO's from i0 (dK/dV's last).
__device__ __forceinline__ void fcb_issue(const tc_args &a, const fc_geo &g, const fcb_pipe &p, int n) {
    const int cur = n / p.per == p.pair, bh = cur ? p.bh : p.nbh, i0 = cur ? p.i0 : p.ni0, j0 = cur ? p.j0 : p.nj0;
    const int ph = n % p.per / p.ns, c0 = n % p.ns * p.sl, w = a.dp - c0 < p.sl ? a.dp - c0 : p.sl;
    const size_t qs = (size_t)bh * a.Tp * a.dp, kv = tc_kv_slab(a, bh) * a.Tp * a.dp;
    bf16 *x = p.stage + (n & 1) * p.rows * p.sld;
    if (ph < p.zp) {
        fa_load_cols(x, p.sld, a.q + qs, i0 - g.rh, g.zr, a.T, a.dp, c0, w);
        fa_load_cols(x + g.zr * p.sld, p.sld, a.k + kv, j0 - g.E - g.p, g.kz, a.T, a.dp, c0, w);
    } else if (ph < p.zp + p.pp) {
        fa_load_cols(x, p.sld, a.dO + qs, i0, g.sr, a.T, a.dp, c0, w);
        fa_load_cols(x + g.sr * p.sld, p.sld, a.v + kv, j0 - g.E, g.kd, a.T, a.dp, c0, w);
    } else if (p.kind == TC_DQ) {
        fa_load_cols(x, p.sld, a.k + kv, j0, TC_N, a.T, a.dp, c0, w);
    } else {
        fa_load_cols(x, p.sld, a.q + qs, i0, TC_M, a.T, a.dp, c0, w);
        fa_load_cols(x + TC_M * p.sld, p.sld, a.dO + qs, i0, TC_M, a.T, a.dp, c0, w);
    }
}

// The next item's stage: issues the copies of the one after it (the next pair's first when this
// pair is done and more), waits for its own (every thread's).
__device__ __forceinline__ const bf16 *fcb_next(const tc_args &a, const fc_geo &g, fcb_pipe &p) {
    if ((p.it + 1) / p.per == p.pair || p.more) fcb_issue(a, g, p, p.it + 1);
    cp_async_commit();
    cp_async_wait<1>();
    __syncthreads();
    return p.stage + (p.it++ & 1) * p.rows * p.sld;
}

// Moves the walk to its next pair (its first item already issued).
__device__ __forceinline__ void fcb_advance(fcb_pipe &p) { p.bh = p.nbh, p.i0 = p.ni0, p.j0 = p.nj0, p.pair++; }

// The width of slice s of d.
__device__ __forceinline__ int fcb_width(const tc_args &a, const fcb_pipe &p, int s) {
    return a.dp - s * p.sl < p.sl ? a.dp - s * p.sl : p.sl;
}


// c[m] = x y^T over the ns slices of the next items for the chunks f = w + 4 (m0 + m) < nf of an
// (nx/16) x cc grid (x's nx rows, then y's, in each stage buffer).
template <int NC>
__device__ __forceinline__ void fcb_products(const tc_args &a, const fc_geo &g, fcb_pipe &p, int nx, int cc, int nf,
                                             int m0, mma_c (&c)[NC][2]) {
    const int w = threadIdx.x / 32;
    FA_UNROLL
    for (int m = 0; m < NC; m++) fa_zero(c[m]);
    for (int s = 0; s < p.ns; s++) {
        const bf16 *x = fcb_next(a, g, p), *y = x + nx * p.sld;
        FA_UNROLL
        for (int m = 0; m < NC; m++) {
            const int f = w + 4 * (m0 + m);
            if (f < nf) fa_xyT(c[m], x + f / cc * 16 * p.sld, y + f % cc * 16 * p.sld, p.sld, fcb_width(a, p, s));
        }
        __syncthreads();  // before the stage buffer is refilled
    }
}

// Z = Q K^T on the pair's grown tile, masked, into zhi and zlo, in passes of NC chunks a warp.
template <int NC> __device__ __forceinline__ void fcb_z(const tc_args &a, const fc_geo &g, fcb_pipe &p, bf16 *zhi,
                                                        bf16 *zlo, const int *stz) {
    const int w = threadIdx.x / 32, cc = g.kz / 16, nf = g.zr / 16 * cc;
    for (int m0 = 0; m0 < FCB_ZC; m0 += NC) {
        mma_c z[NC][2];
        fcb_products(a, g, p, g.zr, cc, nf, m0, z);
        FA_UNROLL
        for (int m = 0; m < NC; m++) {
            const int f = w + 4 * (m0 + m);
            if (f < nf)
                fc_z_store(a, g.zld, p.i0 - g.rh, p.j0 - g.E - g.p, f / cc * 16, f % cc * 16, z[m], stz, fc_same(), zhi,
                           zlo);
        }
    }
}

// dS1 of the pair's grown tile into dhi and dlo, in passes of PC chunks a warp: dP2 = dO V^T from
// the next ns items, S1 by the bands on Z (z: stored before the pass's first barrier), P, dS1;
// with p2, P2's central tile (rows < TC_M, keys j0..) to bf16 there too.
template <int PC>
__device__ __forceinline__ void fcb_ds1(const tc_args &a, const fc_geo &g, fcb_pipe &p, const fc_src &z, bf16 *dhi,
                                        bf16 *dlo, bf16 *p2) {
    const int w = threadIdx.x / 32, gq = threadIdx.x % 32 / 4, t = threadIdx.x % 4, cc = g.kd / 16;
    const int nf = g.sr / 16 * cc;
    for (int m0 = 0; m0 < FCB_PC; m0 += PC) {
        mma_c d[PC][2];
        fcb_products(a, g, p, g.sr, cc, nf, m0, d);
        FA_UNROLL
        for (int m = 0; m < PC; m++) {
            const int f = w + 4 * (m0 + m), R = f / cc, C = f % cc;
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
                    fa_grad(a, p.bh, i[x / 2], st[x / 2], p.j0 - g.E + 16 * C + 8 * n + 2 * t + x % 2, lse[x / 2],
                            D[x / 2], s1[n].x[x], d[m][n].x[x]);
                FA_UNROLL
                for (int r = 0; r < 2; r++) {
                    uint32_t hi, lo;
                    const int row = 16 * R + gq + 8 * r, col = 16 * C + 8 * n + 2 * t, at = row * g.dld + col;
                    bf16x2_split(s1[n].x[2 * r], s1[n].x[2 * r + 1], hi, lo);
                    *(uint32_t *)(dhi + at) = hi;
                    *(uint32_t *)(dlo + at) = lo;
                    if (p2 && row < TC_M && col >= g.E && col - g.E < TC_N)
                        *(uint32_t *)(p2 + row * FCB_P2LD + col - g.E) = pack_bf16x2(d[m][n].x[2 * r], d[m][n].x[2 * r + 1]);
                }
            }
        }
    }
}

// dZ of warp w's 16 central rows (this lane's rows i, document starts st) in C fragments: the
// transposed band products on dS1 (ds: rows from i0, flipped bands), 0 where the row may not see
// the key.
__device__ __forceinline__ void fcb_dz(const tc_args &a, int j0, const fc_geo &g, const fc_src &ds, const int i[2],
                                       const int st[2], mma_c (&s)[8]) {
    const int t = threadIdx.x % 4;
    fa_zero(s);
    fc_conv<8>(g, ds, 16 * (threadIdx.x / 32), 0, st, s);
    FA_UNROLL
    for (int n = 0; n < 8; n++)
        FA_UNROLL
        for (int x = 0; x < 4; x++)
            if (!fa_ok(a.T, i[x / 2], st[x / 2], j0 + 8 * n + 2 * t + x % 2)) s[n].x[x] = 0.0f;
}

// The A fragment's k rows 2t, 2t+1 (a[0], a[1]) and 2t+8, 2t+9 (a[2], a[3]) kept when row r's
// source row is in its document: sx[r] (the source rows' document starts) equals so[r] (the
// output rows').
__device__ __forceinline__ void fcb_keep_k(mma_a &x, const int *so, const int *sx) {
    const int t = threadIdx.x % 4;
    FA_UNROLL
    for (int h = 0; h < 2; h++) {
        const int r = 2 * t + 8 * h;
        const uint32_t m = (sx[r] == so[r] ? 0xffffu : 0u) | (sx[r + 1] == so[r + 1] ? 0xffff0000u : 0u);
        x.x[h * 2] &= m, x.x[h * 2 + 1] &= m;
    }
}

// x += (lanes l < n) the entries of diagonal l - off of the 16 x 16 block m (C fragments): M[jj][jj + l - off]
// over the rows jj where that column is in the block, in order, through the warp's scratch scr (16 rows of
// FCB_SCR floats). A block of columns 16 hf.. of a product whose column jj + c + s holds tap c of row jj
// is off = 16 hf - s.
__device__ __forceinline__ void fcb_diag(const mma_c m[2], float *scr, int n, int off, float &x) {
    const int l = threadIdx.x % 32, t = l % 4, gq = l / 4;
    FA_UNROLL
    for (int k = 0; k < 2; k++)
        FA_UNROLL
        for (int e = 0; e < 4; e++) scr[(gq + 8 * (e / 2)) * FCB_SCR + 8 * k + 2 * t + e % 2] = m[k].x[e];
    __syncwarp();
    if (l < n)
        for (int jj = 0; jj < 16; jj++) {
            const int c = jj + l - off;
            if (c >= 0 && c < 16) x += scr[jj * FCB_SCR + c];
        }
    __syncwarp();
}

// m (two n-tiles) += (ah + al) (bh + bl) less al bl (LO false: ah alone, two MMAs a tile), B's hi and lo
// (16 x 16, k-major) by ldmatrix .trans from this lane's addresses in them.
template <bool LO>
__device__ __forceinline__ void fcb_mma_t(mma_c m[2], const mma_a &ah, const mma_a &al, const bf16 *bh, const bf16 *bl) {
    uint32_t h[4], o[4];
    ldsm_x4_t(h, bh);
    ldsm_x4_t(o, bl);
    FA_UNROLL
    for (int n = 0; n < 2; n++) {
        const mma_b x = {{h[2 * n], h[2 * n + 1]}}, y = {{o[2 * n], o[2 * n + 1]}};
        mma_16816(m[n], ah, x);
        mma_16816(m[n], ah, y);
        if (LO) mma_16816(m[n], al, x);
    }
}

// dw[w][a][c] += the central tile's terms for warp w's keys 16w..16w+15: per a, M = dS1^T Z_a on
// those keys (ds's columns from dc + 16w, its rows from i0) and Z's 32 columns from theirs (z's
// from zc + 16w, the column of key j0 - p; its rows from i0 - rh), dS1 and Z hi + lo (three
// products; LO false: dS1 is one bf16 part, two); diagonal c of M (column = key + c) is dw[a, c]:
// a half goes through the warp's scratch, lane c < c_k adds its diagonal, in order. The
// post-softmax convolution's is the same with dS1 = dP1 and Z = P (mta_cuda_fa_post.cuh).
template <bool LO = true>
__device__ __forceinline__ void fcb_dw(const fc_geo &g, const fc_src &ds, const fc_src &z, int dc, int zc, float *scr,
                                       float *dw) {
    const int l = threadIdx.x % 32, w = threadIdx.x / 32;
    FC_ROLLED
    for (int a = 0; a < g.cq; a++) {
        const int zrow = g.rh - (g.cq - 1) + a;  // Z's row of dS1's row 0 for kernel row a
        float x = 0.0f;
        FC_ROLLED
        for (int hf = 0; hf < 1 + (g.ck > 1); hf++) {  // (the second half holds diagonals 1..31 only)
            mma_c m[2];
            fa_zero(m);
            FC_ROLLED
            for (int ks = 0; ks < TC_M / 16; ks++) {
                mma_a ah, al = {};
                const int at = (16 * ks + l % 8 + 8 * (l / 16)) * ds.ld + dc + 16 * w + 8 * (l / 8 % 2);
                ldsm_x4_t(ah.x, ds.hi + at);
                if (LO) ldsm_x4_t(al.x, ds.lo + at);
                fcb_keep_k(ah, z.st + g.rh + 16 * ks, z.st + zrow + 16 * ks);
                fcb_keep_k(al, z.st + g.rh + 16 * ks, z.st + zrow + 16 * ks);
                const int zb = (16 * ks + zrow + l % 16) * z.ld + zc + 16 * w + 16 * hf + 8 * (l / 16);
                fcb_mma_t<LO>(m, ah, al, z.hi + zb, z.lo + zb);
            }
            fcb_diag(m, scr, g.ck, 16 * hf, x);
        }
        if (l < g.ck) dw[(w * g.cq + a) * g.ck + l] += x;
    }
}

// The block's kernel-gradient partials (every warp's fcb_dw sums, dw) times scale added in warp
// order into out (c_q c_k floats: one (batch, head, query tile)'s, for k_tc_conv_wgrad).
__device__ __forceinline__ void fcb_dw_out(const float *dw, int taps, float scale, float *out) {
    __syncthreads();  // every warp's partials
    for (int e = threadIdx.x; e < taps; e += TC_THREADS) {
        float x = 0.0f;
        for (int v = 0; v < TC_THREADS / 32; v++) x += dw[v * taps + e];
        out[e] = scale * x;
    }
}

// A pair's setup: head h's bands and flipped bands, the document starts of Z's rows from i0 - rh.
__device__ __forceinline__ void fcb_setup(const tc_args &a, const fc_geo &g, int b, int h, int i0, const float *w_pre,
                                          bf16 *sh, const fcb_smem &at) {
    fc_setup(a, g, b, h, i0, w_pre, sh + at.band, (int *)(sh + at.st));
    fc_band(g, w_pre + (size_t)h * g.cq * g.ck, 1, g.sh, sh + at.bandT);
}

// The band products' sources: Z (rows from i0 - rh, the forward's bands) and dS1 (rows from i0,
// the flipped bands).
__device__ __forceinline__ void fcb_srcs(const fc_geo &g, bf16 *sh, const fcb_smem &at, fc_src &zs, fc_src &ds) {
    const int *stz = (const int *)(sh + at.st);
    zs = {sh + at.zhi, sh + at.zlo, g.zld, g.kz, stz, sh + at.band, g.bw, g.dmax};
    ds = {sh + at.dhi, sh + at.dlo, g.dld, g.kd, stz + g.rh, sh + at.bandT, g.bw, g.dmaxT};
}

// dQ of one query tile of one head with the convolution, and the tile's partial sums of the
// kernel gradient into dwp (B*H, tiles, c_q*c_k) (grid as k_fa_dq: x query tiles, the last first,
// y B*H): per key tile Z, dS1 on the grown tile, dZ, dw += the central tile's terms, dq += scale dZ k.
template <int DP>
__global__ void __launch_bounds__(TC_THREADS, 2) k_fa_conv_dq_t(tc_args a, const float *w_pre, float *dq, float *dwp) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    const fc_geo g = fc_geo_of(a.cq, a.ck, 1);
    const fcb_smem at = fcb_smem_of(g, TC_DQ);
    const int w = threadIdx.x / 32, bh = blockIdx.y, b = bh / a.H, tile = gridDim.x - 1 - blockIdx.x, i0 = tile * TC_M;
    const int taps = g.cq * g.ck, warps = TC_THREADS / 32;
    float *scr = (float *)(sh + at.scr) + w * 16 * FCB_SCR, *dw = (float *)(sh + at.dw);
    fcb_pipe p;
    fcb_pipe_init(p, a, g, TC_DQ, fcb_sl(TC_DQ), 1, 1, sh + at.stage);
    p.bh = bh, p.i0 = i0, p.j0 = mta_row_start(a.ds, a.T, b, i0) / TC_N * TC_N;
    fcb_issue(a, g, p, 0);
    cp_async_commit();
    fcb_setup(a, g, b, bh % a.H, i0, w_pre, sh, at);
    for (int e = threadIdx.x; e < warps * taps; e += TC_THREADS) dw[e] = 0.0f;
    fc_src zs, ds;
    fcb_srcs(g, sh, at, zs, ds);
    int i[2], st[2];
    fa_lane_rows(a, b, i0, i, st);
    mma_c acc[DP / 8];
    fa_zero(acc);
    for (;;) {
        p.nbh = bh, p.ni0 = i0, p.nj0 = p.j0 + TC_N, p.more = p.j0 < i0;  // key tiles to the diagonal
        fcb_z<FCB_ZC>(a, g, p, sh + at.zhi, sh + at.zlo, zs.st);
        fcb_ds1<FCB_PC>(a, g, p, zs, sh + at.dhi, sh + at.dlo, NULL);
        mma_a dz[4];
        for (int s = 0; s < p.ns; s++) {
            const bf16 *ks = fcb_next(a, g, p);  // (its barrier: every warp's dS1 is stored)
            if (s == 0) {
                mma_c c[8];
                fcb_dz(a, p.j0, g, ds, i, st, c);
                FA_UNROLL
                for (int kc = 0; kc < 4; kc++) dz[kc] = fa_a_of(c + 2 * kc);
                fcb_dw(g, ds, zs, g.E, g.E, scr, dw);
            }
            FA_UNROLL
            for (int kc = 0; kc < 4; kc++)
                fa_acc<DP>(acc, dz[kc], ks + 16 * kc * p.sld, p.sld, s * p.sl + fcb_width(a, p, s), s * p.sl);
            __syncthreads();  // before the stage buffer is refilled, and Z and dS1 rewritten
        }
        if (!p.more) break;
        fcb_advance(p);
    }
    fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
        if (i[r] < a.T) dq[((size_t)bh * a.T + i[r]) * a.d + c] += a.scale * acc[n].x[x];
    });
    fcb_dw_out(dw, taps, a.scale, dwp + ((size_t)bh * gridDim.x + tile) * taps);  // (Z here is unscaled)
}

// dK/dV's last items of a pair: dZ (this lane's rows i, starts st) into the tile dzs (Z's buffer:
// no longer read), then per slice dk += dZ^T q and dv += P2^T dO (P2's tile p2), the transposed
// A fragments by ldmatrix.trans of the tiles (read again per slice: registers are dK's and dV's).
template <int DP>
__device__ __forceinline__ void fcb_dkdv_last(const tc_args &a, const fc_geo &g, fcb_pipe &p, const fc_src &ds,
                                              const int i[2], const int st[2], bf16 *dzs, const bf16 *p2,
                                              mma_c (&dk)[DP / 8], mma_c (&dv)[DP / 8]) {
    const int l = threadIdx.x % 32, gq = l / 4, t = l % 4, w = threadIdx.x / 32;
    for (int s = 0; s < p.ns; s++) {
        const bf16 *x = fcb_next(a, g, p);  // (its barrier: every warp's dS1 and P2 are stored)
        if (s == 0) {
            mma_c c[8];
            fcb_dz(a, p.j0, g, ds, i, st, c);
            FA_UNROLL
            for (int n = 0; n < 8; n++)
                FA_UNROLL
                for (int r = 0; r < 2; r++)
                    *(uint32_t *)(dzs + (16 * w + gq + 8 * r) * FCB_P2LD + 8 * n + 2 * t) =
                        pack_bf16x2(c[n].x[2 * r], c[n].x[2 * r + 1]);
            __syncthreads();  // every warp's dZ rows
        }
        FA_UNROLL
        for (int ks = 0; ks < 4; ks++) {
            const int at = (16 * ks + l % 8 + 8 * (l / 16)) * FCB_P2LD + 16 * w + 8 * (l / 8 % 2);
            const int c1 = s * p.sl + fcb_width(a, p, s);
            mma_a az, ap;
            ldsm_x4_t(az.x, dzs + at);
            ldsm_x4_t(ap.x, p2 + at);
            fa_acc<DP>(dk, az, x + 16 * ks * p.sld, p.sld, c1, s * p.sl);
            fa_acc<DP>(dv, ap, x + (TC_M + 16 * ks) * p.sld, p.sld, c1, s * p.sl);
        }
        __syncthreads();  // before the stage buffer is refilled, and Z, dS1, P2 rewritten
    }
}

// dK and dV of one key tile of one kv head with the convolution (grid as k_fa_dkdv: x key tiles,
// y B*H_kv; the same query heads and tiles): per pair Z, dS1 and P2 on the grown tile, dZ, then
// dk += scale dZ^T q and dv += P2^T dO. Z in three passes of chunks and dP in two (registers:
// dK's and dV's accumulators stay).
template <int DP>
__global__ void __launch_bounds__(TC_THREADS, 2) k_fa_conv_dkdv_t(tc_args a, const float *w_pre, float *dk, float *dv) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    const fc_geo g = fc_geo_of(a.cq, a.ck, 1);
    const fcb_smem at = fcb_smem_of(g, TC_DKDV);
    const int gq = threadIdx.x % 32 / 4, kvs = blockIdx.y, b = kvs / a.Hkv, rep = a.H / a.Hkv;
    const int j0 = blockIdx.x * TC_N, jlast = tc_last(a, j0), h1 = (kvs % a.Hkv + 1) * rep;
    fcb_pipe p;
    fcb_pipe_init(p, a, g, TC_DKDV, fcb_sl(TC_DKDV), 3, 2, sh + at.stage);
    int h = h1 - rep;
    p.bh = b * a.H + h, p.i0 = j0, p.j0 = j0;
    fcb_issue(a, g, p, 0);
    cp_async_commit();
    fc_src zs, ds;
    fcb_srcs(g, sh, at, zs, ds);
    mma_c dks[DP / 8], dvs[DP / 8];
    fa_zero(dks);
    fa_zero(dvs);
    for (;;) {
        // the next query tile: rows from i0 on start their documents at or after row i0's start
        int hn = h, in = p.i0 + TC_M;
        if (in >= a.T || mta_row_start(a.ds, a.T, b, in) > jlast) hn = h + 1, in = j0;
        p.nbh = b * a.H + hn, p.ni0 = in, p.nj0 = j0, p.more = hn < h1;
        fcb_setup(a, g, b, h, p.i0, w_pre, sh, at);  // (the last pair's reads ended at its barrier)
        fcb_z<FCB_ZC / 3>(a, g, p, sh + at.zhi, sh + at.zlo, zs.st);
        fcb_ds1<FCB_PC / 2>(a, g, p, zs, sh + at.dhi, sh + at.dlo, sh + at.p2);
        int i[2], st[2];
        fa_lane_rows(a, b, p.i0, i, st);
        fcb_dkdv_last<DP>(a, g, p, ds, i, st, sh + at.zhi, sh + at.p2, dks, dvs);
        if (!p.more) break;
        fcb_advance(p);
        h = hn;
    }
    fa_each<DP>(a.d, [&](int r, int c, int n, int x) {
        const int j = j0 + 16 * (threadIdx.x / 32) + gq + 8 * r;
        const size_t o = ((size_t)kvs * a.T + j) * a.d + c;
        if (j <= jlast) tc_add_kv(a, dk, o, a.scale * dks[n].x[x]), tc_add_kv(a, dv, o, dvs[n].x[x]);
    });
}

// The backward's launches, at the accumulators' width DP for a.dp, through pointers named as the
// launch record and --plan know them: dK/dV, then dQ with the kernel gradient's partials.
template <int DP>
void fa_conv_backward_at(const call *cl, const tc_args &a, int B, const float *w_pre, float *dq, float *dk, float *dv,
                         float *dwp) {
    void (*const k_fa_conv_dkdv)(tc_args, const float *, float *, float *) = k_fa_conv_dkdv_t<DP>;
    void (*const k_fa_conv_dq)(tc_args, const float *, float *, float *) = k_fa_conv_dq_t<DP>;
    const size_t sm_kv = fa_conv_bwd_smem_bytes(TC_DKDV, a.cq, a.ck), sm_q = fa_conv_bwd_smem_bytes(TC_DQ, a.cq, a.ck);
    tc_smem_optin(k_fa_conv_dkdv, sm_kv);
    tc_smem_optin(k_fa_conv_dq, sm_q);
    const unsigned tiles = (unsigned)(a.Tp / TC_M);
    MTA_LAUNCH(k_fa_conv_dkdv, dim3(tiles, (unsigned)(B * a.Hkv)), TC_THREADS, sm_kv, cl->s)(a, w_pre, dk, dv);
    MTA_LAUNCH(k_fa_conv_dq, dim3(tiles, (unsigned)(B * a.H)), TC_THREADS, sm_q, cl->s)(a, w_pre, dq, dwp);
}
void fa_conv_backward(const call *cl, const tc_args &a, int B, const float *w_pre, float *dq, float *dk, float *dv,
                      float *dwp) {
    if (a.dp <= 64) fa_conv_backward_at<64>(cl, a, B, w_pre, dq, dk, dv, dwp);
    else fa_conv_backward_at<128>(cl, a, B, w_pre, dq, dk, dv, dwp);
}

#endif
