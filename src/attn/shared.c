// shared.c: what the backends (and the decoding cache) compute the same way: the group norm and
// gate of one output row (spec section 2, steps 8 and 9; a row is one (batch, head, position):
// d floats), the head convolution (step 6) as a mixing matrix, and packed documents' starts.
#include "attn/mta_internal.h"

#include <math.h>
#include <string.h>

// The row sums run in vector lanes (omp simd): summed in order, each addition would wait on the
// one before.
static float sum_sq(const float *x, int d) {
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int e = 0; e < d; e++) ss += x[e] * x[e];
    return ss;
}

// out = y * sigmoid(gate_w . y + gate_b), y = o * rs * gamma * ds, rs = (mean(o^2) + eps)^-1/2,
// for n rows of d. out may alias o. The depth scale ds (an exp) is taken once per call: per row
// it cost as much as the row's arithmetic at d = 40.
void mta_normgate_forward_rows(const mta_config *c, const mta_params *p, const float *o, float *out, int n) {
    const int d = c->d;
    const float ds = c->depth_scale ? mta_depth_scale(c->layer_id) : 1.0f;
    for (int i = 0; i < n; i++, o += d, out += d) {
        if (out != o) memcpy(out, o, (size_t)d * sizeof(float));
        if (c->group_norm) {
            const float rs = 1.0f / sqrtf(sum_sq(out, d) / d + MTA_GN_EPS);
#pragma omp simd
            for (int e = 0; e < d; e++) out[e] = out[e] * rs * p->gn_weight[e] * ds;
        }
        if (c->gate) {
            float z = 0.0f;
#pragma omp simd reduction(+ : z)
            for (int e = 0; e < d; e++) z += p->gate_w[e] * out[e];
            z += p->gate_b[0];
            const float g = 1.0f / (1.0f + expf(-z));
#pragma omp simd
            for (int e = 0; e < d; e++) out[e] *= g;
        }
    }
}

// dO of n rows from dout (go), recomputing y, rs and the gate from o. Adds each row's parameter
// gradients to acc in row order: dgamma (d), dgate_w (d), dgate_b (1).
void mta_normgate_backward_rows(const mta_config *c, const mta_params *p, const float *o, const float *go, float *dO,
                                int n, double *acc) {
    const int d = c->d, gn = c->group_norm;
    const float ds = c->depth_scale ? mta_depth_scale(c->layer_id) : 1.0f;
    for (int i = 0; i < n; i++, o += d, go += d, dO += d) {
        const float rs = gn ? 1.0f / sqrtf(sum_sq(o, d) / d + MTA_GN_EPS) : 1.0f;
        if (c->gate) {
            // y, the gate's input, is recomputed as the forward computed it
            float z = 0.0f, dot = 0.0f;
#pragma omp simd reduction(+ : z, dot)
            for (int e = 0; e < d; e++) {
                const float y = gn ? o[e] * rs * p->gn_weight[e] * ds : o[e];
                z += p->gate_w[e] * y;
                dot += go[e] * y;
            }
            z += p->gate_b[0];
            const float gv = 1.0f / (1.0f + expf(-z)), dz = dot * gv * (1.0f - gv);
#pragma omp simd
            for (int e = 0; e < d; e++) {
                const float y = gn ? o[e] * rs * p->gn_weight[e] * ds : o[e];
                acc[d + e] += dz * y;
                dO[e] = go[e] * gv + dz * p->gate_w[e];
            }
            acc[2 * d] += dz;
        } else {
            memcpy(dO, go, (size_t)d * sizeof(float));
        }
        if (gn) {
            // y = o * rs * gamma * ds: do = rs*u - rs^3/d * o * (u . o), u = dy * gamma * ds.
            float uo = 0.0f;
#pragma omp simd reduction(+ : uo)
            for (int e = 0; e < d; e++) {
                acc[e] += dO[e] * o[e] * rs * ds;
                dO[e] *= p->gn_weight[e] * ds;
                uo += dO[e] * o[e];
            }
            const float k3 = rs * rs * rs * uo / d;
#pragma omp simd
            for (int e = 0; e < d; e++) dO[e] = rs * dO[e] - k3 * o[e];
        }
    }
}

void mta_normgate_add_grads(const mta_config *c, const mta_grads *g, const double *acc, int n) {
    const int d = c->d, np = 2 * d + 1;
    for (int s = 0; s < n; s++) {
        const double *a = acc + (size_t)s * np;
        if (c->group_norm && g->gn_weight)
            for (int e = 0; e < d; e++) g->gn_weight[e] += (float)a[e];
        if (c->gate) {
            if (g->gate_w)
                for (int e = 0; e < d; e++) g->gate_w[e] += (float)a[d + e];
            if (g->gate_b) g->gate_b[0] += (float)a[2 * d];
        }
    }
}

// ---- the head convolution as an (H,H) mixing matrix -------------------------------------------

// m[out, in] = w[g, n, o] for out = g*ch + o, in = g*ch + n; zero outside the groups.
void mta_headconv_matrix(const float *w, int H, int ch, float *m) {
    memset(m, 0, (size_t)H * H * sizeof(float));
    for (int g = 0; g < H / ch; g++)
        for (int n = 0; n < ch; n++)
            for (int o = 0; o < ch; o++) m[(g * ch + o) * H + g * ch + n] = w[((size_t)g * ch + n) * ch + o];
}

// dw[g, n, o] += dm[g*ch + o, g*ch + n].
void mta_headconv_grad_add(const float *dm, int H, int ch, float *dw) {
    for (int g = 0; g < H / ch; g++)
        for (int n = 0; n < ch; n++)
            for (int o = 0; o < ch; o++) dw[((size_t)g * ch + n) * ch + o] += dm[(g * ch + o) * H + g * ch + n];
}

void mta_doc_starts(const int32_t *doc, int B, int T, int *start) {
    for (int b = 0; b < B; b++) mta_doc_starts_row(doc + (size_t)b * T, T, start + (size_t)b * T);
}

int mta_host_computes(const mta_config *c, mta_use u) {
    (void)c;
    switch (u) {
    case MTA_USE_PRE_CONV: case MTA_USE_PRE_HEAD_MIX: case MTA_USE_POST_CONV: case MTA_USE_POST_HEAD_CONV:
    case MTA_USE_GROUP_NORM: case MTA_USE_DEPTH_SCALE: case MTA_USE_GATE: case MTA_USE_DROPOUT:
    case MTA_USE_GQA: case MTA_USE_DOCUMENTS: return 1;
    default: return 0;
    }
}
