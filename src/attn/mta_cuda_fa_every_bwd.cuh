// mta_cuda_fa_every_bwd.cuh: the backward of the every-step kernels (docs/cuda.md, "Every step"):
// k_fa_every_D, k_fa_every_dq and k_fa_every_dkdv. Included by mta_cuda_tc.cuh after
// mta_cuda_fa_every.cuh, whose planes, products, band convolutions and head mixings (the engine)
// it runs, and after mta_cuda_fa_conv_bwd.cuh (fcb_keep_k, fcb_diag, fcb_mma_t) and
// mta_cuda_fa_heads*.cuh (fh_rows_acc, fh_weights, fh_mma3).
//
// The three kernels share one chain per tile pair (fe_bwd_tile: 16 query rows x 16 keys of every
// head of a group), which recomputes the forward's maps on the tile grown by the halos the
// gradients need and walks the spec's backward over them (feb_geo's planes):
//   S1 (band MMAs of Z hi + lo) and P = softmax(scale W1 S1) on pa; P1 on C;
//   dP2 = dropout(dO v^T) on pb; dP1 = W2'^T dP2 (mixing in place; rounded once, hi only);
//   dP = qkconv^T(dP1) (flipped bands) on R1; dS2 = P (dP - D) over P; dS1 = scale W1^T dS2;
//   dZ = qkconv^T(dS1) on C, masked.
// k_fa_every_D walks a query tile's key tiles for D = rowsum(P dP) (dP on C only), which dS2 on
// rows below the tile needs; k_fa_every_dq adds dq += dZ k per head (global rows, as the head
// kernels) and the partials of the four kernels' gradients: w_pre (dS1 x Z, per head and tap, the
// diagonals of MMAs: feb_dw), w_post (dP1 x P), w_pre_head (dS2 x S1 over C's entries: feb_hh) and
// w_post_head (P1 x dP2), per (batch, group or head, query tile), summed in a fixed order by
// k_tc_conv_wgrad and k_tc_head_wgrad; k_fa_every_dkdv walks a key tile's query tiles for each
// query head's dk += dZ^T q and dv += dropout(P2)^T dO, summed over each kv head by k_tc_head_kv.
// Deterministic: every sum has one owner (a lane, a warp, a block) and a fixed order.
#ifndef MTAC_ATTN_MTA_CUDA_FA_EVERY_BWD_CUH
#define MTAC_ATTN_MTA_CUDA_FA_EVERY_BWD_CUH

// dQ's and dK/dV's threads per block: 8 warps. Their planes (every head's S1, P, dS on the tile
// grown by both halos, and dP2, dP1) take more shared memory than two blocks per SM get, so one
// block of 8 warps gives an SM FlashAttention-2's 8 (its backward at d = 128 runs one such block).
// D's kernel, which holds less, runs TC_THREADS. The chain's loops stride by the block's threads.
const int FE_BWD_THREADS = 256;

// ---- Kernel gradients over a central tile (the 16 x 16 entries of a tile pair) ----

// A 16 x 16 window of one plane set: hi (lo: NULL when one part) at its entry (row 0, column 0,
// 16-byte aligned) of head 0, heads hs apart, rows ld apart (bf16).
struct feb_win {
    const bf16 *hi, *lo;
    int hs, ld;
};

// acc (16 x 16: x's heads as rows, y's as columns, two n-tiles) += sum over the window's entries e of
// x[h][e] y[h'][e]: per window row a k step of 16 entries (warp w of n: rows w, w + n, ...), A = x's 16 heads
// by ldmatrix (rows the heads, k the row's 16 columns), B = y's the same way (n-major, as k in Q K^T);
// x and y hi + lo (fh_mma3: three MMAs; a lo NULL: that part 0).
__device__ __forceinline__ void feb_hh(const feb_win &x, const feb_win &y, mma_c acc[2]) {
    const int l = threadIdx.x % 32;
    FC_ROLLED
    for (int r = threadIdx.x / 32; r < 16; r += blockDim.x / 32) {
        const int ax = (l % 16) * x.hs + r * x.ld + 8 * (l / 16);
        const int by = (l % 8 + 8 * (l / 16)) * y.hs + r * y.ld + 8 * (l / 8 % 2);
        mma_a ah, al = {};
        uint32_t rh[4], rl[4];
        ldsm_x4(ah.x, x.hi + ax);
        if (x.lo) ldsm_x4(al.x, x.lo + ax);
        ldsm_x4(rh, y.hi + by);
        if (y.lo) ldsm_x4(rl, y.lo + by);
        else rl[0] = rl[1] = rl[2] = rl[3] = 0u;
        const mma_b bh[2] = {{{rh[0], rh[1]}}, {{rh[2], rh[3]}}}, bl[2] = {{{rl[0], rl[1]}}, {{rl[2], rl[3]}}};
        fh_mma3(acc, ah, al, bh, bl);
    }
}

// A band convolution's kernel gradient over the central tile of heads [h0, h1):
//   dw[h][a][c] += sum_{r, jj < 16} y[h][r][jj] x[h][r + a][jj + c + s]
// (y: the convolution's output gradient on the tile; x: its input, the window at x's row of the
// tile's row 0 for kernel row 0 and an aligned column s before tap 0 of key 0). Per (head, a) one
// warp (items in turn): M = y^T x_a by MMAs (y^T by ldmatrix .trans, k the tile's rows, kept where
// x's row is in the row's document: so the tile's rows' starts, sx x's from the same origin), its
// diagonals summed by lane c in order (fcb_diag, scr: the block's warps' scratch) over the 16-column
// blocks they reach.
template <bool LO>
__device__ __forceinline__ void feb_dw(const feb_win &y, const feb_win &x, int s, int cq, int ck, int h0, int h1,
                                       const int *so, const int *sx, float *scr, float *dw) {
    const int l = threadIdx.x % 32, nb = (15 + ck - 1 + s) / 16 + 1;
    scr += threadIdx.x / 32 * 16 * FCB_SCR;  // the warp's
    FC_ROLLED
    for (int e = threadIdx.x / 32; e < (h1 - h0) * cq; e += blockDim.x / 32) {
        const int h = h0 + e / cq, a = e % cq;
        const int at = h * y.hs + (l % 8 + 8 * (l / 16)) * y.ld + 8 * (l / 8 % 2);
        mma_a ah, al = {};
        ldsm_x4_t(ah.x, y.hi + at);
        if (LO) ldsm_x4_t(al.x, y.lo + at);
        fcb_keep_k(ah, so, sx + a);
        fcb_keep_k(al, so, sx + a);
        float acc = 0.0f;
        FC_ROLLED
        for (int hf = 0; hf < nb; hf++) {
            mma_c m[2];
            fa_zero(m);
            const int xb = h * x.hs + (a + l % 16) * x.ld + 16 * hf + 8 * (l / 16);
            fcb_mma_t<LO>(m, ah, al, x.hi + xb, x.lo + xb);
            fcb_diag(m, scr, ck, 16 * hf - s, acc);
        }
        if (l < ck) dw[(h * cq + a) * ck + l] += acc;
    }
}

// ---- The chain's geometry ----
//
// Per tile pair (i0, j0) (q = c_q - 1 rows above, p = (c_k-1)/2 columns each side; 1 = pre, 2 = post;
// an absent convolution is the 1 x 1 kernel [1], q = p = 0), the planes:
//   pa: rows [i0-q2, i0+16+q1), columns [j0-LP, j0+16+m) (m = max(p1, p2), LP = m rounded up to 8, so
//       that C's columns are 16-byte aligned): S1, then P, then on rows [i0, i0+16+q1) (R1) dS2, dS1;
//   pb: rows [i0, i0+16+q1+q2), columns [j0-L2, j0+16+m+p2) (L2 = LP + p2 rounded up to 8): dP2, then
//       dP1 (hi only: a second set of 16 planes of this size would not fit 227 KB at d = 128);
//   z:  one head's Z on the rows and columns pa's convolution reads; zq: one head's Z on rows
//       [i0-q1, i0+16), columns [j0-L1, j0+16+p1) (L1 = p1 rounded up to 8), what dZ's kernel
//       gradient reads (in z's buffer);
//   c:  the central tile: S1 saved before the mixing (dQ, for dW1), P1 (then, in dK/dV, P2).
// The band convolutions between them: Z -> pa (pre), pa -> c (post, P1), pb -> pa (post
// transposed, dP), pa -> c (pre transposed, dZ); each band is shifted by the columns its source
// starts left of where the kernel's first tap reads (sh). D's kernel needs P and dP on C only: its
// pa is C (q1, m taken as 0 for it), pb rows [i0, i0+16+q2), columns [j0-L2, j0+16+p2).
// The kernels' kinds (TC_DQ, TC_DKDV, D's, and dQ's with dK, dV added by atomics: FEB_DQKV).
enum { FEB_D = TC_DQ + 1, FEB_DQKV };
// 1 for the kinds that walk a query tile's key tiles for dq and the kernel gradients' partials.
__host__ __device__ __forceinline__ int feb_dq_kind(int kind) { return kind == TC_DQ || kind == FEB_DQKV; }

struct feb_geo {
    int q1, p1, q2, p2, m, LP, L2, L1;
    fc_geo g1, g2;  // the pre and post kernels' geometry (1 x 1 when absent)
    fe_region pa, pb, z, zq, c;
    int stage_rows;  // the stage buffer's rows (q and k, or dO and v, of one head)
    int nst;         // document starts kept, of rows from z's first (i0 - z.top)
};
__host__ __device__ __forceinline__ feb_geo feb_geo_of(int kind, int cq1, int ck1, int cq2, int ck2) {
    feb_geo g;
    const int full = kind != FEB_D;  // D's kernel: P and dP on C only (pa = C)
    g.g1 = fc_geo_of(cq1 ? cq1 : 1, cq1 ? ck1 : 1), g.g2 = fc_geo_of(cq2 ? cq2 : 1, cq2 ? ck2 : 1);
    g.q1 = g.g1.cq - 1, g.p1 = g.g1.p, g.q2 = g.g2.cq - 1, g.p2 = g.g2.p;
    g.m = !full ? 0 : g.p1 > g.p2 ? g.p1 : g.p2, g.LP = (g.m + 7) / 8 * 8, g.L2 = (g.LP + g.p2 + 7) / 8 * 8;
    g.L1 = (g.p1 + 7) / 8 * 8;
    const int r1 = FE_M + (full ? g.q1 : 0), top = full ? g.q2 : 0, rp = top + r1;
    g.pa = fe_region_of(top, g.LP, rp, g.LP + FE_N + g.m, 0);
    const int pbr = r1 + g.q2, pbt = tc_up16(r1) + g.q2;  // (the transposed convolution's m-tiles read)
    g.pb = fe_region_of(0, g.L2, pbr, g.L2 + FE_N + g.m + g.p2, pbt > tc_up16(pbr) ? pbt : tc_up16(pbr));
    const int zr = rp + g.q1, zt = tc_up16(rp) + g.q1;
    g.z = fe_region_of(top + g.q1, g.LP + g.p1, zr, g.pa.cols + 2 * g.p1, zt > tc_up16(zr) ? zt : tc_up16(zr));
    g.zq = fe_region_of(g.q1, g.L1, r1, g.L1 + FE_N + g.p1, tc_up16(r1));
    g.c = fe_region_of(0, 0, FE_M, FE_N, 0);
    const int s1 = tc_up16(g.z.rows) + tc_up16(g.z.cols), s2 = tc_up16(g.pb.rows) + tc_up16(g.pb.cols);
    g.stage_rows = s1 > s2 ? s1 : s2;  // (zq's are fewer than z's)
    g.nst = tc_up16(g.z.top + g.pb.arows + 16);
    return g;
}

// A band's geometry: kernel g's, the band wide enough for shift sh.
__host__ __device__ __forceinline__ fc_geo feb_band_geo(fc_geo g, int sh) {
    g.dmax = (g.ck + sh + 6) / 8 * 8, g.bw = fc_band_width(g.dmax);
    return g;
}
__host__ __device__ __forceinline__ int feb_band_size(const feb_geo &g) {
    const int w1 = feb_band_geo(g.g1, g.LP).bw, w2 = feb_band_geo(g.g2, g.L2 > g.LP ? g.L2 : g.LP).bw;
    const int a = g.g1.cq * w1, b = g.g2.cq * w2;
    return 8 * (a > b ? a : b);
}

// The shared arrays of a backward kernel of kind (FEB_D, TC_DQ, TC_DKDV, FEB_DQKV) for G heads at
// padded width dp (base NULL: only counts).
struct feb_smem {
    bf16 *pa_hi, *pa_lo, *pb, *s1_hi, *s1_lo, *c_hi, *c_lo, *stage, *z_hi, *z_lo, *band, *w, *dz;
    float *lse, *D, *dw1, *dw2, *scr;
    int *st;
};
__host__ __device__ __forceinline__ size_t feb_carve(const feb_geo &g, int kind, int dp, unsigned char *base, feb_smem *s) {
#ifdef __CUDA_ARCH__
    if (!base) __builtin_unreachable();  // the block's shared memory: carver's NULL case folded away, so
                                         // that the pointers keep their space (LDS, STS; not LD, ST)
#endif
    carver cv = {base, 0};
    const int dq = feb_dq_kind(kind), kv = kind == TC_DKDV, warps = FE_BWD_THREADS / 32;
    // (dQ's pa_hi holds the warps' head-kernel sums at the end: feb_dq_out)
    const size_t sums = dq ? (size_t)warps * 2 * 256 * 2 : 0, pa0 = fe_plane_size(g.pa);
    const size_t pa = pa0 > sums ? pa0 : sums, c = fe_plane_size(g.c), stage = (size_t)g.stage_rows * fa_ld(dp);
    s->pa_hi = cv.take<bf16>(pa), s->pa_lo = cv.take<bf16>(pa), s->pb = cv.take<bf16>(fe_plane_size(g.pb));
    s->s1_hi = dq ? cv.take<bf16>(c) : NULL, s->s1_lo = dq ? cv.take<bf16>(c) : NULL;
    // dQ's P1 is made after the last stage of dP2 and read before the next of Z: in the stage's place
    // (FEB_DQKV's P2 too, with 16 rows of dO after it for dv += P2^T dO)
    const size_t c2 = 2 * c + (kind == FEB_DQKV ? (size_t)FE_M * fa_ld(dp) : 0);
    s->stage = cv.take<bf16>(dq && c2 > stage ? c2 : stage);
    s->c_hi = dq ? s->stage : kv ? cv.take<bf16>(c) : NULL;
    s->c_lo = dq ? (s->stage ? s->stage + c : NULL) : kv ? cv.take<bf16>(c) : NULL;
    const size_t z = (size_t)g.z.arows * g.z.ld;
    s->z_hi = cv.take<bf16>(z), s->z_lo = cv.take<bf16>(z);
    s->band = cv.take<bf16>(feb_band_size(g)), s->w = cv.take<bf16>(4 * (size_t)fh_wsize(1));
    s->dz = cv.take<bf16>(FE_M * 24);
    s->lse = cv.take<float>((size_t)FE_G * g.pa.rows), s->D = cv.take<float>((size_t)FE_G * (FE_M + g.q1));
    s->dw1 = dq ? cv.take<float>((size_t)FE_G * g.g1.cq * g.g1.ck) : NULL;
    s->dw2 = dq ? cv.take<float>((size_t)FE_G * g.g2.cq * g.g2.ck) : NULL;
    s->scr = dq ? cv.take<float>((size_t)warps * 16 * FCB_SCR) : NULL;
    s->st = cv.take<int>(g.nst);
    cv.take<bf16>(8 * 64);  // a guard: no read passes the last array (a miscounted one would stay inside)
    return cv.at;
}
size_t fe_bwd_smem_bytes(int kind, int dp, int cq1, int ck1, int cq2, int ck2) {
    feb_smem s;
    return feb_carve(feb_geo_of(kind, cq1, ck1, cq2, ck2), kind, dp, NULL, &s);
}

// ---- The chain of a tile pair (fe_bwd_tile) ----

// A block's state: its arrays, geometry, heads (bh0.., G of them: tc_heads), kernels and tiles.
struct feb_blk {
    feb_smem s;
    feb_geo g;
    tc_heads hd;
    const float *w_pre, *w_post;
    int b, bh0, h0, i0, j0, kind;  // h0: bh0's head in its batch
    size_t kv_hs;                  // dK, dV: the buffers' head stride; their first row is row kv_row0
    int kv_row0;                   // (the whole tensor's; k_fa_every_dkdv's, a chunk's slot: kv_slots)
};

// The document starts of a region's rows, from its first (st holds the rows from z's first, i0 - z.top).
__device__ __forceinline__ const int *feb_st(const feb_blk &k, const fe_region &r) {
    return k.s.st + k.g.z.top - r.top;
}

// Per query tile i0: the document starts, and each head's log-sum-exp of pa's rows and (with D) D
// of R1's rows (0 outside [0, T)).
__device__ __forceinline__ void feb_rows(const tc_args &a, feb_blk &k, int withD) {
    const feb_geo &g = k.g;
    for (int r = threadIdx.x; r < g.nst; r += blockDim.x) {
        const int i = k.i0 - g.z.top + r;
        k.s.st[r] = i >= 0 && i < a.T ? mta_row_start(a.ds, a.T, k.b, i) : 0;
    }
    for (int e = threadIdx.x; e < k.hd.G * g.pa.rows; e += blockDim.x) {
        const int h = e / g.pa.rows, i = k.i0 - g.pa.top + e % g.pa.rows;
        k.s.lse[e] = i >= 0 && i < a.T ? a.lse[(size_t)(k.bh0 + h) * a.T + i] : 0.0f;
    }
    const int r1 = FE_M + g.q1;
    for (int e = threadIdx.x; e < k.hd.G * r1; e += blockDim.x) {
        const int h = e / r1, i = k.i0 + e % r1;
        k.s.D[e] = withD && i < a.T ? a.D[(size_t)(k.bh0 + h) * a.T + i] : 0.0f;
    }
}

// Head h's band of kernel w (g: its geometry; 1 x 1 when w is NULL) for a source sh columns further
// left than its first tap reads (flip: the transposed convolution's), and the source's fc_src (hi,
// lo: the head's planes of region r; from row row0).
__device__ __forceinline__ fc_src feb_src(const feb_blk &k, const fc_geo &g, const float *w, int h, int flip, int sh,
                                          const fe_region &r, const bf16 *hi, const bf16 *lo, int row0) {
    const fc_geo b = feb_band_geo(g, sh);
    __syncthreads();  // the last band's readers are done
    fe_band(b, w, k.h0 + h, flip, sh, k.s.band);
    __syncthreads();
    return {hi + row0 * r.ld, lo ? lo + row0 * r.ld : NULL, r.ld, tc_up16(r.cols), feb_st(k, r) + row0, k.s.band, b.bw,
            b.dmax};
}

// Copies x's rows from xr (nx of them, the head's slab xs) and y's from yr (ny, ys) into the stage
// and waits for them (every thread's).
__device__ __forceinline__ void feb_load(const tc_args &a, const feb_blk &k, const bf16 *xs, int xr, int nx,
                                         const bf16 *ys, int yr, int ny) {
    __syncthreads();  // the stage's last readers are done
    fa_load_rows(k.s.stage, xs, xr, nx, a.T, a.dp, blockDim.x);
    fp_load_now(k.s.stage + nx * fa_ld(a.dp), ys, yr, ny, a, blockDim.x);
}

// The slabs of head bh0 + h: its q (or dO) and its kv head's k (or v).
__device__ __forceinline__ const bf16 *feb_qs(const tc_args &a, const feb_blk &k, const bf16 *x, int h) {
    return x + (size_t)(k.bh0 + h) * a.Tp * a.dp;
}
__device__ __forceinline__ const bf16 *feb_ks(const tc_args &a, const feb_blk &k, const bf16 *x, int h) {
    return x + tc_kv_slab(a, k.bh0 + h) * a.Tp * a.dp;
}

// S1 on pa, every head: Z (the z region) by the product, then the pre-softmax band convolution,
// masked (S1 is 0 where the row does not see the key).
__device__ __forceinline__ void feb_s1(const tc_args &a, const feb_blk &k) {
    const feb_geo &g = k.g;
    const int *stp = feb_st(k, g.pa);
    for (int h = 0; h < k.hd.G; h++) {
        feb_load(a, k, feb_qs(a, k, a.q, h), k.i0 - g.z.top, tc_up16(g.z.rows), feb_ks(a, k, a.k, h),
                 k.j0 - g.z.left, tc_up16(g.z.cols));
        fe_product(a, g.z, k.i0, k.j0, k.s.stage, k.s.stage + tc_up16(g.z.rows) * fa_ld(a.dp), feb_st(k, g.z),
                   k.s.z_hi, k.s.z_lo);
        const fc_src src = feb_src(k, g.g1, k.w_pre, h, 0, 0, g.z, k.s.z_hi, k.s.z_lo, 0);
        bf16 *hi = k.s.pa_hi + h * g.pa.hs, *lo = k.s.pa_lo + h * g.pa.hs;
        fe_conv<2>(g.g1, src, tc_up16(g.pa.rows) / 16, tc_up16(g.pa.cols) / 16, 0, stp, [&](int mt, int ng, mma_c(&c)[2]) {
            fe_store<2>(g.pa, hi, lo, 16 * mt, 16 * ng, c, [&](int row, int col, float x) {
                return fa_ok(a.T, fe_i(g.pa, k.i0, row), stp[row], fe_j(g.pa, k.j0, col)) ? x : 0.0f;
            });
        });
    }
    __syncthreads();
}

// P on pa from S1 (dQ: S1's central tile saved first): the mixing by W1, P = exp(scale S2 - lse)
// where the row sees the key, else 0.
__device__ __forceinline__ void feb_probs(const tc_args &a, const feb_blk &k) {
    const feb_geo &g = k.g;
    const int *stp = feb_st(k, g.pa);
    for (int e = threadIdx.x; k.s.s1_hi && e < k.hd.G * FE_M * FE_N; e += blockDim.x) {
        const int h = e / (FE_M * FE_N), r = e / FE_N % FE_M, c = e % FE_N;
        const int from = fe_at(g.pa, h, g.pa.top + r, g.pa.left + c), to = fe_at(g.c, h, r, c);
        k.s.s1_hi[to] = k.s.pa_hi[from], k.s.s1_lo[to] = k.s.pa_lo[from];
    }
    __syncthreads();  // S1 is read before it is mixed
    fe_mix(g.pa, k.hd.G, k.s.pa_hi, k.s.pa_lo, k.s.w, 0, [&](int h, int row, int col, float x) {
        const int i = fe_i(g.pa, k.i0, row);
        return fa_ok(a.T, i, stp[row], fe_j(g.pa, k.j0, col)) ? expf(x * a.scale - k.s.lse[h * g.pa.rows + row]) : 0.0f;
    });
    __syncthreads();
}

// dst (a head's (T, d) slab) += X^T y on the 16 keys from j0 (fh_rows_acc's TR): FEB_DQKV's by
// atomicAdd (the key tile's query tiles are other blocks'), dK/dV's in place (one block per key tile).
template <typename X>
__device__ __forceinline__ void feb_kv_acc(const tc_args &a, const feb_blk &k, X x_at, const bf16 *ys, float *dst) {
    if (k.kind == FEB_DQKV) fh_rows_acc<1, 1, true>(a, k.j0, x_at, ys, dst, 1.0f, (const float *)NULL, blockDim.x / 32);
    else fh_rows_acc<1>(a, k.j0, x_at, ys, dst, 1.0f, (const float *)NULL, blockDim.x / 32, k.kv_row0);
}

// dP2 = dropout(dO v^T) on pb, every head, masked, one bf16 part; dK/dV: each head's dv += P2^T dO
// (P2 from the c planes, dO's rows from i0 in the stage) while its dO is there.
__device__ __forceinline__ void feb_dp2(const tc_args &a, const feb_blk &k, float *dvp) {
    const feb_geo &g = k.g;
    for (int h = 0; h < k.hd.G; h++) {
        feb_load(a, k, feb_qs(a, k, a.dO, h), k.i0, tc_up16(g.pb.rows), feb_ks(a, k, a.v, h), k.j0 - g.L2,
                 tc_up16(g.pb.cols));
        fe_product<false>(a, g.pb, k.i0, k.j0, k.s.stage, k.s.stage + tc_up16(g.pb.rows) * fa_ld(a.dp), feb_st(k, g.pb),
                          k.s.pb + h * g.pb.hs, (bf16 *)NULL, fp_dropout{&a, k.bh0 + h});
        if (dvp)  // (the block's warps split the columns)
            feb_kv_acc(a, k, [&](int q, int c) { return k.s.c_hi + fe_at(g.c, h, q, c); }, k.s.stage,
                       dvp + (size_t)(k.bh0 + h) * k.kv_hs);
    }
    __syncthreads();
}

// P1 on the central tile, every head: the post-softmax band convolution of P, masked.
__device__ __forceinline__ void feb_p1(const tc_args &a, const feb_blk &k) {
    const feb_geo &g = k.g;
    const int *stc = feb_st(k, g.c);
    for (int h = 0; h < k.hd.G; h++) {
        const fc_src src =
            feb_src(k, g.g2, k.w_post, h, 0, g.pa.left - g.p2, g.pa, k.s.pa_hi + h * g.pa.hs, k.s.pa_lo + h * g.pa.hs, 0);
        bf16 *hi = k.s.c_hi + h * g.c.hs, *lo = k.s.c_lo + h * g.c.hs;
        fe_conv<2>(g.g2, src, 1, 1, 0, stc, [&](int, int, mma_c(&c)[2]) {
            fe_store<2>(g.c, hi, lo, 0, 0, c, [&](int row, int col, float x) {
                return fa_ok(a.T, k.i0 + row, stc[row], k.j0 + col) ? x : 0.0f;
            });
        });
    }
    __syncthreads();
}

// R1's rows of pa (rows from i0): the region the gradients dS2 and dS1 are stored on. Its top is
// still pa's (q2), for the callers point at pa's row top themselves and read only its rows, cols,
// ld and hs: fe_i and fe_j of it would be q2 rows off.
__device__ __forceinline__ fe_region feb_r1(const feb_geo &g) {
    fe_region r = g.pa;
    r.rows = FE_M + g.q1;
    return r;
}

// dP on R1 by the transposed post-softmax convolution of dP1, every head, into dS2 = P (dP - D) over
// P's entries (each read by the lane that overwrites it). D's kernel (D non-NULL): dP on the
// central tile only, D[h][r] += sum_j P dP (the 4 lanes of a row reduced, in order).
__device__ __forceinline__ void feb_ds2(const feb_blk &k, float *D) {
    const feb_geo &g = k.g;
    const fe_region r1 = feb_r1(g);
    const int *stc = feb_st(k, g.c), l = threadIdx.x % 32, g8 = l / 4, t = l % 4, q = g.pa.top * g.pa.ld;
    for (int h = 0; h < k.hd.G; h++) {
        bf16 *hi = k.s.pa_hi + h * g.pa.hs + q, *lo = k.s.pa_lo + h * g.pa.hs + q;
        const auto p = [&](int row, int col) {
            return __bfloat162float(hi[row * g.pa.ld + col]) + __bfloat162float(lo[row * g.pa.ld + col]);
        };
        const float *Dh = k.s.D + h * r1.rows;
        if (D) {
            const fc_src src = feb_src(k, g.g2, k.w_post, h, 1, g.pb.left - g.p2, g.pb, k.s.pb + h * g.pb.hs, NULL, 0);
            fe_conv<2, false>(g.g2, src, 1, 1, 0, stc, [&](int, int, mma_c(&c)[2]) {
                FA_UNROLL
                for (int rr = 0; rr < 2; rr++) {
                    float x = 0.0f;
                    FA_UNROLL
                    for (int e = 0; e < 4; e++) x += p(g8 + 8 * rr, g.pa.left + 8 * (e / 2) + 2 * t + e % 2) * c[e / 2].x[2 * rr + e % 2];
                    x = fa_row_reduce(x, 1);
                    if (t == 0) D[h * r1.rows + g8 + 8 * rr] += x;
                }
            });
            continue;
        }
        const fc_src src = feb_src(k, g.g2, k.w_post, h, 1, g.pb.left - g.pa.left - g.p2, g.pb, k.s.pb + h * g.pb.hs, NULL, 0);
        fe_conv<2, false>(g.g2, src, tc_up16(r1.rows) / 16, tc_up16(r1.cols) / 16, 0, stc, [&](int mt, int ng, mma_c(&c)[2]) {
            fe_store<2>(r1, hi, lo, 16 * mt, 16 * ng, c, [&](int row, int col, float x) { return p(row, col) * (x - Dh[row]); });
        });
    }
    __syncthreads();
}

// dS1 = scale dS2 W1 on R1 (the gradient of the unscaled S1, which the stored Z and S1 are), in place.
__device__ __forceinline__ void feb_ds1(const tc_args &a, const feb_blk &k) {
    const feb_geo &g = k.g;
    const int q = g.pa.top * g.pa.ld;
    fe_mix(feb_r1(g), k.hd.G, k.s.pa_hi + q, k.s.pa_lo + q, k.s.w, 1, [&](int, int, int, float x) { return x * a.scale; });
    __syncthreads();
}

// The central tile's window of a plane set (rows from row, columns from col).
__device__ __forceinline__ feb_win feb_win_of(const fe_region &r, const bf16 *hi, const bf16 *lo, int row, int col) {
    return {hi + row * r.ld + col, lo ? lo + row * r.ld + col : NULL, r.hs, r.ld};
}

// Per head: Z on zq (q and k of the head in the stage), dZ on the central tile by the transposed
// pre-softmax convolution of dS1, masked, rounded into the dz tile ([query][key]);
// dQ: the kernel gradient's terms dS1 Z (dw1) and dq += dZ k; dK (dkp): dk += dZ^T q.
__device__ __forceinline__ void feb_dz(const tc_args &a, const feb_blk &k, float *dq, float *dkp) {
    const feb_geo &g = k.g;
    const int *stc = feb_st(k, g.c), ld = fa_ld(a.dp), zr = tc_up16(g.zq.rows), taps = g.g1.cq * g.g1.ck;
    for (int h = 0; h < k.hd.G; h++) {
        feb_load(a, k, feb_qs(a, k, a.q, h), k.i0 - g.zq.top, zr, feb_ks(a, k, a.k, h), k.j0 - g.zq.left,
                 tc_up16(g.zq.cols));
        fe_product(a, g.zq, k.i0, k.j0, k.s.stage, k.s.stage + zr * ld, feb_st(k, g.zq), k.s.z_hi, k.s.z_lo);
        const fc_src ds =
            feb_src(k, g.g1, k.w_pre, h, 1, g.pa.left - g.p1, g.pa, k.s.pa_hi + h * g.pa.hs, k.s.pa_lo + h * g.pa.hs, g.pa.top);
        if (dq && k.w_pre) {
            const feb_win y = feb_win_of(g.pa, ds.hi, ds.lo, 0, g.pa.left), x = {k.s.z_hi, k.s.z_lo, 0, g.zq.ld};
            feb_dw<true>(y, x, g.L1 - g.p1, g.g1.cq, g.g1.ck, 0, 1, stc, feb_st(k, g.zq), k.s.scr, k.s.dw1 + h * taps);
        }
        fe_conv<2>(g.g1, ds, 1, 1, 0, stc, [&](int, int, mma_c(&c)[2]) {
            const int g8 = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
            FA_UNROLL
            for (int x = 0; x < 8; x++) {
                const int row = g8 + 8 * (x % 4 / 2), col = 8 * (x / 4) + 2 * t + x % 2;
                const float v = fa_ok(a.T, k.i0 + row, stc[row], k.j0 + col) ? c[x / 4].x[x % 4] : 0.0f;
                k.s.dz[row * 24 + col] = __float2bfloat16_rn(v);
            }
        });
        __syncthreads();  // the dz tile
        const auto at = [&](int q, int c) { return k.s.dz + q * 24 + c; };
        if (dq)  // (the block's warps split the columns)
            fh_rows_acc<0, 1>(a, k.i0, at, k.s.stage + (zr + g.L1) * ld, dq + (size_t)(k.bh0 + h) * a.T * a.d, 1.0f,
                              (const float *)NULL, blockDim.x / 32);
        if (dkp) feb_kv_acc(a, k, at, k.s.stage + g.q1 * ld, dkp + (size_t)(k.bh0 + h) * k.kv_hs);
    }
    __syncthreads();
}

// P2 = dropout(W2' P1) in place on the central tile (P1 on the c planes, masked), every head.
__device__ __forceinline__ void feb_p2(const tc_args &a, const feb_blk &k) {
    const int *stc = feb_st(k, k.g.c);
    fe_mix<1, false>(k.g.c, k.hd.G, k.s.c_hi, k.s.c_lo, k.s.w + 2 * fh_wsize(1), 0, [&](int h, int row, int col, float x) {
        const int i = k.i0 + row, j = k.j0 + col;
        return fa_ok(a.T, i, stc[row], j) ? x * tc_drop(a, k.bh0 + h, i, j) : 0.0f;
    });
}

// FEB_DQKV, after dW2''s terms: P2 from P1 on the c planes (over the stage: their padding heads
// zeroed for the mixing), then per head dv += P2^T dO (dO's 16 rows from i0 after the planes) by
// atomicAdd.
__device__ __forceinline__ void feb_dv_add(const tc_args &a, const feb_blk &k, float *dvp) {
    const fe_region &c = k.g.c;
    fe_zero_pad(fe_planes{k.s.c_hi, k.s.c_lo, c}, k.hd.G);
    __syncthreads();  // (and P1's readers are done: feb_hh)
    feb_p2(a, k);
    bf16 *dO = k.s.stage + 2 * fe_plane_size(c);
    for (int h = 0; h < k.hd.G; h++) {
        __syncthreads();  // the last head's dO is read (the first: P2 is stored)
        fp_load_now(dO, feb_qs(a, k, a.dO, h), k.i0, FE_M, a, blockDim.x);
        feb_kv_acc(a, k, [&](int q, int col) { return k.s.c_hi + fe_at(c, h, q, col); }, dO,
                   dvp + (size_t)(k.bh0 + h) * k.kv_hs);
    }
}

// The chain of tile pair (k.i0, k.j0) for kernel k.kind (EVERY.md, "Backward"; the stores' order
// keeps each plane's readers before its writers, barriers between):
//   S1 and P on pa; dK/dV: P1 on c, then P2 = dropout(W2' P1) in place;
//   dP2 on pb (dK/dV: dv += P2^T dO per head); dQ: P1 on c, dW2' += P1 (x) dP2 on C (acc[1]);
//   dP1 = W2'^T dP2 in place (hi); dQ: w_post's terms dP1 P (dw2);
//   D's kernel: D += rowsum(P dP) on C, the end; else dS2 = P (dP - D) on R1 over P;
//   dQ: dW1 += dS2 (x) S1 on C (acc[0]); dS1 = scale W1^T dS2 in place; per head dZ and dq or dk
//   (dQ: w_pre's terms dS1 Z, dw1).
__device__ __forceinline__ void fe_bwd_tile(const tc_args &a, const feb_blk &k, mma_c (&acc)[2][2], float *dq,
                                            float *dkp, float *dvp) {
    const feb_geo &g = k.g;
    const int G = k.hd.G, dqk = feb_dq_kind(k.kind), kv = k.kind == TC_DKDV;
    const bf16 *w2 = k.s.w + 2 * fh_wsize(1);
    feb_s1(a, k);
    feb_probs(a, k);
    if (kv) {
        feb_p1(a, k);
        feb_p2(a, k);
    }
    feb_dp2(a, k, kv ? dvp : NULL);
    const feb_win dp2 = feb_win_of(g.pb, k.s.pb, NULL, 0, g.L2);
    if (dqk) {
        feb_p1(a, k);
        if (k.hd.ch) feb_hh(feb_win_of(g.c, k.s.c_hi, k.s.c_lo, 0, 0), dp2, acc[1]);
        if (k.kind == FEB_DQKV) feb_dv_add(a, k, dvp);
        __syncthreads();  // pb is read before the mixing overwrites it
    }
    fe_mix<0, false>(g.pb, G, k.s.pb, (bf16 *)NULL, w2, 1, [](int, int, int, float x) { return x; });
    __syncthreads();
    if (dqk && k.w_post) {
        const int x0 = (g.pa.left - g.p2) / 8 * 8;
        feb_dw<false>(dp2, feb_win_of(g.pa, k.s.pa_hi, k.s.pa_lo, 0, x0), g.pa.left - g.p2 - x0, g.g2.cq, g.g2.ck, 0, G,
                      feb_st(k, g.c), feb_st(k, g.pa), k.s.scr, k.s.dw2);
    }
    feb_ds2(k, k.kind == FEB_D ? k.s.D : NULL);  // (its first band waits for every reader of pa)
    if (k.kind == FEB_D) return;
    if (dqk && k.hd.mix) feb_hh(feb_win_of(g.pa, k.s.pa_hi, k.s.pa_lo, g.pa.top, g.pa.left), feb_win_of(g.c, k.s.s1_hi, k.s.s1_lo, 0, 0), acc[0]);
    __syncthreads();  // dS2 is read before the mixing overwrites it
    feb_ds1(a, k);
    feb_dz(a, k, dqk ? dq : NULL, dkp);
}

// A block's setup for kernel kind (its place: batch, group; the shared arrays, the mixing
// matrices, the plane sets' padding heads zero).
__device__ __forceinline__ void feb_setup(const tc_args &a, const tc_heads &hd, int kind, const float *w_pre,
                                          const float *w_post, unsigned char *sh, feb_blk &k) {
    k.g = feb_geo_of(kind, a.cq, a.ck, a.pcq, a.pck);
    feb_carve(k.g, kind, a.dp, sh, &k.s);
    k.hd = hd, k.kind = kind, k.w_pre = w_pre, k.w_post = w_post;
    k.bh0 = blockIdx.y * hd.G, k.b = k.bh0 / a.H, k.h0 = k.bh0 % a.H;
    k.kv_hs = (size_t)a.T * a.d, k.kv_row0 = 0;
    fh_weights<1>(a, hd, k.h0, k.s.w, blockDim.x);
    fe_zero_pad(fe_planes{k.s.pa_hi, k.s.pa_lo, k.g.pa}, hd.G);
    fe_zero_pad(fe_planes{k.s.pb, NULL, k.g.pb}, hd.G);
    if (kind == TC_DKDV) fe_zero_pad(fe_planes{k.s.c_hi, k.s.c_lo, k.g.c}, hd.G);
    const int taps1 = k.g.g1.cq * k.g.g1.ck, taps2 = k.g.g2.cq * k.g.g2.ck;
    for (int e = threadIdx.x; feb_dq_kind(kind) && e < FE_G * (taps1 + taps2); e += blockDim.x)
        (e < FE_G * taps1 ? k.s.dw1[e] : k.s.dw2[e - FE_G * taps1]) = 0.0f;
}

// D = rowsum(P dP) of each head's rows of a query tile (grid: x tiles of FE_M rows, the last first,
// y B*H/G), over its key tiles, into a.D (for dQ and dK/dV: dS2 on rows past the tile needs them).
__global__ void __launch_bounds__(TC_THREADS, 2)
    k_fa_every_D(tc_args a, tc_heads hd, const float *w_pre, const float *w_post) {
    MTA_DYNAMIC_SHARED(unsigned char, sh);
    feb_blk k;
    feb_setup(a, hd, FEB_D, w_pre, w_post, sh, k);
    k.i0 = (gridDim.x - 1 - blockIdx.x) * FE_M;
    feb_rows(a, k, 0);  // (D 0)
    mma_c acc[2][2];
    for (k.j0 = mta_row_start(a.ds, a.T, k.b, k.i0) / FE_N * FE_N; k.j0 <= k.i0; k.j0 += FE_N)
        fe_bwd_tile(a, k, acc, NULL, NULL, NULL);
    __syncthreads();
    const int r1 = FE_M + k.g.q1;
    for (int e = threadIdx.x; e < hd.G * FE_M; e += blockDim.x) {
        const int h = e / FE_M, i = k.i0 + e % FE_M;
        if (i < a.T) a.D[(size_t)(k.bh0 + h) * a.T + i] = k.s.D[h * r1 + e % FE_M];
    }
}

// dQ's partials at its end: each head's kernel-gradient sums (dw1, dw2) into dwp's pre part (B*H,
// tiles, taps1) then post part, and the head kernels' sums (the warps' acc added in warp order,
// through pa's planes, no longer read) into hwp (B*H/G, tiles, nw) as k_tc_head_wgrad reads them.
__device__ __forceinline__ void feb_dq_out(const tc_args &a, const feb_blk &k, const mma_c (&acc)[2][2], float *dwp,
                                           float *hwp) {
    const feb_geo &g = k.g;
    const int G = k.hd.G, c = k.hd.ch, tile = gridDim.x - 1 - blockIdx.x, tiles = gridDim.x;
    const int taps1 = g.g1.cq * g.g1.ck, taps2 = g.g2.cq * g.g2.ck, w = threadIdx.x / 32, l = threadIdx.x % 32;
    float *sum = (float *)k.s.pa_hi;  // (the warps, 2 matrices, 16 x 16: feb_carve sizes pa_hi for them)
    __syncthreads();
    FA_UNROLL
    for (int m = 0; m < 2; m++)
        FA_UNROLL
        for (int n = 0; n < 2; n++)
            FA_UNROLL
            for (int x = 0; x < 4; x++)
                sum[(w * 2 + m) * 256 + (l / 4 + 8 * (x / 2)) * 16 + 8 * n + 2 * (l % 4) + x % 2] = acc[m][n].x[x];
    __syncthreads();
    float *pre = dwp, *post = dwp + (size_t)gridDim.y * G * tiles * (k.w_pre ? taps1 : 0);
    for (int e = threadIdx.x; e < G * (taps1 + taps2); e += blockDim.x) {
        const int second = e >= G * taps1, f = second ? e - G * taps1 : e, taps = second ? taps2 : taps1, h = f / taps;
        if (!(second ? k.w_post : k.w_pre)) continue;
        (second ? post : pre)[((size_t)(k.bh0 + h) * tiles + tile) * taps + f % taps] = (second ? k.s.dw2 : k.s.dw1)[f];
    }
    const int n1 = k.hd.mix ? G * G : 0;
    for (int e = threadIdx.x; e < k.hd.nw; e += blockDim.x) {
        int m = 0, at = e / G * 16 + e % G;  // dW1 (out, in)
        if (e >= n1) {  // dW2' (in, out) within a head-conv group
            const int f = e - n1, grp = f / (c * c);
            m = 1, at = (grp * c + f % (c * c) / c) * 16 + grp * c + f % c;
        }
        float x = 0.0f;
        for (int v = 0; v < (int)blockDim.x / 32; v++) x += sum[(v * 2 + m) * 256 + at];
        hwp[((size_t)blockIdx.y * tiles + tile) * k.hd.nw + e] = m ? x : a.scale * x;  // (S1 is unscaled)
    }
}

// A dQ block of kind TC_DQ or FEB_DQKV (with dkp, dvp: each query head's dK, dV, added to by
// atomicAdd): the query tile's key tiles, then its partials.
__device__ __forceinline__ void feb_dq_walk(const tc_args &a, const tc_heads &hd, int kind, const float *w_pre,
                                            const float *w_post, float *dq, float *dwp, float *hwp, float *dkp,
                                            float *dvp) {
    MTA_DYNAMIC_SHARED(unsigned char, sh);
    feb_blk k;
    feb_setup(a, hd, kind, w_pre, w_post, sh, k);
    k.i0 = (gridDim.x - 1 - blockIdx.x) * FE_M;
    feb_rows(a, k, 1);
    mma_c acc[2][2] = {};
    for (k.j0 = mta_row_start(a.ds, a.T, k.b, k.i0) / FE_N * FE_N; k.j0 <= k.i0; k.j0 += FE_N)
        fe_bwd_tile(a, k, acc, dq, dkp, dvp);
    feb_dq_out(a, k, acc, dwp, hwp);
}

// dQ of a query tile of a group's heads (grid as k_fa_every_D, after it), with the tile's partial
// sums of the convolutions' kernel gradients (dwp) and of the head kernels' (hwp).
__global__ void __launch_bounds__(FE_BWD_THREADS, 1) k_fa_every_dq(tc_args a, tc_heads hd, const float *w_pre,
                                                                   const float *w_post, float *dq, float *dwp,
                                                                   float *hwp) {
    feb_dq_walk(a, hd, TC_DQ, w_pre, w_post, dq, dwp, hwp, NULL, NULL);
}

// k_fa_every_dq and k_fa_every_dkdv in one (the mode without determinism, mta_set_deterministic):
// each tile pair's chain once, its dk, dv terms added by atomicAdd into dkp, dvp (cleared before),
// so their sums' order varies run to run; dq and the partials are k_fa_every_dq's, to the bit.
__global__ void __launch_bounds__(FE_BWD_THREADS, 1)
    k_fa_every_dqkv(tc_args a, tc_heads hd, const float *w_pre, const float *w_post, float *dq, float *dwp, float *hwp,
                    float *dkp, float *dvp) {
    feb_dq_walk(a, hd, FEB_DQKV, w_pre, w_post, dq, dwp, hwp, dkp, dvp);
}

// Each query head's dK and dV of a key tile of FE_N keys (grid: x slots of s, y B*H/G) into slot x's
// rows of dkp, dvp ((B*H, s.rows, d): kv_slots; the key tile kv_tile(s, x), none where -1), over
// the query tiles from the diagonal while their documents reach the keys.
__global__ void __launch_bounds__(FE_BWD_THREADS, 1)
    k_fa_every_dkdv(tc_args a, tc_heads hd, const float *w_pre, const float *w_post, kv_slots s, float *dkp, float *dvp) {
    const int t = kv_tile(s, blockIdx.x);
    if (t < 0) return;
    MTA_DYNAMIC_SHARED(unsigned char, sh);
    feb_blk k;
    feb_setup(a, hd, TC_DKDV, w_pre, w_post, sh, k);
    k.j0 = t * FE_N, k.kv_hs = (size_t)s.rows * a.d, k.kv_row0 = k.j0 - (int)blockIdx.x * FE_N;
    const int jlast = (k.j0 + FE_N < a.T ? k.j0 + FE_N : a.T) - 1;
    const size_t n = (size_t)FE_N * a.d;
    for (size_t e = threadIdx.x; e < hd.G * n; e += blockDim.x) {
        const int h = (int)(e / n), j = k.j0 + (int)(e % n / a.d);
        const size_t at = (size_t)(k.bh0 + h) * k.kv_hs + (size_t)(j - k.kv_row0) * a.d + e % a.d;
        if (j <= jlast) dkp[at] = dvp[at] = 0.0f;
    }
    mma_c acc[2][2];
    for (k.i0 = k.j0; k.i0 < a.T && mta_row_start(a.ds, a.T, k.b, k.i0) <= jlast; k.i0 += FE_M) {
        __syncthreads();  // (the last tile's and the clearing's) 
        feb_rows(a, k, 1);
        fe_bwd_tile(a, k, acc, NULL, dkp, dvp);
    }
}

// The dK/dV kernel's chunks: pairs of key tiles (t, nt - 1 - t: the longest walk with the shortest,
// each pair the same work) in chunks of enough pairs that two blocks of each run on every one of
// sms multiprocessors (one block per multiprocessor: FE_BWD_THREADS), each chunk's per-query-head
// dK, dV summed into dk, dv before the next, so that those buffers hold a chunk's rows, not T.
int fe_kv_pairs(int B, int H, int G, int sms) {
    const int groups = B * H / G;
    return (sms + groups - 1) / groups;
}
// The chunk of pairs from rank r0 (rows T, all in one, where one chunk has them all).
kv_slots fe_kv_slots(int T, int pairs, int r0) {
    const int nt = (T + FE_N - 1) / FE_N;
    return 2 * pairs >= nt ? kv_whole(T) : kv_slots{2 * pairs * FE_N, FE_N, nt, pairs, r0};
}
// Rows per head of the per-query-head dK, dV buffers of c on a device of sms multiprocessors.
int fe_kv_rows(const mta_config *c, int G, int sms) { return fe_kv_slots(c->T, fe_kv_pairs(c->B, c->H, G, sms), 0).rows; }

// 1 when the backward's kernels fit in smem_max bytes of shared memory per block (fe_fits checks
// the shapes and the forward's).
int feb_fits(const mta_config *c, size_t smem_max) {
    const int kinds[3] = {FEB_D, TC_DQ, TC_DKDV};
    for (int n = 0; n < 3; n++)
        if (fe_bwd_smem_bytes(kinds[n], tc_dp(c->d), c->pre_cq, c->pre_ck, c->post_cq, c->post_ck) > smem_max) return 0;
    return 1;
}

// 1 where the backward runs k_fa_every_dqkv (atomics: the context's mode; its shared memory fits).
int feb_atomic_kv(const mta_config *c, int atomics, size_t smem_max) {
    return atomics && fe_bwd_smem_bytes(FEB_DQKV, tc_dp(c->d), c->pre_cq, c->pre_ck, c->post_cq, c->post_ck) <= smem_max;
}

// The backward's launches: D (into a.D), dQ (with the partials), then dK/dV per chunk of key tiles
// (fe_kv_pairs of sms multiprocessors) into dkp, dvp (a chunk's rows: fe_kv_slots) and their sums
// into dk, dv; or with atomic_kv (feb_atomic_kv; dkp, dvp then (B*H, T, d) and cleared by the
// caller) D and k_fa_every_dqkv, then the sums. w_pre, w_post NULL for an absent convolution; dwp:
// the pre-softmax kernel's partials, then the post-softmax one's. The caller checks the shared
// memory fits.
void fe_backward(const call *cl, const tc_args &a, const tc_heads &hd, int B, const float *w_pre, const float *w_post,
                 int atomic_kv, int sms, float *dq, float *dwp, float *hwp, float *dkp, float *dvp, float *dk,
                 float *dv) {
    const int kinds[4] = {FEB_D, TC_DQ, TC_DKDV, FEB_DQKV};
    size_t sm[4];
    for (int n = 0; n < 4; n++) sm[n] = fe_bwd_smem_bytes(kinds[n], a.dp, a.cq, a.ck, a.pcq, a.pck);
    const unsigned groups = (unsigned)(B * a.H / hd.G);
    const dim3 grid((unsigned)((a.T + FE_M - 1) / FE_M), groups);
    tc_smem_optin(k_fa_every_D, sm[0]);
    MTA_LAUNCH(k_fa_every_D, grid, TC_THREADS, sm[0], cl->s)(a, hd, w_pre, w_post);
    if (atomic_kv) {
        tc_smem_optin(k_fa_every_dqkv, sm[3]);
        MTA_LAUNCH(k_fa_every_dqkv, grid, FE_BWD_THREADS, sm[3], cl->s)(a, hd, w_pre, w_post, dq, dwp, hwp, dkp, dvp);
        tc_kv_sums(cl, a, dkp, dvp, kv_whole(a.T), dk, dv);
        return;
    }
    tc_smem_optin(k_fa_every_dq, sm[1]);
    tc_smem_optin(k_fa_every_dkdv, sm[2]);
    MTA_LAUNCH(k_fa_every_dq, grid, FE_BWD_THREADS, sm[1], cl->s)(a, hd, w_pre, w_post, dq, dwp, hwp);
    const int pairs = fe_kv_pairs(B, a.H, hd.G, sms), nt = (a.T + FE_N - 1) / FE_N;
    for (int r0 = 0; r0 < (nt + 1) / 2; r0 += pairs) {
        const kv_slots s = fe_kv_slots(a.T, pairs, r0);
        MTA_LAUNCH(k_fa_every_dkdv, dim3((unsigned)(s.pc ? 2 * s.pc : nt), groups), FE_BWD_THREADS, sm[2], cl->s)(
            a, hd, w_pre, w_post, s, dkp, dvp);
        tc_kv_sums(cl, a, dkp, dvp, s, dk, dv);
        if (!s.pc) break;  // (one chunk had every tile)
    }
}

#endif
