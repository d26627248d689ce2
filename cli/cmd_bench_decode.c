// cmd_bench_decode.c: `mtac bench decode`: tokens per second of incremental decoding at several
// context lengths, for the MTA and baseline models with the KV/MTA cache, and for a decoder that
// recomputes the whole context for every token (what the authors' generation code does).
#include "cli.h"
#include "model/model.h"

#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtac bench decode [--presets lm10m-baseline,lm10m] [--contexts 512,2048,8192] [--tokens N]\n"
            "                         [--recompute-tokens N] [--impl cache,recompute] [--threads N] [--json]\n"
            "\n"
            "For each preset (random weights) and context C: prefills a C-token prompt, then times N (default\n"
            "128) decoding steps with the cache (impl mtac_mta / mtac_baseline); and, for the MTA presets, the\n"
            "same model recomputing all C+i tokens for each new token (impl recompute_mta; --recompute-tokens,\n"
            "default 2). Prints tokens/s and, with --json, one line per measurement with impl, preset,\n"
            "context, tokens, tokens_per_s, prefill_s, threads.\n");
}

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
    for (int i = 0; i < C; i++) s = s * 6364136223846793005ULL + 1, tok[i] = (int)((s >> 33) % (uint64_t)V);
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

int bench_decode(int argc, char **argv) {
    char presets[256] = "lm10m-baseline,lm10m";
    int contexts[16] = {512, 2048, 8192}, nc = 3, tokens = 128, rtokens = 2, threads = omp_get_num_procs(), json = 0;
    int do_cache = 1, do_recompute = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mtac bench decode: %s needs a value (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--presets")) snprintf(presets, sizeof presets, "%s", v);
        else if (!strcmp(a, "--contexts")) {
            if (!(nc = cli_parse_list(v, contexts, 16))) {
                fprintf(stderr, "mtac bench decode: --contexts expects comma-separated positive integers, got '%s'\n", v);
                return 2;
            }
        } else if (!strcmp(a, "--tokens")) { if (!cli_parse_pos_int(a, v, &tokens)) return 2; }
        else if (!strcmp(a, "--recompute-tokens")) { if (!cli_parse_pos_int(a, v, &rtokens)) return 2; }
        else if (!strcmp(a, "--threads")) { if (!cli_parse_pos_int(a, v, &threads)) return 2; }
        else if (!strcmp(a, "--impl")) {
            do_cache = strstr(v, "cache") != NULL, do_recompute = strstr(v, "recompute") != NULL;
            if (!do_cache && !do_recompute) {
                fprintf(stderr, "mtac bench decode: --impl takes cache and/or recompute, got '%s'\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "mtac bench decode: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    cli_set_threads(threads);
    char cpu[256], err[512];
    cli_cpu_name(cpu, sizeof cpu);
    if (!json) {
        printf("machine: %s, %d threads\n", cpu, threads);
        printf("%-16s %-14s %8s %9s %12s\n", "preset", "impl", "context", "prefill s", "tokens/s");
    }
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
        for (int ci = 0; ci < nc; ci++)
            for (int rec = 0; rec < 2; rec++) {
                if ((rec && (!do_recompute || !mc.mta)) || (!rec && !do_cache)) continue;
                const char *impl = rec ? "recompute_mta" : mc.mta ? "mtac_mta" : "mtac_baseline";
                const int ntok = rec ? rtokens : tokens;
                decode_result r = time_decode(m, contexts[ci], ntok, rec, err, sizeof err);
                if (!r.ok) {
                    fprintf(stderr, "mtac bench decode: %s, %s, context %d: %s\n", name, impl, contexts[ci], err);
                    continue;
                }
                if (json)
                    printf("{\"impl\":\"%s\",\"preset\":\"%s\",\"context\":%d,\"tokens\":%d,\"tokens_per_s\":%.3f,"
                           "\"prefill_s\":%.3f,\"threads\":%d}\n",
                           impl, name, contexts[ci], ntok, r.tokens_per_s, r.prefill_s, threads);
                else
                    printf("%-16s %-14s %8d %9.2f %12.2f\n", name, impl, contexts[ci], r.prefill_s, r.tokens_per_s);
                fflush(stdout);
            }
        model_free(m);
    }
    return 0;
}
