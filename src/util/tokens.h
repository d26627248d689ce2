// tokens.h: the special token ids of mtac's byte-level tokenizer (data/tokenizer.h: ids 0-255
// are bytes, then these). Here, below both, because the model reads one of them too: with
// doc_mask, TOK_EOS ends a document (model.h), and a model must not depend on the data layer.
#ifndef MTAC_TOKENS_H
#define MTAC_TOKENS_H

enum { TOK_BOS = 256, TOK_EOS = 257, TOK_PAD = 258, TOK_VOCAB = 259 };

#endif
