// optim.c: AdamW, global-norm clipping and learning-rate schedules (see optim.h).
#include "train/optim.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// AdamW

int adamw_init(adamw *o, size_t n, float lr, float beta1, float beta2, float eps, float weight_decay) {
    float *m = calloc(n ? n : 1, sizeof(float));
    float *v = calloc(n ? n : 1, sizeof(float));
    if (!m || !v) {
        free(m);
        free(v);
        memset(o, 0, sizeof *o);
        return -1;
    }
    adamw_init_with(o, m, v, n, lr, beta1, beta2, eps, weight_decay);
    o->owns_state = 1;
    return 0;
}

void adamw_init_with(adamw *o, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
                     float weight_decay) {
    o->lr = lr;
    o->beta1 = beta1;
    o->beta2 = beta2;
    o->eps = eps;
    o->weight_decay = weight_decay;
    o->t = 0;
    o->m = m;
    o->v = v;
    o->n = n;
    o->owns_state = 0;
}

void adamw_free(adamw *o) {
    if (o->owns_state) {
        free(o->m);
        free(o->v);
    }
    o->m = o->v = NULL;
    o->n = 0;
    o->owns_state = 0;
}

void adamw_update(adamw *o, float *params, const float *grads, size_t n, float lr,
                  const unsigned char *decay_mask) {
    if (n > o->n) n = o->n; // never run past the moments
    o->t += 1;
    // Scalars as torch makes them: Python doubles, each rounded to float when applied to a
    // float32 tensor.
    double t = (double)o->t;
    double bc1 = 1.0 - pow((double)o->beta1, t); // bias corrections 1 - beta^t
    double bc2 = 1.0 - pow((double)o->beta2, t);
    const float decay = (float)(1.0 - (double)lr * (double)o->weight_decay);
    const float b1 = o->beta1, one_m_b1 = (float)(1.0 - (double)o->beta1);
    const float b2 = o->beta2, one_m_b2 = (float)(1.0 - (double)o->beta2);
    const float bc2_sqrt = (float)sqrt(bc2);
    const float neg_step = (float)(-((double)lr / bc1)); // -lr / (1 - b1^t)
    const float eps = o->eps;
    float *m = o->m, *v = o->v;
    const long nn = (long)n;
#pragma omp parallel for schedule(static)
    for (long i = 0; i < nn; i++) {
        float p = params[i], g = grads[i];
        if (!decay_mask || decay_mask[i]) p = p * decay;  // decoupled weight decay
        float mi = m[i] * b1 + one_m_b1 * g;              // m = b1*m + (1-b1)*g
        float vi = v[i] * b2 + one_m_b2 * g * g;          // v = b2*v + (1-b2)*g^2
        float denom = sqrtf(vi) / bc2_sqrt + eps;         // sqrt(vhat) + eps
        params[i] = p + neg_step * mi / denom;            // p -= lr * mhat / denom
        m[i] = mi;
        v[i] = vi;
    }
}

// ----------------------------------------------------------------------------
// gradient clipping

// The reduction splits g into CLIP_CHUNKS contiguous chunks (a function of n only), sums each
// sequentially in double, then adds the chunk sums in index order: the same bits for any
// thread count or schedule.
#define CLIP_CHUNKS 256

double grad_norm(const float *g, size_t n) {
    double part[CLIP_CHUNKS];
    const size_t chunk = (n + CLIP_CHUNKS - 1) / CLIP_CHUNKS;
#pragma omp parallel for schedule(static)
    for (int c = 0; c < CLIP_CHUNKS; c++) {
        size_t lo = (size_t)c * chunk, hi = lo + chunk;
        if (lo > n) lo = n;
        if (hi > n) hi = n;
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)g[i] * (double)g[i];
        part[c] = s;
    }
    double total = 0.0;
    for (int c = 0; c < CLIP_CHUNKS; c++) total += part[c];
    return sqrt(total);
}

double clip_grad_norm(float *g, size_t n, double max_norm) {
    double total = grad_norm(g, n);
    if (max_norm <= 0.0 || !isfinite(total)) return total;
    double coef = max_norm / (total + 1e-6); // torch: clip_coef = max_norm / (total_norm + 1e-6)
    if (coef < 1.0) {                        // torch clamps coef to <= 1 and multiplies
        const float cf = (float)coef;
        const long nn = (long)n;
#pragma omp parallel for schedule(static)
        for (long i = 0; i < nn; i++) g[i] *= cf;
    }
    return total;
}

// ----------------------------------------------------------------------------
// learning-rate schedules

static const char *const lr_names[] = {"constant", "linear", "cosine"};

int lr_kind_from_name(const char *name) {
    if (!name) return -1;
    for (int k = 0; k < 3; k++)
        if (strcmp(name, lr_names[k]) == 0) return k;
    return -1;
}

const char *lr_kind_name(lr_kind k) { return (k >= LR_CONSTANT && k <= LR_COSINE) ? lr_names[k] : "unknown"; }

int lr_schedule_init(lr_schedule *s, const char *name, float lr, int warmup, int total, float min_lr, char *err,
                     size_t err_len) {
    int k = lr_kind_from_name(name);
    if (k < 0) {
        snprintf(err, err_len, "unknown lr schedule '%s' (expected constant, linear or cosine)", name ? name : "(null)");
        return -1;
    }
    if (!(lr >= 0.0f) || !isfinite(lr)) {
        snprintf(err, err_len, "lr schedule: lr must be finite and >= 0 (got %g)", (double)lr);
        return -1;
    }
    if (!(min_lr >= 0.0f) || min_lr > lr) {
        snprintf(err, err_len, "lr schedule: min_lr must be in [0, lr] (got %g, lr %g)", (double)min_lr, (double)lr);
        return -1;
    }
    if (warmup < 0) {
        snprintf(err, err_len, "lr schedule: warmup must be >= 0 (got %d)", warmup);
        return -1;
    }
    if (k != LR_CONSTANT && total < warmup) {
        snprintf(err, err_len, "lr schedule '%s': total steps (%d) must be >= warmup (%d)", name, total, warmup);
        return -1;
    }
    s->kind = (lr_kind)k;
    s->lr = lr;
    s->warmup = warmup;
    s->total = total;
    s->min_lr = min_lr;
    return 0;
}

float lr_at(const lr_schedule *s, int step) {
    if (step < 0) step = 0;
    if (step < s->warmup) return (float)((double)s->lr * (double)(step + 1) / (double)s->warmup);
    if (s->kind == LR_CONSTANT) return s->lr;
    // decay progress in [0, 1] from the end of warmup to total
    double span = (double)s->total - (double)s->warmup;
    double frac = span > 0.0 ? ((double)step - (double)s->warmup) / span : 1.0;
    if (frac > 1.0) frac = 1.0;
    double hi = s->lr, lo = s->min_lr;
    if (s->kind == LR_LINEAR) return (float)(lo + (hi - lo) * (1.0 - frac));
    const double pi = 3.14159265358979323846;
    return (float)(lo + (hi - lo) * 0.5 * (1.0 + cos(pi * frac))); // cosine
}
