// conv.c: key-query convolution, head mixing and causal softmax on materialised T x T maps.
// Index conventions and the math are in conv.h; shapes: maps (T,T), kernels (cq,ck), mixing (H,H).
#include "attn/conv.h"

#include <math.h>
#include <string.h>

static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int imin(int a, int b) { return a < b ? a : b; }

enum { JB = 64 };  // output columns kept in registers across all taps of the kernel

// Adds tap (w, source row s shifted) to output columns [jlo, jhi] except the already computed
// block range [blo, bhi).
static void axpy_outside(float *restrict o, const float *restrict s, float w, int jlo, int jhi, int blo, int bhi) {
    int e1 = jhi < blo - 1 ? jhi : blo - 1;
    for (int j = jlo; j <= e1; j++) o[j] += w * s[j];
    int s2 = jlo > bhi ? jlo : bhi;
    for (int j = s2; j <= jhi; j++) o[j] += w * s[j];
}

// Each tap (a,c) adds w[a,c] * (source row r = i-(cq-1)+a, shifted by c-p) to output row i.
// Source column jj = j + (c-p) must satisfy 0 <= jj <= r (Z is zero above its diagonal) and the
// output column j <= i (masked output); within those bounds the tap is one contiguous axpy.
// Where every tap is in bounds (p <= j <= i-(cq-1)-p), blocks of JB columns accumulate all
// taps in registers and are stored once; the ragged edges take the per-tap path.
void qkconv_forward_rows(const float *in, const float *w, int T, int cq, int ck, int r0, int r1,
                         float *out) {
    const int p = (ck - 1) / 2;
    for (int i = r0; i < r1; i++) {
        float *restrict o = out + (size_t)i * T;
        memset(o, 0, (size_t)T * sizeof(float));
        int blo = p, bhi = p;  // [blo, bhi): columns done in blocks
        if (i >= cq - 1)
            for (; bhi + JB - 1 <= i - (cq - 1) - p; bhi += JB) {
                float acc[JB] = {0};
                for (int a = 0; a < cq; a++) {
                    const float *src = in + (size_t)(i - (cq - 1) + a) * T + bhi - p;
                    for (int c = 0; c < ck; c++) {
                        const float wv = w[a * ck + c];
                        for (int jj = 0; jj < JB; jj++) acc[jj] += wv * src[c + jj];
                    }
                }
                memcpy(o + bhi, acc, sizeof acc);
            }
        for (int a = 0; a < cq; a++) {
            int r = i - (cq - 1) + a;
            if (r < 0) continue;
            const float *src = in + (size_t)r * T;
            for (int c = 0; c < ck; c++) {
                const int shift = c - p;
                axpy_outside(o, src + shift, w[a * ck + c], imax(0, -shift), imin(i, r - shift), blo, bhi);
            }
        }
    }
}

// Transposed convolution: input row r receives from output rows i = r+(cq-1)-a < T, and input
// column jj from output column j = jj - shift with 0 <= j <= i (only causal dout is read);
// jj itself is masked to jj <= r. All taps are in bounds for p <= jj <= r-p when r+cq-1 < T.
void qkconv_backward_input_rows(const float *dout, const float *w, int T, int cq, int ck, int r0,
                                int r1, float *din) {
    const int p = (ck - 1) / 2;
    for (int r = r0; r < r1; r++) {
        float *restrict o = din + (size_t)r * T;
        memset(o, 0, (size_t)T * sizeof(float));
        int blo = p, bhi = p;
        if (r + cq - 1 < T)
            for (; bhi + JB - 1 <= r - p; bhi += JB) {
                float acc[JB] = {0};
                for (int a = 0; a < cq; a++) {
                    const float *g = dout + (size_t)(r + (cq - 1) - a) * T + bhi + p;
                    for (int c = 0; c < ck; c++) {
                        const float wv = w[a * ck + c];
                        for (int jj = 0; jj < JB; jj++) acc[jj] += wv * g[jj - c];
                    }
                }
                memcpy(o + bhi, acc, sizeof acc);
            }
        for (int a = 0; a < cq; a++) {
            int i = r + (cq - 1) - a;
            if (i >= T) continue;
            const float *g = dout + (size_t)i * T;
            for (int c = 0; c < ck; c++) {
                const int shift = c - p;
                axpy_outside(o, g - shift, w[a * ck + c], imax(0, shift), imin(r, i + shift), blo, bhi);
            }
        }
    }
}

void qkconv_backward_weight_row(const float *dout, const float *in, int T, int cq, int ck, int i,
                                float *dw_row) {
    const int p = (ck - 1) / 2;
    const float *g = dout + (size_t)i * T;
    for (int a = 0; a < cq; a++) {
        int r = i - (cq - 1) + a;
        for (int c = 0; c < ck; c++) {
            float acc = 0.0f;
            if (r >= 0) {
                const int shift = c - p;
                const int jlo = imax(0, -shift), jhi = imin(i, r - shift);
                const float *s = in + (size_t)r * T + shift;
#pragma omp simd reduction(+ : acc)
                for (int j = jlo; j <= jhi; j++) acc += g[j] * s[j];
            }
            dw_row[a * ck + c] = acc;
        }
    }
}

void headmix_forward_row(const float *maps_in, const float *m, int H, int G, int T, int i,
                         float *maps_out) {
    const size_t TT = (size_t)T * T, row = (size_t)i * T;
    for (int h = 0; h < H; h++) {
        float *restrict o = maps_out + h * TT + row;
        memset(o, 0, (size_t)T * sizeof(float));
        const int g0 = (h / G) * G;
        for (int hin = g0; hin < g0 + G; hin++) {
            const float wv = m[h * H + hin];
            const float *restrict s = maps_in + hin * TT + row;
            for (int j = 0; j <= i; j++) o[j] += wv * s[j];
        }
    }
}

void headmix_backward_row(const float *maps_dout, const float *maps_in, const float *m, int H,
                          int G, int T, int i, float *maps_din, float *dm_row) {
    const size_t TT = (size_t)T * T, row = (size_t)i * T;
    for (int hin = 0; hin < H; hin++) {
        float *restrict o = maps_din + hin * TT + row;
        memset(o, 0, (size_t)T * sizeof(float));
        const int g0 = (hin / G) * G;
        for (int h = g0; h < g0 + G; h++) {
            const float wv = m[h * H + hin];
            const float *restrict s = maps_dout + h * TT + row;
            for (int j = 0; j <= i; j++) o[j] += wv * s[j];
        }
    }
    if (!dm_row) return;
    memset(dm_row, 0, (size_t)H * H * sizeof(float));
    for (int h = 0; h < H; h++) {
        const int g0 = (h / G) * G;
        const float *g = maps_dout + h * TT + row;
        for (int hin = g0; hin < g0 + G; hin++) {
            const float *s = maps_in + hin * TT + row;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int j = 0; j <= i; j++) acc += g[j] * s[j];
            dm_row[h * H + hin] = acc;
        }
    }
}

void softmax_causal_row(float *map, int T, int i) {
    float *x = map + (size_t)i * T;
    float mx = x[0];
    for (int j = 1; j <= i; j++) mx = x[j] > mx ? x[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j <= i; j++) {
        x[j] = expf(x[j] - mx);
        sum += x[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j <= i; j++) x[j] *= inv;
    for (int j = i + 1; j < T; j++) x[j] = 0.0f;
}

void softmax_causal_backward_row(const float *p, float *dmap, int T, int i) {
    const float *pr = p + (size_t)i * T;
    float *g = dmap + (size_t)i * T;
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j <= i; j++) dot += pr[j] * g[j];
    for (int j = 0; j <= i; j++) g[j] = pr[j] * (g[j] - dot);
    for (int j = i + 1; j < T; j++) g[j] = 0.0f;
}
