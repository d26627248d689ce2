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

// What a config asks of a backend, its "uses": each MTA step it switches on, and each other thing
// a backend may not compute (grouped-query attention, precision MTA_BF16, packed documents, bfloat16
// storage). The table mta_use_table says how each is read from a config; each backend's `computes` is an
// allow-list of them (a switch whose default refuses), which mta_config_check asks: a use added
// here is refused by every backend until its switch names it, never skipped. The settings that
// only tune (strip_rows, threads, keep_o) are not uses: a backend with no such choice ignores them.
typedef enum {
    MTA_USE_PRE_CONV,
    MTA_USE_PRE_HEAD_MIX,
    MTA_USE_POST_CONV,
    MTA_USE_POST_HEAD_CONV,
    MTA_USE_GROUP_NORM,
    MTA_USE_DEPTH_SCALE,
    MTA_USE_GATE,
    MTA_USE_DROPOUT,
    MTA_USE_GQA,
    MTA_USE_BF16,
    MTA_USE_DOCUMENTS,
    MTA_USE_BF16_STORAGE,
#ifdef MTAC_TEST_DUMMY_STEP
    MTA_USE_DUMMY,  // tests/test_backend_support.c: a step that no backend computes
#endif
    MTA_N_USES
} mta_use;

// How a use is read from a config: an int setting > 0 (a size, or a flag mta_config_check has
// checked is 0 or 1), a float setting > 0, an int setting in (0, another), an int setting equal
// to a value, or not from the config but a call on the context (mta_set_documents).
enum { MTA_ON_INT, MTA_ON_FLOAT, MTA_ON_BELOW, MTA_ON_EQUAL, MTA_ON_CALL };
typedef struct {
    const char *name;  // in "the fused backend does not compute <name>"
    const char *hint;  // said after that, or NULL
    int kind;          // MTA_ON_*
    size_t field;      // offset in mta_config of the setting read
    size_t other;      // MTA_ON_BELOW: offset of the bound; MTA_ON_EQUAL: the value
} mta_use_rule;
#define MTA_USE_OF(f) offsetof(mta_config, f)
static const mta_use_rule mta_use_table[MTA_N_USES] = {
    {"the pre-softmax key-query convolution", NULL, MTA_ON_INT, MTA_USE_OF(pre_cq), 0},
    {"the pre-softmax head mixing", NULL, MTA_ON_INT, MTA_USE_OF(pre_head_mix), 0},
    {"the post-softmax key-query convolution", NULL, MTA_ON_INT, MTA_USE_OF(post_cq), 0},
    {"the post-softmax head convolution", NULL, MTA_ON_INT, MTA_USE_OF(post_ch), 0},
    {"the group norm", NULL, MTA_ON_INT, MTA_USE_OF(group_norm), 0},
    {"the depth scale", NULL, MTA_ON_INT, MTA_USE_OF(depth_scale), 0},
    {"the gate", NULL, MTA_ON_INT, MTA_USE_OF(gate), 0},
    {"attention dropout", NULL, MTA_ON_FLOAT, MTA_USE_OF(dropout), 0},
    {"grouped-query attention (H_kv < H)", NULL, MTA_ON_BELOW, MTA_USE_OF(H_kv), MTA_USE_OF(H)},
    {"precision MTA_BF16", "it computes in float32 only (MTA_BF16 needs a tensor-core backend: docs/cuda.md)",
     MTA_ON_EQUAL, MTA_USE_OF(precision), MTA_BF16},
    {"packed documents (mta_set_documents)", NULL, MTA_ON_CALL, 0, 0},
    {"bfloat16 tensors (dtype MTA_DTYPE_BF16)", "it takes float32 tensors only (bfloat16 storage needs the cuda backend: include/mta.h)",
     MTA_ON_EQUAL, MTA_USE_OF(dtype), MTA_DTYPE_BF16},
#ifdef MTAC_TEST_DUMMY_STEP
    {"the dummy step", NULL, MTA_ON_INT, MTA_USE_OF(dummy_step), 0},
#endif
};
#undef MTA_USE_OF

// 1 when c uses u (MTA_ON_CALL uses: never; the call that sets them asks the backend).
static inline int mta_config_uses(const mta_config *c, mta_use u) {
    const mta_use_rule *r = &mta_use_table[u];
    const char *base = (const char *)c;
    const int *x = (const int *)(base + r->field);
    switch (r->kind) {
    case MTA_ON_INT: return *x > 0;
    case MTA_ON_FLOAT: return *(const float *)(base + r->field) > 0.0f;
    case MTA_ON_BELOW: return *x > 0 && *x < *(const int *)(base + r->other);
    case MTA_ON_EQUAL: return *x >= 0 && (size_t)*x == r->other;
    default: return 0;
    }
}

// The first use of c that an allow-list `computes` refuses, or -1 when it computes them all.
static inline int mta_first_refused(const mta_config *c, int (*computes)(const mta_config *, mta_use)) {
    for (int u = 0; u < MTA_N_USES; u++)
        if (mta_config_uses(c, (mta_use)u) && !computes(c, (mta_use)u)) return u;
    return -1;
}

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
    // 1 when the backend computes use u of config c: an allow-list, a switch on u whose default
    // returns 0 (c for the uses that a backend computes only at some sizes).
    int (*computes)(const mta_config *c, mta_use u);
    // A backend with a tensor-core path beside its float32 one (precision MTA_BF16): the configs
    // that path runs (the others run the float32 path), and its allow-list of uses (as computes).
    // NULL: no such path. mta_tensor_core_path reads them.
    int (*tc_covers)(const mta_config *c);
    int (*tc_computes)(const mta_config *c, mta_use u);
} mta_backend_impl;

// What the host backends (reference, fused) compute: every step, in float32 (shared.c). A step
// that one of them computes and the other does not yet gets a list of its own.
int mta_host_computes(const mta_config *c, mta_use u);

extern const mta_backend_impl mta_reference_backend;  // mta_ref.c
extern const mta_backend_impl mta_fused_backend;      // mta_fused.c
extern const mta_backend_impl mta_cuda_backend;       // mta_cuda.cu, in builds with the CUDA toolkit
extern const mta_backend_impl mta_cuda_emu_backend;   // mta_cuda.cu on the CUDA emulator (cuda_emu/)

// The ABI between libmtac and the backend modules it opens (libmtac_cuda.so): mta_ctx,
// mta_config, mta_backend_impl and the uses (mta_use). Bump MTA_BACKEND_ABI when one of them
// changes; a module exports its build's as `mtac_backend_abi` (MTA_MODULE_ABI), which libmtac
// checks before it uses the module: the sizes catch a change made without the bump.
#define MTA_BACKEND_ABI 4
typedef struct {
    int version;  // first, so that a module of any other version is read right
    size_t ctx_bytes, config_bytes, impl_bytes, uses;
} mta_module_abi;
#define MTA_MODULE_ABI {MTA_BACKEND_ABI, sizeof(mta_ctx), sizeof(mta_config), sizeof(mta_backend_impl), MTA_N_USES}
// The backend `symbol` of the module at path, else of fallback (a file name the dynamic loader
// searches for; NULL: none), once its mtac_backend_abi is this build's; NULL when it cannot be
// opened or is from another mtac, why (n bytes) saying which.
const mta_backend_impl *mta_module_open(const char *path, const char *fallback, const char *symbol, char *why,
                                        size_t n);

// The kernels a context's calls launched (mta_ctx_record_launches): each name once, in the order
// of its first launch, with its count; names past the last slot are counted in lost. The names
// are the backend's string constants (a module stays loaded once opened).
// The cuda-emu backend adds each launch's warp-level operations to ops (mta_ctx_launch_ops).
#define MTA_LAUNCH_LOG_MAX 64
typedef struct {
    int n, lost;
    const char *name[MTA_LAUNCH_LOG_MAX];
    int times[MTA_LAUNCH_LOG_MAX];
    mta_kernel_ops ops[MTA_LAUNCH_LOG_MAX];
} mta_launch_log;

// Notes a launch of name: its row, or -1 when the record has no room for a new name.
static inline int mta_launch_log_note(mta_launch_log *log, const char *name) {
    for (int i = 0; i < log->n; i++)
        if (!strcmp(log->name[i], name)) {
            log->times[i]++;
            return i;
        }
    if (log->n == MTA_LAUNCH_LOG_MAX) {
        log->lost++;
        return -1;
    }
    log->name[log->n] = name;
    log->times[log->n] = 1;
    return log->n++;
}

struct mta_ctx {
    mta_config cfg;
    mta_param_sizes sizes;  // mta_param_sizes_of(cfg): modules read it here, not by calling libmtac
    char err[256];
    int have_forward;
    int training, dropout_on;  // dropout_on: the last forward applied dropout
    uint64_t seed;
    int atomics;    // !mta_set_deterministic: sums some kernels add to in no fixed order
    size_t bytes;   // workspace currently held
    mta_stats stats;
    const mta_backend_impl *impl;  // the config's backend (mta.c's table)
    void *state;                   // the backend's own (NULL until its first call)
    void *stream;                  // the CUDA backend's stream (mta_set_stream)
    const int32_t *doc;            // mta_set_documents: the ids the next forwards read (backend memory)
    int *doc_start;                // host backends: each position's document start (B*T), from the
                                   // ids of the last forward that had them (mta_doc_starts)
    int docs_on;                   // the last forward had documents (doc_start holds its starts)
    mta_launch_log *launches;      // mta_ctx_record_launches: where the calls note their kernels; NULL: off
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
