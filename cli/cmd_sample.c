// cmd_sample.c: `mtac sample`: generate text from a trained run (byte-level tokens) with the
// model's KV/MTA cache: one prefill of the prompt, then one O(t) step per token.
#include "cli.h"
#include "io/fsutil.h"
#include "train/train.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static const char USAGE[] =
    "usage: mtac sample --run DIR [--prompt TEXT] [--tokens N] [--temperature X] [--top-k K] [--top-p P]\n"
    "                   [--seed S] [--no-cache]\n";
static const char ABOUT[] =
    "Continues TEXT (default: read from standard input when it is not a terminal, else \"\\n\")\n"
    "with N (default 200) bytes sampled from the run's model, streaming them as they come, and\n"
    "prints tokens/s at the end. The prompt is echoed whole; when it is longer than the run's seq_len,\n"
    "its last seq_len bytes condition the continuation (a note on stderr says so). Temperature 0 is greedy; top-k keeps the K most likely tokens\n"
    "(default 0 = all); top-p keeps the smallest set of tokens with that much probability.\n"
    "Decoding uses a KV cache that keeps the MTA convolutions exact; when the context reaches the\n"
    "run's seq_len it restarts from the last half. --no-cache recomputes the whole context for\n"
    "every token instead (the same contexts, slower; for comparison).\n";

typedef struct {
    const char *run, *prompt;
    int ntok, seed, top_k, no_cache;
    float tau, top_p;
} sample_args;

// What the sampling loop works with: the tokens so far (n), the model or its decoder.
typedef struct {
    model *m;
    model_decoder *dec;
    int *toks, *lens, n, ctx, V;
    cand *cd;
} sampler;

static int parse_args(int argc, char **argv, sample_args *a) {
    const cli_opt opts[] = {
        {"run", CLI_STR, &a->run, .required = 1, .arg = "DIR", .help = "the run whose model samples"},
        {"prompt", CLI_STR, &a->prompt, .arg = "TEXT", .help = "the text to continue"},
        {"tokens", CLI_INT, &a->ntok, 1, 1e9, .arg = "N", .help = "bytes to sample"},
        {"temperature", CLI_FLOAT, &a->tau, 0, 100, .arg = "X", .help = "0: greedy"},
        {"top-k", CLI_INT, &a->top_k, 0, 1e9, .arg = "K", .help = "keep the K most likely tokens (0 = all tokens)"},
        {"top-p", CLI_FLOAT, &a->top_p, 0, 1, .lo_open = 1, .arg = "P", .help = "nucleus: keep that much probability"},
        {"seed", CLI_INT, &a->seed, 1, 1e9, .arg = "S", .help = "seed of the draws"},
        {"no-cache", CLI_FLAG, &a->no_cache, .help = "recompute the whole context for every token"},
    };
    const cli_spec spec = {"mtac sample", USAGE, ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    int first;
    return cli_parse(&spec, argc, argv, &first);
}

// The buffers and the decoder (with the cache): 0, or 1 after a message.
static int sampler_init(sampler *s, model *m, const train_config *c, const sample_args *a) {
    char err[1024];
    memset(s, 0, sizeof *s);
    s->m = m, s->ctx = c->seq_len, s->V = c->model.vocab_size;
    s->toks = malloc(((size_t)a->ntok + (size_t)s->ctx) * sizeof(int)), s->lens = malloc(sizeof(int));
    s->cd = malloc((size_t)s->V * sizeof *s->cd);
    s->dec = a->no_cache ? NULL : model_decoder_create(m, 1, s->ctx, err, sizeof err);
    if (!s->toks || !s->lens || !s->cd || (!a->no_cache && !s->dec)) {
        fprintf(stderr, "mtac sample: %s\n", !a->no_cache && !s->dec ? err : "out of memory");
        return 1;
    }
    return 0;
}

static void sampler_free(sampler *s) {
    free(s->toks), free(s->lens), free(s->cd);
    model_decoder_free(s->dec);
}

// The prompt: --prompt, else standard input when it is no terminal, else "\n"; echoed whole. Its
// last seq_len bytes go to s->toks: the continuation is conditioned on at most the model's context,
// as the sliding cache does once the text outgrows it. 0, or 1 after a message.
static int read_prompt(sampler *s, const char *prompt) {
    size_t len = 0;
    unsigned char *in = NULL;
    const unsigned char *p = (const unsigned char *)"\n";
    if (prompt && *prompt) p = (const unsigned char *)prompt, len = strlen(prompt);
    else if (!prompt && !isatty(STDIN_FILENO)) {
        if (read_stream(stdin, &in, &len)) {
            fprintf(stderr, "mtac sample: cannot read the prompt from standard input (a read error, or out of memory)\n");
            return 1;
        }
        if (len) p = in;
    }
    if (!len) len = 1;  // "\n"
    if (len > (size_t)s->ctx)
        fprintf(stderr, "mtac sample: the prompt is %zu bytes, longer than the model's context (seq_len %d): its "
                        "last %d condition the continuation\n", len, s->ctx, s->ctx);
    fwrite(p, 1, len, stdout);
    fflush(stdout);
    const size_t from = len > (size_t)s->ctx ? len - (size_t)s->ctx : 0;
    for (size_t i = from; i < len; i++) s->toks[i - from] = p[i];
    s->n = (int)(len - from);
    free(in);
    return 0;
}

// Samples and prints a->ntok tokens: 0, or 1 after a message; *made: how many.
static int generate(sampler *s, const sample_args *a, int *made) {
    uint64_t rng = (uint64_t)a->seed * 0x9E3779B97F4A7C15ULL + 7;
    char err[1024];
    const int cache = !a->no_cache, ctx = s->ctx, V = s->V;
    int rc = 0, *toks = s->toks, n = s->n;
    // The context is toks[start..n-1]: at most seq_len tokens; when it would grow past that, it
    // restarts from the last half. With the cache: a prefill at each (re)start, then one step per
    // token; with --no-cache, a forward over the whole context every time (same contexts).
    int start = n > ctx ? n - ctx : 0;
    for (*made = 0; *made < a->ntok && !rc; ++*made) {
        const int restart = *made == 0 || n - start > ctx;
        if (n - start > ctx) start = n - ctx / 2;
        s->lens[0] = n - start;
        if (cache && !restart) rc = model_decoder_step(s->dec, toks + n - 1, err, sizeof err);
        else if (cache) rc = model_decoder_prefill(s->dec, toks + start, n - start, s->lens, err, sizeof err);
        else rc = model_forward(s->m, toks + start, NULL, 1, n - start, NULL, err, sizeof err);
        if (rc) break;
        const float *z = cache ? model_decoder_logits(s->dec) : model_logits(s->m) + (size_t)(n - start - 1) * V;
        const int t = sample_token(z, V, a->tau, a->top_k, a->top_p, &rng, s->cd);
        toks[n++] = t;
        if (t < 256) putchar(t);
        fflush(stdout);
    }
    s->n = n;
    if (rc) fprintf(stderr, "\nmtac sample: %s\n", err);
    return rc;
}

int cmd_sample(int argc, char **argv) {
    sample_args a = {.ntok = 200, .seed = 1, .tau = 0.8f, .top_p = 0.95f};
    const int st = parse_args(argc, argv, &a);
    if (st >= 0) return st;
    train_config c;
    model *m;
    const int open_rc = cli_open_run("sample", a.run, &c, &m);
    if (open_rc) return open_rc;
    if (c.model.vocab_size < 256) {
        fprintf(stderr, "mtac sample: the run's vocabulary (%d) is not byte-level text\n", c.model.vocab_size);
        model_free(m);
        return 1;
    }
    sampler s;
    int rc = sampler_init(&s, m, &c, &a), made = 0;
    if (!rc) rc = read_prompt(&s, a.prompt);
    if (!rc) {
        const double t0 = cli_now();
        rc = generate(&s, &a, &made);
        const double dt = cli_now() - t0;
        fprintf(stderr, "\n[%d tokens in %.2f s: %.1f tokens/s%s]\n", made, dt, made / dt, a.no_cache ? ", no cache" : "");
    }
    sampler_free(&s);
    model_free(m);
    return rc ? 1 : 0;
}
