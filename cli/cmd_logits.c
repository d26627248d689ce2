// cmd_logits.c: `mtac logits`: the model's logits at every position of a sequence of token ids, for
// checking a run against another implementation (the real tier compares an imported model's with
// transformers' this way).
#include "cli.h"
#include "io/fsutil.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] = "usage: mtac logits --run DIR [--ids \"ID ID ...\"] [--out FILE]\n";
static const char ABOUT[] =
    "Runs the run's model forward over one sequence of token ids (from --ids, else standard input;\n"
    "separated by spaces, commas or newlines) and prints the logits of every position as one JSON\n"
    "object {\"ids\": [...], \"vocab_size\": V, \"logits\": [[V numbers], ...]} (9 significant digits,\n"
    "which float32 round-trips); --out FILE writes them instead as raw little-endian float32, T rows\n"
    "of V, atomically. `mtac tokenize` gives the ids of a text.\n";

// Parses ids from text: -1 with a message naming the position for a non-number or an id outside
// [0, V).
static int parse_ids(const char *s, int V, int **ids, int *n, char *err, size_t en) {
    size_t cap = 16;
    *n = 0;
    *ids = malloc(cap * sizeof **ids);
    while (*ids) {
        while (*s == ' ' || *s == ',' || *s == '\n' || *s == '\t' || *s == '\r') s++;
        if (!*s) return 0;
        char *end;
        errno = 0;
        const long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v >= V || (*end && !strchr(" ,\n\t\r", *end))) {
            snprintf(err, en, "id %d ('%.*s') is not a token id in [0, %d)", *n + 1, (int)strcspn(s, " ,\n\t\r"), s,
                     V);
            return -1;
        }
        if ((size_t)*n == cap) {
            int *p = realloc(*ids, (cap *= 2) * sizeof *p);
            if (!p) break;
            *ids = p;
        }
        (*ids)[(*n)++] = (int)v;
        s = end;
    }
    snprintf(err, en, "out of memory");
    return -1;
}

static int write_json(const int *ids, int T, int V, const float *z) {
    printf("{\"ids\": [");
    for (int t = 0; t < T; t++) printf("%s%d", t ? ", " : "", ids[t]);
    printf("], \"vocab_size\": %d, \"logits\": [", V);
    for (int t = 0; t < T; t++) {
        printf("%s[", t ? ",\n" : "");
        for (int j = 0; j < V; j++) printf("%s%.9g", j ? "," : "", z[(size_t)t * V + j]);
        printf("]");
    }
    printf("]}\n");
    return ferror(stdout) ? -1 : 0;
}

static int write_bin(const char *path, const float *z, size_t count, char *err, size_t en) {
    out_file o;
    if (out_open(&o, path, err, en)) return -1;
    if (fwrite(z, sizeof *z, count, o.f) != count) {
        snprintf(err, en, "%s: cannot write: %s", path, strerror(errno));
        out_abort(&o);
        return -1;
    }
    return out_close(&o, err, en);
}

// The bytes read as a NUL-terminated string (malloc'd; NULL when out of memory).
static char *text_of(const unsigned char *b, size_t len) {
    char *s = malloc(len + 1);
    if (s) memcpy(s, b ? (const char *)b : "", len), s[len] = 0;
    return s;
}

int cmd_logits(int argc, char **argv) {
    const char *run = NULL, *ids_text = NULL, *out = NULL;
    const cli_opt opts[] = {
        {"run", CLI_STR, &run, .required = 1, .arg = "DIR", .help = "the run whose model computes"},
        {"ids", CLI_STR, &ids_text, .arg = "IDS", .help = "the token ids (default: read from standard input)"},
        {"out", CLI_STR, &out, .arg = "FILE", .help = "write raw float32 (T, V) here instead of JSON"},
    };
    const cli_spec spec = {"mtac logits", USAGE, ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    int first;
    const int st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    train_config c;
    model *m;
    const int rc = cli_open_run("logits", run, &c, &m);
    if (rc) return rc;
    unsigned char *text = NULL;
    size_t len = 0;
    int *ids = NULL, T = 0, status = 0;
    char *owned = NULL;
    char err[1024];
    if (!ids_text && read_stream(stdin, &text, &len)) {
        fprintf(stderr, "mtac logits: cannot read standard input: %s\n", strerror(errno));
        status = 1;
    } else if (!ids_text && !(ids_text = owned = text_of(text, len))) {
        fprintf(stderr, "mtac logits: out of memory\n");
        status = 1;
    } else if (parse_ids(ids_text, c.model.vocab_size, &ids, &T, err, sizeof err)) {
        fprintf(stderr, "mtac logits: %s\n", err);
        status = 2;
    } else if (T == 0) {
        fprintf(stderr, "mtac logits: no token ids given\n");
        status = 2;
    } else if (model_forward(m, ids, NULL, 1, T, NULL, err, sizeof err)) {
        fprintf(stderr, "mtac logits: %s\n", err);
        status = 1;
    } else {
        const float *z = model_logits(m);
        const int V = c.model.vocab_size;
        if (out ? write_bin(out, z, (size_t)T * V, err, sizeof err) : write_json(ids, T, V, z)) {
            fprintf(stderr, "mtac logits: %s\n", out ? err : "cannot write standard output");
            status = 1;
        }
    }
    free(ids), free(text), free(owned);
    model_free(m);
    return status;
}
