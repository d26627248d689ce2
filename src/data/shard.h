// shard.h: token shards (docs/shards.md): a 64-byte header (magic "MTACTOK1", version, token
// dtype, count, FNV-1a checksum of the token bytes) followed by the tokens, little-endian.
#ifndef MTAC_SHARD_H
#define MTAC_SHARD_H

#include <stddef.h>
#include <stdint.h>

enum { SHARD_U16 = 1, SHARD_U32 = 2 };

typedef struct {
    uint32_t *tokens;
    size_t n;
    int dtype;
} shard;

// Writes n tokens atomically (temp file, fsync, rename). dtype SHARD_U16 needs ids < 65536.
int shard_write(const char *path, const uint32_t *tokens, size_t n, int dtype, char *err, size_t err_len);
// Reads and verifies a shard (magic, version, dtype, size, checksum).
int shard_read(const char *path, shard *s, char *err, size_t err_len);
void shard_free(shard *s);

// ---- text into shards (mtac data) ----
// A growing list of tokens.
typedef struct {
    uint32_t *t;
    size_t n, cap;
} shard_tokens;
int shard_tokens_push(shard_tokens *v, uint32_t x);  // 0, or -1 out of memory

// Where documents end (an EOS after each): SHARD_DOC_FILE, at the end of each input file;
// SHARD_DOC_PARAGRAPH, after each paragraph (lines up to a blank one; the blank lines are dropped).
enum { SHARD_DOC_FILE, SHARD_DOC_PARAGRAPH, SHARD_BLOCK = 16384 };

// Tokenizes one input file's text s into tr and va (docs/shards.md): blocks of about SHARD_BLOCK
// bytes, numbered on from *block_no, every k-th to va. A block ends at a line end (SHARD_DOC_FILE;
// the file's EOS then goes to both) or at a paragraph's end (SHARD_DOC_PARAGRAPH: no document is
// cut in two). 0, or -1 out of memory.
int shard_split_text(const unsigned char *s, size_t len, int documents, int k, size_t *block_no, shard_tokens *tr,
                     shard_tokens *va);

// How text becomes ids for shard_split_encoded: encode appends the ids of s[0..len) (one block,
// or one paragraph, tokenized on its own) to out, 0 or -1 (its message is the caller's, through
// arg); eos, when >= 0, is the id that ends each document (none written when -1).
typedef struct {
    int (*encode)(void *arg, const unsigned char *s, size_t len, shard_tokens *out);
    void *arg;
    int64_t eos;
} shard_encoder;
// shard_split_text with e's ids instead of bytes (shard_split_text is this with the byte-level
// tokenizer and its EOS). 0, or -1 when e->encode or the memory fails.
int shard_split_encoded(const shard_encoder *e, const unsigned char *s, size_t len, int documents, int k,
                        size_t *block_no, shard_tokens *tr, shard_tokens *va);

#endif
