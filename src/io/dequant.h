// dequant.h: ggml's tensor types (GGUF's tensor data) and their conversion to float32.
// A quantised type stores a row in blocks of block_size values, type_size bytes each; the
// layouts are ggml's (docs/models.md, "Importing"). Dequantizing is exact: each value is computed
// with the float32 operations of the gguf Python package's dequantize, in the same order.
#ifndef MTAC_DEQUANT_H
#define MTAC_DEQUANT_H

#include <stddef.h>
#include <stdint.h>

// ggml's type numbers (as stored in a GGUF tensor info)
enum {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7, GGML_Q8_0 = 8,
    GGML_Q8_1 = 9, GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13, GGML_Q6_K = 14,
    GGML_Q8_K = 15, GGML_BF16 = 30,
};

// The name of a ggml type ("Q4_K"), or NULL for a number ggml does not define (up to 41).
const char *ggml_type_name(uint32_t type);
// Whether dequant_rows converts this type.
int ggml_type_supported(uint32_t type);
// Values per block and bytes per block of a supported type (1 and the element size for F32, F16,
// BF16); 0 for an unsupported one.
int ggml_block_size(uint32_t type);
int ggml_type_size(uint32_t type);

// Converts n values (a multiple of the type's block size) from src to float32 at dst.
void dequant_rows(uint32_t type, const void *src, float *dst, size_t n);

// IEEE half and bfloat16 to float (exact).
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t h);

#endif
