// cmd_train.c: `mtac train`: train an MTA or baseline model on token shards.
#include "cli.h"
#include "train/train.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtac train [--preset NAME] [--config FILE.json] [--steps N] [--out DIR] [--KEY VALUE ...]\n"
            "       mtac train --resume DIR [--steps N] [--KEY VALUE ...]\n"
            "\n"
            "Trains a model on token shards made by `mtac data` (train.bin, val.bin in --data), printing a\n"
            "progress line and writing DIR/metrics.jsonl (step, loss, lr, grad_norm, tokens_per_s, val_loss),\n"
            "DIR/checkpoint.safetensors (weights + optimizer + state, atomic), DIR/model.safetensors and\n"
            "DIR/config.json. Ctrl-C (SIGINT), SIGTERM or SIGUSR1 saves a checkpoint and stops; --resume continues the\n"
            "run exactly where it stopped, with DIR's config.json and its model (--preset may not change it);\n"
            "--steps N there sets a new total, over which a linear or cosine lr schedule is then recomputed\n"
            "(the lr from the resumed step on follows the stretched schedule). A loss, gradient norm or weight\n"
            "that becomes NaN or infinite stops the run without saving (exit status 3): the last checkpoint\n"
            "stays as it was. Under mpirun or srun each process is a rank of one data-parallel run with the\n"
            "same result (docs/distributed.md):\n"
            "  mpirun -np 2 -x OMP_NUM_THREADS=1 mtac train ... (grad_accum a multiple of the ranks).\n"
            "A config file holds\n"
            "the keys below and optionally a \"model\" object (docs/model.md); flags override it. Unknown keys\n"
            "are errors. Presets: %s.\n"
            "\nkeys:\n",
            "toy, lm1m, lm10m, 300m, 830m (each also -baseline)");
    train_config_print_keys();
    fprintf(f, "\n");
}

static volatile sig_atomic_t g_stop = 0;
static void on_signal(int sig) { g_stop = sig; }

// Progress lines (train_run calls this on rank 0 only).
static void print_event(void *arg, const train_event *e) {
    const train_config *c = arg;
    switch (e->kind) {
    case TRAIN_EV_RESUMED: printf("resumed %s at step %d\n", e->path, e->step); break;
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

// Applies --KEY VALUE pairs (everything but --config, --resume) to c.
static int apply_flags(train_config *c, int argc, char **argv) {
    char err[512];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2)) {
            fprintf(stderr, "mtac train: unexpected argument '%s' (see --help)\n", a);
            return -1;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mtac train: %s needs a value (see --help)\n", a);
            return -1;
        }
        if (!strcmp(a, "--config") || !strcmp(a, "--resume")) {
            i++;
            continue;
        }
        if (train_config_set(c, a + 2, argv[++i], err, sizeof err)) {
            fprintf(stderr, "mtac train: %s\n", err);
            return -1;
        }
    }
    return 0;
}

int cmd_train(int argc, char **argv) {
    const char *config = NULL, *resume = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--config") && i + 1 < argc) config = argv[i + 1];
        if (!strcmp(argv[i], "--resume") && i + 1 < argc) resume = argv[i + 1];
    }
    train_config c;
    train_config_default(&c);
    char err[1024];
    char saved_preset[sizeof c.preset] = "";
    int saved_steps = 0;
    if (resume) {
        // the run's own saved configuration first, then any file and flags on top
        char path[1100];
        snprintf(path, sizeof path, "%s/config.json", resume);
        if (train_config_load(&c, path, err, sizeof err)) {
            fprintf(stderr, "mtac train: cannot resume: %s\n", err);
            return 1;
        }
        memcpy(saved_preset, c.preset, sizeof saved_preset);
        saved_steps = c.steps;
    }
    if (config && train_config_load(&c, config, err, sizeof err)) {
        fprintf(stderr, "mtac train: %s\n", err);
        return 2;
    }
    if (apply_flags(&c, argc, argv)) return 2;
    // A resumed run's model is the one its config.json (and checkpoint) hold: a --preset (or a
    // config file's) naming another would be ignored, so it is refused.
    if (resume && strcmp(c.preset, saved_preset)) {
        fprintf(stderr, "mtac train: --resume %s: the run's model is its own (preset '%s' in its config.json); "
                        "--preset '%s' cannot change it: start a new run (--out DIR) for another model\n",
                resume, saved_preset, c.preset);
        return 2;
    }
    // The run directory goes through the same check as --out (a path that does not fit is refused,
    // never cut short).
    if (resume && train_config_set(&c, "out", resume, err, sizeof err)) {
        fprintf(stderr, "mtac train: --resume: %s\n", err);
        return 2;
    }
    if (train_config_finish(&c, err, sizeof err)) {
        fprintf(stderr, "mtac train: %s\n", err);
        return 2;
    }
    if (cli_default_backend(&c.backend)) return 2;
    // Launched by mpirun or srun, every process is a rank of one run (docs/distributed.md).
    dist *d = dist_world(&argc, &argv);
    if (!d) {
        fprintf(stderr, "mtac train: launched as one of several MPI processes, but this mtac was built without MPI "
                        "(-DMTAC_MPI=OFF, or libopenmpi-dev missing): each would train alone. Rebuild with MPI "
                        "(scripts/setup.sh) or run one process\n");
        return 2;
    }
    const int rank = dist_rank(d), ranks = dist_size(d);
    if (resume && rank == 0 && c.steps != saved_steps && strcmp(c.schedule, "constant"))
        printf("note: --steps %d on a run of %d steps: the %s lr schedule is recomputed over %d steps, so from the "
               "resumed step on the lr follows the stretched schedule, not the first run's\n",
               c.steps, saved_steps, c.schedule, c.steps);
    // SIGINT, SIGTERM or SIGUSR1 (which mpirun forwards at once; SIGTERM only after its
    // odls_base_sigkill_timeout): every rank finishes its step, then the run saves once and stops.
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    const train_hooks hooks = {d, &g_stop, print_event, &c};
    int rc = train_run(&c, resume != NULL, &hooks, err, sizeof err);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGUSR1, SIG_DFL);
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
    return 0;
}
