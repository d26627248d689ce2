// cmd_tokenize.c: `mtac tokenize`: a run's tokenizer on text (ids out) or on ids (--decode: text
// out), for scripts and for checking what the model sees.
#include "cli.h"
#include "io/fsutil.h"

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] = "usage: mtac tokenize --run DIR [--text TEXT] [--bos yes|no] [--decode]\n";
static const char ABOUT[] =
    "Encodes TEXT (default: standard input, read to its end) with the run's tokenizer (its\n"
    "tokenizer.json; byte-level for a run without one) and prints the ids, space-separated, on one\n"
    "line. --bos yes starts them with the BOS id (default: the tokenizer's add_bos_token).\n"
    "--decode reads ids instead (separated by spaces or line ends) and writes their text, special\n"
    "tokens as their text; an id that is not a number or not in the vocabulary is an error naming\n"
    "its position.\n";

// The ids of text (whitespace-separated decimal numbers below vocab): 0 with *ids malloc'd, or -1
// after a message naming the first bad one by its position (1 = the first id).
static int parse_ids(const char *text, int vocab, int32_t **ids, size_t *n) {
    static const char *ws = " \t\r\n\f\v";
    size_t cap = 0;
    *ids = NULL, *n = 0;
    for (const char *p = text + strspn(text, ws); *p; p += strspn(p, ws)) {
        const size_t len = strcspn(p, ws);
        char *end;
        errno = 0;
        const unsigned long long x = strtoull(p, &end, 10);
        if (end != p + len || *p == '-' || *p == '+' || errno || x >= (unsigned long long)vocab) {
            fprintf(stderr, "mtac tokenize: id %zu ('%.*s') is %s\n", *n + 1, (int)(len < 40 ? len : 40), p,
                    end != p + len || *p == '-' || *p == '+' ? "not a non-negative integer"
                                                             : "outside the vocabulary");
            if (end == p + len && *p != '-' && *p != '+')
                fprintf(stderr, "mtac tokenize: the run's tokenizer has ids 0 to %d\n", vocab - 1);
            free(*ids);
            return -1;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 256;
            int32_t *more = realloc(*ids, cap * sizeof *more);
            if (!more) {
                fprintf(stderr, "mtac tokenize: out of memory\n");
                free(*ids);
                return -1;
            }
            *ids = more;
        }
        (*ids)[(*n)++] = (int32_t)x;
        p += len;
    }
    return 0;
}

static int encode(const tokenizer *t, const char *text, size_t len, int bos) {
    char err[1024];
    int32_t *ids;
    size_t n;
    if (tokenizer_encode(t, text, len, bos, &ids, &n, err, sizeof err)) {
        fprintf(stderr, "mtac tokenize: %s\n", err);
        return 1;
    }
    for (size_t i = 0; i < n; i++) printf(i ? " %" PRId32 : "%" PRId32, ids[i]);
    printf("\n");
    free(ids);
    return 0;
}

static int decode(const tokenizer *t, const char *text, size_t text_len) {
    char err[1024];
    int32_t *ids;
    size_t n, len;
    if (memchr(text, 0, text_len)) {
        fprintf(stderr, "mtac tokenize: --decode: the input holds a NUL byte, not ids\n");
        return 1;
    }
    if (parse_ids(text, tokenizer_vocab_size(t), &ids, &n)) return 1;
    char *out = tokenizer_decode(t, ids, n, 0, &len, err, sizeof err);
    free(ids);
    if (!out) {
        fprintf(stderr, "mtac tokenize: %s\n", err);
        return 1;
    }
    fwrite(out, 1, len, stdout);
    free(out);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *run = NULL, *text = NULL;
    int bos = -1, decode_ids = 0;
    const cli_opt opts[] = {
        {"run", CLI_STR, &run, .required = 1, .arg = "DIR", .help = "the run whose tokenizer encodes"},
        {"text", CLI_STR, &text, .arg = "TEXT", .help = "the text (default: standard input)"},
        {"bos", CLI_CHOICE, &bos, .choices = CLI_NO_YES, .arg = "yes|no",
         .help = "start with the BOS id (default: the tokenizer's add_bos_token)"},
        {"decode", CLI_FLAG, &decode_ids, .help = "ids in, text out"},
    };
    const cli_spec spec = {"mtac tokenize", USAGE, ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    int first, st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    if (decode_ids && bos >= 0) {
        fprintf(stderr, "mtac tokenize: --bos is for encoding; --decode writes the ids it is given\n");
        return 2;
    }
    tokenizer *t = cli_open_tokenizer("tokenize", run);
    if (!t) return 1;
    unsigned char *in = NULL;
    size_t len = text ? strlen(text) : 0;
    int rc = 0;
    if (!text && read_stream(stdin, &in, &len)) {
        fprintf(stderr, "mtac tokenize: cannot read standard input (a read error, or out of memory)\n");
        rc = 1;
    }
    // read_stream's buffer is not NUL-terminated: a copy that is, for the ids' parser
    char *s = text ? NULL : malloc(len + 1);
    if (!rc && !text && !s) fprintf(stderr, "mtac tokenize: out of memory\n"), rc = 1;
    if (!rc && s) memcpy(s, in ? (const char *)in : "", len), s[len] = 0;
    const char *src = text ? text : s;
    if (!rc) rc = decode_ids ? decode(t, src, len) : encode(t, src, len, bos >= 0 ? bos : tokenizer_add_bos(t));
    free(in), free(s);
    tokenizer_free(t);
    return rc;
}
