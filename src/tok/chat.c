// chat.c: see chat.h. Each family's rendering is what its reference template writes for
// [{"role": "user", "content": user}] with add_generation_prompt (tests/fixtures/chat_templates.json
// holds transformers' own renderings, tests/test_chat.c compares).
#include "tok/chat.h"
#include "tok/tok_internal.h"
#include "util/errmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

chat_family chat_family_of(const char *t) {
    if (!t) return CHAT_UNKNOWN;
    if (strstr(t, "<|im_start|>")) return CHAT_CHATML;
    // Llama 3.1 and later templates add tools and dated system messages: not this family's text
    if (strstr(t, "<|start_header_id|>") && strstr(t, "<|eot_id|>") && !strstr(t, "Cutting Knowledge Date"))
        return CHAT_LLAMA3;
    if (strstr(t, "[INST]") && strstr(t, "[/INST]")) return CHAT_LLAMA2;
    return CHAT_UNKNOWN;
}

const char *chat_family_name(chat_family f) {
    return f == CHAT_CHATML ? "ChatML" : f == CHAT_LLAMA3 ? "Llama 3" : f == CHAT_LLAMA2 ? "Llama 2" : "unknown";
}

// The length of s without the whitespace Python's str.strip (Jinja's trim) removes at its ends;
// *from: where what is kept starts.
static size_t strip(const char *s, size_t *from) {
    const char *ws = " \t\n\r\f\v";
    size_t a = 0, b = strlen(s);
    while (a < b && strchr(ws, s[a])) a++;
    while (b > a && strchr(ws, s[b - 1])) b--;
    *from = a;
    return b - a;
}

// The default system message of a ChatML template: the text of a Jinja string literal
// '<|im_start|>system\n...<|im_end|>' (escapes undone) written when the conversation has no
// system message, or NULL when the template writes none. malloc'd.
static char *chatml_default_system(const char *t) {
    static const char head[] = "<|im_start|>system";
    for (const char *p = strstr(t, head); p; p = strstr(p + 1, head)) {
        const char *s = p + sizeof head - 1;
        if (*s == '\n') s++;
        else if (s[0] == '\\' && s[1] == 'n') s += 2;
        else continue;
        const char *end = strstr(s, "<|im_end|>");
        if (!end) return NULL;
        char *out = malloc((size_t)(end - s) + 1), *o = out;
        if (!out) return NULL;
        int literal = 1;  // the message must be one literal: a quote before <|im_end|> ends it
        for (const char *q = s; q < end && literal; q++) {
            if (*q == '\'' || *q == '"') literal = 0;
            else if (*q != '\\' || q + 1 == end) *o++ = *q;
            else {
                const char c = *++q;
                *o++ = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
            }
        }
        *o = 0;
        if (literal && o > out) return out;
        free(out);
    }
    return NULL;
}

static int put(tok_text *b, const char *s, size_t n) { return tok_text_put(b, s, n); }
static int puts_(tok_text *b, const char *s) { return tok_text_put(b, s, strlen(s)); }

char *chat_render(const char *tmpl, const char *bos, const char *user, char *err, size_t n) {
    const chat_family f = chat_family_of(tmpl);
    if (f == CHAT_UNKNOWN) {
        if (!tmpl) errmsg(err, n, "the tokenizer has no chat template");
        else
            errmsg(err, n, "the chat template (\"%.60s%s\") is none of the families mtac renders: ChatML, "
                           "Llama 3 (3.0, without dated system messages), Llama 2 [INST]",
                   tmpl, strlen(tmpl) > 60 ? "..." : "");
        return NULL;
    }
    tok_text b = {0};
    size_t from, len = strip(user, &from);
    int bad = puts_(&b, "");
    if (f == CHAT_CHATML) {
        char *sys = chatml_default_system(tmpl);
        if (sys) bad |= puts_(&b, "<|im_start|>system\n") || puts_(&b, sys) || puts_(&b, "<|im_end|>\n");
        free(sys);
        bad |= puts_(&b, "<|im_start|>user\n") || puts_(&b, user) || puts_(&b, "<|im_end|>\n<|im_start|>assistant\n");
    } else if (f == CHAT_LLAMA3) {
        bad |= puts_(&b, bos ? bos : "") || puts_(&b, "<|start_header_id|>user<|end_header_id|>\n\n") ||
               put(&b, user + from, len) ||
               puts_(&b, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
    } else {
        bad |= puts_(&b, bos ? bos : "") || puts_(&b, "[INST] ") || put(&b, user + from, len) || puts_(&b, " [/INST]");
    }
    if (bad) {
        free(b.v);
        errmsg(err, n, "out of memory");
        return NULL;
    }
    return b.v;
}
