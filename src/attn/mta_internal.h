// mta_internal.h: the context behind the public API and the backend entry points.
#ifndef MTAC_ATTN_INTERNAL_H
#define MTAC_ATTN_INTERNAL_H

#include "mta.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

// A backend: what runs behind mta_forward / mta_backward for a config's `backend`. The backends
// are registered once, in mta.c's table (id, name, implementation); nothing else chooses. Each
// backend owns its state (ctx->state: what its forward keeps for its backward, and its
// workspace), allocates it on first use (through mta_alloc_floats, which counts ctx->bytes, for
// host memory) and frees it in release. What it does not support is NULL.
typedef struct {
    mta_status (*forward)(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                          float *out);
    mta_status (*backward)(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                           const float *dout, float *dq, float *dk, float *dv, const mta_grads *g);
    // Frees ctx->state and sets it NULL; the next call allocates it again.
    void (*release)(mta_ctx *ctx);
    // The last forward's map of (b,h) that multiplied V (no dropout), for backends that keep
    // their (T,T) maps.
    const float *(*attention)(const mta_ctx *ctx, int b, int h);
    // 1 when this machine can run the backend (a GPU backend needs a usable GPU); NULL: always.
    int (*available)(void);
    // The memory its calls take: 0, host memory (the hooks below are NULL: malloc, memcpy, free);
    // 1, its device's, allocated, filled, read and freed by these hooks (mta.h, mta_backend_alloc).
    int device_memory;
    mta_status (*alloc)(void **p, size_t bytes);
    mta_status (*free)(void *p);
    mta_status (*upload)(void *dst, const void *src, size_t bytes);
    mta_status (*download)(void *dst, const void *src, size_t bytes);
    mta_status (*synchronize)(void);
    // 1 when the backend computes with precision MTA_BF16 (its tensor-core path); else it is refused.
    int bf16;
} mta_backend_impl;

extern const mta_backend_impl mta_reference_backend;  // mta_ref.c
extern const mta_backend_impl mta_fused_backend;      // mta_fused.c
extern const mta_backend_impl mta_cuda_backend;       // mta_cuda.cu, in builds with the CUDA toolkit
extern const mta_backend_impl mta_cuda_emu_backend;   // mta_cuda.cu on the CUDA emulator (cuda_emu/)

struct mta_ctx {
    mta_config cfg;
    char err[256];
    int have_forward;
    int training, dropout_on;  // dropout_on: the last forward applied dropout
    uint64_t seed;
    size_t bytes;   // workspace currently held
    mta_stats stats;
    const mta_backend_impl *impl;  // the config's backend (mta.c's table)
    void *state;                   // the backend's own (NULL until its first call)
    void *stream;                  // the CUDA backend's stream (mta_set_stream)
    const int32_t *doc;            // mta_set_documents: the ids the next forwards read (backend memory)
    int *doc_start;                // host backends: each position's document start (B*T), from the
                                   // ids of the last forward that had them (mta_doc_starts)
    int docs_on;                   // the last forward had documents (doc_start holds its starts)
};

// Group norm's epsilon (spec section 2, step 8).
static const float MTA_GN_EPS = 1e-5f;

// Group norm and gate of n consecutive (batch, head, position) rows of d (shared.c). The forward
// may run in place (out == o). The backward recomputes the norm and gate from o, writes dO and
// adds each row's dgamma (d), dgate_w (d), dgate_b (1) to acc, in row order.
void mta_normgate_forward_rows(const mta_config *c, const mta_params *p, const float *o, float *out, int n);
void mta_normgate_backward_rows(const mta_config *c, const mta_params *p, const float *o, const float *go, float *dO,
                                int n, double *acc);
// Adds n per-slab accumulators (2d+1 doubles each), in order, to the norm/gate gradients.
void mta_normgate_add_grads(const mta_config *c, const mta_grads *g, const double *acc, int n);

// Functions that the CUDA kernels share with the CPU code are compiled for both by nvcc.
#ifdef __CUDACC__
#define MTA_HOST_DEVICE __host__ __device__
#else
#define MTA_HOST_DEVICE
#endif

// Entries r+1..n-1 of map row r (x) set to zero: the causal maps are stored in full rows, and
// the matrix products read past each row's diagonal.
static inline void mta_zero_past_diagonal(float *x, int r, int n) {
    memset(x + r + 1, 0, (size_t)(n - 1 - r) * sizeof(float));
}

// The threshold of dropout probability p: an entry is kept when its hash is at least p * 2^32.
static inline uint32_t mta_dropout_threshold(float p) { return (uint32_t)((double)p * 4294967296.0); }

// Attention dropout's keep-or-drop of map entry idx = ((b*H + h)*T + i)*T + j: a hash of the seed
// and the index (splitmix64 finaliser) compared with the drop threshold p * 2^32. Every backend
// draws the same mask (the CUDA kernels call this too), and the backward regenerates it.
static inline MTA_HOST_DEVICE int mta_dropout_keep(uint64_t seed, size_t idx, uint32_t threshold) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (idx + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (uint32_t)(z >> 32) >= threshold;
}

// Grouped-query attention: the key/value heads of c (H_kv, 0 meaning H), and the (batch, kv head)
// slab that query slab bh = b*H + h reads: b*H_kv + h / (H/H_kv).
static inline MTA_HOST_DEVICE int mta_kv_heads(const mta_config *c) { return c->H_kv > 0 ? c->H_kv : c->H; }
static inline MTA_HOST_DEVICE size_t mta_kv_slab(const mta_config *c, size_t bh) {
    const size_t H = (size_t)c->H, Hkv = (size_t)mta_kv_heads(c);
    return bh / H * Hkv + bh % H / (H / Hkv);
}

// Packed documents (mta_set_documents). start[b*T + i] is the first position of the document of
// row i of sequence b: i when i = 0 or doc[b,i] != doc[b,i-1], else start[b*T + i-1]; one
// sequence's T starts from its ids (the CUDA backend runs it on the device, a thread a sequence).
static inline MTA_HOST_DEVICE void mta_doc_starts_row(const int32_t *id, int T, int *start) {
    for (int i = 0; i < T; i++) start[i] = i > 0 && id[i] == id[i - 1] ? start[i - 1] : i;
}
void mta_doc_starts(const int32_t *doc, int B, int T, int *start);
// The document starts a host backend's call reads: those of the last forward, or NULL (one
// document per sequence).
static inline const int *mta_ctx_doc_start(const mta_ctx *ctx) { return ctx->docs_on ? ctx->doc_start : NULL; }
// Row i's document start in sequence b (0 without documents), and the end (one past the last
// position) of the document that row i is in, looked for up to lim only (i < lim <= T): the
// smaller of the end and lim (lim without documents), so that a caller that reads rows up to lim
// does not pay for a scan to the end of a long document.
static inline MTA_HOST_DEVICE int mta_row_start(const int *start, int T, int b, int i) {
    return start ? start[(size_t)b * T + i] : 0;
}
static inline MTA_HOST_DEVICE int mta_doc_end(const int *start, int T, int b, int i, int lim) {
    if (!start) return lim;
    const int *s = start + (size_t)b * T;
    int e = i + 1;
    while (e < lim && s[e] == s[i]) e++;
    return e;
}

// Sets ctx->err and returns s. (Inline, as mta_depth_scale_of: the CUDA backend's module,
// libmtac_cuda, uses them without linking libmtac's internals.)
static inline mta_status mta_fail(mta_ctx *ctx, mta_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err, sizeof ctx->err, fmt, ap);
    va_end(ap);
    return s;
}

// The depth scale 1 - lambda(layer_id) (mta_depth_scale).
static inline float mta_depth_scale_of(int layer_id) { return 1.0f - (0.8f - 0.6f * expf(-0.3f * (float)layer_id)); }

// A call's threads (cfg.threads): sets the calling thread's OpenMP default for the call and
// returns what to restore (0: nothing was changed); leave restores it.
int mta_threads_enter(const mta_config *c);
void mta_threads_leave(int prev);

// Allocation with accounting (ctx->bytes); n floats, zeroed. NULL on failure.
float *mta_alloc_floats(mta_ctx *ctx, size_t n);

// The head convolution's kernel (H/ch, ch, ch), indexed [g, in, out], as a block-diagonal (H,H)
// mixing matrix indexed [out, in] (shared.c), and the way back: adds the gradient dm of that
// matrix (entries [out, in] within the groups, H apart) to the kernel's gradient dw.
void mta_headconv_matrix(const float *w, int H, int ch, float *m);
void mta_headconv_grad_add(const float *dm, int H, int ch, float *dw);

#ifdef __cplusplus
}
#endif
#endif
