// cmd_bench_decode.c: `mtac bench decode`: tokens per second of incremental decoding at several
// context lengths, for the MTA and baseline models with the KV/MTA cache, and for a decoder that
// recomputes the whole context for every token (what the authors' generation code does).
#include "cli.h"
#include "model/model.h"
#include "train/train.h"
#include "util/rng.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: mtac bench decode [--presets lm10m-baseline,lm10m | --run DIR] [--contexts 512,2048,8192] [--tokens N]\n"
    "                         [--recompute-tokens N] [--impl cache,recompute] [--threads N] [--json]\n";
static const char ABOUT[] =
    "For each preset (random weights) and context C: prefills a C-token prompt, then times N (default\n"
    "128) decoding steps with the cache (impl mtac_mta / mtac_baseline); and, for the MTA presets, the\n"
    "same model recomputing all C+i tokens for each new token (impl recompute_mta; --recompute-tokens,\n"
    "default 2). --run DIR times that run's model (its weights, e.g. an imported pretrained model)\n"
    "instead of the presets. Prints tokens/s and, with --json, one line per measurement with impl, preset,\n"
    "context, tokens, tokens_per_s, prefill_s, threads.\n";

typedef struct {
    int ok;
    double prefill_s, tokens_per_s;
} decode_result;

// Times `tokens` new tokens after a C-token prompt; recompute = prefill the whole context again
// for every token instead of stepping the cache.
static decode_result time_decode(model *m, int C, int tokens, int recompute, char *err, size_t n) {
    decode_result r = {0, 0, 0};
    const int V = model_cfg(m)->vocab_size;
    int *tok = malloc((size_t)(C + tokens) * sizeof(int));
    model_decoder *dec = tok ? model_decoder_create(m, 1, C + tokens, err, n) : NULL;
    if (!dec) {
        free(tok);
        return r;
    }
    uint64_t s = 12345;
    for (int i = 0; i < C; i++) tok[i] = (int)(splitmix64(&s) % (uint64_t)V);
    int len = C;
    double t0 = cli_now();
    int rc = model_decoder_prefill(dec, tok, C, &len, err, n);
    r.prefill_s = cli_now() - t0;
    t0 = cli_now();
    for (int i = 0; i < tokens && !rc; i++) {
        const float *z = model_decoder_logits(dec);
        int best = 0;
        for (int j = 1; j < V; j++) best = z[j] > z[best] ? j : best;
        tok[C + i] = best;
        len = C + i + 1;
        rc = recompute ? model_decoder_prefill(dec, tok, len, &len, err, n) : model_decoder_step(dec, &best, err, n);
    }
    double dt = cli_now() - t0;
    if (!rc) r.ok = 1, r.tokens_per_s = tokens / dt;
    model_decoder_free(dec);
    free(tok);
    return r;
}

enum { IMPL_CACHE = 1, IMPL_RECOMPUTE = 2 };
static const char *const IMPLS[] = {"cache", "recompute", NULL};

typedef struct {
    const char *presets, *run;
    uint64_t contexts[16];
    int nc, tokens, rtokens, threads, impl, json;
} decode_args;

// The flags into a: -1 to go on, else the exit status.
static int decode_parse(int argc, char **argv, decode_args *a) {
    const cli_opt opts[] = {
        {"presets", CLI_STR, &a->presets, .arg = "LIST", .help = "model presets, comma-separated"},
        {"run", CLI_STR, &a->run, .arg = "DIR", .help = "time this run's model instead of the presets"},
        {"contexts", CLI_LIST, a->contexts, 1, 1 << 20, .max = 16, .count = &a->nc, .arg = "LIST",
         .help = "prompt lengths; default 512,2048,8192"},
        {"tokens", CLI_INT, &a->tokens, 1, 1e9, .arg = "N", .help = "tokens decoded with the cache"},
        {"recompute-tokens", CLI_INT, &a->rtokens, 1, 1e9, .arg = "N", .help = "tokens decoded by recomputing"},
        {"impl", CLI_SET, &a->impl, .choices = IMPLS, .arg = "LIST", .help = "the decoders timed"},
        {"threads", CLI_INT, &a->threads, 1, 1e9, .arg = "N", .help = "OpenMP/BLAS threads (default: all cores)"},
        {"json", CLI_FLAG, &a->json, .help = "one JSON object per line instead of a table"},
    };
    const cli_spec spec = {"mtac bench decode", USAGE, ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    return cli_parse_bench(&spec, argc, argv, &a->threads);
}

// Times model m (preset name) at each context as a asks, a line per measurement.
static void decode_measure(const decode_args *a, const char *name, model *m) {
    const int mta = model_cfg(m)->mta;
    char err[512];
    for (int ci = 0; ci < a->nc; ci++)
        for (int rec = 0; rec < 2; rec++) {
            if ((rec && (!(a->impl & IMPL_RECOMPUTE) || !mta)) || (!rec && !(a->impl & IMPL_CACHE))) continue;
            const char *impl = rec ? "recompute_mta" : mta ? "mtac_mta" : "mtac_baseline";
            const int ntok = rec ? a->rtokens : a->tokens, C = (int)a->contexts[ci];
            decode_result r = time_decode(m, C, ntok, rec, err, sizeof err);
            if (!r.ok) {
                fprintf(stderr, "mtac bench decode: %s, %s, context %d: %s\n", name, impl, C, err);
                continue;
            }
            if (a->json)
                printf("{\"impl\":\"%s\",\"preset\":\"%s\",\"context\":%d,\"tokens\":%d,\"tokens_per_s\":%.3f,"
                       "\"prefill_s\":%.3f,\"threads\":%d}\n",
                       impl, name, C, ntok, r.tokens_per_s, r.prefill_s, a->threads);
            else
                printf("%-16s %-14s %8d %9.2f %12.2f\n", name, impl, C, r.prefill_s, r.tokens_per_s);
            fflush(stdout);
        }
}

int cmd_bench_decode(int argc, char **argv) {
    decode_args a = {.presets = "lm10m-baseline,lm10m", .contexts = {512, 2048, 8192}, .nc = 3, .tokens = 128,
                     .rtokens = 2, .impl = IMPL_CACHE | IMPL_RECOMPUTE};
    const int st = decode_parse(argc, argv, &a);
    if (st >= 0) return st;
    cli_set_threads(a.threads);
    char cpu[256], err[512], presets[256];
    cli_cpu_name(cpu, sizeof cpu);
    if (!a.json) {
        printf("machine: %s, %d threads\n", cpu, a.threads);
        printf("%-16s %-14s %8s %9s %12s\n", "preset", "impl", "context", "prefill s", "tokens/s");
    }
    if (a.run) {
        train_config c;
        model *m;
        const int rc = cli_open_run("bench decode", a.run, &c, &m);
        if (rc) return rc;
        decode_measure(&a, a.run, m);
        model_free(m);
        return 0;
    }
    snprintf(presets, sizeof presets, "%s", a.presets);
    char *save = NULL;
    for (char *name = strtok_r(presets, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        model_config mc;
        if (model_preset(name, &mc)) {
            fprintf(stderr, "mtac bench decode: unknown preset '%s' (available: %s)\n", name, model_preset_names());
            return 2;
        }
        model *m = model_create(&mc, err, sizeof err);
        if (!m) {
            fprintf(stderr, "mtac bench decode: %s: %s\n", name, err);
            return 1;
        }
        model_init(m, 1);
        decode_measure(&a, name, m);
        model_free(m);
    }
    return 0;
}
