// lag.h: the backward's lag schedule, one for the fused (CPU) and the CUDA backend.
//
// The gradient reaches earlier rows only through the transposed key-query convolutions: dP row r
// needs dP1 rows r..r+L1 and dZ row r needs dS1 rows r..r+L2, with L1 = c_q'-1 (post conv) and
// L2 = c_q-1 (pre conv), 0 for a convolution that is off. So the backward walks the strips
// i0 = 0, R, 2R, ... of the forward, and the strip at i0 finishes three stages, each on rows that
// lag the one before (all clipped to [0, T)):
//   A = [i0, i0+R)               recompute the maps; dP2 and dP1
//   B = [i0-L1, i0+R-L1)         dP (their dP1 rows are all in, up to A's last), dS2, dS1
//   C = [i0-L1-L2, i0+R-L1-L2)   dZ (their dS1 rows are all in, up to B's last), dq, dk
// It runs strips while i0 < T + L1 + L2: those past T bring no rows A and flush the lag, until
// rows C reach T.
#ifndef MTAC_ATTN_LAG_H
#define MTAC_ATTN_LAG_H

#include "attn/mta_internal.h"

#ifdef __cplusplus
extern "C" {
#endif

// Rows [lo, hi) of a sequence; empty when lo >= hi.
typedef struct {
    int lo, hi;
} mta_rows;

// The schedule of a backward over T rows in strips of R rows.
typedef struct {
    int R, T;
    int L1, L2;  // the rows dP and dZ lag by: c_q'-1 and c_q-1 (0 for a convolution that is off)
} mta_lag;

// A strip of the schedule: its first row i0 (past T while flushing) and its stages' rows.
typedef struct {
    int i0;
    mta_rows A, B, C;
} mta_strip;

static inline MTA_HOST_DEVICE int mta_lag_post(const mta_config *c) { return c->post_cq ? c->post_cq - 1 : 0; }
static inline MTA_HOST_DEVICE int mta_lag_pre(const mta_config *c) { return c->pre_cq ? c->pre_cq - 1 : 0; }

static inline MTA_HOST_DEVICE mta_lag mta_lag_of(const mta_config *c, int R) {
    mta_lag g;
    g.R = R, g.T = c->T, g.L1 = mta_lag_post(c), g.L2 = mta_lag_pre(c);
    return g;
}

// One past the first row of the last strip: strips run while i0 < mta_lag_end.
static inline MTA_HOST_DEVICE int mta_lag_end(mta_lag g) { return g.T + g.L1 + g.L2; }

static inline MTA_HOST_DEVICE mta_rows mta_rows_clip(int lo, int hi, int T) {
    mta_rows r;
    r.lo = lo, r.hi = hi < T ? hi : T;
    return r;
}

// The strip at i0: A from i0 (not raised to 0: it is never below), B and C raised to row 0.
static inline MTA_HOST_DEVICE mta_strip mta_lag_strip(mta_lag g, int i0) {
    mta_strip s;
    const int i1 = i0 + g.R, b0 = i0 - g.L1, c0 = i0 - g.L1 - g.L2;
    s.i0 = i0;
    s.A = mta_rows_clip(i0, i1, g.T);
    s.B = mta_rows_clip(b0 > 0 ? b0 : 0, i1 - g.L1, g.T);
    s.C = mta_rows_clip(c0 > 0 ? c0 : 0, i1 - g.L1 - g.L2, g.T);
    return s;
}

static inline MTA_HOST_DEVICE int mta_rows_any(mta_rows r) { return r.lo < r.hi; }

#ifdef __cplusplus
}
#endif
#endif
