// cmd_train.c: `mtac train`: train an MTA or baseline model on token shards.
#include "cli.h"
#include "train/train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: mtac train [--preset NAME] [--config FILE.json] [--steps N] [--out DIR] [--KEY VALUE ...]\n"
    "       mtac train --resume DIR [--steps N] [--KEY VALUE ...]\n";
static const char ABOUT[] =
    "Trains a model on token shards made by `mtac data` (train.bin, val.bin in --data), printing a\n"
    "progress line and writing DIR/metrics.jsonl (step, loss, lr, grad_norm, tokens_per_s, val_loss;\n"
    "null where not finite), DIR/checkpoint.safetensors (weights + optimizer + state, atomic),\n"
    "DIR/model.safetensors and DIR/config.json. Ctrl-C (SIGINT), SIGTERM or SIGUSR1 saves a checkpoint after the current step\n"
    "and stops with exit status 128 + the signal (130, 143, 138); a second Ctrl-C quits at once, the\n"
    "last checkpoint as it was. --resume continues the run exactly where it stopped, with DIR's\n"
    "config.json and its model (--preset may not change it); --steps N there sets a new total, at least\n"
    "the run's step, over which a linear or cosine lr schedule is then recomputed (the lr from the\n"
    "resumed step on follows the stretched schedule). The data directory is recorded as an absolute\n"
    "path. Every input (shards, --init, the config) is checked before the first step. A loss, gradient\n"
    "norm or weight that becomes NaN or infinite stops the run without saving (exit status 3): the last\n"
    "checkpoint stays as it was. Under mpirun or srun each process is a rank of one data-parallel run with the\n"
    "same result (docs/distributed.md):\n"
    "  mpirun -np 2 -x OMP_NUM_THREADS=1 mtac train ... (grad_accum a multiple of the ranks).\n"
    "A config file holds\n"
    "the keys below and optionally a \"model\" object (docs/model.md); flags override it. Unknown keys\n"
    "are errors. Presets: toy, lm1m, lm10m, 300m, 830m (each also -baseline).\n";

// --help ends with the keys of the run configuration (train_config.c's table).
static void print_keys(FILE *f) {
    fprintf(f, "\nkeys:\n");
    fflush(f);
    train_config_print_keys();
    printf("\n");
}

// The flags: --config, --resume, and every key of the run configuration, spelled with '_' (as
// config.json) or '-'. Each key's value goes through train_config_set, which checks it.
enum { MAX_KEYS = 40 };
typedef struct {
    const char *config, *resume;
    int doc_mask;
    const char *value[2 * MAX_KEYS];  // key i: value[2i] (--a_b), value[2i+1] (--a-b)
    char dashed[MAX_KEYS][32];
    int n_keys;
} train_args;

static int parse_args(int argc, char **argv, train_args *a) {
    cli_opt o[3 + 2 * MAX_KEYS] = {
        {"config", CLI_STR, &a->config, .arg = "FILE", .help = "a JSON file of the keys below (and \"model\")"},
        {"resume", CLI_STR, &a->resume, .arg = "DIR", .help = "continue the run in DIR"},
        {"doc-mask", CLI_FLAG, &a->doc_mask,
         .help = "packed documents: an EOS ends one; each attends within itself (model key doc_mask)"},
    };
    int n = 3;
    for (const char *k; (k = train_config_key(a->n_keys)) && a->n_keys < MAX_KEYS; a->n_keys++) {
        char *d = a->dashed[a->n_keys];
        snprintf(d, sizeof a->dashed[0], "%s", k);
        for (char *c = d; *c; c++) *c = *c == '_' ? '-' : *c;
        o[n++] = (cli_opt){k, CLI_STR, &a->value[2 * a->n_keys], .help = NULL};
        if (strcmp(d, k)) o[n++] = (cli_opt){d, CLI_STR, &a->value[2 * a->n_keys + 1], .help = NULL};
    }
    const cli_spec spec = {"mtac train", USAGE, ABOUT, NULL, o, n, print_keys};
    int first, st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    for (int i = 0; i < a->n_keys; i++)
        if (a->value[2 * i] && a->value[2 * i + 1]) {
            fprintf(stderr, "mtac train: --%s and --%s are one key: give one\n", train_config_key(i), a->dashed[i]);
            return 2;
        }
    return -1;
}

// A message (after "mtac train: ") on stderr; returns the exit status st.
static int fail(int st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("mtac train: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return st;
}

// The steps of configure: each -1 to go on, else the exit status after a message.

// A resumed run's own saved configuration: the first layer, any file and flags go on top.
static int load_resumed(const char *run, train_config *c, char *saved_preset, int *saved_steps) {
    char err[1024], path[1100];
    snprintf(path, sizeof path, "%s/config.json", run);
    if (train_config_load(c, path, err, sizeof err)) return fail(1, "cannot resume: %s", err);
    memcpy(saved_preset, c->preset, sizeof c->preset);
    *saved_steps = c->steps;
    return -1;
}

// --config, then the flags.
static int apply_args(const train_args *a, train_config *c) {
    char err[1024];
    if (a->config && train_config_load(c, a->config, err, sizeof err)) return fail(2, "%s", err);
    for (int i = 0; i < 2 * a->n_keys; i++)
        if (a->value[i] && train_config_set(c, train_config_key(i / 2), a->value[i], err, sizeof err))
            return fail(2, "%s", err);
    return -1;
}

// A resumed run's model is the one its config.json (and checkpoint) hold: a --preset (or a config
// file's) naming another would be ignored, so it is refused. Its directory goes through the same
// check as --out (a path that does not fit is refused, never cut short).
static int keep_resumed_run(const char *run, train_config *c, const char *saved_preset) {
    char err[1024];
    if (strcmp(c->preset, saved_preset))
        return fail(2, "--resume %s: the run's model is its own (preset '%s' in its config.json); --preset '%s' cannot "
                    "change it: start a new run (--out DIR) for another model", run, saved_preset, c->preset);
    if (train_config_set(c, "out", run, err, sizeof err)) return fail(2, "--resume: %s", err);
    return -1;
}

// --doc-mask sets the model's key (on the preset's model too). A resumed run keeps its model:
// turning packed documents on there would change what the run computes halfway.
static int apply_doc_mask(const train_args *a, train_config *c) {
    char err[1024];
    if (!a->doc_mask) return -1;
    if (a->resume && !c->model.doc_mask)
        return fail(2, "--resume %s: the run's model has no doc_mask; --doc-mask cannot change it: start a new run "
                    "(--out DIR)", a->resume);
    c->model.doc_mask = 1;  // the model's own check says what doc_mask needs (an EOS token in the vocabulary)
    if (model_config_check(&c->model, err, sizeof err)) return fail(2, "--doc-mask: %s", err);
    return -1;
}

// The data directory as an absolute path, so that eval, sample and --resume find it from any
// directory (a relative one in config.json was relative to where training ran).
static int absolute_data(train_config *c) {
    char err[1024], cwd[4096], abs[sizeof cwd + sizeof c->data + 1];
    if (!c->data[0] || c->data[0] == '/' || !getcwd(cwd, sizeof cwd)) return -1;
    snprintf(abs, sizeof abs, "%s/%s", cwd, c->data);
    if (train_config_set(c, "data", abs, err, sizeof err)) return fail(2, "--data as an absolute path: %s", err);
    return -1;
}

// The run's configuration: a resumed run's own, then --config, then the flags; checked. -1 to
// go on, else the exit status after a message. *saved_steps: the resumed run's steps.
static int configure(const train_args *a, train_config *c, int *saved_steps) {
    char err[1024], saved_preset[sizeof c->preset] = "";
    int st;
    train_config_default(c);
    if (a->resume && (st = load_resumed(a->resume, c, saved_preset, saved_steps)) >= 0) return st;
    if ((st = apply_args(a, c)) >= 0) return st;
    if (a->resume && (st = keep_resumed_run(a->resume, c, saved_preset)) >= 0) return st;
    if (train_config_finish(c, err, sizeof err)) return fail(2, "%s", err);
    if ((st = apply_doc_mask(a, c)) >= 0 || (st = absolute_data(c)) >= 0) return st;
    return cli_default_backend(&c->backend) ? 2 : -1;
}

// SIGINT, SIGTERM or SIGUSR1 (which mpirun forwards at once; SIGTERM only after its
// odls_base_sigkill_timeout): every rank finishes its step, then the run saves once and stops.
// The first signal asks for that save; a second one ends the process at once (cli_catch_stop).
// The checkpoint on disk is replaced only by a rename of a complete file, so it stays whole
// whichever moment that is.
static const int STOP_SIGNALS[] = {SIGINT, SIGTERM, SIGUSR1, 0};
static const char STOP_MSG[] =
    "\nmtac train: stopping after this step to save a checkpoint (Ctrl-C again: quit at once, without saving)\n";

typedef struct {
    const train_config *c;
    int saved_steps;  // a resumed run's steps before this call
} event_view;

// Progress lines (train_run calls this on rank 0 only).
static void print_event(void *arg, const train_event *e) {
    const event_view *v = arg;
    const train_config *c = v->c;
    switch (e->kind) {
    case TRAIN_EV_RESUMED:
        printf("resumed %s at step %d\n", e->path, e->step);
        if (c->steps != v->saved_steps && strcmp(c->schedule, "constant"))
            printf("note: --steps %d on a run of %d steps: the %s lr schedule is recomputed over %d steps, so from the "
                   "resumed step on the lr follows the stretched schedule, not the first run's\n",
                   c->steps, v->saved_steps, c->schedule, c->steps);
        break;
    case TRAIN_EV_START:
        printf("training %s: %zu parameters, %d steps of %d x %d x %d tokens", c->model.mta ? "MTA" : "baseline",
               e->n_params, c->steps, c->grad_accum, c->batch_size, c->seq_len);
        if (e->ranks > 1) printf(" on %d ranks", e->ranks);
        printf("\n");
        break;
    case TRAIN_EV_LOG:
        printf("step %5d/%d | loss %.4f | lr %.2e | grad norm %.3f | %.0f tok/s | ETA %.0fs", e->step, e->steps, e->loss,
               e->lr, e->grad_norm, e->tokens_per_s, e->eta_s);
        if (e->ranks > 1) printf(" | wait %.3fs", e->wait_s);
        if (!isnan(e->val_loss)) printf(" | val loss %.4f ppl %.2f", e->val_loss, exp(e->val_loss));
        printf("\n");
        break;
    case TRAIN_EV_STOPPED:
        printf("stopped by signal at step %d; checkpoint saved: continue with --resume %s\n", e->step, e->path);
        break;
    case TRAIN_EV_DONE:
        printf("done: %d steps, checkpoint %s/checkpoint.safetensors, weights %s/model.safetensors\n", e->step, e->path,
               e->path);
        break;
    }
    fflush(stdout);
}

int cmd_train(int argc, char **argv) {
    static train_args a;  // static: zeroed, and off the stack
    memset(&a, 0, sizeof a);
    int st = parse_args(argc, argv, &a);
    if (st >= 0) return st;
    train_config c;
    int saved_steps = 0;
    if ((st = configure(&a, &c, &saved_steps)) >= 0) return st;
    const char *resume = a.resume;
    char err[1024];
    // Launched by mpirun or srun, every process is a rank of one run (docs/distributed.md).
    dist *d = dist_world(&argc, &argv);
    if (!d) {
        fprintf(stderr, "mtac train: launched as one of several MPI processes, but this mtac was built without MPI "
                        "(-DMTAC_MPI=OFF, or libopenmpi-dev missing): each would train alone. Rebuild with MPI "
                        "(scripts/setup.sh) or run one process\n");
        return 2;
    }
    const int rank = dist_rank(d), ranks = dist_size(d);
    cli_catch_stop(STOP_SIGNALS, STOP_MSG);
    event_view view = {&c, saved_steps};
    const train_hooks hooks = {d, &cli_stop_signal, print_event, &view};
    int rc = train_run(&c, resume != NULL, &hooks, err, sizeof err);
    cli_release_stop(STOP_SIGNALS);
    if (rc == TRAIN_NONFINITE) {
        // Every rank sees the same values: rank 0 tells. Its own exit status, so that a script can
        // tell a diverged run from a broken one.
        if (rank == 0) fprintf(stderr, "mtac train: diverged: %s\n", err);
        dist_finalize(d);
        return 3;
    }
    if (rc) {
        if (ranks > 1) {
            // The other ranks may be waiting for this one: end them all.
            fprintf(stderr, "mtac train: rank %d of %d failed: %s\n", rank, ranks, err);
            fflush(stderr);
            dist_abort(d, 1);
        }
        fprintf(stderr, "mtac train: %s\n", err);
        dist_finalize(d);
        return 1;
    }
    dist_finalize(d);
    // Stopped by a signal (the checkpoint is saved): not finished, so not 0; the shell's status of
    // a process the signal ended, which `train && eval` and batch schedulers read as interrupted.
    return cli_stop_signal ? 128 + cli_stop_signal : 0;
}
