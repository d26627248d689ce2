// mta_cuda_fa_every_bwd.cuh: the backward of the every-step kernels (docs/cuda.md, "Every step"):
// k_fa_every_D, k_fa_every_dq and k_fa_every_dkdv. Included by mta_cuda_tc.cuh after
// mta_cuda_fa_every.cuh, whose planes, products, band convolutions and head mixings (the engine)
// it runs, and after mta_cuda_fa_conv_bwd.cuh (fcb_diag) and mta_cuda_fa_heads*.cuh (fh_rows_acc,
// fh_weights, fh_mma3).
#ifndef MTAC_ATTN_MTA_CUDA_FA_EVERY_BWD_CUH
#define MTAC_ATTN_MTA_CUDA_FA_EVERY_BWD_CUH

// ---- Kernel gradients over a central tile (the 16 x 16 entries of a tile pair) ----

// A 16 x 16 window of one plane set: hi (lo: NULL when one part) at its entry (row 0, column 0,
// 16-byte aligned) of head 0, heads hs apart, rows ld apart (bf16).
struct feb_win {
    const bf16 *hi, *lo;
    int hs, ld;
};

// acc (16 x 16: x's heads as rows, y's as columns, two n-tiles) += sum over the window's entries e of
// x[h][e] y[h'][e]: per window row a k step of 16 entries (warp w: rows w, w + 4, ...), A = x's 16 heads
// by ldmatrix (rows the heads, k the row's 16 columns), B = y's the same way (n-major, as k in Q K^T);
// x and y hi + lo (fh_mma3: three MMAs; x.lo NULL: two).
__device__ __forceinline__ void feb_hh(const feb_win &x, const feb_win &y, mma_c acc[2]) {
    const int l = threadIdx.x % 32;
    FC_ROLLED
    for (int r = threadIdx.x / 32; r < 16; r += TC_THREADS / 32) {
        const int ax = (l % 16) * x.hs + r * x.ld + 8 * (l / 16);
        const int by = (l % 8 + 8 * (l / 16)) * y.hs + r * y.ld + 8 * (l / 8 % 2);
        mma_a ah, al = {};
        uint32_t rh[4], rl[4];
        ldsm_x4(ah.x, x.hi + ax);
        if (x.lo) ldsm_x4(al.x, x.lo + ax);
        ldsm_x4(rh, y.hi + by);
        ldsm_x4(rl, y.lo + by);
        const mma_b bh[2] = {{{rh[0], rh[1]}}, {{rh[2], rh[3]}}}, bl[2] = {{{rl[0], rl[1]}}, {{rl[2], rl[3]}}};
        fh_mma3(acc, ah, al, bh, bl);
    }
}

// Zeroes the k rows (the window's rows 2t, 2t+1 and 2t+8, 2t+9) of an A fragment whose source row
// (sx[r]) is not in the output row's document (so[r]).
__device__ __forceinline__ void feb_keep_k(mma_a &x, const int *so, const int *sx) {
    const int t = threadIdx.x % 4;
    FA_UNROLL
    for (int h = 0; h < 2; h++) {
        const int r = 2 * t + 8 * h;
        const uint32_t m = (sx[r] == so[r] ? 0xffffu : 0u) | (sx[r + 1] == so[r + 1] ? 0xffff0000u : 0u);
        x.x[2 * h] &= m, x.x[2 * h + 1] &= m;
    }
}

// A band convolution's kernel gradient over the central tile of heads [h0, h1):
//   dw[h][a][c] += sum_{r, jj < 16} y[h][r][jj] x[h][r + a][jj + c + s]
// (y: the convolution's output gradient on the tile; x: its input, the window at x's row of the
// tile's row 0 for kernel row 0 and an aligned column s before tap 0 of key 0). Per (head, a) one
// warp (items in turn): M = y^T x_a by MMAs (y^T by ldmatrix .trans, k the tile's rows, kept where
// x's row is in the row's document: so the tile's rows' starts, sx x's from the same origin), its
// diagonals summed by lane c in order (fcb_diag, scr: the block's 4 warps' scratch) over the 16-column
// blocks they reach.
template <bool LO>
__device__ __forceinline__ void feb_dw(const feb_win &y, const feb_win &x, int s, int cq, int ck, int h0, int h1,
                                       const int *so, const int *sx, float *scr, float *dw) {
    const int l = threadIdx.x % 32, nb = (15 + ck - 1 + s) / 16 + 1;
    scr += threadIdx.x / 32 * 16 * FCB_SCR;  // the warp's
    FC_ROLLED
    for (int e = threadIdx.x / 32; e < (h1 - h0) * cq; e += TC_THREADS / 32) {
        const int h = h0 + e / cq, a = e % cq;
        const int at = h * y.hs + (l % 8 + 8 * (l / 16)) * y.ld + 8 * (l / 8 % 2);
        mma_a ah, al = {};
        ldsm_x4_t(ah.x, y.hi + at);
        if (LO) ldsm_x4_t(al.x, y.lo + at);
        feb_keep_k(ah, so, sx + a);
        feb_keep_k(al, so, sx + a);
        float acc = 0.0f;
        FC_ROLLED
        for (int hf = 0; hf < nb; hf++) {
            mma_c m[2];
            fa_zero(m);
            uint32_t bh[4], bl[4];
            const int xb = h * x.hs + (a + l % 16) * x.ld + 16 * hf + 8 * (l / 16);
            ldsm_x4_t(bh, x.hi + xb);
            ldsm_x4_t(bl, x.lo + xb);
            FA_UNROLL
            for (int n = 0; n < 2; n++) {
                const mma_b bb = {{bh[2 * n], bh[2 * n + 1]}}, bo = {{bl[2 * n], bl[2 * n + 1]}};
                mma_16816(m[n], ah, bb);
                mma_16816(m[n], ah, bo);
                if (LO) mma_16816(m[n], al, bb);
            }
            fcb_diag(m, scr, ck, 16 * hf - s, acc);
        }
        if (l < ck) dw[(h * cq + a) * ck + l] += acc;
    }
}

#endif
