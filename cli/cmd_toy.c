// cmd_toy.c: `mtac toy` and `mtac attnmap`: the paper's toy task (docs/spec.md section 4).
// Generates samples, trains and evaluates the baseline and the MTA toy model over several seeds,
// and writes the table (markdown and JSON), the error curves and the attention maps.
#include "cli.h"
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

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtac toy [run] [--quick | --setting paper|reduced|quick] [--out DIR] [OVERRIDES]\n"
            "       mtac toy gen [--n N] [--seed S] [TASK OPTIONS]\n"
            "\n"
            "run (the default) trains the baseline Transformer and the MTA toy model for each seed on freshly\n"
            "generated samples (never a test sample) with AdamW (beta2 0.98, no weight decay; the setting's lr\n"
            "schedule: constant in paper, warmup then cosine decay in reduced and quick) and evaluates them\n"
            "on held-out test samples: the paper's sequence error rate (a sample is wrong if any\n"
            "teacher-forced argmax on its answer or EOS is wrong) and the exact match of greedy generation.\n"
            "It writes DIR (default runs/toy-SETTING): run.json, results.json, results.md, error_curves.png,\n"
            "attention.png, and per model and seed <model>-seed<S>.jsonl and .safetensors.\n"
            "\n"
            "settings:\n"
            "  reduced  (default) 6 blocks; dim 64, 2 layers, FFN 192, no attention dropout; 6000 steps x 32,\n"
            "           lr 1e-3, 200 warmup steps, cosine decay; 500 test samples; seeds 42,43,44\n"
            "  quick    as reduced, 2500 steps, 300 test samples, seed 42 (--quick; not with another --setting)\n"
            "  paper    the paper's Table 1: 52 blocks, dim 256, 4 layers, 2 heads, FFN 768, 100k steps x 64,\n"
            "           lr 1e-4, constant (GPU-scale work)\n"
            "overrides: --seeds 42,43 --steps N --batch B --lr X --schedule constant|linear|cosine --warmup N\n"
            "           --test N --eval-every N --threads N --attn-dropout P\n"
            "           --dim D --layers L --hidden F --models toy-baseline,toy\n"
            "task options: --blocks 52 --block-len 5 --query-len 2 --alphabet 26\n"
            "MTA model: pre-softmax 2x9 key-query convolution in every layer, identity init; the paper's\n"
            "setting uses attention dropout 0.1 in both models.\n"
            "\n"
            "gen prints samples: ^ BOS, blocks joined by '.', '#', the query, '>' then the answer, $ EOS.\n");
}

static int parse_task(const char *a, const char *v, toy_config *t, int *used) {
    int *dst = !strcmp(a, "--blocks") ? &t->n_blocks : !strcmp(a, "--block-len") ? &t->block_len
             : !strcmp(a, "--query-len") ? &t->query_len : !strcmp(a, "--alphabet") ? &t->alphabet : NULL;
    *used = dst != NULL;
    return dst ? cli_parse_pos_int(a, v, dst) : 1;
}

// "1,2,3" into at most max non-negative integers; the count, or -1 with a message.
static int parse_ints(const char *cmd, const char *flag, const char *s, uint64_t *out, int max) {
    int k = 0;
    const char *p = s;
    while (*p) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || errno || *p == '-' || (*end && *end != ',') || k == max) {
            fprintf(stderr, "%s: %s expects up to %d comma-separated non-negative integers, got '%s'\n", cmd, flag, max, s);
            return -1;
        }
        out[k++] = v;
        p = *end ? end + 1 : end;
    }
    if (!k) fprintf(stderr, "%s: %s is empty\n", cmd, flag);
    return k ? k : -1;
}

static int toy_gen(int argc, char **argv) {
    toy_config t = toy_config_paper();
    int count = 3, seed = 1, used;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mtac toy gen: %s needs a value\n", argv[i]);
            return 2;
        }
        const char *a = argv[i], *v = argv[++i];
        if (!parse_task(a, v, &t, &used)) return 2;
        if (used) continue;
        if (!strcmp(a, "--n")) { if (!cli_parse_pos_int(a, v, &count)) return 2; }
        else if (!strcmp(a, "--seed")) { if (!cli_parse_pos_int(a, v, &seed)) return 2; }
        else {
            fprintf(stderr, "mtac toy gen: unknown option '%s' (see mtac toy --help)\n", a);
            return 2;
        }
    }
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

static int toy_runs(int argc, char **argv) {
    const char *setting = "reduced", *out = NULL, *models_arg = NULL;
    int dim = 0, layers = 0, hidden = 0, threads = 0, used;
    float dropout = -1.0f;
    // first pass: the setting, which the other options then override
    int quick = 0;
    const char *named = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--setting") && i + 1 < argc) named = argv[++i];
    }
    if (quick && named && strcmp(named, "quick")) {
        fprintf(stderr, "mtac toy: --quick is the setting quick; it cannot go with --setting %s: give one of them\n",
                named);
        return 2;
    }
    if (quick) setting = "quick";
    else if (named) setting = named;
    toy_plan p;
    if (toy_plan_preset(setting, &p)) {
        fprintf(stderr, "mtac toy: unknown setting '%s' (%s)\n", setting, toy_plan_settings());
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) continue;
        if (i + 1 >= argc) {
            fprintf(stderr, "mtac toy: %s needs a value (see mtac toy --help)\n", argv[i]);
            return 2;
        }
        const char *a = argv[i], *v = argv[++i];
        if (!parse_task(a, v, &p.run.task, &used)) return 2;
        if (used || !strcmp(a, "--setting")) continue;
        char *end;
        int ok = 1;
        if (!strcmp(a, "--seeds")) {
            ok = (p.n_seeds = parse_ints("mtac toy", a, v, p.seeds, TOY_MAX_SEEDS)) > 0;
            for (int k = 0; ok && k < p.n_seeds; k++)
                if (p.seeds[k] > TOY_MAX_SEED) {
                    fprintf(stderr, "mtac toy: --seeds: %" PRIu64 " is more than 2^52, the largest seed run.json"
                                    " keeps exactly\n", p.seeds[k]);
                    ok = 0;
                }
        } else if (!strcmp(a, "--models")) models_arg = v;
        else if (!strcmp(a, "--steps")) ok = cli_parse_pos_int(a, v, &p.run.steps);
        else if (!strcmp(a, "--batch")) ok = cli_parse_pos_int(a, v, &p.run.batch_size);
        else if (!strcmp(a, "--test")) ok = cli_parse_pos_int(a, v, &p.run.n_test);
        else if (!strcmp(a, "--eval-every")) ok = cli_parse_pos_int(a, v, &p.run.eval_every);
        else if (!strcmp(a, "--threads")) ok = cli_parse_pos_int(a, v, &threads);
        else if (!strcmp(a, "--warmup")) ok = cli_parse_pos_int(a, v, &p.run.warmup);
        else if (!strcmp(a, "--schedule")) {
            int k = lr_kind_from_name(v);
            if (k < 0) {
                fprintf(stderr, "mtac toy: --schedule is constant, linear or cosine, got '%s'\n", v);
                return 2;
            }
            p.run.schedule = (lr_kind)k;
        }
        else if (!strcmp(a, "--dim")) ok = cli_parse_pos_int(a, v, &dim);
        else if (!strcmp(a, "--layers")) ok = cli_parse_pos_int(a, v, &layers);
        else if (!strcmp(a, "--hidden")) ok = cli_parse_pos_int(a, v, &hidden);
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--attn-dropout")) {
            dropout = strtof(v, &end);
            if (*end || !(dropout >= 0 && dropout < 1)) {
                fprintf(stderr, "mtac toy: --attn-dropout expects a number in [0, 1), got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--lr")) {
            p.run.lr = strtof(v, &end);
            if (*end || !(p.run.lr > 0 && p.run.lr < 1)) {
                fprintf(stderr, "mtac toy: --lr expects a number in (0, 1), got '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "mtac toy: unknown option '%s' (see mtac toy --help)\n", a);
            return 2;
        }
        if (!ok) return 2;
    }
    if (models_arg) {
        char buf[256];
        snprintf(buf, sizeof buf, "%s", models_arg);
        p.n_models = 0;
        char *save = NULL;
        for (char *m = strtok_r(buf, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
            if (p.n_models == TOY_MAX_MODELS || strncmp(m, "toy", 3) || model_preset(m, &p.models[p.n_models])) {
                fprintf(stderr, "mtac toy: --models takes up to %d of toy-baseline, toy; got '%s'\n", TOY_MAX_MODELS, m);
                return 2;
            }
            snprintf(p.model_name[p.n_models++], sizeof p.model_name[0], "%s", m);
        }
        if (!p.n_models) {
            fprintf(stderr, "mtac toy: --models is empty\n");
            return 2;
        }
        if (strcmp(setting, "paper")) {  // the setting's model size and dropout
            toy_plan_resize(&p, 64, 2, 192);
            for (int mi = 0; mi < p.n_models; mi++) p.models[mi].attn_dropout = 0.0f;
        }
    }
    toy_plan_resize(&p, dim, layers, hidden);
    for (int mi = 0; mi < p.n_models && dropout >= 0; mi++) p.models[mi].attn_dropout = dropout;
    char err[512], dflt[64];
    if (toy_config_check(&p.run.task, err, sizeof err)) {
        fprintf(stderr, "mtac toy: %s\n", err);
        return 2;
    }
    for (int mi = 0; mi < p.n_models; mi++)
        if (model_config_check(&p.models[mi], err, sizeof err)) {
            fprintf(stderr, "mtac toy: %s: %s\n", p.model_name[mi], err);
            return 2;
        }
    if (!out) snprintf(dflt, sizeof dflt, "runs/toy-%s", p.setting), out = dflt;
    if (mkdir_p(out)) {
        fprintf(stderr, "mtac toy: cannot create %s: %s\n", out, strerror(errno));
        return 1;
    }
    if (threads) cli_set_threads(threads);
    if (toy_plan_save(&p, out, err, sizeof err)) {
        fprintf(stderr, "mtac toy: %s\n", err);
        return 1;
    }
    const int R = toy_row_len(&p.run.task);
    printf("toy task, setting %s: %d models x %d seeds, %d steps of %d samples x %d tokens each; writing %s/\n",
           p.setting, p.n_models, p.n_seeds, p.run.steps, p.run.batch_size, R - 1, out);
    static toy_result res[TOY_MAX_MODELS][TOY_MAX_SEEDS];
    memset(res, 0, sizeof res);
    double t0 = cli_now();
    int rc = 0;
    for (int mi = 0; mi < p.n_models && !rc; mi++)
        for (int si = 0; si < p.n_seeds && !rc; si++) {
            toy_run_config c = p.run;
            c.model = p.models[mi], c.seed = p.seeds[si];
            printf("%s (%s), seed %" PRIu64 ":\n", display(&p, mi), p.model_name[mi], c.seed);
            char mpath[4096], wpath[4096];
            toy_plan_path(mpath, sizeof mpath, out, p.model_name[mi], c.seed, ".jsonl");
            toy_plan_path(wpath, sizeof wpath, out, p.model_name[mi], c.seed, ".safetensors");
            FILE *mf = fopen(mpath, "w");
            if (!mf) {
                fprintf(stderr, "mtac toy: cannot write %s: %s\n", mpath, strerror(errno));
                rc = 1;
                break;
            }
            rc = toy_run(&c, mf, wpath, &res[mi][si], err, sizeof err);
            fclose(mf);
            if (rc) fprintf(stderr, "mtac toy: %s\n", err);
        }
    const double total = cli_now() - t0;
    const int nthreads = threads ? threads : cli_threads();
    if (!rc && (write_results_json(&p, res, out, total, nthreads, err, sizeof err) ||
                write_results_md(&p, res, out, total, nthreads, err, sizeof err) || write_curves(&p, res, out, err, sizeof err))) {
        fprintf(stderr, "mtac toy: %s\n", err);
        rc = 1;
    }
    if (!rc) {
        char path[4096];
        snprintf(path, sizeof path, "%s/attention.png", out);
        if (toy_attnmap(&p, out, p.seeds[0], 0, NULL, 0, NULL, 0, path, err, sizeof err)) {
            fprintf(stderr, "mtac toy: attention map: %s\n", err);
            rc = 1;
        }
    }
    if (!rc) printf("wrote %s/results.md, results.json, error_curves.png, attention.png (%.0f s in all)\n", out, total);
    for (int mi = 0; mi < p.n_models; mi++)
        for (int si = 0; si < p.n_seeds; si++) toy_result_free(&res[mi][si]);
    return rc;
}

int cmd_toy(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "gen")) return toy_gen(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "run")) return toy_runs(argc - 1, argv + 1);
    if (argc >= 2 && strncmp(argv[1], "--", 2)) {
        fprintf(stderr, "mtac toy: unknown subcommand '%s' (gen, run)\n", argv[1]);
        return 2;
    }
    return toy_runs(argc, argv);
}

static void attnmap_usage(FILE *f) {
    fprintf(f,
            "usage: mtac attnmap --run DIR [--seed S] [--sample I] [--layers 0,1] [--heads 0,1] [--out FILE.png|FILE.svg]\n"
            "\n"
            "Draws where the models of a finished `mtac toy` run attend: for test sample I (default 0) of seed S\n"
            "(default: the run's first seed), the attention weights of the '#', query and answer positions over\n"
            "the whole input, one strip per position, for each chosen layer and head (default: all), the\n"
            "baseline beside MTA. Each strip is scaled to its own maximum; the target block is underlined in\n"
            "red. Writes FILE, a PNG or an SVG by its extension (default DIR/attention-seed<S>-sample<I>.png).\n");
}

int cmd_attnmap(int argc, char **argv) {
    const char *run = NULL, *out = NULL;
    uint64_t seed = 0, lv[MODEL_MAX_LAYERS], hv[MODEL_MAX_LAYERS];
    int have_seed = 0, sample = 0, nl = 0, nh = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            attnmap_usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mtac attnmap: %s needs a value (see --help)\n", argv[i]);
            return 2;
        }
        const char *a = argv[i], *v = argv[++i];
        uint64_t one;
        int ok = 1;
        if (!strcmp(a, "--run")) run = v;
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--seed")) ok = (have_seed = parse_ints("mtac attnmap", a, v, &one, 1)) == 1, seed = one;
        else if (!strcmp(a, "--sample")) ok = parse_ints("mtac attnmap", a, v, &one, 1) == 1 && one < 1000000000, sample = (int)one;
        else if (!strcmp(a, "--layers")) ok = (nl = parse_ints("mtac attnmap", a, v, lv, MODEL_MAX_LAYERS)) > 0;
        else if (!strcmp(a, "--heads")) ok = (nh = parse_ints("mtac attnmap", a, v, hv, MODEL_MAX_LAYERS)) > 0;
        else {
            fprintf(stderr, "mtac attnmap: unknown option '%s' (see --help)\n", a);
            return 2;
        }
        if (!ok) return 2;
    }
    if (!run) {
        fprintf(stderr, "mtac attnmap: --run DIR (a directory written by mtac toy) is required\n");
        return 2;
    }
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
    for (int i = 0; i < nl; i++) layers[i] = lv[i] < MODEL_MAX_LAYERS ? (int)lv[i] : MODEL_MAX_LAYERS;
    for (int i = 0; i < nh; i++) heads[i] = hv[i] < MODEL_MAX_LAYERS ? (int)hv[i] : MODEL_MAX_LAYERS;
    if (!out) {
        snprintf(dflt, sizeof dflt, "%s/attention-seed%" PRIu64 "-sample%d.png", run, seed, sample);
        out = dflt;
    }
    if (toy_attnmap(&p, run, seed, sample, nl ? layers : NULL, nl, nh ? heads : NULL, nh, out, err, sizeof err)) {
        fprintf(stderr, "mtac attnmap: %s\n", err);
        return 1;
    }
    printf("wrote %s\n", out);
    return 0;
}
