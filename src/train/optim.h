// optim.h: AdamW (torch.optim.AdamW semantics), global-norm gradient clipping
// (torch.nn.utils.clip_grad_norm_) and learning-rate schedules.
#ifndef MTAC_OPTIM_H
#define MTAC_OPTIM_H

#include <stddef.h>

// ----------------------------------------------------------------------------
// AdamW

typedef struct {
    float lr;           // base learning rate (adamw_update takes the scheduled one per step)
    float beta1, beta2; // moment decay rates
    float eps;          // added to sqrt(vhat)
    float weight_decay; // decoupled: p -= lr * wd * p, before the Adam step
    int t;              // steps taken so far; the next update is step t+1
    float *m, *v;       // first and second moments, n floats each (zero at t = 0), of the
                        // parameters [base, base + n)
    size_t base, n;
    int owns_state;     // 1 when adamw_init allocated m and v (adamw_free releases them)
} adamw;

// Allocates zeroed m, v for n parameters. Returns 0, or -1 when out of memory.
int adamw_init(adamw *o, size_t n, float lr, float beta1, float beta2, float eps, float weight_decay);
// Moments for the parameters [lo, hi) only (one data-parallel rank's shard; zeroed).
int adamw_init_range(adamw *o, size_t lo, size_t hi, float lr, float beta1, float beta2, float eps, float weight_decay);
// Same with caller-owned m, v (n floats each, e.g. loaded from a checkpoint; t set by the caller).
void adamw_init_with(adamw *o, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps,
                     float weight_decay);
void adamw_free(adamw *o);

// One step (t += 1) over params[0..n) (n <= o->n) with learning rate lr. decay_mask: NULL decays
// every parameter, else parameter i is decayed only where decay_mask[i] != 0 (e.g. 0 for norms
// and biases). Arithmetic follows torch 1.13's _single_tensor_adamw in float32:
//   p *= 1 - lr*wd;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g
//   denom = sqrt(v)/sqrt(1-b2^t) + eps;  p += (-lr/(1-b1^t)) * m / denom
void adamw_update(adamw *o, float *params, const float *grads, size_t n, float lr,
                  const unsigned char *decay_mask);
// The same step (t += 1) over params[lo..hi) only (one rank's shard in data-parallel training),
// inside the moments' range: params and decay_mask are indexed as in adamw_update, the moments
// from base (m[i - base]), grads is that range alone (grads[i - lo] is the gradient of params[i]).
void adamw_update_range(adamw *o, float *params, const float *grads, size_t lo, size_t hi, float lr,
                        const unsigned char *decay_mask);

// ----------------------------------------------------------------------------
// gradient clipping

// Global L2 norm of g[0..n), accumulated in double with a fixed-order reduction: the sums of
// squares of GRAD_NORM_CHUNKS contiguous chunks (a function of n only), added in chunk order. So
// the result is bitwise the same for any OpenMP thread count, and for any split of the chunks
// between data-parallel ranks (each computes its chunks' partial sums, grad_norm_total adds them).
enum { GRAD_NORM_CHUNKS = 1024 };
double grad_norm(const float *g, size_t n);
size_t grad_norm_chunk_start(size_t n, int c);  // first element of chunk c (n for c = GRAD_NORM_CHUNKS)
// part[c - c0] = sum of squares of chunk c, c in [c0, c1); g points at chunk c0's first element.
void grad_norm_partials(const float *g, size_t n, int c0, int c1, double *part);
double grad_norm_total(const double *part);  // sqrt of the sum of all GRAD_NORM_CHUNKS partials
// The factor clip_grad_norm scales by (1 when it does not), and the scaling.
float clip_coef(double total, double max_norm);
void scale_grads(float *g, size_t n, float s);

// torch.nn.utils.clip_grad_norm_(max_norm): total = ||g||; coef = max_norm/(total+1e-6); if
// coef < 1 the gradients are scaled by coef. Returns total (before scaling). max_norm <= 0 only
// measures. A non-finite total leaves g untouched (the caller should skip the step).
double clip_grad_norm(float *g, size_t n, double max_norm);

// ----------------------------------------------------------------------------
// learning-rate schedules

typedef enum { LR_CONSTANT = 0, LR_LINEAR = 1, LR_COSINE = 2 } lr_kind;

typedef struct {
    lr_kind kind;
    float lr;     // peak learning rate
    int warmup;   // linear warmup steps (0: none)
    int total;    // step at which decay reaches min_lr (linear, cosine)
    float min_lr; // floor (default 0)
} lr_schedule;

// Steps are 0-based (step s is the (s+1)-th update).
//   warmup (s < warmup):  lr * (s+1)/warmup           (all kinds)
//   constant:             lr
//   linear, cosine: frac = (s - warmup)/(total - warmup), clamped to [0, 1]
//     linear:  min_lr + (lr - min_lr) * (1 - frac)
//     cosine:  min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * frac))
//   so lr_at(total) = min_lr and every later step stays at min_lr.
float lr_at(const lr_schedule *s, int step);

// "constant", "linear" or "cosine" -> kind; -1 for anything else.
int lr_kind_from_name(const char *name);
const char *lr_kind_name(lr_kind k);

// Fills *s from a schedule name and values, checking them: 0, or -1 with a message in err
// (unknown name, lr < 0, min_lr outside [0, lr], warmup < 0, total < warmup for a decaying kind).
int lr_schedule_init(lr_schedule *s, const char *name, float lr, int warmup, int total, float min_lr, char *err,
                     size_t err_len);

#endif
