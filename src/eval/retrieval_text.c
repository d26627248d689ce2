// retrieval_text.c: the long-context tasks for a run with its own tokenizer (see retrieval.h): the
// haystack decoded to text, lc_generate's examples encoded and fitted into the context, answers
// judged on their text.
#include "eval/retrieval.h"
#include "util/errmsg.h"

#include <stdlib.h>
#include <string.h>

int lc_text_haystack(const tokenizer *t, const uint32_t *ids, size_t n_ids, lc_text *h, char *err, size_t n) {
    const int V = tokenizer_vocab_size(t);
    memset(h, 0, sizeof *h);
    if (!n_ids) return errmsg(err, n, "the haystack shard holds no tokens");
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] >= (uint32_t)V)
            return errmsg(err, n,
                          "token %zu of the haystack is id %u, outside the run's tokenizer's vocabulary (%d): shards "
                          "made with another tokenizer? (make them with mtac data --tokenizer RUN)",
                          i, ids[i], V);
    int32_t *copy = malloc(n_ids * sizeof *copy);
    if (!copy) return errmsg(err, n, "out of memory");
    for (size_t i = 0; i < n_ids; i++) copy[i] = (int32_t)ids[i];
    size_t len;
    char *text = tokenizer_decode(t, copy, n_ids, 1, &len, err, n);
    free(copy);
    if (!text) return -1;
    h->text = malloc((len ? len : 1) * sizeof *h->text);
    if (!h->text) {
        free(text);
        return errmsg(err, n, "out of memory");
    }
    for (size_t i = 0; i < len; i++) h->text[i] = (unsigned char)text[i];
    free(text);
    h->tok = t, h->text_n = len;
    h->bytes_per_token = (double)len / (double)n_ids;
    return 0;
}

void lc_text_free(lc_text *h) {
    free(h->text);
    h->text = NULL, h->text_n = 0;
}

static void bytes_of(const int *row, int from, int to, char *out) {
    for (int i = from; i < to; i++) out[i - from] = (char)row[i];
    out[to - from] = 0;
}

// An lc_generate row as the tokenizer's ids: the prompt's text (without the BOS and the space
// before the answer) into *ids (malloc'd), the answer's (with that space) into ex. 0, or -1.
static int encode_row(const tokenizer *t, const int *row, const lc_example *bx, int32_t **ids, size_t *n_ids,
                      lc_text_example *ex, char *err, size_t n) {
    const int prompt_end = bx->answer_at - (row[bx->answer_at - 1] == ' ');
    const int answer_n = bx->len - 1 - prompt_end;  // without the EOS
    if (answer_n + 1 > LC_TEXT_ANSWER) return errmsg(err, n, "an answer of %d bytes: longer than %d", answer_n, LC_TEXT_ANSWER - 1);
    char *prompt = malloc((size_t)prompt_end);
    if (!prompt) return errmsg(err, n, "out of memory");
    bytes_of(row, 1, prompt_end, prompt);
    int rc = tokenizer_encode(t, prompt, (size_t)prompt_end - 1, tokenizer_add_bos(t), ids, n_ids, err, n);
    free(prompt);
    if (rc) return -1;
    bytes_of(row, prompt_end, prompt_end + answer_n, ex->expected);
    int32_t *a = NULL;
    size_t na = 0;
    if (tokenizer_encode(t, ex->expected, (size_t)answer_n, 0, &a, &na, err, n)) return free(*ids), *ids = NULL, -1;
    const int eos = tokenizer_n_eos(t) > 0;
    if (na + (size_t)eos > LC_TEXT_ANSWER) rc = errmsg(err, n, "an answer of %zu tokens: more than %d", na, LC_TEXT_ANSWER - 1);
    for (size_t i = 0; !rc && i < na; i++) ex->answer[i] = a[i];
    if (!rc && eos) ex->answer[na] = tokenizer_eos_id(t, 0);
    ex->n_answer = (int)na + eos;
    free(a);
    if (rc) free(*ids), *ids = NULL;
    // the text scored: the answer's words, its needle's full stop left to the model
    if (answer_n > 0 && ex->expected[answer_n - 1] == '.') ex->expected[answer_n - 1] = 0;
    return rc;
}

// Makes the example at byte context bc (from the generator state start); *fits: whether it fits
// c->context tokens (then its prompt is in prompt), else *total its tokens. 0, or -1.
static int try_context(const lc_config *c, const lc_text *h, int bc, uint64_t start, uint64_t *rng, int *row, int *prompt,
                       lc_text_example *ex, int *fits, int *total, char *err, size_t n) {
    lc_config cb = *c;
    cb.context = bc;
    lc_example bx;
    *rng = start;
    if (lc_generate(&cb, h->text, h->text_n, rng, row, &bx, err, n)) return -1;
    int32_t *ids;
    size_t n_ids;
    if (encode_row(h->tok, row, &bx, &ids, &n_ids, ex, err, n)) return -1;
    *total = (int)n_ids + ex->n_answer + LC_TEXT_SLACK;
    *fits = *total <= c->context;
    if (*fits) {
        for (size_t i = 0; i < n_ids; i++) prompt[i] = ids[i];
        ex->n_prompt = (int)n_ids, ex->byte_context = bc;
    }
    free(ids);
    return 0;
}

// The shortest byte context lc_generate takes c's needles or facts and question in.
static int least_bytes(const lc_config *c) {
    lc_config cb = *c;
    for (cb.context = 64; lc_config_check(&cb, NULL, 0); cb.context++) {}
    return cb.context;
}

int lc_text_generate(const lc_config *c, const lc_text *h, uint64_t *rng, int *prompt, lc_text_example *ex, char *err,
                     size_t n) {
    if (c->task == LC_COPY) return errmsg(err, n, "copy: for byte-level runs only (its answer is a third of the context)");
    lc_config any = *c;  // the settings but the context, which is checked in bytes below
    any.context = 1 << 30;
    if (lc_config_check(&any, err, n)) return -1;
    const double guess = c->context * h->bytes_per_token;
    if (guess >= (double)h->text_n)
        return errmsg(err, n, "haystack of %zu bytes of text: shorter than the about %.0f a context of %d tokens needs",
                      h->text_n, guess, c->context);
    // the needles and the question take fewer tokens per byte than the haystack, or more
    const int least = least_bytes(c);
    int bc = (int)guess > least ? (int)guess : least, fits = 0, total = 0;
    int *row = malloc((size_t)bc * sizeof *row);
    if (!row) return errmsg(err, n, "out of memory");
    const uint64_t start = *rng;
    int rc = 0;
    for (;;) {
        if ((rc = try_context(c, h, bc, start, rng, row, prompt, ex, &fits, &total, err, n)) || fits) break;
        if (bc == least) {
            rc = errmsg(err, n,
                        "context %d tokens: too short for the question and its %d %s in the run's tokens (its shortest "
                        "example, with the answer and room for the greedy one, takes %d)",
                        c->context, c->task == LC_NEEDLE ? c->n_needles : c->n_facts,
                        c->task == LC_NEEDLE ? "needles" : "facts", total);
            break;
        }
        // shorter in proportion (the haystack's share shrinks, the rest stays), by a byte at least
        const int next = (int)((double)bc * c->context / total);
        bc = next >= bc ? bc - 1 : next < least ? least : next;
    }
    free(row);
    return rc;
}

static int word_char(char ch) {
    const unsigned char u = (unsigned char)ch;
    return u >= 0x80 || (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
}

int lc_text_judge(const tokenizer *t, int tail, const char *expected, const int *got, int n_got, int *retrieved) {
    const int V = tokenizer_vocab_size(t);
    int32_t *ids = malloc(((size_t)n_got + 1) * sizeof *ids);
    if (!ids) return *retrieved = 0;
    // the tail first: decoders that drop a leading space (SentencePiece) drop it from the first id
    int k = 0;
    ids[k++] = tail >= 0 && tail < V ? tail : 0;
    while (k <= n_got && got[k - 1] >= 0 && got[k - 1] < V) ids[k] = got[k - 1], k++;
    size_t len_all, len_tail;
    char *all = tokenizer_decode(t, ids, (size_t)k, 1, &len_all, NULL, 0), *pre = tokenizer_decode(t, ids, 1, 1, &len_tail, NULL, 0);
    const char *text = all && pre && len_tail <= len_all && !memcmp(all, pre, len_tail) ? all + len_tail : "";
    const size_t m = strlen(expected);
    *retrieved = !strncmp(text, expected, m);
    const int right = *retrieved && !word_char(text[m]);
    free(all), free(pre), free(ids);
    return right;
}
