// conv.h: the building blocks of MTA on score/probability maps, one row at a time.
// A map is one (batch, head) slab: row i = query, column j = key. The routines read only the
// causal part (j <= i) of their inputs and write columns 0..i of an output row; callers keep
// whatever lies past the diagonal. Source rows are contiguous with a row stride `ld`, so the
// same routines serve whole (T,T) maps (mta_ref.c, ld = T) and windows of a few rows
// (mta_fused.c).
#ifndef MTAC_ATTN_CONV_H
#define MTAC_ATTN_CONV_H

#include <stddef.h>

// Key-query convolution (spec section 2, step 2; step 5 is the same with its own kernel), output
// rows i0..i1-1:
//   out[i][j] = sum_{a<cq, c<ck} w[a,c] * Z[i-(cq-1)+a, j-p+c],  p = (ck-1)/2,  j = 0..i,
// where Z is zero above its diagonal and outside 0..T-1. src points at row r0 = max(0, i0-(cq-1))
// of Z; row r (r0 <= r < i1) is at src + (r - r0) * ld and is read at columns 0..r only. Output
// row i is at out + (i - i0) * ldo.
void qkconv_rows(const float *src, size_t ld, const float *w, int cq, int ck, int i0, int i1, float *out, size_t ldo);

// The transposed convolution (gradient w.r.t. Z), rows r0..r1-1:
//   din[r][jj] = sum_{a,c} w[a,c] * dout[r+(cq-1)-a, jj+p-c]  over causal dout entries, jj = 0..r.
// g points at row r0 of dout; row i (r0 <= i <= min(r1-1+cq-1, last)) is at g + (i - r0) * ld and
// is read at columns 0..i; rows past `last` (the last row of the map) do not exist. Row r of din
// is at din + (r - r0) * ldd.
void qkconv_backward_input_rows(const float *g, size_t ld, int last, const float *w, int cq, int ck, int r0, int r1,
                                float *din, size_t ldd);

// Kernel gradient of output rows i0..i1-1, summed:
//   dw[a,c] = sum_{i0<=i<i1} sum_{j<=i} dout[i,j] * Z[i-(cq-1)+a, j-p+c].
// g: row i0 of dout, rows ldg apart; src points at row max(0, i0-(cq-1)) of Z, rows ld apart.
// dw: (cq,ck), overwritten. Callers that reduce in a fixed order pass fixed row ranges.
void qkconv_backward_weight_rows(const float *g, size_t ldg, const float *src, size_t ld, int cq, int ck, int i0, int i1,
                                 float *dw);

// Head mixing of one row (steps 3 and 6) over nh heads in groups of G consecutive heads:
//   out[h] = sum_{h' in group(h)} m[h*ldm + h'] * in[h'],  columns 0..n-1.
// Head h's row is at in + h*ins and out + h*outs; m's entries outside the groups are ignored.
void headmix_row(const float *in, size_t ins, const float *m, int ldm, int nh, int G, int n, float *out,
                 size_t outs);

// Transposed mixing of one row: din[h'] = sum_{h in group(h')} m[h*ldm + h'] * dout[h], columns
// 0..n-1; and, when dm_row is non-NULL, this row's kernel gradient
// dm[h*ldm + h'] = sum_j dout[h][j] * in[h'][j] within the groups, as headmix_grad_lanes() lane
// partials per entry at dm_row + (h*ldm + h') * lanes (overwritten), whose sum is the entry. din
// may be in (the gradient replaces the mixing's input in place), not dout.
void headmix_backward_row(const float *dout, size_t douts, const float *in, size_t ins, const float *m, int ldm,
                          int nh, int G, int n, float *din, size_t dins, float *dm_row);
int headmix_grad_lanes(void);
// One kernel-gradient entry summed over nrows rows: dm points at the entry's lane partials in the
// first row's dm_row, the rows rs floats apart. The lanes are summed row by row, then across, in a
// fixed order.
float headmix_grad_sum(const float *dm, size_t rs, int nrows);

// Softmax of x[0..n-1] in place; *mx and *inv receive the row max and 1/sum(exp(x - max)), so
// that softmax_row_recompute reproduces the same values bit for bit.
void softmax_row(float *x, int n, float *mx, float *inv);
// x[j] = exp(x[j] - mx) * inv: the probabilities from the saved row statistics.
void softmax_row_recompute(float *x, int n, float mx, float inv);
// Softmax backward in place on g: g = p * (g - sum_j p*g), over n entries.
void softmax_backward_row(const float *p, float *g, int n);

#endif
