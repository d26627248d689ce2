// mma.h of the CUDA emulator (cuda_emu.h): nvcuda::wmma's 16x16x16 tiles of bf16 or fp16 inputs
// with float32 accumulation, for the tensor-core kernels.
//
// Emulation choice: CUDA leaves unspecified which elements of a tile each lane of the warp holds.
// (The PTX primitives of attn/mma_ptx.cuh, whose layouts are specified, are emulated per lane:
// cuda_emu.h.)
// Here every lane holds the whole tile (num_elements = 256, x[r * 16 + c] is row r, column c of
// the m x k, k x n or m x n tile), so element-wise loops over x[] work as on a GPU, while code
// that assumes a lane-to-element mapping is not supported. mma_sync accumulates in float32 in k
// order; a GPU's tensor cores sum in another order and internal precision. Products of bf16 or fp16
// inputs are exact in float32, so the two differ only in the rounding of the k additions: within
// about k * 2^-24 * sum_k |a b| each (tests/test_cuda_emu.cpp checks that bound).
// The operations are warp-collective on a GPU (all 32 lanes call them with the same arguments);
// here each lane does the whole work, and the emulator checks (cuemu::wmma_check) that the call
// is in a kernel whose block is a whole number of warps, that a tile's pointer is 256-bit
// aligned and that its ldm is a multiple of 16 bytes, as CUDA requires. load_matrix_sync,
// mma_sync and store_matrix_sync are warp barriers at entry (cuemu::warp_sync), as a GPU's warp
// executes each of them together: a warp that loads a sum from memory, adds a product and stores
// it back adds it once, not once per lane.
#ifndef MTAC_CUDA_EMU_MMA_H
#define MTAC_CUDA_EMU_MMA_H

#include "attn/cuda_emu/cuda_emu.h"
#include "cuda_bf16.h"
#include "cuda_fp16.h"

namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename T> struct cuemu_is_input { static const bool value = false; };
template <> struct cuemu_is_input<__nv_bfloat16> { static const bool value = true; };
template <> struct cuemu_is_input<__half> { static const bool value = true; };
template <typename Use, typename T, typename Layout> struct cuemu_supported { static const bool value = false; };
template <typename Use, typename T> struct cuemu_supported<Use, T, row_major> { static const bool value = cuemu_is_input<T>::value; };
template <typename Use, typename T> struct cuemu_supported<Use, T, col_major> { static const bool value = cuemu_is_input<T>::value; };
template <> struct cuemu_supported<accumulator, float, void> { static const bool value = true; };

template <typename Use, int m, int n, int k, typename T, typename Layout = void>
class fragment {
    static_assert(m == 16 && n == 16 && k == 16, "cuda-emu: wmma tiles are 16x16x16 only");
    static_assert(!std::is_same<Use, accumulator>::value || cuemu_supported<accumulator, T, Layout>::value,
                  "cuda-emu: accumulators are float, without a layout");
    static_assert(std::is_same<Use, accumulator>::value || cuemu_supported<Use, T, Layout>::value,
                  "cuda-emu: matrix_a and matrix_b fragments are __nv_bfloat16 or __half, row_major or col_major");

  public:
    typedef T element_type;
    typedef T storage_element_type;
    enum { num_elements = 256 };
    T x[num_elements];
};

template <typename Use, int m, int n, int k, typename T, typename L>
inline void fill_fragment(fragment<Use, m, n, k, T, L> &f, const typename fragment<Use, m, n, k, T, L>::element_type &v) {
    ::cuemu::wmma_check("fill_fragment", NULL, 0, 0);
    for (int i = 0; i < f.num_elements; i++) f.x[i] = v;
}

// Element (r, c) of the tile from p[r * ldm + c] (row-major) or p[c * ldm + r] (column-major).
template <typename T, typename S>
inline void cuemu_load(T *x, const S *p, unsigned ldm, bool row) {
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) x[r * 16 + c] = row ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r];
}

template <typename Use, typename T, typename L>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p, unsigned ldm) {
    static_assert(!std::is_same<Use, accumulator>::value, "cuda-emu: an accumulator's load names its layout");
    ::cuemu::wmma_check("load_matrix_sync", p, ldm, sizeof(T));
    ::cuemu::warp_sync("nvcuda::wmma::load_matrix_sync");
    cuemu_load(f.x, p, ldm, std::is_same<L, row_major>::value);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm, layout_t layout) {
    ::cuemu::wmma_check("load_matrix_sync", p, ldm, sizeof(float));
    ::cuemu::warp_sync("nvcuda::wmma::load_matrix_sync");
    cuemu_load(f.x, p, ldm, layout == mem_row_major);
}

inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm, layout_t layout) {
    ::cuemu::wmma_check("store_matrix_sync", p, ldm, sizeof(float));
    ::cuemu::warp_sync("nvcuda::wmma::store_matrix_sync");
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 16; c++) (layout == mem_row_major ? p[(size_t)r * ldm + c] : p[(size_t)c * ldm + r]) = f.x[r * 16 + c];
}

// d = a b + c, summed in float32 in k order from c; d may be c. Each product is exact in float32,
// so contracting it into a fused multiply-add changes nothing.
template <typename T, typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d, const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, T, LB> &b, const fragment<accumulator, 16, 16, 16, float> &c) {
    ::cuemu::wmma_check("mma_sync", NULL, 0, 0);
    ::cuemu::warp_sync("nvcuda::wmma::mma_sync");
    float out[256];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) {
            float s = c.x[i * 16 + j];
            for (int k = 0; k < 16; k++) s += (float)a.x[i * 16 + k] * (float)b.x[k * 16 + j];
            out[i * 16 + j] = s;
        }
    memcpy(d.x, out, sizeof out);
}

}  // namespace wmma
}  // namespace nvcuda

#endif
