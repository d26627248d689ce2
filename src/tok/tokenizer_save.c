// tokenizer_save.c: a tokenizer written as Hugging Face's tokenizer.json and
// tokenizer_config.json (cJSON), in the format tokenizers 0.19 reads: a GGUF's pre type becomes its
// regexes as Split steps, SentencePiece merges derived from scores become ranked merges.
#include "tok/tok_internal.h"

#include "io/fsutil.h"
#include "util/errmsg.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static cJSON *pre_json(const tok_pre *p) {
    cJSON *o = cJSON_CreateObject();
    if (p->kind == PRE_BYTELEVEL) {
        cJSON_AddStringToObject(o, "type", "ByteLevel");
        cJSON_AddBoolToObject(o, "add_prefix_space", p->add_prefix_space);
        cJSON_AddBoolToObject(o, "trim_offsets", 1);
        cJSON_AddBoolToObject(o, "use_regex", p->re != NULL);
    } else if (p->kind == PRE_METASPACE) {
        cJSON_AddStringToObject(o, "type", "Metaspace");
        cJSON_AddStringToObject(o, "replacement", TOK_SPACE_MARK);
        cJSON_AddStringToObject(o, "prepend_scheme", p->prepend == 1 ? "always" : p->prepend == 2 ? "first" : "never");
        cJSON_AddBoolToObject(o, "split", p->split);
    } else {
        static const char *const names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
        cJSON_AddStringToObject(o, "type", "Split");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "pattern"), "Regex", p->pattern);
        cJSON_AddStringToObject(o, "behavior", names[p->behavior]);
        cJSON_AddBoolToObject(o, "invert", p->invert);
    }
    return o;
}

static cJSON *dec_json(const tok_dec *d) {
    cJSON *o = cJSON_CreateObject();
    switch (d->kind) {
    case DEC_BYTELEVEL:
        cJSON_AddStringToObject(o, "type", "ByteLevel");
        cJSON_AddBoolToObject(o, "add_prefix_space", 1);
        cJSON_AddBoolToObject(o, "trim_offsets", 1);
        cJSON_AddBoolToObject(o, "use_regex", 1);
        break;
    case DEC_REPLACE:
        cJSON_AddStringToObject(o, "type", "Replace");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(o, "pattern"), "String", d->from);
        cJSON_AddStringToObject(o, "content", d->to);
        break;
    case DEC_BYTEFALLBACK: cJSON_AddStringToObject(o, "type", "ByteFallback"); break;
    case DEC_FUSE: cJSON_AddStringToObject(o, "type", "Fuse"); break;
    case DEC_STRIP:
        cJSON_AddStringToObject(o, "type", "Strip");
        cJSON_AddStringToObject(o, "content", d->content);
        cJSON_AddNumberToObject(o, "start", d->start);
        cJSON_AddNumberToObject(o, "stop", d->stop);
        break;
    case DEC_METASPACE:
        cJSON_AddStringToObject(o, "type", "Metaspace");
        cJSON_AddStringToObject(o, "replacement", TOK_SPACE_MARK);
        cJSON_AddStringToObject(o, "prepend_scheme", d->start ? "always" : "never");
        cJSON_AddBoolToObject(o, "split", 1);
        break;
    }
    return o;
}

static cJSON *added_tokens_json(const tokenizer *t) {
    cJSON *added = cJSON_CreateArray();
    for (int i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "id", a->id);
        cJSON_AddStringToObject(o, "content", a->content);
        cJSON_AddBoolToObject(o, "single_word", a->single_word);
        cJSON_AddBoolToObject(o, "lstrip", a->lstrip);
        cJSON_AddBoolToObject(o, "rstrip", a->rstrip);
        cJSON_AddBoolToObject(o, "normalized", a->normalized);
        cJSON_AddBoolToObject(o, "special", a->special);
        cJSON_AddItemToArray(added, o);
    }
    return added;
}

static cJSON *normalizers_json(const tokenizer *t) {
    cJSON *a = cJSON_CreateArray();
    if (t->norm_prepend) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "Prepend");
        cJSON_AddStringToObject(p, "prepend", TOK_SPACE_MARK);
        cJSON_AddItemToArray(a, p);
    }
    if (t->norm_replace_space) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "Replace");
        cJSON_AddStringToObject(cJSON_AddObjectToObject(p, "pattern"), "String", " ");
        cJSON_AddStringToObject(p, "content", TOK_SPACE_MARK);
        cJSON_AddItemToArray(a, p);
    }
    return a;
}

// root[key] = {"type": "Sequence", list: items}, or null when items is empty (taken either way).
static void add_sequence(cJSON *root, const char *key, const char *list, cJSON *items) {
    if (!cJSON_GetArraySize(items)) {
        cJSON_Delete(items);
        cJSON_AddNullToObject(root, key);
        return;
    }
    cJSON *o = cJSON_AddObjectToObject(root, key);
    cJSON_AddStringToObject(o, "type", "Sequence");
    cJSON_AddItemToObject(o, list, items);
}

// Merges as "left right" (what every version of tokenizers reads), or as pairs when a token
// holds a space.
static cJSON *merges_json(const tokenizer *t) {
    int pairs = 0;
    for (int r = 0; r < t->n_merges && !pairs; r++)
        pairs = strchr(t->piece[t->merge_left[r]], ' ') || strchr(t->piece[t->merge_right[r]], ' ');
    cJSON *mg = cJSON_CreateArray();
    for (int r = 0; r < t->n_merges; r++) {
        const char *a = t->piece[t->merge_left[r]], *b = t->piece[t->merge_right[r]];
        if (pairs) {
            cJSON *pair = cJSON_CreateArray();
            cJSON_AddItemToArray(pair, cJSON_CreateString(a));
            cJSON_AddItemToArray(pair, cJSON_CreateString(b));
            cJSON_AddItemToArray(mg, pair);
            continue;
        }
        char *ab = malloc(strlen(a) + strlen(b) + 2);
        if (!ab) break;
        sprintf(ab, "%s %s", a, b);
        cJSON_AddItemToArray(mg, cJSON_CreateString(ab));
        free(ab);
    }
    return mg;
}

static cJSON *model_json(const tokenizer *t) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "type", "BPE");
    cJSON_AddNullToObject(m, "dropout");
    if (t->unk_id >= 0) cJSON_AddStringToObject(m, "unk_token", t->piece[t->unk_id]);
    else cJSON_AddNullToObject(m, "unk_token");
    cJSON_AddNullToObject(m, "continuing_subword_prefix");
    cJSON_AddNullToObject(m, "end_of_word_suffix");
    cJSON_AddBoolToObject(m, "fuse_unk", t->fuse_unk);
    cJSON_AddBoolToObject(m, "byte_fallback", t->byte_fallback);
    cJSON_AddBoolToObject(m, "ignore_merges", t->ignore_merges);
    cJSON *v = cJSON_AddObjectToObject(m, "vocab");
    for (int i = 0; i < t->n_vocab; i++)
        if (t->piece[i] && tok_map_get(t, t->piece[i], t->piece_len[i]) == i) cJSON_AddNumberToObject(v, t->piece[i], i);
    cJSON_AddItemToObject(m, "merges", merges_json(t));
    return m;
}

static cJSON *tokenizer_json(const tokenizer *t) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON_AddItemToObject(root, "added_tokens", added_tokens_json(t));
    add_sequence(root, "normalizer", "normalizers", normalizers_json(t));
    cJSON *pre = cJSON_CreateArray();
    for (int i = 0; i < t->n_pre; i++) cJSON_AddItemToArray(pre, pre_json(&t->pre[i]));
    add_sequence(root, "pre_tokenizer", "pretokenizers", pre);
    cJSON_AddNullToObject(root, "post_processor");
    cJSON *dec = cJSON_CreateArray();
    for (int i = 0; i < t->n_dec; i++) cJSON_AddItemToArray(dec, dec_json(&t->dec[i]));
    add_sequence(root, "decoder", "decoders", dec);
    cJSON_AddItemToObject(root, "model", model_json(t));
    return root;
}

static cJSON *config_json(const tokenizer *t) {
    cJSON *c = cJSON_CreateObject();
    cJSON_AddBoolToObject(c, "add_bos_token", t->add_bos);
    cJSON_AddBoolToObject(c, "add_eos_token", t->add_eos);
    const char *names[4] = {t->bos_token, t->eos_token, t->pad_token, t->unk_token};
    static const char *const fields[4] = {"bos_token", "eos_token", "pad_token", "unk_token"};
    for (int i = 0; i < 4; i++)
        if (names[i]) cJSON_AddStringToObject(c, fields[i], names[i]);
        else cJSON_AddNullToObject(c, fields[i]);
    if (t->chat_template) cJSON_AddStringToObject(c, "chat_template", t->chat_template);
    cJSON_AddBoolToObject(c, "clean_up_tokenization_spaces", 0);
    cJSON_AddStringToObject(c, "tokenizer_class", "PreTrainedTokenizerFast");
    return c;
}

int tokenizer_save(const tokenizer *t, const char *dir, char *err, size_t n) {
    if (t->kind == TOKENIZER_BYTES) return 0;
    for (int k = 0; k < 2; k++) {
        cJSON *j = k == 0 ? tokenizer_json(t) : config_json(t);
        char *text = j ? cJSON_PrintUnformatted(j) : NULL;
        cJSON_Delete(j);
        if (!text) return errmsg(err, n, "out of memory");
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, k == 0 ? "tokenizer.json" : "tokenizer_config.json");
        int rc = write_text_atomic(path, text, err, n);
        free(text);
        if (rc) return -1;
    }
    return 0;
}
