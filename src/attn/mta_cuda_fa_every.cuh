// mta_cuda_fa_every.cuh: every MTA step on the tensor-core path ("every-step" kernels, fe_; docs/cuda.md,
// "Every step"): the configs with a key-query convolution together with another step that the
// kernels before this file do not combine with it (fe_takes), for groups of G <= 16 heads.
// Included by mta_cuda_tc.cuh after mta_cuda_fa_post.cuh: it reuses the grown-tile products
// (fc_z_rect, fc_z_store), the band MMAs (fc_band, fc_conv), the head mixings (fh_weights,
// fh_mixmat) and the per-head O accumulation (fh_rows_acc, fh_o_rows).
//
// A block owns a central tile C of FE_M = 16 query rows [i0, i0+16) and FE_N = 16 keys [j0, j0+16)
// of every head of a group. Its one data structure is a *plane set*: one map of all 16 (padded)
// heads on a region around C (rows from i0 - top, columns from j0 - left), in shared memory as
// [head][row][col] bf16, in a hi and (optionally) a lo part (x = hi + lo to about 2^-17 |x|, as the
// other kernels keep Z, S1 and P). Rows are ld = up16(cols) + 8 apart (an odd multiple of 16
// bytes: the 8 rows an ldmatrix reads hit distinct banks), heads hs apart (made an odd multiple of
// 16 bytes, so the 8 heads an ldmatrix .trans reads do too). Padding heads (h >= G) of a set that a
// mixing reads are zero (fe_zero_pad): the mixings multiply them by zero weights, and 0 * NaN
// would poison sums. (dQ's saved S1 and its P1 planes, which no mixing reads, may hold anything
// there: feb_hh's sums over them reach only entries feb_dq_out does not read.)
//
// The engine's three operations on planes:
//   fe_product: X Y^T of one head on a region (q k^T, or dO v^T), masked and mapped, into its plane;
//   fe_conv:    a band convolution of one head's plane into 16 x 8 NT C fragments of another
//               region (fc_conv), handed to a store (fe_store: masked, mapped, into a plane);
//   fe_mix:     the head mixing in place: per (row, 16 columns) A = 16 entries x 16 heads by
//               ldmatrix .trans from the planes, times a 16 x 16 mixing matrix (fh_mixmat), each
//               result mapped by an entry functor and stored over the entries it came from.
// An absent convolution is the 1 x 1 kernel [1] (fe_band with w NULL): its band MMAs of hi and lo
// are exact. An absent mixing is the identity matrix (fh_weights).
#ifndef MTAC_ATTN_MTA_CUDA_FA_EVERY_CUH
#define MTAC_ATTN_MTA_CUDA_FA_EVERY_CUH

const int FE_M = 16, FE_N = 16;  // the central tile's query rows and keys
const int FE_G = 16;             // heads of a plane set (a group's G <= 16, padded)
static_assert(FE_M == FH_M, "the every-step forward's O rows are the head kernels' (fh_o_rows)");

// ---- The engine ----

// A region of a plane set: rows [i0 - top, i0 - top + rows), columns [j0 - left, j0 - left + cols)
// of the central tile (i0, j0); arows >= rows rows are allocated (a product's or a convolution's
// 16-row m-tiles may write or read up to up16(rows)); row stride ld, head stride hs (bf16).
struct fe_region {
    int top, left, rows, cols, arows;
    int ld, hs;
};
__host__ __device__ inline fe_region fe_region_of(int top, int left, int rows, int cols, int arows) {
    fe_region r;
    r.top = top, r.left = left, r.rows = rows, r.cols = cols, r.arows = arows > rows ? arows : rows;
    r.ld = tc_up16(cols) + 8;
    r.hs = r.arows * r.ld;
    if (r.hs / 8 % 2 == 0) r.hs += 8;  // heads an odd multiple of 16 bytes apart
    return r;
}
// The bf16 of one part (hi or lo) of a plane set of FE_G heads.
__host__ __device__ inline size_t fe_plane_size(const fe_region &r) { return (size_t)FE_G * r.hs; }

// A plane set: head h's entry (row, col) of either part at h hs + row ld + col.
struct fe_planes {
    bf16 *hi, *lo;
    fe_region r;
};
__device__ __forceinline__ int fe_at(const fe_region &r, int h, int row, int col) { return h * r.hs + row * r.ld + col; }
// The query row and key of a region's entry.
__device__ __forceinline__ int fe_i(const fe_region &r, int i0, int row) { return i0 - r.top + row; }
__device__ __forceinline__ int fe_j(const fe_region &r, int j0, int col) { return j0 - r.left + col; }

// Zeroes both parts of heads G..FE_G-1 of a plane set: once per block for a set nothing else
// writes, again per tile for one that lies over other buffers (the forward's c planes: fe_p2).
__device__ __forceinline__ void fe_zero_pad(const fe_planes &p, int G) {
    const bf16 zero = __float2bfloat16_rn(0.0f);
    for (size_t e = (size_t)G * p.r.hs + threadIdx.x; e < fe_plane_size(p.r); e += blockDim.x) {
        p.hi[e] = zero;
        if (p.lo) p.lo[e] = zero;
    }
}

// The product X Y^T of one head on region r of key tile j0 (query tile i0), up16(rows) x up16(cols)
// entries: qs holds X's rows from query i0 - top, ks Y's rows from key j0 - left; an entry is 0
// unless st[row] <= j <= i < T (st: the document start of each stored row, 0 outside [0, T)),
// else entry(row, i, j, x); stored into hi and lo, the head's planes (LO false: hi only).
template <bool LO = true, typename F = fc_same>
__device__ __forceinline__ void fe_product(const tc_args &a, const fe_region &r, int i0, int j0, const bf16 *qs,
                                           const bf16 *ks, const int *st, bf16 *hi, bf16 *lo, F entry = F()) {
    fc_z_rect<LO>(a, tc_up16(r.rows), tc_up16(r.cols), r.ld, fe_i(r, i0, 0), fe_j(r, j0, 0), qs, ks, st, hi, lo, entry,
                  blockDim.x);
}

// fe_product over d-slices (the forward's stage holds a slice of X's and Y's columns per step, so
// that it fits twice on an SM at d = 128): z[2u], z[2u + 1] += the slice's part of region r's chunk
// warp + 4u (fc_z_rect's chunks; FE_ZC a warp's at most: fe_fits), X Y^T over w columns at leading
// dimension sld; fe_product_store then masks, splits and stores them as fc_z_rect does. The MMAs
// are fc_z_rect's in its order, so the result is its to the bit whatever the slices.
const int FE_ZC = 3;
__device__ __forceinline__ void fe_product_acc(const fe_region &r, const bf16 *xs, const bf16 *ys, int sld, int w,
                                               mma_c (&z)[2 * FE_ZC]) {
    const int cc = tc_up16(r.cols) / 16, nf = tc_up16(r.rows) / 16 * cc;
    FA_UNROLL
    for (int u = 0; u < FE_ZC; u++) {
        const int f = threadIdx.x / 32 + TC_THREADS / 32 * u;
        if (f < nf) fa_xyT(z + 2 * u, xs + f / cc * 16 * sld, ys + f % cc * 16 * sld, sld, w);
    }
}
__device__ __forceinline__ void fe_product_store(const tc_args &a, const fe_region &r, int i0, int j0,
                                                 const mma_c (&z)[2 * FE_ZC], const int *st, bf16 *hi, bf16 *lo) {
    const int cc = tc_up16(r.cols) / 16, nf = tc_up16(r.rows) / 16 * cc;
    FA_UNROLL
    for (int u = 0; u < FE_ZC; u++) {
        const int f = threadIdx.x / 32 + TC_THREADS / 32 * u;
        if (f < nf)
            fc_z_store(a, r.ld, fe_i(r, i0, 0), fe_j(r, j0, 0), f / cc * 16, f % cc * 16, z + 2 * u, st, fc_same(), hi,
                       lo);
    }
}

// Head h's bands of kernel w (H, c_q, c_k) as fc_band builds them (flip, sh: the transposed
// convolution's); w NULL: the 1 x 1 kernel [1] of an absent convolution (g = fc_geo_of(1, 1)).
__device__ __forceinline__ void fe_band(const fc_geo &g, const float *w, int h, int flip, int sh, bf16 *band) {
    if (w) {
        fc_band(g, w + (size_t)h * g.cq * g.ck, flip, sh, band, blockDim.x);
        return;
    }
    for (int e = threadIdx.x; e < g.cq * 8 * g.bw; e += blockDim.x)
        band[e] = __float2bfloat16_rn(e % g.bw - 8 - e / g.bw % 8 - sh == 0 ? 1.0f : 0.0f);
}

// The band convolution of one head's plane (x: its hi, lo, ld, columns, rows' document starts,
// bands) on mtiles 16-row m-tiles x ngroups groups of NT 8-column n-tiles of a destination
// region: the warps take the units (m-tile mt, group ng) in turn, and each unit's C fragments s
// go to out(mt, ng, s). Destination row r reads the source's rows r + roff + a (a < c_q), and
// column c the source's columns c .. c + c_k - 1 (x's columns start at the destination's c_k-1-p
// left of it: fc_conv's band); st_out: the document starts of the destination's rows.
template <int NT, bool LO = true, typename O>
__device__ __forceinline__ void fe_conv(const fc_geo &g, const fc_src &x, int mtiles, int ngroups, int roff,
                                        const int *st_out, O out) {
    const int gq = threadIdx.x % 32 / 4;
    for (int u = threadIdx.x / 32; u < mtiles * ngroups; u += blockDim.x / 32) {
        const int mt = u / ngroups, ng = u % ngroups;
        const int st_own[2] = {st_out[16 * mt + gq], st_out[16 * mt + gq + 8]};
        mma_c s[NT];
        fa_zero(s);
        fc_conv<NT, LO>(g, x, 16 * mt + roff, NT * ng, st_own, s);
        out(mt, ng, s);
    }
}

// Stores C fragments s (16 rows from row0, NT n-tiles from col0) into one head's plane of region
// r (hi, lo; LO false: hi only): rows past r.rows skipped, columns past r.cols 0, others
// f(row, col, x).
template <int NT, bool LO = true, typename F>
__device__ __forceinline__ void fe_store(const fe_region &r, bf16 *hi, bf16 *lo, int row0, int col0,
                                         const mma_c (&s)[NT], F f) {
    const int gq = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
    FA_UNROLL
    for (int n = 0; n < NT; n++)
        FA_UNROLL
        for (int rr = 0; rr < 2; rr++) {
            const int row = row0 + gq + 8 * rr, col = col0 + 8 * n + 2 * t;
            if (row >= r.rows) continue;
            float x[2];
            FA_UNROLL
            for (int e = 0; e < 2; e++) x[e] = col + e < r.cols ? f(row, col + e, s[n].x[2 * rr + e]) : 0.0f;
            uint32_t h, l;
            bf16x2_split(x[0], x[1], h, l);
            *(uint32_t *)(hi + row * r.ld + col) = h;
            if (LO) *(uint32_t *)(lo + row * r.ld + col) = l;
        }
}

// y (16 entries: row `row`, columns c .. c+15 of the planes, x 16 out heads in two n-tiles) = A W,
// A (entries x heads) from the hi and lo parts by ldmatrix .trans (lane l: matrix m = l / 8 is
// heads 8 (m / 2) + l % 8 at columns c + 8 (m % 2)), W the mixing matrix at w read as fh_wfrag's
// tr (fh_mixmat; AL 0: lo is not read). Lane 4 g + t holds entries c + g, c + g + 8 of heads
// 2t, 2t + 1 (y[0]) and 8 + 2t, 9 + 2t (y[1]).
template <int AL = 1>
__device__ __forceinline__ void fe_mix_chunk(const fe_region &r, const bf16 *hi, const bf16 *lo, int row, int c,
                                             const bf16 *w, int tr, mma_c y[2]) {
    const int l = threadIdx.x % 32, m = l / 8, at = fe_at(r, 8 * (m / 2) + l % 8, row, c + 8 * (m % 2));
    mma_a ah[1], al[1] = {};
    ldsm_x4_t(ah[0].x, hi + at);
    if (AL) ldsm_x4_t(al[0].x, lo + at);
    fh_mixmat<1, AL>(y, ah, al, w, tr);
}

// The head mixing in place on every (row, 16-column chunk) of region r (the warps in turn; a chunk
// is read and written by one warp, so in place is safe): each result of heads < G becomes
// f(h, row, col, x), 0 at columns past r.cols, stored into hi (and lo: LO; AL: A's lo read).
template <int AL = 1, bool LO = true, typename F>
__device__ __forceinline__ void fe_mix(const fe_region &r, int G, bf16 *hi, bf16 *lo, const bf16 *w, int tr, F f) {
    const int gq = threadIdx.x % 32 / 4, t = threadIdx.x % 4, nc = tc_up16(r.cols) / 16;
    for (int u = threadIdx.x / 32; u < r.rows * nc; u += blockDim.x / 32) {
        const int row = u / nc, c = 16 * (u % nc);
        mma_c y[2];
        fe_mix_chunk<AL>(r, hi, lo, row, c, w, tr, y);
        FA_UNROLL
        for (int x = 0; x < 8; x++) {
            const int h = 8 * (x / 4) + 2 * t + x % 2, col = c + gq + 8 * (x % 4 / 2);
            if (h >= G) continue;
            const float v = col < r.cols ? f(h, row, col, y[x / 4].x[x % 4]) : 0.0f;
            bf16 vh, vl;
            bf16_split(v, vh, vl);
            hi[fe_at(r, h, row, col)] = vh;
            if (LO) lo[fe_at(r, h, row, col)] = vl;
        }
    }
}

// Runs body(n, buf) for n = 0..count-1 with load(n, buf) (cp.async copies) issued one step ahead
// into the other of two buffers of size bf16 at buf0; a barrier before and after each body.
template <typename L, typename B>
__device__ __forceinline__ void fe_steps(int count, bf16 *buf0, size_t size, L load, B body) {
    if (count > 0) load(0, buf0);
    cp_async_commit();
    for (int n = 0; n < count; n++) {
        if (n + 1 < count) load(n + 1, buf0 + ((n + 1) & 1) * size);
        cp_async_commit();
        cp_async_wait<1>();  // this thread's copies of step n are done,
        __syncthreads();     // and every thread's
        body(n, buf0 + (n & 1) * size);
        __syncthreads();  // before the next step's copies overwrite this buffer
    }
}

// ---- Which configs ----

tc_heads tc_heads_of(const mta_config *c, const mta_params *p, size_t smem_max);  // mta_cuda_tc.cuh

// 1 for the configs the every-step kernels take: a key-query convolution together with head
// mixing, the head convolution or the other convolution (the kernels before this file combine
// none of those). Whether their shapes are within the kernels' is fe_fits'.
int fe_takes(const mta_config *c) {
    return (c->pre_cq || c->post_cq) && (c->pre_head_mix || c->post_ch || (c->pre_cq && c->post_cq));
}

// A block's heads: the group of the head steps (tc_heads_of), or one head without them (its
// mixings the identity).
tc_heads fe_heads_of(const mta_config *c, const mta_params *p) {
    tc_heads hd = tc_heads_of(c, p, (size_t)-1);
    if (!hd.G) hd.G = 1;
    hd.nq = 1;
    return hd;
}

// ---- The forward ----
//
// Two kernels, one block per (query tile of FE_M rows, group of G heads) (grid: x tiles, the last
// first, y B*H/G), each walking its key tiles j0 (FE_N keys) from its first row's document start
// to the diagonal:
//   k_fa_every_stats: per head Z on C grown by the pre-softmax halos (fe_product), S1 on C (fe_conv
//     with the pre band); then S2 = W1 S1 per (row, 16 keys) in registers (fe_mix_chunk) and the
//     online max and sum per (row, head); at the end each row's log-sum-exp of scale S2 into a.lse.
//   k_fa_every_forward: per head Z on the region RP (C grown by the post-softmax halos: rows
//     [i0-q2, i0+16), keys [j0-p2, j0+16+p2)) grown again by the pre-softmax ones, S1 on RP; P =
//     exp(scale W1 S1 - lse) on RP in place (fe_mix, masked: 0 where the row does not see the
//     key); per head P1 = mask(qkconv(P, w_post)) on C; P2 = W2' P1 in place, masked, through
//     dropout, rounded to bf16 once; O_h += P2_h v_h onto a.o (fh_rows_acc). P is normalised, so O
//     needs no division; out = a.o at the end.
// The rows of RP above i0 belong to the previous query tile: their log-sum-exp comes from the
// statistics kernel, which runs over all rows first.

enum { FE_STATS = TC_DQ + 1 };  // k_fa_every_stats's kind (fe_smem_bytes); TC_FWD: k_fa_every_forward

// The geometry of a kernel of kind for the two convolutions (c_q, c_k; 0, 0: absent, the 1 x 1
// kernel [1]): their bands (g1 pre, g2 post) and halos, and the regions: z (one head's Z), s (S1
// and P: C in the statistics kernel, RP in the forward), c (the forward's P1 and P2, on C).
struct fe_geo {
    fc_geo g1, g2;
    int q1, p1, q2, p2;
    fe_region z, s, c;
};
__host__ __device__ inline fe_geo fe_geo_of(int kind, int cq1, int ck1, int cq2, int ck2) {
    fe_geo f;
    f.g1 = fc_geo_of(cq1 ? cq1 : 1, cq1 ? ck1 : 1), f.g2 = fc_geo_of(cq2 ? cq2 : 1, cq2 ? ck2 : 1);
    f.q1 = f.g1.cq - 1, f.p1 = f.g1.p, f.q2 = f.g2.cq - 1, f.p2 = f.g2.p;
    f.c = fe_region_of(0, 0, FE_M, FE_N, FE_M);
    f.s = kind == FE_STATS ? f.c : fe_region_of(f.q2, f.p2, FE_M + f.q2, FE_N + 2 * f.p2, 0);
    // Z: the rows and columns the pre-softmax convolution's m-tiles and n-tiles of s read
    const int zrows = tc_up16(tc_up16(f.s.rows) + f.q1);
    f.z = fe_region_of(f.s.top + f.q1, f.s.left + f.p1, zrows, tc_up16(f.s.cols) + 2 * f.p1, zrows);
    return f;
}

// The shared arrays of a kernel of kind: two stage buffers (a d-slice of a head's q and k rows for
// Z, or two heads' v rows), Z's hi and lo (one head), the s and (forward) c plane sets, one band,
// the mixing matrices (fh_weights), the log-sum-exp of s's rows per head (forward) and the document
// start of each of Z's rows. The forward's v rows and c planes are used only from P1 to P2 v, when
// the q and k rows and Z are not: they share that space. Past d' = 96 the forward's stage holds
// slices of 64 of the d' columns (fe_product_acc), which halves it at d' = 128 and brings two
// blocks per H100 SM (as at d' <= 96 with 6 x 11 kernels) for a few more barriers: single-buffering
// it instead would save as much but leave each head's copies unhidden, and a narrower slice saves
// nothing more, the v rows and c planes then setting the shared space's size.
struct fe_smem {
    bf16 *stage;
    size_t stage_size;  // bf16 of one stage buffer (a slice of Z's q and k rows)
    size_t v_size;      // bf16 of one buffer of two heads' v rows, from the stage's start
    int sw;             // the columns of a slice (d' in one slice)
    bf16 *zhi, *zlo;
    fe_planes s, c;
    bf16 *band, *w;
    float *lse;
    int *st;
};
__host__ __device__ inline size_t fe_carve(int kind, const fe_geo &f, int dp, unsigned char *base, fe_smem *m) {
    const int fwd = kind == TC_FWD;
    carver cv = {base, 0};
    m->sw = fwd && dp > 96 ? 64 : dp;
    m->stage_size = (size_t)(f.z.rows + tc_up16(f.z.cols)) * fa_ld(m->sw), m->v_size = (size_t)2 * FE_N * fa_ld(dp);
    m->stage = cv.take<bf16>(2 * m->stage_size);
    m->zhi = cv.take<bf16>(f.z.hs), m->zlo = cv.take<bf16>(f.z.hs);
    carver vc = {fwd ? base : NULL, 0};  // the v rows and c planes, over the stage and Z
    vc.take<bf16>(2 * m->v_size);
    m->c.r = f.c, m->c.hi = vc.take<bf16>(fe_plane_size(f.c)), m->c.lo = vc.take<bf16>(fe_plane_size(f.c));
    if (fwd && vc.at > cv.at) cv.at = vc.at;
    m->s.r = f.s, m->s.hi = cv.take<bf16>(fe_plane_size(f.s)), m->s.lo = cv.take<bf16>(fe_plane_size(f.s));
    const size_t b1 = (size_t)f.g1.cq * 8 * f.g1.bw, b2 = (size_t)f.g2.cq * 8 * f.g2.bw;
    m->band = cv.take<bf16>(b1 > b2 ? b1 : b2);
    m->w = cv.take<bf16>(4 * (size_t)fh_wsize(1));
    m->lse = cv.take<float>(fwd ? (size_t)FE_G * f.s.rows : 0);
    m->st = cv.take<int>(f.z.arows);
    return cv.at;
}
// The dynamic shared memory of kernel kind (FE_STATS, TC_FWD) at padded width dp (the plane sets
// always hold FE_G heads).
size_t fe_smem_bytes(int kind, int dp, int cq1, int ck1, int cq2, int ck2) {
    fe_smem m;
    return fe_carve(kind, fe_geo_of(kind, cq1, ck1, cq2, ck2), dp, NULL, &m);
}

// A block's place: the group's first head bh0 (b its batch, h0 its head in the batch), query tile i0.
struct fe_block {
    int bh0, b, h0, i0;
};
// The block's setup: its place, the shared arrays, the mixing matrices, the document start of
// each of Z's rows (0 outside [0, T)), the s planes' padding heads zero.
__device__ __forceinline__ fe_block fe_setup(const tc_args &a, const tc_heads &hd, const fe_geo &f, int kind,
                                             unsigned char *sh, fe_smem &m) {
    fe_block k;
    k.bh0 = blockIdx.y * hd.G, k.b = k.bh0 / a.H, k.h0 = k.bh0 % a.H, k.i0 = (gridDim.x - 1 - blockIdx.x) * FE_M;
    fe_carve(kind, f, a.dp, sh, &m);
    fh_weights<1>(a, hd, k.h0, m.w);
    for (int r = threadIdx.x; r < f.z.arows; r += TC_THREADS) {
        const int i = fe_i(f.z, k.i0, r);
        m.st[r] = i >= 0 && i < a.T ? mta_row_start(a.ds, a.T, k.b, i) : 0;
    }
    fe_zero_pad(m.s, hd.G);
    return k;
}

// The per-head band products of key tile j0 into the s planes: per head (stages double-buffered),
// its q rows and k rows, the pre band, Z on f.z, then S1 on f.s (fe_conv, 16 x 16 units). SLICED
// (the forward): the rows slice by slice (m.sw columns), Z accumulated over them (fe_product_acc,
// _store), its chunks' accumulators held across the steps; else in one step (fe_product), which
// keeps the statistics kernel's registers at 3 blocks per H100 SM.
template <bool SLICED>
__device__ __forceinline__ void fe_s1(const tc_args &a, const tc_heads &hd, const fe_geo &f, const fe_block &k,
                                      const fe_smem &m, int j0, const float *w_pre) {
    const int sld = fa_ld(m.sw), ns = (a.dp + m.sw - 1) / m.sw, zc = tc_up16(f.z.cols);
    const fc_src z = {m.zhi, m.zlo, f.z.ld, zc, m.st, m.band, f.g1.bw, f.g1.dmax};
    const auto cols = [&](int n) { return a.dp - n % ns * m.sw < m.sw ? a.dp - n % ns * m.sw : m.sw; };  // slice n's
    mma_c acc[2 * FE_ZC];
    fe_steps(
        hd.G * ns, m.stage, m.stage_size,
        [&](int n, bf16 *buf) {
            const int bh = k.bh0 + n / ns, c0 = n % ns * m.sw;
            fa_load_cols(buf, sld, a.q + (size_t)bh * a.Tp * a.dp, fe_i(f.z, k.i0, 0), f.z.rows, a.T, a.dp, c0,
                         cols(n));
            fa_load_cols(buf + f.z.rows * sld, sld, a.k + tc_kv_slab(a, bh) * a.Tp * a.dp, fe_j(f.z, j0, 0), zc, a.T,
                         a.dp, c0, cols(n));
        },
        [&](int n, bf16 *buf) {
            const int h = n / ns, c0 = n % ns * m.sw;
            if (SLICED) {
                if (c0 == 0) fa_zero(acc);
                fe_product_acc(f.z, buf, buf + f.z.rows * sld, sld, cols(n), acc);
                if (c0 + m.sw < a.dp) return;  // the head's next slice
            }
            fe_band(f.g1, w_pre, k.h0 + h, 0, 0, m.band);
            if (SLICED)
                fe_product_store(a, f.z, k.i0, j0, acc, m.st, m.zhi, m.zlo);
            else
                fe_product(a, f.z, k.i0, j0, buf, buf + f.z.rows * sld, m.st, m.zhi, m.zlo);
            __syncthreads();  // Z's halo rows come from other warps; the band from every thread
            bf16 *hi = m.s.hi + h * f.s.hs, *lo = m.s.lo + h * f.s.hs;
            fe_conv<2>(f.g1, z, tc_up16(f.s.rows) / 16, tc_up16(f.s.cols) / 16, 0, m.st + f.q1,
                       [&](int mt, int ng, const mma_c (&s)[2]) {
                           fe_store(f.s, hi, lo, 16 * mt, 16 * ng, s, [](int, int, float x) { return x; });
                       });
        });
}

// The online statistics of the warp's row 4w + qq over key tile j0 from its S2 chunk y (fe_mix_chunk
// of S1): per head slot hh (head 8 (hh / 2) + 2t + hh % 2) the max m and sum l of exp(scale S2 - m).
__device__ __forceinline__ void fe_online(const tc_args &a, int i, int st, int j0, const mma_c y[2], float m[4],
                                          float l[4]) {
    const int gq = threadIdx.x % 32 / 4;
    FA_UNROLL
    for (int hh = 0; hh < 4; hh++) {
        float mx = m[hh], sum = 0.0f;
        FA_UNROLL
        for (int r = 0; r < 2; r++)
            if (fa_ok(a.T, i, st, j0 + gq + 8 * r)) mx = fmaxf(mx, a.scale * y[hh / 2].x[2 * r + hh % 2]);
        mx = fa_row_reduce<4, 16>(mx, 0);
        const float alpha = mx == -INFINITY ? 1.0f : expf(m[hh] - mx);
        FA_UNROLL
        for (int r = 0; r < 2; r++)
            if (fa_ok(a.T, i, st, j0 + gq + 8 * r)) sum += expf(a.scale * y[hh / 2].x[2 * r + hh % 2] - mx);
        l[hh] = l[hh] * alpha + fa_row_reduce<4, 16>(sum, 1), m[hh] = mx;
    }
}

// The statistics pass (grid: x query tiles of FE_M, the last first, y B*H/G): each row's
// log-sum-exp of scale S2 per head into a.lse.
__global__ void __launch_bounds__(TC_THREADS, 2)
    k_fa_every_stats(tc_args a, tc_heads hd, const float *w_pre) {
    MTA_DYNAMIC_SHARED(unsigned char, sh);
    const fe_geo f = fe_geo_of(FE_STATS, a.cq, a.ck, a.pcq, a.pck);
    fe_smem m;
    const fe_block k = fe_setup(a, hd, f, FE_STATS, sh, m);
    const int w = threadIdx.x / 32, t = threadIdx.x % 4;
    float mx[4][4], l[4][4];
    FA_UNROLL
    for (int qq = 0; qq < 4; qq++)
        FA_UNROLL
        for (int hh = 0; hh < 4; hh++) mx[qq][hh] = -INFINITY, l[qq][hh] = 0.0f;
    for (int jt = mta_row_start(a.ds, a.T, k.b, k.i0) / FE_N; jt <= k.i0 / FE_N; jt++) {
        fe_s1<false>(a, hd, f, k, m, jt * FE_N, w_pre);  // ends with a barrier
        FA_UNROLL
        for (int qq = 0; qq < 4; qq++) {
            const int row = 4 * w + qq;
            mma_c y[2];
            fe_mix_chunk(f.s, m.s.hi, m.s.lo, row, 0, m.w, 0, y);
            fe_online(a, k.i0 + row, m.st[f.q1 + row], jt * FE_N, y, mx[qq], l[qq]);
        }
    }
    FA_UNROLL
    for (int qq = 0; qq < 4; qq++)
        FA_UNROLL
        for (int hh = 0; hh < 4; hh++) {
            const int h = 8 * (hh / 2) + 2 * t + hh % 2, i = k.i0 + 4 * w + qq;
            if (threadIdx.x % 32 < 4 && h < hd.G && i < a.T) a.lse[(size_t)(k.bh0 + h) * a.T + i] = mx[qq][hh] + logf(l[qq][hh]);
        }
}

// P = exp(scale S2 - lse) of an entry of the s planes (0 where the row does not see the key or is
// outside [0, T)).
struct fe_probs {
    const tc_args *a;
    const fe_geo *f;
    const fe_smem *m;
    int i0, j0;
    __device__ float operator()(int h, int row, int col, float x) const {
        const int i = fe_i(f->s, i0, row);
        if (i < 0 || !fa_ok(a->T, i, m->st[f->q1 + row], fe_j(f->s, j0, col))) return 0.0f;
        return expf(a->scale * x - m->lse[h * f->s.rows + row]);
    }
};

// Key tile j0's P1 = mask(qkconv(P, w_post)) on C per head (P on the s planes, fe_conv by the
// post band), then P2 = W2' P1 in place on the c planes, masked, through dropout, hi only.
__device__ __forceinline__ void fe_p2(const tc_args &a, const tc_heads &hd, const fe_geo &f, const fe_block &k,
                                      const fe_smem &m, int j0, const float *w_post) {
    const int *stc = m.st + f.q1 + f.q2;  // C's rows
    fe_zero_pad(m.c, hd.G);  // (over the last tile's q and k rows when the c planes lie there)
    fe_steps(
        hd.G, m.stage, 0, [](int, bf16 *) {},
        [&](int h, bf16 *) {
            fe_band(f.g2, w_post, k.h0 + h, 0, 0, m.band);
            __syncthreads();
            const fc_src p = {m.s.hi + h * f.s.hs, m.s.lo + h * f.s.hs, f.s.ld, tc_up16(f.s.cols), m.st + f.q1,
                              m.band,                f.g2.bw,                f.g2.dmax};
            bf16 *hi = m.c.hi + h * f.c.hs, *lo = m.c.lo + h * f.c.hs;
            fe_conv<1>(f.g2, p, 1, 2, 0, stc, [&](int, int ng, const mma_c (&s)[1]) {
                fe_store(f.c, hi, lo, 0, 8 * ng, s, [&](int row, int col, float x) {
                    return fa_ok(a.T, k.i0 + row, stc[row], j0 + col) ? x : 0.0f;
                });
            });
        });
    fe_mix<1, false>(f.c, hd.G, m.c.hi, m.c.lo, m.w + 2 * fh_wsize(1), 0, [&](int h, int row, int col, float x) {
        const int i = k.i0 + row, j = j0 + col;
        return fa_ok(a.T, i, stc[row], j) ? x * tc_drop(a, k.bh0 + h, i, j) : 0.0f;
    });
}

// The forward's output pass (grid as k_fa_every_stats, after it): O (before norm and gate) of the
// block's rows and heads to a.o and out. (O accumulates in a.o, not in registers, so one kernel
// serves every d.)
__global__ void __launch_bounds__(TC_THREADS, 2)
    k_fa_every_forward(tc_args a, tc_heads hd, const float *w_pre, const float *w_post, float *out) {
    MTA_DYNAMIC_SHARED(unsigned char, sh);
    const fe_geo f = fe_geo_of(TC_FWD, a.cq, a.ck, a.pcq, a.pck);
    fe_smem m;
    const fe_block k = fe_setup(a, hd, f, TC_FWD, sh, m);
    const int ld = fa_ld(a.dp), w = threadIdx.x / 32;
    for (int e = threadIdx.x; e < FE_G * f.s.rows; e += TC_THREADS) {
        const int h = e / f.s.rows, i = fe_i(f.s, k.i0, e % f.s.rows);
        m.lse[e] = h < hd.G && i >= 0 && i < a.T ? a.lse[(size_t)(k.bh0 + h) * a.T + i] : 0.0f;
    }
    fh_o_rows(a, hd.G, k.bh0, k.i0, [&](int, int, size_t at) { a.o[at] = 0.0f; });
    for (int jt = mta_row_start(a.ds, a.T, k.b, k.i0) / FE_N; jt <= k.i0 / FE_N; jt++) {
        const int j0 = jt * FE_N;
        fe_s1<true>(a, hd, f, k, m, j0, w_pre);
        fe_mix(f.s, hd.G, m.s.hi, m.s.lo, m.w, 0, fe_probs{&a, &f, &m, k.i0, j0});
        __syncthreads();
        fe_p2(a, hd, f, k, m, j0, w_post);
        fe_steps(
            (hd.G + 1) / 2, m.stage, m.v_size,
            [&](int s, bf16 *buf) {
                for (int u = 0; u < 2 && 2 * s + u < hd.G; u++)
                    fa_load_rows(buf + u * FE_N * ld, a.v + tc_kv_slab(a, k.bh0 + 2 * s + u) * a.Tp * a.dp, j0, FE_N,
                                 a.T, a.dp);
            },
            [&](int s, bf16 *buf) {
                const int h = 2 * s + w / 2;
                if (h >= hd.G) return;
                const bf16 *ps = m.c.hi + h * f.c.hs;
                fh_rows_acc<0, 1>(a, k.i0, [&](int q, int c) { return ps + q * f.c.ld + c; }, buf + (w / 2) * FE_N * ld,
                                  a.o + (size_t)(k.bh0 + h) * a.T * a.d, 1.0f, NULL);
            });
    }
    fh_o_rows(a, hd.G, k.bh0, k.i0, [&](int, int, size_t at) { out[at] = a.o[at]; });
}

// The forward's launches (k_fa_every_stats, then k_fa_every_forward); w_pre, w_post NULL for an
// absent convolution. The caller checks that their shared memory fits (fe_fits).
void fe_forward(const call *cl, const tc_args &a, const tc_heads &hd, int B, const float *w_pre, const float *w_post,
                float *out) {
    const size_t s0 = fe_smem_bytes(FE_STATS, a.dp, a.cq, a.ck, a.pcq, a.pck);
    const size_t s1 = fe_smem_bytes(TC_FWD, a.dp, a.cq, a.ck, a.pcq, a.pck);
    tc_smem_optin(k_fa_every_stats, s0);
    tc_smem_optin(k_fa_every_forward, s1);
    const dim3 grid((unsigned)((a.T + FE_M - 1) / FE_M), (unsigned)(B * a.H / hd.G));
    MTA_LAUNCH(k_fa_every_stats, grid, TC_THREADS, s0, cl->s)(a, hd, w_pre);
    MTA_LAUNCH(k_fa_every_forward, grid, TC_THREADS, s1, cl->s)(a, hd, w_pre, w_post, out);
}

// 1 when the every-step kernels take config c's shapes (G <= 16 heads a block, each convolution
// c_q <= 16, c_k <= 17 and odd) and their shared memory fits in smem_max bytes per block.
int fe_fits(const mta_config *c, size_t smem_max) {
    const tc_heads hd = fe_heads_of(c, NULL);
    const int cv[2][2] = {{c->pre_cq, c->pre_ck}, {c->post_cq, c->post_ck}};
    for (int n = 0; n < 2; n++)
        if (cv[n][0] && (cv[n][0] > 16 || cv[n][1] > 17 || cv[n][1] % 2 == 0)) return 0;
    if (hd.G > FE_G) return 0;
    const fe_geo f = fe_geo_of(TC_FWD, c->pre_cq, c->pre_ck, c->post_cq, c->post_ck);  // Z's chunks: FE_ZC a warp
    if (tc_up16(f.z.rows) / 16 * (tc_up16(f.z.cols) / 16) > FE_ZC * TC_THREADS / 32) return 0;
    const int dp = tc_dp(c->d), kinds[2] = {FE_STATS, TC_FWD};
    for (int n = 0; n < 2; n++)
        if (fe_smem_bytes(kinds[n], dp, c->pre_cq, c->pre_ck, c->post_cq, c->post_ck) > smem_max) return 0;
    return 1;
}

#endif
