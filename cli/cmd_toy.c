// cmd_toy.c: `mtac toy` and `mtac attnmap`: the paper's toy task (docs/spec.md section 4).
// Generates samples, trains and evaluates the baseline and the MTA toy model over several seeds,
// and writes the table (markdown and JSON), the error curves and the attention maps.
#include "cli.h"
#include "io/canvas.h"
#include "io/fsutil.h"
#include "io/plot.h"
#include "toy/attnmap.h"
#include "toy/toyplan.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char USAGE[] =
    "usage: mtac toy [run] [--quick | --setting paper|reduced|quick] [--out DIR [--force]] [OVERRIDES]\n"
    "       mtac toy gen [--n N] [--seed S] [TASK OPTIONS]\n";
static const char ABOUT[] =
    "run (the default) trains the baseline Transformer and the MTA toy model for each seed on freshly\n"
    "generated samples (never a test sample) with AdamW (beta2 0.98, no weight decay; the setting's lr\n"
    "schedule: constant in paper, warmup then cosine decay in reduced and quick) and evaluates them\n"
    "on held-out test samples: the paper's sequence error rate (a sample is wrong if any\n"
    "teacher-forced argmax on its answer or EOS is wrong) and the exact match of greedy generation.\n"
    "It writes DIR (default runs/toy-SETTING): run.json, results.json, results.md, error_curves.png,\n"
    "attention.png, and per model and seed <model>-seed<S>.jsonl and .safetensors. A DIR that already\n"
    "holds a toy run (run.json) is refused unless --force.\n"
    "\n"
    "settings:\n"
    "  reduced  (default) 6 blocks; dim 64, 2 layers, FFN 192, no attention dropout; 6000 steps x 32,\n"
    "           lr 1e-3, 200 warmup steps, cosine decay; 500 test samples; seeds 42,43,44\n"
    "  quick    as reduced, 2500 steps, 300 test samples, seed 42 (--quick; not with another --setting)\n"
    "  paper    the paper's Table 1: 52 blocks, dim 256, 4 layers, 2 heads, FFN 768, 100k steps x 64,\n"
    "           lr 1e-4, constant (GPU-scale work)\n"
    "The overrides below replace the setting's values (unset: the setting's).\n"
    "MTA model: pre-softmax 2x9 key-query convolution in every layer, identity init; the paper's\n"
    "setting uses attention dropout 0.1 in both models.\n"
    "\n"
    "gen prints samples: ^ BOS, blocks joined by '.', '#', the query, '>' then the answer, $ EOS.\n";
static const char GEN_USAGE[] = "usage: mtac toy gen [--n N] [--seed S] [TASK OPTIONS]\n";
static const char *const SCHEDULES[] = {"constant", "linear", "cosine", NULL};
_Static_assert(LR_CONSTANT == 0 && LR_LINEAR == 1 && LR_COSINE == 2, "SCHEDULES is in lr_kind's order");

// The task options: 0 leaves the task's value.
typedef struct {
    int blocks, block_len, query_len, alphabet;
} task_args;

static int task_opts(cli_opt *o, task_args *t) {
    o[0] = (cli_opt){"blocks", CLI_INT, &t->blocks, 1, 1e9, .arg = "N", .help = "blocks per sample (paper: 52)"};
    o[1] = (cli_opt){"block-len", CLI_INT, &t->block_len, 1, 1e9, .arg = "N", .help = "letters per block (paper: 5)"};
    o[2] = (cli_opt){"query-len", CLI_INT, &t->query_len, 1, 1e9, .arg = "N", .help = "letters in the query (paper: 2)"};
    o[3] = (cli_opt){"alphabet", CLI_INT, &t->alphabet, 1, 1e9, .arg = "N", .help = "letters to draw from (paper: 26)"};
    return 4;
}

static void task_apply(const task_args *a, toy_config *t) {
    if (a->blocks) t->n_blocks = a->blocks;
    if (a->block_len) t->block_len = a->block_len;
    if (a->query_len) t->query_len = a->query_len;
    if (a->alphabet) t->alphabet = a->alphabet;
}

static int toy_gen(int argc, char **argv) {
    toy_config t = toy_config_paper();
    task_args ta = {0};
    int count = 3, seed = 1;
    cli_opt o[6] = {{"n", CLI_INT, &count, 1, 1e9, .arg = "N", .help = "samples to print"},
                    {"seed", CLI_INT, &seed, 1, 1e9, .arg = "S", .help = "seed of the samples"}};
    const int n = 2 + task_opts(o + 2, &ta);
    const cli_spec spec = {"mtac toy gen", GEN_USAGE, "Prints samples of the toy task (the paper's unless told).\n",
                           NULL, o, n, NULL};
    int first, st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    task_apply(&ta, &t);
    char err[256];
    if (toy_config_check(&t, err, sizeof err)) {
        fprintf(stderr, "mtac toy gen: %s\n", err);
        return 2;
    }
    int R = toy_row_len(&t);
    int *row = malloc((size_t)R * sizeof(int));
    char *text = malloc((size_t)R + 8);
    uint64_t rng = (uint64_t)seed;
    for (int k = 0; k < count; k++) {
        toy_generate(&t, &rng, row);
        toy_row_text(&t, row, text, (size_t)R + 8);
        printf("%s\n", text);
    }
    free(row), free(text);
    return 0;
}

// The display name of a model in tables: the paper's "Transformer" / "MTA".
static const char *display(const toy_plan *p, int mi) { return p->models[mi].mta ? "MTA" : "Transformer"; }

// results.json: the plan's outcome, per model and seed, and averages.
static int write_results_json(const toy_plan *p, toy_result res[][TOY_MAX_SEEDS], const char *dir, double total_s,
                              int threads, char *err, size_t n) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "setting", p->setting);
    cJSON_AddNumberToObject(o, "test_samples", p->run.n_test);
    cJSON_AddNumberToObject(o, "steps", p->run.steps);
    cJSON_AddNumberToObject(o, "threads", threads);
    cJSON_AddNumberToObject(o, "total_seconds", total_s);
    cJSON *ms = cJSON_AddObjectToObject(o, "models");
    for (int mi = 0; mi < p->n_models; mi++) {
        cJSON *m = cJSON_AddObjectToObject(ms, p->model_name[mi]), *ss = cJSON_AddObjectToObject(m, "seeds");
        double e = 0, x = 0;
        for (int si = 0; si < p->n_seeds; si++) {
            char key[32];
            snprintf(key, sizeof key, "%" PRIu64, p->seeds[si]);
            const toy_result *r = &res[mi][si];
            cJSON *s = cJSON_AddObjectToObject(ss, key);
            cJSON_AddNumberToObject(s, "error", r->final.error);
            cJSON_AddNumberToObject(s, "exact_match", r->final.exact_match);
            cJSON_AddNumberToObject(s, "final_loss", r->final_loss);
            cJSON_AddNumberToObject(s, "seconds", r->seconds);
            e += r->final.error / p->n_seeds, x += r->final.exact_match / p->n_seeds;
        }
        cJSON_AddNumberToObject(m, "average_error", e);
        cJSON_AddNumberToObject(m, "average_exact_match", x);
    }
    char *text = cJSON_Print(o), path[4096];
    cJSON_Delete(o);
    snprintf(path, sizeof path, "%s/results.json", dir);
    int rc = write_text_atomic(path, text, err, n);
    free(text);
    return rc;
}

// Appends formatted text to buf (capacity cap) at *len; *len counts past cap on overflow.
static void __attribute__((format(printf, 4, 5))) add(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = *len < cap ? vsnprintf(buf + *len, cap - *len, fmt, ap) : vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    *len += k > 0 ? (size_t)k : 0;
}

// The table like the paper's Table 1 (error %), and the greedy exact match, as markdown; also
// printed.
static int write_results_md(const toy_plan *p, toy_result res[][TOY_MAX_SEEDS], const char *dir, double total_s,
                            int threads, char *err, size_t n) {
    size_t cap = 8192, len = 0;
    char *md = malloc(cap);
    if (!md) return -1;
    const toy_config *t = &p->run.task;
    add(md, cap, &len, "Toy task, setting `%s`: %d blocks of %d letters, query of %d, %d training steps of %d samples, "
        "%d test samples; %.0f s in all on %d threads.\n",
        p->setting, t->n_blocks, t->block_len, t->query_len, p->run.steps, p->run.batch_size, p->run.n_test, total_s,
        threads);
    for (int table = 0; table < 2; table++) {
        add(md, cap, &len, "\n%s\n\n| Model |", table ? "Exact match of greedy generation (%, higher is better)"
                                      : "Sequence error rate (%, lower is better; the paper's metric)");
        for (int si = 0; si < p->n_seeds; si++) add(md, cap, &len, " seed %" PRIu64 " |", p->seeds[si]);
        add(md, cap, &len, " average |\n|---|");
        for (int si = 0; si <= p->n_seeds; si++) add(md, cap, &len, "---|");
        add(md, cap, &len, "\n");
        for (int mi = 0; mi < p->n_models; mi++) {
            double avg = 0;
            add(md, cap, &len, "| %s (`%s`) |", display(p, mi), p->model_name[mi]);
            for (int si = 0; si < p->n_seeds; si++) {
                double v = table ? res[mi][si].final.exact_match : res[mi][si].final.error;
                add(md, cap, &len, " %.1f |", 100 * v);
                avg += v / p->n_seeds;
            }
            add(md, cap, &len, " %.1f |\n", 100 * avg);
        }
    }
    int rc = 0;
    if (len >= cap) rc = -1, snprintf(err, n, "results table too long");
    if (!rc) {
        printf("\n%s\n", md);
        char path[4096];
        snprintf(path, sizeof path, "%s/results.md", dir);
        rc = write_text_atomic(path, md, err, n);
    }
    free(md);
    return rc;
}

// Test error (%) against step, one line per model and seed.
static int write_curves(const toy_plan *p, toy_result res[][TOY_MAX_SEEDS], const char *dir, char *err, size_t n) {
    static const unsigned char pal[2][3][3] = {{{214, 39, 40}, {240, 120, 110}, {250, 170, 160}},
                                               {{31, 119, 180}, {100, 160, 210}, {160, 200, 230}}};
    plot_series s[TOY_MAX_MODELS * TOY_MAX_SEEDS];
    char labels[TOY_MAX_MODELS * TOY_MAX_SEEDS][48];
    double *pct[TOY_MAX_MODELS * TOY_MAX_SEEDS];
    int ns = 0;
    for (int mi = 0; mi < p->n_models; mi++)
        for (int si = 0; si < p->n_seeds; si++, ns++) {
            const toy_result *r = &res[mi][si];
            pct[ns] = malloc((size_t)(r->n_evals ? r->n_evals : 1) * sizeof(double));
            for (int i = 0; pct[ns] && i < r->n_evals; i++) pct[ns][i] = 100 * r->eval_error[i];
            snprintf(labels[ns], sizeof labels[ns], "%s, seed %" PRIu64, display(p, mi), p->seeds[si]);
            const unsigned char *c = pal[p->models[mi].mta ? 1 : 0][si % 3];
            s[ns] = (plot_series){r->eval_step, pct[ns], pct[ns] ? r->n_evals : 0, {c[0], c[1], c[2]}, 2, labels[ns]};
        }
    char path[4096];
    snprintf(path, sizeof path, "%s/error_curves.png", dir);
    plot_text txt = {"Toy task: test sequence error (%) during training", "step", "error %", 0, 100};
    int rc = plot_png(path, s, ns, 900, 520, &txt, err, n);
    for (int i = 0; i < ns; i++) free(pct[i]);
    return rc;
}

// The options of `mtac toy [run]`: each override 0 (a choice -1, a number -1) leaves the setting's.
typedef struct {
    const char *setting, *out, *models;
    int quick, force, steps, batch, test, eval_every, threads, warmup, dim, layers, hidden, schedule, n_seeds;
    float lr, dropout;
    uint64_t seeds[TOY_MAX_SEEDS];
    task_args task;
} toy_args;

static int parse_toy(int argc, char **argv, toy_args *a) {
    cli_opt o[24] = {
        {"quick", CLI_FLAG, &a->quick, .help = "the setting quick (a demo of about a minute)"},
        {"setting", CLI_STR, &a->setting, .arg = "NAME", .help = "paper, reduced or quick (default reduced)"},
        {"out", CLI_STR, &a->out, .arg = "DIR", .help = "where the results go (default runs/toy-SETTING)"},
        {"force", CLI_FLAG, &a->force, .help = "replace the results a DIR already holds"},
        {"seeds", CLI_LIST, a->seeds, 0, 1.8446744073709552e19, .max = TOY_MAX_SEEDS, .count = &a->n_seeds,
         .arg = "LIST", .help = "a run of each model per seed (at most 2^52 each)"},
        {"models", CLI_STR, &a->models, .arg = "LIST", .help = "toy-baseline, toy (comma-separated)"},
        {"steps", CLI_INT, &a->steps, 1, 1e9, .arg = "N", .help = "training steps"},
        {"batch", CLI_INT, &a->batch, 1, 1e9, .arg = "B", .help = "samples per step"},
        {"lr", CLI_FLOAT, &a->lr, 0, 1, 1, 1, .arg = "X", .help = "peak learning rate"},
        {"schedule", CLI_CHOICE, &a->schedule, .choices = SCHEDULES, .arg = "NAME", .help = "lr schedule"},
        {"warmup", CLI_INT, &a->warmup, 1, 1e9, .arg = "N", .help = "warmup steps"},
        {"test", CLI_INT, &a->test, 1, 1e9, .arg = "N", .help = "held-out test samples"},
        {"eval-every", CLI_INT, &a->eval_every, 1, 1e9, .arg = "N", .help = "test error every N steps"},
        {"threads", CLI_INT, &a->threads, 1, 1e9, .arg = "N", .help = "OpenMP and BLAS threads"},
        {"attn-dropout", CLI_FLOAT, &a->dropout, 0, 1, 0, 1, .arg = "P", .help = "attention dropout of both models"},
        {"dim", CLI_INT, &a->dim, 1, 1e9, .arg = "D", .help = "model width"},
        {"layers", CLI_INT, &a->layers, 1, 1e9, .arg = "L", .help = "layers"},
        {"hidden", CLI_INT, &a->hidden, 1, 1e9, .arg = "F", .help = "FFN width"},
    };
    const int n = 18 + task_opts(o + 18, &a->task);
    const cli_spec spec = {"mtac toy", USAGE, ABOUT, NULL, o, n, NULL};
    int first, st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    if (a->quick && a->setting && strcmp(a->setting, "quick")) {
        fprintf(stderr, "mtac toy: --quick is the setting quick; it cannot go with --setting %s: give one of them\n",
                a->setting);
        return 2;
    }
    for (int k = 0; k < a->n_seeds; k++)
        if (a->seeds[k] > TOY_MAX_SEED) {
            fprintf(stderr, "mtac toy: --seeds: %" PRIu64 " is more than 2^52, the largest seed run.json keeps exactly\n",
                    a->seeds[k]);
            return 2;
        }
    return -1;
}

// --models into p: 0, or 2 after a message.
static int set_models(toy_plan *p, const char *setting, const char *models) {
    char buf[256], *save = NULL;
    snprintf(buf, sizeof buf, "%s", models);
    p->n_models = 0;
    for (char *m = strtok_r(buf, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        if (p->n_models == TOY_MAX_MODELS || strncmp(m, "toy", 3) || model_preset(m, &p->models[p->n_models])) {
            fprintf(stderr, "mtac toy: --models takes up to %d of toy-baseline, toy; got '%s'\n", TOY_MAX_MODELS, m);
            return 2;
        }
        snprintf(p->model_name[p->n_models++], sizeof p->model_name[0], "%s", m);
    }
    if (!p->n_models) {
        fprintf(stderr, "mtac toy: --models is empty\n");
        return 2;
    }
    if (strcmp(setting, "paper")) {  // the setting's model size and dropout
        toy_plan_resize(p, 64, 2, 192);
        for (int mi = 0; mi < p->n_models; mi++) p->models[mi].attn_dropout = 0.0f;
    }
    return 0;
}

// The plan: the setting's, with the overrides; 0, or 2 after a message.
static int make_plan(const toy_args *a, toy_plan *p) {
    const char *setting = a->quick ? "quick" : a->setting ? a->setting : "reduced";
    if (toy_plan_preset(setting, p)) {
        fprintf(stderr, "mtac toy: unknown setting '%s' (%s)\n", setting, toy_plan_settings());
        return 2;
    }
    toy_run_config *r = &p->run;
    task_apply(&a->task, &r->task);
    if (a->n_seeds) memcpy(p->seeds, a->seeds, sizeof p->seeds), p->n_seeds = a->n_seeds;
    if (a->steps) r->steps = a->steps;
    if (a->batch) r->batch_size = a->batch;
    if (a->test) r->n_test = a->test;
    if (a->eval_every) r->eval_every = a->eval_every;
    if (a->warmup) r->warmup = a->warmup;
    if (a->schedule >= 0) r->schedule = (lr_kind)a->schedule;
    if (a->lr > 0) r->lr = a->lr;
    if (a->models && set_models(p, setting, a->models)) return 2;
    toy_plan_resize(p, a->dim, a->layers, a->hidden);
    for (int mi = 0; mi < p->n_models && a->dropout >= 0; mi++) p->models[mi].attn_dropout = a->dropout;
    char err[512];
    if (toy_config_check(&r->task, err, sizeof err)) {
        fprintf(stderr, "mtac toy: %s\n", err);
        return 2;
    }
    for (int mi = 0; mi < p->n_models; mi++)
        if (model_config_check(&p->models[mi], err, sizeof err)) {
            fprintf(stderr, "mtac toy: %s: %s\n", p->model_name[mi], err);
            return 2;
        }
    return 0;
}

// Trains and evaluates every model and seed of p into res, writing their metrics and weights in
// out: 0, or 1 after a message.
static int train_all(const toy_plan *p, const char *out, toy_result res[][TOY_MAX_SEEDS]) {
    char err[512];
    for (int mi = 0; mi < p->n_models; mi++)
        for (int si = 0; si < p->n_seeds; si++) {
            toy_run_config c = p->run;
            c.model = p->models[mi], c.seed = p->seeds[si];
            printf("%s (%s), seed %" PRIu64 ":\n", display(p, mi), p->model_name[mi], c.seed);
            char mpath[4096], wpath[4096];
            toy_plan_path(mpath, sizeof mpath, out, p->model_name[mi], c.seed, ".jsonl");
            toy_plan_path(wpath, sizeof wpath, out, p->model_name[mi], c.seed, ".safetensors");
            FILE *mf = fopen(mpath, "w");
            if (!mf) {
                fprintf(stderr, "mtac toy: cannot write %s: %s\n", mpath, strerror(errno));
                return 1;
            }
            const int rc = toy_run(&c, mf, wpath, &res[mi][si], err, sizeof err);
            fclose(mf);
            if (rc) {
                fprintf(stderr, "mtac toy: %s\n", err);
                return 1;
            }
        }
    return 0;
}

// results.json, results.md, error_curves.png, attention.png: 0, or 1 after a message.
static int write_all(const toy_plan *p, const char *out, toy_result res[][TOY_MAX_SEEDS], double total, int threads) {
    char err[512], path[4096];
    if (write_results_json(p, res, out, total, threads, err, sizeof err) ||
        write_results_md(p, res, out, total, threads, err, sizeof err) || write_curves(p, res, out, err, sizeof err)) {
        fprintf(stderr, "mtac toy: %s\n", err);
        return 1;
    }
    snprintf(path, sizeof path, "%s/attention.png", out);
    if (toy_attnmap(p, out, p->seeds[0], 0, NULL, 0, NULL, 0, path, err, sizeof err)) {
        fprintf(stderr, "mtac toy: attention map: %s\n", err);
        return 1;
    }
    return 0;
}

static int toy_runs(int argc, char **argv) {
    toy_args a = {.schedule = -1, .lr = -1, .dropout = -1};
    toy_plan p;
    int st = parse_toy(argc, argv, &a);
    if (st >= 0) return st;
    if (make_plan(&a, &p)) return 2;
    char err[512], dflt[64];
    const char *out = a.out;
    if (!out) snprintf(dflt, sizeof dflt, "runs/toy-%s", p.setting), out = dflt;
    // A run's results are not replaced without being asked (as mtac train refuses a run directory).
    char record[4200];
    snprintf(record, sizeof record, "%s/run.json", out);
    if (!a.force && !access(record, F_OK)) {
        fprintf(stderr, "mtac toy: %s already holds a toy run: use another --out, or --force to replace its results\n", out);
        return 2;
    }
    if (mkdir_p(out)) {
        fprintf(stderr, "mtac toy: cannot create %s: %s\n", out, strerror(errno));
        return 1;
    }
    if (a.threads) cli_set_threads(a.threads);
    if (toy_plan_save(&p, out, err, sizeof err)) {
        fprintf(stderr, "mtac toy: %s\n", err);
        return 1;
    }
    const int R = toy_row_len(&p.run.task);
    printf("toy task, setting %s: %d models x %d seeds, %d steps of %d samples x %d tokens each; writing %s/\n",
           p.setting, p.n_models, p.n_seeds, p.run.steps, p.run.batch_size, R - 1, out);
    static toy_result res[TOY_MAX_MODELS][TOY_MAX_SEEDS];
    memset(res, 0, sizeof res);
    const double t0 = cli_now();
    int rc = train_all(&p, out, res);
    const double total = cli_now() - t0;
    if (!rc) rc = write_all(&p, out, res, total, a.threads ? a.threads : cli_threads());
    if (!rc) printf("wrote %s/results.md, results.json, error_curves.png, attention.png (%.0f s in all)\n", out, total);
    for (int mi = 0; mi < p.n_models; mi++)
        for (int si = 0; si < p.n_seeds; si++) toy_result_free(&res[mi][si]);
    return rc;
}

int cmd_toy(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "gen")) return toy_gen(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "run")) return toy_runs(argc - 1, argv + 1);
    if (argc >= 2 && strncmp(argv[1], "-", 1)) {
        fprintf(stderr, "mtac toy: unknown subcommand '%s' (gen, run)\n", argv[1]);
        return 2;
    }
    return toy_runs(argc, argv);
}

static const char ATTNMAP_USAGE[] =
    "usage: mtac attnmap --run DIR [--seed S] [--sample I] [--layers 0,1] [--heads 0,1] [--out FILE.png|FILE.svg]\n";
static const char ATTNMAP_ABOUT[] =
    "Draws where the models of a finished `mtac toy` run attend: for test sample I (default 0) of seed S\n"
    "(default: the run's first seed), the attention weights of the '#', query and answer positions over\n"
    "the whole input, one strip per position, for each chosen layer and head (default: all), the\n"
    "baseline beside MTA. Each strip is scaled to its own maximum; the target block is underlined in\n"
    "red. Writes FILE, a PNG or an SVG by its extension (default DIR/attention-seed<S>-sample<I>.png).\n";

// A list of layer or head numbers as ints (toy_attnmap refuses those past the model's).
static void to_ints(const uint64_t *v, int n, int *out) {
    for (int i = 0; i < n; i++) out[i] = v[i] < MODEL_MAX_LAYERS ? (int)v[i] : MODEL_MAX_LAYERS;
}

int cmd_attnmap(int argc, char **argv) {
    const char *run = NULL, *out = NULL;
    uint64_t seed = 0, lv[MODEL_MAX_LAYERS], hv[MODEL_MAX_LAYERS];
    int have_seed = 0, sample = 0, nl = 0, nh = 0;
    const cli_opt opts[] = {
        {"run", CLI_STR, &run, .required = 1, .arg = "DIR", .help = "a directory written by mtac toy"},
        {"seed", CLI_LIST, &seed, 0, 1.8446744073709552e19, .max = 1, .count = &have_seed, .arg = "S",
         .help = "the seed's models (default: the run's first seed)"},
        {"sample", CLI_INT, &sample, 0, 999999999, .arg = "I", .help = "the test sample"},
        {"layers", CLI_LIST, lv, 0, 1e9, .max = MODEL_MAX_LAYERS, .count = &nl, .arg = "LIST", .help = "layers (default all)"},
        {"heads", CLI_LIST, hv, 0, 1e9, .max = MODEL_MAX_LAYERS, .count = &nh, .arg = "LIST", .help = "heads (default all)"},
        {"out", CLI_STR, &out, .arg = "FILE", .help = "the picture (default DIR/attention-seed<S>-sample<I>.png)"},
    };
    const cli_spec spec = {"mtac attnmap", ATTNMAP_USAGE, ATTNMAP_ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    int first, st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    toy_plan p;
    char err[512], dflt[4200];
    if (toy_plan_load(&p, run, err, sizeof err)) {
        fprintf(stderr, "mtac attnmap: %s\n", err);
        return 1;
    }
    if (!have_seed) seed = p.seeds[0];
    int known = 0;
    for (int i = 0; i < p.n_seeds; i++) known |= p.seeds[i] == seed;
    if (!known) {
        fprintf(stderr, "mtac attnmap: %s has no run of seed %" PRIu64 "; its seeds:", run, seed);
        for (int i = 0; i < p.n_seeds; i++) fprintf(stderr, "%s %" PRIu64, i ? "," : "", p.seeds[i]);
        fprintf(stderr, " (--seed S)\n");
        return 1;
    }
    int layers[MODEL_MAX_LAYERS], heads[MODEL_MAX_LAYERS];
    to_ints(lv, nl, layers), to_ints(hv, nh, heads);
    if (!out) {
        snprintf(dflt, sizeof dflt, "%s/attention-seed%" PRIu64 "-sample%d.png", run, seed, sample);
        out = dflt;
    }
    char input[4200];
    snprintf(input, sizeof input, "%s/run.json", run);
    if (cli_out_is_input(spec.name, out, input)) return 2;
    for (int mi = 0; mi < p.n_models; mi++) {
        toy_plan_path(input, sizeof input, run, p.model_name[mi], seed, ".safetensors");
        if (cli_out_is_input(spec.name, out, input)) return 2;
    }
    if (canvas_check_path(out, err, sizeof err)) {
        fprintf(stderr, "mtac attnmap: %s\n", err);
        return 2;
    }
    if (toy_attnmap(&p, run, seed, sample, nl ? layers : NULL, nl, nh ? heads : NULL, nh, out, err, sizeof err)) {
        fprintf(stderr, "mtac attnmap: %s\n", err);
        return 1;
    }
    printf("wrote %s\n", out);
    return 0;
}
