// toytask.h: the paper's toy task (docs/spec.md section 4): find the block of letters that
// contains all the query letters, and copy it.
//   row = BOS, blocks joined by '.', '#', query letters, target block letters, EOS
// With the paper's setting (52 blocks of 5 letters, query of 2, alphabet a-z) a row holds 321
// tokens; the loss applies to the target letters and EOS only.
#ifndef MTAC_TOYTASK_H
#define MTAC_TOYTASK_H

#include <stddef.h>
#include <stdint.h>

enum { TOY_DOT = 26, TOY_HASH = 27, TOY_PAD = 28, TOY_BOS = 29, TOY_EOS = 30, TOY_VOCAB = 32, TOY_MAX_BLOCKS = 256 };

typedef struct {
    int n_blocks;   // blocks per sample (52)
    int block_len;  // N, distinct letters per block (5)
    int query_len;  // L, query letters drawn from the target block (2)
    int alphabet;   // letters a.. (26); ids 0..alphabet-1
} toy_config;

toy_config toy_config_paper(void);
// Checks that a sample can be drawn (sizes, L <= N <= alphabet, enough distinct blocks).
int toy_config_check(const toy_config *c, char *err, size_t n);
// Tokens in a row: 1 + n_blocks*N + (n_blocks-1) + 1 + L + N + 1.
int toy_row_len(const toy_config *c);

// Draws one sample into row (toy_row_len tokens) from the generator state *rng. The target block
// is chosen first, the query is L of its letters in random order, no other block holds all the
// query letters, no two blocks are equal, and the blocks are shuffled. The config must pass
// toy_config_check. Returns 0.
int toy_generate(const toy_config *c, uint64_t *rng, int *row);

// The training view of a row: tokens = row[0..R-2], targets = row[1..R-1] with every target
// except the answer letters and EOS set to -1 (ignored by the loss). R = toy_row_len.
void toy_example(const toy_config *c, const int *row, int *tokens, int *targets);

// The character shown for a token: a-z, '.', '#', '^' BOS, '$' EOS, '_' PAD.
char toy_token_char(int id);

// A row as text ("^abcde.fghij...#ba>abcde$": ^ BOS, > the answer, $ EOS), for inspection.
void toy_row_text(const toy_config *c, const int *row, char *buf, size_t n);

// A 64-bit fingerprint of a row's input part (blocks and query), to keep train and test apart.
uint64_t toy_row_hash(const toy_config *c, const int *row);

#endif
