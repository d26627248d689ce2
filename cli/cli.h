// cli.h: the mtac subcommands and small helpers they share.
#ifndef MTAC_CLI_H
#define MTAC_CLI_H

#include "mta.h"
#include "train/train.h"

#include <stddef.h>

int cmd_attn(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
// `mtac eval needle|babi` (cmd_eval_longctx.c); argv[0] is the task.
int cmd_eval_longctx(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_toy(int argc, char **argv);
int cmd_attnmap(int argc, char **argv);
int cmd_convert(int argc, char **argv);

// Parses a positive integer flag value; prints an error naming the flag and returns 0 if bad.
int cli_parse_pos_int(const char *flag, const char *s, int *out);

// Sets the OpenMP and BLAS thread counts (n >= 1).
void cli_set_threads(int n);
// The thread count OpenMP regions use now.
int cli_threads(void);

// The attention backend the commands use unless told otherwise: MTAC_BACKEND (fused or
// reference) when set, else fused. An unknown name is an error: a message, and -1.
int cli_default_backend(mta_backend *b);
// The backend named by a --backend flag of command cmd, when this build and machine can run it
// (1); else 0 after saying why.
int cli_backend_usable(const char *cmd, const char *name, mta_backend *b);
// n floats where backend b's calls take them: host itself for a backend of host memory, else a
// copy in its device's memory (mta_backend_alloc, upload); NULL after a message on failure.
// cli_from_backend copies such a copy back (after the device's work; 0 or -1 after a message),
// cli_off_backend frees it (nothing for host memory).
float *cli_on_backend(mta_backend b, const float *host, size_t n);
int cli_from_backend(mta_backend b, float *host, const float *placed, size_t n);
void cli_off_backend(mta_backend b, const float *host, float *placed);

// Opens a run directory for a command (eval, sample): its configuration into *c and its model on
// the default backend into *m. 0, or the exit status (1: the run, 2: MTAC_BACKEND) after a message
// naming cmd. (train_config: train/train.h.)
int cli_open_run(const char *cmd, const char *run, train_config *c, model **m);

// `mtac bench decode` (cmd_bench_decode.c).
int bench_decode(int argc, char **argv);

// "1,2,3" into at most max positive integers (each <= 2^20); the count, or 0 if malformed.
int cli_parse_list(const char *s, int *out, int max);

// The CPU's model name from /proc/cpuinfo.
void cli_cpu_name(char *buf, size_t n);

// Seconds on a monotonic clock.
double cli_now(void);

#endif
