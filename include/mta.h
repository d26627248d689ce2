// mta.h: the Multi-Token Attention operator (semantics: docs/spec.md section 2). Forward and
// backward of the MTA attention core on float32
// tensors laid out (B,H,T,d), row-major, one (batch, head) slab after another.
//
// Usage:
//   mta_config cfg = mta_config_default(B, H, T, d);   // plain causal attention
//   cfg.pre_cq = 6; cfg.pre_ck = 11;                    // switch steps on
//   mta_ctx *ctx; char err[256];
//   if (mta_create(&ctx, &cfg, err, sizeof err) != MTA_OK) { fprintf(stderr, "%s\n", err); ... }
//   mta_forward(ctx, q, k, v, &params, out);
//   mta_backward(ctx, q, k, v, &params, dout, dq, dk, dv, &grads);  // after a forward
//   mta_destroy(ctx);
//
// Non-finite values: the operator does not check its tensors. A NaN or infinite input, or scores
// that overflow float32, make the rows they reach NaN (forward and backward), with no undefined
// behaviour; `mtac attn` refuses non-finite input files and reports non-finite results.
//
// Threading: a context holds the activations its forward saved for its backward, so one context
// serves one call at a time; distinct contexts are independent and may be used concurrently.
// There is no global state beyond the table of backend modules opened at run time (opened once,
// under a mutex; libmtac_cuda.so). Inside a call, OpenMP and BLAS use cfg.threads threads, or with
// cfg.threads = 0 the calling thread's OpenMP default (omp_set_num_threads / OMP_NUM_THREADS).
#ifndef MTA_H
#define MTA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// libmtac is built with hidden symbols: what this header declares is its whole exported interface.
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

typedef enum {
    MTA_OK = 0,
    MTA_ERR_INVALID = 1,   // a size, flag or kernel shape is not allowed
    MTA_ERR_NULL = 2,      // a required tensor pointer is NULL
    MTA_ERR_OVERFLOW = 3,  // a size product overflows
    MTA_ERR_NOMEM = 4,     // allocation failed
    MTA_ERR_STATE = 5,     // backward called without a matching forward
    MTA_ERR_DEVICE = 6,    // a GPU call failed (the message says which and why)
} mta_status;

// Which implementation runs behind the API; all compute the same function (within float32
// rounding). The CPU backends are tested against each other and the PyTorch reference, and the
// CUDA backend's source on the CPU (cuda-emu); the CUDA backend has not yet run on a GPU
// (docs/cuda.md).
//   MTA_BACKEND_FUSED (the default): walks the query rows in strips and never holds a (T,T) map;
//     its workspace is O(H*T*strip) (docs/fused.md).
//   MTA_BACKEND_REFERENCE: materialises every (T,T) map of the chain, O(B*H*T^2) memory; the only
//     one that can return attention maps (mta_attention_map).
//   MTA_BACKEND_CUDA: the fused algorithm on an NVIDIA GPU (docs/cuda.md), in builds made with
//     the CUDA toolkit. Its calls take device memory (below): q, k, v, out, dout, dq, dk, dv and
//     every pointer of mta_params and mta_grads are device pointers (mta_backend_alloc,
//     cudaMalloc, or a torch tensor's data_ptr()) on the current device. Its calls are
//     asynchronous: they enqueue the work on the context's stream (mta_set_stream; default the
//     legacy default stream) and return; synchronise before reading the results on the host. A
//     failing GPU call makes the operator return MTA_ERR_DEVICE. Float32 products (no TF32).
//   MTA_BACKEND_CUDA_EMU ("cuda-emu"): the CUDA backend's own source executed on the CPU by the
//     project's CUDA emulator, for tests (builds made with -DMTAC_CUDA_EMU=ON). Its device memory
//     is host heap memory that starts as NaN; slow (every GPU thread is a fiber).
// mta_config_default picks FUSED. (The library reads no environment variable; the mtac command
// and the tests take MTAC_BACKEND=reference to change their default.)
typedef enum {
    MTA_BACKEND_REFERENCE = 0,
    MTA_BACKEND_FUSED = 1,
    MTA_BACKEND_CUDA = 2,
    MTA_BACKEND_CUDA_EMU = 3,
    MTA_N_BACKENDS
} mta_backend;

// The backend's name ("reference", "fused", "cuda", "cuda-emu"; "unknown" for a value that is not
// a backend), and the backend of a name (0, or -1 when no backend has it).
const char *mta_backend_name(mta_backend b);
int mta_backend_from_name(const char *name, mta_backend *b);
// 1 when this build and machine can run backend b (a backend for a device needs one), else 0.
int mta_backend_available(mta_backend b);

// The memory of a backend's calls. mta_backend_device_memory(b) is 1 when b's calls take tensors in
// its device's memory (cuda, cuda-emu), 0 when they take host memory. These calls allocate, fill,
// read and free that memory; for a host backend they are malloc, memcpy and free, so a program
// written with them runs on every backend. Each returns MTA_ERR_INVALID for a backend that is not
// available, MTA_ERR_NOMEM when an allocation is refused, MTA_ERR_DEVICE when the device fails.
// alloc's memory holds no defined values; download waits for the copy (synchronize first when a
// context's stream is not the default one); synchronize waits for all the device's work.
int mta_backend_device_memory(mta_backend b);
mta_status mta_backend_alloc(mta_backend b, size_t bytes, void **ptr);
mta_status mta_backend_free(mta_backend b, void *ptr);
mta_status mta_backend_upload(mta_backend b, void *dst, const void *src, size_t bytes);
mta_status mta_backend_download(mta_backend b, void *dst, const void *src, size_t bytes);
mta_status mta_backend_synchronize(mta_backend b);

// The arithmetic of a backend's products (mta_config.precision):
//   MTA_FP32 (the default): float32 throughout, on every backend;
//   MTA_BF16: q, k, v and the attention weights rounded to bfloat16 for tensor-core products that
//     accumulate in float32 (float32 parameters, gradients and map arithmetic); the CUDA backend's
//     fused tensor-core kernels (docs/cuda.md), which cover some step combinations and fall back
//     to the float32 kernels for the others. A backend that has no bf16 path refuses it.
typedef enum { MTA_FP32 = 0, MTA_BF16 = 1 } mta_precision;

// The storage type of the tensors q, k, v, out, dout, dq, dk, dv (mta_config.dtype), apart from the
// arithmetic (precision); the parameters and their gradients are float32 whatever it says:
//   MTA_DTYPE_F32 (the default): float32;
//   MTA_DTYPE_BF16: bfloat16 (2 bytes, a float32's upper half), passed through the same float
//     pointers (cast a uint16_t / __nv_bfloat16 / torch.bfloat16 buffer's address to float *).
//     Only the cuda and cuda-emu backends take it (the host backends refuse it). out is rounded
//     once to bfloat16 from its float32 value (after the norm and gate); dq, dk, dv are added to
//     as on every backend: read, added to in float32, rounded once. On the tensor-core path
//     (precision MTA_BF16) q, k, v and dout are read as they are: in place where T is a multiple
//     of 64 and d of 16 and the call's tensor is device memory starting at a 16-byte boundary;
//     else copied, on that call, into padded buffers (the same bits; a view into a tensor is
//     fine), which the first call that needs them allocates (mta_ctx_workspace_bytes). On the
//     float32 path the backend widens them into a float32 workspace of its own (a copy inside
//     the backend, docs/cuda.md).
typedef enum { MTA_DTYPE_F32 = 0, MTA_DTYPE_BF16 = 1 } mta_dtype;

// Each step of spec section 2 is switched on by its size/flag; all off = plain causal attention.
typedef struct {
    int B, H, T, d;
    int H_kv;             // key/value heads (grouped-query attention): k, v, dk, dv are (B,H_kv,T,d) and
                          // query head h reads kv head h / (H/H_kv); H_kv must divide H. 0 means H
                          // (multi-head attention); mta_config_default sets H. Every MTA step mixes the
                          // H query heads' maps; dk, dv of a kv head sum its H/H_kv query heads' terms
    int pre_cq, pre_ck;   // step 2: pre-softmax key-query conv, kernel (H, pre_cq, pre_ck); 0,0 = off
    int pre_head_mix;     // step 3: pre-softmax head mixing, kernel (H, H); 0 = off
    int post_cq, post_ck; // step 5: post-softmax key-query conv, kernel (H, post_cq, post_ck); 0,0 = off
    int post_ch;          // step 6: post-softmax head conv group size, kernel (H/c_h, c_h, c_h); 0 = off
    int group_norm;       // step 8: per-head RMS group norm with weight (d); 0 = off
    int depth_scale;      // step 8: multiply the normed output by (1 - lambda(layer_id)); needs group_norm
    int layer_id;         // 0-based layer index for depth scaling
    int gate;             // step 9: sigmoid gate with weight (d) and bias (1); 0 = off
    float dropout;        // step 7: dropout probability on the attention weights in training, [0, 1)
    mta_backend backend;
    int strip_rows;       // fused backend: query rows per strip; 0 = chosen from a memory budget
    int threads;          // OpenMP threads of each mta_forward/mta_backward (BLAS included); 0 = the
                          // calling thread's OpenMP default (omp_get_max_threads())
    int keep_o;           // fused backend, with group_norm or gate: 1 = the forward keeps the attention
                          // output before them, O (B,H,T,d), for the backward, which otherwise
                          // recomputes it (one (T,T)-by-(T,d) product per head); same results either
                          // way. Other backends ignore it. 0 = off
    int precision;        // mta_precision: MTA_FP32 (default) or MTA_BF16 (tensor cores; above)
    int dtype;            // mta_dtype: the tensors' storage, MTA_DTYPE_F32 (default) or MTA_DTYPE_BF16 (above)
#ifdef MTAC_TEST_DUMMY_STEP
    int dummy_step;       // only in the test build of tests/test_backend_support.c: a step no backend computes
#endif
} mta_config;

// The parameters of the MTA steps, by index: mta_params, mta_grads and mta_param_sizes hold them
// both by name (p.w_pre) and as an array in this order (p.w[MTA_W_PRE]), so code can loop over
// them; mta_param_info(i) describes each (name, spec step, shape).
enum {
    MTA_W_PRE = 0,      // (H, pre_cq, pre_ck)
    MTA_W_PRE_HEAD,     // (H, H)
    MTA_W_POST,         // (H, post_cq, post_ck)
    MTA_W_POST_HEAD,    // (H/c_h, c_h, c_h)
    MTA_GN_WEIGHT,      // (d)
    MTA_GATE_W,         // (d)
    MTA_GATE_B,         // (1)
    MTA_N_PARAMS
};

// Parameters of the enabled steps; a pointer must be non-NULL exactly when its step is on.
// (A positional initialiser {w_pre, ..., gate_b} fills the named members; -Wmissing-braces asks
// for {{...}}, which also compiles.)
typedef union {
    struct {
        const float *w_pre;        // (H, pre_cq, pre_ck)
        const float *w_pre_head;   // (H, H): S2[h] = sum_h' w_pre_head[h,h'] S1[h']
        const float *w_post;       // (H, post_cq, post_ck)
        const float *w_post_head;  // (H/c_h, c_h, c_h): P2[g*c_h+o] = sum_n w[g,n,o] P1[g*c_h+n]
        const float *gn_weight;    // (d)
        const float *gate_w;       // (d)
        const float *gate_b;       // (1)
    };
    const float *w[MTA_N_PARAMS];
} mta_params;

// Gradients of the parameters, same shapes. NULL skips that gradient.
typedef union {
    struct {
        float *w_pre, *w_pre_head, *w_post, *w_post_head, *gn_weight, *gate_w, *gate_b;
    };
    float *w[MTA_N_PARAMS];
} mta_grads;

// One parameter of the table: its name (the tensor name of problem files, `mtac attn` and the
// Python package), the step of docs/spec.md section 2 that uses it, a one-line description, and
// its shape in words ("(H, c_q, c_k)"; mta_param_shape gives the numbers).
typedef struct {
    const char *name;
    int spec_step;
    const char *about;
    const char *shape;
} mta_param_desc;

// The description of parameter i (MTA_W_PRE .. MTA_GATE_B); NULL outside [0, MTA_N_PARAMS).
const mta_param_desc *mta_param_info(int i);
// The index of the parameter named name, or -1.
int mta_param_index(const char *name);

// The fields of mta_config in order, for bindings that mirror it (the Python package builds its
// ctypes Config from them): name, byte offset, and kind (MTA_FIELD_INT: an int or an enum stored as
// one; MTA_FIELD_FLOAT: a float). mta_config_field(i) for i = 0, 1, ... until it returns NULL.
enum { MTA_FIELD_INT = 0, MTA_FIELD_FLOAT = 1 };
typedef struct {
    const char *name;
    size_t offset;
    int kind;
} mta_config_field_desc;
const mta_config_field_desc *mta_config_field(int i);

typedef struct mta_ctx mta_ctx;

// A config with every MTA step off (plain causal attention).
mta_config mta_config_default(int B, int H, int T, int d);

// Checks a config; on error writes a message to msg (if non-NULL) and returns the status. A config
// that uses a step (or precision, grouped-query attention) its backend does not compute is refused
// (MTA_ERR_INVALID, "the fused backend does not compute ..."), never run in part.
mta_status mta_config_check(const mta_config *cfg, char *msg, size_t msg_len);

// Identity initialisation of the present parameters (spec section 2): conv kernels are 1 at
// [c_q-1, (c_k-1)/2], head mix and head conv are identities, gn_weight = 1, gate_b = 0.
// gate_w is left untouched (it is drawn from a truncated normal by the model).
void mta_params_init_identity(const mta_config *cfg, float *w_pre, float *w_pre_head, float *w_post,
                              float *w_post_head, float *gn_weight, float *gate_b);
// The same for parameter i alone (w: its mta_param_shape(cfg, i) floats); nothing when its step
// is off, w is NULL, or i is MTA_GATE_W.
void mta_param_init_identity(const mta_config *cfg, int i, float *w);

// The shape of parameter i under cfg into shape[0..ndim): returns ndim (1 to 3), or 0 when cfg
// does not enable its step (or i is not a parameter).
int mta_param_shape(const mta_config *cfg, int i, int64_t shape[3]);

// The settings of cfg that the parameters' tensors determine, from the tensors a caller was given
// (a problem file's, a Python call's): parameter i is given when shape[i] is not NULL, its
// dimensions shape[i][0..ndim[i]). Each given tensor switches its step on and its shape sets the
// step's sizes (w_pre (H, c_q, c_k) sets pre_cq, pre_ck; w_post_head (H/c_h, c_h, c_h) sets post_ch;
// gn_weight sets group_norm; ...: one table in mta.c, the one mta_param_shape reads); cfg's B, H,
// T, d must be set and its step settings 0. Checks the number of dimensions (a shape (1) may be
// given as a scalar, ndim 0), that the settings read make a config mta_config_check accepts (its
// message then names the tensor), and that a step's parameters come together (gate_w with gate_b).
// It does not compare the other dimensions: the caller checks the whole config (mta_config_check)
// and then each given tensor's shape against mta_param_shape. MTA_OK, or MTA_ERR_INVALID (or
// mta_config_check's status) with a message.
mta_status mta_config_from_shapes(mta_config *cfg, const int *ndim, const int64_t *const *shape, char *msg,
                                  size_t msg_len);

// Element counts of each parameter tensor for a config (0 when the step is off).
typedef union {
    struct {
        size_t w_pre, w_pre_head, w_post, w_post_head, gn_weight, gate_w, gate_b;
    };
    size_t w[MTA_N_PARAMS];
} mta_param_sizes;
mta_param_sizes mta_param_sizes_of(const mta_config *cfg);

// sizeof of the public structures as this library was built, for bindings that mirror them
// (the Python package checks its ctypes copies at load): which is one of MTA_ABI_*; 0 otherwise.
enum { MTA_ABI_CONFIG = 0, MTA_ABI_PARAMS, MTA_ABI_GRADS, MTA_ABI_PARAM_SIZES, MTA_ABI_STATS, MTA_ABI_N };
size_t mta_abi_sizeof(int which);

// Creates a context (validates cfg; workspace is allocated on first use).
mta_status mta_create(mta_ctx **ctx, const mta_config *cfg, char *msg, size_t msg_len);
void mta_destroy(mta_ctx *ctx);

// Forward: q, out are (B,H,T,d); k, v are (B,H_kv,T,d) (H_kv = H without grouped-query
// attention). Saves what the backward needs inside ctx.
mta_status mta_forward(mta_ctx *ctx, const float *q, const float *k, const float *v,
                       const mta_params *p, float *out);

// Backward of the last forward on this context (same q, k, v, p). Gradients are ADDED to dq
// (B,H,T,d), dk, dv (B,H_kv,T,d) and to every non-NULL buffer of g, so zero them first (the llm.c convention,
// which lets a model accumulate over micro-batches).
mta_status mta_backward(mta_ctx *ctx, const float *q, const float *k, const float *v,
                        const mta_params *p, const float *dout, float *dq, float *dk, float *dv,
                        const mta_grads *g);

// The attention weights of the last forward for batch b and head h: the (T,T) row-stochastic map
// (after the post-softmax convolution and head conv when on, before dropout) that multiplies V.
// For inspection and plots (mtac attnmap). MTA_ERR_STATE without a forward; MTA_ERR_INVALID on
// a context of the fused backend, which keeps no maps.
mta_status mta_attention_map(mta_ctx *ctx, int b, int h, float *out);

// Dropout (cfg.dropout > 0) applies only to forwards made while training is on (default off).
// The mask is a pure function of (seed, b, h, i, j), so the backward regenerates it and a given
// seed always drops the same entries; pass a new seed for each step.
void mta_set_dropout(mta_ctx *ctx, int training, uint64_t seed);

// Determinism (default on): every backend gives the same bits for the same inputs on the same
// device, run after run. Off, the cuda backend's bf16 every-step backward (a key-query convolution
// with another step, as the 830M layer 2) computes dq and dk, dv in one kernel instead of two,
// adding dk, dv by atomics in no fixed order: their last bits vary run to run, within the same
// tolerance of the reference. Everything else stays deterministic. Bit-exact resumption needs it on.
void mta_set_deterministic(mta_ctx *ctx, int on);

// Packed documents: several documents in one sequence, each attended and convolved as if it ran
// alone. doc is (B,T) int32, in the backend's memory as q is, one document id per position; a
// document is a run of equal consecutive ids (an id that comes back after another starts a new
// document). Query i then sees key j only when j <= i and no document starts in (j, i], and each
// convolution (steps 2, 5) reads its document's entries alone, with the zero padding a sequence
// starts with before the document's first row and column: each document's rows of out, and its
// positions' dq, dk, dv, equal those of the document run alone as a sequence of its own
// (docs/spec.md section 2.3), on every backend. Dropout draws its mask by the packed indices.
// The ids are read by each later forward on ctx (they must hold their values until it has run:
// on the CUDA backend, until its stream reaches it); a backward uses those of its forward. NULL
// (the default) makes each sequence one document. MTA_ERR_NULL for a NULL ctx; MTA_ERR_INVALID
// (mta_ctx_error says why) when ctx's backend does not compute packed documents (each of today's does).
mta_status mta_set_documents(mta_ctx *ctx, const int32_t *doc);

// The CUDA stream (a cudaStream_t) that the CUDA backend's calls on ctx enqueue their work on;
// NULL (the default) is the legacy default stream. Other backends ignore it. The context's
// workspace serves every call on it: the first call on a new stream waits for the work still
// queued on the previous one.
void mta_set_stream(mta_ctx *ctx, void *stream);

// ---- incremental decoding ----
// A cache for decoding B sequences one position at a time with the MTA of cfg (cfg.T = the
// capacity: the longest sequence it holds). Row t it returns equals row t of mta_forward over the
// whole sequence; a step costs O(t*(d + c_q*c_k + c_q'*c_k' + H)) per head instead of a forward
// over t rows. The cache runs on the CPU with host memory whatever cfg.backend says: its q, k, v,
// out and parameters are host pointers (the rows of a forward on a device backend must be
// downloaded first).
typedef struct mta_cache mta_cache;
mta_status mta_cache_create(mta_cache **cache, const mta_config *cfg, char *msg, size_t msg_len);
void mta_cache_destroy(mta_cache *cache);
void mta_cache_reset(mta_cache *cache);             // every sequence empty
int mta_cache_len(const mta_cache *cache, int b);   // positions sequence b holds
const char *mta_cache_error(const mta_cache *cache);

// Appends position t = mta_cache_len(b) to sequence b: q is its (H,d) rows, k and v its (H_kv,d)
// rows (the cache holds H_kv heads of K and V); out (H,d)
// receives the operator's output rows (dropout never applies).
mta_status mta_cache_step(mta_cache *cache, int b, const float *q, const float *k, const float *v,
                          const mta_params *p, float *out);

// Fills the cache from a prompt's q (B,H,T,d), k, v (B,H_kv,T,d) (those of a forward over the prompts, on any
// backend; its T may differ from the capacity): sequence b takes positions 0..lens[b]-1, after
// which mta_cache_step continues at lens[b]. Positions after lens[b] are ignored (causality), so
// prompts of different lengths can share one padded forward. Besides K and V, the cache keeps the
// last c_q-1 rows of the masked scores and the last c_q'-1 rows of the probabilities, which it
// recomputes here from q and k (at most c_q+c_q'-2 rows per sequence, O(T*(d + c_q*c_k + H)) work
// per row and head): no (T,T) map is needed, and the rows are those a cache stepped from empty
// would hold.
mta_status mta_cache_prefill(mta_cache *cache, int T, const float *q, const float *k, const float *v,
                             const mta_params *p, const int *lens);

// Packed documents in decoding (mta_set_documents): the next position appended to sequence b
// starts a new document, which neither attends to nor convolves over the positions before it.
// MTA_ERR_INVALID for a b outside 0..B-1.
mta_status mta_cache_begin_document(mta_cache *cache, int b);
// mta_cache_prefill with documents: doc (B,T) holds the prompts' document ids as mta_set_documents
// takes them, in host memory (NULL: one document per sequence). The positions after the prompt
// continue the document of its last position.
mta_status mta_cache_prefill_documents(mta_cache *cache, int T, const float *q, const float *k, const float *v,
                                       const mta_params *p, const int *lens, const int32_t *doc);

// The last error message of a context ("" if none).
const char *mta_ctx_error(const mta_ctx *ctx);
const char *mta_status_str(mta_status s);

// Frees the context's workspace (the maps of the last forward); the next call allocates it again.
// A backward is then an error until the next forward.
void mta_ctx_release(mta_ctx *ctx);

// Bytes of workspace the context holds now (for memory reports). Buffers allocated on first use
// add to it then: with bfloat16 storage (mta_config.dtype) the float32 ones, and on the CUDA
// tensor-core path the padded copies of the first call whose q, k, v or dout it cannot read in place.
size_t mta_ctx_workspace_bytes(const mta_ctx *ctx);

// Wall time and floating-point operations of the matrix products (sgemm) of the calls made so far
// on a context, for benchmarks; reset with mta_ctx_reset_stats.
typedef struct {
    double matmul_s, matmul_flop;
} mta_stats;
mta_stats mta_ctx_stats(const mta_ctx *ctx);
void mta_ctx_reset_stats(mta_ctx *ctx);

// ---- which kernels run (`mtac attn --plan`, docs/cuda.md "Which kernels run: --plan") ----
// With on = 1, the calls that follow on ctx note each kernel (and each cuBLAS product) their
// backend launches: each name once, in the order of its first launch, with its launch count.
// Each call with on = 1 clears the record; on = 0 stops and frees it. Backends that launch no
// kernels (reference, fused) note nothing. Off, it costs a launch nothing measurable.
// MTA_ERR_NULL, MTA_ERR_NOMEM.
mta_status mta_ctx_record_launches(mta_ctx *ctx, int on);
// The i-th kernel noted (NULL past the last, or when not recording) and its launches into *times
// (when times is not NULL).
const char *mta_ctx_launch(const mta_ctx *ctx, int i, int *times);
// The kernels noted beyond the record's room (their names are lost; 0 in practice).
int mta_ctx_launches_lost(const mta_ctx *ctx);
// The warp-level operations a kernel executed, summed over its launches (docs/cuda.md, "Counts of
// the emulator"): each mma.sync m16n8k16, ldmatrix and shuffle once per warp
// instruction (not per lane); each cp.async copy once, with its bytes.
typedef struct {
    uint64_t mma;             // mma.sync.m16n8k16 (bf16 in, float32 accumulate)
    uint64_t ldmatrix;        // ldmatrix .x1, .x2 or .x4
    uint64_t ldmatrix_bytes;  // what they read from shared memory: 128 bytes per 8x8 matrix
    uint64_t cp_async;        // cp.async copies (one per thread and call)
    uint64_t cp_async_bytes;  // their bytes (4, 8 or 16 each; zero-fills included)
    uint64_t shfl;            // __shfl_sync, __shfl_xor_sync
    // Thread block clusters (attn/cluster_ptx.cuh): stores and loads to distributed shared memory
    // (st/ld.shared::cluster, one per thread and call) with their bytes, and barrier.cluster
    // (once per block and barrier).
    uint64_t dsmem_stores, dsmem_store_bytes, dsmem_loads, dsmem_load_bytes, cluster_barriers;
} mta_kernel_ops;
// The i-th kernel noted (NULL past the last, as mta_ctx_launch) and its operations into *ops
// (when ops is not NULL): counted by the cuda-emu backend, whose emulator executes the kernels'
// source; zeros where nothing counts them (a GPU's launches, cuBLAS products).
const char *mta_ctx_launch_ops(const mta_ctx *ctx, int i, mta_kernel_ops *ops);
// Which path cfg's backend runs cfg on: 1 its tensor-core path; 0 its float32 path, why (n bytes,
// when not NULL) saying what excludes the tensor-core one (precision MTA_FP32, or the uses of cfg
// that path's allow-list refuses); -1 the backend has no tensor-core path (why says so).
int mta_tensor_core_path(const mta_config *cfg, char *why, size_t n);

// lambda_l = 0.8 - 0.6*exp(-0.3*l), the DIFF Transformer depth rule; scale is (1 - lambda_l).
float mta_depth_scale(int layer_id);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif
