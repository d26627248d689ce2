// tok_internal.h: the parts of a tokenizer shared by src/tok/*.c (not part of the API).
#ifndef MTAC_TOK_INTERNAL_H
#define MTAC_TOK_INTERNAL_H

#include "tok/tokenizer.h"

// SentencePiece's space, "▁" (U+2581) in UTF-8: 3 bytes.
#define TOK_SPACE_MARK "\xe2\x96\x81"
// SentencePiece's spaces: s[0..len) into out (room for 3 * len + 3), each space as TOK_SPACE_MARK
// when replace, one mark first when prepend. Returns the bytes written.
size_t tok_space_marks(unsigned char *out, const unsigned char *s, size_t len, int prepend, int replace);

#include <stddef.h>
#include <stdint.h>

// A string-to-id map: open addressing over the vocabulary's pieces (slots hold id + 1, 0 empty).
typedef struct {
    uint32_t *slot;
    size_t mask;
} tok_map;

// A token the text is searched for before pre-tokenization (Hugging Face's added_tokens).
typedef struct {
    int id;
    char *content;
    size_t len;
    int special, lstrip, rstrip, single_word, normalized;
} tok_added;

// One step of the pre-tokenizer: a regex split (Split, ByteLevel's GPT-2 regex, Digits) or
// Metaspace. Split behaviours as Hugging Face names them.
typedef enum { SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS } tok_split_behavior;
typedef enum { PRE_SPLIT, PRE_BYTELEVEL, PRE_METASPACE } tok_pre_kind;
typedef struct {
    tok_pre_kind kind;
    void *re;                  // pcre2_code (NULL: no regex split, e.g. ByteLevel with use_regex false)
    void *md;                  // its pcre2_match_data
    tok_split_behavior behavior;
    int invert;
    int add_prefix_space;      // ByteLevel: a space before a piece that does not start with one
    int prepend;               // Metaspace: 0 never, 1 always, 2 first piece only
    int split;                 // Metaspace: split before each "▁"
    char *pattern;             // the regex as given (for messages and tokenizer_save)
} tok_pre;

// Decoder steps (Hugging Face's decoders): a ByteLevel one alone, or a Sequence of the others.
typedef enum { DEC_BYTELEVEL, DEC_REPLACE, DEC_BYTEFALLBACK, DEC_FUSE, DEC_STRIP, DEC_METASPACE } tok_dec_kind;
typedef struct {
    tok_dec_kind kind;
    char *from, *to;           // Replace
    char *content;             // Strip: the character stripped
    int start, stop;           // Strip: how many at each end; Metaspace: start = strip one leading space
} tok_dec;

// A merge of two ids into one, and its rank (lower merges first; SPM by score: -score order).
typedef struct {
    uint64_t *key;             // (left << 32 | right) + 1, 0 empty
    int32_t *rank, *result;
    size_t mask;
} tok_merges;

#define TOK_MAX_EOS 8
#define TOK_MAX_PRE 8
#define TOK_MAX_DEC 8

struct tokenizer {
    tokenizer_kind kind;
    int n_vocab;
    char **piece;              // n_vocab token strings (NUL-terminated), NULL where an id has none
    uint32_t *piece_len;
    tok_map map;
    tok_merges merges;
    int n_merges;
    int32_t *merge_left, *merge_right;  // by rank (for tokenizer_save)
    float *scores;             // SPM by score (GGUF "llama"), else NULL
    int32_t *types;            // llama.cpp token types, or NULL
    int byte_id[256];          // byte-level: the id of each byte's character; SPM: of "<0xXX>" (-1)
    int byte_fallback, ignore_merges, unk_id, fuse_unk;
    int norm_prepend;          // normalizer Prepend("▁"): 1
    int norm_replace_space;    // normalizer Replace(" ", "▁"): 1
    int spm_space_prefix;      // GGUF llama's add_space_prefix (llama.cpp: a space before each text fragment)
    int n_pre;
    tok_pre pre[TOK_MAX_PRE];
    int n_dec;
    tok_dec dec[TOK_MAX_DEC];
    int n_added;
    tok_added *added;
    unsigned char added_first[256];   // whether some added token starts with this byte
    void *word_re;             // single_word's word character (pcre2_code), when a token has single_word
    int bos_id, pad_id, add_bos, add_eos, n_eos;
    int eos[TOK_MAX_EOS];
    char *chat_template;
    char *pre_name;            // the spec's pre type (GGUF), or NULL
    char *bos_token, *eos_token, *pad_token, *unk_token;  // tokenizer_config.json's names
    // A cache of encoded pre-tokens (byte-level BPE's pieces repeat: words).
    struct tok_cache *cache;
};

// tok_map
int tok_map_build(tokenizer *t);
int tok_map_get(const tokenizer *t, const char *s, size_t len);
// merges: add (rank order) / look up; -1 when the pair does not merge.
int tok_merges_init(tok_merges *m, size_t n);
void tok_merges_put(tok_merges *m, int left, int right, int rank, int result);
int tok_merges_get(const tok_merges *m, int left, int right, int *result);
void tok_merges_free(tok_merges *m);

// bpe.c: the ids of one pre-token (bytes already in the model's alphabet for byte-level: UTF-8 of the
// byte-to-char mapping; SPM: "▁" for spaces), appended to *out. 0, or -1 out of memory.
typedef struct {
    int32_t *v;
    size_t n, cap;
} tok_ids;
int tok_ids_push(tok_ids *a, int32_t id);
// tokenizer.c: a growing NUL-terminated byte string; tok_text_put appends k bytes of p: 0, or -1
// out of memory.
typedef struct {
    char *v;
    size_t n, cap;
} tok_text;
int tok_text_put(tok_text *b, const void *p, size_t k);
// An array v of *cap elements of `size` bytes, all in use, reallocated to twice the capacity
// (`first` elements when empty; *cap updated), or NULL out of memory (v kept).
void *tok_grow(void *v, size_t *cap, size_t size, size_t first);
int bpe_encode_word(tokenizer *t, const unsigned char *w, size_t len, tok_ids *out);
void bpe_cache_free(tokenizer *t);

// pretok.c: the GPT-2 byte-to-char alphabet; the pre-tokenizer steps; the regexes llama.cpp uses
// for its byte-level pre types.
extern const char *const TOK_GPT2_REGEX;
// The UTF-8 (1 or 2 bytes... up to 2) of byte b's character, into out; its length.
int bytelevel_char(unsigned char b, char out[4]);
// The byte of a character of the alphabet (code point cp), or -1.
int bytelevel_byte(uint32_t cp);
int pre_compile(tok_pre *p, const char *pattern, char *err, size_t n);
void pre_free(tok_pre *p);
// Splits text[0..len) by the steps, calling fn on each final piece (bytes of the normalized text).
typedef int (*tok_piece_fn)(void *ctx, const unsigned char *s, size_t len);
int pretokenize(const tokenizer *t, const unsigned char *s, size_t len, int first, tok_piece_fn fn, void *ctx, char *err,
                size_t n);
// single_word: Rust's regex \\w (what Hugging Face tests) as PCRE2 code; whether the character
// at s[0..len) (start) or ending at s[len] (!start) is one.
void *word_re_compile(void);
void word_re_free(void *re);
int is_word_char(const void *re, const unsigned char *s, size_t len, int start);
// llama.cpp's regexes for a GGUF byte-level pre type; NULL with a message for others.
int pre_from_name(tokenizer *t, const char *name, char *err, size_t n);

// utf8: the length of the character starting at s (1 for an invalid byte), and its code point (or -1).
int utf8_len(const unsigned char *s, size_t n, int32_t *cp);
int utf8_put(uint32_t cp, char *out);
int is_unicode_space(int32_t cp);

#endif
