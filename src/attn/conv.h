// conv.h: the building blocks of MTA on materialised T x T score/probability maps.
// A map is one (batch, head) slab: row i = query, column j = key, row-major, T*T floats.
// Every routine reads only the causal part (j <= i) of its inputs and writes whole rows, with
// zeros above the diagonal, so each map it produces is exactly zero where j > i.
#ifndef MTAC_ATTN_CONV_H
#define MTAC_ATTN_CONV_H

#include <stddef.h>

// Key-query convolution (spec section 2, step 2; step 5 is the same with its own kernel):
//   out[i,j] = sum_{a<cq, c<ck} w[a,c] * Z[i-(cq-1)+a, j-p+c],  p = (ck-1)/2,
// where Z is the input with entries j > i (and outside 0..T-1) taken as zero, and out is masked
// to j <= i. The kernel looks at the current and cq-1 past queries and keys centred on j.
// in, out: (T,T); w: (cq,ck). Computes output rows [r0, r1).
void qkconv_forward_rows(const float *in, const float *w, int T, int cq, int ck, int r0, int r1,
                         float *out);

// Gradient w.r.t. the input of qkconv_forward (the transposed convolution), masked to j <= i:
//   din[r,jj] = sum_{a,c} w[a,c] * dout[r+(cq-1)-a, jj+p-c]   over causal dout entries.
// Only the causal part of dout is read. Computes rows [r0, r1) of din.
void qkconv_backward_input_rows(const float *dout, const float *w, int T, int cq, int ck, int r0,
                                int r1, float *din);

// Gradient w.r.t. the kernel, for output row i alone (so callers can reduce rows in a fixed
// order): dw_row[a,c] = sum_{j<=i} dout[i,j] * Z[i-(cq-1)+a, j-p+c]. dw_row: (cq,ck), overwritten.
void qkconv_backward_weight_row(const float *dout, const float *in, int T, int cq, int ck, int i,
                                float *dw_row);

// Head mixing of one query row across the maps of one batch element (steps 3 and 6).
// maps_in/out point at head 0 of the batch element; head h's map starts at h*T*T.
// Heads mix within groups of G consecutive heads: out[h] = sum_{h' in group(h)} m[h,h'] in[h'],
// with m a full (H,H) matrix (entries outside the group are ignored).
void headmix_forward_row(const float *maps_in, const float *m, int H, int G, int T, int i,
                         float *maps_out);

// Transposed mixing for row i: din[h'] = sum_{h in group(h')} m[h,h'] dout[h], masked to j <= i;
// and, when dm_row is non-NULL, the kernel gradient of this row,
// dm_row[h,h'] = sum_{j<=i} dout[h,i,j] * in[h',i,j] (overwritten; (H,H), zero off the groups).
void headmix_backward_row(const float *maps_dout, const float *maps_in, const float *m, int H,
                          int G, int T, int i, float *maps_din, float *dm_row);

// Causal softmax of row i in place: p[i,j] = exp(s[i,j] - max) / sum over j <= i, 0 for j > i.
void softmax_causal_row(float *map, int T, int i);

// Softmax backward for row i in place on dmap: ds = p * (dp - sum_j p*dp) for j <= i, 0 above.
void softmax_causal_backward_row(const float *p, float *dmap, int T, int i);

#endif
