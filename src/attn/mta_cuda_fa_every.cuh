// mta_cuda_fa_every.cuh: every MTA step on the tensor-core path ("every-step" kernels, fe_; docs/cuda.md,
// "Every step"): the configs with a key-query convolution together with another step that the
// kernels before this file do not combine with it (fe_takes), for groups of G <= 16 heads.
// Included by mta_cuda_tc.cuh after mta_cuda_fa_post.cuh: it reuses the grown-tile products
// (fc_z_rect, fc_z_store), the band MMAs (fc_band, fc_conv), the head mixings (fh_weights,
// fh_mixmat) and the per-head O accumulation (fh_rows_acc).
//
// A block owns a central tile C of FE_M = 16 query rows [i0, i0+16) and FE_N = 16 keys [j0, j0+16)
// of every head of a group. Its one data structure is a *plane set*: one map of all 16 (padded)
// heads on a region around C (rows from i0 - top, columns from j0 - left), in shared memory as
// [head][row][col] bf16, in a hi and (optionally) a lo part (x = hi + lo to about 2^-17 |x|, as the
// other kernels keep Z, S1 and P). Rows are ld = up16(cols) + 8 apart (an odd multiple of 16
// bytes: the 8 rows an ldmatrix reads hit distinct banks), heads hs apart (made an odd multiple of
// 16 bytes, so the 8 heads an ldmatrix .trans reads do too). Padding heads (h >= G) stay zero: the
// mixings multiply them by zero weights, and 0 * NaN would poison sums.
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

// Zeroes both parts of heads G..FE_G-1 of a plane set (once per block: nothing writes them after).
__device__ __forceinline__ void fe_zero_pad(const fe_planes &p, int G) {
    const bf16 zero = __float2bfloat16_rn(0.0f);
    for (size_t e = (size_t)G * p.r.hs + threadIdx.x; e < fe_plane_size(p.r); e += TC_THREADS) {
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
    fc_z_rect<LO>(a, tc_up16(r.rows), tc_up16(r.cols), r.ld, fe_i(r, i0, 0), fe_j(r, j0, 0), qs, ks, st, hi, lo, entry);
}

// Head h's bands of kernel w (H, c_q, c_k) as fc_band builds them (flip, sh: the transposed
// convolution's); w NULL: the 1 x 1 kernel [1] of an absent convolution (g = fc_geo_of(1, 1)).
__device__ __forceinline__ void fe_band(const fc_geo &g, const float *w, int h, int flip, int sh, bf16 *band) {
    if (w) {
        fc_band(g, w + (size_t)h * g.cq * g.ck, flip, sh, band);
        return;
    }
    for (int e = threadIdx.x; e < g.cq * 8 * g.bw; e += TC_THREADS)
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
    for (int u = threadIdx.x / 32; u < mtiles * ngroups; u += TC_THREADS / 32) {
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
    for (int u = threadIdx.x / 32; u < r.rows * nc; u += TC_THREADS / 32) {
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

#endif
