// mta_cuda_fa_conv.cuh: the pre-softmax key-query convolution (spec section 2, step 2) on mma.sync
// (docs/cuda.md, "The pre-softmax convolution"): k_fa_conv_forward (template k_fa_conv_forward_t<DP>).
// Included by mta_cuda_tc.cuh after mta_cuda_fa2.cuh, whose tiles, softmax and P V it shares.
//
// S1[i, j] = sum_{a<c_q, c<c_k} w[a, c] Z[i-(c_q-1)+a, j-p+c] (p = (c_k-1)/2). For one kernel row a
// that is a product: the rows of Z shifted by a (A, 16 x 16 per k step) times the banded Toeplitz
// matrix B_a[kk, jj] = w[a, kk-jj] (kk a column of Z from j0-p, jj a key of the tile from j0), built
// once per block in shared memory from w rounded to bf16. A 16 x 8 block of B_a at k step ks and
// n-tile nt depends only on delta = 16 ks - 8 nt, and is zero unless -8 <= delta <= dmax, so each
// n-tile takes two (c_k <= 25) of the k steps per a. The band is stored n-major (8 rows jj, bw
// columns u, band[jj][u] = w[a, u-8-jj]), so ldmatrix.x2 of columns delta+8.. and delta+16.. gives
// the B fragment of any delta.
//
// Z = Q K^T (unscaled: fa_softmax scales S1, which is linear in Z) is computed per key tile on the
// tile grown by its halos, rows [i0-rh, i0+64) and columns [j0-p, j0-p+kz), masked (Z = 0 unless
// s_r <= j <= r < T), and kept in shared memory as two bf16 parts, hi = bf16(Z) and lo = bf16(Z-hi)
// (|Z - hi - lo| <= 2^-17 |Z|), each multiplied by the band: a single bf16 Z would put an error of
// up to 2^-9 sum |w||Z| on S1, which is absolute in P's exponent and many times the path's other
// roundings (docs/cuda.md, "Tolerance of the test"). A row i reads Z's rows of its own document
// only: the A fragment's rows whose source row i-(c_q-1)+a is before s_i are zeroed in registers.
#ifndef MTAC_ATTN_MTA_CUDA_FA_CONV_CUH
#define MTAC_ATTN_MTA_CUDA_FA_CONV_CUH

// A loop over runtime bounds kept rolled (unrolling it costs registers and gains nothing).
#ifdef MTAC_CUDA_EMU
#define FC_ROLLED
#else
#define FC_ROLLED _Pragma("unroll 1")
#endif

// A tile's halos and the band's shape for a c_q x c_k kernel; with bwd the backward's grown tile
// (mta_cuda_fa_conv_bwd.cuh): S1 and dS1 on sr rows from i0 and kd columns from j0 - E, Z on
// rows from i0 - rh and columns from j0 - E - p.
struct fc_geo {
    int cq, ck, p;
    int rh;    // halo rows above the tile: c_q-1 rounded up to 16
    int sr;    // S1's rows from i0: TC_M (forward), TC_M + c_q-1 rounded up to 16 (backward)
    int zr;    // Z's rows, from i0 - rh
    int kz;    // Z's columns (k's rows)
    int zld;   // Z's leading dimension (kz + FA_PAD: rows an odd multiple of 16 bytes apart)
    int dmax;  // the largest delta whose band block is not zero
    int bw;    // a band row's width: dmax + 24, made an odd multiple of 8
    int E, kd, dld;  // backward: dS1's left halo (c_k-1-p rounded up to 8), columns, leading dimension
    int sh, dmaxT;   // backward: the transposed band's shift (E - (c_k-1-p)) and largest delta
};
__host__ __device__ inline int fc_band_width(int dmax) { return dmax + 24 + (dmax / 8 % 2 ? 8 : 0); }
__host__ __device__ inline fc_geo fc_geo_of(int cq, int ck, int bwd = 0) {
    fc_geo g;
    g.cq = cq, g.ck = ck, g.p = (ck - 1) / 2, g.rh = tc_up16(cq - 1);
    g.sr = bwd ? tc_up16(TC_M + cq - 1) : TC_M, g.zr = g.rh + g.sr;
    const int e = ck - 1 - g.p;
    g.E = (e + 7) / 8 * 8, g.sh = g.E - e, g.kd = tc_up16(g.E + TC_N + g.p), g.dld = g.kd + FA_PAD;
    g.kz = bwd ? tc_up16(g.kd + ck - 1) : tc_up16(TC_N + 2 * g.p), g.zld = g.kz + FA_PAD;
    g.dmax = (ck + 6) / 8 * 8, g.dmaxT = (ck + g.sh + 6) / 8 * 8;
    g.bw = fc_band_width(bwd && g.dmaxT > g.dmax ? g.dmaxT : g.dmax);
    return g;
}

// The forward's shared memory, offsets in bf16 (each a multiple of 8: 16-byte aligned): q's zr
// rows, k's kz rows, two buffers of v's TC_N rows, Z's hi and lo parts, the c_q bands, and the
// document start of each of Z's rows (ints). k is read only by Z's products, so the next tile's k
// is copied into the same buffer while the current tile is convolved and multiplied by v.
struct fc_smem {
    size_t q, k, v, zhi, zlo, band, st, total;
};
__host__ __device__ inline fc_smem fc_smem_of(int dp, const fc_geo &g) {
    const size_t ld = fa_ld(dp), z = (size_t)g.zr * g.zld;
    fc_smem s;
    s.q = 0, s.k = (size_t)g.zr * ld, s.v = s.k + (size_t)g.kz * ld, s.zhi = s.v + 2 * (size_t)TC_N * ld;
    s.zlo = s.zhi + z, s.band = s.zlo + z, s.st = s.band + (size_t)g.cq * 8 * g.bw, s.total = s.st + tc_up16(2 * g.zr);
    return s;
}
size_t fa_conv_smem_bytes(int dp, int cq, int ck) { return fc_smem_of(dp, fc_geo_of(cq, ck)).total * sizeof(bf16); }

// Issues the copies of key tile jt's k rows (from jt*TC_N - p) into ks and v rows into vs.
__device__ __forceinline__ void fc_kv_load(const tc_args &a, const fc_geo &g, size_t slab, int jt, bf16 *ks, bf16 *vs) {
    fa_load_rows(ks, a.k + slab, jt * TC_N - g.p, g.kz, a.T, a.dp);
    fa_load_rows(vs, a.v + slab, jt * TC_N, TC_N, a.T, a.dp);
}

// The c_q bands of head h's kernel w (w rounded to bf16, as q and k are): band[a][jj][u] =
// w[a, u-8-jj-sh], or with flip the transposed convolution's w[c_q-1-a, c_k-1-(u-8-jj-sh)] (nt: the
// block's threads).
__device__ __forceinline__ void fc_band(const fc_geo &g, const float *w, int flip, int sh, bf16 *band,
                                        int nt = TC_THREADS) {
    for (int e = threadIdx.x; e < g.cq * 8 * g.bw; e += nt) {
        const int row = e / (8 * g.bw), c = e % g.bw - 8 - e / g.bw % 8 - sh;
        const int at = flip ? (g.cq - 1 - row) * g.ck + g.ck - 1 - c : row * g.ck + c;
        band[e] = __float2bfloat16_rn(c >= 0 && c < g.ck ? w[at] : 0.0f);
    }
}

// The bands of head h's kernel and the document start of each of Z's rows from i0 - rh (0
// outside [0, T), where Z is 0).
__device__ __forceinline__ void fc_setup(const tc_args &a, const fc_geo &g, int b, int h, int i0, const float *w_pre,
                                         bf16 *band, int *st) {
    fc_band(g, w_pre + (size_t)h * g.cq * g.ck, 0, 0, band);
    for (int r = threadIdx.x; r < g.zr; r += TC_THREADS) {
        const int i = i0 - g.rh + r;
        st[r] = i >= 0 && i < a.T ? mta_row_start(a.ds, a.T, b, i) : 0;
    }
}

// fc_z's entry map for Z itself (the post-softmax convolution's maps P and dP1:
// mta_cuda_fa_post.cuh).
struct fc_same {
    __device__ float operator()(int, int, int, float x) const { return x; }
};

// A 16 x 16 chunk z of a grown tile (stored rows f0.., query rz + row; columns c0.. from key jz)
// masked (0 unless s_r <= j <= r < T) and mapped by entry(row, i, j, x) (Z: x itself) into zhi
// and zlo (LO false: the hi part only).
template <bool LO = true, typename F>
__device__ __forceinline__ void fc_z_store(const tc_args &a, int zld, int rz, int jz, int f0, int c0, const mma_c z[2],
                                           const int *st, F entry, bf16 *zhi, bf16 *zlo) {
    const int gq = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int n = 0; n < 2; n++)
        FA_UNROLL
        for (int r = 0; r < 2; r++) {
            const int zr = f0 + gq + 8 * r, c = c0 + 8 * n + 2 * t, i = rz + zr, j = jz + c;
            const bool row = i >= 0 && i < a.T;
            float x[2];
            FA_UNROLL
            for (int e = 0; e < 2; e++)
                x[e] = row && j + e >= st[zr] && j + e <= i ? entry(zr, i, j + e, z[n].x[2 * r + e]) : 0.0f;
            uint32_t hi, lo;
            bf16x2_split(x[0], x[1], hi, lo);
            *(uint32_t *)(zhi + zr * zld + c) = hi;
            if (LO) *(uint32_t *)(zlo + zr * zld + c) = lo;
        }
}

// X Y^T on zr x kz entries (multiples of 16; rows from query rz, columns from key jz) at leading
// dimension zld, masked, mapped by entry and stored into zhi and zlo (fc_z_store): its 16 x 16
// chunks go to the warps (of nt threads) in turn; qs, ks hold X's zr and Y's kz rows (q and k, or dO and v).
template <bool LO = true, typename F = fc_same>
__device__ __forceinline__ void fc_z_rect(const tc_args &a, int zr, int kz, int zld, int rz, int jz, const bf16 *qs,
                                          const bf16 *ks, const int *st, bf16 *zhi, bf16 *zlo, F entry = F(),
                                          int nt = TC_THREADS) {
    const int ld = fa_ld(a.dp), cc = kz / 16;
    for (int f = threadIdx.x / 32; f < zr / 16 * cc; f += nt / 32) {
        const int f0 = f / cc * 16, c0 = f % cc * 16;
        mma_c z[2] = {};
        fa_xyT(z, qs + f0 * ld, ks + c0 * ld, ld, a.dp);
        fc_z_store<LO>(a, zld, rz, jz, f0, c0, z, st, entry, zhi, zlo);
    }
}

// Z = Q K^T on the grown tile of key tile j0 (its rows from query rz = i0 - rh), masked, into zhi
// and zlo (fc_z_rect). The post-softmax convolution (mta_cuda_fa_post.cuh) makes other grown tiles
// the same way: qs, ks are then other operands (dO, v), the rows may start elsewhere (rz), entry
// maps each kept entry (fc_z_store).
template <bool LO = true, typename F = fc_same>
__device__ __forceinline__ void fc_z(const tc_args &a, const fc_geo &g, int rz, int j0, const bf16 *qs, const bf16 *ks,
                                     const int *st, bf16 *zhi, bf16 *zlo, F entry = F()) {
    fc_z_rect<LO>(a, g.zr, g.kz, g.zld, rz, j0 - g.p, qs, ks, st, zhi, zlo, entry);
}

// Zeroes the rows of an A fragment that are not kept: row g (a[0], a[2]) unless k0, row g+8 unless k1.
__device__ __forceinline__ void fc_keep(mma_a &x, bool k0, bool k1) {
    if (!k0) x.x[0] = x.x[2] = 0u;
    if (!k1) x.x[1] = x.x[3] = 0u;
}

// The source of a band product: the A tile's hi and lo parts at leading dimension ld with ncols
// columns, the document start of each of its rows (st), and the c_q bands (width bw, largest delta
// dmax).
struct fc_src {
    const bf16 *hi, *lo;
    int ld, ncols;
    const int *st;
    const bf16 *band;
    int bw, dmax;
};

// s += the band products of 16 rows for n-tiles nt0..nt0+NT-1: per kernel row a, the A tile's rows
// from r0 + a (this lane's: r0 + a + g, + 8; kept when their document start is st_own[0], [1], the
// output rows') times the band blocks of the n-tiles each k step reaches (hi and lo). The forward's
// S1: A = Z, r0 = 16w + rh - (c_q-1); the backward's dZ: A = dS1 shifted down, flipped bands (and
// so the post-softmax convolution's P1 from P, and dP from dP1: mta_cuda_fa_post.cuh). LO false:
// the A tile is one bf16 part (x.lo not read).
template <int NT, bool LO = true>
__device__ __forceinline__ void fc_conv(const fc_geo &g, const fc_src &x, int r0, int nt0, const int st_own[2],
                                        mma_c (&s)[NT]) {
    const int l = threadIdx.x % 32, gq = l / 4;
    const int ks0 = (8 * nt0 - 8 + 15) / 16 > 0 ? (8 * nt0 - 8 + 15) / 16 : 0;
    const int ks_end = (8 * (nt0 + NT - 1) + x.dmax) / 16, ks1 = ks_end < x.ncols / 16 ? ks_end : x.ncols / 16 - 1;
    FC_ROLLED
    for (int a = 0; a < g.cq; a++) {
        const bool k0 = x.st[r0 + a + gq] == st_own[0], k1 = x.st[r0 + a + gq + 8] == st_own[1];
        const int zl = (r0 + a + l % 16) * x.ld + 8 * (l / 16);
        const bf16 *bl = x.band + (a * 8 + l % 8) * x.bw + 8 + 8 * (l / 8 % 2);
        FC_ROLLED
        for (int ks = ks0; ks <= ks1; ks++) {
            mma_a hi, lo = {};
            ldsm_x4(hi.x, x.hi + zl + 16 * ks);
            if (LO) ldsm_x4(lo.x, x.lo + zl + 16 * ks);
            fc_keep(hi, k0, k1);
            fc_keep(lo, k0, k1);
            FA_UNROLL
            for (int nt = 0; nt < NT; nt++) {
                const int delta = 16 * ks - 8 * (nt0 + nt);
                if (delta < -8 || delta > x.dmax) continue;
                mma_b bb;
                ldsm_x2(bb.x, bl + delta);
                mma_16816(s[nt], hi, bb);
                if (LO) mma_16816(s[nt], lo, bb);
            }
        }
    }
}

// The forward's walk of query tile i0 of head bh (this lane's rows' document starts st) over its
// key tiles, with the block's shared memory at: q's rows with halos, then per key tile the grown
// product mapped by entry (Z; the post-softmax forward's P) as hi and lo, and each warp's band
// products of w's kernel in s, handed to tile(jt, s, v's rows) while the next tile's k and v are
// copied in.
template <typename E, typename F>
__device__ __forceinline__ void fc_walk(const tc_args &a, const fc_geo &g, const fc_smem &at, bf16 *sh, int bh, int i0,
                                        const float *w, const int st[2], E entry, F tile) {
    const int dp = a.dp, ld = fa_ld(dp), b = bh / a.H;
    bf16 *qs = sh + at.q, *ks = sh + at.k, *vb = sh + at.v, *zhi = sh + at.zhi, *zlo = sh + at.zlo;
    int *stz = (int *)(sh + at.st);
    const size_t slab = tc_kv_slab(a, bh) * a.Tp * dp;
    const int jt0 = mta_row_start(a.ds, a.T, b, i0) / TC_N, jt1 = i0 / TC_N;
    fa_load_rows(qs, a.q + (size_t)bh * a.Tp * dp, i0 - g.rh, g.zr, a.T, dp);
    fc_kv_load(a, g, slab, jt0, ks, vb);
    cp_async_commit();
    fc_setup(a, g, b, bh % a.H, i0, w, sh + at.band, stz);
    const fc_src src = {zhi, zlo, g.zld, g.kz, stz, sh + at.band, g.bw, g.dmax};
    for (int jt = jt0; jt <= jt1; jt++) {
        const bf16 *vs = vb + ((jt - jt0) & 1) * TC_N * ld;
        cp_async_wait<0>();  // this thread's copies of tile jt are done,
        __syncthreads();     // and every thread's; and the last tile's Z and v are no longer read
        fc_z(a, g, i0 - g.rh, jt * TC_N, qs, ks, stz, zhi, zlo, entry);
        __syncthreads();  // Z's halo rows come from other warps; k is no longer read
        if (jt < jt1) fc_kv_load(a, g, slab, jt + 1, ks, vb + ((jt - jt0 + 1) & 1) * TC_N * ld);
        cp_async_commit();
        mma_c s[8];
        fa_zero(s);
        fc_conv<8>(g, src, 16 * (threadIdx.x / 32) + g.rh - (g.cq - 1), 0, st, s);
        tile(jt, s, vs);
    }
}

// Forward with the convolution, one block per (query tile, head) (grid: x tiles, the last first, y
// B*H): per key tile Z with halos, S1 = qkconv(Z) by the bands (fc_walk), then the online softmax and
// O += P V as k_fa_forward's.
template <int DP>
__global__ void __launch_bounds__(TC_THREADS, 2) k_fa_conv_forward_t(tc_args a, const float *w_pre, float *out) {
    MTA_DYNAMIC_SHARED(bf16, sh);
    const int bh = blockIdx.y, i0 = (gridDim.x - 1 - blockIdx.x) * TC_M, ld = fa_ld(a.dp);
    fa_fwd<DP> f;
    fa_fwd_init(f, a, bh / a.H, i0);
    const fc_geo g = fc_geo_of(a.cq, a.ck);
    fc_walk(a, g, fc_smem_of(a.dp, g), sh, bh, i0, w_pre, f.st, fc_same(),
            [&](int jt, mma_c (&s)[8], const bf16 *vs) { fa_fwd_tile(a, bh, jt, f, s, vs, ld); });
    fa_fwd_out(a, bh, f, out);
}

// The forward's launch, at the accumulators' width DP for a.dp, through a pointer named as the
// launch record and --plan know it.
template <int DP> void fa_conv_forward_at(const call *cl, const tc_args &a, int BH, const float *w_pre, float *out) {
    void (*const k_fa_conv_forward)(tc_args, const float *, float *) = k_fa_conv_forward_t<DP>;
    const size_t sm = fa_conv_smem_bytes(a.dp, a.cq, a.ck);
    tc_smem_optin(k_fa_conv_forward, sm);
    MTA_LAUNCH(k_fa_conv_forward, dim3((unsigned)(a.Tp / TC_M), (unsigned)BH), TC_THREADS, sm, cl->s)(a, w_pre, out);
}
void fa_conv_forward(const call *cl, const tc_args &a, int BH, const float *w_pre, float *out) {
    if (a.dp <= 64) fa_conv_forward_at<64>(cl, a, BH, w_pre, out);
    else fa_conv_forward_at<128>(cl, a, BH, w_pre, out);
}

#endif
