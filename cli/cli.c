// cli.c: what the mtac commands share: the backend and thread settings, opening a run, a clock
// (options declared as tables: cli_opts.c). Command files call these, never each other.
#include "cli.h"
#include "io/fsutil.h"
#include "tok/tokenizer.h"

#include <cblas.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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

const char *const *cli_backend_names(void) {
    static const char *names[MTA_N_BACKENDS + 1];
    for (int i = 0; i < MTA_N_BACKENDS; i++) names[i] = mta_backend_name((mta_backend)i);
    return names;
}

int cli_backend_usable(const char *cmd, mta_backend b) {
    if (mta_backend_available(b)) return 1;
    mta_config c = mta_config_default(1, 1, 1, 1);
    char why[256];
    c.backend = b;
    if (mta_config_check(&c, why, sizeof why)) fprintf(stderr, "%s: %s\n", cmd, why);
    else fprintf(stderr, "%s: the %s backend cannot run on this machine (it needs a GPU it can use)\n", cmd, mta_backend_name(b));
    return 0;
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

const char *const CLI_NO_YES[] = {"no", "yes", NULL};

tokenizer *cli_open_tokenizer(const char *cmd, const char *run) {
    char err[1024];
    // a run without tokenizer.json is byte-level: a path that is no run at all must not be
    struct stat st;
    const int missing = stat(run, &st);
    if (missing || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "mtac %s: %s is not a run directory (%s)\n", cmd, run, missing ? strerror(errno) : "not a directory");
        return NULL;
    }
    tokenizer *t = tokenizer_load_run(run, err, sizeof err);
    if (!t) fprintf(stderr, "mtac %s: %s\n", cmd, err);
    return t;
}

int cli_out_is_input(const char *cmd, const char *out, const char *in) {
    if (!same_file(out, in)) return 0;
    fprintf(stderr, "%s: the output %s is the input %s: writing it would destroy the input (choose another --out)\n",
            cmd, out, in);
    return 1;
}

void cli_cpu_name(char *buf, size_t n) {
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c += 2;
                c[strcspn(c, "\n")] = 0;
                snprintf(buf, n, "%s", c);
            }
            break;
        }
    fclose(f);
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

volatile sig_atomic_t cli_stop_signal = 0;
static const char *stop_msg;  // written by the handler (write(2) is async-signal-safe), or NULL

static void on_stop_signal(int sig) {
    cli_stop_signal = sig;
    if (stop_msg && write(STDERR_FILENO, stop_msg, strlen(stop_msg)) < 0) return;
}

void cli_catch_stop(const int *sigs, const char *msg) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESETHAND;
    stop_msg = msg;
    for (; *sigs; sigs++) sigaction(*sigs, &sa, NULL);
}

void cli_release_stop(const int *sigs) {
    for (; *sigs; sigs++) signal(*sigs, SIG_DFL);
}
