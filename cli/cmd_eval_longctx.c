// cmd_eval_longctx.c: `mtac eval needle` and `mtac eval babi`: a run's greedy exact-match accuracy
// on the long-context tasks (docs/longctx.md), as a table, JSON and a PNG heat map.
#include "cli.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "eval/retrieval.h"
#include "io/fsutil.h"
#include "io/heatmap.h"
#include "train/train.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_CELLS = 16 };

static void usage(FILE *f, int needle) {
    if (needle)
        fprintf(f, "usage: mtac eval needle --run DIR [--contexts LIST] [--depths LIST] [--needles N] [--queries N]\n"
                   "                        [--compound] [--examples N] [--seed N] [--batch N] [--data DIR]\n"
                   "                        [--show N] [--json FILE] [--png FILE]\n\n"
                   "Needle-in-a-haystack retrieval: N sentences \"the KEY is VALUE.\" in King James Bible text from\n"
                   "DATA/val.bin (default: the run's data directory; text the run did not train on), the first asked\n"
                   "needle at each depth (0 = start of the text, 1 = end), then a question for --queries keys; the\n"
                   "run's model answers greedily, scored by exact match. --compound: two-word keys that share words\n"
                   "with other keys (\"red door\", \"red lamp\", \"blue door\"). Defaults: contexts = the run's seq_len,\n"
                   "depths 0,0.25,0.5,0.75,1, 4 needles, 1 query, 20 examples per cell, seed 1, batch 4.\n"
                   "Prints accuracy by context x depth; --json writes every cell, --png a heat map; --show N prints\n"
                   "the expected and the greedy answers of each cell's first N examples.\n");
    else
        fprintf(f, "usage: mtac eval babi --run DIR [--tasks LIST] [--contexts LIST] [--facts N] [--examples N]\n"
                   "                      [--seed N] [--batch N] [--data DIR] [--show N] [--json FILE] [--png FILE]\n\n"
                   "bAbI-style questions (qa1 one supporting fact, qa2 two, qa3 three) whose facts are spread\n"
                   "through King James Bible text from DATA/val.bin; greedy answers, exact match. Defaults: tasks\n"
                   "qa1,qa2,qa3, contexts = the run's seq_len, 8 facts, 20 examples per cell, seed 1, batch 4.\n"
                   "Prints accuracy by context x task; --json writes every cell, --png a heat map; --show N prints\n"
                   "the expected and the greedy answers of each cell's first N examples. --tasks copy scores the\n"
                   "training mixture's copy task (docs/longctx.md) the same way, to see whether a run learned it.\n");
}

// "0,0.5,1" into at most max fractions in [0, 1]; the count, or 0 if malformed.
static int parse_fractions(const char *s, double *out, int max) {
    int k = 0;
    while (*s && k < max) {
        char *end;
        double x = strtod(s, &end);
        if (end == s || !(x >= 0 && x <= 1) || (*end && *end != ',')) return 0;
        out[k++] = x;
        s = *end ? end + 1 : end;
    }
    return *s ? 0 : k;
}

typedef struct {
    int total, show;
} eval_view;

static void on_progress(void *arg, int done) {
    const eval_view *v = arg;
    fprintf(stderr, "\r  %d/%d examples", done, v->total);
    fflush(stderr);
}

static void print_tokens(const char *label, const int *ids, int n) {
    fprintf(stderr, "%s \"", label);
    for (int i = 0; i < n; i++) {
        const char *marker = tok_marker((uint32_t)ids[i]);
        if (marker) fputs(marker, stderr);
        else if (ids[i] == '\n') fputs("\\n", stderr);
        else fputc(ids[i], stderr);
    }
    fputs("\"\n", stderr);
}

// --show: the first examples' expected and greedy answers, below the progress line
static void on_answered(void *arg, int i, const int *expected, int n_expected, const int *got, int n_got, int correct) {
    const eval_view *v = arg;
    if (i >= v->show) return;
    fprintf(stderr, "\r%30s\r  example %d (%s):\n", "", i, correct ? "right" : "wrong");
    print_tokens("    expected", expected, n_expected);
    print_tokens("    got     ", got, n_got);
}

int cmd_eval_longctx(int argc, char **argv) {
    const int needle = !strcmp(argv[0], "needle");
    const char *run = NULL, *data = NULL, *json = NULL, *png = NULL, *contexts_s = NULL;
    const char *depths_s = "0,0.25,0.5,0.75,1", *tasks_s = "qa1,qa2,qa3";
    int needles = 4, queries = 1, compound = 0, examples = 20, batch = 4, facts = 8, seed = 1, show = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout, needle);
            return 0;
        }
        if (!strcmp(a, "--compound") && needle) {
            compound = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mtac eval %s: %s needs a value (see --help)\n", argv[0], a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--run")) run = v;
        else if (!strcmp(a, "--data")) data = v;
        else if (!strcmp(a, "--json")) json = v;
        else if (!strcmp(a, "--png")) png = v;
        else if (!strcmp(a, "--contexts")) contexts_s = v;
        else if (!strcmp(a, "--depths") && needle) depths_s = v;
        else if (!strcmp(a, "--tasks") && !needle) tasks_s = v;
        else if (!strcmp(a, "--needles") && needle) { if (!cli_parse_pos_int(a, v, &needles)) return 2; }
        else if (!strcmp(a, "--queries") && needle) { if (!cli_parse_pos_int(a, v, &queries)) return 2; }
        else if (!strcmp(a, "--facts") && !needle) { if (!cli_parse_pos_int(a, v, &facts)) return 2; }
        else if (!strcmp(a, "--examples")) { if (!cli_parse_pos_int(a, v, &examples)) return 2; }
        else if (!strcmp(a, "--batch")) { if (!cli_parse_pos_int(a, v, &batch)) return 2; }
        else if (!strcmp(a, "--seed")) { if (!cli_parse_pos_int(a, v, &seed)) return 2; }
        else if (!strcmp(a, "--show")) { if (!cli_parse_pos_int(a, v, &show)) return 2; }
        else {
            fprintf(stderr, "mtac eval %s: unknown option '%s' (see --help)\n", argv[0], a);
            return 2;
        }
    }
    if (!run) {
        fprintf(stderr, "mtac eval %s: --run DIR is required (see --help)\n", argv[0]);
        return 2;
    }
    // the columns: depths (needle) or tasks (babi); the rows: contexts
    double depths[MAX_CELLS];
    int tasks[MAX_CELLS], contexts[MAX_CELLS], n_cols = 0, n_rows = 0;
    if (needle && !(n_cols = parse_fractions(depths_s, depths, MAX_CELLS))) {
        fprintf(stderr, "mtac eval needle: --depths expects up to %d fractions in [0, 1], like 0,0.5,1\n", MAX_CELLS);
        return 2;
    }
    if (!needle) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", tasks_s);
        for (char *t = strtok(buf, ","); t && n_cols < MAX_CELLS; t = strtok(NULL, ",")) {
            const int k = lc_task_from_name(t);
            if (k < LC_QA1) {
                fprintf(stderr, "mtac eval babi: unknown task '%s' in --tasks (qa1, qa2, qa3, copy)\n", t);
                return 2;
            }
            tasks[n_cols++] = k;
        }
        if (!n_cols) {
            fprintf(stderr, "mtac eval babi: --tasks names no task\n");
            return 2;
        }
    }
    if (contexts_s && !(n_rows = cli_parse_list(contexts_s, contexts, MAX_CELLS))) {
        fprintf(stderr, "mtac eval %s: --contexts expects up to %d positive integers, like 512,1024\n", argv[0], MAX_CELLS);
        return 2;
    }
    train_config c;
    model *m;
    int open_rc = cli_open_run(needle ? "eval needle" : "eval babi", run, &c, &m);
    if (open_rc) return open_rc;
    char err[1024];
    if (!n_rows) contexts[n_rows++] = c.seq_len;
    char val[1100];
    snprintf(val, sizeof val, "%s/val.bin", data ? data : c.data);
    shard hay;
    if (shard_read(val, &hay, err, sizeof err)) {
        fprintf(stderr, "mtac eval %s: %s\n", argv[0], err);
        model_free(m);
        return 1;
    }
    // the labels of the columns (depths or tasks) and rows (contexts): progress, table, heat map
    char col_names[MAX_CELLS][16], row_names[MAX_CELLS][16];
    const char *cols[MAX_CELLS], *rows[MAX_CELLS];
    for (int k = 0; k < n_cols; k++) {
        if (needle) snprintf(col_names[k], sizeof col_names[k], "%.2f", depths[k]);
        else snprintf(col_names[k], sizeof col_names[k], "%s", lc_task_name((lc_task)tasks[k]));
        cols[k] = col_names[k];
    }
    for (int r = 0; r < n_rows; r++) snprintf(row_names[r], sizeof row_names[r], "%d", contexts[r]), rows[r] = row_names[r];
    double acc[MAX_CELLS * MAX_CELLS];
    cJSON *out = cJSON_CreateObject(), *cells = cJSON_AddArrayToObject(out, "results");
    cJSON_AddStringToObject(out, "task", argv[0]);
    cJSON_AddStringToObject(out, "run", run);
    cJSON_AddStringToObject(out, "haystack", val);
    cJSON_AddNumberToObject(out, "examples", examples);
    cJSON_AddNumberToObject(out, "seed", seed);
    if (needle) {
        cJSON_AddNumberToObject(out, "needles", needles);
        cJSON_AddNumberToObject(out, "queries", queries);
        cJSON_AddBoolToObject(out, "compound", compound);
    } else cJSON_AddNumberToObject(out, "facts", facts);
    int rc = 0;
    for (int r = 0; r < n_rows && !rc; r++)
        for (int k = 0; k < n_cols && !rc; k++) {
            lc_config lc = {needle ? LC_NEEDLE : (lc_task)tasks[k], contexts[r], needles, queries, compound,
                            needle ? depths[k] : -1, facts};
            lc_score s;
            fprintf(stderr, "context %d, %s %s:\n", contexts[r], needle ? "depth" : "task", cols[k]);
            eval_view view = {examples, show};
            const lc_eval_hooks hooks = {on_progress, on_answered, &view};
            if (lc_evaluate(m, &lc, hay.tokens, hay.n, (uint64_t)seed * 1000003u + (uint64_t)(r * MAX_CELLS + k), examples,
                            batch, &s, &hooks, err, sizeof err)) {
                fprintf(stderr, "\nmtac eval %s: %s\n", argv[0], err);
                rc = 1;
                break;
            }
            acc[r * n_cols + k] = (double)s.correct / s.total;
            fprintf(stderr, "\r  %d/%d correct (%.0f%%); %d with the answer right before its end\n", s.correct, s.total,
                    100.0 * s.correct / s.total, s.retrieved);
            cJSON *cell = cJSON_CreateObject();
            cJSON_AddNumberToObject(cell, "context", contexts[r]);
            if (needle) cJSON_AddNumberToObject(cell, "depth", depths[k]);
            else cJSON_AddStringToObject(cell, "qa", lc_task_name((lc_task)tasks[k]));
            cJSON_AddNumberToObject(cell, "correct", s.correct);
            cJSON_AddNumberToObject(cell, "retrieved", s.retrieved);
            cJSON_AddNumberToObject(cell, "total", s.total);
            cJSON_AddNumberToObject(cell, "accuracy", acc[r * n_cols + k]);
            cJSON_AddItemToArray(cells, cell);
        }
    if (!rc) {
        printf("%s accuracy (%d examples per cell, greedy exact match), %s\n", needle ? "needle" : "bAbI", examples, run);
        printf("%8s", "context");
        for (int k = 0; k < n_cols; k++) printf(" %7s", cols[k]);
        printf("\n");
        for (int r = 0; r < n_rows; r++) {
            printf("%8d", contexts[r]);
            for (int k = 0; k < n_cols; k++) printf(" %6.1f%%", 100 * acc[r * n_cols + k]);
            printf("\n");
        }
    }
    if (!rc && json) {
        char *text = cJSON_Print(out);
        if (!text || write_text_atomic(json, text, err, sizeof err)) {
            fprintf(stderr, "mtac eval %s: %s\n", argv[0], text ? err : "out of memory");
            rc = 1;
        }
        cJSON_free(text);
    }
    if (!rc && png) {
        char title[160];
        snprintf(title, sizeof title, "%s: %s", needle ? "needles" : "babi", run);
        if (heatmap_png(png, title, "context", rows, n_rows, needle ? "depth" : "task", cols, n_cols, acc, err, sizeof err)) {
            fprintf(stderr, "mtac eval %s: %s\n", argv[0], err);
            rc = 1;
        }
    }
    cJSON_Delete(out);
    shard_free(&hay);
    model_free(m);
    return rc;
}
