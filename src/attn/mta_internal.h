// mta_internal.h: the context behind the public API and the backend entry points.
#ifndef MTAC_ATTN_INTERNAL_H
#define MTAC_ATTN_INTERNAL_H

#include "mta.h"

// What the reference backend keeps between a forward and its backward. Maps are (B,H,T,T);
// a pointer aliases an earlier map when its step is off (see mta_ref.c).
typedef struct {
    float *z;       // masked scores Z (input of the pre-softmax conv)
    float *s1;      // after the pre-softmax conv (input of head mixing)
    float *s2;      // after head mixing; softmax runs in place, so this becomes P
    float *p1;      // after the post-softmax conv
    float *p2;      // after the post-softmax head conv
    float *pd;      // P2 with dropout applied (multiplies V when dropout is active)
    float *o;       // (B,H,T,d) attention output before group norm
    float *y;       // (B,H,T,d) after group norm (input of the gate)
    float *rstd;    // (B,H,T) 1/sqrt(mean(o^2)+eps) of group norm
    float *gate;    // (B,H,T) sigmoid gate values
    float *hconv, *hconv_grad;  // (H,H) head-conv kernel as a mixing matrix, and its gradient
    // backward workspace, allocated on the first backward
    float *g1, *g2;      // gradient maps (B,H,T,T)
    float *dO;           // (B,H,T,d)
    float *partial;      // per-row kernel-gradient partials, reduced in a fixed order
} mta_ref_state;

struct mta_ctx {
    mta_config cfg;
    char err[256];
    int have_forward;
    int training, dropout_on;  // dropout_on: the last forward applied dropout
    uint64_t seed;
    size_t bytes;   // workspace currently held
    mta_stats stats;
    mta_ref_state ref;
};

// Group norm's epsilon (spec section 2, step 8).
static const float MTA_GN_EPS = 1e-5f;

// Sets ctx->err and returns s.
mta_status mta_fail(mta_ctx *ctx, mta_status s, const char *fmt, ...);

// Allocation with accounting (ctx->bytes); n floats, zeroed. NULL on failure.
float *mta_alloc_floats(mta_ctx *ctx, size_t n);

mta_status mta_ref_forward(mta_ctx *ctx, const float *q, const float *k, const float *v,
                           const mta_params *p, float *out);
mta_status mta_ref_backward(mta_ctx *ctx, const float *q, const float *k, const float *v,
                            const mta_params *p, const float *dout, float *dq, float *dk,
                            float *dv, const mta_grads *g);
void mta_ref_free(mta_ctx *ctx);
// The (T,T) map of (b,h) that multiplied V in the last forward (no dropout).
const float *mta_ref_attention(const mta_ctx *ctx, int b, int h);
// The last forward's (B,H,T,T) maps Z (masked scaled scores; valid when pre_cq is on) and P
// (softmax output), for the decoding cache's prefill.
void mta_ref_maps(const mta_ctx *ctx, const float **z, const float **p);
// The head convolution's kernel (H/ch, ch, ch), indexed [g, in, out], as a block-diagonal (H,H)
// mixing matrix indexed [out, in].
void mta_headconv_matrix(const float *w, int H, int ch, float *m);

#endif
