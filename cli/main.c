// main.c: the mtac command-line tool: dispatches to subcommands.
#include "cli.h"
#include "util/threads.h"

#include <cblas.h>
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <time.h>

static void usage(FILE *f) {
    fprintf(f,
            "mtac: Multi-Token Attention in C\n"
            "\n"
            "usage: mtac <command> [options]   (mtac <command> --help for details)\n"
            "\n"
            "commands:\n"
            "  attn    run the MTA operator on tensors from a safetensors file (forward, and backward if dout)\n"
            "  bench   benchmarks: `mtac bench attn` times plain attention, MTA and the naive PyTorch MTA\n"
            "  demo    a short tour of the operator: MTA vs plain attention, identity kernels, gradients\n"
            "  data    turn text files (default: the King James Bible) into token shards\n"
            "  train   train an MTA or baseline language model; --resume continues a run\n"
            "  eval    validation loss and perplexity of a trained run; eval needle|babi: long-context retrieval\n"
            "  sample  generate text from a trained run\n"
            "  plot    loss curves of runs (PNG or SVG)\n"
            "  toy     the paper's toy task: train and evaluate baseline and MTA over seeds (--quick: a demo)\n"
            "  attnmap draw where the toy models attend, baseline beside MTA (PNG or SVG)\n"
            "  convert --add-mta: a trained baseline as an MTA model with identity kernels (same outputs)\n"
            "\n"
            "threads: at most OMP_NUM_THREADS (default: every core); work too small to share (decoding a token of a\n"
            "small model, the toy task) runs on fewer. mtac runs with OMP_WAIT_POLICY=passive (waiting threads sleep\n"
            "instead of spinning: for machines shared with other jobs) unless you set OMP_WAIT_POLICY yourself.\n");
}

int cli_open_run(const char *cmd, const char *run, train_config *c, model **m) {
    mta_backend backend;
    if (cli_default_backend(&backend)) return 2;
    char err[1024];
    if (!(*m = train_open_run(run, c, err, sizeof err))) {
        fprintf(stderr, "mtac %s: %s\n", cmd, err);
        return 1;
    }
    model_set_backend(*m, backend);
    return 0;
}

int cli_parse_pos_int(const char *flag, const char *s, int *out) {
    char *end;
    errno = 0;
    long x = s ? strtol(s, &end, 10) : 0;
    if (!s || errno || end == s || *end != '\0' || x < 1 || x > 1000000000) {
        fprintf(stderr, "mtac: %s expects a positive integer, got '%s'\n", flag, s ? s : "(nothing)");
        return 0;
    }
    *out = (int)x;
    return 1;
}

int cli_default_backend(mta_backend *b) {
    const char *e = getenv("MTAC_BACKEND");
    *b = MTA_BACKEND_FUSED;
    if (!e || !*e) return 0;
    if (mta_backend_from_name(e, b) || mta_backend_device_memory(*b)) {
        fprintf(stderr, "mtac: MTAC_BACKEND=%s is not a backend of host tensors (fused or reference; a backend of device "
                        "memory runs in `mtac attn --backend NAME` and `mtac bench attn --backend NAME`)\n", e);
        return -1;
    }
    return 0;
}

int cli_backend_usable(const char *cmd, const char *name, mta_backend *b) {
    if (mta_backend_from_name(name, b)) {
        fprintf(stderr, "%s: --backend expects one of", cmd);
        for (int i = 0; i < MTA_N_BACKENDS; i++) fprintf(stderr, "%s %s", i ? "," : "", mta_backend_name((mta_backend)i));
        fprintf(stderr, ", got '%s'\n", name);
        return 0;
    }
    if (!mta_backend_available(*b)) {
        mta_config c = mta_config_default(1, 1, 1, 1);
        char why[256];
        c.backend = *b;
        if (mta_config_check(&c, why, sizeof why)) fprintf(stderr, "%s: %s\n", cmd, why);
        else fprintf(stderr, "%s: the %s backend cannot run on this machine (it needs a GPU it can use)\n", cmd, name);
        return 0;
    }
    return 1;
}

float *cli_on_backend(mta_backend b, const float *host, size_t n) {
    if (!mta_backend_device_memory(b)) return (float *)host;
    void *d = NULL;
    mta_status s = mta_backend_alloc(b, n * sizeof(float), &d);
    if (!s) s = mta_backend_upload(b, d, host, n * sizeof(float));
    if (s) {
        fprintf(stderr, "mtac: could not place %.1f MB in the %s backend's memory: %s\n", n * 4e-6, mta_backend_name(b),
                mta_status_str(s));
        mta_backend_free(b, d);
        return NULL;
    }
    return d;
}

int cli_from_backend(mta_backend b, float *host, const float *placed, size_t n) {
    if (placed == host) return 0;
    mta_status s = mta_backend_synchronize(b);
    if (!s) s = mta_backend_download(b, host, placed, n * sizeof(float));
    if (s) fprintf(stderr, "mtac: could not read back from the %s backend: %s\n", mta_backend_name(b), mta_status_str(s));
    return s ? -1 : 0;
}

void cli_off_backend(mta_backend b, const float *host, float *placed) {
    if (placed && placed != host) mta_backend_free(b, placed);
}

void cli_set_threads(int n) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int cli_threads(void) { return omp_get_max_threads(); }

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

// The environment that OpenMP and OpenBLAS read when they load, before main: when mtac wants a
// variable the user left unset, it sets it and restarts itself once (one exec for all of them).
//  - OMP_WAIT_POLICY=passive: a thread that waits for work or at a barrier sleeps at once instead
//    of spinning (libgomp's default spins up to 300,000 times first). On a machine whose cores
//    another job also uses, spinning threads take the cores from the ones with work: the toy
//    quick start took 374 s instead of 77 s with two busy processes on 2 cores. A user's
//    OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.
//  - OpenBLAS 0.3.21 (Debian 12) does not recognise recent Xeons and falls back to its generic
//    "Prescott" SSE3 kernels, 2.5-5x slower than the AVX2/AVX-512 ones the CPU can run. When that
//    happened and the user chose no core (OPENBLAS_CORETYPE), restart with the kernels the CPU
//    supports. MTAC_KEEP_BLAS_CORE=1 keeps OpenBLAS's own choice.
// The restarted process finds every variable it would set already set, so it never restarts.
static void fix_env(char **argv) {
    int restart = 0;
    if (!getenv("OMP_WAIT_POLICY") && !getenv("GOMP_SPINCOUNT")) restart |= !setenv("OMP_WAIT_POLICY", "passive", 1);
    const char *core = getenv("OPENBLAS_CORETYPE") || getenv("MTAC_KEEP_BLAS_CORE") ? NULL : openblas_get_corename();
    if (core && !strcasecmp(core, "prescott")) {
        const char *want = __builtin_cpu_supports("avx512f") ? "SkylakeX" : __builtin_cpu_supports("avx2") ? "Haswell" : NULL;
        // the PyTorch reference that bench starts inherits the choice
        if (want && !setenv("MTAC_KEEP_BLAS_CORE", "1", 1)) restart |= !setenv("OPENBLAS_CORETYPE", want, 1);
    }
    if (!restart) return;
    // The binary's own path, not /proc/self/exe: the process takes its name (ps, top, pkill,
    // /proc/PID/comm) from the path it was executed as, and would be called "exe".
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return;
    self[len] = 0;
    execv(self, argv);
    // exec failed: carry on with the defaults
}

// Whether OpenMP's waiting threads spin (the user's OMP_WAIT_POLICY=active, or GOMP_SPINCOUNT
// without a policy): small work is then worth more threads (util/threads.h).
static int omp_spins(void) {
    const char *policy = getenv("OMP_WAIT_POLICY"), *count = getenv("GOMP_SPINCOUNT");
    if (policy) return !strcasecmp(policy, "active");
    return count && strtod(count, NULL) > 0;
}

int main(int argc, char **argv) {
    fix_env(argv);
    threads_set_spinning(omp_spins());
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "attn")) return cmd_attn(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "demo")) return cmd_demo(argc - 1, argv + 1);
    if (!strcmp(cmd, "data")) return cmd_data(argc - 1, argv + 1);
    if (!strcmp(cmd, "train")) return cmd_train(argc - 1, argv + 1);
    if (!strcmp(cmd, "eval")) return cmd_eval(argc - 1, argv + 1);
    if (!strcmp(cmd, "sample")) return cmd_sample(argc - 1, argv + 1);
    if (!strcmp(cmd, "plot")) return cmd_plot(argc - 1, argv + 1);
    if (!strcmp(cmd, "toy")) return cmd_toy(argc - 1, argv + 1);
    if (!strcmp(cmd, "attnmap")) return cmd_attnmap(argc - 1, argv + 1);
    if (!strcmp(cmd, "convert")) return cmd_convert(argc - 1, argv + 1);
    fprintf(stderr, "mtac: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}
