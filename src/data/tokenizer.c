// tokenizer.c: see tokenizer.h.
#include "data/tokenizer.h"

#include <string.h>

size_t tok_encode(const unsigned char *bytes, size_t n, uint32_t *ids) {
    for (size_t i = 0; i < n; i++) ids[i] = bytes[i];
    return n;
}

const char *tok_marker(uint32_t id) {
    switch (id) {
    case TOK_BOS: return "<bos>";
    case TOK_EOS: return "<eos>";
    case TOK_PAD: return "<pad>";
    default: return id < 256 ? NULL : "<?>";
    }
}

size_t tok_decode_size(const uint32_t *ids, size_t n, int markers) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += ids[i] < 256 ? 1 : markers ? strlen(tok_marker(ids[i])) : 0;
    return len;
}

size_t tok_decode(const uint32_t *ids, size_t n, int markers, unsigned char *out) {
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 256) {
            out[len++] = (unsigned char)ids[i];
        } else if (markers) {
            const char *m = tok_marker(ids[i]);
            size_t k = strlen(m);
            memcpy(out + len, m, k);
            len += k;
        }
    }
    return len;
}
