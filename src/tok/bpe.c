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


// ---- the merge engine ----

typedef struct {
    int32_t id, prev, next;
} sym;
typedef struct {
    int32_t rank, pos, left, right;
} cand;

// A min-heap of candidate merges by (rank, position): the lowest rank first, the leftmost on ties.
static int cand_less(const cand *a, const cand *b) { return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos); }

static void heap_push(cand *h, size_t *n, cand c) {
    size_t i = (*n)++;
    while (i > 0 && cand_less(&c, &h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static cand heap_pop(cand *h, size_t *n) {
    cand top = h[0], last = h[--*n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && cand_less(&h[c + 1], &h[c])) c++;
        if (!cand_less(&h[c], &last)) break;
        h[i] = h[c];
        i = c;
    }
    if (*n) h[i] = last;
    return top;
}

static void try_pair(const tokenizer *t, const sym *s, int32_t l, cand *h, size_t *nh) {
    int32_t r = s[l].next;
    if (r < 0) return;
    int res, rank = tok_merges_get(&t->merges, s[l].id, s[r].id, &res);
    if (rank >= 0) heap_push(h, nh, (cand){rank, l, s[l].id, s[r].id});
}

// Merges the symbols' ids in place (n of them); returns how many remain, in order, in ids.
static size_t merge_all(const tokenizer *t, int32_t *ids, size_t n) {
    if (n < 2) return n;
    sym *s = malloc(n * sizeof *s);
    cand *h = malloc(n * sizeof *h);  // at most one live candidate per symbol, plus stale ones: grows below
    size_t cap = n, nh = 0;
    if (!s || !h) {
        free(s);
        free(h);
        return (size_t)-1;
    }
    for (size_t i = 0; i < n; i++) s[i] = (sym){ids[i], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1};
    for (size_t i = 0; i + 1 < n; i++) try_pair(t, s, (int32_t)i, h, &nh);
    while (nh) {
        cand c = heap_pop(h, &nh);
        int32_t l = c.pos, r = s[l].next;
        // stale: the left symbol was merged away or changed, or its right neighbour did
        if (s[l].id != c.left || r < 0 || s[r].id != c.right) continue;
        int res = -1;
        tok_merges_get(&t->merges, c.left, c.right, &res);
        s[l].id = res;
        s[l].next = s[r].next;
        if (s[r].next >= 0) s[s[r].next].prev = l;
        s[r].id = -1;
        if (nh + 2 > cap) {
            cand *g = realloc(h, 2 * cap * sizeof *h);
            if (!g) {
                free(s);
                free(h);
                return (size_t)-1;
            }
            h = g;
            cap *= 2;
        }
        if (s[l].prev >= 0) try_pair(t, s, s[l].prev, h, &nh);
        try_pair(t, s, l, h, &nh);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = s[i].next) ids[k++] = s[i].id;
    free(s);
    free(h);
    return k;
}

// ---- the word cache (byte-level BPE: pre-tokens repeat) ----

#define CACHE_SLOTS 65536
#define CACHE_MAX_WORD 48
#define CACHE_MAX_IDS 24
typedef struct {
    uint16_t len, n_ids;
    unsigned char word[CACHE_MAX_WORD];
    int32_t ids[CACHE_MAX_IDS];
} cache_entry;
struct tok_cache {
    cache_entry e[CACHE_SLOTS];
};

void bpe_cache_free(tokenizer *t) {
    free(t->cache);
    t->cache = NULL;
}

// The initial symbols of a word: byte-level, each byte's character; otherwise each UTF-8
// character's token, or its bytes' <0xXX> tokens (byte fallback), or unk.
static int initial_symbols(const tokenizer *t, const unsigned char *w, size_t len, tok_ids *a) {
    if (t->kind == TOKENIZER_BPE_BYTES) {
        for (size_t j = 0; j < len; j++)
            if (t->byte_id[w[j]] >= 0 && tok_ids_push(a, t->byte_id[w[j]])) return -1;
        return 0;
    }
    int prev_unk = 0;
    for (size_t j = 0; j < len;) {
        int k = utf8_len(w + j, len - j, NULL);
        int id = tok_map_get(t, (const char *)w + j, (size_t)k);
        if (id < 0 && t->byte_fallback) {
            int all = 1;
            for (int b = 0; b < k; b++) all &= t->byte_id[w[j + b]] >= 0;
            if (all) {
                for (int b = 0; b < k; b++)
                    if (tok_ids_push(a, t->byte_id[w[j + b]])) return -1;
                j += (size_t)k;
                prev_unk = 0;
                continue;
            }
        }
        if (id >= 0) {
            if (tok_ids_push(a, id)) return -1;
            prev_unk = 0;
        } else if (t->unk_id >= 0 && !(prev_unk && t->fuse_unk)) {
            if (tok_ids_push(a, t->unk_id)) return -1;
            prev_unk = 1;
        }
        j += (size_t)k;
    }
    return 0;
}

int bpe_encode_word(tokenizer *t, const unsigned char *w, size_t len, tok_ids *out) {
    cache_entry *ce = NULL;
    if (t->kind == TOKENIZER_BPE_BYTES && len <= CACHE_MAX_WORD) {
        if (!t->cache) t->cache = calloc(1, sizeof *t->cache);
        if (t->cache) {
            ce = &t->cache->e[fnv1a(FNV1A_START, w, len) & (CACHE_SLOTS - 1)];
            if (ce->len == len && ce->n_ids && memcmp(ce->word, w, len) == 0) {
                for (int i = 0; i < ce->n_ids; i++)
                    if (tok_ids_push(out, ce->ids[i])) return -1;
                return 0;
            }
        }
    }
    size_t start = out->n;
    int whole = -1;
    if (t->ignore_merges && t->kind == TOKENIZER_BPE_BYTES) {
        // Llama 3: a word that is a token is that token, whatever the merges would make of it.
        char buf[2 * 256];
        if (len <= 256) {
            size_t k = 0;
            for (size_t j = 0; j < len; j++) k += (size_t)bytelevel_char(w[j], buf + k);
            whole = tok_map_get(t, buf, k);
        }
    }
    if (whole >= 0) {
        if (tok_ids_push(out, whole)) return -1;
    } else {
        if (initial_symbols(t, w, len, out)) return -1;
        if (out->n > start) {  // a word may give no symbol (out->v still NULL): nothing to merge
            size_t k = merge_all(t, out->v + start, out->n - start);
            if (k == (size_t)-1) return -1;
            out->n = start + k;
        }
    }
    if (ce && out->n - start <= CACHE_MAX_IDS) {
        ce->len = (uint16_t)len;
        memcpy(ce->word, w, len);
        ce->n_ids = (uint16_t)(out->n - start);
        if (ce->n_ids) memcpy(ce->ids, out->v + start, (out->n - start) * sizeof *out->v);
    }
    return 0;
}
