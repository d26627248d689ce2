// cmd_eval.c: `mtac eval`: validation loss and perplexity of a trained run; `mtac eval needle` and
// `mtac eval babi`: its greedy exact-match accuracy on the long-context tasks (docs/longctx.md), as
// a table, JSON and a PNG heat map.
#include "cli.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "eval/perplexity.h"
#include "eval/retrieval.h"
#include "io/fsutil.h"
#include "io/heatmap.h"
#include "train/train.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { MAX_CELLS = 16 };

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
    const tokenizer *tok;  // a run's own tokenizer (answers in its ids), NULL for bytes
} eval_view;

static void on_progress(void *arg, int done) {
    const eval_view *v = arg;
    fprintf(stderr, "\r  %d/%d examples", done, v->total);
    fflush(stderr);
}

// A validation shard that cannot be read, from the run's data directory: the path in its
// config.json may be relative to where training ran, or the data moved; --data names another.
static void print_val_error(const char *cmd, const char *err, const char *val, const char *data) {
    fprintf(stderr, "mtac %s: %s\n", cmd, err);
    if (!data && access(val, R_OK))
        fprintf(stderr, "mtac %s: %s is the run's data directory as its config.json records it: give --data DIR "
                        "(the directory holding val.bin)\n", cmd, val);
}

static void print_tokens(const char *label, const tokenizer *tok, const int *ids, int n) {
    fprintf(stderr, "%s \"", label);
    if (tok) {  // the ids' text, special tokens as theirs
        int32_t *i32 = malloc((size_t)(n ? n : 1) * sizeof *i32);
        for (int i = 0; i32 && i < n; i++) i32[i] = ids[i];
        char *text = i32 ? tokenizer_decode(tok, i32, (size_t)n, 0, NULL, NULL, 0) : NULL;
        for (const char *c = text ? text : "<ids outside the vocabulary>"; *c; c++) {
            if (*c == '\n') fputs("\\n", stderr);
            else fputc(*c, stderr);
        }
        free(text), free(i32);
        n = 0;
    }
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
    print_tokens("    expected", v->tok, expected, n_expected);
    print_tokens("    got     ", v->tok, got, n_got);
}

static const char NEEDLE_USAGE[] =
    "usage: mtac eval needle --run DIR [--contexts LIST] [--depths LIST] [--needles N] [--queries N]\n"
    "                        [--compound] [--examples N] [--seed N] [--batch N] [--data DIR]\n"
    "                        [--show N] [--json FILE] [--png FILE]\n";
static const char NEEDLE_ABOUT[] =
    "Needle-in-a-haystack retrieval: N sentences \"the KEY is VALUE.\" in the text of DATA/val.bin\n"
    "(default: the run's data directory, text the run did not train on; mtac data's default text is\n"
    "the King James Bible), the first asked needle at each depth (0 = start of the text, 1 = end),\n"
    "then a question for --queries keys; the run's model answers greedily, scored by exact match.\n"
    "--compound: two-word keys that share words with other keys (\"red door\", \"red lamp\", \"blue\n"
    "door\"). Defaults: contexts = the run's seq_len, depths 0,0.25,0.5,0.75,1, 4 needles, 1 query, 20\n"
    "examples per cell, seed 1, batch 4.\n"
    "A run with its own tokenizer (tokenizer.json): DATA/val.bin holds its ids (mtac data --tokenizer\n"
    "RUN) and is decoded to text; the examples are encoded with it, the contexts count its tokens,\n"
    "and an answer is right when its text starts with the value (\" kobal\") followed by no letter\n"
    "or digit (docs/longctx.md).\n"
    "Prints accuracy by context x depth; --json writes every cell, --png a heat map; --show N prints\n"
    "the expected and the greedy answers of each cell's first N examples.\n";
static const char BABI_USAGE[] =
    "usage: mtac eval babi --run DIR [--tasks LIST] [--contexts LIST] [--facts N] [--examples N]\n"
    "                      [--seed N] [--batch N] [--data DIR] [--show N] [--json FILE] [--png FILE]\n";
static const char BABI_ABOUT[] =
    "bAbI-style questions (qa1 one supporting fact, qa2 two, qa3 three) whose facts are spread\n"
    "through the text of DATA/val.bin; greedy answers, exact match (a run with its own tokenizer: as\n"
    "in mtac eval needle --help). Defaults: tasks qa1,qa2,qa3, contexts = the run's seq_len, 8 facts,\n"
    "20 examples per cell, seed 1, batch 4.\n"
    "Prints accuracy by context x task; --json writes every cell, --png a heat map; --show N prints\n"
    "the expected and the greedy answers of each cell's first N examples. --tasks copy scores the\n"
    "training mixture's copy task (docs/longctx.md) the same way, to see whether a run learned it\n"
    "(byte-level runs only).\n";

// The options of `mtac eval needle|babi`, and the grid they ask for: columns are depths (needle)
// or tasks (babi), rows contexts.
typedef struct {
    int needle;
    const char *task, *run, *data, *json, *png, *depths_s, *tasks_s;
    int needles, queries, compound, examples, batch, facts, seed, show;
    uint64_t ctx_list[MAX_CELLS];
    int n_ctx;
    double depths[MAX_CELLS];
    int tasks[MAX_CELLS], contexts[MAX_CELLS], n_cols, n_rows;
} lc_args;

// The columns of the grid from --depths or --tasks: 0, or 2 after a message.
static int parse_columns(lc_args *a) {
    if (a->needle) {
        if ((a->n_cols = parse_fractions(a->depths_s, a->depths, MAX_CELLS))) return 0;
        fprintf(stderr, "mtac eval needle: --depths expects up to %d fractions in [0, 1], like 0,0.5,1\n", MAX_CELLS);
        return 2;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", a->tasks_s);
    for (char *t = strtok(buf, ","); t && a->n_cols < MAX_CELLS; t = strtok(NULL, ",")) {
        const int k = lc_task_from_name(t);
        if (k < LC_QA1) {
            fprintf(stderr, "mtac eval babi: unknown task '%s' in --tasks (qa1, qa2, qa3, copy)\n", t);
            return 2;
        }
        a->tasks[a->n_cols++] = k;
    }
    if (a->n_cols) return 0;
    fprintf(stderr, "mtac eval babi: --tasks names no task\n");
    return 2;
}

// The flags of `mtac eval needle|babi` into a: -1 to go on, else the exit status.
static int parse_longctx(int argc, char **argv, lc_args *a) {
    cli_opt o[16];
    int n = 0;
    o[n++] = (cli_opt){"run", CLI_STR, &a->run, .required = 1, .arg = "DIR", .help = "the run to evaluate"};
    o[n++] = (cli_opt){"contexts", CLI_LIST, a->ctx_list, 1, 1 << 20, .max = MAX_CELLS, .count = &a->n_ctx,
                       .arg = "LIST", .help = "context lengths, the rows (default: the run's seq_len)"};
    if (a->needle) {
        o[n++] = (cli_opt){"depths", CLI_STR, &a->depths_s, .arg = "LIST", .help = "needle depths in [0, 1], the columns"};
        o[n++] = (cli_opt){"needles", CLI_INT, &a->needles, 1, 1e9, .arg = "N", .help = "needles in the text"};
        o[n++] = (cli_opt){"queries", CLI_INT, &a->queries, 1, 1e9, .arg = "N", .help = "keys asked"};
        o[n++] = (cli_opt){"compound", CLI_FLAG, &a->compound, .help = "two-word keys that share words"};
    } else {
        o[n++] = (cli_opt){"tasks", CLI_STR, &a->tasks_s, .arg = "LIST", .help = "qa1, qa2, qa3, copy: the columns"};
        o[n++] = (cli_opt){"facts", CLI_INT, &a->facts, 1, 1e9, .arg = "N", .help = "facts in the text"};
    }
    o[n++] = (cli_opt){"examples", CLI_INT, &a->examples, 1, 1e9, .arg = "N", .help = "examples per cell"};
    o[n++] = (cli_opt){"seed", CLI_INT, &a->seed, 1, 1e9, .arg = "N", .help = "seed of the examples"};
    o[n++] = (cli_opt){"batch", CLI_INT, &a->batch, 1, 1e9, .arg = "N", .help = "examples per forward pass"};
    o[n++] = (cli_opt){"data", CLI_STR, &a->data, .arg = "DIR", .help = "haystack DIR/val.bin (default: the run's data)"};
    o[n++] = (cli_opt){"show", CLI_INT, &a->show, 1, 1e9, .arg = "N", .help = "print each cell's first N answers"};
    o[n++] = (cli_opt){"json", CLI_STR, &a->json, .arg = "FILE", .help = "every cell as JSON"};
    o[n++] = (cli_opt){"png", CLI_STR, &a->png, .arg = "FILE", .help = "a heat map"};
    const cli_spec spec = {a->needle ? "mtac eval needle" : "mtac eval babi", a->needle ? NEEDLE_USAGE : BABI_USAGE,
                           a->needle ? NEEDLE_ABOUT : BABI_ABOUT, NULL, o, n, NULL};
    int first, st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    if (parse_columns(a)) return 2;
    for (int r = 0; r < a->n_ctx; r++) a->contexts[a->n_rows++] = (int)a->ctx_list[r];
    return -1;
}

// The JSON document of a grid: its settings and (filled by run_cells) an array "results".
static cJSON *grid_json(const lc_args *a, const char *val) {
    cJSON *out = cJSON_CreateObject();
    cJSON_AddArrayToObject(out, "results");
    cJSON_AddStringToObject(out, "task", a->task);
    cJSON_AddStringToObject(out, "run", a->run);
    cJSON_AddStringToObject(out, "haystack", val);
    cJSON_AddNumberToObject(out, "examples", a->examples);
    cJSON_AddNumberToObject(out, "seed", a->seed);
    if (a->needle) {
        cJSON_AddNumberToObject(out, "needles", a->needles);
        cJSON_AddNumberToObject(out, "queries", a->queries);
        cJSON_AddBoolToObject(out, "compound", a->compound);
    } else cJSON_AddNumberToObject(out, "facts", a->facts);
    return out;
}

static void add_cell(cJSON *cells, const lc_args *a, int r, int k, const lc_score *s, double acc) {
    cJSON *cell = cJSON_CreateObject();
    cJSON_AddNumberToObject(cell, "context", a->contexts[r]);
    if (a->needle) cJSON_AddNumberToObject(cell, "depth", a->depths[k]);
    else cJSON_AddStringToObject(cell, "qa", lc_task_name((lc_task)a->tasks[k]));
    cJSON_AddNumberToObject(cell, "correct", s->correct);
    cJSON_AddNumberToObject(cell, "retrieved", s->retrieved);
    cJSON_AddNumberToObject(cell, "total", s->total);
    cJSON_AddNumberToObject(cell, "accuracy", acc);
    cJSON_AddItemToArray(cells, cell);
}

// Scores every cell of the grid into acc (and out's results), from the byte haystack hay or, for a
// run with its own tokenizer, text: 0, or 1 after a message.
static int run_cells(model *m, const lc_args *a, const shard *hay, const lc_text *text, const char *const *cols,
                     double *acc, cJSON *out) {
    char err[1024];
    for (int r = 0; r < a->n_rows; r++)
        for (int k = 0; k < a->n_cols; k++) {
            lc_config lc = {a->needle ? LC_NEEDLE : (lc_task)a->tasks[k], a->contexts[r], a->needles, a->queries,
                            a->compound, a->needle ? a->depths[k] : -1, a->facts};
            lc_score s;
            fprintf(stderr, "context %d, %s %s:\n", a->contexts[r], a->needle ? "depth" : "task", cols[k]);
            eval_view view = {a->examples, a->show, text ? text->tok : NULL};
            const lc_eval_hooks hooks = {on_progress, on_answered, &view};
            const uint64_t seed = (uint64_t)a->seed * 1000003u + (uint64_t)(r * MAX_CELLS + k);
            if (text ? lc_evaluate_text(m, &lc, text, seed, a->examples, a->batch, &s, &hooks, err, sizeof err)
                     : lc_evaluate(m, &lc, hay->tokens, hay->n, seed, a->examples, a->batch, &s, &hooks, err, sizeof err)) {
                fprintf(stderr, "\nmtac eval %s: %s\n", a->task, err);
                return 1;
            }
            acc[r * a->n_cols + k] = (double)s.correct / s.total;
            fprintf(stderr, "\r  %d/%d correct (%.0f%%); %d %s\n", s.correct, s.total, 100.0 * s.correct / s.total,
                    s.retrieved, text ? "starting with the answer, whatever follows" : "with the answer right before its end");
            add_cell(cJSON_GetObjectItem(out, "results"), a, r, k, &s, acc[r * a->n_cols + k]);
        }
    return 0;
}

static void print_grid(const lc_args *a, int text, const char *const *cols, const double *acc) {
    printf("%s accuracy (%d examples per cell, greedy %s), %s\n", a->needle ? "needle" : "bAbI", a->examples,
           text ? "answers scored on their text" : "exact match", a->run);
    printf("%8s", "context");
    for (int k = 0; k < a->n_cols; k++) printf(" %7s", cols[k]);
    printf("\n");
    for (int r = 0; r < a->n_rows; r++) {
        printf("%8d", a->contexts[r]);
        for (int k = 0; k < a->n_cols; k++) printf(" %6.1f%%", 100 * acc[r * a->n_cols + k]);
        printf("\n");
    }
}

// --json and --png: 0, or 1 after a message.
static int write_grid(const lc_args *a, const char *const *cols, const double *acc, const cJSON *out) {
    char err[1024];
    int rc = 0;
    if (a->json) {
        char *text = cJSON_Print(out);
        if (!text || write_text_atomic(a->json, text, err, sizeof err)) {
            fprintf(stderr, "mtac eval %s: %s\n", a->task, text ? err : "out of memory");
            rc = 1;
        }
        cJSON_free(text);
    }
    if (!rc && a->png) {
        char title[160], row_names[MAX_CELLS][16];
        const char *rows[MAX_CELLS];
        for (int r = 0; r < a->n_rows; r++) snprintf(row_names[r], sizeof row_names[r], "%d", a->contexts[r]), rows[r] = row_names[r];
        snprintf(title, sizeof title, "%s: %s", a->needle ? "needles" : "babi", a->run);
        if (heatmap_png(a->png, title, "context", rows, a->n_rows, a->needle ? "depth" : "task", cols, a->n_cols, acc, err,
                        sizeof err)) {
            fprintf(stderr, "mtac eval %s: %s\n", a->task, err);
            rc = 1;
        }
    }
    return rc;
}

// The run's tokenizer, and for one that is not the byte tokenizer the haystack hay decoded to its
// text into *text (text->tok NULL for bytes): 0, or 1 after a message.
static int open_text(const lc_args *a, const char *val, const shard *hay, tokenizer **tok, lc_text *text) {
    char err[1024];
    if (!(*tok = cli_open_tokenizer(a->needle ? "eval needle" : "eval babi", a->run))) return 1;
    if (tokenizer_get_kind(*tok) == TOKENIZER_BYTES) return 0;
    if (!lc_text_haystack(*tok, hay->tokens, hay->n, text, err, sizeof err)) return 0;
    fprintf(stderr, "mtac eval %s: %s: %s\n", a->task, val, err);
    return 1;
}

// `mtac eval needle|babi`; argv[0] is the task.
static int eval_longctx(int argc, char **argv) {
    lc_args a = {.needle = !strcmp(argv[0], "needle"), .task = argv[0], .depths_s = "0,0.25,0.5,0.75,1",
                 .tasks_s = "qa1,qa2,qa3", .needles = 4, .queries = 1, .examples = 20, .batch = 4, .facts = 8, .seed = 1};
    const int st = parse_longctx(argc, argv, &a);
    if (st >= 0) return st;
    train_config c;
    model *m;
    const int open_rc = cli_open_run(a.needle ? "eval needle" : "eval babi", a.run, &c, &m);
    if (open_rc) return open_rc;
    char err[1024], val[1100];
    if (!a.n_rows) a.contexts[a.n_rows++] = c.seq_len;
    snprintf(val, sizeof val, "%s/val.bin", a.data ? a.data : c.data);
    shard hay;
    if (shard_read(val, &hay, err, sizeof err)) {
        print_val_error(a.needle ? "eval needle" : "eval babi", err, val, a.data);
        model_free(m);
        return 1;
    }
    // the labels of the columns (depths or tasks): progress, table, heat map
    char col_names[MAX_CELLS][16];
    const char *cols[MAX_CELLS];
    for (int k = 0; k < a.n_cols; k++) {
        if (a.needle) snprintf(col_names[k], sizeof col_names[k], "%.2f", a.depths[k]);
        else snprintf(col_names[k], sizeof col_names[k], "%s", lc_task_name((lc_task)a.tasks[k]));
        cols[k] = col_names[k];
    }
    double acc[MAX_CELLS * MAX_CELLS];
    lc_text text = {0};
    tokenizer *tok = NULL;
    int rc = open_text(&a, val, &hay, &tok, &text);
    cJSON *out = grid_json(&a, val);
    if (text.tok) cJSON_AddNumberToObject(out, "haystack_bytes_per_token", text.bytes_per_token);
    if (!rc) rc = run_cells(m, &a, &hay, text.tok ? &text : NULL, cols, acc, out);
    if (!rc) print_grid(&a, text.tok != NULL, cols, acc);
    if (!rc) rc = write_grid(&a, cols, acc, out);
    cJSON_Delete(out);
    lc_text_free(&text);
    tokenizer_free(tok);
    shard_free(&hay);
    model_free(m);
    return rc;
}

// The progress of mtac eval, on one line of stderr
static void on_eval_batch(void *arg, int done, int total) {
    fprintf(stderr, "\r  batch %d/%d", done, total);
    if (done == total) fputc('\n', stderr);
    fflush(stderr);
}

static const char EVAL_USAGE[] =
    "usage: mtac eval --run DIR [--data DIR] [--batches N|all] [--batch-size B] [--seq-len T]\n"
    "       mtac eval --run DIR --text FILE [--bos yes|no] [--ctx T] [--json]\n"
    "       mtac eval needle|babi --run DIR ...   (long-context retrieval: see their --help)\n";
static const char EVAL_ABOUT[] =
    "Validation loss and perplexity of a run's weights (DIR/model.safetensors) on DATA/val.bin\n"
    "(default: the run's own data directory and batch shape): its first --batches batches in order,\n"
    "or all of it (--batches all, or N past its end: the line printed says how many were evaluated).\n"
    "Progress goes to standard error.\n"
    "--text FILE: the mean next-token loss and perplexity of FILE's text, tokenized with the run's\n"
    "tokenizer (BOS first per --bos; default: the tokenizer's add_bos_token), in consecutive windows\n"
    "of T tokens (default: the run's seq_len): window k reads tokens kT..kT+T-1 and predicts each\n"
    "one's next token, a fresh context each, so every token but the first is predicted once (the\n"
    "sequential windows of val.bin above, with B = 1). --json prints\n"
    "{\"tokens\": n, \"loss\": x, \"perplexity\": y}, n the tokens predicted.\n";

// `mtac eval --text`: 0, or 1 after a message.
static int eval_text(const char *run, const char *file, int bos, int T, int json) {
    char err[1024];
    size_t len, n = 0;
    unsigned char *text = NULL;
    int32_t *ids = NULL;
    FILE *f = open_input_file(file, NULL, err, sizeof err);
    if (!f) {
        fprintf(stderr, "mtac eval: %s\n", err);
        return 1;
    }
    int rc = read_stream(f, &text, &len);
    fclose(f);
    if (rc) {
        fprintf(stderr, "mtac eval: cannot read %s (a read error, or out of memory)\n", file);
        return 1;
    }
    train_config c;
    model *m = NULL;
    tokenizer *t = NULL;
    rc = cli_open_run("eval", run, &c, &m);
    if (!rc) rc = !(t = cli_open_tokenizer("eval", run));
    if (!rc && tokenizer_encode(t, text ? (const char *)text : "", len, bos >= 0 ? bos : tokenizer_add_bos(t), &ids,
                                &n, err, sizeof err))
        fprintf(stderr, "mtac eval: %s: %s\n", file, err), rc = 1;
    double loss;
    int windows;
    T = T ? T : c.seq_len;
    if (!rc && perplexity_eval(m, ids, n, T, &loss, &windows, on_eval_batch, NULL, err, sizeof err))
        fprintf(stderr, "mtac eval: %s: %s\n", file, err), rc = 1;
    if (!rc && json) printf("{\"tokens\": %zu, \"loss\": %.17g, \"perplexity\": %.17g}\n", n - 1, loss, exp(loss));
    else if (!rc)
        printf("loss %.4f  perplexity %.3f  (%zu tokens predicted in %d windows of up to %d from %s)\n", loss, exp(loss),
               n - 1, windows, T, file);
    free(ids), free(text);
    tokenizer_free(t);
    model_free(m);
    return rc;
}

int cmd_eval(int argc, char **argv) {
    if (argc > 1 && (!strcmp(argv[1], "needle") || !strcmp(argv[1], "babi"))) return eval_longctx(argc - 1, argv + 1);
    const char *run = NULL, *data = NULL, *batches_s = NULL, *text = NULL;
    int B = 0, T = 0, bos = -1, ctx = 0, json = 0;
    const cli_opt opts[] = {
        {"run", CLI_STR, &run, .required = 1, .arg = "DIR", .help = "the run to evaluate"},
        {"data", CLI_STR, &data, .arg = "DIR", .help = "DIR/val.bin (default: the run's data)"},
        {"batches", CLI_STR, &batches_s, .arg = "N|all", .help = "batches to average (default 16; all: the whole validation set)"},
        {"batch-size", CLI_INT, &B, 1, 1e9, .arg = "B", .help = "sequences per batch (default: the run's)"},
        {"seq-len", CLI_INT, &T, 1, 1e9, .arg = "T", .help = "tokens per sequence (default: the run's)"},
        {"text", CLI_STR, &text, .arg = "FILE", .help = "the loss of this text instead, in the run's tokenizer"},
        {"bos", CLI_CHOICE, &bos, .choices = CLI_NO_YES, .arg = "yes|no",
         .help = "--text: BOS first (default: the tokenizer's add_bos_token)"},
        {"ctx", CLI_INT, &ctx, 1, 1e9, .arg = "T", .help = "--text: tokens per window (default: the run's seq_len)"},
        {"json", CLI_FLAG, &json, .help = "--text: print {\"tokens\", \"loss\", \"perplexity\"}"},
    };
    const cli_spec spec = {"mtac eval", EVAL_USAGE, EVAL_ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    int first, st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    if (text && (data || batches_s || B || T)) {
        fprintf(stderr, "mtac eval: --text evaluates a text file: --data, --batches, --batch-size and --seq-len are "
                        "for the validation shard (--ctx sets the window)\n");
        return 2;
    }
    if (!text && (bos >= 0 || ctx || json)) {
        fprintf(stderr, "mtac eval: --bos, --ctx and --json go with --text FILE\n");
        return 2;
    }
    if (text) return eval_text(run, text, bos, ctx, json);
    int batches = 16;  // 0: all
    if (batches_s && !strcmp(batches_s, "all")) batches = 0;
    else if (batches_s) {
        char *end;
        const long x = strtol(batches_s, &end, 10);
        if (end == batches_s || *end || x < 1 || x > 1000000000) {
            fprintf(stderr, "mtac eval: --batches expects a positive integer or 'all', got '%s'\n", batches_s);
            return 2;
        }
        batches = (int)x;
    }
    train_config c;
    model *m;
    const int open_rc = cli_open_run("eval", run, &c, &m);
    if (open_rc) return open_rc;
    char err[1024], val[1100];
    snprintf(val, sizeof val, "%s/val.bin", data ? data : c.data);
    B = B ? B : c.batch_size, T = T ? T : c.seq_len;
    double loss;
    int done = 0;
    const train_eval_progress progress = {on_eval_batch, NULL};
    const int rc = train_eval_loss(m, val, B, T, batches, &loss, &done, &progress, err, sizeof err);
    if (rc) print_val_error("eval", err, val, data);
    else {
        if (batches > done)
            fprintf(stderr, "note: --batches %d, but %s holds %d batches of %d x %d: evaluated all of them\n", batches,
                    val, done, B, T);
        printf("val loss %.4f  perplexity %.3f  (%d batches of %d x %d from %s)\n", loss, exp(loss), done, B, T, val);
    }
    model_free(m);
    return rc ? 1 : 0;
}
