// cli.h: the mtac subcommands and the helpers they share (cli.c): options declared as tables,
// backends, threads, clocks. A command file calls only these, never another command file.
#ifndef MTAC_CLI_H
#define MTAC_CLI_H

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

// One option of a command, declared as data. A command lists its options in a table; cli_parse
// reads argv against it with getopt_long (checking each value's kind and range, and naming the
// flag in every message) and cli_usage prints the options part of --help from the same table.
typedef enum {
    CLI_FLAG,    // no value: *(int *)dst = 1
    CLI_INT,     // *(int *)dst: an integer in [lo, hi]
    CLI_NUM,     // *(double *)dst: a number in [lo, hi] ((lo, or hi) with lo_open, hi_open)
    CLI_FLOAT,   // *(float *)dst: as CLI_NUM
    CLI_STR,     // *(const char **)dst: the text itself
    CLI_CHOICE,  // *(int *)dst: the index of the value in choices (a NULL-ended list of names)
    CLI_LIST,    // "1,2,3": at most max integers in [lo, hi] into (uint64_t *)dst, how many in *count
    CLI_SET,     // "a,c": names from choices; *(int *)dst gets bit i (1 << i) for each choices[i] named
} cli_kind;

typedef struct {
    const char *name;  // the long option, without "--"
    cli_kind kind;
    void *dst;         // where the value goes; what it holds beforehand is the default --help shows
    double lo, hi;     // CLI_INT, CLI_NUM, CLI_FLOAT, CLI_LIST: the range
    int lo_open, hi_open;
    int max, *count;               // CLI_LIST
    const char *const *choices;    // CLI_CHOICE, CLI_SET
    int required;                  // missing: "--NAME ARG is required"
    const char *arg;               // the value's name in --help (N, DIR, LIST, ...)
    const char *help;              // its line in --help (NULL: not listed)
} cli_opt;

// A command as data: its messages start with name ("mtac data"); --help prints usage, about,
// then the options. Operands (arguments that are no option) are allowed only when operands
// names them (for the message about too many, the command itself checks the count).
typedef struct {
    const char *name, *usage, *about, *operands;
    const cli_opt *opts;
    int n_opts;
    void (*more_help)(FILE *f);  // when set, what --help prints after the options
} cli_spec;

// Parses argv[1..] (argv[0] is the command's name) against spec: -1 to go on, the operands in
// argv[*first .. argc-1]; else the status to exit with: 0 after printing --help (or -h) on
// stdout, 2 after a message on stderr (an unknown option, a missing or bad value, a missing
// required option, an operand where none is allowed).
int cli_parse(const cli_spec *spec, int argc, char **argv, int *first);
// The --help text of spec.
void cli_usage(FILE *f, const cli_spec *spec);
// The options part of --help: one line per option, with its default and range.
void cli_print_opts(FILE *f, const cli_opt *opts, int n);

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
