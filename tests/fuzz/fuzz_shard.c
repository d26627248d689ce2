// fuzz_shard.c: token shards (src/data/shard.c, shard_read), the training data `mtac train` and
// `mtac eval` read, and the batch sampler over what was read (src/data/dataloader.c). The input
// is the shard file. A shard it accepts must hold ids its dtype can hold, write back to the same
// bytes' tokens, and feed the sampler windows inside the token array.
#include "data/dataloader.h"
#include "data/shard.h"
#include "fuzz_util.h"

#include <stdlib.h>
#include <string.h>

// Draws batches from the tokens as training (random windows) and evaluation (in order) do.
static void sample(const shard *s) {
    if (s->n < 2) return;
    const int B = 3, T = s->n - 1 < 5 ? (int)s->n - 1 : 5;
    dataloader dl;
    char err[256];
    fuzz_require(dataloader_open_tokens(&dl, s->tokens, s->n, B, T, s->n, err, sizeof err) == 0, "sampler opens");
    int tok[15], tgt[15];
    for (int i = 0; i < 4; i++) dataloader_next(&dl, tok, tgt);
    for (int i = 0; i < 8 && dataloader_next_seq(&dl, tok, tgt) > 0; i++) {}
    dataloader_close(&dl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    shard s, r;
    char err[512];
    if (shard_read(fuzz_file(data, size), &s, err, sizeof err)) return 0;
    fuzz_require(s.dtype == SHARD_U16 || s.dtype == SHARD_U32, "dtype");
    for (size_t i = 0; s.dtype == SHARD_U16 && i < s.n; i++) fuzz_require(s.tokens[i] <= 0xFFFF, "uint16 ids");
    const char *path = fuzz_dir_path("rt.bin");
    fuzz_require(shard_write(path, s.tokens, s.n, s.dtype, err, sizeof err) == 0, "shard_write accepts what shard_read gave");
    fuzz_require(shard_read(path, &r, err, sizeof err) == 0, "shard_read accepts what shard_write wrote");
    fuzz_require(r.n == s.n && r.dtype == s.dtype && !memcmp(r.tokens, s.tokens, s.n * sizeof *s.tokens), "round trip");
    shard_free(&r);
    sample(&s);
    shard_free(&s);
    return 0;
}
