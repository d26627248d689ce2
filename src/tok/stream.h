// stream.h: the text of tokens as a model generates them, one token at a time, cut at complete
// UTF-8 characters: a character whose bytes come from several tokens (byte-level BPE, byte
// fallback) is held back until its last byte arrives.
#ifndef MTAC_TOK_STREAM_H
#define MTAC_TOK_STREAM_H

#include "tok/tokenizer.h"

#include <stddef.h>
#include <stdint.h>

// The length of the longest prefix of s[0..n) that does not end inside a UTF-8 character (bytes
// that can never complete one count as complete, so nothing is held forever).
size_t utf8_complete(const char *s, size_t n);

// s[0..n) with each byte that is not part of valid UTF-8 replaced by U+FFFD (as Python's
// decode(errors="replace") does per maximal invalid sequence), malloc'd and NUL-terminated; NULL
// out of memory.
char *utf8_sanitize(const char *s, size_t n, size_t *len);

// Decodes the generated ids a window at a time, so that a long generation costs O(window) per
// token: the text of ids[from..n) is decoded with the token before it, whose own text is
// dropped (a decoder that strips the text's first space then strips it from that token alone).
typedef struct {
    const tokenizer *t;
    size_t from, printed;  // the window's first id; the bytes of its text already returned
} tok_stream;

void tok_stream_init(tok_stream *s, const tokenizer *t);
// What ids[0..n) (every id generated so far; special tokens written as nothing) add to the text
// returned before, up to the last complete character, or all of it with final: malloc'd in *text
// (*len bytes, NUL-terminated). 0, or -1 with a message (an id out of range, out of memory).
int tok_stream_next(tok_stream *s, const int32_t *ids, size_t n, int final, char **text, size_t *len, char *err,
                    size_t en);

#endif
