// dequant.c: ggml's block formats to float32 (see dequant.h). Each block starts with its scale(s)
// as IEEE halves; the quants follow, packed as ggml packs them. The arithmetic is that of the
// gguf package's numpy code, in the same order and all in float32 (ISO C mode: no contraction of
// a*b+c into one rounding), so the results are the same bits.
#include "io/dequant.h"

#include <string.h>

enum { QK = 32, QK_K = 256 };

float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1f, m = h & 0x3ff, bits;
    if (e == 0x1f) bits = sign | 0x7f800000u | (m << 13);  // inf, NaN
    else if (e) bits = sign | ((e + 112) << 23) | (m << 13);
    else if (!m) bits = sign;
    else {  // subnormal half: normalise (it is a normal float)
        e = 113;
        while (!(m & 0x400)) m <<= 1, e--;
        bits = sign | (e << 23) | ((m & 0x3ff) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

float bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static uint16_t u16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static float half(const unsigned char *p) { return f16_to_f32(u16(p)); }

static const struct {
    const char *name;
    int block, size, supported;
} TYPES[] = {
    [GGML_F32] = {"F32", 1, 4, 1},      [GGML_F16] = {"F16", 1, 2, 1},      [GGML_Q4_0] = {"Q4_0", QK, 18, 1},
    [GGML_Q4_1] = {"Q4_1", QK, 20, 1},  [4] = {"Q4_2", 0, 0, 0},           [5] = {"Q4_3", 0, 0, 0},
    [GGML_Q5_0] = {"Q5_0", QK, 22, 1},  [GGML_Q5_1] = {"Q5_1", QK, 24, 1}, [GGML_Q8_0] = {"Q8_0", QK, 34, 1},
    [GGML_Q8_1] = {"Q8_1", 0, 0, 0},    [GGML_Q2_K] = {"Q2_K", 0, 0, 0},   [GGML_Q3_K] = {"Q3_K", 0, 0, 0},
    [GGML_Q4_K] = {"Q4_K", QK_K, 144, 1}, [GGML_Q5_K] = {"Q5_K", QK_K, 176, 1}, [GGML_Q6_K] = {"Q6_K", QK_K, 210, 1},
    [GGML_Q8_K] = {"Q8_K", 0, 0, 0},    [16] = {"IQ2_XXS", 0, 0, 0},       [17] = {"IQ2_XS", 0, 0, 0},
    [18] = {"IQ3_XXS", 0, 0, 0},        [19] = {"IQ1_S", 0, 0, 0},         [20] = {"IQ4_NL", 0, 0, 0},
    [21] = {"IQ3_S", 0, 0, 0},          [22] = {"IQ2_S", 0, 0, 0},         [23] = {"IQ4_XS", 0, 0, 0},
    [24] = {"I8", 0, 0, 0},             [25] = {"I16", 0, 0, 0},           [26] = {"I32", 0, 0, 0},
    [27] = {"I64", 0, 0, 0},            [28] = {"F64", 0, 0, 0},           [29] = {"IQ1_M", 0, 0, 0},
    [GGML_BF16] = {"BF16", 1, 2, 1},    [34] = {"TQ1_0", 0, 0, 0},         [35] = {"TQ2_0", 0, 0, 0},
    [39] = {"MXFP4", 0, 0, 0},
};
enum { N_TYPES = sizeof TYPES / sizeof TYPES[0] };

const char *ggml_type_name(uint32_t t) { return t < N_TYPES ? TYPES[t].name : NULL; }
int ggml_type_supported(uint32_t t) { return t < N_TYPES && TYPES[t].supported; }
int ggml_block_size(uint32_t t) { return ggml_type_supported(t) ? TYPES[t].block : 0; }
int ggml_type_size(uint32_t t) { return ggml_type_supported(t) ? TYPES[t].size : 0; }

// Q4_0, Q4_1: 32 values; quant j in the low nibble of byte j, quant 16+j in its high nibble.
// Q4_0 is d*(q-8), Q4_1 d*q+m.
static void q4(const unsigned char *b, float *y, int with_min) {
    float d = half(b), m = with_min ? half(b + 2) : 0.0f;
    const unsigned char *qs = b + (with_min ? 4 : 2);
    for (int j = 0; j < 16; j++) {
        int lo = qs[j] & 15, hi = qs[j] >> 4;
        if (with_min) {
            y[j] = d * (float)lo + m;
            y[j + 16] = d * (float)hi + m;
        } else {
            y[j] = d * (float)(lo - 8);
            y[j + 16] = d * (float)(hi - 8);
        }
    }
}

// Q5_0, Q5_1: as Q4 with a fifth bit per value, bit j of the 32-bit word qh for value j.
// Q5_0 is d*(q-16), Q5_1 d*q+m.
static void q5(const unsigned char *b, float *y, int with_min) {
    float d = half(b), m = with_min ? half(b + 2) : 0.0f;
    const unsigned char *p = b + (with_min ? 4 : 2), *qs = p + 4;
    uint32_t qh = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    for (int j = 0; j < 32; j++) {
        int nib = j < 16 ? qs[j] & 15 : qs[j - 16] >> 4;
        int q = nib | (int)((qh >> j) & 1) << 4;
        y[j] = with_min ? d * (float)q + m : d * (float)(q - 16);
    }
}

static void q8_0(const unsigned char *b, float *y) {
    float d = half(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

// The K formats' 8 scales and 8 mins of 6 bits, packed in 12 bytes: scale i < 4 is the low 6
// bits of byte i, min i < 4 those of byte 4+i; for i >= 4 the low 4 bits come from byte 4+i's
// low (scale) or high (min) nibble and the top 2 from the spare bits of bytes i-4 (scale) and i (min).
static void k_scale_min(const unsigned char *s, int i, int *sc, int *mn) {
    if (i < 4) {
        *sc = s[i] & 63;
        *mn = s[i + 4] & 63;
    } else {
        *sc = (s[i + 4] & 15) | (s[i - 4] >> 6) << 4;
        *mn = (s[i + 4] >> 4) | (s[i] >> 6) << 4;
    }
}

// Q4_K, Q5_K: 256 values in 8 sub-blocks of 32, value (d*sc)*q - dmin*mn. Sub-blocks 2k and
// 2k+1 take the low and high nibbles of quant bytes 32k..32k+31; Q5_K's fifth bit of value l of
// sub-block i is bit i of qh[l].
static void qk45(const unsigned char *b, float *y, int five) {
    float d = half(b), dmin = half(b + 2);
    const unsigned char *sc = b + 4, *qh = b + 16, *qs = b + (five ? 48 : 16);
    for (int i = 0; i < 8; i++) {
        int s, mn;
        k_scale_min(sc, i, &s, &mn);
        float ds = d * (float)s, dm = dmin * (float)mn;
        const unsigned char *q = qs + 32 * (i / 2);
        for (int l = 0; l < 32; l++) {
            int v = i % 2 ? q[l] >> 4 : q[l] & 15;
            if (five) v |= ((qh[l] >> i) & 1) << 4;
            y[32 * i + l] = ds * (float)v - dm;
        }
    }
}

// Q6_K: 256 values, each (d*scale[v/16])*(q-32) with q of 6 bits: in each half of 128 values,
// the four runs of 32 take the low nibbles of ql[0..32), ql[32..64), then their high nibbles,
// and bits 0-1, 2-3, 4-5, 6-7 of qh[0..32) on top.
static void q6_k(const unsigned char *b, float *y) {
    const unsigned char *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = half(b + 208);
    for (int h = 0; h < 2; h++, ql += 64, qh += 32, y += 128)
        for (int r = 0; r < 4; r++)
            for (int l = 0; l < 32; l++) {
                int lo = r < 2 ? ql[32 * r + l] & 15 : ql[32 * (r - 2) + l] >> 4;
                int q = (lo | ((qh[l] >> (2 * r)) & 3) << 4) - 32;
                int v = 32 * r + l;
                float ds = d * (float)sc[8 * h + v / 16];
                y[v] = ds * (float)q;
            }
}

void dequant_rows(uint32_t type, const void *src, float *dst, size_t n) {
    const unsigned char *s = src;
    size_t bs = (size_t)ggml_block_size(type), ts = (size_t)ggml_type_size(type);
    if (!bs) return;
    if (type == GGML_F32) {
        memcpy(dst, s, n * sizeof(float));
        return;
    }
    for (size_t i = 0; i < n / bs; i++, s += ts, dst += bs) switch (type) {
        case GGML_F16: *dst = half(s); break;
        case GGML_BF16: *dst = bf16_to_f32(u16(s)); break;
        case GGML_Q4_0: q4(s, dst, 0); break;
        case GGML_Q4_1: q4(s, dst, 1); break;
        case GGML_Q5_0: q5(s, dst, 0); break;
        case GGML_Q5_1: q5(s, dst, 1); break;
        case GGML_Q8_0: q8_0(s, dst); break;
        case GGML_Q4_K: qk45(s, dst, 0); break;
        case GGML_Q5_K: qk45(s, dst, 1); break;
        case GGML_Q6_K: q6_k(s, dst); break;
        }
}
