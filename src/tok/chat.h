// chat.h: a user's message in a model's chat template, as Hugging Face's
// apply_chat_template(messages, add_generation_prompt=True) renders it, for the template families
// mtac recognises in the Jinja text (it runs no Jinja): ChatML (<|im_start|>; with the template's
// own default system message when it writes one), Llama 3 (<|start_header_id|> ... <|eot_id|>) and
// Llama 2 ([INST] ... [/INST]). Any other template is refused.
#ifndef MTAC_TOK_CHAT_H
#define MTAC_TOK_CHAT_H

#include <stddef.h>

typedef enum { CHAT_UNKNOWN, CHAT_CHATML, CHAT_LLAMA3, CHAT_LLAMA2 } chat_family;

// The family of a Jinja chat template (NULL: CHAT_UNKNOWN).
chat_family chat_family_of(const char *tmpl);
const char *chat_family_name(chat_family f);  // "ChatML", "Llama 3", "Llama 2"

// The text of one user message followed by the assistant's turn (malloc'd): bos is the BOS
// token's text, written where the template writes bos_token. NULL with a message naming the
// template when its family is unknown (or out of memory).
char *chat_render(const char *tmpl, const char *bos, const char *user, char *err, size_t n);

#endif
