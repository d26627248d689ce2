// step.c: the training step, one process or data-parallel over ranks (see step.h).
#include "train/step.h"
#include "util/errmsg.h"
#include "util/threads.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// A range of the gradient that the backward finishes at once (model_set_grad_hook): the final
// norm, each layer, the tied embedding. The exchange of a round sends them one by one.
typedef struct {
    size_t lo, hi;
} bucket;

struct trainer {
    model *m;
    adamw *opt;
    dist *d;
    step_config c;
    int rank, size;
    size_t P;
    size_t *bound;           // (size+1) shard boundaries: rank r owns [bound[r], bound[r+1])
    size_t *cbound;          // (size+1) the same in grad_norm chunks
    size_t lo, hi;           // this rank's shard
    float *acc;              // (hi-lo) the summed gradient of the shard; the model's grads when
                             // one process computes a single micro-batch
    float *recv;             // (size, hi-lo) the slices the ranks sent this round (size > 1)
    int *tok, *tgt;          // a micro-batch
    double *losses;          // (n_micro)
    bucket *buckets;         // in the order the backward finishes them
    int n_buckets, next_bucket;
    int round, active;       // the round being exchanged; whether this rank has a micro-batch in it
    dist_exchange **pending; // (n_buckets) this round's exchanges
    int *cnt;                // (4*size) send counts and offsets, receive counts and offsets
    char hook_err[160];
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// The buckets in the order model_backward reports them (model.h): norm (and untied output), layers last to first,
// embedding. Each layer's tensors are contiguous from attention_norm to feed_forward.w3.
static int make_buckets(trainer *t) {
    const model_config *c = model_cfg(t->m);
    float *g = model_grads(t->m);
    model_weights w = model_weights_of(t->m, g);
    t->n_buckets = c->n_layers + 2;
    t->buckets = malloc((size_t)t->n_buckets * sizeof *t->buckets);
    if (!t->buckets) return -1;
    int k = 0;
    // the untied output projection follows the norm (model.h)
    const size_t head = (size_t)c->dim + (w.output ? (size_t)c->vocab_size * c->dim : 0);
    t->buckets[k++] = (bucket){(size_t)(w.norm - g), (size_t)(w.norm - g) + head};
    for (int l = c->n_layers - 1; l >= 0; l--) {
        const layer_weights *L = &w.layer[l];
        t->buckets[k++] = (bucket){(size_t)(L->attn_norm - g), (size_t)(L->w3 - g) + (size_t)c->hidden_dim * c->dim};
    }
    t->buckets[k++] = (bucket){(size_t)(w.tok_embeddings - g), (size_t)(w.tok_embeddings - g) + (size_t)c->vocab_size * c->dim};
    return 0;
}

static size_t overlap(size_t a0, size_t a1, size_t b0, size_t b1) {
    size_t lo = a0 > b0 ? a0 : b0, hi = a1 < b1 ? a1 : b1;
    return hi > lo ? hi - lo : 0;
}

// Posts bucket k's exchange of this round: to each rank c the slice of the bucket in c's shard
// (nothing when this rank has no micro-batch this round); from each rank r that has one, the
// slice of the bucket in this rank's shard, into r's row of recv.
static void post_bucket(trainer *t, int k) {
    const int round = t->round;
    const bucket *b = &t->buckets[k];
    int *sc = t->cnt, *sd = sc + t->size, *rc = sd + t->size, *rd = rc + t->size;
    const size_t len = t->hi - t->lo, mine = overlap(b->lo, b->hi, t->lo, t->hi);
    const size_t at = (b->lo > t->lo ? b->lo : t->lo) - t->lo;
    for (int r = 0; r < t->size; r++) {
        const size_t from = b->lo > t->bound[r] ? b->lo : t->bound[r];
        sc[r] = t->active ? (int)overlap(b->lo, b->hi, t->bound[r], t->bound[r + 1]) : 0;
        sd[r] = sc[r] ? (int)from : 0;
        const int active = round * t->size + r < t->c.n_micro;
        rc[r] = active ? (int)mine : 0;
        rd[r] = rc[r] ? (int)(r * len + at) : 0;
    }
    t->pending[k] = dist_exchange_start(t->d, model_grads(t->m), sc, sd, t->recv, rc, rd);
}

// model_grad_hook: a bucket is final, send it now and let MPI move the earlier ones on.
static void on_grads_ready(void *arg, size_t lo, size_t hi) {
    trainer *t = arg;
    const int k = t->next_bucket;
    if (k >= t->n_buckets || t->buckets[k].lo != lo || t->buckets[k].hi != hi) {
        // model.c and make_buckets disagree: a bug, reported by trainer_step
        snprintf(t->hook_err, sizeof t->hook_err, "the backward reported gradient range [%zu, %zu) as bucket %d", lo, hi, k);
        return;
    }
    post_bucket(t, k);
    t->next_bucket++;
    dist_progress(t->pending, t->next_bucket);
}

int step_same_batch_fn(void *arg, int step, int a, int *tokens, int *targets, char *err, size_t n) {
    const step_same_batch *s = arg;
    if (tokens) memcpy(tokens, s->tokens, s->n * sizeof(int)), memcpy(targets, s->targets, s->n * sizeof(int));
    return 0;
}

void trainer_shard(size_t P, int rank, int size, size_t *lo, size_t *hi) {
    *lo = grad_norm_chunk_start(P, (int)((long long)rank * GRAD_NORM_CHUNKS / size));
    *hi = grad_norm_chunk_start(P, (int)((long long)(rank + 1) * GRAD_NORM_CHUNKS / size));
}

trainer *trainer_create(model *m, adamw *opt, dist *d, const step_config *c, char *err, size_t n) {
    const int size = dist_size(d);
    if (c->B < 1 || c->T < 1 || c->B > INT_MAX / c->T) {
        errmsg(err, n, "micro-batch of %d x %d tokens: each must be >= 1 and their product at most %d", c->B, c->T, INT_MAX);
        return NULL;
    }
    if (c->n_micro < size) {
        errmsg(err, n, "%d micro-batches per step (grad_accum) for %d ranks: each rank needs at least one; set grad_accum "
               "to a multiple of the number of ranks (the global batch is grad_accum x batch_size sequences)", c->n_micro, size);
        return NULL;
    }
    if (size > GRAD_NORM_CHUNKS) {
        errmsg(err, n, "%d ranks: at most %d are supported", size, GRAD_NORM_CHUNKS);
        return NULL;
    }
    const size_t P = model_num_params(m);
    if (size > 1 && P > (size_t)INT_MAX / 2) {
        errmsg(err, n, "%zu parameters: data-parallel training supports up to %d", P, INT_MAX / 2);
        return NULL;
    }
    trainer *t = calloc(1, sizeof *t);
    if (!t) {
        errmsg(err, n, "out of memory");
        return NULL;
    }
    t->m = m, t->opt = opt, t->d = d, t->c = *c, t->rank = dist_rank(d), t->size = size, t->P = P;
    t->bound = malloc(2 * ((size_t)size + 1) * sizeof(size_t));
    if (t->bound) {
        t->cbound = t->bound + size + 1;
        for (int r = 0; r <= size; r++) t->cbound[r] = (size_t)((long long)r * GRAD_NORM_CHUNKS / size);
        for (int r = 0; r < size; r++) trainer_shard(P, r, size, &t->bound[r], &t->bound[r + 1]);
        t->lo = t->bound[t->rank], t->hi = t->bound[t->rank + 1];
        const size_t need_lo = t->rank ? t->lo : 0, need_hi = t->rank ? t->hi : P;
        if (opt->base > need_lo || opt->base + opt->n < need_hi) {
            errmsg(err, n, "rank %d: the optimizer's moments cover parameters [%zu, %zu), not [%zu, %zu)", t->rank,
                   opt->base, opt->base + opt->n, need_lo, need_hi);
            trainer_free(t);
            return NULL;
        }
    }
    const size_t len = t->hi - t->lo, N = (size_t)c->B * c->T;
    t->tok = malloc(2 * N * sizeof(int));
    t->losses = malloc((size_t)c->n_micro * sizeof(double));
    int ok = t->bound && t->tok && t->losses && !make_buckets(t);
    if (ok && (size > 1 || c->n_micro > 1)) ok = (t->acc = malloc((len ? len : 1) * sizeof(float))) != NULL;
    if (ok && size > 1) {
        t->recv = malloc(((size_t)size * len + 1) * sizeof(float));
        t->pending = calloc((size_t)t->n_buckets, sizeof *t->pending);
        t->cnt = malloc(4 * (size_t)size * sizeof(int));
        ok = t->recv && t->pending && t->cnt;
    }
    if (!ok) {
        trainer_free(t);
        errmsg(err, n, "out of memory for the training step (%zu parameters)", P);
        return NULL;
    }
    t->tgt = t->tok + N;
    if (size > 1) model_set_grad_hook(m, on_grads_ready, t);
    return t;
}

void trainer_free(trainer *t) {
    if (!t) return;
    if (t->size > 1) model_set_grad_hook(t->m, NULL, NULL);
    free(t->bound), free(t->acc), free(t->recv), free(t->tok), free(t->losses), free(t->buckets), free(t->pending);
    free(t->cnt);
    free(t);
}

// acc = src (the first micro-batch) or acc += src, over the shard.
static void fold(float *acc, const float *src, size_t len, int first) {
    const long nn = (long)len;
    if (first) {
        memcpy(acc, src, len * sizeof(float));
        return;
    }
#pragma omp parallel for schedule(static) num_threads(threads_for((double)nn, threads_min_work.elems))
    for (long i = 0; i < nn; i++) acc[i] += src[i];
}

// Forward and backward of micro-batch a into zeroed gradients; with several ranks the hook sends
// the buckets as they finish.
static int micro_batch(trainer *t, int step, int a, char *err, size_t n) {
    float l;
    model_zero_grad(t->m);
    model_set_training(t->m, 1, ((uint64_t)t->c.seed * 1000003u + (uint64_t)step) * 131u + (uint64_t)a);
    t->next_bucket = 0, t->hook_err[0] = 0;
    if (model_forward(t->m, t->tok, t->tgt, t->c.B, t->c.T, &l, err, n) || model_backward(t->m, err, n)) return -1;
    if (t->hook_err[0]) return errmsg(err, n, "%s", t->hook_err);
    t->losses[a] = l;
    return 0;
}

int trainer_step(trainer *t, int step, float lr, step_stats *st, char *err, size_t n) {
    const int A = t->c.n_micro, N = t->size;
    const size_t len = t->hi - t->lo;
    float *g = model_grads(t->m);
    float *acc = t->acc ? t->acc : g;
    double wait = 0;
    memset(t->losses, 0, (size_t)A * sizeof(double));
    for (int round = 0; round * N < A; round++) {
        const int mine = round * N + t->rank;
        for (int a = round * N; a < A && a < (round + 1) * N; a++)
            if (t->c.batch(t->c.batch_arg, step, a, a == mine ? t->tok : NULL, a == mine ? t->tgt : NULL, err, n)) return TRAIN_ERROR;
        t->round = round, t->active = mine < A;
        if (mine < A && micro_batch(t, step, mine, err, n)) return TRAIN_ERROR;
        if (N == 1) {
            if (acc != g) fold(acc, g, len, mine == 0);
            continue;
        }
        // A rank without a micro-batch this round still takes part in every bucket's exchange.
        if (mine >= A)
            for (int k = 0; k < t->n_buckets; k++) post_bucket(t, k);
        double t0 = now_s();
        for (int k = 0; k < t->n_buckets; k++) dist_exchange_wait(t->pending[k]), t->pending[k] = NULL;
        wait += now_s() - t0;
        for (int r = 0; r < N && round * N + r < A; r++) fold(acc, t->recv + (size_t)r * len, len, round * N + r == 0);
    }
    // every micro-batch's loss to every rank (one rank computed each: the sum is exact)
    double t0 = now_s();
    dist_allreduce_sum(t->d, t->losses, A);
    double loss = 0;
    for (int a = 0; a < A; a++) loss += (float)t->losses[a] / A;
    if (A > 1) scale_grads(acc, len, 1.0f / A);
    double part[GRAD_NORM_CHUNKS];
    const int c0 = (int)t->cbound[t->rank], c1 = (int)t->cbound[t->rank + 1];
    grad_norm_partials(acc, t->P, c0, c1, part + c0);
    dist_allgather_f64(t->d, part, t->cbound);
    const double gnorm = grad_norm_total(part);
    wait += now_s() - t0;
    st->loss = loss, st->grad_norm = gnorm;
    if (!isfinite(loss) || !isfinite(gnorm)) {
        errmsg(err, n, "step %d: the loss is %g and the gradient norm %g", step + 1, loss, gnorm);
        return TRAIN_NONFINITE;
    }
    scale_grads(acc, len, clip_coef(gnorm, t->c.clip));
    adamw_update_range(t->opt, model_params(t->m), acc, t->lo, t->hi, lr, NULL);
    t0 = now_s();
    dist_allgather_f32(t->d, model_params(t->m), t->bound);
    st->wait_s = wait + now_s() - t0;
    size_t at;
    float bad;
    const model_tensor *w = model_find_nonfinite(t->m, model_params(t->m), &at, &bad);
    if (w) {
        errmsg(err, n, "step %d: after the update (loss %g, gradient norm %g, lr %g) weight '%s' holds %g at index %zu",
               step + 1, loss, gnorm, lr, w->name, bad, at);
        return TRAIN_NONFINITE;
    }
    return TRAIN_OK;
}

void trainer_broadcast_state(trainer *t) {
    adamw *o = t->opt;
    dist_bcast(t->d, model_params(t->m), t->P * sizeof(float), 0);
    dist_bcast(t->d, &o->t, sizeof o->t, 0);
    dist_scatter_f32(t->d, o->m, o->m + (t->lo - o->base), t->bound, 0);
    dist_scatter_f32(t->d, o->v, o->v + (t->lo - o->base), t->bound, 0);
}

void trainer_gather_moments(trainer *t) {
    adamw *o = t->opt;
    dist_gather_f32(t->d, o->m + (t->lo - o->base), o->m, t->bound, 0);
    dist_gather_f32(t->d, o->v + (t->lo - o->base), o->v, t->bound, 0);
}

// 64-bit checksum of the weights' bits: a multiplicative hash per grad_norm chunk (in parallel),
// the chunks' hashes combined in order.
static uint64_t weights_hash(const float *p, size_t P) {
    uint64_t h[GRAD_NORM_CHUNKS];
#pragma omp parallel for schedule(static) num_threads(threads_for((double)P, threads_min_work.elems))
    for (int c = 0; c < GRAD_NORM_CHUNKS; c++) {
        uint64_t x = 0x9E3779B97F4A7C15ULL ^ (uint64_t)c;
        for (size_t i = grad_norm_chunk_start(P, c); i < grad_norm_chunk_start(P, c + 1); i++) {
            uint32_t b;
            memcpy(&b, p + i, sizeof b);
            x = (x ^ b) * 0x100000001B3ULL;
        }
        h[c] = x;
    }
    uint64_t x = 0;
    for (int c = 0; c < GRAD_NORM_CHUNKS; c++) x = (x ^ h[c]) * 0xD6E8FEB86659FD93ULL;
    return x;
}

int trainer_check_replicas(trainer *t, char *err, size_t n) {
    char ranks[128];
    if (dist_differs_from_root(t->d, weights_hash(model_params(t->m), t->P), ranks, sizeof ranks))
        return errmsg(err, n, "the weights of rank(s) %s differ from rank 0's", ranks);
    return 0;
}
