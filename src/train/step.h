// step.h: the training step, the one that mtac train, mtac toy, mtac bench train and the tests all
// run: forward and backward over the step's micro-batches, gradient average, global-norm clip,
// AdamW. Over a group of ranks (src/dist/dist.h) it is data-parallel, and its result does not
// depend on the number of ranks, bit for bit (docs/distributed.md):
//   - a step is n_micro micro-batches of (B,T); rank r computes micro-batches r, r+N, r+2N, ...
//     (round j: micro-batch j*N + r), each gradient alone in zeroed memory;
//   - the parameters are split into N contiguous shards, whole chunks of grad_norm's fixed grid;
//     after each round every rank sends each shard's slice of its gradient to that shard's rank,
//     layer by layer while the backward goes on (model_set_grad_hook), and the shard's rank adds
//     the slices in micro-batch order: g = ((g_0 + g_1) + g_2) + ..., the sum one process makes;
//   - each rank averages, clips (the norm from every shard's fixed-grid partial sums) and updates
//     its shard with AdamW (ZeRO-1), then every rank gathers the updated weights.
// The data order and the dropout masks are functions of the step and the micro-batch index only.
#ifndef MTAC_STEP_H
#define MTAC_STEP_H

#include "dist/dist.h"
#include "model/model.h"
#include "train/optim.h"

#include <stddef.h>
#include <stdint.h>

// What a step (and train_run) returns.
enum {
    TRAIN_OK = 0,          // done (train_run: the run finished, or stopped on request after saving)
    TRAIN_ERROR = -1,      // a failure; the message is in err
    TRAIN_NONFINITE = -2,  // the loss, the gradient norm, a weight after the update or the
                           // validation loss became NaN or infinite. A step returns it before
                           // changing anything when the loss or norm is not finite; after the
                           // update when a weight is not (the weights are then lost). err names
                           // the step, the quantity and its value
};

// Micro-batch a (0 <= a < n_micro) of step (0-based) into tokens and targets (B*T each). Called
// for every a in order, on every rank; tokens and targets are NULL where another rank computes a:
// the source then only moves past it (so every rank's source stays in the same state). 0, or -1
// with a message.
typedef int (*step_batch_fn)(void *arg, int step, int a, int *tokens, int *targets, char *err, size_t n);

// A source whose every micro-batch is the same tokens and targets (n each): benchmarks, tests.
typedef struct {
    const int *tokens, *targets;
    size_t n;
} step_same_batch;
int step_same_batch_fn(void *arg, int step, int a, int *tokens, int *targets, char *err, size_t n);  // arg: step_same_batch

typedef struct {
    int B, T;             // micro-batch shape
    int n_micro;          // micro-batches per step (grad_accum), at least the number of ranks
    float clip;           // global-norm clip (torch's clip_grad_norm_); <= 0: none
    uint64_t seed;        // dropout seed of (step, a): ((seed * 1000003 + step) * 131 + a)
    step_batch_fn batch;  // the data
    void *batch_arg;
    // (model_num_params) 1 where a parameter trains; NULL: all do. The others keep their values:
    // their gradients are zeroed before the norm and clipping, and AdamW neither moves nor decays
    // them (with zero moments and gradient its step is exactly 0).
    const unsigned char *trainable;
} step_config;

typedef struct {
    double loss;       // mean of the micro-batch losses
    double grad_norm;  // before clipping
    double wait_s;     // seconds this rank spent waiting for the other ranks' gradients and weights
} step_stats;

typedef struct trainer trainer;

// The shard of rank of size ranks over P parameters: [lo, hi), whole chunks of grad_norm's grid.
void trainer_shard(size_t P, int rank, int size, size_t *lo, size_t *hi);

// A step runner over model m (its weights identical on every rank), AdamW opt and the ranks of d
// (dist_self() for one process). The moments of opt (zero or loaded) cover every parameter on
// rank 0, which saves them, and at least the rank's shard on the others (adamw_init_range with
// trainer_shard: ZeRO-1, each rank holds and updates 1/N of them). NULL with a message: shapes,
// n_micro below the number of ranks, moments that do not cover, memory.
trainer *trainer_create(model *m, adamw *opt, dist *d, const step_config *c, char *err, size_t n);
void trainer_free(trainer *t);

// One step at learning rate lr; step is 0-based (the dropout seeds and the messages use it).
// TRAIN_OK, TRAIN_ERROR or TRAIN_NONFINITE (see above). Collective: every rank calls it.
int trainer_step(trainer *t, int step, float lr, step_stats *st, char *err, size_t n);

// Rank 0's weights and AdamW step count to every rank, and each shard of its moments to that
// shard's rank (after rank 0 loaded a checkpoint). Collective.
void trainer_broadcast_state(trainer *t);
// Every shard's moments to rank 0, whose adamw then holds them whole (before it saves a
// checkpoint). Collective.
void trainer_gather_moments(trainer *t);
// Checks that every rank holds the same weights (a checksum of each): 0, or -1 with a message
// naming the ranks that differ from rank 0. Collective.
int trainer_check_replicas(trainer *t, char *err, size_t n);

#endif
