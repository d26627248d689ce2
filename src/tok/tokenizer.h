// tokenizer.h: the tokenizer of a run. Either mtac's byte-level tokenizer (data/tokenizer.h: ids 0-255
// the bytes, 256-258 BOS/EOS/PAD) or a pretrained model's: byte-level BPE (GPT-2, Llama 3,
// SmolLM, Qwen2: a regex pre-tokenizer, bytes mapped to printable characters, merges by rank) or
// SentencePiece BPE (Llama 2: "▁" for spaces, merges by score or rank, byte fallback <0xXX>).
// A run keeps a pretrained tokenizer as Hugging Face files (docs/models.md): tokenizer.json, and
// tokenizer_config.json (add_bos_token, bos/eos tokens, chat_template); a run without them is
// byte-level.
#ifndef MTAC_TOK_TOKENIZER_H
#define MTAC_TOK_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

typedef struct tokenizer tokenizer;

typedef enum { TOKENIZER_BYTES, TOKENIZER_BPE_BYTES, TOKENIZER_BPE_SPM } tokenizer_kind;

// A tokenizer described by its parts, as a GGUF file holds them (llama.cpp's tokenizer.ggml.*
// keys): what tokenizer_from_spec builds and tokenizer_save writes as tokenizer.json.
typedef struct {
    tokenizer_kind kind;            // TOKENIZER_BPE_BYTES ("gpt2") or TOKENIZER_BPE_SPM ("llama")
    const char *pre;          // byte-level pre-tokenizer type, llama.cpp's names: "default" (GPT-2),
                              // "llama-bpe" (Llama 3), "smollm", "qwen2", ...; NULL for SPM
    int n_vocab;
    const char *const *tokens;    // n_vocab token strings (byte-level: in the byte-to-char alphabet)
    const float *scores;          // n_vocab SPM scores, or NULL
    const int32_t *types;         // n_vocab llama.cpp token types (1 normal, 2 unknown, 3 control,
                                  // 4 user-defined, 5 unused, 6 byte), or NULL (all normal)
    int n_merges;
    const char *const *merges;    // "left right", by rank; NULL with 0 for SPM by score
    int bos_id, eos_id, unk_id, pad_id;  // -1 where absent
    int add_bos, add_eos;
    const char *chat_template;    // Jinja text, or NULL
    int no_space_prefix;          // SPM: GGUF's add_space_prefix false (0: a space is prepended, llama.cpp's default)
} tokenizer_spec;

// The byte-level tokenizer (never fails).
tokenizer *tokenizer_bytes(void);
// A run's tokenizer: dir/tokenizer.json (+ dir/tokenizer_config.json when present,
// dir/generation_config.json for more eos ids), or the byte-level one when dir has no
// tokenizer.json. NULL with a message naming the file and the field on failure.
tokenizer *tokenizer_load_run(const char *dir, char *err, size_t n);
// A Hugging Face tokenizer.json (config: its tokenizer_config.json or NULL; gen: a
// generation_config.json or NULL). Unknown model types, normalizers, pre-tokenizers or decoders
// are refused by name.
tokenizer *tokenizer_load_json(const char *tokenizer_json, const char *config_json, const char *gen_json, char *err, size_t n);
tokenizer *tokenizer_from_spec(const tokenizer_spec *s, char *err, size_t n);
// Writes dir/tokenizer.json and dir/tokenizer_config.json (Hugging Face's format, loadable by
// `tokenizers` too); nothing for the byte-level tokenizer. 0, or -1 with a message.
int tokenizer_save(const tokenizer *t, const char *dir, char *err, size_t n);
void tokenizer_free(tokenizer *t);

tokenizer_kind tokenizer_get_kind(const tokenizer *t);
int tokenizer_vocab_size(const tokenizer *t);          // ids are in [0, vocab)
int tokenizer_bos_id(const tokenizer *t);              // -1 when none
int tokenizer_add_bos(const tokenizer *t);             // whether encoding starts with BOS by default
int tokenizer_n_eos(const tokenizer *t);               // end-of-sequence ids (generation stops at any)
int tokenizer_eos_id(const tokenizer *t, int i);
const char *tokenizer_chat_template(const tokenizer *t);  // NULL when none
const char *tokenizer_piece(const tokenizer *t, int id);  // the token's text as stored (NULL out of range)
int tokenizer_find(const tokenizer *t, const char *piece);  // the id of an exact token string, -1 if none

// Encodes text[0..len) (any bytes): special/added tokens found in the text as Hugging Face
// matches them, the rest pre-tokenized and merged; with bos, the BOS id first. *ids is malloc'd
// (caller frees), *n_ids its count. 0, or -1 with a message (out of memory, a regex failure).
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int bos, int32_t **ids, size_t *n_ids, char *err,
               size_t n);
// The text of ids (malloc'd, NUL-terminated, length in *len): the inverse of tokenizer_encode (byte
// fallback, "▁" to space, byte-level chars to bytes); special tokens are written as their text
// unless skip_special. Ids out of range are an error (NULL, message).
char *tokenizer_decode(const tokenizer *t, const int32_t *ids, size_t n_ids, int skip_special, size_t *len, char *err,
                 size_t n);

#endif
