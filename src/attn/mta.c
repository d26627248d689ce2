// mta.c: the public operator API: configuration checks, contexts, dispatch to a backend.
#define _GNU_SOURCE  // dladdr
#include "attn/mta_internal.h"

#include <dlfcn.h>
#include <pthread.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *mta_status_str(mta_status s) {
    switch (s) {
    case MTA_OK: return "ok";
    case MTA_ERR_INVALID: return "invalid argument";
    case MTA_ERR_NULL: return "required tensor is NULL";
    case MTA_ERR_OVERFLOW: return "size overflow";
    case MTA_ERR_NOMEM: return "out of memory";
    case MTA_ERR_STATE: return "backward without a forward";
    case MTA_ERR_DEVICE: return "GPU error";
    }
    return "unknown status";
}

// The backends, registered here and nowhere else: each id's name and implementation, built into
// libmtac or a module of its own that is opened when first asked for (the CUDA backend: libmtac
// itself never needs the CUDA runtime), or neither in this build, for the reason given. Whether
// a backend's calls take device memory is a fact of the backend, known (mta_backend_device_memory)
// without its implementation: a build or machine that cannot run it still tells host from device.
#if defined(MTAC_HAVE_CUDA) && defined(MTAC_TEST_DUMMY_STEP)
#define CUDA_MODULE "libmtac_cuda_dummy_step.so"  // the module of the dummy-step build (CMakeLists.txt)
#elif defined(MTAC_HAVE_CUDA)
#define CUDA_MODULE "libmtac_cuda.so"
#else
#define CUDA_MODULE NULL
#endif
#ifdef MTAC_HAVE_CUDA_EMU
#define CUDA_EMU_IMPL (&mta_cuda_emu_backend)
#else
#define CUDA_EMU_IMPL NULL
#endif
static const struct {
    mta_backend id;
    const char *name;
    const mta_backend_impl *impl;  // built in
    const char *module, *symbol;   // or opened at run time: the library, its mta_backend_impl
    const char *missing;           // why a build has neither
    int device_memory;             // its calls take tensors in a device's memory (as impl->device_memory)
} backends[MTA_N_BACKENDS] = {
    {MTA_BACKEND_REFERENCE, "reference", &mta_reference_backend, NULL, NULL, NULL, 0},
    {MTA_BACKEND_FUSED, "fused", &mta_fused_backend, NULL, NULL, NULL, 0},
    {MTA_BACKEND_CUDA, "cuda", NULL, CUDA_MODULE, "mta_cuda_backend",
     "built without the CUDA toolkit, or with -DMTAC_CUDA=OFF", 1},
    {MTA_BACKEND_CUDA_EMU, "cuda-emu", CUDA_EMU_IMPL, NULL, NULL, "the CUDA emulator is built with -DMTAC_CUDA_EMU=ON", 1},
};

static int is_backend(mta_backend b) { return (int)b >= 0 && (int)b < MTA_N_BACKENDS; }

// (mta_internal.h) The module is checked before any of its backend is read: a module of another
// mtac would be read through another layout of mta_ctx and mta_backend_impl.
const mta_backend_impl *mta_module_open(const char *path, const char *fallback, const char *symbol, char *why,
                                        size_t n) {
    const char *name = path;
    void *h = path ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    char path_error[256] = "";  // a module that is there but fails to load: its error, not the fallback's
    if (!h && path && access(path, F_OK) == 0) snprintf(path_error, sizeof path_error, "%s", dlerror());
    if (!h && fallback) h = dlopen(name = fallback, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = path_error[0] ? path_error : dlerror();
        snprintf(why, n, "its module %s could not be opened: %s", fallback ? fallback : path ? path : "?", e ? e : "?");
        return NULL;
    }
    const char *slash = strrchr(name, '/');
    const char *file = slash ? slash + 1 : name;
    const mta_module_abi want = MTA_MODULE_ABI, *abi = dlsym(h, "mtac_backend_abi");
    const mta_backend_impl *impl = NULL;
    if (!abi)
        snprintf(why, n, "%s has no mtac_backend_abi: it is from an mtac older than that symbol, or not an mtac "
                 "backend: rebuild it", file);
    else if (abi->version != want.version)
        snprintf(why, n, "%s is from another mtac (ABI %d, this libmtac needs %d): rebuild it", file, abi->version,
                 want.version);
    else if (abi->ctx_bytes != want.ctx_bytes || abi->config_bytes != want.config_bytes ||
             abi->impl_bytes != want.impl_bytes || abi->uses != want.uses)
        snprintf(why, n, "%s is from another mtac (ABI %d, but mta_ctx, mta_config, mta_backend_impl and the uses "
                 "are %zu, %zu, %zu bytes and %zu there, %zu, %zu, %zu and %zu here: a change made without a bump of "
                 "MTA_BACKEND_ABI): rebuild it", file, abi->version, abi->ctx_bytes, abi->config_bytes,
                 abi->impl_bytes, abi->uses, want.ctx_bytes, want.config_bytes, want.impl_bytes, want.uses);
    else if (!(impl = dlsym(h, symbol)))
        snprintf(why, n, "%s has no %s: not this backend's module", file, symbol);
    if (!impl) dlclose(h);
    return impl;
}

// A module backend, opened once: from the directory of libmtac (or of the program it is linked
// into), else through the dynamic loader's search path. NULL when it cannot be, *why saying so.
static const mta_backend_impl *open_module(int i, const char **why) {
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    static int tried[MTA_N_BACKENDS];
    static const mta_backend_impl *impl[MTA_N_BACKENDS];
    static char error[MTA_N_BACKENDS][512];
    pthread_mutex_lock(&lock);
    if (!tried[i]) {
        tried[i] = 1;
        Dl_info self;
        const char *slash;
        char path[4096] = "";
        if (dladdr((void *)mta_create, &self) && self.dli_fname && (slash = strrchr(self.dli_fname, '/')))
            snprintf(path, sizeof path, "%.*s/%s", (int)(slash - self.dli_fname), self.dli_fname, backends[i].module);
        impl[i] = mta_module_open(path[0] ? path : NULL, backends[i].module, backends[i].symbol, error[i],
                                  sizeof error[i]);
    }
    pthread_mutex_unlock(&lock);
    *why = error[i];
    return impl[i];
}

// The implementation of b, NULL when this build or machine has none (*why, when not NULL, says why).
static const mta_backend_impl *backend_impl(mta_backend b, const char **why) {
    const char *w = "not a backend";
    const mta_backend_impl *impl = NULL;
    if (is_backend(b)) {
        impl = backends[b].impl;
        w = backends[b].missing;
        if (!impl && backends[b].module) impl = open_module((int)b, &w);
    }
    if (why) *why = w;
    return impl;
}

static const mta_backend_impl *backend_of(mta_backend b) { return backend_impl(b, NULL); }

const char *mta_backend_name(mta_backend b) { return is_backend(b) ? backends[b].name : "unknown"; }

// The implementation of b when this build and machine can run it, else NULL.
static const mta_backend_impl *usable(mta_backend b) {
    const mta_backend_impl *impl = backend_of(b);
    return impl && (!impl->available || impl->available()) ? impl : NULL;
}

int mta_backend_available(mta_backend b) { return usable(b) != NULL; }

int mta_backend_from_name(const char *name, mta_backend *b) {
    for (int i = 0; name && i < MTA_N_BACKENDS; i++)
        if (!strcmp(name, backends[i].name)) {
            *b = backends[i].id;
            return 0;
        }
    return -1;
}

// ---- the memory of a backend's calls: its own hooks, or host memory ----

int mta_backend_device_memory(mta_backend b) { return is_backend(b) && backends[b].device_memory; }

mta_status mta_backend_alloc(mta_backend b, size_t bytes, void **ptr) {
    const mta_backend_impl *impl = usable(b);
    if (!ptr) return MTA_ERR_NULL;
    *ptr = NULL;
    if (!impl) return MTA_ERR_INVALID;
    if (impl->device_memory) return impl->alloc(ptr, bytes);
    *ptr = malloc(bytes ? bytes : 1);
    return *ptr ? MTA_OK : MTA_ERR_NOMEM;
}

mta_status mta_backend_free(mta_backend b, void *ptr) {
    const mta_backend_impl *impl = usable(b);
    if (!impl) return MTA_ERR_INVALID;
    if (impl->device_memory) return ptr ? impl->free(ptr) : MTA_OK;
    free(ptr);
    return MTA_OK;
}

// A copy between the host and b's memory through b's hook (upload or download), or memcpy.
static mta_status copy(mta_backend b, void *dst, const void *src, size_t bytes, int upload) {
    const mta_backend_impl *impl = usable(b);
    if (!impl) return MTA_ERR_INVALID;
    if (bytes && (!dst || !src)) return MTA_ERR_NULL;
    if (impl->device_memory) return (upload ? impl->upload : impl->download)(dst, src, bytes);
    if (bytes) memcpy(dst, src, bytes);
    return MTA_OK;
}

mta_status mta_backend_upload(mta_backend b, void *dst, const void *src, size_t bytes) {
    return copy(b, dst, src, bytes, 1);
}

mta_status mta_backend_download(mta_backend b, void *dst, const void *src, size_t bytes) {
    return copy(b, dst, src, bytes, 0);
}

mta_status mta_backend_synchronize(mta_backend b) {
    const mta_backend_impl *impl = usable(b);
    if (!impl) return MTA_ERR_INVALID;
    return impl->device_memory ? impl->synchronize() : MTA_OK;
}

mta_config mta_config_default(int B, int H, int T, int d) {
    mta_config c;
    memset(&c, 0, sizeof c);
    c.B = B, c.H = H, c.T = T, c.d = d;
    c.H_kv = H;
    c.backend = MTA_BACKEND_FUSED;
    return c;
}

float mta_depth_scale(int layer_id) { return mta_depth_scale_of(layer_id); }

static mta_status say(char *msg, size_t n, mta_status s, const char *fmt, ...) {
    if (msg && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, n, fmt, ap);
        va_end(ap);
    }
    return s;
}

// a*b*... on size_t with overflow detection; returns 0 on overflow.
static int mul_ok(size_t *acc, size_t x) {
    if (x != 0 && *acc > SIZE_MAX / x) return 0;
    *acc *= x;
    return 1;
}

static mta_status check_conv(const char *name, int cq, int ck, char *msg, size_t n) {
    if (cq == 0 && ck == 0) return MTA_OK;
    if (cq < 1 || ck < 1)
        return say(msg, n, MTA_ERR_INVALID, "%s kernel size %dx%d: both must be >= 1 (or both 0 = off)", name, cq, ck);
    if (ck % 2 == 0)
        return say(msg, n, MTA_ERR_INVALID, "%s kernel key size c_k=%d must be odd (the window is centred on the key)", name, ck);
    if (cq > 65536 || ck > 65536)
        return say(msg, n, MTA_ERR_INVALID, "%s kernel size %dx%d is too large", name, cq, ck);
    return MTA_OK;
}

static int is_flag(int x) { return x == 0 || x == 1; }

// A use that backend b does not compute (its `computes`, mta_internal.h), in words.
static mta_status refusal(char *msg, size_t n, mta_backend b, mta_use u) {
    const char *hint = mta_use_table[u].hint;
    return say(msg, n, MTA_ERR_INVALID, "the %s backend does not compute %s%s%s", backends[b].name,
               mta_use_table[u].name, hint ? ": " : "", hint ? hint : "");
}

mta_status mta_config_check(const mta_config *c, char *msg, size_t n) {
    if (!c) return say(msg, n, MTA_ERR_NULL, "config is NULL");
    if (c->B < 1 || c->H < 1 || c->T < 1 || c->d < 1)
        return say(msg, n, MTA_ERR_INVALID, "sizes must be >= 1: B=%d H=%d T=%d d=%d", c->B, c->H, c->T, c->d);
    if (c->H_kv < 0 || c->H_kv > c->H || (c->H_kv > 0 && c->H % c->H_kv != 0))
        return say(msg, n, MTA_ERR_INVALID,
                   "key/value heads H_kv=%d must divide the query heads H=%d (grouped-query attention; 0 = H)", c->H_kv, c->H);
    mta_status s = check_conv("pre-softmax conv", c->pre_cq, c->pre_ck, msg, n);
    if (s) return s;
    s = check_conv("post-softmax conv", c->post_cq, c->post_ck, msg, n);
    if (s) return s;
    if (!is_flag(c->pre_head_mix) || !is_flag(c->group_norm) || !is_flag(c->depth_scale) || !is_flag(c->gate))
        return say(msg, n, MTA_ERR_INVALID, "pre_head_mix, group_norm, depth_scale and gate are flags (0 or 1)");
    if (c->post_ch < 0 || (c->post_ch > 0 && c->H % c->post_ch != 0))
        return say(msg, n, MTA_ERR_INVALID, "head conv group size c_h=%d must divide H=%d", c->post_ch, c->H);
    if (c->depth_scale && !c->group_norm)
        return say(msg, n, MTA_ERR_INVALID, "depth scaling applies to the group norm output: enable group_norm");
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return say(msg, n, MTA_ERR_INVALID, "dropout=%g must be in [0, 1)", (double)c->dropout);
    if (c->layer_id < 0) return say(msg, n, MTA_ERR_INVALID, "layer_id=%d must be >= 0", c->layer_id);
    if (!is_backend(c->backend)) {
        char ids[256] = "";
        for (int i = 0; i < MTA_N_BACKENDS; i++)
            snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%d = %s", i ? ", " : "", i, backends[i].name);
        return say(msg, n, MTA_ERR_INVALID, "unknown backend %d (%s)", (int)c->backend, ids);
    }
    const char *why;
    const mta_backend_impl *impl = backend_impl(c->backend, &why);
    if (!impl) return say(msg, n, MTA_ERR_INVALID, "this libmtac has no %s backend: %s", backends[c->backend].name, why);
    if (c->threads < 0 || c->threads > 4096)
        return say(msg, n, MTA_ERR_INVALID, "threads=%d must be in [0, 4096] (0 = the OpenMP default)", c->threads);
    if (c->strip_rows < 0 || c->strip_rows > 4096)
        return say(msg, n, MTA_ERR_INVALID, "strip_rows=%d must be in [0, 4096] (0 = chosen)", c->strip_rows);
    if (c->keep_o != 0 && c->keep_o != 1) return say(msg, n, MTA_ERR_INVALID, "keep_o=%d must be 0 or 1", c->keep_o);
    if (c->precision != MTA_FP32 && c->precision != MTA_BF16)
        return say(msg, n, MTA_ERR_INVALID, "precision=%d must be MTA_FP32 (0) or MTA_BF16 (1)", c->precision);
    if (c->dtype != MTA_DTYPE_F32 && c->dtype != MTA_DTYPE_BF16)
        return say(msg, n, MTA_ERR_INVALID, "dtype=%d must be MTA_DTYPE_F32 (0) or MTA_DTYPE_BF16 (1)", c->dtype);
    const int refused = mta_first_refused(c, impl->computes);
    if (refused >= 0) return refusal(msg, n, c->backend, (mta_use)refused);
    // Every buffer the reference path may hold: (B,H,T,T) maps and (B,H,T,d) tensors, in bytes,
    // times a small count of maps, must fit in size_t and in ptrdiff_t.
    size_t maps = 1, acts = 1;
    if (!mul_ok(&maps, (size_t)c->B) || !mul_ok(&maps, (size_t)c->H) || !mul_ok(&maps, (size_t)c->T) ||
        !mul_ok(&maps, (size_t)c->T) || !mul_ok(&maps, 8 * sizeof(float)) || maps > (size_t)PTRDIFF_MAX)
        return say(msg, n, MTA_ERR_OVERFLOW, "B*H*T*T maps overflow: B=%d H=%d T=%d", c->B, c->H, c->T);
    if (!mul_ok(&acts, (size_t)c->B) || !mul_ok(&acts, (size_t)c->H) || !mul_ok(&acts, (size_t)c->T) ||
        !mul_ok(&acts, (size_t)c->d) || !mul_ok(&acts, 8 * sizeof(float)) || acts > (size_t)PTRDIFF_MAX)
        return say(msg, n, MTA_ERR_OVERFLOW, "B*H*T*d tensors overflow: B=%d H=%d T=%d d=%d", c->B, c->H, c->T, c->d);
    // The backward's per-row kernel-gradient partials: (B*H*T) rows of up to max(c_q*c_k, H).
    size_t part = 1;
    size_t pre = (size_t)c->pre_cq * c->pre_ck, post = (size_t)c->post_cq * c->post_ck;
    size_t per = pre > post ? pre : post;
    if ((size_t)c->H > per) per = (size_t)c->H;
    if (!mul_ok(&part, (size_t)c->B) || !mul_ok(&part, (size_t)c->H) || !mul_ok(&part, (size_t)c->T) ||
        !mul_ok(&part, per) || !mul_ok(&part, sizeof(float)) || part > (size_t)PTRDIFF_MAX)
        return say(msg, n, MTA_ERR_OVERFLOW, "kernel-gradient workspace overflows");
    if (msg && n) msg[0] = '\0';
    return MTA_OK;
}

// The one list of the MTA steps' parameters (mta.h's MTA_W_PRE ..., docs/spec.md section 2): each
// one's description, and its shape as data, read both ways: from a config to the shape
// (mta_param_shape) and from a given tensor's shape to the config's settings
// (mta_config_from_shapes). A dimension is a size of the config (OF: H, d), 1 (ONE), a step
// setting that the tensor's dimension sets (SET: a kernel size), or a size over a setting (DIV:
// H/c_h). The step is on when the setting `on` is > 0 (a size) or non-zero (a flag, which a given
// tensor sets to 1); the parameters of one `on` come together.
enum { DIM_ONE, DIM_OF, DIM_SET, DIM_DIV };
typedef struct {
    unsigned char kind;
    unsigned short a, b;  // offsets in mta_config of the int read (OF, SET) or of a / b (DIV)
} dim_rule;
#define CF(f) ((unsigned short)offsetof(mta_config, f))
#define ONE {DIM_ONE, 0, 0}
#define OF(f) {DIM_OF, CF(f), 0}
#define SET(f) {DIM_SET, CF(f), 0}
#define DIV(f, g) {DIM_DIV, CF(f), CF(g)}
static const struct {
    mta_param_desc desc;
    int ndim;
    dim_rule dim[3];
    unsigned short on;  // offset of the setting that switches the step on
    int flag;           // 1: `on` is a flag that a given tensor sets; 0: a size that a SET dimension sets
} param_table[MTA_N_PARAMS] = {
    [MTA_W_PRE] = {{"w_pre", 2, "pre-softmax key-query convolution kernel (H, c_q, c_k)", "(H, c_q, c_k)"},
                   3, {OF(H), SET(pre_cq), SET(pre_ck)}, CF(pre_cq), 0},
    [MTA_W_PRE_HEAD] = {{"w_pre_head", 3, "pre-softmax head mixing matrix (H, H)", "(H, H)"},
                        2, {OF(H), OF(H)}, CF(pre_head_mix), 1},
    [MTA_W_POST] = {{"w_post", 5, "post-softmax key-query convolution kernel (H, c_q', c_k')", "(H, c_q', c_k')"},
                    3, {OF(H), SET(post_cq), SET(post_ck)}, CF(post_cq), 0},
    [MTA_W_POST_HEAD] = {{"w_post_head", 6, "post-softmax head convolution, one (c_h, c_h) block per group (H/c_h, c_h, c_h)", "(H/c_h, c_h, c_h)"},
                         3, {DIV(H, post_ch), SET(post_ch), SET(post_ch)}, CF(post_ch), 0},
    [MTA_GN_WEIGHT] = {{"gn_weight", 8, "per-head RMS group norm weight (d)", "(d)"}, 1, {OF(d)}, CF(group_norm), 1},
    [MTA_GATE_W] = {{"gate_w", 9, "sigmoid gate weight (d)", "(d)"}, 1, {OF(d)}, CF(gate), 1},
    [MTA_GATE_B] = {{"gate_b", 9, "sigmoid gate bias (1)", "(1)"}, 1, {ONE}, CF(gate), 1},
};
#undef ONE
#undef OF
#undef SET
#undef DIV
#undef CF

// The named members and the array view of the parameter unions must coincide.
_Static_assert(sizeof(mta_params) == MTA_N_PARAMS * sizeof(const float *), "mta_params: one pointer per parameter");
_Static_assert(sizeof(mta_grads) == MTA_N_PARAMS * sizeof(float *), "mta_grads: one pointer per parameter");
_Static_assert(sizeof(mta_param_sizes) == MTA_N_PARAMS * sizeof(size_t), "mta_param_sizes: one size per parameter");
_Static_assert(offsetof(mta_params, gate_b) == MTA_GATE_B * sizeof(const float *), "mta_params order");
_Static_assert(offsetof(mta_grads, gn_weight) == MTA_GN_WEIGHT * sizeof(float *), "mta_grads order");
_Static_assert(offsetof(mta_param_sizes, w_post_head) == MTA_W_POST_HEAD * sizeof(size_t), "mta_param_sizes order");

const mta_param_desc *mta_param_info(int i) { return i >= 0 && i < MTA_N_PARAMS ? &param_table[i].desc : NULL; }

int mta_param_index(const char *name) {
    for (int i = 0; name && i < MTA_N_PARAMS; i++)
        if (!strcmp(name, param_table[i].desc.name)) return i;
    return -1;
}

// mta_config's fields in order (mta_config_field). Every field is 4 bytes, so a field added to
// mta_config without its row here fails the assertion below.
#define FIELD(f, kind) {#f, offsetof(mta_config, f), kind}
static const mta_config_field_desc config_fields[] = {
    FIELD(B, MTA_FIELD_INT), FIELD(H, MTA_FIELD_INT), FIELD(T, MTA_FIELD_INT), FIELD(d, MTA_FIELD_INT),
    FIELD(H_kv, MTA_FIELD_INT),
    FIELD(pre_cq, MTA_FIELD_INT), FIELD(pre_ck, MTA_FIELD_INT), FIELD(pre_head_mix, MTA_FIELD_INT),
    FIELD(post_cq, MTA_FIELD_INT), FIELD(post_ck, MTA_FIELD_INT), FIELD(post_ch, MTA_FIELD_INT),
    FIELD(group_norm, MTA_FIELD_INT), FIELD(depth_scale, MTA_FIELD_INT), FIELD(layer_id, MTA_FIELD_INT),
    FIELD(gate, MTA_FIELD_INT), FIELD(dropout, MTA_FIELD_FLOAT), FIELD(backend, MTA_FIELD_INT),
    FIELD(strip_rows, MTA_FIELD_INT), FIELD(threads, MTA_FIELD_INT), FIELD(keep_o, MTA_FIELD_INT),
    FIELD(precision, MTA_FIELD_INT), FIELD(dtype, MTA_FIELD_INT),
#ifdef MTAC_TEST_DUMMY_STEP
    FIELD(dummy_step, MTA_FIELD_INT),
#endif
};
#undef FIELD
enum { N_CONFIG_FIELDS = sizeof config_fields / sizeof config_fields[0] };
_Static_assert(sizeof(mta_backend) == sizeof(int) && sizeof(float) == sizeof(int), "mta_config: 4-byte fields");
_Static_assert(sizeof(mta_config) == N_CONFIG_FIELDS * sizeof(int), "mta_config: a row of config_fields per field");

const mta_config_field_desc *mta_config_field(int i) { return i >= 0 && i < N_CONFIG_FIELDS ? &config_fields[i] : NULL; }

static int cfg_int(const mta_config *c, unsigned short off) { return *(const int *)((const char *)c + off); }
static int *cfg_int_at(mta_config *c, unsigned short off) { return (int *)((char *)c + off); }

// Whether parameter i's step is on under c.
static int param_on(const mta_config *c, int i) {
    const int x = cfg_int(c, param_table[i].on);
    return param_table[i].flag ? x != 0 : x > 0;
}

int mta_param_shape(const mta_config *c, int i, int64_t s[3]) {
    if (i < 0 || i >= MTA_N_PARAMS || !param_on(c, i)) return 0;
    s[0] = s[1] = s[2] = 0;
    for (int j = 0; j < param_table[i].ndim; j++) {
        const dim_rule r = param_table[i].dim[j];
        s[j] = r.kind == DIM_ONE ? 1 : r.kind == DIM_DIV ? cfg_int(c, r.a) / cfg_int(c, r.b) : cfg_int(c, r.a);
    }
    return param_table[i].ndim;
}

static void shape_words(char *buf, size_t n, int ndim, const int64_t *s) {
    size_t used = (size_t)snprintf(buf, n, "(");
    for (int j = 0; j < ndim && used < n; j++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", j ? "," : "", (long long)s[j]);
    if (used < n) snprintf(buf + used, n - used, ")");
}

mta_status mta_config_from_shapes(mta_config *c, const int *ndim, const int64_t *const *shape, char *msg, size_t n) {
    if (!c || !ndim || !shape) return say(msg, n, MTA_ERR_NULL, "config, ndim and shape must be non-NULL");
    // A config that passes its checks before a tensor's settings and fails after them fails
    // because of that tensor: its message then names it.
    const int attribute = mta_config_check(c, NULL, 0) == MTA_OK;
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        if (!shape[i]) continue;
        const int nd = param_table[i].ndim;
        char got[160];
        shape_words(got, sizeof got, ndim[i] >= 0 && ndim[i] <= 8 ? ndim[i] : 0, shape[i]);
        const int scalar = ndim[i] == 0 && nd == 1 && param_table[i].dim[0].kind == DIM_ONE;
        if (ndim[i] != nd && !scalar)
            return say(msg, n, MTA_ERR_INVALID, "tensor '%s' has shape %s, expected %s", param_table[i].desc.name,
                       ndim[i] >= 0 && ndim[i] <= 8 ? got : "(?)", param_table[i].desc.shape);
        for (int j = 0; j < nd && !scalar; j++) {
            const dim_rule r = param_table[i].dim[j];
            int earlier = 0;  // a setting two dimensions give is set by the first (the shape check compares)
            for (int e = 0; e < j; e++) earlier |= param_table[i].dim[e].kind == DIM_SET && param_table[i].dim[e].a == r.a;
            if (r.kind != DIM_SET || earlier) continue;
            if (shape[i][j] < 1 || shape[i][j] > 0x7fffffff)
                return say(msg, n, MTA_ERR_INVALID, "tensor '%s' has shape %s, expected %s with sizes in 1..2^31-1",
                           param_table[i].desc.name, got, param_table[i].desc.shape);
            *cfg_int_at(c, r.a) = (int)shape[i][j];
        }
        if (param_table[i].flag) *cfg_int_at(c, param_table[i].on) = 1;
        char why[256];
        const mta_status s = attribute ? mta_config_check(c, why, sizeof why) : MTA_OK;
        if (s) return say(msg, n, s, "tensor '%s' of shape %s: %s", param_table[i].desc.name, got, why);
    }
    // The parameters of a step come together: one given and one missing is an error.
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        if (shape[i] || !param_on(c, i)) continue;
        char names[256] = "";
        int count = 0, total = 0;
        for (int j = 0; j < MTA_N_PARAMS; j++) total += param_table[j].on == param_table[i].on;
        for (int j = 0; j < MTA_N_PARAMS; j++)
            if (param_table[j].on == param_table[i].on)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", count++ ? (count == total ? " and " : ", ") : "",
                         param_table[j].desc.name);
        if (total == 1)
            return say(msg, n, MTA_ERR_INVALID, "tensor '%s' is missing but the config's step setting is on", names);
        return say(msg, n, MTA_ERR_INVALID, "%s go together: give %s (%s is missing)", names,
                   total == 2 ? "both or neither" : "all or none", param_table[i].desc.name);
    }
    if (msg && n) msg[0] = '\0';
    return MTA_OK;
}

mta_param_sizes mta_param_sizes_of(const mta_config *c) {
    mta_param_sizes s;
    memset(&s, 0, sizeof s);
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        int64_t sh[3];
        const int nd = mta_param_shape(c, i, sh);
        if (nd) s.w[i] = 1;
        for (int j = 0; j < nd; j++) s.w[i] *= (size_t)sh[j];
    }
    return s;
}

size_t mta_abi_sizeof(int which) {
    switch (which) {
    case MTA_ABI_CONFIG: return sizeof(mta_config);
    case MTA_ABI_PARAMS: return sizeof(mta_params);
    case MTA_ABI_GRADS: return sizeof(mta_grads);
    case MTA_ABI_PARAM_SIZES: return sizeof(mta_param_sizes);
    case MTA_ABI_STATS: return sizeof(mta_stats);
    default: return 0;
    }
}

static void conv_identity(float *w, int H, int cq, int ck) {
    memset(w, 0, (size_t)H * cq * ck * sizeof(float));
    for (int h = 0; h < H; h++) w[(size_t)h * cq * ck + (size_t)(cq - 1) * ck + (ck - 1) / 2] = 1.0f;
}

void mta_param_init_identity(const mta_config *c, int i, float *w) {
    int64_t sh[3];
    if (!w || !mta_param_shape(c, i, sh)) return;
    switch (i) {
    case MTA_W_PRE: conv_identity(w, c->H, c->pre_cq, c->pre_ck); break;
    case MTA_W_POST: conv_identity(w, c->H, c->post_cq, c->post_ck); break;
    case MTA_W_PRE_HEAD:
        memset(w, 0, (size_t)c->H * c->H * sizeof(float));
        for (int h = 0; h < c->H; h++) w[h * c->H + h] = 1.0f;
        break;
    case MTA_W_POST_HEAD: {
        const int ch = c->post_ch;
        memset(w, 0, (size_t)c->H * ch * sizeof(float));
        for (int g = 0; g < c->H / ch; g++)
            for (int n = 0; n < ch; n++) w[((size_t)g * ch + n) * ch + n] = 1.0f;
        break;
    }
    case MTA_GN_WEIGHT:
        for (int j = 0; j < c->d; j++) w[j] = 1.0f;
        break;
    case MTA_GATE_B: w[0] = 0.0f; break;
    default: break;  // gate_w: drawn by the caller
    }
}

void mta_params_init_identity(const mta_config *c, float *w_pre, float *w_pre_head, float *w_post,
                              float *w_post_head, float *gn_weight, float *gate_b) {
    float *w[MTA_N_PARAMS] = {[MTA_W_PRE] = w_pre, [MTA_W_PRE_HEAD] = w_pre_head, [MTA_W_POST] = w_post,
                              [MTA_W_POST_HEAD] = w_post_head, [MTA_GN_WEIGHT] = gn_weight, [MTA_GATE_B] = gate_b};
    for (int i = 0; i < MTA_N_PARAMS; i++) mta_param_init_identity(c, i, w[i]);
}

float *mta_alloc_floats(mta_ctx *ctx, size_t n) {
    float *p = calloc(n ? n : 1, sizeof(float));
    if (p) ctx->bytes += n * sizeof(float);
    return p;
}

mta_status mta_create(mta_ctx **out, const mta_config *cfg, char *msg, size_t n) {
    if (!out) return say(msg, n, MTA_ERR_NULL, "ctx output pointer is NULL");
    *out = NULL;
    mta_status s = mta_config_check(cfg, msg, n);
    if (s) return s;
    mta_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return say(msg, n, MTA_ERR_NOMEM, "out of memory allocating the context");
    ctx->cfg = *cfg;
    ctx->sizes = mta_param_sizes_of(cfg);
    ctx->impl = backend_of(cfg->backend);
    *out = ctx;
    return MTA_OK;
}

void mta_destroy(mta_ctx *ctx) {
    if (!ctx) return;
    ctx->impl->release(ctx);
    free(ctx->doc_start);
    free(ctx->launches);
    free(ctx);
}

mta_status mta_ctx_record_launches(mta_ctx *ctx, int on) {
    if (!ctx) return MTA_ERR_NULL;
    if (!on) {
        free(ctx->launches);
        ctx->launches = NULL;
        return MTA_OK;
    }
    if (!ctx->launches && !(ctx->launches = malloc(sizeof *ctx->launches)))
        return mta_fail(ctx, MTA_ERR_NOMEM, "out of memory allocating the launch record");
    memset(ctx->launches, 0, sizeof *ctx->launches);
    return MTA_OK;
}

const char *mta_ctx_launch(const mta_ctx *ctx, int i, int *times) {
    const mta_launch_log *log = ctx ? ctx->launches : NULL;
    if (!log || i < 0 || i >= log->n) return NULL;
    if (times) *times = log->times[i];
    return log->name[i];
}

const char *mta_ctx_launch_ops(const mta_ctx *ctx, int i, mta_kernel_ops *ops) {
    const char *name = mta_ctx_launch(ctx, i, NULL);
    if (name && ops) *ops = ctx->launches->ops[i];
    return name;
}

int mta_ctx_launches_lost(const mta_ctx *ctx) { return ctx && ctx->launches ? ctx->launches->lost : 0; }

int mta_tensor_core_path(const mta_config *c, char *why, size_t n) {
    if (!c) {
        say(why, n, MTA_OK, "config is NULL");
        return -1;
    }
    const mta_backend_impl *impl = is_backend(c->backend) ? backend_of(c->backend) : NULL;
    if (!impl || !impl->tc_covers) {
        say(why, n, MTA_OK, "the %s backend has no tensor-core path", mta_backend_name(c->backend));
        return -1;
    }
    if (impl->tc_covers(c)) {
        say(why, n, MTA_OK, "%s", "");
        return 1;
    }
    if (c->precision != MTA_BF16) {
        say(why, n, MTA_OK, "precision MTA_FP32 asks for the float32 path");
        return 0;
    }
    char refused[512] = "";
    for (int u = 0; u < MTA_N_USES; u++)
        if (mta_config_uses(c, (mta_use)u) && !impl->tc_computes(c, (mta_use)u))
            snprintf(refused + strlen(refused), sizeof refused - strlen(refused), "%s%s", refused[0] ? ", " : "",
                     mta_use_table[u].name);
    if (refused[0]) say(why, n, MTA_OK, "its allow-list refuses %s", refused);
    else say(why, n, MTA_OK, "its sizes exclude the config (d = %d) or its tiles exceed the device's shared memory", c->d);
    return 0;
}

mta_status mta_set_documents(mta_ctx *ctx, const int32_t *doc) {
    if (!ctx) return MTA_ERR_NULL;
    if (doc && !ctx->impl->computes(&ctx->cfg, MTA_USE_DOCUMENTS))
        return refusal(ctx->err, sizeof ctx->err, ctx->cfg.backend, MTA_USE_DOCUMENTS);
    ctx->doc = doc;
    return MTA_OK;
}

// A host backend's forward reads the ids into document starts (ctx->doc_start), which its
// backward reads too; a device backend derives its own from ctx->doc.
static mta_status forward_documents(mta_ctx *ctx) {
    ctx->docs_on = 0;
    if (!ctx->doc || ctx->impl->device_memory) return MTA_OK;
    const mta_config *c = &ctx->cfg;
    if (!ctx->doc_start && !(ctx->doc_start = malloc((size_t)c->B * c->T * sizeof(int))))
        return mta_fail(ctx, MTA_ERR_NOMEM, "out of memory allocating the document starts");
    mta_doc_starts(ctx->doc, c->B, c->T, ctx->doc_start);
    ctx->docs_on = 1;
    return MTA_OK;
}

void mta_set_stream(mta_ctx *ctx, void *stream) {
    if (ctx) ctx->stream = stream;
}

void mta_set_deterministic(mta_ctx *ctx, int on) {
    if (ctx) ctx->atomics = on == 0;
}

void mta_set_dropout(mta_ctx *ctx, int training, uint64_t seed) {
    if (!ctx) return;
    ctx->training = training != 0;
    ctx->seed = seed;
}

const char *mta_ctx_error(const mta_ctx *ctx) { return ctx ? ctx->err : "ctx is NULL"; }
mta_status mta_attention_map(mta_ctx *ctx, int b, int h, float *out) {
    if (!ctx) return MTA_ERR_NULL;
    if (!out) return mta_fail(ctx, MTA_ERR_NULL, "out must be non-NULL");
    if (!ctx->have_forward) return mta_fail(ctx, MTA_ERR_STATE, "no forward to take the attention map of");
    if (!ctx->impl->attention)
        return mta_fail(ctx, MTA_ERR_INVALID, "attention maps need the reference backend (the %s one keeps no (T,T) map)",
                        mta_backend_name(ctx->cfg.backend));
    if (b < 0 || b >= ctx->cfg.B || h < 0 || h >= ctx->cfg.H)
        return mta_fail(ctx, MTA_ERR_INVALID, "attention map (b=%d, h=%d) outside B=%d, H=%d", b, h, ctx->cfg.B, ctx->cfg.H);
    const size_t TT = (size_t)ctx->cfg.T * ctx->cfg.T;
    memcpy(out, ctx->impl->attention(ctx, b, h), TT * sizeof(float));
    return MTA_OK;
}

mta_stats mta_ctx_stats(const mta_ctx *ctx) {
    mta_stats z = {0, 0};
    return ctx ? ctx->stats : z;
}
void mta_ctx_reset_stats(mta_ctx *ctx) {
    if (ctx) ctx->stats.matmul_s = ctx->stats.matmul_flop = 0;
}
void mta_ctx_release(mta_ctx *ctx) {
    if (ctx) ctx->impl->release(ctx);
}

size_t mta_ctx_workspace_bytes(const mta_ctx *ctx) { return ctx ? ctx->bytes : 0; }

// Each enabled step needs its parameters, and a disabled one must not be given any: a present
// tensor for a step that is off almost always means a config that does not match the weights.
static mta_status check_params(mta_ctx *ctx, const mta_params *p) {
    const mta_config *c = &ctx->cfg;
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        int64_t sh[3];
        const int on = mta_param_shape(c, i, sh) > 0;
        const char *name = param_table[i].desc.name;
        if (on && !p->w[i]) return mta_fail(ctx, MTA_ERR_NULL, "parameter %s is NULL but its step is on", name);
        if (!on && p->w[i]) return mta_fail(ctx, MTA_ERR_INVALID, "parameter %s is given but its step is off in the config", name);
    }
    return MTA_OK;
}

static const mta_params no_params;

int mta_threads_enter(const mta_config *c) {
    if (c->threads <= 0) return 0;
    int prev = omp_get_max_threads();
    omp_set_num_threads(c->threads);
    return prev;
}

void mta_threads_leave(int prev) {
    if (prev > 0) omp_set_num_threads(prev);
}

mta_status mta_forward(mta_ctx *ctx, const float *q, const float *k, const float *v,
                       const mta_params *p, float *out) {
    if (!ctx) return MTA_ERR_NULL;
    if (!q || !k || !v || !out) return mta_fail(ctx, MTA_ERR_NULL, "q, k, v and out must be non-NULL");
    if (!p) p = &no_params;
    mta_status s = check_params(ctx, p);
    if (s) return s;
    ctx->have_forward = 0;
    if ((s = forward_documents(ctx))) return s;
    int prev = mta_threads_enter(&ctx->cfg);
    s = ctx->impl->forward(ctx, q, k, v, p, out);
    mta_threads_leave(prev);
    if (s == MTA_OK) ctx->have_forward = 1;
    return s;
}

mta_status mta_backward(mta_ctx *ctx, const float *q, const float *k, const float *v,
                        const mta_params *p, const float *dout, float *dq, float *dk, float *dv,
                        const mta_grads *g) {
    if (!ctx) return MTA_ERR_NULL;
    if (!ctx->have_forward) return mta_fail(ctx, MTA_ERR_STATE, "mta_backward called before a successful mta_forward on this context");
    if (!q || !k || !v || !dout || !dq || !dk || !dv)
        return mta_fail(ctx, MTA_ERR_NULL, "q, k, v, dout, dq, dk and dv must be non-NULL");
    if (!p) p = &no_params;
    mta_status s = check_params(ctx, p);
    if (s) return s;
    static const mta_grads no_grads;
    if (!g) g = &no_grads;
    int prev = mta_threads_enter(&ctx->cfg);
    s = ctx->impl->backward(ctx, q, k, v, p, dout, dq, dk, dv, g);
    mta_threads_leave(prev);
    return s;
}
