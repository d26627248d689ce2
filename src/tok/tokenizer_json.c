// tokenizer_json.c: tokenizers from Hugging Face's tokenizer.json, tokenizer_config.json and
// generation_config.json (read with cJSON), and from a spec (GGUF). tokenizer_save.c writes them.
#include "tok/tok_internal.h"

#include "io/fsutil.h"
#include "util/errmsg.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JSON_BYTES ((size_t)1 << 30)

// ---- building the tables ----

static tokenizer *tok_new(tokenizer_kind kind, int n_vocab) {
    tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kind = kind;
    t->n_vocab = n_vocab;
    t->piece = calloc((size_t)n_vocab + 1, sizeof *t->piece);
    t->piece_len = calloc((size_t)n_vocab + 1, sizeof *t->piece_len);
    t->bos_id = t->pad_id = t->unk_id = -1;
    for (int b = 0; b < 256; b++) t->byte_id[b] = -1;
    if (!t->piece || !t->piece_len) {
        tokenizer_free(t);
        return NULL;
    }
    return t;
}

static int set_piece(tokenizer *t, int id, const char *s) {
    free(t->piece[id]);
    t->piece[id] = strdup(s);
    if (!t->piece[id]) return -1;
    t->piece_len[id] = (uint32_t)strlen(s);
    return 0;
}

static int add_merge(tokenizer *t, const char *where, int rank, const char *a, size_t al, const char *b, size_t bl,
                     char *err, size_t n) {
    int l = tok_map_get(t, a, al), r = tok_map_get(t, b, bl);
    char *ab = malloc(al + bl + 1);
    if (!ab) return errmsg(err, n, "out of memory");
    memcpy(ab, a, al);
    memcpy(ab + al, b, bl);
    int res = tok_map_get(t, ab, al + bl);
    free(ab);
    if (l < 0 || r < 0 || res < 0)
        return errmsg(err, n, "%s[%d] \"%.*s %.*s\": %s not in the vocabulary", where, rank, (int)al, a, (int)bl,
                      b, l < 0 ? "its left token" : r < 0 ? "its right token" : "the merged token");
    tok_merges_put(&t->merges, l, r, rank, res);
    t->merge_left[rank] = l;
    t->merge_right[rank] = r;
    return 0;
}

// The byte table: byte-level, the id of each byte's character; SPM, of "<0xXX>".
static void fill_byte_ids(tokenizer *t) {
    for (int b = 0; b < 256; b++) {
        char s[8];
        size_t k;
        if (t->kind == TOKENIZER_BPE_BYTES) {
            k = (size_t)bytelevel_char((unsigned char)b, s);
        } else {
            snprintf(s, sizeof s, "<0x%02X>", b);
            k = 6;
        }
        t->byte_id[b] = tok_map_get(t, s, k);
    }
}

static int add_added(tokenizer *t, int id, const char *content, int special, int lstrip, int rstrip, int single_word,
                     int normalized) {
    if (!*content) return 0;  // an empty token never matches
    tok_added *a = realloc(t->added, ((size_t)t->n_added + 1) * sizeof *a);
    if (!a) return -1;
    t->added = a;
    a = &t->added[t->n_added];
    *a = (tok_added){id, strdup(content), strlen(content), special, lstrip, rstrip, single_word, normalized};
    if (!a->content) return -1;
    t->n_added++;
    t->added_first[(unsigned char)content[0]] = 1;
    if (single_word && !t->word_re && !(t->word_re = word_re_compile())) return -1;
    return 0;
}

// The SPM decoder (Llama 2's tokenizer.json): "▁" to space, <0xXX> to bytes, the leading space off.
static void spm_decoder(tokenizer *t, int strip) {
    t->dec[t->n_dec++] = (tok_dec){.kind = DEC_REPLACE, .from = strdup(TOK_SPACE_MARK), .to = strdup(" ")};
    t->dec[t->n_dec++] = (tok_dec){.kind = DEC_BYTEFALLBACK};
    t->dec[t->n_dec++] = (tok_dec){.kind = DEC_FUSE};
    if (strip) t->dec[t->n_dec++] = (tok_dec){.kind = DEC_STRIP, .content = strdup(" "), .start = 1};
}

// ---- from a spec (GGUF) ----

typedef struct {
    int32_t id;
    float score;
} scored;
static int by_score_desc(const void *a, const void *b) {
    const scored *x = a, *y = b;
    return x->score > y->score ? -1 : x->score < y->score ? 1 : (x->id > y->id) - (x->id < y->id);
}

// SPM by score (llama.cpp): any two adjacent pieces whose text is a token merge, the best score
// first. The table: every split of every token into two tokens, ranked by the token's score.
static int spm_merges_from_scores(tokenizer *t, char *err, size_t n) {
    scored *o = malloc((size_t)t->n_vocab * sizeof *o);
    if (!o) return errmsg(err, n, "out of memory");
    for (int i = 0; i < t->n_vocab; i++) o[i] = (scored){i, t->scores[i]};
    qsort(o, (size_t)t->n_vocab, sizeof *o, by_score_desc);
    // count the pairs first, then fill by the tokens' score order (equal scores: equal ranks)
    size_t cap = 0;
    for (int pass = 0; pass < 2; pass++) {
        int rank = -1, n_m = 0;
        float last = 0;
        for (int k = 0; k < t->n_vocab; k++) {
            int id = o[k].id;
            if (t->types && t->types[id] != 1) continue;  // only normal tokens are merge results
            const char *p = t->piece[id];
            size_t len = t->piece_len[id];
            if (k == 0 || o[k].score != last) rank++;
            last = o[k].score;
            for (size_t cut = 1; cut < len; cut++) {
                if (((unsigned char)p[cut] & 0xc0) == 0x80) continue;
                int l = tok_map_get(t, p, cut), r = tok_map_get(t, p + cut, len - cut);
                if (l < 0 || r < 0) continue;
                if (pass == 1) {
                    tok_merges_put(&t->merges, l, r, rank, id);
                    t->merge_left[n_m] = l;
                    t->merge_right[n_m] = r;
                }
                n_m++;
            }
        }
        if (pass == 0) {
            cap = (size_t)n_m;
            t->merge_left = malloc((cap + 1) * sizeof *t->merge_left);
            t->merge_right = malloc((cap + 1) * sizeof *t->merge_right);
            if (!t->merge_left || !t->merge_right || tok_merges_init(&t->merges, cap)) {
                free(o);
                return errmsg(err, n, "out of memory");
            }
        } else {
            t->n_merges = n_m;
        }
    }
    free(o);
    return 0;
}

static int set_str(char **dst, const char *s) {
    free(*dst);
    *dst = s ? strdup(s) : NULL;
    return s && !*dst ? -1 : 0;
}

static int spec_check(const tokenizer_spec *s, char *err, size_t n) {
    if (s->kind != TOKENIZER_BPE_BYTES && s->kind != TOKENIZER_BPE_SPM)
        return errmsg(err, n, "tokenizer spec: kind must be byte-level BPE (gpt2) or SentencePiece BPE (llama)");
    if (s->n_vocab <= 0 || !s->tokens) return errmsg(err, n, "tokenizer spec: no tokens");
    if (s->kind == TOKENIZER_BPE_SPM && !s->scores && s->n_merges <= 0)
        return errmsg(err, n, "tokenizer spec: a SentencePiece tokenizer needs scores or merges");
    return 0;
}

// The tokens' texts, types and scores, and the text-to-id map.
static int spec_vocab(tokenizer *t, const tokenizer_spec *s, char *err, size_t n) {
    for (int i = 0; i < s->n_vocab; i++) {
        if (!s->tokens[i]) return errmsg(err, n, "tokenizer spec: token %d has no text", i);
        if (set_piece(t, i, s->tokens[i])) return errmsg(err, n, "out of memory");
    }
    if (s->types && !(t->types = malloc((size_t)s->n_vocab * sizeof *t->types))) return errmsg(err, n, "out of memory");
    if (s->types) memcpy(t->types, s->types, (size_t)s->n_vocab * sizeof *t->types);
    if (s->scores && !(t->scores = malloc((size_t)s->n_vocab * sizeof *t->scores))) return errmsg(err, n, "out of memory");
    if (s->scores) memcpy(t->scores, s->scores, (size_t)s->n_vocab * sizeof *t->scores);
    return tok_map_build(t) ? errmsg(err, n, "out of memory") : 0;
}

// The spec's ranked merges ("left right"), or SentencePiece's derived from the scores.
static int spec_merges(tokenizer *t, const tokenizer_spec *s, char *err, size_t n) {
    if (s->n_merges <= 0) return s->kind == TOKENIZER_BPE_SPM ? spm_merges_from_scores(t, err, n) : 0;
    t->merge_left = malloc((size_t)s->n_merges * sizeof *t->merge_left);
    t->merge_right = malloc((size_t)s->n_merges * sizeof *t->merge_right);
    if (!t->merge_left || !t->merge_right || tok_merges_init(&t->merges, (size_t)s->n_merges))
        return errmsg(err, n, "out of memory");
    t->n_merges = s->n_merges;
    for (int r = 0; r < s->n_merges; r++) {
        const char *m = s->merges[r], *sp = m ? strchr(m, ' ') : NULL;
        if (!sp) return errmsg(err, n, "tokenizer spec: merge %d \"%s\" is not two tokens", r, m ? m : "(null)");
        if (add_merge(t, "tokenizer spec: merges", r, m, (size_t)(sp - m), sp + 1, strlen(sp + 1), err, n)) return -1;
    }
    return 0;
}

// The pre-tokenizer and decoder steps of the kind, the byte tokens, and the added tokens.
static int spec_steps(tokenizer *t, const tokenizer_spec *s, char *err, size_t n) {
    if (s->kind == TOKENIZER_BPE_BYTES) {
        // without tokenizer.ggml.pre llama.cpp uses its "default" (and warns)
        const char *pre = s->pre ? s->pre : "default";
        if (pre_from_name(t, pre, err, n)) return -1;
        if (set_str(&t->pre_name, pre)) return errmsg(err, n, "out of memory");
        t->dec[t->n_dec++] = (tok_dec){.kind = DEC_BYTELEVEL};
    } else {
        t->norm_replace_space = 1;
        t->norm_prepend = !s->no_space_prefix;
        spm_decoder(t, !s->no_space_prefix);
    }
    fill_byte_ids(t);
    if (s->kind == TOKENIZER_BPE_SPM) t->byte_fallback = 1;
    // llama.cpp matches control, user-defined and unknown tokens in the text
    for (int i = 0; s->types && i < s->n_vocab; i++)
        if ((s->types[i] == 2 || s->types[i] == 3 || s->types[i] == 4) &&
            add_added(t, i, t->piece[i], s->types[i] != 4, 0, 0, 0, 0))
            return errmsg(err, n, "out of memory");
    return 0;
}

// The special tokens' ids and texts, the chat template.
static int spec_specials(tokenizer *t, const tokenizer_spec *s, char *err, size_t n) {
    t->bos_id = s->bos_id;
    t->unk_id = s->unk_id;
    t->pad_id = s->pad_id;
    t->add_bos = s->add_bos;
    t->add_eos = s->add_eos;
    if (s->eos_id >= 0) t->eos[t->n_eos++] = s->eos_id;
    if (set_str(&t->chat_template, s->chat_template)) return errmsg(err, n, "out of memory");
    for (int i = 0; i < 4; i++) {
        int id = i == 0 ? t->bos_id : i == 1 ? s->eos_id : i == 2 ? t->pad_id : t->unk_id;
        char **dst = i == 0 ? &t->bos_token : i == 1 ? &t->eos_token : i == 2 ? &t->pad_token : &t->unk_token;
        if (id >= s->n_vocab || id < -1)
            return errmsg(err, n, "tokenizer spec: special token id %d out of range (vocabulary %d)", id, s->n_vocab);
        if (id >= 0 && set_str(dst, t->piece[id])) return errmsg(err, n, "out of memory");
    }
    return 0;
}

tokenizer *tokenizer_from_spec(const tokenizer_spec *s, char *err, size_t n) {
    if (spec_check(s, err, n)) return NULL;
    tokenizer *t = tok_new(s->kind, s->n_vocab);
    if (!t) {
        errmsg(err, n, "out of memory");
        return NULL;
    }
    if (spec_vocab(t, s, err, n) || spec_merges(t, s, err, n) || spec_steps(t, s, err, n) || spec_specials(t, s, err, n)) {
        tokenizer_free(t);
        return NULL;
    }
    return t;
}

// ---- tokenizer.json ----

static int jbool(const cJSON *o, const char *k, int def) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : def;
}

static const char *jstr(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

// A special token of tokenizer_config.json: a string, or an object with "content".
static const char *token_name(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsObject(v)) return jstr(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

// One step of tokenizer.json whose "type" is not "Sequence" (field names it in messages).
typedef int (*step_loader)(tokenizer *t, const char *file, const char *field, const cJSON *p, const char *type, char *err,
                           size_t n);
// A kind of step: its Sequence's list, its loader, and whether a null step means none.
typedef struct {
    const char *list;
    step_loader load;
    int null_ok;
} step_kind;

// The step p of kind k: a Sequence item by item (named field.list[i]), else through k->load.
static int load_step(tokenizer *t, const char *file, const char *field, const cJSON *p, const step_kind *k, char *err,
                     size_t n) {
    if (k->null_ok && (!p || cJSON_IsNull(p))) return 0;
    const char *type = jstr(p, "type");
    if (!type) return errmsg(err, n, "%s: %s: no \"type\"", file, field);
    if (strcmp(type, "Sequence")) return k->load(t, file, field, p, type, err, n);
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, k->list), *e;
    if (!cJSON_IsArray(a)) return errmsg(err, n, "%s: %s.%s: not an array", file, field, k->list);
    int i = 0;
    cJSON_ArrayForEach(e, a) {
        char sub[96];
        snprintf(sub, sizeof sub, "%s.%s[%d]", field, k->list, i++);
        if (load_step(t, file, sub, e, k, err, n)) return -1;
    }
    return 0;
}

static int load_pre(tokenizer *t, const char *file, const char *field, const cJSON *p, const char *type, char *err,
                    size_t n) {
    if (t->n_pre == TOK_MAX_PRE) return errmsg(err, n, "%s: %s: more than %d pre-tokenizers", file, field, TOK_MAX_PRE);
    if (t->n_pre > 0 && t->pre[t->n_pre - 1].kind == PRE_BYTELEVEL)
        return errmsg(err, n, "%s: %s: a pre-tokenizer after ByteLevel is not supported", file, field);
    tok_pre *s = &t->pre[t->n_pre++];
    if (!strcmp(type, "ByteLevel")) {
        s->kind = PRE_BYTELEVEL;
        s->add_prefix_space = jbool(p, "add_prefix_space", 0);
        if (jbool(p, "use_regex", 1) && pre_compile(s, TOK_GPT2_REGEX, err, n)) return -1;
        s->behavior = SPLIT_ISOLATED;
        return 0;
    }
    if (!strcmp(type, "Digits")) {
        s->kind = PRE_SPLIT;
        s->behavior = SPLIT_ISOLATED;
        return pre_compile(s, jbool(p, "individual_digits", 0) ? "\\p{N}" : "\\p{N}+", err, n);
    }
    if (!strcmp(type, "Split")) {
        s->kind = PRE_SPLIT;
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(p, "pattern");
        const char *re = jstr(pat, "Regex"), *str = jstr(pat, "String");
        const char *beh = jstr(p, "behavior");
        static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
        int b = -1;
        for (int k = 0; beh && k < 5; k++)
            if (!strcmp(beh, names[k])) b = k;
        if (b < 0) return errmsg(err, n, "%s: %s.behavior: \"%s\" not supported", file, field, beh ? beh : "(none)");
        s->behavior = (tok_split_behavior)b;
        s->invert = jbool(p, "invert", 0);
        if (!re && !str) return errmsg(err, n, "%s: %s.pattern: neither Regex nor String", file, field);
        char *q = NULL;
        if (str) {  // a literal: quoted for PCRE2
            q = malloc(strlen(str) + 5);
            if (!q) return errmsg(err, n, "out of memory");
            sprintf(q, "\\Q%s\\E", str);
            if (strstr(str, "\\E")) {
                free(q);
                return errmsg(err, n, "%s: %s.pattern.String: \"\\E\" not supported", file, field);
            }
        }
        char sub[256];
        int rc = pre_compile(s, q ? q : re, sub, sizeof sub);
        free(q);
        if (rc) return errmsg(err, n, "%s: %s.pattern: %s", file, field, sub);
        return 0;
    }
    if (!strcmp(type, "Metaspace")) {
        s->kind = PRE_METASPACE;
        const char *rep = jstr(p, "replacement"), *scheme = jstr(p, "prepend_scheme");
        if (!rep || strcmp(rep, TOK_SPACE_MARK))
            return errmsg(err, n, "%s: %s.replacement: only \"\xe2\x96\x81\" is supported", file, field);
        s->prepend = scheme ? (!strcmp(scheme, "always") ? 1 : !strcmp(scheme, "first") ? 2 : 0) : jbool(p, "add_prefix_space", 1);
        if (scheme && strcmp(scheme, "always") && strcmp(scheme, "first") && strcmp(scheme, "never"))
            return errmsg(err, n, "%s: %s.prepend_scheme: \"%s\" not supported", file, field, scheme);
        s->split = jbool(p, "split", 1);
        return 0;
    }
    return errmsg(err, n, "%s: %s: pre-tokenizer type \"%s\" not supported (ByteLevel, Split, Digits, Metaspace, Sequence)",
                  file, field, type);
}

static int load_normalizer(tokenizer *t, const char *file, const char *field, const cJSON *p, const char *type, char *err,
                           size_t n) {
    if (!strcmp(type, "Prepend") && !t->norm_replace_space) {
        const char *pre = jstr(p, "prepend");
        if (pre && !strcmp(pre, TOK_SPACE_MARK)) return t->norm_prepend = 1, 0;
    }
    if (!strcmp(type, "Replace")) {
        const char *from = jstr(cJSON_GetObjectItemCaseSensitive(p, "pattern"), "String"), *to = jstr(p, "content");
        if (from && to && !strcmp(from, " ") && !strcmp(to, TOK_SPACE_MARK)) return t->norm_replace_space = 1, 0;
    }
    return errmsg(err, n, "%s: %s: normalizer \"%s\" not supported (Prepend(\"\xe2\x96\x81\") then Replace(\" \", \"\xe2\x96\x81\"))",
                  file, field, type);
}

static int load_decoder(tokenizer *t, const char *file, const char *field, const cJSON *p, const char *type, char *err,
                        size_t n) {
    if (t->n_dec == TOK_MAX_DEC) return errmsg(err, n, "%s: %s: more than %d decoders", file, field, TOK_MAX_DEC);
    tok_dec *d = &t->dec[t->n_dec];
    if (!strcmp(type, "ByteLevel")) {
        d->kind = DEC_BYTELEVEL;
    } else if (!strcmp(type, "ByteFallback")) {
        d->kind = DEC_BYTEFALLBACK;
    } else if (!strcmp(type, "Fuse")) {
        d->kind = DEC_FUSE;
    } else if (!strcmp(type, "Replace")) {
        const char *from = jstr(cJSON_GetObjectItemCaseSensitive(p, "pattern"), "String"), *to = jstr(p, "content");
        if (!from || !to || !*from) return errmsg(err, n, "%s: %s: Replace needs a String pattern and a content", file, field);
        d->kind = DEC_REPLACE;
        d->from = strdup(from);
        d->to = strdup(to);
    } else if (!strcmp(type, "Strip")) {
        const char *c = jstr(p, "content");
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(p, "start"), *b = cJSON_GetObjectItemCaseSensitive(p, "stop");
        if (!c || !cJSON_IsNumber(a) || !cJSON_IsNumber(b)) return errmsg(err, n, "%s: %s: Strip needs content, start, stop", file, field);
        d->kind = DEC_STRIP;
        d->content = strdup(c);
        d->start = a->valueint;
        d->stop = b->valueint;
    } else if (!strcmp(type, "Metaspace")) {
        const char *scheme = jstr(p, "prepend_scheme");
        d->kind = DEC_METASPACE;
        d->start = scheme ? strcmp(scheme, "never") != 0 : jbool(p, "add_prefix_space", 1);
    } else {
        return errmsg(err, n, "%s: %s: decoder \"%s\" not supported (ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace)",
                      file, field, type);
    }
    t->n_dec++;
    return 0;
}

static const step_kind PRE = {"pretokenizers", load_pre, 0}, NORMALIZER = {"normalizers", load_normalizer, 1},
                       DECODER = {"decoders", load_decoder, 1};

static int load_merges(tokenizer *t, const char *file, const cJSON *merges, char *err, size_t n) {
    int count = cJSON_GetArraySize(merges);
    t->merge_left = malloc(((size_t)count + 1) * sizeof *t->merge_left);
    t->merge_right = malloc(((size_t)count + 1) * sizeof *t->merge_right);
    if (!t->merge_left || !t->merge_right || tok_merges_init(&t->merges, (size_t)count)) return errmsg(err, n, "out of memory");
    t->n_merges = count;
    char where[4200];
    snprintf(where, sizeof where, "%s: model.merges", file);
    int r = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        const char *a, *b;
        size_t al, bl;
        if (cJSON_IsString(m)) {  // "left right"
            const char *sp = strchr(m->valuestring, ' ');
            if (!sp || strchr(sp + 1, ' '))
                return errmsg(err, n, "%s[%d]: \"%s\" is not two tokens separated by a space", where, r, m->valuestring);
            a = m->valuestring;
            al = (size_t)(sp - a);
            b = sp + 1;
            bl = strlen(b);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 1))) {  // ["left", "right"]
            a = cJSON_GetArrayItem(m, 0)->valuestring;
            b = cJSON_GetArrayItem(m, 1)->valuestring;
            al = strlen(a);
            bl = strlen(b);
        } else {
            return errmsg(err, n, "%s[%d]: neither a \"left right\" string nor a pair of strings", where, r);
        }
        if (add_merge(t, where, r, a, al, b, bl, err, n)) return -1;
        r++;
    }
    return 0;
}

static int load_model(tokenizer **out, const char *file, const cJSON *root, char *err, size_t n) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return errmsg(err, n, "%s: model: missing or not an object", file);
    const char *type = jstr(model, "type");
    if (!type) return errmsg(err, n, "%s: model.type: missing", file);
    if (strcmp(type, "BPE")) return errmsg(err, n, "%s: model.type: \"%s\" not supported (only BPE)", file, type);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (!cJSON_IsObject(vocab)) return errmsg(err, n, "%s: model.vocab: missing or not an object", file);
    if (!cJSON_IsArray(merges)) return errmsg(err, n, "%s: model.merges: missing or not an array", file);
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(model, "dropout");
    if (cJSON_IsNumber(drop) && drop->valuedouble != 0) return errmsg(err, n, "%s: model.dropout: BPE dropout not supported", file);
    const char *cont = jstr(model, "continuing_subword_prefix"), *eow = jstr(model, "end_of_word_suffix");
    if ((cont && *cont) || (eow && *eow))
        return errmsg(err, n, "%s: model.%s: not supported", file, cont && *cont ? "continuing_subword_prefix" : "end_of_word_suffix");
    // the vocabulary: the model's, then the added tokens' ids
    int max_id = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= (1 << 24) || e->valuedouble != (int)e->valuedouble)
            return errmsg(err, n, "%s: model.vocab[\"%s\"]: not a token id", file, e->string);
        if (e->valueint > max_id) max_id = e->valueint;
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (added && !cJSON_IsArray(added) && !cJSON_IsNull(added)) return errmsg(err, n, "%s: added_tokens: not an array", file);
    int i = 0;
    cJSON_ArrayForEach(e, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= (1 << 24) || !jstr(e, "content"))
            return errmsg(err, n, "%s: added_tokens[%d]: needs an id and a content", file, i);
        if (id->valueint > max_id) max_id = id->valueint;
        i++;
    }
    if (max_id < 0) return errmsg(err, n, "%s: model.vocab: empty", file);
    tokenizer *t = *out = tok_new(TOKENIZER_BPE_SPM, max_id + 1);
    if (!t) return errmsg(err, n, "out of memory");
    cJSON_ArrayForEach(e, vocab) {
        if (t->piece[e->valueint]) return errmsg(err, n, "%s: model.vocab[\"%s\"]: id %d used twice", file, e->string, e->valueint);
        if (set_piece(t, e->valueint, e->string)) return errmsg(err, n, "out of memory");
    }
    cJSON_ArrayForEach(e, added) {
        int id = cJSON_GetObjectItemCaseSensitive(e, "id")->valueint;
        const char *c = jstr(e, "content");
        if (t->piece[id] && strcmp(t->piece[id], c))
            return errmsg(err, n, "%s: added_tokens: id %d is \"%s\" in model.vocab", file, id, t->piece[id]);
        if (!t->piece[id] && set_piece(t, id, c)) return errmsg(err, n, "out of memory");
        if (add_added(t, id, c, jbool(e, "special", 0), jbool(e, "lstrip", 0), jbool(e, "rstrip", 0), jbool(e, "single_word", 0),
                      jbool(e, "normalized", 0)))
            return errmsg(err, n, "out of memory");
    }
    if (tok_map_build(t)) return errmsg(err, n, "out of memory");
    t->byte_fallback = jbool(model, "byte_fallback", 0);
    t->ignore_merges = jbool(model, "ignore_merges", 0);
    t->fuse_unk = jbool(model, "fuse_unk", 0);
    const char *unk = jstr(model, "unk_token");
    if (unk && (t->unk_id = tok_map_get(t, unk, strlen(unk))) < 0)
        return errmsg(err, n, "%s: model.unk_token: \"%s\" not in the vocabulary", file, unk);
    return load_merges(t, file, merges, err, n);
}

// The JSON object of file (cJSON; the caller deletes it). NULL with a message when the file cannot
// be read or holds no object.
static cJSON *read_json_object(const char *file, char *err, size_t n) {
    char *text = read_text_file(file, MAX_JSON_BYTES, err, n);
    if (!text) return NULL;
    cJSON *c = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(c)) {
        cJSON_Delete(c);
        errmsg(err, n, "%s: not a JSON object", file);
        return NULL;
    }
    return c;
}

static int load_config(tokenizer *t, const char *file, char *err, size_t n) {
    cJSON *c = read_json_object(file, err, n);
    if (!c) return -1;
    int rc = 0;
    const char *names[4] = {token_name(c, "bos_token"), token_name(c, "eos_token"), token_name(c, "pad_token"),
                            token_name(c, "unk_token")};
    static const char *const fields[4] = {"bos_token", "eos_token", "pad_token", "unk_token"};
    int *ids[4] = {&t->bos_id, NULL, &t->pad_id, NULL};
    char **dst[4] = {&t->bos_token, &t->eos_token, &t->pad_token, &t->unk_token};
    for (int i = 0; i < 4 && !rc; i++) {
        if (!names[i]) continue;
        int id = tok_map_get(t, names[i], strlen(names[i]));
        if (id < 0) rc = errmsg(err, n, "%s: %s: \"%s\" not in the vocabulary", file, fields[i], names[i]);
        else if (set_str(dst[i], names[i])) rc = errmsg(err, n, "out of memory");
        else if (ids[i]) *ids[i] = id;
        else if (i == 1) t->eos[0] = id, t->n_eos = 1;
    }
    t->add_bos = jbool(c, "add_bos_token", t->add_bos);
    t->add_eos = jbool(c, "add_eos_token", t->add_eos);
    const cJSON *tpl = cJSON_GetObjectItemCaseSensitive(c, "chat_template"), *e;
    if (cJSON_IsString(tpl) && !rc) rc = set_str(&t->chat_template, tpl->valuestring) ? errmsg(err, n, "out of memory") : 0;
    const cJSON *tpls = cJSON_IsArray(tpl) ? tpl : NULL;
    cJSON_ArrayForEach(e, tpls) {  // [{"name": "default", "template": ...}, ...]
        const char *name = jstr(e, "name"), *text2 = jstr(e, "template");
        if (name && text2 && !strcmp(name, "default") && !rc)
            rc = set_str(&t->chat_template, text2) ? errmsg(err, n, "out of memory") : 0;
    }
    cJSON_Delete(c);
    return rc;
}

static int load_generation(tokenizer *t, const char *file, char *err, size_t n) {
    cJSON *c = read_json_object(file, err, n);
    if (!c) return -1;
    int rc = 0;
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(c, "eos_token_id"), *e;
    if (cJSON_IsNumber(eos) || cJSON_IsArray(eos)) t->n_eos = 0;
    const cJSON *eos_list = cJSON_IsArray(eos) ? eos : NULL;
    cJSON_ArrayForEach(e, eos_list) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= t->n_vocab) {
            rc = errmsg(err, n, "%s: eos_token_id: not a token id", file);
            break;
        }
        if (t->n_eos < TOK_MAX_EOS) t->eos[t->n_eos++] = e->valueint;
    }
    if (cJSON_IsNumber(eos)) {
        if (eos->valuedouble < 0 || eos->valuedouble >= t->n_vocab) rc = errmsg(err, n, "%s: eos_token_id: not a token id", file);
        else t->eos[t->n_eos++] = eos->valueint;
    }
    cJSON_Delete(c);
    return rc;
}

tokenizer *tokenizer_load_json(const char *file, const char *config_json, const char *gen_json, char *err, size_t n) {
    cJSON *root = read_json_object(file, err, n);
    if (!root) return NULL;
    tokenizer *t = NULL;
    if (load_model(&t, file, root, err, n)) goto fail;
    if (load_step(t, file, "normalizer", cJSON_GetObjectItemCaseSensitive(root, "normalizer"), &NORMALIZER, err, n)) goto fail;
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (pre && !cJSON_IsNull(pre) && load_step(t, file, "pre_tokenizer", pre, &PRE, err, n)) goto fail;
    if (load_step(t, file, "decoder", cJSON_GetObjectItemCaseSensitive(root, "decoder"), &DECODER, err, n)) goto fail;
    // byte-level: a ByteLevel pre-tokenizer maps the bytes to the alphabet
    for (int i = 0; i < t->n_pre; i++)
        if (t->pre[i].kind == PRE_BYTELEVEL) t->kind = TOKENIZER_BPE_BYTES;
    if (t->kind == TOKENIZER_BPE_BYTES && (t->norm_prepend || t->norm_replace_space || t->byte_fallback)) {
        errmsg(err, n, "%s: a ByteLevel pre-tokenizer with a \"\xe2\x96\x81\" normalizer or byte_fallback is not supported", file);
        goto fail;
    }
    fill_byte_ids(t);
    // BOS by the post-processor when no tokenizer_config.json says (Llama 3's TemplateProcessing)
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    const char *ptype = jstr(post, "type");
    if (ptype && !strcmp(ptype, "TemplateProcessing")) {
        const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(post, "single"), 0);
        const char *sp = jstr(cJSON_GetObjectItemCaseSensitive(first, "SpecialToken"), "id");
        int id = sp ? tok_map_get(t, sp, strlen(sp)) : -1;
        if (id >= 0) {
            t->bos_id = id;
            t->add_bos = 1;
        }
    }
    if (config_json && load_config(t, config_json, err, n)) goto fail;
    if (gen_json && load_generation(t, gen_json, err, n)) goto fail;
    cJSON_Delete(root);
    return t;
fail:
    cJSON_Delete(root);
    tokenizer_free(t);
    return NULL;
}
