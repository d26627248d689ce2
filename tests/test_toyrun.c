// test_toyrun.c: the toy experiment around the generator: evaluation (greedy exact match must
// agree with teacher forcing, which checks that generation is causal), the run record run.json,
// model attention maps, and the attention-map picture.
#include "io/fsutil.h"
#include "toy/attnmap.h"
#include "toy/toyplan.h"
#include "toy/toytrain.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];

// A tiny plan: 3 blocks of 2 letters from 8, query of 1; small models. Training it briefly
// leaves some test rows right and some wrong, which the evaluation test needs.
static toy_plan tiny_plan(void) {
    toy_plan p;
    assert_int_equal(toy_plan_preset("quick", &p), 0);
    p.run.task = (toy_config){3, 2, 1, 8};
    p.run.steps = 150, p.run.batch_size = 16, p.run.n_test = 64, p.run.eval_every = 50, p.run.lr = 3e-3f;
    toy_plan_resize(&p, 32, 2, 64);
    p.seeds[0] = 7;
    return p;
}

static int setup(void **s) {
    (void)s;
    snprintf(dir, sizeof dir, "/tmp/mtac-toyrun-XXXXXX");
    if (!mkdtemp(dir)) return -1;
    toy_plan p = tiny_plan();
    char err[256];
    if (toy_plan_save(&p, dir, err, sizeof err)) return -1;
    for (int mi = 0; mi < p.n_models; mi++) {
        toy_run_config c = p.run;
        c.model = p.models[mi], c.seed = p.seeds[0];
        char path[256];
        toy_plan_path(path, sizeof path, dir, p.model_name[mi], c.seed, ".safetensors");
        toy_result r = {0};
        if (toy_run(&c, NULL, path, &r, err, sizeof err)) {
            fprintf(stderr, "%s\n", err);
            return -1;
        }
        if (r.n_evals != 3 || r.eval_step[2] != 150) return -1;
        toy_result_free(&r);
    }
    return 0;
}

static int teardown(void **s) {
    (void)s;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd);
}

static model *load(const toy_plan *p, int mi) {
    char path[256], err[256];
    model *m = model_create(&p->models[mi], err, sizeof err);
    assert_non_null(m);
    toy_plan_path(path, sizeof path, dir, p->model_name[mi], p->seeds[0], ".safetensors");
    assert_int_equal(model_load_weights(m, path, err, sizeof err), 0);
    return m;
}

// Greedy decoding reproduces the answer exactly iff every teacher-forced argmax is right (by
// induction over the answer positions), so exact match must be 1 - sequence error whatever the
// model; a generation step that saw the future, or read the wrong position, breaks this.
static void test_greedy_agrees_with_teacher_forcing(void **s) {
    (void)s;
    toy_plan p = tiny_plan();
    const int R = toy_row_len(&p.run.task);
    int *rows = malloc((size_t)p.run.n_test * R * sizeof(int));
    toy_test_rows(&p.run.task, p.seeds[0], p.run.n_test, rows);
    int mixed = 0;
    for (int mi = 0; mi < p.n_models; mi++) {
        model *m = load(&p, mi);
        toy_eval a, b;
        char err[256];
        assert_int_equal(toy_evaluate(m, &p.run.task, rows, p.run.n_test, 16, &a, err, sizeof err), 0);
        // shares of n_test rows, in double: a row counted wrong moves them by 1/64, the doubles'
        // rounding by a few u_d = 1.1e-16
        assert_true(fabs(a.exact_match - (1.0 - a.error)) <= 1e-12);
        mixed += a.error > 0 && a.error < 1;
        // the batch size of the evaluation does not change the result
        assert_int_equal(toy_evaluate(m, &p.run.task, rows, p.run.n_test, 5, &b, err, sizeof err), 0);
        assert_true(fabs(a.error - b.error) <= 1e-12);
        model_free(m);
    }
    assert_true(mixed > 0);  // at least one model is partly right, so the check above has teeth
    free(rows);
}

// Attention maps of the models: causal, rows sum to 1 (the toy MTA has no post-softmax steps).
static void test_model_attention_maps(void **s) {
    (void)s;
    toy_plan p = tiny_plan();
    const int R = toy_row_len(&p.run.task), T = R - 1;
    int row[64];
    toy_test_rows(&p.run.task, p.seeds[0], 1, row);
    float *a = malloc((size_t)T * T * sizeof(float));
    char err[256];
    for (int mi = 0; mi < p.n_models; mi++) {
        model *m = load(&p, mi);
        double worst = 0;  // the largest |row sum - 1|'s share of its bound
        assert_int_equal(model_attention_map(m, 0, 0, 0, a, err, sizeof err), -1);  // no forward yet
        assert_int_equal(model_forward(m, row, NULL, 1, T, NULL, err, sizeof err), 0);
        assert_int_equal(model_attention_map(m, 0, 0, 0, a, err, sizeof err), -1);  // the fused backend keeps no maps
        model_set_backend(m, MTA_BACKEND_REFERENCE);
        assert_int_equal(model_forward(m, row, NULL, 1, T, NULL, err, sizeof err), 0);
        for (int l = 0; l < p.models[mi].n_layers; l++)
            for (int h = 0; h < p.models[mi].n_heads; h++) {
                assert_int_equal(model_attention_map(m, l, 0, h, a, err, sizeof err), 0);
                for (int i = 0; i < T; i++) {
                    double sum = 0;
                    for (int j = 0; j < T; j++) {
                        if (j > i) assert_true(a[(size_t)i * T + j] == 0.0f);
                        assert_true(a[(size_t)i * T + j] >= 0.0f);
                        sum += a[(size_t)i * T + j];
                    }
                    // float32 probabilities e_j * (1 / sum e): the sum of T terms within T u of
                    // its value, the reciprocal and each product one rounding (u = 2^-24); their
                    // double sum exact enough. A dropped or doubled entry is off by ~1/T.
                    const double e = fabs(sum - 1.0) / ((T + 3) * 0x1p-24);
                    if (!(e <= worst)) worst = e;  // a NaN stays, and fails below
                }
            }
        fprintf(stderr, "  attention rows of model %d sum to 1 within %.2g of their bound\n", mi, worst);
        assert_true(worst <= 1);
        assert_int_equal(model_attention_map(m, p.models[mi].n_layers, 0, 0, a, err, sizeof err), -1);
        assert_non_null(strstr(err, "outside"));
        assert_int_equal(model_attention_map(m, 0, 1, 0, a, err, sizeof err), -1);
        model_free(m);
    }
    free(a);
}

static void test_plan_roundtrip(void **s) {
    (void)s;
    const char *names[] = {"paper", "reduced", "quick"};
    char err[256];
    for (int i = 0; i < 3; i++) {
        toy_plan a, b;
        assert_int_equal(toy_plan_preset(names[i], &a), 0);
        a.seeds[a.n_seeds++] = TOY_MAX_SEED;  // the largest seed run.json keeps exactly
        assert_int_equal(toy_plan_save(&a, dir, err, sizeof err), 0);
        assert_int_equal(toy_plan_load(&b, dir, err, sizeof err), 0);
        assert_string_equal(a.setting, b.setting);
        assert_memory_equal(&a.run.task, &b.run.task, sizeof a.run.task);
        assert_int_equal(a.run.steps, b.run.steps);
        assert_int_equal(a.run.batch_size, b.run.batch_size);
        assert_true(a.run.lr == b.run.lr && a.run.beta2 == b.run.beta2);
        assert_int_equal(a.run.schedule, b.run.schedule);
        assert_int_equal(a.run.warmup, b.run.warmup);
        assert_int_equal(a.n_seeds, b.n_seeds);
        assert_memory_equal(a.seeds, b.seeds, a.n_seeds * sizeof a.seeds[0]);
        assert_int_equal(a.n_models, b.n_models);
        for (int m = 0; m < a.n_models; m++) {
            char *ja = model_config_to_json(&a.models[m]), *jb = model_config_to_json(&b.models[m]);
            assert_string_equal(ja, jb);
            free(ja), free(jb);
        }
    }
    // run.json's scalar members (written from toyplan.c's table) as docs/toy.md lists them and as
    // the records of earlier runs hold them, text for text, up to the seeds.
    const char *quick_text =
        "{\n"
        "\t\"setting\":\t\"quick\",\n"
        "\t\"task\":\t{\n"
        "\t\t\"blocks\":\t6,\n"
        "\t\t\"block_len\":\t5,\n"
        "\t\t\"query_len\":\t2,\n"
        "\t\t\"alphabet\":\t26\n"
        "\t},\n"
        "\t\"steps\":\t2500,\n"
        "\t\"batch\":\t32,\n"
        "\t\"lr\":\t0.0010000000474974513,\n"
        "\t\"schedule\":\t\"cosine\",\n"
        "\t\"warmup\":\t200,\n"
        "\t\"weight_decay\":\t0,\n"
        "\t\"beta2\":\t0.98000001907348633,\n"
        "\t\"test_samples\":\t300,\n"
        "\t\"eval_every\":\t250,\n"
        "\t\"seeds\":\t[42],\n";
    toy_plan q;
    char path[160];
    assert_int_equal(toy_plan_preset("quick", &q), 0);
    assert_int_equal(toy_plan_save(&q, dir, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/run.json", dir);
    char *text = read_text_file(path, 1u << 20, err, sizeof err);
    assert_non_null(text);
    if (strncmp(text, quick_text, strlen(quick_text))) fail_msg("run.json of quick begins\n%.600s", text);
    free(text);
    toy_plan p;
    assert_int_equal(toy_plan_preset("paper", &p), 0);
    assert_int_equal(p.run.task.n_blocks, 52);
    assert_int_equal(toy_row_len(&p.run.task), 321);
    assert_int_equal(p.models[1].dim, 256);
    assert_int_equal(p.models[1].n_layers, 4);
    assert_int_equal(p.models[1].attn.pre_cq * 100 + p.models[1].attn.pre_ck, 209);
    assert_int_equal(p.run.steps, 100000);
    assert_int_equal(toy_plan_preset("nope", &p), -1);
    // put the tiny plan back for the other tests
    p = tiny_plan();
    assert_int_equal(toy_plan_save(&p, dir, err, sizeof err), 0);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

// The directory bad/ for records the loader refuses; its run.json's path in path.
static void bad_dir(char bad[96], char path[160]) {
    char cmd[200];
    snprintf(bad, 96, "%s/bad", dir);
    snprintf(path, 160, "%s/run.json", bad);
    snprintf(cmd, sizeof cmd, "mkdir -p %s", bad);
    assert_int_equal(system(cmd), 0);
}

// bad/run.json holding text is refused with an error that says needle (what: the case, in a failure).
static void expect_refused(const char *text, const char *needle, const char *what) {
    char bad[96], path[160], err[256] = "";
    bad_dir(bad, path);
    write_file(path, text);
    toy_plan p;
    assert_int_equal(toy_plan_load(&p, bad, err, sizeof err), -1);
    if (!strstr(err, needle)) fail_msg("%s: '%s' lacks '%s'", what, err, needle);
}

// A run record of a 2-block task and one small model m, the recipe's members and the seeds given.
static void record(char *out, size_t n, const char *recipe, const char *seeds) {
    snprintf(out, n,
             "{\"setting\":\"x\",\"task\":{\"blocks\":2,\"block_len\":5,\"query_len\":2,\"alphabet\":26},"
             "\"steps\":1,\"batch\":1,\"test_samples\":1,\"eval_every\":1,%s,\"seeds\":[%s],"
             "\"models\":[{\"name\":\"m\",\"config\":{\"dim\":16,\"n_layers\":1,\"n_heads\":2,\"vocab_size\":30}}]}",
             recipe, seeds);
}

static const char *const RECIPE = "\"lr\":0.001,\"weight_decay\":0,\"beta2\":0.98";

static void test_plan_bad_records(void **s) {
    (void)s;
    char bad[96], path[160], err[256];
    bad_dir(bad, path);
    toy_plan p;
    assert_int_equal(toy_plan_load(&p, bad, err, sizeof err), -1);  // missing
    assert_non_null(strstr(err, "cannot open"));
    const char *cases[][2] = {
        {"{", "not a toy run record"},
        {"[]", "not a toy run record"},
        {"{\"setting\":\"x\",\"task\":{\"blocks\":52,\"block_len\":5,\"query_len\":9,\"alphabet\":26},"
         "\"steps\":1,\"batch\":1,\"test_samples\":1,\"eval_every\":1,\"lr\":0.001,\"weight_decay\":0,\"beta2\":0.98,\"seeds\":[1],\"models\":[]}", "query length"},
        {"{\"setting\":\"x\",\"task\":{\"blocks\":2,\"block_len\":5,\"query_len\":2,\"alphabet\":26},"
         "\"steps\":0,\"batch\":1,\"test_samples\":1,\"eval_every\":1,\"lr\":0.001,\"weight_decay\":0,\"beta2\":0.98,\"seeds\":[1],\"models\":[]}",
         "steps, batch, test_samples, eval_every (positive) and warmup must be integers"},
        {"{\"setting\":\"x\",\"task\":{\"blocks\":2,\"block_len\":5,\"query_len\":2,\"alphabet\":26},\"warmup\":-1,"
         "\"steps\":1,\"batch\":1,\"test_samples\":1,\"eval_every\":1,\"lr\":0.001,\"weight_decay\":0,\"beta2\":0.98,\"seeds\":[1],\"models\":[]}",
         "steps, batch, test_samples, eval_every (positive) and warmup must be integers"},
        {"{\"setting\":\"x\",\"task\":{\"blocks\":2,\"block_len\":5,\"query_len\":2,\"alphabet\":26},"
         "\"steps\":1,\"batch\":1,\"test_samples\":1,\"eval_every\":1,\"lr\":0.001,\"weight_decay\":0,\"beta2\":0.98,\"seeds\":[-1],\"models\":[]}", "seeds"},
        {"{\"setting\":\"x\",\"task\":{\"blocks\":2,\"block_len\":5,\"query_len\":2,\"alphabet\":26},"
         "\"steps\":1,\"batch\":1,\"test_samples\":1,\"eval_every\":1,\"lr\":0.001,\"weight_decay\":0,\"beta2\":0.98,\"seeds\":[1],"
         "\"models\":[{\"name\":\"m\",\"config\":{\"dim\":3}}]}", "model m"},
        {"{\"setting\":\"x\",\"task\":{\"blocks\":2,\"block_len\":5,\"query_len\":2,\"alphabet\":26},"
         "\"steps\":1,\"batch\":1,\"test_samples\":1,\"eval_every\":1,\"lr\":0.001,\"weight_decay\":0,\"beta2\":0.98,\"seeds\":[1],\"models\":[]}", "no seeds or no models"},
        {"{\"setting\":\"x\",\"task\":{\"blocks\":2,\"block_len\":5,\"query_len\":2,\"alphabet\":26},\"schedule\":\"step\","
         "\"steps\":1,\"batch\":1,\"test_samples\":1,\"eval_every\":1,\"lr\":0.001,\"weight_decay\":0,\"beta2\":0.98,\"seeds\":[1],\"models\":[]}", "schedule"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char what[32];
        snprintf(what, sizeof what, "case %zu", i);
        expect_refused(cases[i][0], cases[i][1], what);
    }
}

// Seeds that are no uint64 (converting them was undefined), or that run.json does not keep
// exactly (above 2^52), in an otherwise good record; 1e999 reads as infinity. 2^52 is kept.
static void test_plan_bad_seeds(void **s) {
    (void)s;
    const char *seeds[] = {"1e20", "18446744073709551616", "9007199254740994", "4503599627370497", "1e999", "-1e999", "-0.5", "1.5",
                           "4.000001", "-3"};
    char rec[600], two[64];
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        snprintf(two, sizeof two, "4,%s", seeds[i]);
        record(rec, sizeof rec, RECIPE, two);
        expect_refused(rec, "not an integer in [0, 2^52]", seeds[i]);
    }
    char bad[96], path[160], err[256];
    bad_dir(bad, path);
    record(rec, sizeof rec, RECIPE, "4,4503599627370496");
    write_file(path, rec);
    toy_plan p;
    assert_int_equal(toy_plan_load(&p, bad, err, sizeof err), 0);
    assert_true(p.n_seeds == 2 && p.seeds[0] == 4 && p.seeds[1] == TOY_MAX_SEED);
    assert_true(p.run.schedule == LR_CONSTANT && p.run.warmup == 0);  // optional: the paper's recipe
}

// The recipe's numbers: absent (read as -1 before), beyond float (infinite: found by
// fuzz_toyplan, saved back as null), rounding out of range as a float, or out of range.
static void test_plan_bad_recipes(void **s) {
    (void)s;
    const char *recipes[] = {"\"weight_decay\":0,\"beta2\":0.98", "\"lr\":1e39,\"weight_decay\":0,\"beta2\":0.98",
                             "\"lr\":1e999,\"weight_decay\":0,\"beta2\":0.98", "\"lr\":1e-50,\"weight_decay\":0,\"beta2\":0.98",
                             "\"lr\":0,\"weight_decay\":0,\"beta2\":0.98", "\"lr\":-0.001,\"weight_decay\":0,\"beta2\":0.98",
                             "\"lr\":1,\"weight_decay\":0,\"beta2\":0.98", "\"lr\":\"0.001\",\"weight_decay\":0,\"beta2\":0.98",
                             "\"lr\":0.001,\"beta2\":0.98", "\"lr\":0.001,\"weight_decay\":-0.1,\"beta2\":0.98",
                             "\"lr\":0.001,\"weight_decay\":11,\"beta2\":0.98", "\"lr\":0.001,\"weight_decay\":0",
                             "\"lr\":0.001,\"weight_decay\":0,\"beta2\":0.9999999999", "\"lr\":0.001,\"weight_decay\":0,\"beta2\":-1e999"};
    char rec[600];
    for (size_t i = 0; i < sizeof recipes / sizeof recipes[0]; i++) {
        record(rec, sizeof rec, recipes[i], "4");
        expect_refused(rec, "lr (in (0, 1)), weight_decay (in [0, 10]) and beta2 (in [0, 1))", recipes[i]);
    }
}

static void test_attnmap_png(void **s) {
    (void)s;
    toy_plan p;
    char err[256], out[160];
    assert_int_equal(toy_plan_load(&p, dir, err, sizeof err), 0);
    snprintf(out, sizeof out, "%s/a.png", dir);
    assert_int_equal(toy_attnmap(&p, dir, p.seeds[0], 3, NULL, 0, NULL, 0, out, err, sizeof err), 0);
    FILE *f = fopen(out, "rb");
    assert_non_null(f);
    unsigned char sig[8];
    assert_int_equal(fread(sig, 1, 8, f), 8);
    fclose(f);
    assert_memory_equal(sig, "\x89PNG\r\n\x1a\n", 8);
    const int layer9 = 9, head0 = 0;
    assert_int_equal(toy_attnmap(&p, dir, p.seeds[0], 0, &layer9, 1, &head0, 1, out, err, sizeof err), -1);
    assert_non_null(strstr(err, "layer 9"));
    assert_int_equal(toy_attnmap(&p, dir, p.seeds[0], p.run.n_test, NULL, 0, NULL, 0, out, err, sizeof err), -1);
    assert_int_equal(toy_attnmap(&p, dir, 12345, 0, NULL, 0, NULL, 0, out, err, sizeof err), -1);  // no such weights
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_agrees_with_teacher_forcing), cmocka_unit_test(test_model_attention_maps),
        cmocka_unit_test(test_attnmap_png), cmocka_unit_test(test_plan_roundtrip), cmocka_unit_test(test_plan_bad_records),
        cmocka_unit_test(test_plan_bad_seeds), cmocka_unit_test(test_plan_bad_recipes)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
