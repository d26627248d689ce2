// cli.h: the mtac subcommands and the helpers they share (cli.c): options declared as tables,
// backends, threads, clocks. A command file calls only these, never another command file.
#ifndef MTAC_CLI_H
#define MTAC_CLI_H

#include "cli_opts.h"
#include "mta.h"
#include "tok/tokenizer.h"
#include "train/train.h"

#include <signal.h>
#include <stddef.h>
#include <stdio.h>

int cmd_attn(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_toy(int argc, char **argv);
int cmd_attnmap(int argc, char **argv);
int cmd_convert(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_import(int argc, char **argv);
// `mtac bench attn|train` (cmd_bench.c), `mtac bench decode` (cmd_bench_decode.c): main.c's
// `bench` picks one.
int cmd_bench_attn(int argc, char **argv);
int cmd_bench_train(int argc, char **argv);
int cmd_bench_decode(int argc, char **argv);
// cli_parse for a benchmark (cmd_bench.c), then *threads, if 0, is every core: -1 to go on, else
// the status to exit with.
int cli_parse_bench(const cli_spec *spec, int argc, char **argv, int *threads);

// Sets the OpenMP and BLAS thread counts (n >= 1).
void cli_set_threads(int n);
// The thread count OpenMP regions use now.
int cli_threads(void);

// The attention backend the commands use unless told otherwise: MTAC_BACKEND (fused or
// reference) when set, else fused. An unknown name is an error: a message, and -1.
int cli_default_backend(mta_backend *b);
// The backends' names by their mta_backend value, NULL-ended: the choices of a --backend option
// (CLI_CHOICE, whose index is then the mta_backend).
const char *const *cli_backend_names(void);
// Whether this build and machine can run backend b (1); else 0 after a message naming cmd.
int cli_backend_usable(const char *cmd, mta_backend b);
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

// The values of a yes/no option (CLI_CHOICE: index 0 no, 1 yes), such as --bos.
extern const char *const CLI_NO_YES[];

// The tokenizer of the run directory run (tok/tokenizer.h: the run's tokenizer.json, else
// byte-level): NULL after a message naming cmd.
tokenizer *cli_open_tokenizer(const char *cmd, const char *run);

// Whether the output path out names the same file as the input in (same device and inode, so
// whatever the names and links): 1 after a message naming cmd and both (writing there would
// destroy the input), else 0.
int cli_out_is_input(const char *cmd, const char *out, const char *in);

// The CPU's model name from /proc/cpuinfo.
void cli_cpu_name(char *buf, size_t n);

// Seconds on a monotonic clock.
double cli_now(void);

// A stop asked for by signal, for a command that stops cleanly (train, import): cli_catch_stop
// makes the first of the signals sigs (a 0-ended list) set cli_stop_signal to its number and
// write msg (when not NULL) to stderr. The handler is then the default again (SA_RESETHAND), so a
// second signal ends the process at once. cli_release_stop(sigs) puts the defaults back.
extern volatile sig_atomic_t cli_stop_signal;
void cli_catch_stop(const int *sigs, const char *msg);
void cli_release_stop(const int *sigs);

#endif
