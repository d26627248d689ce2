// cmd_data.c: `mtac data`: text files (default: the King James Bible) into token shards
// train.bin and val.bin (docs/shards.md): byte-level, or a run's tokenizer with --tokenizer.
#include "cli.h"
#include "data/shard.h"
#include "data/tokenizer.h"
#include "io/fsutil.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

// The whole King James Bible, one verse a line (bible(1): "Gen1:1-Rev22:21 will dump the entire
// text"); -l10000 keeps it from wrapping lines at the terminal width.
static const char *BIBLE_CMD = "bible -l10000 gen1:1-rev22:21 </dev/null 2>/dev/null";

static const char USAGE[] = "usage: mtac data --out DIR [--val-fraction F | --val-every K] [--dtype uint16|uint32]\n"
                            "                 [--documents file|paragraph] [--tokenizer RUN] [FILE ...]\n";
static const char ABOUT[] =
    "Tokenizes text byte by byte (ids 0-255; 256 BOS, 257 EOS after each document, 258 PAD; vocab 259)\n"
    "and writes DIR/train.bin and DIR/val.bin (format: docs/shards.md). Without FILE it uses the\n"
    "King James Bible printed by Debian's `bible` program (package bible-kjv, installed by\n"
    "scripts/setup.sh). A document is a whole file (--documents file, the default) or a paragraph\n"
    "(--documents paragraph: lines up to one or more blank lines, which are dropped); `mtac train\n"
    "--doc-mask` keeps documents apart.\n"
    "Split: the text is cut into blocks of about 16384 bytes at line ends (at paragraph ends with\n"
    "--documents paragraph, so that no document is cut in two); every K-th block goes to validation.\n"
    "--val-fraction F sets K = round(1/F) (default 0.05, K = 20); --val-every K sets K itself.\n"
    "The split depends only on the text.\n"
    "--tokenizer RUN: the ids of RUN's tokenizer instead (its tokenizer.json, e.g. an imported\n"
    "model's), each block or paragraph tokenized on its own, no BOS, and the tokenizer's EOS id\n"
    "after each document. The shards hold uint16 ids unless the vocabulary is above 65536 (then\n"
    "uint32), or as --dtype says.\n";
_Static_assert(SHARD_BLOCK == 16384, "ABOUT says the block size");

static const char *const DTYPES[] = {"uint16", "uint32", NULL};
static const char *const DOCUMENTS[] = {"file", "paragraph", NULL};  // SHARD_DOC_FILE, SHARD_DOC_PARAGRAPH

typedef struct {
    const char *out, *tokenizer;
    double fraction;
    int every, dtype, documents, nfiles;
    char **files;
} data_args;

// The flags into a: -1 to go on, else the exit status.
static int parse_args(int argc, char **argv, data_args *a) {
    const cli_opt opts[] = {
        {"out", CLI_STR, &a->out, .required = 1, .arg = "DIR", .help = "where train.bin and val.bin go"},
        {"val-fraction", CLI_NUM, &a->fraction, 1e-6, 0.5, .arg = "F", .help = "validation share: every round(1/F)-th block"},
        {"val-every", CLI_INT, &a->every, 2, 1e9, .arg = "K", .help = "every K-th block to validation"},
        {"dtype", CLI_CHOICE, &a->dtype, .choices = DTYPES, .arg = "TYPE",
         .help = "token width in the shards (default: uint16, uint32 for a vocabulary above 65536)"},
        {"documents", CLI_CHOICE, &a->documents, .choices = DOCUMENTS, .arg = "UNIT",
         .help = "what an EOS ends: each file or each paragraph"},
        {"tokenizer", CLI_STR, &a->tokenizer, .arg = "RUN", .help = "the ids of RUN's tokenizer (default: bytes)"},
    };
    const cli_spec spec = {"mtac data", USAGE, ABOUT, "FILE", opts, sizeof opts / sizeof opts[0], NULL};
    int first, st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    if (a->fraction > 0 && a->every) {
        fprintf(stderr, "mtac data: --val-fraction and --val-every both set the split: give one (see --help)\n");
        return 2;
    }
    if ((a->nfiles = argc - first) > 256) {
        fprintf(stderr, "mtac data: at most 256 files\n");
        return 2;
    }
    a->files = argv + first;
    for (int f = 0; f < a->nfiles; f++)
        for (int k = 0; k < 2; k++) {
            char dst[4200];
            snprintf(dst, sizeof dst, "%s/%s", a->out, k ? "val.bin" : "train.bin");
            if (cli_out_is_input(spec.name, dst, a->files[f])) return 2;
        }
    if (!a->every) a->every = a->fraction > 0 ? (int)(1.0 / a->fraction + 0.5) : 20;
    return -1;
}

// A tokenizer as the shards' encoder (shard_encoder), its message in err.
typedef struct {
    const tokenizer *t;
    char err[1024];
} tok_encoder;

static int encode_block(void *arg, const unsigned char *s, size_t len, shard_tokens *out) {
    tok_encoder *e = arg;
    int32_t *ids;
    size_t n;
    if (tokenizer_encode(e->t, (const char *)s, len, 0, &ids, &n, e->err, sizeof e->err)) return -1;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) rc = shard_tokens_push(out, (uint32_t)ids[i]);
    free(ids);
    return rc;
}

// Reads every file (or the Bible) and splits it into tr and va, tokenized by tok (NULL: bytes): 0,
// or 1 after a message.
static int read_split(const data_args *a, const tokenizer *tok, shard_tokens *tr, shard_tokens *va, size_t *block_no,
                      size_t *bytes) {
    tok_encoder te = {tok, ""};
    const shard_encoder enc = {encode_block, &te, tok && tokenizer_n_eos(tok) ? tokenizer_eos_id(tok, 0) : -1};
    const int n = a->nfiles;
    for (int f = 0; f < (n ? n : 1); f++) {
        FILE *in = n ? fopen(a->files[f], "rb") : popen(BIBLE_CMD, "r");
        if (!in) {
            fprintf(stderr, "mtac data: cannot open %s: %s\n", n ? a->files[f] : "the bible program", strerror(errno));
            return 1;
        }
        // fopen opens a directory, whose reads then fail: say what it is (a pipe, as from <(zcat ...),
        // is read like a file)
        struct stat sb;
        if (n && !fstat(fileno(in), &sb) && S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "mtac data: %s is a directory: give the text files in it\n", a->files[f]);
            fclose(in);
            return 1;
        }
        unsigned char *buf;
        size_t len;
        int rc = 0, bad = read_stream(in, &buf, &len);
        int st = n ? fclose(in) : pclose(in);
        if (bad || (!n && (st != 0 || len < 1000000))) {
            fprintf(stderr, "mtac data: could not read %s%s\n", n ? a->files[f] : "the King James Bible",
                    n ? "" : " (install Debian's bible-kjv: scripts/setup.sh does)");
            rc = 1;
        } else if (tok ? shard_split_encoded(&enc, buf, len, a->documents, a->every, block_no, tr, va)
                       : shard_split_text(buf, len, a->documents, a->every, block_no, tr, va)) {
            fprintf(stderr, "mtac data: %s%s%s\n", n ? a->files[f] : "the King James Bible", ": ",
                    te.err[0] ? te.err : "out of memory");
            rc = 1;
        }
        *bytes += len;
        free(buf);
        if (rc) return rc;
    }
    return 0;
}

int cmd_data(int argc, char **argv) {
    data_args a = {.fraction = -1, .dtype = -1};
    const int st = parse_args(argc, argv, &a);
    if (st >= 0) return st;
    const char *out = a.out;
    const int k = a.every;
    tokenizer *tok = NULL;
    if (a.tokenizer && !(tok = cli_open_tokenizer("data", a.tokenizer))) return 1;
    const int vocab = tok ? tokenizer_vocab_size(tok) : TOK_VOCAB;
    a.dtype = a.dtype == 1 || (a.dtype < 0 && vocab > 65536) ? SHARD_U32 : SHARD_U16;
    if (tok && !tokenizer_n_eos(tok))
        fprintf(stderr, "mtac data: warning: %s's tokenizer has no end-of-sequence token: nothing marks where documents "
                        "end\n", a.tokenizer);
    if (mkdir_p(out)) {
        fprintf(stderr, "mtac data: cannot create %s: %s\n", out, strerror(errno));
        tokenizer_free(tok);
        return 1;
    }
    shard_tokens tr = {0}, va = {0};
    size_t block_no = 0, bytes = 0;
    int rc = read_split(&a, tok, &tr, &va, &block_no, &bytes);
    tokenizer_free(tok);
    if (!rc && block_no < (size_t)k)
        fprintf(stderr, "mtac data: warning: the text makes only %zu block%s of about %d bytes, so none went to "
                        "validation (lower --val-every or raise --val-fraction)\n", block_no, block_no == 1 ? "" : "s", SHARD_BLOCK);
    char path[4096], err[512];
    if (!rc) {
        snprintf(path, sizeof path, "%s/train.bin", out);
        rc = shard_write(path, tr.t, tr.n, a.dtype, err, sizeof err);
        if (!rc) {
            snprintf(path, sizeof path, "%s/val.bin", out);
            rc = shard_write(path, va.t, va.n, a.dtype, err, sizeof err);
        }
        if (rc) fprintf(stderr, "mtac data: %s\n", err);
        else
            printf("mtac data: %zu bytes, 1 block in %d to validation -> %s/train.bin (%zu tokens), "
                   "%s/val.bin (%zu tokens)\n", bytes, k, out, tr.n, out, va.n);
    }
    free(tr.t);
    free(va.t);
    return rc ? 1 : 0;
}
