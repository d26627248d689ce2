// cli_opts.h: options declared as tables: the parser every mtac command and bench_cuda use.
#ifndef MTAC_CLI_OPTS_H
#define MTAC_CLI_OPTS_H

#include <stdio.h>

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
    int *given;                    // when set: 1 there once the option appears (even at its default)
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

// The values of a --precision option (CLI_CHOICE): its index is the mta_precision (MTA_FP32, MTA_BF16).
// Here, not in cli.c, because bench_cuda (which links this file alone) takes --precision too.
extern const char *const CLI_PRECISIONS[];

// Parses argv[1..] (argv[0] is the command's name) against spec: -1 to go on, the operands in
// argv[*first .. argc-1]; else the status to exit with: 0 after printing --help (or -h) on
// stdout, 2 after a message on stderr (an unknown option, a missing or bad value, a missing
// required option, an operand where none is allowed).
int cli_parse(const cli_spec *spec, int argc, char **argv, int *first);
// The --help text of spec.
void cli_usage(FILE *f, const cli_spec *spec);
// The options part of --help: one line per option, with its default and range.
void cli_print_opts(FILE *f, const cli_opt *opts, int n);

#endif
