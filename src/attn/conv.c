// conv.c: key-query convolution, head mixing and softmax, one map row at a time.
// Index conventions and the math are in conv.h; shapes: kernels (cq,ck), mixing (H,H).
#include "attn/conv.h"

#include <math.h>
#include <string.h>

static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int imin(int a, int b) { return a < b ? a : b; }

enum { JB = 64 };  // output columns kept in registers across all taps of the kernel

// o[j] += w * s[j + off] for j in [jlo, jhi], skipping the block range [blo, bhi) that the
// register-blocked interior has already computed.
static void axpy_outside(float *restrict o, const float *restrict s, int off, float w, int jlo, int jhi, int blo,
                         int bhi) {
    const int e1 = imin(jhi, blo - 1);
    for (int j = jlo; j <= e1; j++) o[j] += w * s[j + off];
    for (int j = imax(jlo, bhi); j <= jhi; j++) o[j] += w * s[j + off];
}

// Tap (a,c) adds w[a,c] * (source row r = i-(cq-1)+a, shifted by c-p) to output row i. Source
// column j + (c-p) must lie in 0..r (Z is zero above its diagonal) and j <= i; within those bounds
// the tap is one contiguous axpy. Where every tap is in bounds (all cq rows exist and
// p <= j <= i-(cq-1)-p), blocks of JB columns accumulate all taps in registers and are stored
// once; the ragged edges take the per-tap path.
void qkconv_row(const float *src, size_t ld, const float *w, int cq, int ck, int i, float *out) {
    const int p = (ck - 1) / 2, r0 = imax(0, i - (cq - 1));
    float *restrict o = out;
    memset(o, 0, (size_t)(i + 1) * sizeof(float));
    int blo = p, bhi = p;  // [blo, bhi): columns done in blocks
    if (i >= cq - 1)
        for (; bhi + JB - 1 <= i - (cq - 1) - p; bhi += JB) {
            float acc[JB] = {0};
            for (int a = 0; a < cq; a++) {
                const float *s = src + (size_t)a * ld + bhi - p;
                for (int c = 0; c < ck; c++) {
                    const float wv = w[a * ck + c];
                    for (int jj = 0; jj < JB; jj++) acc[jj] += wv * s[c + jj];
                }
            }
            memcpy(o + bhi, acc, sizeof acc);
        }
    for (int r = r0; r <= i; r++) {
        const int a = r - (i - (cq - 1));
        const float *s = src + (size_t)(r - r0) * ld;
        for (int c = 0; c < ck; c++) {
            const int sh = c - p;
            axpy_outside(o, s, sh, w[a * ck + c], imax(0, -sh), imin(i, r - sh), blo, bhi);
        }
    }
}

// Input row r receives from output rows i = r+(cq-1)-a (those <= last), and input column jj from
// output column j = jj+p-c with 0 <= j <= i; jj itself is masked to jj <= r. Every tap is in
// bounds for p <= jj <= r-p when all cq rows exist.
void qkconv_backward_input_row(const float *g, size_t ld, int last, const float *w, int cq, int ck, int r,
                               float *din) {
    const int p = (ck - 1) / 2, il = imin(last, r + cq - 1);
    float *restrict o = din;
    memset(o, 0, (size_t)(r + 1) * sizeof(float));
    int blo = p, bhi = p;
    if (r + cq - 1 <= last)
        for (; bhi + JB - 1 <= r - p; bhi += JB) {
            float acc[JB] = {0};
            for (int a = 0; a < cq; a++) {
                const float *gi = g + (size_t)(cq - 1 - a) * ld + bhi + p;
                for (int c = 0; c < ck; c++) {
                    const float wv = w[a * ck + c];
                    for (int jj = 0; jj < JB; jj++) acc[jj] += wv * gi[jj - c];
                }
            }
            memcpy(o + bhi, acc, sizeof acc);
        }
    for (int i = r; i <= il; i++) {
        const int a = r + (cq - 1) - i;
        const float *gi = g + (size_t)(i - r) * ld;
        for (int c = 0; c < ck; c++) {
            const int sh = p - c;
            axpy_outside(o, gi, sh, w[a * ck + c], imax(0, -sh), imin(r, i - sh), blo, bhi);
        }
    }
}

void qkconv_backward_weight_row(const float *g, const float *src, size_t ld, int cq, int ck, int i, float *dw_row) {
    const int p = (ck - 1) / 2, r0 = imax(0, i - (cq - 1));
    for (int a = 0; a < cq; a++) {
        const int r = i - (cq - 1) + a;
        for (int c = 0; c < ck; c++) {
            float acc = 0.0f;
            if (r >= 0) {
                const int sh = c - p, jlo = imax(0, -sh), jhi = imin(i, r - sh);
                const float *s = src + (size_t)(r - r0) * ld;
#pragma omp simd reduction(+ : acc)
                for (int j = jlo; j <= jhi; j++) acc += g[j] * s[j + sh];
            }
            dw_row[a * ck + c] = acc;
        }
    }
}

void headmix_row(const float *in, size_t ins, const float *m, int ldm, int nh, int G, int n, float *out,
                 size_t outs) {
    for (int h = 0; h < nh; h++) {
        float *restrict o = out + h * outs;
        memset(o, 0, (size_t)n * sizeof(float));
        const int g0 = (h / G) * G;
        for (int hin = g0; hin < g0 + G; hin++) {
            const float wv = m[h * ldm + hin];
            const float *restrict s = in + hin * ins;
            for (int j = 0; j < n; j++) o[j] += wv * s[j];
        }
    }
}

void headmix_backward_row(const float *dout, size_t douts, const float *in, size_t ins, const float *m, int ldm,
                          int nh, int G, int n, float *din, size_t dins, float *dm_row) {
    for (int hin = 0; hin < nh; hin++) {
        float *restrict o = din + hin * dins;
        memset(o, 0, (size_t)n * sizeof(float));
        const int g0 = (hin / G) * G;
        for (int h = g0; h < g0 + G; h++) {
            const float wv = m[h * ldm + hin];
            const float *restrict s = dout + h * douts;
            for (int j = 0; j < n; j++) o[j] += wv * s[j];
        }
    }
    if (!dm_row) return;
    for (int h = 0; h < nh; h++) {
        const int g0 = (h / G) * G;
        const float *gr = dout + h * douts;
        for (int hin = g0; hin < g0 + G; hin++) {
            const float *s = in + hin * ins;
            float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
            for (int j = 0; j < n; j++) acc += gr[j] * s[j];
            dm_row[h * ldm + hin] = acc;
        }
    }
}

void softmax_row(float *x, int n, float *mx_out, float *inv_out) {
    float mx = x[0];
    for (int j = 1; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; j++) {
        x[j] = expf(x[j] - mx);
        sum += x[j];
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; j++) x[j] *= inv;
    if (mx_out) *mx_out = mx;
    if (inv_out) *inv_out = inv;
}

void softmax_row_recompute(float *x, int n, float mx, float inv) {
#pragma omp simd
    for (int j = 0; j < n; j++) x[j] = expf(x[j] - mx) * inv;
}

void softmax_backward_row(const float *p, float *g, int n) {
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < n; j++) dot += p[j] * g[j];
    for (int j = 0; j < n; j++) g[j] = p[j] * (g[j] - dot);
}
