// cmd_sample.c: `mtac sample`: generate text from a run with its tokenizer (byte-level, or a
// pretrained model's) and the model's KV/MTA cache: one prefill of the prompt, then one O(t) step
// per token.
#include "cli.h"
#include "io/fsutil.h"
#include "tok/chat.h"
#include "tok/stream.h"
#include "train/train.h"

#include <cjson/cJSON.h>
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
    "                   [--seed S] [--no-cache] [--bos yes|no] [--chat] [--json]\n";
static const char ABOUT[] =
    "Continues TEXT (default: read from standard input when it is not a terminal, else \"\\n\")\n"
    "with N (default 200) tokens of the run's tokenizer (its tokenizer.json; bytes for a run without\n"
    "one) sampled from the run's model, streaming their text as it comes (whole UTF-8 characters;\n"
    "special tokens are not written), and prints tokens/s on standard error at the end. With a\n"
    "pretrained tokenizer, generation stops at the model's end-of-sequence tokens (the last id then).\n"
    "The prompt is echoed whole; when its tokens outnumber the run's seq_len, its last seq_len tokens\n"
    "condition the continuation (a note on stderr says so). --bos: start the prompt with the BOS\n"
    "token (default: the tokenizer's add_bos_token; with --chat, no: the template writes it).\n"
    "--chat wraps TEXT as a user's message in the model's chat template (ChatML, with the template's\n"
    "default system message; Llama 3; Llama 2 [INST]; any other is refused) and echoes nothing.\n"
    "--json ends the output with one line {\"prompt_ids\": [...], \"ids\": [...], \"text\": \"...\",\n"
    "\"tokens_per_s\": x}: the prompt's ids, the generated ids and their text.\n"
    "Temperature 0 is greedy; top-k keeps the K most likely tokens (default 0 = all); top-p keeps the\n"
    "smallest set of tokens with that much probability.\n"
    "Decoding uses a KV cache that keeps the MTA convolutions exact, sized for the prompt and N\n"
    "tokens up to seq_len; when the context reaches the run's seq_len it restarts from the last half.\n"
    "--no-cache recomputes the whole context for every token instead (the same contexts, slower).\n";

typedef struct {
    const char *run, *prompt;
    int ntok, seed, top_k, no_cache, bos, chat, json;
    float tau, top_p;
} sample_args;

// What the sampling loop works with: the tokens so far (n, the prompt's n_prompt of them), the
// model or its decoder, the tokenizer and the text streamed so far.
typedef struct {
    model *m;
    model_decoder *dec;
    tokenizer *tok;
    int *toks, *lens, n, n_prompt, ctx, V;
    cand *cd;
    int32_t *gen;  // the generated ids the tokenizer knows (the text's), n_gen of them
    size_t n_gen;
    tok_stream stream;
    char *text;  // everything streamed, text_len bytes
    size_t text_len;
} sampler;

static int parse_args(int argc, char **argv, sample_args *a) {
    const cli_opt opts[] = {
        {"run", CLI_STR, &a->run, .required = 1, .arg = "DIR", .help = "the run whose model samples"},
        {"prompt", CLI_STR, &a->prompt, .arg = "TEXT", .help = "the text to continue"},
        {"tokens", CLI_INT, &a->ntok, 1, 1e9, .arg = "N", .help = "tokens to sample"},
        {"temperature", CLI_FLOAT, &a->tau, 0, 100, .arg = "X", .help = "0: greedy"},
        {"top-k", CLI_INT, &a->top_k, 0, 1e9, .arg = "K", .help = "keep the K most likely tokens (0 = all tokens)"},
        {"top-p", CLI_FLOAT, &a->top_p, 0, 1, .lo_open = 1, .arg = "P", .help = "nucleus: keep that much probability"},
        {"seed", CLI_INT, &a->seed, 1, 1e9, .arg = "S", .help = "seed of the draws"},
        {"no-cache", CLI_FLAG, &a->no_cache, .help = "recompute the whole context for every token"},
        {"bos", CLI_CHOICE, &a->bos, .choices = CLI_NO_YES, .arg = "yes|no",
         .help = "start the prompt with BOS (default: the tokenizer's add_bos_token; no with --chat)"},
        {"chat", CLI_FLAG, &a->chat, .help = "the prompt as a user's message in the model's chat template"},
        {"json", CLI_FLAG, &a->json, .help = "end with a JSON line of the ids, the text and tokens/s"},
    };
    const cli_spec spec = {"mtac sample", USAGE, ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    int first;
    return cli_parse(&spec, argc, argv, &first);
}

// The buffers and the decoder, whose cache holds the prompt and the tokens to come (at most
// seq_len: an imported model's seq_len may be far more than a generation needs). 0, or 1 after a
// message.
static int sampler_init(sampler *s, const sample_args *a) {
    char err[1024];
    const int cap = s->n_prompt + a->ntok < s->ctx ? s->n_prompt + a->ntok : s->ctx;
    s->lens = malloc(sizeof(int));
    s->cd = malloc((size_t)s->V * sizeof *s->cd);
    s->gen = malloc((size_t)a->ntok * sizeof *s->gen);
    s->dec = a->no_cache ? NULL : model_decoder_create(s->m, 1, cap, err, sizeof err);
    if (!s->lens || !s->cd || !s->gen || (!a->no_cache && !s->dec)) {
        fprintf(stderr, "mtac sample: %s\n", !a->no_cache && !s->dec ? err : "out of memory");
        return 1;
    }
    tok_stream_init(&s->stream, s->tok);
    return 0;
}

static void sampler_free(sampler *s) {
    free(s->toks), free(s->lens), free(s->cd), free(s->gen), free(s->text);
    model_decoder_free(s->dec);
}

// The prompt's text: --prompt, else standard input when it is no terminal, else "\n"; in the chat
// template with --chat. malloc'd (*len bytes); NULL after a message.
static char *prompt_text(const sampler *s, const sample_args *a, size_t *len) {
    unsigned char *in = NULL;
    char *p, err[1024];
    *len = 0;
    if (a->prompt && *a->prompt) *len = strlen(a->prompt), in = (unsigned char *)strdup(a->prompt);
    else if (!a->prompt && !isatty(STDIN_FILENO) && read_stream(stdin, &in, len)) {
        fprintf(stderr, "mtac sample: cannot read the prompt from standard input (a read error, or out of memory)\n");
        return NULL;
    }
    if (!*len) free(in), in = (unsigned char *)strdup("\n"), *len = 1;
    if (!in) {
        fprintf(stderr, "mtac sample: out of memory\n");
        return NULL;
    }
    if (!a->chat) return (char *)in;
    // the template's text holds the user's as a C string: one holding a NUL byte is cut there
    const int bos = tokenizer_bos_id(s->tok);
    p = chat_render(tokenizer_chat_template(s->tok), bos >= 0 ? tokenizer_piece(s->tok, bos) : "", (char *)in, err,
                    sizeof err);
    free(in);
    if (!p) fprintf(stderr, "mtac sample: --chat: %s\n", err);
    else *len = strlen(p);
    return p;
}

// The prompt's ids into s->toks, its last seq_len of them when longer (the continuation is
// conditioned on at most the model's context, as the sliding cache does once the text outgrows
// it); the text echoed whole, without --chat. 0, or 1 after a message.
static int read_prompt(sampler *s, const sample_args *a) {
    char err[1024];
    size_t len, n;
    int32_t *ids = NULL;
    char *p = prompt_text(s, a, &len);
    if (!p) return 1;
    const int bos = a->bos >= 0 ? a->bos : !a->chat && tokenizer_add_bos(s->tok);
    int rc = tokenizer_encode(s->tok, p, len, bos, &ids, &n, err, sizeof err);
    if (rc) fprintf(stderr, "mtac sample: %s\n", err);
    else if (!n) fprintf(stderr, "mtac sample: the prompt has no tokens\n"), rc = 1;
    if (!rc && n > (size_t)s->ctx)
        fprintf(stderr, "mtac sample: the prompt is %zu %s, longer than the model's context (seq_len %d): its "
                        "last %d condition the continuation\n", n,
                tokenizer_get_kind(s->tok) == TOKENIZER_BYTES ? "bytes" : "tokens", s->ctx, s->ctx);
    const size_t from = n > (size_t)s->ctx ? n - (size_t)s->ctx : 0;
    if (!rc && !(s->toks = malloc((n - from + (size_t)a->ntok) * sizeof(int))))
        fprintf(stderr, "mtac sample: out of memory\n"), rc = 1;
    for (size_t i = from; !rc && i < n; i++) {
        if (ids[i] >= s->V) {
            fprintf(stderr, "mtac sample: the prompt's token %d is outside the model's vocabulary (%d)\n", ids[i], s->V);
            rc = 1;
        }
        s->toks[i - from] = ids[i];
    }
    s->n = s->n_prompt = (int)(n - from);
    if (!rc && !a->chat) fwrite(p, 1, len, stdout), fflush(stdout);
    free(ids), free(p);
    return rc;
}

// Whether t ends the generation: one of a pretrained tokenizer's end-of-sequence ids. (mtac's own
// byte-level models run on past their EOS, as they always have.)
static int is_eos(const tokenizer *tok, int t) {
    if (tokenizer_get_kind(tok) == TOKENIZER_BYTES) return 0;
    for (int i = 0; i < tokenizer_n_eos(tok); i++)
        if (tokenizer_eos_id(tok, i) == t) return 1;
    return 0;
}

// Prints the text the generated ids add (whole characters; all of it when final) and keeps it
// for --json. 0, or 1 after a message.
static int stream_text(sampler *s, int final) {
    char err[1024], *add;
    size_t len;
    if (tok_stream_next(&s->stream, s->gen, s->n_gen, final, &add, &len, err, sizeof err)) {
        fprintf(stderr, "\nmtac sample: %s\n", err);
        return 1;
    }
    char *more = realloc(s->text, s->text_len + len + 1);
    if (!more) {
        free(add);
        fprintf(stderr, "\nmtac sample: out of memory\n");
        return 1;
    }
    memcpy(more + s->text_len, add, len + 1);
    s->text = more, s->text_len += len;
    fwrite(add, 1, len, stdout);
    fflush(stdout);
    free(add);
    return 0;
}

// Samples and prints up to a->ntok tokens, stopping after an end-of-sequence token: 0, or 1 after
// a message; *made: how many.
static int generate(sampler *s, const sample_args *a, int *made) {
    uint64_t rng = (uint64_t)a->seed * 0x9E3779B97F4A7C15ULL + 7;
    char err[1024];
    const int cache = !a->no_cache, ctx = s->ctx, V = s->V, vocab = tokenizer_vocab_size(s->tok);
    int rc = 0, *toks = s->toks, n = s->n, stop = 0;
    // The context is toks[start..n-1]: at most seq_len tokens; when it would grow past that, it
    // restarts from the last half. With the cache: a prefill at each (re)start, then one step per
    // token; with --no-cache, a forward over the whole context every time (same contexts).
    int start = n > ctx ? n - ctx : 0;
    for (*made = 0; *made < a->ntok && !rc && !stop; ++*made) {
        const int restart = *made == 0 || n - start > ctx;
        if (n - start > ctx) start = n - ctx / 2;
        s->lens[0] = n - start;
        if (cache && !restart) rc = model_decoder_step(s->dec, toks + n - 1, err, sizeof err);
        else if (cache) rc = model_decoder_prefill(s->dec, toks + start, n - start, s->lens, err, sizeof err);
        else rc = model_forward(s->m, toks + start, NULL, 1, n - start, NULL, err, sizeof err);
        if (rc) {
            fprintf(stderr, "\nmtac sample: %s\n", err);
            break;
        }
        const float *z = cache ? model_decoder_logits(s->dec) : model_logits(s->m) + (size_t)(n - start - 1) * V;
        const int t = sample_token(z, V, a->tau, a->top_k, a->top_p, &rng, s->cd);
        toks[n++] = t;
        stop = is_eos(s->tok, t);
        // ids past the tokenizer's vocabulary (a model's padded rows) have no text
        if (t < vocab) s->gen[s->n_gen++] = t, rc = stream_text(s, 0);
    }
    s->n = n;
    return rc ? rc : stream_text(s, 1);
}

// --json: the last line of the output.
static int print_json(const sampler *s, double tokens_per_s) {
    cJSON *o = cJSON_CreateObject(), *p = cJSON_AddArrayToObject(o, "prompt_ids"), *g = cJSON_AddArrayToObject(o, "ids");
    for (int i = 0; i < s->n; i++) cJSON_AddItemToArray(i < s->n_prompt ? p : g, cJSON_CreateNumber(s->toks[i]));
    size_t len;
    char *text = utf8_sanitize(s->text ? s->text : "", s->text_len, &len), *line = NULL;
    if (text) cJSON_AddStringToObject(o, "text", text);
    cJSON_AddNumberToObject(o, "tokens_per_s", tokens_per_s);
    if (text) line = cJSON_PrintUnformatted(o);
    if (line) printf("\n%s\n", line);
    else fprintf(stderr, "mtac sample: out of memory\n");
    cJSON_free(line), free(text), cJSON_Delete(o);
    return line ? 0 : 1;
}

int cmd_sample(int argc, char **argv) {
    sample_args a = {.ntok = 200, .seed = 1, .tau = 0.8f, .top_p = 0.95f, .bos = -1};
    const int st = parse_args(argc, argv, &a);
    if (st >= 0) return st;
    train_config c;
    sampler s = {0};
    const int open_rc = cli_open_run("sample", a.run, &c, &s.m);
    if (open_rc) return open_rc;
    s.ctx = c.seq_len, s.V = c.model.vocab_size;
    int rc = !(s.tok = cli_open_tokenizer("sample", a.run)), made = 0;
    if (!rc && tokenizer_get_kind(s.tok) == TOKENIZER_BYTES && s.V < 256) {
        fprintf(stderr, "mtac sample: the run's vocabulary (%d) is not byte-level text\n", s.V);
        rc = 1;
    }
    if (!rc) rc = read_prompt(&s, &a);
    if (!rc) rc = sampler_init(&s, &a);
    if (!rc) {
        const double t0 = cli_now();
        rc = generate(&s, &a, &made);
        const double dt = cli_now() - t0;
        fprintf(stderr, "\n[%d tokens in %.2f s: %.1f tokens/s%s]\n", made, dt, made / dt, a.no_cache ? ", no cache" : "");
        if (!rc && a.json) rc = print_json(&s, made / dt);
    }
    sampler_free(&s);
    tokenizer_free(s.tok);
    model_free(s.m);
    return rc ? 1 : 0;
}
