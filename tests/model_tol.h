// model_tol.h: the bound of the model tests (test_model, test_decode) on two float32 computations
// of the same model that sum in different orders: packed documents against each alone, the
// decoder against one forward, grouped-query against repeated heads, the reference backend
// against the fused one, and any BLAS kernel or thread count. Errors are measured relative to
// the largest entry of the compared tensor.
//
// A float32 sum of n terms is within n*u*sum|terms| of the exact sum (u = 2^-24, Higham's
// gamma_n), so two orders differ by at most twice that. That worst case assumes every rounding
// goes the same way; rounding errors of mixed sign grow as sqrt(n)*u (Higham and Mary 2019),
// while sum|terms| of a product of random-sign weights is about sqrt(n) times its result, so a
// sum's error is about 2n*u times the result's scale. Along the chain from the embedding to a
// logit these relative errors add: the RMSNorms and the group norm divide a row by its own rms,
// which scales the row's error with it (no amplification); the softmax turns an absolute score
// error e into a relative probability error of at most 2e, and these small models' scores are of
// order one. So a logit agrees within 2u*N of the largest, N the lengths of the sums on the
// chain added up (mt_chain); a gradient runs the chain back (each product's transpose: another
// N) and a weight's gradient also sums over the B*T positions: 2u*(2N + B*T).
//
// A wrong index or a missing term moves a logit by a fair fraction of the largest: with N of a
// few hundred the bound is ~1e-5 to 1e-4, orders of magnitude below.
#ifndef MTAC_MODEL_TOL_H
#define MTAC_MODEL_TOL_H

#include "model/model.h"

#include <stdio.h>

#define MT_U 0x1p-24  // float32 unit roundoff

// The lengths of the float32 sums from the embedding to a logit, added up, for sequences of T
// (the key-query convolutions counted in every layer, also where qk_layers leaves them off: a
// few terms more than the chain has).
static inline double mt_chain(const model_config *c, int T) {
    const mta_config *a = &c->attn;
    const int d = c->dim / c->n_heads, D = c->dim;
    const double pre = c->mta ? (double)a->pre_cq * a->pre_ck + (a->pre_head_mix ? c->n_heads : 0) : 0;
    const double post = c->mta ? (double)a->post_cq * a->post_ck * (a->post_ch > 0 ? a->post_ch : 1) : 0;
    const double layer = D + D + d + pre + T + post + T + (c->mta && a->group_norm ? d : 0) + D + D + D + c->hidden_dim;
    //                   norm q,k,v scores    softmax  P V                              wo  norm w1,w3  w2
    return c->n_layers * layer + D + D;  // the final norm, the tied output projection
}
// The bound on logits (relative to the largest) and on gradients (B*T positions).
static inline double mt_tol_logits(const model_config *c, int T) { return 2 * MT_U * mt_chain(c, T); }
static inline double mt_tol_grads(const model_config *c, int B, int T) {
    return 2 * MT_U * (2 * mt_chain(c, T) + (double)B * T);
}

// Prints what was compared, the error and the bound; 1 when err <= tol (a NaN fails).
static inline int mt_within(const char *what, double err, double tol) {
    fprintf(stderr, "  %s: %.3g, bound %.3g (%.2g of it)\n", what, err, tol, err / tol);
    return err <= tol;
}

#endif
