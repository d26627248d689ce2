// tokenizer.h: the byte-level tokenizer: ids 0-255 are the bytes of the text, then three special
// tokens. No merges and no vocabulary file, so any byte string round-trips exactly.
#ifndef MTAC_TOKENIZER_H
#define MTAC_TOKENIZER_H

#include "util/tokens.h"  // TOK_BOS, TOK_EOS, TOK_PAD, TOK_VOCAB

#include <stddef.h>
#include <stdint.h>

// Writes the n ids of bytes[0..n) to ids (room for n). Returns n.
size_t tok_encode(const unsigned char *bytes, size_t n, uint32_t *ids);

// Writes the bytes of ids[0..n) to out and returns how many. Byte ids decode to themselves;
// special tokens decode to nothing, or with markers != 0 to "<bos>", "<eos>", "<pad>"; ids outside
// the vocabulary decode to "<?>" with markers and to nothing without. out needs room for
// tok_decode_size(ids, n, markers) bytes (at most 5 per id).
size_t tok_decode(const uint32_t *ids, size_t n, int markers, unsigned char *out);
size_t tok_decode_size(const uint32_t *ids, size_t n, int markers);

// The visible marker of a special or unknown id ("<bos>", ...), NULL for a byte.
const char *tok_marker(uint32_t id);

#endif
