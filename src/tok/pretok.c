// pretok.c: pre-tokenizers (PCRE2 regex splits, Metaspace), the GPT-2 byte-to-char alphabet, and
// the regexes llama.cpp uses for its byte-level pre types.
#include "tok/tok_internal.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>

void pre_free(tok_pre *p) {
    if (p->md) pcre2_match_data_free(p->md);
    if (p->re) pcre2_code_free(p->re);
    free(p->pattern);
}
