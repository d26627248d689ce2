// cmd_toy.c: `mtac toy`: the paper's toy task (shared/mta-spec.md section 4): generate samples,
// and train and evaluate the baseline and MTA toy models over several seeds.
#include "cli.h"
#include "io/fsutil.h"
#include "toy/toytrain.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtac toy gen [--n N] [--seed S] [TASK OPTIONS]\n"
            "       mtac toy run [--models toy-baseline,toy] [--seeds 42,43,44] [--steps N] [--batch B] [--lr X]\n"
            "                    [--test N] [--eval-every N] [--dim D --layers L --hidden F] [--out DIR] [TASK OPTIONS]\n"
            "\n"
            "gen prints samples: ^ BOS, blocks joined by '.', '#', the query, '>' then the answer, $ EOS.\n"
            "run trains each model for each seed on freshly generated samples (never a test sample) with\n"
            "constant-lr AdamW (beta2 0.98, no weight decay) and reports the sequence error rate on N test\n"
            "samples (wrong if any teacher-forced argmax on the answer or EOS is wrong); with --out it writes\n"
            "DIR/results.json and DIR/<model>-seed<S>.jsonl.\n"
            "\n"
            "task options (the paper's setting by default): --blocks 52 --block-len 5 --query-len 2 --alphabet 26\n"
            "model: the toy presets (dim 256, 4 layers, 2 heads, FFN 768; MTA: pre-softmax 2x9 Q-K conv in\n"
            "every layer; attention dropout 0.1), with --dim/--layers/--hidden to shrink them.\n");
}

static int parse_task(const char *a, const char *v, toy_config *t, int *used) {
    int *dst = !strcmp(a, "--blocks") ? &t->n_blocks : !strcmp(a, "--block-len") ? &t->block_len
             : !strcmp(a, "--query-len") ? &t->query_len : !strcmp(a, "--alphabet") ? &t->alphabet : NULL;
    *used = dst != NULL;
    return dst ? cli_parse_pos_int(a, v, dst) : 1;
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

static int parse_list(const char *s, char items[][32], int max) {
    int k = 0;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *p = strtok_r(buf, ",", &save); p && k < max; p = strtok_r(NULL, ",", &save))
        snprintf(items[k++], 32, "%s", p);
    return k;
}

static int toy_runs(int argc, char **argv) {
    toy_run_config rc0;
    memset(&rc0, 0, sizeof rc0);
    rc0.task = toy_config_paper();
    rc0.steps = 1000, rc0.batch_size = 64, rc0.n_test = 1000, rc0.eval_every = 100;
    rc0.lr = 1e-4f, rc0.weight_decay = 0.0f, rc0.beta2 = 0.98f;
    char models[4][32] = {"toy-baseline", "toy"}, seeds_s[8][32] = {"42", "43", "44"};
    int nm = 2, ns = 3, dim = 0, layers = 0, hidden = 0, used;
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mtac toy run: %s needs a value\n", argv[i]);
            return 2;
        }
        const char *a = argv[i], *v = argv[++i];
        if (!parse_task(a, v, &rc0.task, &used)) return 2;
        if (used) continue;
        char *end;
        if (!strcmp(a, "--models")) nm = parse_list(v, models, 4);
        else if (!strcmp(a, "--seeds")) ns = parse_list(v, seeds_s, 8);
        else if (!strcmp(a, "--steps")) { if (!cli_parse_pos_int(a, v, &rc0.steps)) return 2; }
        else if (!strcmp(a, "--batch")) { if (!cli_parse_pos_int(a, v, &rc0.batch_size)) return 2; }
        else if (!strcmp(a, "--test")) { if (!cli_parse_pos_int(a, v, &rc0.n_test)) return 2; }
        else if (!strcmp(a, "--eval-every")) { if (!cli_parse_pos_int(a, v, &rc0.eval_every)) return 2; }
        else if (!strcmp(a, "--dim")) { if (!cli_parse_pos_int(a, v, &dim)) return 2; }
        else if (!strcmp(a, "--layers")) { if (!cli_parse_pos_int(a, v, &layers)) return 2; }
        else if (!strcmp(a, "--hidden")) { if (!cli_parse_pos_int(a, v, &hidden)) return 2; }
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--lr")) {
            rc0.lr = strtof(v, &end);
            if (*end || !(rc0.lr > 0 && rc0.lr < 1)) { fprintf(stderr, "mtac toy run: --lr expects a number in (0, 1)\n"); return 2; }
        } else {
            fprintf(stderr, "mtac toy run: unknown option '%s' (see mtac toy --help)\n", a);
            return 2;
        }
    }
    char err[512];
    if (toy_config_check(&rc0.task, err, sizeof err)) {
        fprintf(stderr, "mtac toy run: %s\n", err);
        return 2;
    }
    if (out && mkdir_p(out)) {
        fprintf(stderr, "mtac toy run: cannot create %s: %s\n", out, strerror(errno));
        return 1;
    }
    double errs[4][8];
    for (int mi = 0; mi < nm; mi++) {
        model_config mc;
        if (model_preset(models[mi], &mc) || strncmp(models[mi], "toy", 3)) {
            fprintf(stderr, "mtac toy run: '%s' is not a toy preset (toy, toy-baseline)\n", models[mi]);
            return 2;
        }
        if (dim) mc.dim = dim;
        if (layers) mc.n_layers = layers;
        if (hidden) mc.hidden_dim = hidden;
        for (int l = 0; l < mc.n_layers; l++) mc.qk_layer[l] = mc.mta;
        for (int si = 0; si < ns; si++) {
            toy_run_config c = rc0;
            c.model = mc;
            c.seed = strtoull(seeds_s[si], NULL, 10);
            printf("%s, seed %s: %d steps of %d samples x %d tokens\n", models[mi], seeds_s[si], c.steps, c.batch_size,
                   toy_row_len(&c.task) - 1);
            FILE *mf = NULL;
            if (out) {
                char path[4096];
                snprintf(path, sizeof path, "%s/%s-seed%s.jsonl", out, models[mi], seeds_s[si]);
                mf = fopen(path, "w");
            }
            toy_result r;
            int rc = toy_run(&c, mf, &r, err, sizeof err);
            if (mf) fclose(mf);
            if (rc) {
                fprintf(stderr, "mtac toy run: %s\n", err);
                return 1;
            }
            errs[mi][si] = r.final_error;
        }
    }
    printf("\nsequence error rate (%%), %d test samples\n%-14s", rc0.n_test, "model");
    for (int si = 0; si < ns; si++) printf(" seed %-5s", seeds_s[si]);
    printf(" average\n");
    FILE *js = NULL;
    if (out) {
        char path[4096];
        snprintf(path, sizeof path, "%s/results.json", out);
        js = fopen(path, "w");
        if (js) fprintf(js, "{\"test_samples\": %d, \"steps\": %d, \"models\": {", rc0.n_test, rc0.steps);
    }
    for (int mi = 0; mi < nm; mi++) {
        double avg = 0;
        printf("%-14s", models[mi]);
        if (js) fprintf(js, "%s\"%s\": {\"seeds\": {", mi ? ", " : "", models[mi]);
        for (int si = 0; si < ns; si++) {
            printf(" %10.1f", 100 * errs[mi][si]);
            avg += errs[mi][si] / ns;
            if (js) fprintf(js, "%s\"%s\": %.6f", si ? ", " : "", seeds_s[si], errs[mi][si]);
        }
        printf(" %7.1f\n", 100 * avg);
        if (js) fprintf(js, "}, \"average\": %.6f}", avg);
    }
    if (js) {
        fprintf(js, "}}\n");
        fclose(js);
    }
    return 0;
}

int cmd_toy(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "gen")) return toy_gen(argc - 1, argv + 1);
    if (!strcmp(argv[1], "run")) return toy_runs(argc - 1, argv + 1);
    fprintf(stderr, "mtac toy: unknown subcommand '%s' (gen, run)\n", argv[1]);
    return 2;
}
