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
    float *hconv, *hconv_grad;  // (H,H) head-conv kernel as a mixing matrix, and its gradient
    // backward workspace, allocated on the first backward
    float *g1, *g2;      // gradient maps (B,H,T,T)
    float *dO;           // (B,H,T,d)
    float *partial;      // per-row kernel-gradient partials, reduced in a fixed order
    double *ngpart;      // (B*H, 2d+1) norm/gate parameter gradients per slab
} mta_ref_state;

// What the fused backend keeps (mta_fused.c): the softmax row statistics of the last forward,
// and per worker thread the row windows of its strips.
typedef struct {
    float *mx, *inv;     // (B,H,T) row max and 1/sum of the softmax
    float *hconv;        // (H,H) head-conv kernel as a mixing matrix
    void *workers;       // nworkers workers (mta_fused.c)
    double *acc;         // per-unit kernel-gradient accumulators
    int nworkers, G, R;  // the plan the workers were sized for
    size_t worker_bytes;
} mta_fused_state;

struct mta_ctx {
    mta_config cfg;
    char err[256];
    int have_forward;
    int training, dropout_on;  // dropout_on: the last forward applied dropout
    uint64_t seed;
    size_t bytes;   // workspace currently held
    mta_stats stats;
    mta_ref_state ref;
    mta_fused_state fused;
};

// Group norm's epsilon (spec section 2, step 8).
static const float MTA_GN_EPS = 1e-5f;

// Group norm and gate of one (batch, head, position) row of d (normgate.c). The forward may run
// in place (out == o). The backward recomputes the norm and gate from o, writes dO and adds the
// row's dgamma (d), dgate_w (d), dgate_b (1) to acc.
void mta_normgate_forward_row(const mta_config *c, const mta_params *p, const float *o, float *out);
void mta_normgate_backward_row(const mta_config *c, const mta_params *p, const float *o, const float *go, float *dO,
                               double *acc);
// Adds n per-slab accumulators (2d+1 doubles each), in order, to the norm/gate gradients.
void mta_normgate_add_grads(const mta_config *c, const mta_grads *g, const double *acc, int n);

// Attention dropout's keep-or-drop of map entry idx = ((b*H + h)*T + i)*T + j: a hash of the seed
// and the index (splitmix64 finaliser) compared with the drop threshold p * 2^32. Both backends
// draw the same mask, and the backward regenerates it instead of storing it.
static inline int mta_dropout_keep(uint64_t seed, size_t idx, uint32_t threshold) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (idx + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (uint32_t)(z >> 32) >= threshold;
}

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
mta_status mta_fused_forward(mta_ctx *ctx, const float *q, const float *k, const float *v,
                             const mta_params *p, float *out);
mta_status mta_fused_backward(mta_ctx *ctx, const float *q, const float *k, const float *v,
                              const mta_params *p, const float *dout, float *dq, float *dk,
                              float *dv, const mta_grads *g);
void mta_fused_free(mta_ctx *ctx);
// The (T,T) map of (b,h) that multiplied V in the last forward (no dropout).
const float *mta_ref_attention(const mta_ctx *ctx, int b, int h);
// The last forward's (B,H,T,T) maps Z (masked scaled scores; valid when pre_cq is on) and P
// (softmax output), for the decoding cache's prefill.
void mta_ref_maps(const mta_ctx *ctx, const float **z, const float **p);
// The head convolution's kernel (H/ch, ch, ch), indexed [g, in, out], as a block-diagonal (H,H)
// mixing matrix indexed [out, in].
void mta_headconv_matrix(const float *w, int H, int ch, float *m);

#endif
