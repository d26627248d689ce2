// cli_opts.c: options declared as tables (cli_opts.h), parsed with getopt_long and listed in
// --help. Apart from cli.c so that a program linking libmtac alone (bench/bench_cuda.c) shares it.
#include "cli_opts.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_OPTS = 96 };

// An integer range in words: "a positive integer", "an integer >= 2", "an integer in [0, 9]".
static void int_range(char *buf, size_t n, double lo, double hi) {
    if (lo == 1 && hi >= 1e9) snprintf(buf, n, "a positive integer");
    else if (hi >= 1e9) snprintf(buf, n, "an integer >= %.16g", lo);
    else snprintf(buf, n, "an integer in [%.16g, %.16g]", lo, hi);
}

static void num_range(char *buf, size_t n, const cli_opt *o) {
    snprintf(buf, n, "a number in %c%.16g, %.16g%c", o->lo_open ? '(' : '[', o->lo, o->hi, o->hi_open ? ')' : ']');
}

static int bad(const cli_spec *s, const cli_opt *o, const char *v, const char *want) {
    fprintf(stderr, "%s: --%s expects %s, got '%s'\n", s->name, o->name, want, v);
    return 2;
}

static int set_int(const cli_spec *s, const cli_opt *o, const char *v) {
    char *end, want[96];
    errno = 0;
    const long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < o->lo || x > o->hi) {
        int_range(want, sizeof want, o->lo, o->hi);
        return bad(s, o, v, want);
    }
    *(int *)o->dst = (int)x;
    return -1;
}

static int set_num(const cli_spec *s, const cli_opt *o, const char *v) {
    char *end, want[96];
    errno = 0;
    const double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || x < o->lo || x > o->hi || (o->lo_open && x == o->lo) ||
        (o->hi_open && x == o->hi)) {
        num_range(want, sizeof want, o);
        return bad(s, o, v, want);
    }
    if (o->kind == CLI_NUM) *(double *)o->dst = x;
    else *(float *)o->dst = (float)x;
    return -1;
}

static int set_choice(const cli_spec *s, const cli_opt *o, const char *v) {
    for (int i = 0; o->choices[i]; i++)
        if (!strcmp(o->choices[i], v)) {
            *(int *)o->dst = i;
            return -1;
        }
    fprintf(stderr, "%s: --%s expects one of", s->name, o->name);
    for (int i = 0; o->choices[i]; i++) fprintf(stderr, "%s %s", i ? "," : "", o->choices[i]);
    fprintf(stderr, ", got '%s'\n", v);
    return 2;
}

// The names of a set in words: "a, b and/or c".
static void set_names(FILE *f, const char *const *names) {
    for (int i = 0; names[i]; i++) fprintf(f, "%s%s", i == 0 ? "" : names[i + 1] ? ", " : " and/or ", names[i]);
}

static int set_set(const cli_spec *s, const cli_opt *o, const char *v) {
    int bits = 0;
    for (const char *p = v; *p;) {
        const size_t len = strcspn(p, ",");
        int i = 0;
        while (o->choices[i] && (strlen(o->choices[i]) != len || strncmp(o->choices[i], p, len))) i++;
        if (!o->choices[i]) {
            fprintf(stderr, "%s: --%s expects a comma-separated list of ", s->name, o->name);
            set_names(stderr, o->choices);
            fprintf(stderr, ", got '%s'\n", v);
            return 2;
        }
        bits |= 1 << i;
        p += len + (p[len] == ',');
    }
    if (!bits) {
        fprintf(stderr, "%s: --%s is empty\n", s->name, o->name);
        return 2;
    }
    *(int *)o->dst = bits;
    return -1;
}

// The range of a list's integers in words: "positive integers", "integers in [0, 9]", ...
static void list_range(char *buf, size_t n, double lo, double hi) {
    if (lo == 1 && hi >= 1e9) snprintf(buf, n, "positive integers");
    else if (lo == 0 && hi >= 1e9) snprintf(buf, n, "non-negative integers");
    else if (hi >= 1e9) snprintf(buf, n, "integers >= %.16g", lo);
    else snprintf(buf, n, "integers in [%.16g, %.16g]", lo, hi);
}

static int set_list(const cli_spec *s, const cli_opt *o, const char *v) {
    uint64_t *out = o->dst;
    int k = 0;
    for (const char *p = v; *p;) {
        char *end;
        errno = 0;
        const unsigned long long x = strtoull(p, &end, 10);
        if (end == p || errno || *p == '-' || *p == '+' || (*end && *end != ',') || k == o->max || (double)x < o->lo ||
            (double)x > o->hi) {
            char want[96];
            list_range(want, sizeof want, o->lo, o->hi);
            fprintf(stderr, "%s: --%s expects up to %d comma-separated %s, got '%s'\n", s->name, o->name, o->max, want, v);
            return 2;
        }
        out[k++] = x;
        p = *end ? end + 1 : end;
    }
    if (!k) {
        fprintf(stderr, "%s: --%s is empty\n", s->name, o->name);
        return 2;
    }
    *o->count = k;
    return -1;
}

// The value v of option o into its place: -1, or 2 after a message.
static int set_value(const cli_spec *s, const cli_opt *o, const char *v) {
    switch (o->kind) {
    case CLI_FLAG: *(int *)o->dst = 1; return -1;
    case CLI_INT: return set_int(s, o, v);
    case CLI_NUM:
    case CLI_FLOAT: return set_num(s, o, v);
    case CLI_STR: *(const char **)o->dst = v; return -1;
    case CLI_CHOICE: return set_choice(s, o, v);
    case CLI_LIST: return set_list(s, o, v);
    case CLI_SET: return set_set(s, o, v);
    }
    return 2;
}

// getopt_long accepts an unambiguous prefix of a long option (--val for --val-every); mtac
// takes whole names only, as it always did. Whether argument text a names option o.
static int whole_name(const char *a, const cli_opt *o) {
    const size_t len = strlen(o->name);
    return !strncmp(a, "--", 2) && !strncmp(a + 2, o->name, len) && (a[2 + len] == 0 || a[2 + len] == '=');
}

// The argument text of the option getopt_long has just read (its value may follow in another).
static const char *option_text(int argc, char **argv) {
    const char *last = argv[optind - 1];
    if (optarg && optarg == last && optind >= 2 && optind - 2 < argc) return argv[optind - 2];
    return last;
}

static int parse_error(const cli_spec *s, int c, int argc, char **argv) {
    const char *a = optind >= 1 && optind - 1 < argc ? argv[optind - 1] : "?";
    if (c == ':') fprintf(stderr, "%s: %s needs a value (see --help)\n", s->name, a);
    else if (optopt && optopt != '?') fprintf(stderr, "%s: unknown option '-%c' (see --help)\n", s->name, optopt);
    else fprintf(stderr, "%s: unknown option '%s' (see --help)\n", s->name, a);
    return 2;
}

const char *const CLI_PRECISIONS[] = {"fp32", "bf16", NULL};

static int check_required(const cli_spec *s, const int *seen) {
    for (int i = 0; i < s->n_opts; i++)
        if (s->opts[i].required && !seen[i]) {
            const cli_opt *o = &s->opts[i];
            fprintf(stderr, "%s: --%s%s%s is required (see --help)\n", s->name, o->name, o->arg ? " " : "",
                    o->arg ? o->arg : "");
            return 2;
        }
    return -1;
}

int cli_parse(const cli_spec *s, int argc, char **argv, int *first) {
    struct option lo[MAX_OPTS + 2];
    int seen[MAX_OPTS] = {0};
    if (s->n_opts > MAX_OPTS) return fprintf(stderr, "%s: too many options\n", s->name), 2;
    for (int i = 0; i < s->n_opts; i++)
        lo[i] = (struct option){s->opts[i].name, s->opts[i].kind == CLI_FLAG ? no_argument : required_argument, NULL, i};
    lo[s->n_opts] = (struct option){"help", no_argument, NULL, 'h'};
    lo[s->n_opts + 1] = (struct option){NULL, 0, NULL, 0};
    optind = 0;  // glibc: start afresh (a command may parse twice in one process)
    opterr = 0;
    int c, rc = -1;
    while (rc < 0 && (c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
        if (c == 'h') {
            cli_usage(stdout, s);
            return 0;
        }
        if (c == '?' || c == ':') return parse_error(s, c, argc, argv);
        const char *a = option_text(argc, argv);
        if (!whole_name(a, &s->opts[c])) {
            fprintf(stderr, "%s: unknown option '%.*s' (see --help)\n", s->name, (int)strcspn(a, "="), a);
            return 2;
        }
        seen[c] = 1;
        if (s->opts[c].given) *s->opts[c].given = 1;
        rc = set_value(s, &s->opts[c], optarg);
    }
    if (rc >= 0) return rc;
    if (!s->operands && optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s' (see --help)\n", s->name, argv[optind]);
        return 2;
    }
    *first = optind;
    return check_required(s, seen);
}

// What --help adds after an option's help: its default (the value its place holds before
// parsing, when that is a value the option can take) and its range.
static void print_default(FILE *f, const cli_opt *o) {
    char r[96] = "";
    if (o->kind == CLI_INT) {
        const int x = *(const int *)o->dst;
        if (!(o->lo == 1 && o->hi >= 1e9)) int_range(r, sizeof r, o->lo, o->hi);
        if (x >= o->lo && x <= o->hi) fprintf(f, " (default %d%s%s)", x, *r ? "; " : "", r);
        else if (*r) fprintf(f, " (%s)", r);
    } else if (o->kind == CLI_NUM || o->kind == CLI_FLOAT) {
        const double x = o->kind == CLI_NUM ? *(const double *)o->dst : *(const float *)o->dst;
        num_range(r, sizeof r, o);
        if (x >= o->lo && x <= o->hi) fprintf(f, " (default %g; %s)", x, r);
        else fprintf(f, " (%s)", r);
    } else if (o->kind == CLI_STR && *(const char *const *)o->dst) {
        fprintf(f, " (default %s)", *(const char *const *)o->dst);
    } else if (o->kind == CLI_CHOICE) {
        const int x = *(const int *)o->dst;  // below 0: no default
        fprintf(f, " (");
        for (int i = 0; o->choices[i]; i++) fprintf(f, "%s%s", i ? ", " : "", o->choices[i]);
        if (x >= 0) fprintf(f, "; default %s", o->choices[x]);
        fprintf(f, ")");
    } else if (o->kind == CLI_SET) {
        const int x = *(const int *)o->dst;
        fprintf(f, " (any of ");
        set_names(f, o->choices);
        for (int i = 0, k = 0; o->choices[i]; i++)
            if (x & 1 << i) fprintf(f, "%s%s", k++ ? "," : "; default ", o->choices[i]);
        fprintf(f, ")");
    } else if (o->kind == CLI_LIST && o->max > 1) {
        list_range(r, sizeof r, o->lo, o->hi);
        fprintf(f, " (up to %d %s)", o->max, r);
    }
}

void cli_print_opts(FILE *f, const cli_opt *opts, int n) {
    for (int i = 0; i < n; i++) {
        const cli_opt *o = &opts[i];
        char head[64];
        if (!o->help) continue;
        snprintf(head, sizeof head, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
        fprintf(f, "  %-22s %s", head, o->help ? o->help : "");
        print_default(f, o);
        fprintf(f, "\n");
    }
}

void cli_usage(FILE *f, const cli_spec *s) {
    fputs(s->usage, f);
    if (s->about) fprintf(f, "\n%s", s->about);
    if (s->n_opts) {
        fprintf(f, "\noptions:\n");
        cli_print_opts(f, s->opts, s->n_opts);
    }
    if (s->more_help) s->more_help(f);
}
