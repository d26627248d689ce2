// bpe.c: the vocabulary's map, the merge table, and the merge engine: byte-level BPE by rank,
// SentencePiece BPE by rank (tokenizer.json) or by score (GGUF "llama", as llama.cpp merges).
#include "tok/tok_internal.h"

#include "util/fnv1a.h"

#include <stdlib.h>
#include <string.h>

static size_t pow2_above(size_t n) {
    size_t c = 16;
    while (c < 2 * n) c *= 2;
    return c;
}

int tok_map_build(tokenizer *t) {
    free(t->map.slot);
    size_t cap = pow2_above((size_t)t->n_vocab);
    t->map.slot = calloc(cap, sizeof *t->map.slot);
    if (!t->map.slot) return -1;
    t->map.mask = cap - 1;
    // Later ids do not replace earlier ones with the same text (an added token may repeat a piece).
    for (int i = 0; i < t->n_vocab; i++) {
        if (!t->piece[i]) continue;
        size_t h = fnv1a(FNV1A_START, t->piece[i], t->piece_len[i]) & t->map.mask;
        for (;; h = (h + 1) & t->map.mask) {
            uint32_t s = t->map.slot[h];
            if (!s) {
                t->map.slot[h] = (uint32_t)i + 1;
                break;
            }
            if (t->piece_len[s - 1] == t->piece_len[i] && memcmp(t->piece[s - 1], t->piece[i], t->piece_len[i]) == 0)
                break;
        }
    }
    return 0;
}

int tok_map_get(const tokenizer *t, const char *s, size_t len) {
    if (!t->map.slot) return -1;
    size_t h = fnv1a(FNV1A_START, s, len) & t->map.mask;
    for (;; h = (h + 1) & t->map.mask) {
        uint32_t v = t->map.slot[h];
        if (!v) return -1;
        if (t->piece_len[v - 1] == len && memcmp(t->piece[v - 1], s, len) == 0) return (int)v - 1;
    }
}

static size_t pair_hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

int tok_merges_init(tok_merges *m, size_t n) {
    size_t cap = pow2_above(n);
    m->key = calloc(cap, sizeof *m->key);
    m->rank = malloc(cap * sizeof *m->rank);
    m->result = malloc(cap * sizeof *m->result);
    m->mask = cap - 1;
    return m->key && m->rank && m->result ? 0 : -1;
}

// The first (lowest-ranked) merge of a pair wins, as in Hugging Face's BPE.
void tok_merges_put(tok_merges *m, int left, int right, int rank, int result) {
    uint64_t k = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    for (size_t h = pair_hash(k) & m->mask;; h = (h + 1) & m->mask) {
        if (m->key[h] == k) return;
        if (!m->key[h]) {
            m->key[h] = k;
            m->rank[h] = rank;
            m->result[h] = result;
            return;
        }
    }
}

int tok_merges_get(const tok_merges *m, int left, int right, int *result) {
    if (!m->key) return -1;
    uint64_t k = ((uint64_t)(uint32_t)left << 32 | (uint32_t)right) + 1;
    for (size_t h = pair_hash(k) & m->mask;; h = (h + 1) & m->mask) {
        if (m->key[h] == k) {
            *result = m->result[h];
            return m->rank[h];
        }
        if (!m->key[h]) return -1;
    }
}

void tok_merges_free(tok_merges *m) {
    free(m->key);
    free(m->rank);
    free(m->result);
    m->key = NULL;
    m->rank = m->result = NULL;
}

void bpe_cache_free(tokenizer *t) { (void)t; }
