// cuda_kernels.cuh: the map kernels of the CUDA backend (mta_cuda.cu), one thread per map entry
// or one block per row, over windows of rows in GPU memory. They compute what src/attn/conv.c and
// shared.c compute on the CPU, on every (batch, head) at once.
//
// A window (mview) holds rows of one map for all B*H heads: row r of head bh is at
// p + bh*hs + slot(r)*ld, with slot(r) = r % cap for a ring of cap rows (strips of R rows start at
// multiples of R and cap is a multiple of R, so a strip's rows are contiguous for the matrix
// products) or r - base for a plain buffer. Like the CPU kernels they read only the causal part
// (j <= r) of a source row and write columns 0..r of an output row unless told to zero more.
//
// Packed documents: ds is the (B,T) array of document starts (mta_row_start; NULL, one document
// per sequence). A kernel reads row r's columns s..r only, s its document's start, and only rows
// of its document, and writes 0 in columns 0..s-1, so every map is zero outside the documents'
// causal blocks (the score products leave other values there, which no kernel reads).
#ifndef MTAC_ATTN_CUDA_KERNELS_CUH
#define MTAC_ATTN_CUDA_KERNELS_CUH

#include "attn/mta_internal.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

// Launches and shared arrays are written through two macros, so that the same source runs under
// nvcc and in the CUDA emulator (cuda_emu/cuda_emu.h, the cuda-emu backend):
//   MTA_LAUNCH(kernel, grid, block, shmem, stream)(args...)   is   kernel<<<grid, block, shmem, stream>>>(args...)
//   MTA_SHARED(T, name, n);                                    is   __shared__ T name[n];
//   MTA_DYNAMIC_SHARED(T, name);                               is   the launch's shmem bytes, as T *name
//   MTA_LAUNCH_CLUSTER(kernel, grid, block, shmem, stream, cs)(args...)   launches thread block
//     clusters of cs blocks along x (cudaLaunchKernelEx's cluster dimension; attn/cluster_ptx.cuh)
// Each launch is also noted by name in the launch record of the call in progress on this host
// thread (mta_ctx_record_launches; the backend's calls set it, mta_cuda.cu's launch_scope): when
// no record is on, that is a thread-local load and a test.
inline mta_launch_log *&mta_launch_record() {
    static thread_local mta_launch_log *log = nullptr;
    return log;
}
inline void mta_launch_note(const char *name) {
    if (mta_launch_log *log = mta_launch_record()) mta_launch_log_note(log, name);
}
#ifdef MTAC_CUDA_EMU
// The emulator adds the launch's warp-level operations to its kernel's row of the record.
inline mta_kernel_ops *mta_launch_note_ops(const char *name) {
    mta_launch_log *log = mta_launch_record();
    const int i = log ? mta_launch_log_note(log, name) : -1;
    return i >= 0 ? &log->ops[i] : nullptr;
}
#define MTA_LAUNCH(k, grid, block, shmem, stream) ::cuemu::launch(#k, k, grid, block, shmem, stream, mta_launch_note_ops(#k))
#define MTA_LAUNCH_CLUSTER(k, grid, block, shmem, stream, cs) \
    ::cuemu::launch(#k, k, grid, block, shmem, stream, mta_launch_note_ops(#k), cs)
#define MTA_SHARED(T, name, n) T *const name = (T *)::cuemu::shared_array((n) * sizeof(T), alignof(T))
#define MTA_DYNAMIC_SHARED(T, name) T *const name = (T *)::cuemu::dynamic_shared()
#else
#define MTA_LAUNCH(k, grid, block, shmem, stream) mta_launch_note(#k), k<<<grid, block, shmem, stream>>>
// A launch of clusters of cs blocks along x (grid.x a multiple of cs): the runtime's error, as a
// <<<>>> launch's, is left for cudaGetLastError.
template <typename... P> struct mta_cluster_launch {
    void (*kernel)(P...);
    dim3 grid, block;
    size_t shmem;
    cudaStream_t stream;
    unsigned cs;
    template <typename... A> void operator()(A &&...a) const {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = shmem, cfg.stream = stream;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = cs, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
        cfg.attrs = at, cfg.numAttrs = 1;
        (void)cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(a)...);
    }
};
template <typename... P>
mta_cluster_launch<P...> mta_cluster(void (*k)(P...), dim3 grid, dim3 block, size_t shmem, cudaStream_t s, unsigned cs) {
    return mta_cluster_launch<P...>{k, grid, block, shmem, s, cs};
}
#define MTA_LAUNCH_CLUSTER(k, grid, block, shmem, stream, cs) mta_launch_note(#k), mta_cluster(k, grid, block, shmem, stream, cs)
#define MTA_SHARED(T, name, n) __shared__ T name[n]
#define MTA_DYNAMIC_SHARED(T, name)                        \
    extern __shared__ __align__(16) unsigned char mta_dynamic_shared_[]; \
    T *const name = (T *)mta_dynamic_shared_
#endif

typedef struct {
    float *p;
    int cap, base;  // cap > 0: a ring of cap rows; cap = 0: rows from base on
    size_t ld, hs;  // row stride, head stride (floats)
} mview;

__host__ __device__ __forceinline__ float *vrow(mview v, int bh, int r) {
    const int slot = v.cap ? r % v.cap : r - v.base;
    return v.p + (size_t)bh * v.hs + (size_t)slot * v.ld;
}

// Key-query convolution, rows [a0, a1) (grid: x columns, y rows, z heads):
//   dst[i,j] = sum_{a<cq, c<ck} w[h,a,c] * src[i-(cq-1)+a, j-p+c],  j <= i,
// with src zero above its diagonal and outside its document [s, ..) (rows and columns).
__global__ void k_conv(mview src, mview dst, const float *__restrict__ w, int H, int cq, int ck, int a0,
                       const int *ds, int T) {
    const int i = a0 + blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x, bh = blockIdx.z;
    if (j > i) return;
    const float *wh = w + (size_t)(bh % H) * cq * ck;
    const int s0 = mta_row_start(ds, T, bh / H, i);
    const int p = (ck - 1) / 2;
    float s = 0.0f;
    for (int a = 0; j >= s0 && a < cq; a++) {
        const int r = i - (cq - 1) + a;
        if (r < s0) continue;
        const float *x = vrow(src, bh, r);
        for (int c = 0; c < ck; c++) {
            const int col = j - p + c;
            if (col >= s0 && col <= r) s = fmaf(wh[a * ck + c], x[col], s);
        }
    }
    vrow(dst, bh, i)[j] = s;
}

// The transposed convolution, rows [r0, r1) (grid: x columns up to zero_to, y rows, z heads):
//   dst[r,j] = sum_{a,c} w[h,a,c] * g[r+(cq-1)-a, j+p-c],  s <= j <= r,
// over the causal entries of g in r's document and its rows up to last; w = NULL is the identity
// (a masked copy). Columns r < j < zero_to are set to 0 (the matrix products read whole strips).
__global__ void k_conv_t(mview g, mview dst, const float *__restrict__ w, int H, int cq, int ck, int last, int r0,
                         int zero_to, const int *ds, int T) {
    const int r = r0 + blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x, bh = blockIdx.z;
    if (j >= zero_to && j > r) return;
    const int b = bh / H, s0 = mta_row_start(ds, T, b, r);
    float s = 0.0f;
    if (j >= s0 && j <= r) {
        if (!w) {
            s = vrow(g, bh, r)[j];
        } else {
            const float *wh = w + (size_t)(bh % H) * cq * ck;
            const int p = (ck - 1) / 2;
            for (int a = 0; a < cq; a++) {
                const int rr = r + (cq - 1) - a;
                // rows past the document's end: a later row rr is in it when it starts where r does
                if (rr > last || mta_row_start(ds, T, b, rr) != s0) continue;
                const float *x = vrow(g, bh, rr);
                for (int c = 0; c < ck; c++) {
                    const int col = j + p - c;
                    if (col >= s0 && col <= rr) s = fmaf(wh[a * ck + c], x[col], s);
                }
            }
        }
    }
    vrow(dst, bh, r)[j] = s;
}

// Head mixing, rows [a0, a1) (grid: x columns, y rows, z batch):
//   dst[h] = sum_h' m[h*H + h'] src[h'],  s <= j <= i (0 before the document's start s).
// The forward mixing and head convolution use their (H,H) matrices, the backward ones the
// transposes.
__global__ void k_mix(mview src, mview dst, const float *__restrict__ m, int H, int a0, const int *ds, int T) {
    const int i = a0 + blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x, b = blockIdx.z;
    if (j > i) return;
    const int in_doc = j >= mta_row_start(ds, T, b, i);
    for (int h = 0; h < H; h++) {
        float s = 0.0f;
        for (int h2 = 0; in_doc && h2 < H; h2++) {
            const float mv = m[h * H + h2];
            if (mv != 0.0f) s = fmaf(mv, vrow(src, b * H + h2, i)[j], s);
        }
        vrow(dst, b * H + h, i)[j] = s;
    }
}

// Block-wide reduction (blockDim.x a power of two, at most the 256 entries of the kernels' sh) in a
// fixed order, the same result on
// every run: block_sum and block_max.
struct op_sum {
    template <typename F> __device__ F operator()(F a, F b) const { return a + b; }
};
struct op_max {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

template <typename F, typename Op>
__device__ F block_reduce(F x, F *sh, Op op) {
    const int t = threadIdx.x;
    sh[t] = x;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] = op(sh[t], sh[t + s]);
        __syncthreads();
    }
    F r = sh[0];
    __syncthreads();
    return r;
}

template <typename F>
__device__ F block_sum(F x, F *sh) { return block_reduce(x, sh, op_sum()); }
__device__ float block_max(float x, float *sh) { return block_reduce(x, sh, op_max()); }

// Softmax of rows [a0, a1) in place over columns s..i, s the row's document start (grid: x rows,
// y heads; H heads). save = 1: the row max and 1/sum go to mx, inv (B*H*T); save = 0: the
// probabilities come from the saved ones, bit for bit what the forward computed.
__global__ void k_softmax(mview s, float *mx, float *inv, int H, int T, int a0, int save, const int *ds) {
    MTA_SHARED(float, sh, 256);
    const int i = a0 + blockIdx.x, bh = blockIdx.y, s0 = mta_row_start(ds, T, bh / H, i);
    float *x = vrow(s, bh, i);
    const size_t row = (size_t)bh * T + i;
    float m, iv;
    if (save) {
        float lm = -INFINITY;
        for (int j = s0 + threadIdx.x; j <= i; j += blockDim.x) lm = fmaxf(lm, x[j]);
        m = block_max(lm, sh);
        float ls = 0.0f;
        for (int j = s0 + threadIdx.x; j <= i; j += blockDim.x) ls += expf(x[j] - m);
        iv = 1.0f / block_sum(ls, sh);
        if (threadIdx.x == 0) mx[row] = m, inv[row] = iv;
    } else {
        m = mx[row], iv = inv[row];
    }
    for (int j = threadIdx.x; j <= i; j += blockDim.x) x[j] = j < s0 ? 0.0f : expf(x[j] - m) * iv;
}

// Softmax backward of rows [r0, r1) in place: g = p * (g - sum_j p g) over the row's document
// (grid: x rows, y heads; H heads).
__global__ void k_softmax_t(mview p, mview g, int H, int T, int r0, const int *ds) {
    MTA_SHARED(float, sh, 256);
    const int r = r0 + blockIdx.x, bh = blockIdx.y, s0 = mta_row_start(ds, T, bh / H, r);
    const float *pr = vrow(p, bh, r);
    float *gr = vrow(g, bh, r);
    float ls = 0.0f;
    for (int j = s0 + threadIdx.x; j <= r; j += blockDim.x) ls += pr[j] * gr[j];
    const float D = block_sum(ls, sh);
    for (int j = threadIdx.x; j <= r; j += blockDim.x) gr[j] = j < s0 ? 0.0f : pr[j] * (gr[j] - D);
}

// The map that multiplies V, rows [a0, a1), columns 0..a1-1 (grid: x columns, y rows, z heads):
// dst = src with dropout (drop_thr > 0: keep with the mask of (seed, b, h, i, j), scaled), zero
// past the diagonal and before the document's start. The backward applies it to dP2 = dO v^T
// the same way (src may be dst), which makes that product a map like the others.
__global__ void k_drop(mview src, mview dst, int H, int T, int a0, int a1, uint64_t seed, uint32_t drop_thr,
                       float drop_scale, const int *ds) {
    const int i = a0 + blockIdx.y, j = blockIdx.x * blockDim.x + threadIdx.x, bh = blockIdx.z;
    if (j >= a1) return;
    float x = 0.0f;
    if (j <= i && j >= mta_row_start(ds, T, bh / H, i)) {
        x = vrow(src, bh, i)[j];
        if (drop_thr) x = mta_dropout_keep(seed, ((size_t)bh * T + i) * (size_t)T + j, drop_thr) ? x * drop_scale : 0.0f;
    }
    vrow(dst, bh, i)[j] = x;
}

// Sum over rows [r0, r1) and columns j <= r of x[ho] * y[hi] for each pair of heads (ho, hi) of
// a group of gs heads (grid: x ho*H + hi, y batch), added to acc[(b*H + ho)*H + hi] (the mixing
// kernels' gradients: dS2 with S1, dP2 with P1), columns from each row's document start on (y
// may be the scores, which hold products before it).
__global__ void k_pair_grad(mview x, mview y, int H, int gs, int r0, int r1, double *acc, const int *ds, int T) {
    MTA_SHARED(double, sh, 256);
    const int ho = blockIdx.x / H, hi = blockIdx.x % H, b = blockIdx.y;
    if (ho / gs != hi / gs) return;
    double s = 0.0;
    for (int r = r0; r < r1; r++) {
        const float *xr = vrow(x, b * H + ho, r), *yr = vrow(y, b * H + hi, r);
        float ls = 0.0f;
        for (int j = mta_row_start(ds, T, b, r) + threadIdx.x; j <= r; j += blockDim.x) ls = fmaf(xr[j], yr[j], ls);
        s += ls;
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) acc[((size_t)b * H + ho) * H + hi] += s;
}

// A key-query convolution's kernel gradient from output-gradient rows [r0, r1) (grid: x taps
// a*ck + c, y heads): acc[bh*cq*ck + a*ck + c] += sum_{r, s <= j <= r} g[r,j] * src[r-(cq-1)+a, j-p+c]
// over the source's rows and columns in r's document [s, ..).
__global__ void k_conv_wgrad(mview g, mview src, int H, int cq, int ck, int r0, int r1, double *acc, const int *ds,
                             int T) {
    MTA_SHARED(double, sh, 256);
    const int a = blockIdx.x / ck, c = blockIdx.x % ck, bh = blockIdx.y, p = (ck - 1) / 2;
    double s = 0.0;
    for (int r = r0; r < r1; r++) {
        const int rs = r - (cq - 1) + a, s0 = mta_row_start(ds, T, bh / H, r);
        if (rs < s0) continue;
        const float *gr = vrow(g, bh, r), *xr = vrow(src, bh, rs);
        float ls = 0.0f;
        for (int j = s0 + threadIdx.x; j <= r; j += blockDim.x) {
            const int col = j - p + c;
            if (col >= s0 && col <= rs) ls = fmaf(gr[j], xr[col], ls);
        }
        s += ls;
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) acc[(size_t)bh * cq * ck + blockIdx.x] += s;
}

// Settings of the group norm and gate (spec section 2, steps 8 and 9).
typedef struct {
    int d, group_norm, gate;
    float ds, eps;  // depth scale (1 when off), the norm's epsilon
    const float *gn_weight, *gate_w, *gate_b;
} normgate;

// Group norm and gate of rows of d, row after row of (B*H, rows, d) (grid: x rows, y heads), from o
// into out (o itself: in place), or with out16 (bfloat16 storage) rounded once into out16:
// out = y * sigmoid(gate_w . y + gate_b), y = o * rs * gamma * ds. y is recomputed where read, not
// stored, so o may be another buffer that stays as it is; each thread reads and writes its own entries.
__global__ void k_normgate(const float *o, float *out, __nv_bfloat16 *out16, size_t hs, normgate ng) {
    MTA_SHARED(float, sh, 256);
    const int d = ng.d;
    const size_t row = (size_t)blockIdx.y * hs + (size_t)blockIdx.x * d;
    const float *x = o + row;
    float rs = 1.0f, gv = 1.0f;
    if (ng.group_norm) {
        float ss = 0.0f;
        for (int e = threadIdx.x; e < d; e += blockDim.x) ss += x[e] * x[e];
        rs = 1.0f / sqrtf(block_sum(ss, sh) / d + ng.eps);
    }
    auto y = [&](int e) { return ng.group_norm ? x[e] * rs * ng.gn_weight[e] * ng.ds : x[e]; };
    if (ng.gate) {
        float z = 0.0f;
        for (int e = threadIdx.x; e < d; e += blockDim.x) z += ng.gate_w[e] * y(e);
        z = block_sum(z, sh) + ng.gate_b[0];
        gv = 1.0f / (1.0f + expf(-z));
    }
    for (int e = threadIdx.x; e < d; e += blockDim.x) {
        const float r = ng.gate ? y(e) * gv : y(e);
        if (out16) out16[row + e] = __float2bfloat16_rn(r);
        else out[row + e] = r;
    }
}

// Where k_normgate_t reads dout and writes dO: dout from go (float32) or go16 (bfloat16 storage),
// head stride ghs; dO into float32 dO (the head stride of o), or for the tensor-core path into
// dO16, rounded to bf16 in k_tc_prep's padded layout (Tp rows of dp per head, zero past the n
// rows and d columns), with, where D is set, D = rowsum(dO O) of the float32 dO (D: (B*H, n);
// summed by the block, block_sum's fixed order, so the same bits on every run).
struct ng_io {
    const float *go;
    const __nv_bfloat16 *go16;
    size_t ghs;
    float *dO;
    __nv_bfloat16 *dO16;
    float *D;
    int Tp, dp;
};

// Row i of head bh's dO (entries dx(e)) where io says; x: the row of o (k_normgate_t); sh: the
// block's scratch for block_sum (every thread calls this).
template <class F>
__device__ void ng_store(const ng_io &io, int bh, int i, int n, int d, size_t hs, const float *x, F dx, float *sh) {
    if (!io.dO16) {
        for (int e = threadIdx.x; e < d; e += blockDim.x) io.dO[(size_t)bh * hs + (size_t)i * d + e] = dx(e);
        return;
    }
    __nv_bfloat16 *r = io.dO16 + ((size_t)bh * io.Tp + i) * io.dp;
    float D = 0.0f;
    for (int e = threadIdx.x; e < io.dp; e += blockDim.x) {
        const float y = e < d ? dx(e) : 0.0f;
        r[e] = __float2bfloat16_rn(y);
        D = fmaf(y, e < d ? x[e] : 0.0f, D);
    }
    if (io.D) {
        D = block_sum(D, sh);
        if (threadIdx.x == 0) io.D[(size_t)bh * n + i] = D;
    }
}

// The norm and gate backward of rows [0, n) of each head (grid: x chunks of `rows` rows, y heads):
// dO (io) from dout and the recomputed o (head stride hs). Chunk x of head bh adds its rows'
// parameter gradients, in row order, to its own slot, acc[(bh*slots + x)*(2d+1) + ...] += dgamma
// (d), dgate_w (d), dgate_b (1): no two blocks share a slot, so the sums do not depend on the
// blocks' order, and k_sum_grad adds the slots up in order. dO's stages are recomputed where read,
// not stored, so that dO can be written once, as bf16 on the tensor-core path; with dO16 the last
// chunk also zeroes the padding rows.
__global__ void k_normgate_t(const float *o, ng_io io, size_t hs, int n, int rows, int slots, normgate ng,
                             double *acc) {
    MTA_SHARED(float, sh, 256);
    const int d = ng.d, bh = blockIdx.y, i0 = blockIdx.x * rows, i1 = i0 + rows < n ? i0 + rows : n;
    double *a = acc + ((size_t)bh * slots + blockIdx.x) * (2 * d + 1);
    for (int i = i0; i < i1; i++) {
        const float *x = o + (size_t)bh * hs + (size_t)i * d;
        const size_t gr = (size_t)bh * io.ghs + (size_t)i * d;
        auto g = [&](int e) { return io.go16 ? __bfloat162float(io.go16[gr + e]) : io.go[gr + e]; };
        float rs = 1.0f, gv = 1.0f, dz = 0.0f, k3 = 0.0f;
        if (ng.group_norm) {
            float ss = 0.0f;
            for (int e = threadIdx.x; e < d; e += blockDim.x) ss += x[e] * x[e];
            rs = 1.0f / sqrtf(block_sum(ss, sh) / d + ng.eps);
        }
        auto y = [&](int e) { return ng.group_norm ? x[e] * rs * ng.gn_weight[e] * ng.ds : x[e]; };
        if (ng.gate) {
            float z = 0.0f, dot = 0.0f;
            for (int e = threadIdx.x; e < d; e += blockDim.x) {
                z += ng.gate_w[e] * y(e);
                dot += g(e) * y(e);
            }
            z = block_sum(z, sh) + ng.gate_b[0];
            dot = block_sum(dot, sh);
            gv = 1.0f / (1.0f + expf(-z)), dz = dot * gv * (1.0f - gv);
            for (int e = threadIdx.x; e < d; e += blockDim.x) a[d + e] += dz * y(e);
            if (threadIdx.x == 0) a[2 * d] += dz;
        }
        // dO through the gate (t), times the norm's weight (u), through the norm (dx)
        auto t = [&](int e) { return ng.gate ? g(e) * gv + dz * ng.gate_w[e] : g(e); };
        auto u = [&](int e) { return t(e) * (ng.gn_weight[e] * ng.ds); };
        if (ng.group_norm) {
            float uo = 0.0f;
            for (int e = threadIdx.x; e < d; e += blockDim.x) {
                a[e] += t(e) * x[e] * rs * ng.ds;
                uo += u(e) * x[e];
            }
            k3 = rs * rs * rs * block_sum(uo, sh) / d;
        }
        ng_store(io, bh, i, n, d, hs, x, [&](int e) { return ng.group_norm ? rs * u(e) - k3 * x[e] : t(e); }, sh);
    }
    if (io.dO16 && i1 == n)
        for (size_t e = threadIdx.x; e < (size_t)(io.Tp - n) * io.dp; e += blockDim.x)
            io.dO16[((size_t)bh * io.Tp + n) * io.dp + e] = __float2bfloat16_rn(0.0f);
}

#endif
