// train.h: training runs: the run configuration (JSON file + command-line overrides), the loop
// with gradient accumulation, evaluation, metrics, checkpoints and resume (docs/training.md).
#ifndef MTAC_TRAIN_H
#define MTAC_TRAIN_H

#include "data/shard.h"
#include "dist/dist.h"
#include "model/model.h"
#include "train/step.h"

#include <signal.h>

#include <stddef.h>
#include <stdint.h>

typedef struct {
    char preset[32];          // model preset name; the "model" object of a config file overrides it
    model_config model;
    int have_model;
    int steps, batch_size, seq_len, grad_accum;
    char schedule[16];        // constant | linear | cosine
    float lr, min_lr;
    int warmup;
    float beta1, beta2, eps, weight_decay, clip;
    long long seed;
    int eval_every, eval_batches, save_every, log_every;
    char data[512];           // directory with train.bin and val.bin (mtac data)
    char out[512];            // run directory: checkpoint, metrics.jsonl, config.json
    char init[512];           // weights to start from: a safetensors file, or a run directory (its
                              // config.json's model, model.safetensors, tokenizer files); "" = none
    char train[8];            // the parameters trained: all, or mta (the others frozen)
    float mix;                // fraction of training sequences that are long-context task examples
    char mix_tasks[64];       // their tasks (docs/longctx.md): needle, qa1, qa2, qa3, copy
    char mix_loss[16];        // answer (the loss on their answers only) or all
    mta_backend backend;      // attention backend (the caller's choice, not a key of config.json)
} train_config;

// Defaults: preset lm1m, 200 steps, batch 8 x 128, AdamW 1e-3 (0.9, 0.98, 1e-8), weight decay
// 0.05, clip 1.0, cosine schedule with 20 warmup steps, seed 42, evaluation every 50 steps.
void train_config_default(train_config *c);

// Sets one key (a config-file key or a --flag name without the dashes; '-' and '_' are the same)
// from its text value. Returns 0, or -1 with a message for an unknown key or a bad value.
int train_config_set(train_config *c, const char *key, const char *value, char *err, size_t n);

// Applies a JSON config file: top-level keys as train_config_set, "model" an object as in
// docs/model.md. Unknown keys are errors.
int train_config_load(train_config *c, const char *path, char *err, size_t n);

// The resolved model config (preset unless a model object was given) and final checks.
int train_config_finish(train_config *c, char *err, size_t n);

// The whole run configuration as JSON (malloc'd).
char *train_config_to_json(const train_config *c);

// Whether init names a run directory (rather than a weights file).
int train_init_is_run(const char *init);

// Copies a run's tokenizer files (tokenizer.json, tokenizer_config.json, generation_config.json,
// those present; docs/models.md) from directory from into directory to. 0, or -1 + message.
int train_copy_tokenizer(const char *from, const char *to, char *err, size_t n);

// Lists the keys with their meaning (for --help).
void train_config_print_keys(void);
// The name of key i (0, 1, ...; NULL past the last): the flags of `mtac train` are these.
const char *train_config_key(int i);

// A micro-batch is B sequences of T tokens, B*T rows that the model and the data loader index
// with an int: 0 when B, T >= 1 and B*T <= INT_MAX, else -1 with a message naming both. (Every
// allocation is checked as well; this refuses, before anything is read or written, the shapes
// whose indices would overflow.)
int train_check_batch_shape(int B, int T, char *err, size_t n);

// What train_run reports as it goes (to train_hooks.on_event, on rank 0).
typedef enum {
    TRAIN_EV_START,    // n_params, steps, step (the first step to run)
    TRAIN_EV_RESUMED,  // path (the checkpoint), step
    TRAIN_EV_LOG,      // after step: loss .. wait_s; val_loss NAN unless evaluated at this step
    TRAIN_EV_DONE,     // step (the last), path (the run directory)
    TRAIN_EV_STOPPED,  // stopped on request after step; the checkpoint is saved
} train_event_kind;

typedef struct {
    train_event_kind kind;
    int step, steps, ranks;
    size_t n_params;
    double loss, lr, grad_norm, tokens_per_s, val_loss, eta_s, wait_s;
    const char *path;
} train_event;

// How a caller joins a run: all optional (zero: one process, silent, never stopped).
typedef struct {
    dist *d;                              // the ranks training together (NULL: this process alone)
    const volatile sig_atomic_t *stop;    // non-zero on any rank: save after the current step and stop
    void (*on_event)(void *arg, const train_event *e);
    void *arg;
} train_hooks;

// Runs (or, with resume, continues) training: one of the TRAIN_* codes of train/step.h. With
// several ranks every rank calls it with the same configuration (checked); each computes its
// share of every step (train/step.h), rank 0 alone evaluates and writes the run directory, and
// every rank stops at the same step. A failure on one rank is returned on that rank only: the
// caller must then end them all (dist_abort), or the others wait for it forever.
int train_run(const train_config *c, int resume, const train_hooks *h, char *err, size_t n);

// Opens a finished or running run directory: its config.json into *c and a model holding its
// model.safetensors weights. NULL with a message on failure.
model *train_open_run(const char *run, train_config *c, char *err, size_t n);

// Progress of an evaluation: fn(arg, batches done, batches in all) after each batch.
typedef struct {
    void (*fn)(void *arg, int done, int total);
    void *arg;
} train_eval_progress;

// Mean loss over the validation shard in sequential windows of (B, T): its first nbatches
// batches, or all of it when nbatches <= 0 or it holds fewer. *done (when non-NULL): the batches
// evaluated. Refuses a shard holding a token >= the model's vocab_size (train_check_vocab).
int train_eval_loss(model *m, const char *val_path, int B, int T, int nbatches, double *loss, int *done,
                    const train_eval_progress *progress, char *err, size_t n);

// 0 when every token of the shard read from path is below vocab_size, else -1 with a message
// naming the file, the token and vocab_size.
int train_check_vocab(const shard *s, const char *path, int vocab_size, char *err, size_t n);

#endif
