// mta_cuda.cu: the CUDA backend (MTA_BACKEND_CUDA). It runs the fused backend's algorithm
// (docs/fused.md) on the GPU: the query rows are walked in strips of R rows, every (batch, head)
// at once, and each map lives in a window of a few rows, so no (T,T) map is ever held. The
// products (scores, P v and the gradients') run on cuBLAS, the convolutions, mixing, softmax,
// dropout and norm/gate on the kernels of cuda_kernels.cuh.
//
// Windows are rings of `cap` rows (cap a multiple of R, at least R + (c_q'-1) + (c_q-1)): a strip
// starting at a multiple of R is contiguous in its ring, and the rows the convolutions and the
// lagging backward stages still read stay in place. The backward's stages are those of the CPU
// backend: rows A = [i0, i1) recompute their maps and get dP2, dP1; rows B = A - (c_q'-1) get dP,
// dS2, dS1; rows C = B - (c_q-1) get dZ and its products with k and q.
//
// Everything is enqueued on the context's stream (mta_set_stream) and is deterministic: kernel
// gradients are summed by fixed block reductions, per head and strip in order, in double.
//
// Packed documents (mta_set_documents): the forward turns the device's (B,T) ids into document
// starts (k_doc_starts) in the workspace, where its backward finds them, and every kernel keeps
// to the documents' causal blocks (cuda_kernels.cuh).
//
// With precision MTA_BF16, the configs that the tensor-core path covers (tc_covers in
// mta_cuda_tc.cuh: an allow-list of the uses it computes; one of the pre-softmax convolution, the
// post-softmax convolution and the head steps, where their tiles fit in the device's
// opt-in shared memory per block) run its fused kernels instead; the others run this path, in
// float32.
#include "attn/cuda_kernels.cuh"
#include "attn/lag.h"
#include "attn/mma_ptx.cuh"
#include "attn/mta_internal.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace {

struct cuda_state {
    cublasHandle_t blas;
    cudaStream_t stream;  // the stream of the last call (cuda_setup)
    void *mem;        // one allocation: everything below
    size_t mem_bytes;
    size_t smem_max;  // the device's opt-in limit of shared memory per block (bytes)
    int tc;           // the config runs on the tensor-core path on this device (tc_covers, asked once)
    int clusters;     // the device launches this build's cluster kernels (device_clusters, asked once)
    int sms;          // the device's multiprocessors (asked once: the bf16 dK/dV kernel's chunks)
    void *kv_chunk;   // the bf16 every-step backward's per-query-head float32 dK, dV of a chunk of
    void *kv_full;    // key tiles, and without determinism whole ones (tc_every_backward), or NULL
    int R, cap;       // strip rows, ring rows
    size_t ld;        // map row stride (floats)
    float *mx, *inv;  // (B*H, T) softmax row max and 1/sum of the last forward
    float *mats;      // 4 (H,H): mixing, its transpose, head conv as a matrix, its transpose
    float *o, *dO;    // (B*H, R, d) recomputed output and its gradient
    int *start;       // (B, T) document starts of the last forward, read when docs is set
    int docs;         // the last forward had documents
    double *acc;      // kernel-gradient accumulators (see grad_layout)
    void *io;         // bfloat16 storage (mta_config.dtype): the float32 buffers of io_bufs, or NULL
    size_t io_bytes;
    void *copies;     // the tensor-core path's padded copies of bfloat16 inputs it cannot read in place
                      // this call (tc_copy_carve), allocated by the first call that needs one, or NULL
    mview z, s1, p, p1, p2, pd, dp2, dp1, dp, ds1, dz;  // windows (p == unused ones when a step is off)
};

struct grad_layout {
    size_t pre, post, mix, hc, ng, total;  // offsets (doubles) into acc
};

// The tensor-core path (mta_cuda_tc.cuh, included below): the configs it runs (those of precision
// MTA_BF16 whose every use its allow-list names, on a device with smem_max bytes of shared memory
// per block), and its workspace.
int tc_covers(const mta_config *c, size_t smem_max);
size_t tc_bytes(const mta_config *c, size_t smem_max, int clusters);

int imin(int a, int b) { return a < b ? a : b; }

// The norm/gate backward's chunks over spans of n rows (a strip, or the tensor-core path's T):
// rows per chunk, at least 8 and at most 64 chunks per head, so that the blocks of a long span
// run in parallel while their partials (a slot of 2d+1 doubles per chunk and head) stay small;
// and the slots per head.
int ng_rows(int n) { return n > 8 * 64 ? (n + 63) / 64 : 8; }
int ng_slots(int n) { return (n + ng_rows(n) - 1) / ng_rows(n); }

// The accumulators' layout, with the norm/gate's slots for spans of `span` rows (ng_slots).
grad_layout grads_of(const mta_config *c, int span) {
    grad_layout g;
    const size_t BH = (size_t)c->B * c->H;
    g.pre = 0;
    g.post = g.pre + BH * c->pre_cq * c->pre_ck;
    g.mix = g.post + BH * c->post_cq * c->post_ck;
    g.hc = g.mix + BH * c->H;
    g.ng = g.hc + BH * c->H;
    g.total = g.ng + BH * ng_slots(span) * (2 * (size_t)c->d + 1);
    return g;
}

// The windows a config needs, in rows of B*H*ld floats: rings of cap rows for the maps read
// across strips, plain R-row buffers for P2 with dropout (PD) and dZ.
struct plan {
    int z, s1, p1, p2, dp1, dp, ds1;  // 1: the step's own window exists
    size_t rows;                      // total rows
};

plan plan_of(const mta_config *c, int R, int cap) {
    plan k;
    k.z = c->pre_cq > 0;
    k.s1 = c->pre_head_mix;
    k.p1 = c->post_cq > 0;
    k.p2 = c->post_ch > 0;
    k.dp1 = c->post_ch > 0;
    k.dp = c->post_cq > 0;
    k.ds1 = c->pre_head_mix;
    // p and dp2 always; pd and dz are R rows
    k.rows = (size_t)cap * (2 + k.z + k.s1 + k.p1 + k.p2 + k.dp1 + k.dp + k.ds1) + 2 * (size_t)R;
    return k;
}

size_t ld_of(int T) { return ((size_t)T + 31) / 32 * 32; }

// Bytes of the one allocation for strips of R rows.
size_t bytes_of(const mta_config *c, int R, int *cap_out) {
    const int L = mta_lag_post(c) + mta_lag_pre(c);  // the rows the backward's stages lag by (lag.h)
    const int cap = (R + L + R - 1) / R * R;
    if (cap_out) *cap_out = cap;
    const size_t BH = (size_t)c->B * c->H;
    const plan k = plan_of(c, R, cap);
    size_t floats = k.rows * BH * ld_of(c->T) + 2 * BH * c->T + 4 * (size_t)c->H * c->H + 2 * BH * R * c->d +
                    (size_t)c->B * c->T;  // the document starts, ints of a float's size
    floats = (floats + 1) / 2 * 2;  // the doubles after it are 8-byte aligned
    return floats * sizeof(float) + grads_of(c, R).total * sizeof(double);
}

// Strip rows: the config's, else the largest of 64, 32, 16, 8 whose workspace stays within the
// larger of 256 MiB and the call's q, k, v, out and their gradients (8 B*H*T*d floats).
int strip_rows_of(const mta_config *c) {
    if (c->strip_rows > 0) return c->strip_rows;
    const double budget = fmax(256.0 * 1024 * 1024, 8.0 * c->B * c->H * c->T * c->d * sizeof(float));
    static const int sizes[] = {64, 32, 16};
    for (int s : sizes)
        if ((double)bytes_of(c, s, NULL) <= budget) return s;
    return 8;
}

mta_status cuda_fail(mta_ctx *ctx, cudaError_t e, const char *what) {
    cudaGetLastError();  // reported here: not again by a later call's check
    return mta_fail(ctx, MTA_ERR_DEVICE, "CUDA error in %s: %s", what, cudaGetErrorString(e));
}

void cuda_release(mta_ctx *ctx) {
    cuda_state *st = (cuda_state *)ctx->state;
    if (st) {
        if (st->mem) cudaFree(st->mem);
        if (st->io) cudaFree(st->io);
        if (st->copies) cudaFree(st->copies);
        if (st->kv_chunk) cudaFree(st->kv_chunk);
        if (st->kv_full) cudaFree(st->kv_full);
        if (st->blas) cublasDestroy(st->blas);
        free(st);
    }
    ctx->state = NULL;
    ctx->bytes = 0;
    ctx->have_forward = 0;
}

// *p: `bytes` of device memory for `what`, allocated (and counted in ctx->bytes) unless it is
// already; a refusal is MTA_ERR_NOMEM, reported here rather than by the next call's check.
mta_status alloc_once(mta_ctx *ctx, void **p, size_t bytes, const char *what) {
    if (*p) return MTA_OK;
    const cudaError_t e = cudaMalloc(p, bytes);
    if (e != cudaSuccess) {
        *p = NULL;
        cudaGetLastError();
        return mta_fail(ctx, MTA_ERR_NOMEM, "could not allocate %.1f MB of GPU memory for %s: %s", bytes / 1e6, what,
                        cudaGetErrorString(e));
    }
    ctx->bytes += bytes;
    return MTA_OK;
}

mview ring(float **at, const mta_config *c, int rows, size_t ld, int is_ring) {
    mview v;
    v.p = *at;
    v.cap = is_ring ? rows : 0;
    v.base = 0;
    v.ld = ld;
    v.hs = (size_t)rows * ld;
    *at += (size_t)c->B * c->H * v.hs;
    return v;
}

// The current device's opt-in shared memory per block (what a kernel may ask past 48 KB).
cudaError_t device_smem_optin(size_t *bytes) {
    int dev = 0, optin = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    *bytes = (size_t)optin;
    return e;
}

// The current device's multiprocessors.
cudaError_t device_sms(int *n) {
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(n, cudaDevAttrMultiProcessorCount, dev);
    return e;
}

// 1 when the build has the cluster kernels' code (cluster_ptx.cuh: sm_90 and later; an sm_80
// build's bodies trap): nvcc's __CUDA_ARCH_LIST__ has an entry of 9.0 or more.
#if defined(MTAC_CUDA_EMU) || !defined(__CUDA_ARCH_LIST__)
const int CLUSTER_CODE = 1;
#else
constexpr int max_arch(int a) { return a; }
template <typename... R> constexpr int max_arch(int a, R... r) { return a > max_arch(r...) ? a : max_arch(r...); }
const int CLUSTER_CODE = max_arch(__CUDA_ARCH_LIST__) >= 900;
#endif

// Whether the current device launches thread block clusters (compute capability 9.0 and later)
// and the build has their code.
cudaError_t device_clusters(int *on) {
    int dev = 0, v = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e == cudaSuccess) e = cudaDeviceGetAttribute(&v, cudaDevAttrClusterLaunch, dev);
    *on = v && CLUSTER_CODE;
    return e;
}

// Every path's launches put the (batch, head) pairs on the grid's y, where CUDA allows 65,535 blocks.
const size_t CUDA_GRID_Y = 65535;

mta_status cuda_setup(mta_ctx *ctx) {
    const mta_config *c = &ctx->cfg;
    if ((size_t)c->B * c->H > CUDA_GRID_Y)
        return mta_fail(ctx, MTA_ERR_INVALID,
                        "B*H = %zu (batch times heads) is past the %zu blocks a CUDA grid has along y: split the batch",
                        (size_t)c->B * c->H, CUDA_GRID_Y);
    if (!ctx->state) {
        cuda_state *st = (cuda_state *)calloc(1, sizeof(cuda_state));
        if (!st) return mta_fail(ctx, MTA_ERR_NOMEM, "out of memory allocating the CUDA backend's state");
        ctx->state = st;
        if (cublasCreate(&st->blas) != CUBLAS_STATUS_SUCCESS) {
            cuda_release(ctx);
            return mta_fail(ctx, MTA_ERR_DEVICE, "cuBLAS could not be initialised (no usable GPU?)");
        }
        // asked once: what the tensor-core path's tiles may use, and so whether it runs the config
        cudaError_t e = device_smem_optin(&st->smem_max);
        if (e == cudaSuccess) e = device_clusters(&st->clusters);
        if (e == cudaSuccess) e = device_sms(&st->sms);
        if (e != cudaSuccess) {
            cuda_release(ctx);
            return cuda_fail(ctx, e, "the query of the device's shared memory per block, clusters and multiprocessors");
        }
        st->tc = tc_covers(c, st->smem_max);
    }
    cuda_state *st = (cuda_state *)ctx->state;
    // The workspace is shared by every call on the context: work still queued on the previous
    // call's stream must finish before another stream may touch it (mta_set_stream).
    if ((cudaStream_t)ctx->stream != st->stream) {
        const cudaError_t e = cudaStreamSynchronize(st->stream);
        if (e != cudaSuccess) return cuda_fail(ctx, e, "the synchronisation with the previous stream");
        st->stream = (cudaStream_t)ctx->stream;
    }
    if (cublasSetStream(st->blas, st->stream) != CUBLAS_STATUS_SUCCESS)
        return mta_fail(ctx, MTA_ERR_DEVICE, "cublasSetStream failed");
    if (st->mem) return MTA_OK;
    st->R = st->tc ? 0 : strip_rows_of(c);
    st->mem_bytes = st->tc ? tc_bytes(c, st->smem_max, st->clusters) : bytes_of(c, st->R, &st->cap);
    cudaError_t e = cudaMalloc(&st->mem, st->mem_bytes);
    if (e != cudaSuccess) {
        st->mem = NULL;
        cudaGetLastError();  // a refused allocation is reported here, not by the next call's check
        return mta_fail(ctx, MTA_ERR_NOMEM, "could not allocate %.1f MB of GPU memory for the CUDA workspace (%d rows per strip): %s",
                        st->mem_bytes / 1e6, st->R, cudaGetErrorString(e));
    }
    ctx->bytes = st->mem_bytes;
    if (st->tc) return MTA_OK;  // the tensor-core path carves its workspace on each call (tc_carve)
    const size_t BH = (size_t)c->B * c->H, ld = st->ld = ld_of(c->T);
    const int cap = st->cap, R = st->R;
    const plan k = plan_of(c, R, cap);
    float *at = (float *)st->mem;
    // The map of a step that is off is the previous map (as maps_of in mta_fused.c).
    st->p = ring(&at, c, cap, ld, 1);
    st->dp2 = ring(&at, c, cap, ld, 1);
    st->s1 = k.s1 ? ring(&at, c, cap, ld, 1) : st->p;
    st->z = k.z ? ring(&at, c, cap, ld, 1) : st->s1;
    st->p1 = k.p1 ? ring(&at, c, cap, ld, 1) : st->p;
    st->p2 = k.p2 ? ring(&at, c, cap, ld, 1) : st->p1;
    st->dp1 = k.dp1 ? ring(&at, c, cap, ld, 1) : st->dp2;
    st->dp = k.dp ? ring(&at, c, cap, ld, 1) : st->dp1;
    st->ds1 = k.ds1 ? ring(&at, c, cap, ld, 1) : st->dp;
    st->pd = ring(&at, c, R, ld, 0);
    st->dz = ring(&at, c, R, ld, 0);
    st->mx = at, at += BH * c->T;
    st->inv = at, at += BH * c->T;
    st->mats = at, at += 4 * (size_t)c->H * c->H;
    st->o = at, at += BH * R * c->d;
    st->dO = at, at += BH * R * c->d;
    st->start = (int *)at, at += (size_t)c->B * c->T;
    st->acc = (double *)((char *)st->mem + st->mem_bytes - grads_of(c, st->R).total * sizeof(double));
    return MTA_OK;
}

// The mixing matrices on the device: [0] w_pre_head, [1] its transpose, [2] the head conv
// (H/ch, ch, ch) as [out, in] (mta_headconv_matrix), [3] its transpose.
__global__ void k_mats(const float *w_mix, const float *w_hc, int H, int ch, float *m) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= H * H) return;
    const int o = e / H, i = e % H, HH = H * H;
    m[e] = w_mix ? w_mix[o * H + i] : 0.0f;
    m[HH + e] = w_mix ? w_mix[i * H + o] : 0.0f;
    float hc = 0.0f, hct = 0.0f;
    if (w_hc && o / ch == i / ch) {
        const int g = o / ch;
        hc = w_hc[((size_t)g * ch + i % ch) * ch + o % ch];
        hct = w_hc[((size_t)g * ch + o % ch) * ch + i % ch];
    }
    m[2 * HH + e] = hc;
    m[3 * HH + e] = hct;
}

// out[e] += sum_{s<n} acc[s*stride + off(e)], off(e) = off0 + e, or for the head conv's kernel
// (H/ch, ch, ch), e = (g*ch + n)*ch + o, the matrix entry [g*ch + o, g*ch + n] of an (H,H).
__global__ void k_sum_grad(float *out, int count, const double *acc, size_t stride, int n, int off0, int H, int ch) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= count) return;
    size_t off = off0 + e;
    if (ch) {
        const int g = e / (ch * ch), nn = e / ch % ch, o = e % ch;
        off = (size_t)(g * ch + o) * H + g * ch + nn;
    }
    double s = 0.0;
    for (int i = 0; i < n; i++) s += acc[(size_t)i * stride + off];
    out[e] += (float)s;
}

// Document starts from the (B,T) ids, one thread per sequence walking it (mta_doc_starts' rule):
// position i starts a document when its id differs from position i-1's.
__global__ void k_doc_starts(const int32_t *doc, int B, int T, int *start) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b < B) mta_doc_starts_row(doc + (size_t)b * T, T, start + (size_t)b * T);
}

// The products' modes, as mta_fused.c's matmul: op(A) op(B) with N as it is, T transposed.
enum mm_kind { MM_NN, MM_NT, MM_TN };

// An operand of a product over the heads: a strided batch of row-major matrices, head i's at
// p + i*stride, rows ld floats apart; kv: one per kv head (k, v, dk, dv), else one per query head.
// The product reads the _in ones and writes the _out one.
struct mats_in {
    const float *p;
    size_t ld, stride;
    int kv;
};
struct mats_out {
    float *p;
    size_t ld, stride;
    int kv;
};
mats_in q_in(const float *p, size_t ld, size_t stride) { return {p, ld, stride, 0}; }
mats_in kv_in(const float *p, size_t ld, size_t stride) { return {p, ld, stride, 1}; }
mats_out q_out(float *p, size_t ld, size_t stride) { return {p, ld, stride, 0}; }
mats_out kv_out(float *p, size_t ld, size_t stride) { return {p, ld, stride, 1}; }
// A map's window from row r on (one matrix per query head).
mats_in map_in(const mview &v, int r) { return q_in(vrow(v, 0, r), v.ld, v.hs); }
mats_out map_out(const mview &v, int r) { return q_out(vrow(v, 0, r), v.ld, v.hs); }

// Row-major C = alpha op(A) op(B) + beta C for each of `batch` heads, on cuBLAS (column-major:
// C^T = op(B)^T op(A)^T).
cublasStatus_t gemm(cublasHandle_t h, mm_kind mode, int m, int n, int k, float alpha, mats_in A, mats_in B, float beta,
                    mats_out C, int batch) {
    const cublasOperation_t ta = mode == MM_TN ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = mode == MM_NT ? CUBLAS_OP_T : CUBLAS_OP_N;
    mta_launch_note("cublasSgemmStridedBatched");
    return cublasSgemmStridedBatched(h, tb, ta, n, m, k, &alpha, B.p, (int)B.ld, (long long)B.stride, A.p, (int)A.ld,
                                     (long long)A.stride, &beta, C.p, (int)C.ld, (long long)C.stride, batch);
}

struct call {
    mta_ctx *ctx;
    cuda_state *st;
    const mta_config *c;
    const float *q, *k, *v;
    const mta_params *p;
    cudaStream_t s;
    float scale;
    const int *ds;  // document starts (B,T) of the forward, or NULL
    int blas_err;
    uint32_t drop_thr;
    float drop_scale;
};

void blas_check(call *cl, cublasStatus_t r) {
    if (r != CUBLAS_STATUS_SUCCESS) cl->blas_err = (int)r;
}

// Round r of rep of an operand (see gemm_kv): a query-head operand's heads r, r + rep, ..., a kv
// operand's every head.
template <typename M> M round_of(M x, int r, int rep) {
    if (!x.kv) x.p += (size_t)r * x.stride, x.stride *= rep;
    return x;
}

// gemm over the B*H query heads where one operand is a kv head's (k, v, or the dk, dv it
// writes). Grouped-query attention (H_kv < H): query head j*rep + r reads kv head j
// (rep = H/H_kv), so query slab (b*H_kv + j)*rep + r goes with kv slab b*H_kv + j: one strided
// batch of B*H_kv per r, the rep batches in order (a kv operand written, dk or dv, takes its
// query heads' terms in head order: no atomics). With H_kv = H, the one call gemm would make.
void gemm_kv(call *cl, mm_kind mode, int m, int n, int k, float alpha, mats_in A, mats_in B, float beta, mats_out C) {
    const mta_config *c = cl->c;
    const int Hkv = mta_kv_heads(c), rep = c->H / Hkv;
    for (int r = 0; r < rep; r++)
        blas_check(cl, gemm(cl->st->blas, mode, m, n, k, alpha, round_of(A, r, rep), round_of(B, r, rep), beta,
                            round_of(C, r, rep), c->B * Hkv));
}

const int CT = 128;  // threads per block of the per-entry kernels (columns)

// Threads per block of a kernel that reduces rows of up to len entries: the smallest power of two
// (block_reduce's need) that covers them, from a warp up to most. Short rows leave no idle warps.
int red_threads(int len, int most) {
    int t = 32;
    while (t < len && t < most) t *= 2;
    return t;
}

dim3 cols_grid(int ncols, int nrows, int z) { return dim3((unsigned)((ncols + CT - 1) / CT), (unsigned)nrows, (unsigned)z); }

// Rows [a0, a1) of Z, S1, S2 -> P (softmax; saving its statistics in a forward, from them in a
// backward), P1 and P2.
void strip_maps(call *cl, int a0, int a1, int save) {
    const mta_config *c = cl->c;
    cuda_state *st = cl->st;
    const int B = c->B, H = c->H, T = c->T, d = c->d, n = a1 - a0, BH = B * H;
    const size_t Td = (size_t)T * d;
    // Z = q k^T / sqrt(d)
    gemm_kv(cl, MM_NT, n, a1, d, cl->scale, q_in(cl->q + (size_t)a0 * d, d, Td), kv_in(cl->k, d, Td), 0.0f,
            map_out(st->z, a0));
    const int *ds = cl->ds;
    if (c->pre_cq)
        MTA_LAUNCH(k_conv, cols_grid(a1, n, BH), CT, 0, cl->s)(st->z, st->s1, cl->p->w_pre, H, c->pre_cq, c->pre_ck, a0, ds, T);
    if (c->pre_head_mix) MTA_LAUNCH(k_mix, cols_grid(a1, n, B), CT, 0, cl->s)(st->s1, st->p, st->mats, H, a0, ds, T);
    MTA_LAUNCH(k_softmax, dim3((unsigned)n, (unsigned)BH), red_threads(a1, 256), 0, cl->s)(st->p, st->mx, st->inv, H, T, a0, save,
                                                                                          ds);
    if (c->post_cq)
        MTA_LAUNCH(k_conv, cols_grid(a1, n, BH), CT, 0, cl->s)(st->p, st->p1, cl->p->w_post, H, c->post_cq, c->post_ck, a0, ds,
                                                              T);
    if (c->post_ch)
        MTA_LAUNCH(k_mix, cols_grid(a1, n, B), CT, 0, cl->s)(st->p1, st->p2, st->mats + 2 * (size_t)H * H, H, a0, ds, T);
    st->pd.base = a0;
    MTA_LAUNCH(k_drop, cols_grid(a1, n, BH), CT, 0, cl->s)(st->p2, st->pd, H, T, a0, a1, cl->ctx->seed, cl->drop_thr,
                                                          cl->drop_scale, ds);
}

normgate normgate_of(const mta_config *c, const mta_params *p) {
    normgate ng;
    ng.d = c->d, ng.group_norm = c->group_norm, ng.gate = c->gate;
    ng.ds = c->depth_scale ? mta_depth_scale_of(c->layer_id) : 1.0f;
    ng.eps = MTA_GN_EPS;
    ng.gn_weight = p->gn_weight, ng.gate_w = p->gate_w, ng.gate_b = p->gate_b;
    return ng;
}

// The norm and gate backward of rows [0, n) of each head (o: head stride hs; dout and dO: io),
// chunk by chunk in parallel (k_normgate_t), into acc's slots for spans of `span` >= n rows.
void normgate_backward(const call *cl, const float *o, const ng_io &io, size_t hs, int n, int span, const normgate &ng,
                       double *acc) {
    const int rows = ng_rows(span), BH = cl->c->B * cl->c->H;
    MTA_LAUNCH(k_normgate_t, dim3((unsigned)((n + rows - 1) / rows), (unsigned)BH), red_threads(ng.d, 128), 0, cl->s)(
        o, io, hs, n, rows, ng_slots(span), ng, acc);
}

// 1 when the context's config runs on the tensor-core path on its device (after cuda_setup).
int tc_on(const mta_ctx *ctx) { return ((const cuda_state *)ctx->state)->tc; }

// The call's settings; ctx has been set up (cuda_setup) by the forward or backward that calls it.
mta_status begin(mta_ctx *ctx, call *cl, const float *q, const float *k, const float *v, const mta_params *p) {
    memset(cl, 0, sizeof *cl);
    cl->ctx = ctx, cl->st = (cuda_state *)ctx->state, cl->c = &ctx->cfg;
    cl->q = q, cl->k = k, cl->v = v, cl->p = p;
    cl->s = (cudaStream_t)ctx->stream;
    cl->scale = 1.0f / sqrtf((float)ctx->cfg.d);
    // the dropout of the forward (its backward applies the same mask)
    cl->drop_thr = ctx->dropout_on ? mta_dropout_threshold(ctx->cfg.dropout) : 0;
    cl->drop_scale = 1.0f / (1.0f - ctx->cfg.dropout);
    cl->ds = cl->st->docs ? cl->st->start : NULL;  // the last forward's (a forward sets its own)
    const int H = ctx->cfg.H;
    if ((ctx->cfg.pre_head_mix || ctx->cfg.post_ch) && !tc_on(ctx))  // tc reads the weights itself
        MTA_LAUNCH(k_mats, (H * H + 255) / 256, 256, 0, cl->s)(p->w_pre_head, p->w_post_head, H, ctx->cfg.post_ch ? ctx->cfg.post_ch : 1,
                                                      cl->st->mats);
    return MTA_OK;
}

mta_status finish(call *cl, const char *what) {
    if (cl->blas_err) return mta_fail(cl->ctx, MTA_ERR_DEVICE, "cuBLAS error %d in the %s", cl->blas_err, what);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cuda_fail(cl->ctx, e, what);
    return MTA_OK;
}

// n float32 values widened from bfloat16 (exact) and narrowed to it (rounded to nearest even).
__global__ void k_bf16_widen(const __nv_bfloat16 *src, float *dst, size_t n) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n) dst[e] = __bfloat162float(src[e]);
}
__global__ void k_bf16_narrow(const float *src, __nv_bfloat16 *dst, size_t n) {
    const size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < n) dst[e] = __float2bfloat16_rn(src[e]);
}

// The element counts of q-shaped and kv-shaped tensors.
size_t q_count(const mta_config *c) { return (size_t)c->B * c->H * c->T * c->d; }
size_t kv_count(const mta_config *c) { return (size_t)c->B * mta_kv_heads(c) * c->T * c->d; }

#include "attn/mta_cuda_tc.cuh"

// The launch record of ctx (mta_ctx_record_launches, NULL: none) for the length of one call: the
// kernels MTA_LAUNCH launches are noted there.
struct launch_scope {
    mta_launch_log *prev;
    explicit launch_scope(const mta_ctx *ctx) : prev(mta_launch_record()) { mta_launch_record() = ctx->launches; }
    ~launch_scope() { mta_launch_record() = prev; }
    launch_scope(const launch_scope &) = delete;
    launch_scope &operator=(const launch_scope &) = delete;
};

// The float32 path's forward (cuda_setup done), on float32 tensors.
mta_status f32_forward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p, float *out) {
    call cl;
    mta_status s = begin(ctx, &cl, q, k, v, p);
    if (s) return s;
    const mta_config *c = &ctx->cfg;
    cuda_state *st = cl.st;
    const int T = c->T, d = c->d, R = st->R, BH = c->B * c->H;
    const normgate ng = normgate_of(c, p);
    st->docs = ctx->doc != NULL;
    if (st->docs)
        MTA_LAUNCH(k_doc_starts, (c->B + 127) / 128, 128, 0, cl.s)(ctx->doc, c->B, T, st->start);
    cl.ds = st->docs ? st->start : NULL;
    for (int i0 = 0; i0 < T; i0 += R) {
        const int i1 = imin(T, i0 + R), n = i1 - i0;
        strip_maps(&cl, i0, i1, 1);
        const size_t Td = (size_t)T * d;
        // O = PD v
        gemm_kv(&cl, MM_NN, n, d, i1, 1.0f, map_in(st->pd, i0), kv_in(v, d, Td), 0.0f,
                q_out(out + (size_t)i0 * d, d, Td));
        if (c->group_norm || c->gate)
            MTA_LAUNCH(k_normgate, dim3((unsigned)n, (unsigned)BH), red_threads(d, 128), 0, cl.s)(
                out + (size_t)i0 * d, out + (size_t)i0 * d, (__nv_bfloat16 *)NULL, (size_t)T * d, ng);
    }
    return finish(&cl, "forward");
}

// ---- backward: three lagged stages per strip (lag.h), as the fused backend's -------------------

// What the backward's stages share besides the call: the gradients in and out, and the layout and
// norm/gate of the kernel-gradient accumulators.
struct backward_call {
    call *cl;
    const float *dout;
    float *dq, *dk, *dv;
    grad_layout gl;
    normgate ng;
};

// The backward of a head mixing over rows r (mixing matrix mt transposed, groups of gs heads):
// din from dout, and the mixing kernel's gradient pairing dout with the mixing's input, into acc.
void mix_backward(const call *cl, mview dout, mview in, mview din, const float *mt, int gs, mta_rows r, double *acc) {
    const int B = cl->c->B, H = cl->c->H, T = cl->c->T, n = r.hi - r.lo;
    MTA_LAUNCH(k_mix, cols_grid(r.hi, n, B), CT, 0, cl->s)(dout, din, mt, H, r.lo, cl->ds, T);
    MTA_LAUNCH(k_pair_grad, dim3((unsigned)(H * H), (unsigned)B), red_threads(r.hi, 256), 0, cl->s)(
        dout, in, H, gs, r.lo, r.hi, acc, cl->ds, T);
}

// A key-query convolution's kernel gradient (cq, ck) from output-gradient rows r of g and its
// source src, into acc.
void conv_kernel_grad(const call *cl, mview g, mview src, int cq, int ck, mta_rows r, double *acc) {
    const int H = cl->c->H, BH = cl->c->B * H;
    MTA_LAUNCH(k_conv_wgrad, dim3((unsigned)(cq * ck), (unsigned)BH), red_threads(r.hi, 256), 0, cl->s)(
        g, src, H, cq, ck, r.lo, r.hi, acc, cl->ds, cl->c->T);
}

// Stage A, rows A: the maps again, O again, then dO through the gate and norm; dV; dP2 = dO v^T
// through the dropout; the head conv's transpose (dP1) and kernel gradient; the post conv's
// kernel gradient.
void stage_a(const backward_call &bw, mta_rows A) {
    call *cl = bw.cl;
    const mta_config *c = cl->c;
    cuda_state *st = cl->st;
    const int H = c->H, T = c->T, d = c->d, R = st->R, BH = c->B * H, a0 = A.lo, a1 = A.hi, n = a1 - a0;
    const size_t Td = (size_t)T * d, HH = (size_t)H * H;
    strip_maps(cl, a0, a1, 0);
    mats_in dO = q_in(bw.dout + (size_t)a0 * d, d, Td);
    if (c->group_norm || c->gate) {
        gemm_kv(cl, MM_NN, n, d, a1, 1.0f, map_in(st->pd, a0), kv_in(cl->v, d, Td), 0.0f,
                q_out(st->o, d, (size_t)R * d));  // O again
        ng_io io = {};
        io.go = bw.dout + (size_t)a0 * d, io.ghs = Td, io.dO = st->dO;
        normgate_backward(cl, st->o, io, (size_t)R * d, n, R, bw.ng, st->acc + bw.gl.ng);
        dO = q_in(st->dO, d, (size_t)R * d);
    }
    gemm_kv(cl, MM_TN, a1, d, n, 1.0f, map_in(st->pd, a0), dO, 1.0f, kv_out(bw.dv, d, Td));      // dV += PD^T dO
    gemm_kv(cl, MM_NT, n, a1, d, 1.0f, dO, kv_in(cl->v, d, Td), 0.0f, map_out(st->dp2, a0));  // dP2 = dO v^T
    MTA_LAUNCH(k_drop, cols_grid(a1, n, BH), CT, 0, cl->s)(st->dp2, st->dp2, H, T, a0, a1, cl->ctx->seed, cl->drop_thr,
                                                          cl->drop_scale, cl->ds);
    if (c->post_ch) mix_backward(cl, st->dp2, st->p1, st->dp1, st->mats + 3 * HH, c->post_ch, A, st->acc + bw.gl.hc);
    if (c->post_cq) conv_kernel_grad(cl, st->dp1, st->p, c->post_cq, c->post_ck, A, st->acc + bw.gl.post);
}

// Stage B, rows B (their dP1 rows, up to A's last, are in): dP through the transposed post conv,
// dS2 (softmax backward), dS1 through the transposed mixing and its kernel gradient; the pre
// conv's kernel gradient.
void stage_b(const backward_call &bw, mta_rows B) {
    call *cl = bw.cl;
    const mta_config *c = cl->c;
    cuda_state *st = cl->st;
    const int H = c->H, T = c->T, BH = c->B * H, n = B.hi - B.lo;
    if (c->post_cq)
        MTA_LAUNCH(k_conv_t, cols_grid(B.hi, n, BH), CT, 0, cl->s)(
            st->dp1, st->dp, cl->p->w_post, H, c->post_cq, c->post_ck, T - 1, B.lo, 0, cl->ds, T);
    MTA_LAUNCH(k_softmax_t, dim3((unsigned)n, (unsigned)BH), red_threads(B.hi, 256), 0, cl->s)(
        st->p, st->dp, H, T, B.lo, cl->ds);
    if (c->pre_head_mix) mix_backward(cl, st->dp, st->s1, st->ds1, st->mats + (size_t)H * H, H, B, st->acc + bw.gl.mix);
    if (c->pre_cq) conv_kernel_grad(cl, st->ds1, st->z, c->pre_cq, c->pre_ck, B, st->acc + bw.gl.pre);
}

// Stage C, rows C (their dS1 rows, up to B's last, are in): dZ through the transposed pre conv,
// then dq += dZ k / sqrt(d) and dk += dZ^T q / sqrt(d).
void stage_c(const backward_call &bw, mta_rows C) {
    call *cl = bw.cl;
    const mta_config *c = cl->c;
    cuda_state *st = cl->st;
    const int H = c->H, T = c->T, d = c->d, BH = c->B * H, n = C.hi - C.lo;
    const size_t Td = (size_t)T * d;
    st->dz.base = C.lo;
    MTA_LAUNCH(k_conv_t, cols_grid(C.hi, n, BH), CT, 0, cl->s)(
        st->ds1, st->dz, c->pre_cq ? cl->p->w_pre : NULL, H, c->pre_cq, c->pre_ck, T - 1, C.lo, C.hi, cl->ds, T);
    gemm_kv(cl, MM_NN, n, d, C.hi, cl->scale, map_in(st->dz, C.lo), kv_in(cl->k, d, Td), 1.0f,
            q_out(bw.dq + (size_t)C.lo * d, d, Td));  // dq += dZ k / sqrt(d)
    gemm_kv(cl, MM_TN, C.hi, d, n, cl->scale, map_in(st->dz, C.lo), q_in(cl->q + (size_t)C.lo * d, d, Td), 1.0f,
            kv_out(bw.dk, d, Td));  // dk += dZ^T q / sqrt(d)
}

// The per-head accumulators into the parameters' gradients, heads and batch elements in order.
void sum_grads(const backward_call &bw, const mta_grads *g) {
    const call *cl = bw.cl;
    const mta_config *c = cl->c;
    const grad_layout &gl = bw.gl;
    const int B = c->B, H = c->H, d = c->d, BH = B * H, np = 2 * d + 1, ns = ng_slots(cl->st->R);
    const size_t HH = (size_t)H * H, K1 = (size_t)c->pre_cq * c->pre_ck, K2 = (size_t)c->post_cq * c->post_ck;
    // Where parameter `param`'s partials are: n slabs of `stride` doubles from acc, its entry e at
    // off0 + e of each (or, with ch, at the head conv's matrix entry: k_sum_grad). A row per
    // parameter of mta.h, found by its index: its gradient has the parameter's size
    // (mta_param_sizes_of).
    struct {
        int param;
        size_t acc, stride;
        int n, off0, ch;
    } const sums[] = {
        {MTA_W_PRE, gl.pre, H * K1, B, 0, 0},
        {MTA_W_PRE_HEAD, gl.mix, HH, B, 0, 0},
        {MTA_W_POST, gl.post, H * K2, B, 0, 0},
        {MTA_W_POST_HEAD, gl.hc, HH, B, 0, c->post_ch},
        {MTA_GN_WEIGHT, gl.ng, (size_t)np, BH * ns, 0, 0},
        {MTA_GATE_W, gl.ng, (size_t)np, BH * ns, d, 0},
        {MTA_GATE_B, gl.ng, (size_t)np, BH * ns, 2 * d, 0},
    };
    static_assert(sizeof sums / sizeof sums[0] == MTA_N_PARAMS, "sum_grads: a row for each parameter of mta.h");
    const mta_param_sizes ps = cl->ctx->sizes;
    for (const auto &x : sums) {
        const int count = (int)ps.w[x.param];
        if (g->w[x.param] && count)
            MTA_LAUNCH(k_sum_grad, (count + 127) / 128, 128, 0, cl->s)(
                g->w[x.param], count, cl->st->acc + x.acc, x.stride, x.n, x.off0, H, x.ch);
    }
}

// The float32 path's backward (cuda_setup done), on float32 tensors.
mta_status f32_backward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                        const float *dout, float *dq, float *dk, float *dv, const mta_grads *g) {
    call cl;
    mta_status s = begin(ctx, &cl, q, k, v, p);
    if (s) return s;
    const backward_call bw = {&cl, dout, dq, dk, dv, grads_of(&ctx->cfg, cl.st->R), normgate_of(&ctx->cfg, p)};
    const cudaError_t e = cudaMemsetAsync(cl.st->acc, 0, bw.gl.total * sizeof(double), cl.s);
    if (e != cudaSuccess) return cuda_fail(ctx, e, "the backward's clearing of its accumulators");
    const mta_lag lag = mta_lag_of(&ctx->cfg, cl.st->R);
    for (int i0 = 0; i0 < mta_lag_end(lag); i0 += lag.R) {
        const mta_strip strip = mta_lag_strip(lag, i0);
        if (mta_rows_any(strip.A)) stage_a(bw, strip.A);
        if (mta_rows_any(strip.B)) stage_b(bw, strip.B);
        if (mta_rows_any(strip.C)) stage_c(bw, strip.C);
    }
    sum_grads(bw, g);
    return finish(&cl, "backward");
}

// ---- bfloat16 storage (mta_config.dtype = MTA_DTYPE_BF16) -----------------------------------------
//
// The kernels compute in float32 and write float32: out, and the gradients dq, dk, dv they add to
// over key tiles. With bfloat16 tensors the backend keeps float32 buffers for those (io_bufs): out
// is narrowed once after the norm and gate; dq, dk, dv are widened, added to, and narrowed once.
// The tensor-core path reads q, k, v and dout as they are (k_tc_round, and k_tc_prep or the
// norm's backward, k_normgate_t), rounds out from its O (tc_forward) and adds to dk, dv where it
// writes them, once (tc_add_kv), so it has no q, k, v, dout, out, dk, dv buffers; the float32
// path reads float32, so the backend widens those into io_bufs too.

// The float32 buffers of a call on bfloat16 tensors: q, k, v, dout, out, dk, dv (the float32
// path), dq; NULL where not needed.
struct io_bufs {
    float *q, *k, *v, *dout, *out, *dq, *dk, *dv;
};

// Carves the buffers from mem (NULL: counts) and returns the bytes.
size_t io_carve(const mta_config *c, int tc, void *mem, io_bufs *b) {
    const size_t nq = q_count(c), nkv = kv_count(c);
    carver cv = {(unsigned char *)mem, 0};
    io_bufs x;
    const int f32 = !tc;
    x.q = f32 ? cv.take<float>(nq) : NULL, x.k = f32 ? cv.take<float>(nkv) : NULL, x.v = f32 ? cv.take<float>(nkv) : NULL;
    x.dout = f32 ? cv.take<float>(nq) : NULL;
    x.out = f32 ? cv.take<float>(nq) : NULL, x.dq = cv.take<float>(nq);
    x.dk = f32 ? cv.take<float>(nkv) : NULL, x.dv = f32 ? cv.take<float>(nkv) : NULL;
    if (b) *b = x;
    return cv.at;
}

// The buffers of ctx's config (cuda_setup done), allocated on first use.
mta_status io_setup(mta_ctx *ctx, io_bufs *b) {
    cuda_state *st = (cuda_state *)ctx->state;
    if (!st->io) st->io_bytes = io_carve(&ctx->cfg, st->tc, NULL, NULL);
    const mta_status s = alloc_once(ctx, &st->io, st->io_bytes, "the bfloat16 tensors' float32 buffers");
    if (s) return s;
    io_carve(&ctx->cfg, st->tc, st->io, b);
    return MTA_OK;
}

// n values of x, bfloat16 storage to float32 (widen) or back (narrow), on the context's stream.
void io_widen(const mta_ctx *ctx, const float *x16, float *x, size_t n) {
    MTA_LAUNCH(k_bf16_widen, (unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)ctx->stream)(
        (const __nv_bfloat16 *)(const void *)x16, x, n);
}
void io_narrow(const mta_ctx *ctx, const float *x, float *x16, size_t n) {
    MTA_LAUNCH(k_bf16_narrow, (unsigned)((n + 255) / 256), 256, 0, (cudaStream_t)ctx->stream)(
        x, (__nv_bfloat16 *)(void *)x16, n);
}

mta_status io_done(mta_ctx *ctx, mta_status s, const char *what) {
    if (s) return s;
    const cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? MTA_OK : cuda_fail(ctx, e, what);
}

mta_status bf16_forward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                        float *out) {
    const mta_config *c = &ctx->cfg;
    io_bufs b;
    mta_status s = io_setup(ctx, &b);
    if (s) return s;
    if (tc_on(ctx)) {
        s = tc_forward(ctx, q, k, v, p, out);  // reads q, k, v and writes out as bfloat16
    } else {
        io_widen(ctx, q, b.q, q_count(c)), io_widen(ctx, k, b.k, kv_count(c)), io_widen(ctx, v, b.v, kv_count(c));
        s = f32_forward(ctx, b.q, b.k, b.v, p, b.out);
        if (!s) io_narrow(ctx, b.out, out, q_count(c));
    }
    return io_done(ctx, s, "the bfloat16 output's rounding");
}

mta_status bf16_backward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                         const float *dout, float *dq, float *dk, float *dv, const mta_grads *g) {
    const mta_config *c = &ctx->cfg;
    const size_t nq = q_count(c), nkv = kv_count(c);
    io_bufs b;
    mta_status s = io_setup(ctx, &b);
    if (s) return s;
    io_widen(ctx, dq, b.dq, nq);
    if (b.dout) io_widen(ctx, dout, b.dout, nq);
    if (tc_on(ctx)) {
        // q, k, v and dout as bfloat16; dk, dv added to as bfloat16 (tc_add_kv)
        s = tc_backward(ctx, q, k, v, p, dout, b.dq, dk, dv, g);
    } else {
        io_widen(ctx, q, b.q, nq), io_widen(ctx, k, b.k, nkv), io_widen(ctx, v, b.v, nkv);
        io_widen(ctx, dk, b.dk, nkv), io_widen(ctx, dv, b.dv, nkv);
        s = f32_backward(ctx, b.q, b.k, b.v, p, b.dout, b.dq, b.dk, b.dv, g);
        if (!s) io_narrow(ctx, b.dk, dk, nkv), io_narrow(ctx, b.dv, dv, nkv);
    }
    if (!s) io_narrow(ctx, b.dq, dq, nq);
    return io_done(ctx, s, "the bfloat16 gradients' rounding");
}

mta_status cuda_forward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p, float *out) {
    const launch_scope record(ctx);
    ctx->dropout_on = ctx->cfg.dropout > 0 && ctx->training;
    const mta_status s = cuda_setup(ctx);
    if (s) return s;
    if (ctx->cfg.dtype == MTA_DTYPE_BF16) return bf16_forward(ctx, q, k, v, p, out);
    return tc_on(ctx) ? tc_forward(ctx, q, k, v, p, out) : f32_forward(ctx, q, k, v, p, out);
}

mta_status cuda_backward(mta_ctx *ctx, const float *q, const float *k, const float *v, const mta_params *p,
                         const float *dout, float *dq, float *dk, float *dv, const mta_grads *g) {
    const launch_scope record(ctx);
    const mta_status s = cuda_setup(ctx);
    if (s) return s;
    if (ctx->cfg.dtype == MTA_DTYPE_BF16) return bf16_backward(ctx, q, k, v, p, dout, dq, dk, dv, g);
    return tc_on(ctx) ? tc_backward(ctx, q, k, v, p, dout, dq, dk, dv, g) : f32_backward(ctx, q, k, v, p, dout, dq, dk, dv, g);
}

// The compute capability the build's code runs on: sm_90 machine code and compute_90 PTX run on
// 9.0 and later (nvcc's __CUDA_ARCH_LIST__ names what was compiled; its smallest entry counts).
#if defined(MTAC_CUDA_EMU)
const int BUILT_ARCH = MTAC_CUDA_EMU_ARCH;
#elif defined(__CUDA_ARCH_LIST__)
constexpr int min_arch(int a) { return a; }
template <typename... R> constexpr int min_arch(int a, R... r) { return a < min_arch(r...) ? a : min_arch(r...); }
const int BUILT_ARCH = min_arch(__CUDA_ARCH_LIST__) / 10;
#else
const int BUILT_ARCH = 90;
#endif

// 1 when the current device runs this build's code. The attributes are cheap to ask for (the
// memory hooks ask on every call); a failed query is cleared, not left to the next call's check,
// and an error already pending is left alone.
int cuda_available(void) {
    int n = 0, dev = 0, major = 0, minor = 0;
    const int ok = cudaGetDeviceCount(&n) == cudaSuccess && n > 0 && cudaGetDevice(&dev) == cudaSuccess &&
                   cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                   cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess;
    if (!ok) cudaGetLastError();
    return ok && major * 10 + minor >= BUILT_ARCH;
}

// The memory hooks of the backend table: device memory through the runtime.
mta_status dev_status(cudaError_t e) {
    if (e == cudaSuccess) return MTA_OK;
    cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? MTA_ERR_NOMEM : MTA_ERR_DEVICE;
}
mta_status dev_alloc(void **p, size_t bytes) { return dev_status(cudaMalloc(p, bytes ? bytes : 1)); }
mta_status dev_free(void *p) { return dev_status(cudaFree(p)); }
mta_status dev_upload(void *dst, const void *src, size_t bytes) {
    return dev_status(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
mta_status dev_download(void *dst, const void *src, size_t bytes) {
    return dev_status(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
mta_status dev_synchronize(void) { return dev_status(cudaDeviceSynchronize()); }

// What the backend computes (mta_internal.h): every step on the float32 path, and precision
// MTA_BF16 on the tensor-core path where it covers the config on the device (tc_covers), else in
// float32.
int cuda_computes(const mta_config *c, mta_use u) {
    (void)c;
    switch (u) {
    case MTA_USE_PRE_CONV: case MTA_USE_PRE_HEAD_MIX: case MTA_USE_POST_CONV: case MTA_USE_POST_HEAD_CONV:
    case MTA_USE_GROUP_NORM: case MTA_USE_DEPTH_SCALE: case MTA_USE_GATE: case MTA_USE_DROPOUT:
    case MTA_USE_GQA: case MTA_USE_BF16: case MTA_USE_DOCUMENTS: case MTA_USE_BF16_STORAGE: return 1;
    default: return 0;
    }
}

// tc_covers on the current device, for a config without a context (mta_tensor_core_path).
int tc_covers_here(const mta_config *c) {
    size_t optin = 0;
    if (device_smem_optin(&optin) != cudaSuccess) {
        cudaGetLastError();  // no device: the call's error is not left for the next check
        return 0;
    }
    return tc_covers(c, optin);
}

}  // namespace

#ifdef MTAC_CUDA_EMU
extern "C" const mta_backend_impl mta_cuda_emu_backend = {
#else
// The module's exported symbols, which libmtac looks up when it opens libmtac_cuda (mta.c): the
// ABI it was built for, checked first, and the backend.
extern "C" __attribute__((visibility("default"))) const mta_module_abi mtac_backend_abi = MTA_MODULE_ABI;
extern "C" __attribute__((visibility("default"))) const mta_backend_impl mta_cuda_backend = {
#endif
    cuda_forward, cuda_backward, cuda_release, NULL, cuda_available,
    1, dev_alloc, dev_free, dev_upload, dev_download, dev_synchronize, cuda_computes, tc_covers_here, tc_computes,
};
