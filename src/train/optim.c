// optim.c: AdamW, global-norm clipping and learning-rate schedules (see optim.h).
#include "train/optim.h"
#include "util/threads.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ----------------------------------------------------------------------------
// AdamW

int adamw_init(adamw *o, size_t n, float lr, float beta1, float beta2, float eps, float weight_decay) {
    return adamw_init_range(o, 0, n, lr, beta1, beta2, eps, weight_decay);
}

int adamw_init_range(adamw *o, size_t lo, size_t hi, float lr, float beta1, float beta2, float eps, float weight_decay) {
    const size_t n = hi - lo;
    float *m = calloc(n ? n : 1, sizeof(float));
    float *v = calloc(n ? n : 1, sizeof(float));
    if (!m || !v) {
        free(m);
        free(v);
        memset(o, 0, sizeof *o);
        return -1;
    }
    adamw_init_with(o, m, v, n, lr, beta1, beta2, eps, weight_decay);
    o->base = lo;
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
    o->base = 0;
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
    adamw_update_range(o, params, grads, 0, n, lr, decay_mask);
}

void adamw_update_range(adamw *o, float *params, const float *grads, size_t lo, size_t hi, float lr,
                        const unsigned char *decay_mask) {
    // never run outside the moments (grads stays indexed from the lo asked for)
    const size_t g0 = lo;
    if (lo < o->base) lo = o->base;
    if (hi > o->base + o->n) hi = o->base + o->n;
    if (hi < lo) hi = lo;
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
    const long l0 = (long)lo, l1 = (long)hi, b = (long)o->base, gb = (long)g0;
#pragma omp parallel for schedule(static) num_threads(threads_for((double)(l1 - l0), threads_min_work.elems))
    for (long i = l0; i < l1; i++) {
        float p = params[i], g = grads[i - gb];
        if (!decay_mask || decay_mask[i]) p = p * decay;  // decoupled weight decay
        float mi = m[i - b] * b1 + one_m_b1 * g;          // m = b1*m + (1-b1)*g
        float vi = v[i - b] * b2 + one_m_b2 * g * g;      // v = b2*v + (1-b2)*g^2
        float denom = sqrtf(vi) / bc2_sqrt + eps;         // sqrt(vhat) + eps
        params[i] = p + neg_step * mi / denom;            // p -= lr * mhat / denom
        m[i - b] = mi;
        v[i - b] = vi;
    }
}

// ----------------------------------------------------------------------------
// gradient clipping

// The reduction splits g into GRAD_NORM_CHUNKS contiguous chunks (a function of n only), sums
// each sequentially in double, then adds the chunk sums in index order: the same bits for any
// thread count or schedule, and for any assignment of whole chunks to ranks.
size_t grad_norm_chunk_start(size_t n, int c) {
    const size_t chunk = (n + GRAD_NORM_CHUNKS - 1) / GRAD_NORM_CHUNKS, at = (size_t)c * chunk;
    return at < n ? at : n;
}

void grad_norm_partials(const float *g, size_t n, int c0, int c1, double *part) {
    const size_t base = grad_norm_chunk_start(n, c0);
#pragma omp parallel for schedule(static) num_threads(threads_for((double)n * (c1 - c0) / GRAD_NORM_CHUNKS, threads_min_work.elems))
    for (int c = c0; c < c1; c++) {
        const size_t lo = grad_norm_chunk_start(n, c), hi = grad_norm_chunk_start(n, c + 1);
        double s = 0.0;
        for (size_t i = lo; i < hi; i++) s += (double)g[i - base] * (double)g[i - base];
        part[c - c0] = s;
    }
}

double grad_norm_total(const double *part) {
    double total = 0.0;
    for (int c = 0; c < GRAD_NORM_CHUNKS; c++) total += part[c];
    return sqrt(total);
}

double grad_norm(const float *g, size_t n) {
    double part[GRAD_NORM_CHUNKS];
    grad_norm_partials(g, n, 0, GRAD_NORM_CHUNKS, part);
    return grad_norm_total(part);
}

float clip_coef(double total, double max_norm) {
    if (max_norm <= 0.0 || !isfinite(total)) return 1.0f;
    double coef = max_norm / (total + 1e-6); // torch: clip_coef = max_norm / (total_norm + 1e-6)
    return coef < 1.0 ? (float)coef : 1.0f;  // torch clamps coef to <= 1 and multiplies
}

void scale_grads(float *g, size_t n, float s) {
    if (s == 1.0f) return;
    const long nn = (long)n;
#pragma omp parallel for schedule(static) num_threads(threads_for((double)nn, threads_min_work.elems))
    for (long i = 0; i < nn; i++) g[i] *= s;
}

double clip_grad_norm(float *g, size_t n, double max_norm) {
    double total = grad_norm(g, n);
    scale_grads(g, n, clip_coef(total, max_norm));
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
