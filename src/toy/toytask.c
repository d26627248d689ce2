// toytask.c: see toytask.h.
#include "toy/toytask.h"
#include "util/rng.h"
#include "util/errmsg.h"

#include <string.h>

toy_config toy_config_paper(void) {
    toy_config c = {52, 5, 2, 26};
    return c;
}

int toy_row_len(const toy_config *c) {
    return 1 + c->n_blocks * c->block_len + (c->n_blocks - 1) + 1 + c->query_len + c->block_len + 1;
}

static int below(uint64_t *s, int n) { return (int)(splitmix64(s) % (uint64_t)n); }

int toy_config_check(const toy_config *c, char *err, size_t n) {
    if (c->alphabet < 2 || c->alphabet > 26) return errmsg(err, n, "alphabet size %d must be in [2, 26]", c->alphabet);
    if (c->block_len < 1 || c->block_len > c->alphabet)
        return errmsg(err, n, "block length %d must be in [1, alphabet=%d]", c->block_len, c->alphabet);
    if (c->query_len < 1 || c->query_len > c->block_len)
        return errmsg(err, n, "query length %d must be in [1, block length=%d]", c->query_len, c->block_len);
    if (c->n_blocks < 1 || c->n_blocks > TOY_MAX_BLOCKS)
        return errmsg(err, n, "number of blocks %d must be in [1, %d]", c->n_blocks, TOY_MAX_BLOCKS);
    // Distractors are distinct ordered blocks that do not hold every query letter: there are
    // P(A,N) - C(A-L,N-L) * N! of them. Ask for at most half, so rejection sampling ends quickly.
    double perms = 1, with_query = 1;
    for (int i = 0; i < c->block_len; i++) perms *= c->alphabet - i;
    for (int i = 0; i < c->block_len - c->query_len; i++) with_query *= (double)(c->alphabet - c->query_len - i) / (i + 1);
    for (int i = 1; i <= c->block_len; i++) with_query *= i;
    if (perms - with_query < 2.0 * (c->n_blocks - 1))
        return errmsg(err, n, "only %.0f distinct distractor blocks exist for %d blocks: use a larger alphabet or fewer blocks",
                      perms - with_query, c->n_blocks);
    return 0;
}

// k distinct letters in random order (partial Fisher-Yates over the alphabet).
static void draw_letters(int alphabet, int k, uint64_t *rng, int *out) {
    int pool[26];
    for (int i = 0; i < alphabet; i++) pool[i] = i;
    for (int i = 0; i < k; i++) {
        int j = i + below(rng, alphabet - i), t = pool[i];
        pool[i] = pool[j], pool[j] = t;
        out[i] = pool[i];
    }
}

static int holds_all(const int *block, int N, const int *q, int L) {
    for (int a = 0; a < L; a++) {
        int found = 0;
        for (int b = 0; b < N && !found; b++) found = block[b] == q[a];
        if (!found) return 0;
    }
    return 1;
}

int toy_generate(const toy_config *c, uint64_t *rng, int *row) {
    const int N = c->block_len, L = c->query_len, nb = c->n_blocks;
    int blocks[TOY_MAX_BLOCKS][26], order[TOY_MAX_BLOCKS], query[26];
    draw_letters(c->alphabet, N, rng, blocks[0]);  // block 0 is the target
    int pick[26];
    draw_letters(N, L, rng, pick);
    for (int a = 0; a < L; a++) query[a] = blocks[0][pick[a]];
    for (int b = 1; b < nb; b++) {
        for (;;) {
            draw_letters(c->alphabet, N, rng, blocks[b]);
            if (holds_all(blocks[b], N, query, L)) continue;
            int dup = 0;
            for (int e = 0; e < b && !dup; e++) dup = !memcmp(blocks[e], blocks[b], (size_t)N * sizeof(int));
            if (!dup) break;
        }
    }
    for (int b = 0; b < nb; b++) order[b] = b;
    for (int b = nb - 1; b > 0; b--) {
        int j = below(rng, b + 1), t = order[b];
        order[b] = order[j], order[j] = t;
    }
    int p = 0;
    row[p++] = TOY_BOS;
    for (int b = 0; b < nb; b++) {
        if (b) row[p++] = TOY_DOT;
        for (int k = 0; k < N; k++) row[p++] = blocks[order[b]][k];
    }
    row[p++] = TOY_HASH;
    for (int a = 0; a < L; a++) row[p++] = query[a];
    for (int k = 0; k < N; k++) row[p++] = blocks[0][k];
    row[p++] = TOY_EOS;
    return 0;
}

void toy_example(const toy_config *c, const int *row, int *tokens, int *targets) {
    const int R = toy_row_len(c), answer = R - 1 - c->block_len;  // index of the first answer letter
    for (int t = 0; t < R - 1; t++) {
        tokens[t] = row[t];
        targets[t] = t + 1 >= answer ? row[t + 1] : -1;
    }
}

char toy_token_char(int v) {
    return v >= 0 && v < 26 ? (char)('a' + v) : v == TOY_DOT ? '.' : v == TOY_HASH ? '#' : v == TOY_BOS ? '^' : v == TOY_EOS ? '$' : '_';
}

void toy_row_text(const toy_config *c, const int *row, char *buf, size_t n) {
    const int R = toy_row_len(c), answer = R - 1 - c->block_len;
    size_t k = 0;
    for (int t = 0; t < R && k + 2 < n; t++) {
        if (t == answer) buf[k++] = '>';
        buf[k++] = toy_token_char(row[t]);
    }
    buf[k < n ? k : n - 1] = '\0';
}

uint64_t toy_row_hash(const toy_config *c, const int *row) {
    const int upto = toy_row_len(c) - 1 - c->block_len;  // blocks and query, not the answer
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int t = 0; t < upto; t++) h = (h ^ (uint64_t)row[t]) * 0x100000001B3ULL;
    return h;
}
