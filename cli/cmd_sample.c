// cmd_sample.c: `mtac sample`: generate text from a trained run (byte-level tokens) with the
// model's KV/MTA cache: one prefill of the prompt, then one O(t) step per token.
#include "cli.h"
#include "train/train.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f, "usage: mtac sample --run DIR [--prompt TEXT] [--tokens N] [--temperature X] [--top-k K] [--top-p P]\n"
               "                   [--seed S] [--no-cache]\n\n"
               "Continues TEXT (default: read from standard input when it is not a terminal, else \"\\n\")\n"
               "with N (default 200) bytes sampled from the run's model, streaming them as they come, and\n"
               "prints tokens/s at the end. Temperature 0 is greedy; top-k keeps the K most likely tokens\n"
               "(default 0 = all); top-p keeps the smallest set of tokens with that much probability.\n"
               "Decoding uses a KV cache that keeps the MTA convolutions exact; when the context reaches the\n"
               "run's seq_len it restarts from the last half. --no-cache recomputes the whole context for\n"
               "every token instead (the same contexts, slower; for comparison).\n");
}

static double urand(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return ((*s >> 11) + 0.5) / 9007199254740992.0;
}

typedef struct {
    float p;
    int id;
} cand;

static int by_prob_desc(const void *a, const void *b) {
    float x = ((const cand *)a)->p, y = ((const cand *)b)->p;
    return x < y ? 1 : x > y ? -1 : ((const cand *)a)->id - ((const cand *)b)->id;
}

// Draws a token from logits z (V) at temperature tau among the top_k most likely (0 = all) with
// nucleus top_p.
static int sample_token(const float *z, int V, float tau, int top_k, float top_p, uint64_t *rng, cand *c) {
    int best = 0;
    for (int j = 1; j < V; j++) best = z[j] > z[best] ? j : best;
    if (tau <= 0) return best;
    double sum = 0;
    for (int j = 0; j < V; j++) {
        c[j].id = j;
        c[j].p = (float)exp((z[j] - z[best]) / tau);
        sum += c[j].p;
    }
    qsort(c, (size_t)V, sizeof *c, by_prob_desc);
    double keep = 0;
    int k = 0;
    const int kmax = top_k > 0 && top_k < V ? top_k : V;
    double total = 0;
    for (int j = 0; j < kmax; j++) total += c[j].p;
    while (k < kmax && (k == 0 || keep < top_p * total)) keep += c[k++].p;
    double r = urand(rng) * keep, acc = 0;
    for (int j = 0; j < k; j++)
        if ((acc += c[j].p) >= r) return c[j].id;
    return c[k - 1].id;
}

int cmd_sample(int argc, char **argv) {
    const char *run = NULL, *prompt = NULL;
    int ntok = 200, seed = 1, top_k = 0, cache = 1;
    float tau = 0.8f, top_p = 0.95f;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--no-cache")) {
            cache = 0;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mtac sample: %s needs a value (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        char *end;
        if (!strcmp(a, "--run")) run = v;
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "--tokens")) { if (!cli_parse_pos_int(a, v, &ntok)) return 2; }
        else if (!strcmp(a, "--seed")) { if (!cli_parse_pos_int(a, v, &seed)) return 2; }
        else if (!strcmp(a, "--top-k")) {
            long x = strtol(v, &end, 10);  // 0 is the default: every token
            if (end == v || *end || x < 0 || x > 1000000000) { fprintf(stderr, "mtac sample: --top-k expects an integer >= 0 (0 = all tokens), got '%s'\n", v); return 2; }
            top_k = (int)x;
        }
        else if (!strcmp(a, "--temperature")) {
            tau = strtof(v, &end);
            if (*end || !(tau >= 0 && tau <= 100)) { fprintf(stderr, "mtac sample: --temperature expects a number in [0, 100]\n"); return 2; }
        } else if (!strcmp(a, "--top-p")) {
            top_p = strtof(v, &end);
            if (*end || !(top_p > 0 && top_p <= 1)) { fprintf(stderr, "mtac sample: --top-p expects a number in (0, 1]\n"); return 2; }
        } else {
            fprintf(stderr, "mtac sample: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!run) {
        fprintf(stderr, "mtac sample: --run DIR is required (see --help)\n");
        return 2;
    }
    train_config c;
    model *m;
    int open_rc = cli_open_run("sample", run, &c, &m);
    if (open_rc) return open_rc;
    char err[1024];
    if (c.model.vocab_size < 256) {
        fprintf(stderr, "mtac sample: the run's vocabulary (%d) is not byte-level text\n", c.model.vocab_size);
        model_free(m);
        return 1;
    }
    const int ctx = c.seq_len, V = c.model.vocab_size;
    int *toks = malloc(((size_t)ntok + 65536) * sizeof(int)), *lens = malloc(sizeof(int));
    cand *cd = malloc((size_t)V * sizeof *cd);
    model_decoder *dec = cache ? model_decoder_create(m, 1, ctx, err, sizeof err) : NULL;
    if (!toks || !lens || !cd || (cache && !dec)) {
        fprintf(stderr, "mtac sample: %s\n", cache && !dec ? err : "out of memory");
        free(toks), free(lens), free(cd);
        model_free(m);
        return 1;
    }
    int n = 0;
    if (prompt) {
        for (const unsigned char *p = (const unsigned char *)prompt; *p && n < 65536; p++) toks[n++] = *p;
    } else if (!isatty(STDIN_FILENO)) {
        int ch;
        while (n < 65536 && (ch = getchar()) != EOF) toks[n++] = ch;
    }
    if (n == 0) toks[n++] = '\n';
    for (int i = 0; i < n; i++) putchar(toks[i]);
    fflush(stdout);
    uint64_t rng = (uint64_t)seed * 0x9E3779B97F4A7C15ULL + 7;
    double t0 = cli_now();
    int rc = 0, made = 0;
    // The context is toks[start..n-1]: at most seq_len tokens; when it would grow past that, it
    // restarts from the last half. With the cache: a prefill at each (re)start, then one step per
    // token; with --no-cache, a forward over the whole context every time (same contexts).
    int start = n > ctx ? n - ctx : 0;
    for (; made < ntok && !rc; made++) {
        const int restart = made == 0 || n - start > ctx;
        if (n - start > ctx) start = n - ctx / 2;
        const float *z = NULL;
        lens[0] = n - start;
        if (cache && !restart) rc = model_decoder_step(dec, toks + n - 1, err, sizeof err);
        else if (cache) rc = model_decoder_prefill(dec, toks + start, n - start, lens, err, sizeof err);
        else rc = model_forward(m, toks + start, NULL, 1, n - start, NULL, err, sizeof err);
        if (rc) break;
        z = cache ? model_decoder_logits(dec) : model_logits(m) + (size_t)(n - start - 1) * V;
        int t = sample_token(z, V, tau, top_k, top_p, &rng, cd);
        toks[n++] = t;
        if (t < 256) putchar(t);
        fflush(stdout);
    }
    if (rc) fprintf(stderr, "\nmtac sample: %s\n", err);
    double dt = cli_now() - t0;
    fprintf(stderr, "\n[%d tokens in %.2f s: %.1f tokens/s%s]\n", made, dt, made / dt, cache ? "" : ", no cache");
    free(toks), free(lens), free(cd);
    model_decoder_free(dec);
    model_free(m);
    return rc ? 1 : 0;
}
