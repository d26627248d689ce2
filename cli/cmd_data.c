// cmd_data.c: `mtac data`: text files (default: the King James Bible) into byte-level token
// shards train.bin and val.bin (docs/shards.md).
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

enum { BLOCK = 16384 };

// The whole King James Bible, one verse a line (bible(1): "Gen1:1-Rev22:21 will dump the entire
// text"); -l10000 keeps it from wrapping lines at the terminal width.
static const char *BIBLE_CMD = "bible -l10000 gen1:1-rev22:21 </dev/null 2>/dev/null";

static void usage(FILE *f) {
    fprintf(f, "usage: mtac data --out DIR [--val-fraction F | --val-every K] [--dtype uint16|uint32] [FILE ...]\n\n"
               "Tokenizes text byte by byte (ids 0-255; 256 BOS, 257 EOS after each file, 258 PAD; vocab 259)\n"
               "and writes DIR/train.bin and DIR/val.bin (format: docs/shards.md). Without FILE it uses the\n"
               "King James Bible printed by Debian's `bible` program (package bible-kjv, installed by\n"
               "scripts/setup.sh).\n"
               "Split: the text is cut into blocks of about %d bytes at line ends; every K-th block goes to\n"
               "validation. --val-fraction F sets K = round(1/F) (1e-6 <= F <= 0.5; default 0.05, K = 20);\n"
               "--val-every K sets K itself (K >= 2).\n"
               "The split depends only on the text.\n"
               "  --dtype  token width in the shards (default uint16)\n", BLOCK);
}

// Appends a whole stream to a growing byte buffer.
static int slurp(FILE *f, unsigned char **buf, size_t *len, size_t *cap) {
    unsigned char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (*len + got > *cap) {
            size_t nc = (*cap + got) * 2;
            unsigned char *nb = realloc(*buf, nc);
            if (!nb) return -1;
            *buf = nb, *cap = nc;
        }
        memcpy(*buf + *len, chunk, got);
        *len += got;
    }
    return ferror(f) ? -1 : 0;
}

typedef struct {
    uint32_t *t;
    size_t n, cap;
} tokvec;

static int push(tokvec *v, uint32_t x) {
    if (v->n == v->cap) {
        size_t nc = v->cap ? 2 * v->cap : 1 << 16;
        uint32_t *nt = realloc(v->t, nc * sizeof *nt);
        if (!nt) return -1;
        v->t = nt, v->cap = nc;
    }
    v->t[v->n++] = x;
    return 0;
}

// Splits one document's bytes into blocks ending at a newline and sends every k-th to val.
static int split_doc(const unsigned char *s, size_t len, int k, size_t *block_no, tokvec *tr, tokvec *va) {
    size_t i = 0;
    while (i < len) {
        size_t end = i + BLOCK < len ? i + BLOCK : len;
        while (end < len && s[end - 1] != '\n') end++;
        tokvec *dst = (++*block_no % (size_t)k == 0) ? va : tr;
        uint32_t ids[256];
        for (size_t j = i; j < end; j += 256) {
            size_t m = tok_encode(s + j, end - j < 256 ? end - j : 256, ids);
            for (size_t q = 0; q < m; q++)
                if (push(dst, ids[q])) return -1;
        }
        i = end;
    }
    return push(tr, TOK_EOS) || push(va, TOK_EOS);
}

int cmd_data(int argc, char **argv) {
    const char *out = NULL;
    int k = 20, dtype = SHARD_U16, nfiles = 0;
    const char *split_flag = NULL;  // --val-fraction or --val-every: one of them, as the usage says
    const char *files[256];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strncmp(a, "--", 2)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "mtac data: %s needs a value (see --help)\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if ((!strcmp(a, "--val-fraction") || !strcmp(a, "--val-every")) && split_flag) {
                fprintf(stderr, "mtac data: %s and %s both set the split: give one (see --help)\n", split_flag, a);
                return 2;
            }
            if (!strcmp(a, "--out")) out = v;
            else if (!strcmp(a, "--val-fraction")) {
                split_flag = a;
                char *end;
                double fr = strtod(v, &end);
                if (end == v || *end || !(fr >= 1e-6 && fr <= 0.5)) {
                    fprintf(stderr, "mtac data: --val-fraction expects a number in [1e-6, 0.5], got '%s'\n", v);
                    return 2;
                }
                k = (int)(1.0 / fr + 0.5);
            } else if (!strcmp(a, "--val-every")) {
                split_flag = a;
                if (!cli_parse_pos_int(a, v, &k)) return 2;
                if (k < 2) {
                    fprintf(stderr, "mtac data: --val-every must be >= 2\n");
                    return 2;
                }
            } else if (!strcmp(a, "--dtype")) {
                if (!strcmp(v, "uint16")) dtype = SHARD_U16;
                else if (!strcmp(v, "uint32")) dtype = SHARD_U32;
                else {
                    fprintf(stderr, "mtac data: --dtype expects uint16 or uint32, got '%s'\n", v);
                    return 2;
                }
            } else {
                fprintf(stderr, "mtac data: unknown option '%s' (see --help)\n", a);
                return 2;
            }
        } else if (nfiles < 256) {
            files[nfiles++] = a;
        } else {
            fprintf(stderr, "mtac data: at most 256 files\n");
            return 2;
        }
    }
    if (!out) {
        fprintf(stderr, "mtac data: --out DIR is required (see --help)\n");
        return 2;
    }
    if (mkdir_p(out)) {
        fprintf(stderr, "mtac data: cannot create %s: %s\n", out, strerror(errno));
        return 1;
    }
    tokvec tr = {0}, va = {0};
    size_t block_no = 0, bytes = 0;
    int rc = 0;
    for (int f = 0; f < (nfiles ? nfiles : 1) && !rc; f++) {
        FILE *in = nfiles ? fopen(files[f], "rb") : popen(BIBLE_CMD, "r");
        if (!in) {
            fprintf(stderr, "mtac data: cannot open %s: %s\n", nfiles ? files[f] : "the bible program", strerror(errno));
            rc = 1;
            break;
        }
        unsigned char *buf = NULL;
        size_t len = 0, cap = 0;
        int bad = slurp(in, &buf, &len, &cap);
        int st = nfiles ? fclose(in) : pclose(in);
        if (bad || (!nfiles && (st != 0 || len < 1000000))) {
            fprintf(stderr, "mtac data: could not read %s%s\n", nfiles ? files[f] : "the King James Bible",
                    nfiles ? "" : " (install Debian's bible-kjv: scripts/setup.sh does)");
            rc = 1;
        } else if (split_doc(buf, len, k, &block_no, &tr, &va)) {
            fprintf(stderr, "mtac data: out of memory\n");
            rc = 1;
        }
        bytes += len;
        free(buf);
    }
    if (!rc && block_no < (size_t)k)
        fprintf(stderr, "mtac data: warning: the text makes only %zu block%s of about %d bytes, so none went to "
                        "validation (lower --val-every or raise --val-fraction)\n", block_no, block_no == 1 ? "" : "s", BLOCK);
    char path[4096], err[512];
    if (!rc) {
        snprintf(path, sizeof path, "%s/train.bin", out);
        rc = shard_write(path, tr.t, tr.n, dtype, err, sizeof err);
        if (!rc) {
            snprintf(path, sizeof path, "%s/val.bin", out);
            rc = shard_write(path, va.t, va.n, dtype, err, sizeof err);
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
