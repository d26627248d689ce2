// test_longctx.c: the long-context task generators (src/data/longctx.c) against independent
// checks: the answer recomputed from the row's own text (the needle's sentence; the bAbI world
// replayed from the facts in the row), the haystack one contiguous window of the given tokens,
// depths where asked, asked sentences and values once each, determinism, and clear errors; and
// the exact-match scoring (src/eval/retrieval.c) against answerers whose answers are known; and
// the examples and the scoring in a BPE tokenizer's ids (src/eval/retrieval_text.c).
#include "data/longctx.h"
#include "data/tokenizer.h"
#include "eval/retrieval.h"
#include "tok/tokenizer.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

// A haystack of upper-case words, spaces, full stops and line breaks, so that the inserted text
// (lower case) is told apart from it; with a few "THE DOOR IS" that must not matter.
static uint32_t *make_hay(size_t n) {
    static const char *const words[] = {"AND", "THE", "LORD", "SAID", "UNTO", "MOSES", "DOOR", "IS", "LAMP", "OF", "GOLD"};
    uint32_t *h = malloc(n * sizeof *h);
    uint64_t s = 12345;
    size_t at = 0;
    while (at < n) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        const char *w = words[(s >> 33) % 11];
        for (; *w && at < n; w++) h[at++] = (unsigned char)*w;
        if (at < n) h[at++] = (s >> 40) % 9 == 0 ? '\n' : (s >> 44) % 7 == 0 ? '.' : ' ';
    }
    return h;
}

// The haystack of every test but one, made once: a test takes its first hay_n tokens (make_hay(n)
// is the first n tokens of make_hay(HAY_MAX)).
enum { HAY_MAX = 20000 };
static uint32_t *hay;

static int make_the_hay(void **state) {
    (void)state;
    hay = make_hay(HAY_MAX);
    return hay ? 0 : -1;
}

static int free_the_hay(void **state) {
    (void)state;
    free(hay);
    return 0;
}

// One example of c from the first hay_n tokens of the haystack, drawn with seed, in row: the test
// fails when it is refused or is not c->context tokens long.
static lc_example generate(const lc_config *c, size_t hay_n, uint64_t seed, int *row) {
    char err[256];
    uint64_t rng = seed;
    lc_example ex;
    if (lc_generate(c, hay, hay_n, &rng, row, &ex, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(ex.len, c->context);
    return ex;
}

// The row's bytes from a to b as a string.
static void text_of(const int *row, int a, int b, char *out) {
    int k = 0;
    for (int i = a; i < b; i++) out[k++] = row[i] < 256 ? (char)row[i] : '#';
    out[k] = 0;
}

static const char *find_question(const char *s) { return strstr(s, "\nQ: "); }

// Needles: every asked key's sentence "the KEY is VALUE." is in the row before the question; the
// prompt ends "A: the KEY1 is " and the answer is "VALUE1.", then " the KEY is VALUE." for the
// other keys in the order asked.
static void check_needle_answer(const int *row, const lc_example *ex) {
    char *s = malloc((size_t)ex->len + 1), want[512] = "", first_key[64] = "";
    text_of(row, 0, ex->len - 1, s);
    const char *q = find_question(s), *end = strchr(q, '?');
    assert_non_null(q);
    assert_non_null(end);
    const char *k = strstr(q, " the ");
    while (k && k < end) {
        k += 5;
        char key[64];
        int m = 0;
        while (k[m] && k[m] != ',' && k[m] != '?' && strncmp(k + m, " and ", 5)) m++;
        snprintf(key, sizeof key, "the %.*s is ", m, k);
        const char *at = strstr(s, key);
        assert_non_null(at);
        assert_true(at < q);
        at += strlen(key);
        char val[16];
        int v = 0;
        while (at[v] != '.') v++;
        snprintf(val, sizeof val, "%.*s.", v, at);
        if (want[0]) strcat(strcat(strcat(want, " "), key), val);
        else strcat(want, val), snprintf(first_key, sizeof first_key, "%s", key);
        k = strstr(k + m, " the ");
    }
    char got[512], prompt_end[80];
    text_of(row, ex->answer_at, ex->len - 1, got);
    assert_string_equal(got, want);
    snprintf(prompt_end, sizeof prompt_end, "A: %s", first_key);
    const size_t pl = strlen(prompt_end);
    text_of(row, ex->answer_at - (int)pl, ex->answer_at, got);
    assert_string_equal(got, prompt_end);
    assert_int_equal(row[ex->len - 1], TOK_EOS);
    free(s);
}

// bAbI: replay the facts found in the row (this test's own reading of the sentences) and answer.
static const char *const PEOPLE[] = {"Sandra", "Fred", "Bill", "Julie", "Emma", "Oliver", "Greta", "Hugo"};
static int index_of(const char *const *list, int n, const char *w, int len) {
    for (int i = 0; i < n; i++)
        if ((int)strlen(list[i]) == len && !strncmp(list[i], w, (size_t)len)) return i;
    return -1;
}

static void check_babi_answer(lc_task task, const int *row, const lc_example *ex) {
    char *s = malloc((size_t)ex->len + 1);
    text_of(row, 0, ex->len - 1, s);
    const char *q = find_question(s);
    assert_non_null(q);
    // the world: places and things by name (strings), people by index
    char at[8][16] = {{0}}, holder_place[8][16] = {{0}};
    char thing[8][16], thing_at[8][16], hist[8][80][16];
    int n_things = 0, holder[8], n_hist[8];
    for (int i = 0; i < 8; i++) holder[i] = -1, n_hist[i] = 0;
    (void)holder_place;
    for (int k = 0; k < ex->n_marks; k++) {
        const char *f = s + ex->mark[k];
        int nl = 0;
        while (f[nl] != ' ') nl++;
        const int who = index_of(PEOPLE, 8, f, nl);
        assert_true(who >= 0);
        const char *rest = f + nl + 1;
        char obj[16];
        if (sscanf(rest, "went to the %15[a-z].", obj) == 1) {
            strcpy(at[who], obj);
            for (int t = 0; t < n_things; t++)
                if (holder[t] == who) strcpy(thing_at[t], obj), strcpy(hist[t][n_hist[t]++], obj);
        } else if (sscanf(rest, "took the %15[a-z].", obj) == 1) {
            int t = 0;
            while (t < n_things && strcmp(thing[t], obj)) t++;
            if (t == n_things) strcpy(thing[n_things], obj), thing_at[n_things][0] = 0, n_things++;
            assert_int_equal(holder[t], -1);
            assert_true(at[who][0]);
            holder[t] = who;
            if (strcmp(thing_at[t], at[who])) strcpy(thing_at[t], at[who]), strcpy(hist[t][n_hist[t]++], at[who]);
        } else if (sscanf(rest, "dropped the %15[a-z].", obj) == 1) {
            int t = 0;
            while (t < n_things && strcmp(thing[t], obj)) t++;
            assert_true(t < n_things);
            assert_int_equal(holder[t], who);
            holder[t] = -1;
        } else fail_msg("unknown fact: %.40s", f);
    }
    char want[32] = "", name[16], place[16];
    if (task == LC_QA1 && sscanf(q, "\nQ: Where is %15[A-Za-z]?", name) == 1) {
        strcpy(want, at[index_of(PEOPLE, 8, name, (int)strlen(name))]);
    } else if (task == LC_QA2 && sscanf(q, "\nQ: Where is the %15[a-z]?", name) == 1) {
        for (int t = 0; t < n_things; t++)
            if (!strcmp(thing[t], name)) strcpy(want, thing_at[t]);
    } else if (task == LC_QA3 && sscanf(q, "\nQ: Where was the %15[a-z] before the %15[a-z]?", name, place) == 2) {
        for (int t = 0; t < n_things; t++)
            if (!strcmp(thing[t], name)) {
                assert_string_equal(hist[t][n_hist[t] - 1], place);
                for (int k = n_hist[t] - 2; k >= 0 && !want[0]; k--)
                    if (strcmp(hist[t][k], place)) strcpy(want, hist[t][k]);
            }
    } else fail_msg("question not understood: %.60s", q);
    char got[64];
    text_of(row, ex->answer_at, ex->len - 1, got);
    assert_true(want[0]);
    assert_string_equal(got, want);
    free(s);
}

// The row minus its inserts (each from a mark to the end of its first ". ") and the question is one
// contiguous window of hay.
static void check_window(const int *row, const lc_example *ex, size_t hay_n) {
    int *h = malloc((size_t)ex->len * sizeof *h), nh = 0, k = 0;
    char *s = malloc((size_t)ex->len + 1);
    text_of(row, 0, ex->len, s);
    const int q = (int)(find_question(s) - s);
    for (int i = 1; i < q; i++) {
        if (k < ex->n_marks && i == ex->mark[k]) {
            while (!(row[i] == '.' && row[i + 1] == ' ')) i++;
            i++;  // the space; the loop's i++ moves past it
            k++;
            while (k < ex->n_marks && ex->mark[k] == i + 1) {  // inserts back to back
                i++;
                while (!(row[i] == '.' && row[i + 1] == ' ')) i++;
                i++;
                k++;
            }
            continue;
        }
        h[nh++] = row[i];
    }
    assert_int_equal(k, ex->n_marks);
    assert_int_equal(nh, ex->hay_len);
    int found = 0;
    for (size_t w = 0; w + (size_t)nh <= hay_n && !found; w++) {
        int same = 1;
        for (int i = 0; i < nh && same; i++) same = h[i] == (int)hay[w + i];
        found = same;
    }
    assert_true(found);
    free(h), free(s);
}

static void test_needles(void **state) {
    (void)state;
    const size_t hay_n = 20000;
    int row[2048];
    const double depths[] = {0.0, 0.25, 0.5, 0.9, 1.0, -1};
    for (int compound = 0; compound <= 1; compound++)
        for (int needles = 1; needles <= 8; needles += 3)
            for (int d = 0; d < 6; d++) {
                lc_config c = {LC_NEEDLE, 1024, needles, needles > 2 ? 2 : 1, compound, depths[d], 0};
                const lc_example ex = generate(&c, hay_n, 77 + (uint64_t)d, row);
                assert_int_equal(row[0], TOK_BOS);
                assert_int_equal(ex.n_marks, needles);
                check_needle_answer(row, &ex);
                check_window(row, &ex, hay_n);
                if (depths[d] >= 0) {  // within the word-boundary snap (32 tokens)
                    const double want = depths[d] * ex.hay_len;
                    assert_true(ex.hay_before_asked >= want - 1 && ex.hay_before_asked <= want + 32);
                }
                if (compound && needles >= 4) {
                    // each word of the asked key is in another needle's key too
                    char *s = malloc(2049);
                    text_of(row, 0, ex.answer_at, s);
                    char colour[16], object[16], probe[40];
                    sscanf(find_question(s), "\nQ: what are the %15s %15[a-z]", colour, object);
                    snprintf(probe, sizeof probe, "the %s ", colour);
                    int shared_c = 0, shared_o = 0;
                    for (const char *p = strstr(s, probe); p; p = strstr(p + 1, probe)) shared_c++;
                    snprintf(probe, sizeof probe, " %s is ", object);
                    for (const char *p = strstr(s, probe); p; p = strstr(p + 1, probe)) shared_o++;
                    assert_true(shared_c >= 2);  // its own needle and another (the question is "the colour object")
                    assert_true(shared_o >= 2);
                    free(s);
                }
            }
}

static void test_babi(void **state) {
    (void)state;
    const size_t hay_n = 20000;
    int row[4096];
    for (int task = LC_QA1; task <= LC_QA3; task++)
        for (int facts = 4; facts <= 24; facts += 10)
            for (int context = 1536; context <= 4096; context *= 2)
                for (uint64_t seed = 1; seed <= 4; seed++) {
                    lc_config c = {(lc_task)task, context, 0, 0, 0, -1, facts};
                    const lc_example ex = generate(&c, hay_n, seed, row);
                    assert_int_equal(ex.n_marks, facts);
                    for (int k = 1; k < facts; k++) assert_true(ex.mark[k] > ex.mark[k - 1]);
                    check_babi_answer((lc_task)task, row, &ex);
                    check_window(row, &ex, hay_n);
                }
}

static void test_deterministic_and_training_view(void **state) {
    (void)state;
    const size_t hay_n = 5000;
    int a[512], b[512], tok[511], tgt[511];
    char err[256];
    lc_config c = {LC_NEEDLE, 512, 3, 1, 1, 0.5, 0};
    lc_example ea, eb;
    uint64_t r1 = 5, r2 = 5, r3 = 6;
    assert_int_equal(lc_generate(&c, hay, hay_n, &r1, a, &ea, err, sizeof err), 0);
    assert_int_equal(lc_generate(&c, hay, hay_n, &r2, b, &eb, err, sizeof err), 0);
    assert_memory_equal(a, b, sizeof a);
    assert_int_equal(r1, r2);
    assert_int_equal(lc_generate(&c, hay, hay_n, &r3, b, &eb, err, sizeof err), 0);
    assert_true(memcmp(a, b, sizeof a) != 0);
    lc_training_view(a, &ea, 1, tok, tgt);
    for (int t = 0; t + 1 < ea.len; t++) {
        assert_int_equal(tok[t], a[t]);
        assert_int_equal(tgt[t], t + 1 < ea.answer_at ? -1 : a[t + 1]);
    }
    lc_training_view(a, &ea, 0, tok, tgt);
    for (int t = 0; t + 1 < ea.len; t++) assert_int_equal(tgt[t], a[t + 1]);
}

// The shortest context lc_config_check accepts holds every example of that config: its bound on
// the inserted text, the question and the answer is a bound.
static void test_shortest_context(void **state) {
    (void)state;
    const size_t hay_n = 5000;
    int row[1024];
    for (int task = LC_NEEDLE; task <= LC_QA3; task++)
        for (int compound = 0; compound <= (task == LC_NEEDLE); compound++)
            for (int k = 1; k <= 6; k++)
                for (int q = 1; q <= (task == LC_NEEDLE ? k : 1); q++) {
                    lc_config c = {(lc_task)task, 64, k, q, compound, -1, k + 3};
                    while (lc_config_check(&c, NULL, 0)) c.context++;
                    for (uint64_t seed = 0; seed < 20; seed++) generate(&c, hay_n, seed, row);
                }
}

static void test_errors(void **state) {
    (void)state;
    const size_t hay_n = 5000;
    int row[8192];
    char err[256];
    lc_example ex;
    uint64_t rng = 1;
    const lc_config bad[] = {
        {LC_NEEDLE, 1024, 0, 1, 0, 0.5, 0},   // no needles
        {LC_NEEDLE, 1024, 3, 4, 0, 0.5, 0},   // more queries than needles
        {LC_NEEDLE, 1024, 33, 1, 0, 0.5, 0},  // too many needles
        {LC_NEEDLE, 1024, 3, 1, 0, 1.5, 0},   // depth past the end
        {LC_NEEDLE, 100, 8, 1, 0, 0.5, 0},    // context too short for 8 needles
        {LC_QA3, 1024, 0, 0, 0, -1, 2},       // qa3 needs 4 facts
        {LC_QA1, 1024, 0, 0, 0, -1, 65},      // too many facts
        {(lc_task)7, 1024, 0, 0, 0, -1, 4},   // no such task
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_int_equal(lc_generate(&bad[i], hay, hay_n, &rng, row, &ex, err, sizeof err), -1);
        assert_true(strlen(err) > 0);
    }
    lc_config big = {LC_NEEDLE, 8000, 2, 1, 0, 0.5, 0};  // haystack shorter than the context
    assert_int_equal(lc_generate(&big, hay, hay_n, &rng, row, &ex, err, sizeof err), -1);
    assert_non_null(strstr(err, "haystack"));
    assert_int_equal(lc_task_from_name("qa2"), LC_QA2);
    assert_int_equal(lc_task_from_name("qa4"), -1);
    assert_string_equal(lc_task_name(LC_NEEDLE), "needle");
}

// A haystack that repeats an asked sentence everywhere cannot give a clean window: refused.
static void test_polluted_haystack(void **state) {
    (void)state;
    const char *unit = "the falcon is bobob. the lantern is dadad. ";
    const size_t m = strlen(unit), hay_n = 4000;
    uint32_t *polluted = malloc(hay_n * sizeof *polluted);
    for (size_t i = 0; i < hay_n; i++) polluted[i] = (unsigned char)unit[i % m];
    int row[1024];
    char err[256];
    lc_example ex;
    // one-word keys: with 32 needles every key of the list is used, falcon among them
    lc_config c = {LC_NEEDLE, 3000, 32, 32, 0, -1, 0};
    int *big = malloc((size_t)c.context * sizeof *big);
    uint64_t rng = 3;
    assert_int_equal(lc_generate(&c, polluted, hay_n, &rng, big, &ex, err, sizeof err), -1);
    assert_non_null(strstr(err, "copy"));
    (void)row;
    free(big);
    free(polluted);
}

// The training mixture: its parse, the shortest sequence that fits, and sequences that are
// deterministic in their seed, answer-only in their loss, and of the tasks asked.
static void test_mixture(void **state) {
    (void)state;
    lc_mix m;
    int min_T;
    char err[256];
    assert_int_equal(lc_mix_parse("needle,qa1,qa2,qa3", "answer", &m, &min_T, err, sizeof err), 0);
    assert_int_equal(m.n_tasks, 4);
    assert_int_equal(m.answers_only, 1);
    int needle_T;
    assert_int_equal(lc_mix_parse("needle", "all", &m, &needle_T, err, sizeof err), 0);
    assert_true(needle_T < min_T);
    assert_int_equal(lc_mix_parse("needle,needle", "all", &m, &min_T, err, sizeof err), -1);
    assert_int_equal(lc_mix_parse("qa5", "all", &m, &min_T, err, sizeof err), -1);
    assert_int_equal(lc_mix_parse("qa1", "most", &m, &min_T, err, sizeof err), -1);
    assert_int_equal(lc_mix_parse("", "all", &m, &min_T, err, sizeof err), -1);

    const size_t hay_n = 20000;
    int tok[300], tgt[300], tok2[300], tgt2[300];
    lc_mix all;
    assert_int_equal(lc_mix_parse("needle,qa1,qa2,qa3,copy", "all", &all, &min_T, err, sizeof err), 0);
    assert_int_equal(lc_mix_parse("needle,qa1,qa2,qa3,copy", "answer", &m, &min_T, err, sizeof err), 0);
    assert_int_equal(lc_mix_sequence(&m, hay, hay_n, 99, min_T - 1, tok, tgt, err, sizeof err), -1);  // too short
    int saw_q = 0, saw_copy = 0, first_bos = 300, last_bos = 0, ends_early = 0, ends_last = 0;
    for (uint64_t seed = 0; seed < 600; seed++) {
        const int T = seed % 3 == 0 ? min_T : seed % 3 == 1 ? 256 : 300;  // every length that may end short
        // the caller's language-modelling text and targets, which the positions around the example
        // keep: the text always, the targets with the loss on all tokens
        for (int t = 0; t < 300; t++) tok[t] = tok2[t] = 'Z', tgt[t] = tgt2[t] = 'Y';
        assert_int_equal(lc_mix_sequence(seed % 2 ? &all : &m, hay, hay_n, seed, T, tok, tgt, err, sizeof err), 0);
        assert_int_equal(lc_mix_sequence(seed % 2 ? &all : &m, hay, hay_n, seed, T, tok2, tgt2, err, sizeof err), 0);
        assert_memory_equal(tok, tok2, sizeof tok);
        assert_memory_equal(tgt, tgt2, sizeof tgt);
        int bos = 0;
        while (bos < T && tok[bos] == 'Z') bos++;
        assert_true(bos < T);
        assert_int_equal(tok[bos], TOK_BOS);
        for (int t = 0; t < bos; t++) assert_int_equal(tgt[t], seed % 2 && t + 1 < bos ? 'Y' : -1);
        first_bos = bos < first_bos ? bos : first_bos, last_bos = bos > last_bos ? bos : last_bos;
        int end = bos;  // the answer's EOS target ends the example; the caller's text follows it
        while (end < T && tgt[end] != TOK_EOS) end++;
        assert_true(end < T);
        for (int t = end + 1; t < T; t++) assert_true(tok[t] == 'Z' && tgt[t] == (seed % 2 ? 'Y' : -1));
        ends_early |= end < T - 1, ends_last |= end == T - 1;
        for (int t = bos; seed % 2 && t < end; t++) assert_true(tgt[t] == tok[t + 1]);
        if (seed % 2) continue;
        int first = bos;  // answers only: -1 up to the answer, then the answer (the next tokens)
        while (first < end && tgt[first] == -1) first++;
        assert_true(first > bos && first < end);
        for (int t = first; t < end; t++) assert_true(tgt[t] >= 0 && tgt[t] == tok[t + 1]);
        // the prompt ends after "A: " (bAbI), in "A: the KEY is " (needles) or in the copy's cue
        int a = first;
        while (a > bos + 1 && !(tok[a] == ' ' && tok[a - 1] == ':' && tok[a - 2] == 'A')) a--;
        assert_true(first - a <= 24);
        saw_q |= a > bos + 1;
        saw_copy |= first - a == 12;
    }
    assert_true(first_bos < last_bos);  // the examples start at different places
    assert_true(ends_early && ends_last);  // and end at different places: the EOS is not by position
    assert_true(saw_copy);
    assert_true(saw_q);
}

// ---- scoring --------------------------------------------------------------------------------------

// An answerer that reads the expected answer from the row (which holds it after the prompt) and
// answers example i (counted over all batches) right when i % 4 == 0; with a wrong first token
// when 1; stopping one token early (EOS in place of the answer's last token) when 2; never
// stopping (the answer, then 'x' forever) when 3.
typedef struct {
    const int *rows;
    int B, L, started, steps, longest;
    int pos[64], kind[64], lens[64];
} oracle;

static int oracle_token(const oracle *o, int b) {
    const int *row = o->rows + (size_t)b * o->L, p = o->pos[b];
    const int eos_at = o->L - 1;  // the row ends with the answer's EOS
    switch (o->kind[b]) {
    case 0: return p <= eos_at ? row[p] : 'x';
    case 1: return p == o->lens[b] ? (row[p] == 'q' ? 'z' : 'q') : row[p];
    case 2: return p == eos_at - 1 ? TOK_EOS : p <= eos_at ? row[p] : 'x';
    default: return p < eos_at ? row[p] : 'x';
    }
}

static int oracle_start(void *arg, const int *rows, int B, int L, const int *lens, int *greedy, char *err, size_t n) {
    oracle *o = arg;
    assert_true(B <= 64);
    o->rows = rows, o->B = B, o->L = L, o->steps = 0;
    for (int b = 0; b < B; b++) {
        assert_int_equal(rows[(size_t)b * L + L - 1], TOK_EOS);
        o->lens[b] = o->pos[b] = lens[b], o->kind[b] = (o->started + b) % 4;
        const int al = L - lens[b];
        o->longest = al > o->longest ? al : o->longest;
        greedy[b] = oracle_token(o, b);
    }
    o->started += B;
    return 0;
}

static int oracle_step(void *arg, const int *tokens, int *greedy, char *err, size_t n) {
    oracle *o = arg;
    assert_true(++o->steps <= o->longest + 1);  // the scorer stops past the longest answer
    for (int b = 0; b < o->B; b++) {
        o->pos[b]++;
        greedy[b] = oracle_token(o, b);
        // the token fed is the one the answerer gave, or PAD once the example is done
        assert_true(tokens[b] == TOK_PAD || tokens[b] == o->rows[(size_t)b * o->L + o->pos[b] - 1] ||
                    tokens[b] == 'x' || tokens[b] == 'q' || tokens[b] == 'z');
    }
    return 0;
}

// What the hooks heard: the examples done, and per example whether it was right and what it got.
typedef struct {
    int done, answered, correct[16], n_got[16], got_last[16], got_first[16], expected_first[16];
} heard;

static void count_done(void *arg, int done) { ((heard *)arg)->done = done; }

static void on_answered(void *arg, int i, const int *expected, int n_expected, const int *got, int n_got, int correct) {
    heard *h = arg;
    assert_int_equal(i, h->answered++);  // in order, each once
    assert_true(i < 16 && n_expected > 1 && expected[n_expected - 1] == TOK_EOS && n_got >= 1 && n_got <= n_expected + 1);
    h->correct[i] = correct, h->n_got[i] = n_got - n_expected, h->got_last[i] = got[n_got - 1];
    h->got_first[i] = got[0], h->expected_first[i] = expected[0];
}

static void test_scoring(void **state) {
    (void)state;
    const size_t hay_n = 20000;
    char err[256];
    const lc_config cs[] = {{LC_NEEDLE, 300, 3, 1, 1, 0.5, 0}, {LC_NEEDLE, 400, 4, 3, 0, -1, 0}, {LC_QA2, 300, 0, 0, 0, -1, 4}};
    for (int k = 0; k < 3; k++)
        for (int batch = 1; batch <= 7; batch += 3) {
            oracle o = {0};
            const lc_answerer a = {oracle_start, oracle_step, &o};
            lc_score sc;
            heard h = {0};
            const lc_eval_hooks hooks = {count_done, on_answered, &h};
            assert_int_equal(lc_score_answers(&a, &cs[k], hay, hay_n, 5, 13, batch, &sc, &hooks, err, sizeof err), 0);
            assert_int_equal(sc.total, 13);
            assert_int_equal(sc.correct, 4);    // examples 0, 4, 8, 12
            assert_int_equal(sc.retrieved, 7);  // and those that run on past the answer: 3, 7, 11
            assert_int_equal(h.done, 13);
            assert_int_equal(h.answered, 13);
            assert_int_equal(o.started, 13);
            for (int i = 0; i < 13; i++) {
                assert_int_equal(h.correct[i], i % 4 == 0);
                // what each got: the answer; a wrong first token, then the rest; one token short;
                // the answer without EOS and one more token, where the scorer stops it
                const int len_diff[4] = {0, 0, -1, 1}, last[4] = {TOK_EOS, TOK_EOS, TOK_EOS, 'x'};
                assert_int_equal(h.n_got[i], len_diff[i % 4]);
                assert_int_equal(h.got_last[i], last[i % 4]);
                assert_true((h.got_first[i] == h.expected_first[i]) == (i % 4 != 1));
            }
        }
    oracle o = {0};
    const lc_answerer a = {oracle_start, oracle_step, &o};
    lc_score sc;
    assert_int_equal(lc_score_answers(&a, &cs[0], hay, hay_n, 5, 0, 1, &sc, NULL, err, sizeof err), -1);
}

// ---- a run with its own tokenizer ---------------------------------------------------------------

// The haystack in the ids of a small byte-level BPE (tests/fixtures/tiny_bpe), decoded back.
static tokenizer *text_haystack(size_t hay_n, lc_text *h) {
    char err[256];
    tokenizer *t = tokenizer_load_run("tests/fixtures/tiny_bpe", err, sizeof err);
    if (!t) fail_msg("%s", err);
    char *s = malloc(hay_n + 1);
    for (size_t i = 0; i < hay_n; i++) s[i] = (char)hay[i];
    int32_t *ids;
    size_t n_ids;
    assert_int_equal(tokenizer_encode(t, s, hay_n, 0, &ids, &n_ids, err, sizeof err), 0);
    uint32_t *u = malloc(n_ids * sizeof *u);
    for (size_t i = 0; i < n_ids; i++) u[i] = (uint32_t)ids[i];
    if (lc_text_haystack(t, u, n_ids, h, err, sizeof err)) fail_msg("%s", err);
    assert_true(h->text_n == hay_n && h->tok == t);
    for (size_t i = 0; i < hay_n; i++) assert_int_equal(h->text[i], hay[i]);
    assert_true(h->bytes_per_token > 1 && h->bytes_per_token * (double)n_ids == (double)hay_n);
    // an id past the vocabulary: a shard of another tokenizer
    u[7] = (uint32_t)tokenizer_vocab_size(t);
    lc_text bad;
    assert_int_equal(lc_text_haystack(t, u, n_ids, &bad, err, sizeof err), -1);
    assert_non_null(strstr(err, "another tokenizer"));
    free(u), free(ids), free(s);
    return t;
}

static char *decoded(const tokenizer *t, const int *ids, int n) {
    int32_t *v = malloc(((size_t)n + 1) * sizeof *v);
    for (int i = 0; i < n; i++) v[i] = ids[i];
    char *s = tokenizer_decode(t, v, (size_t)n, 1, NULL, NULL, 0);
    free(v);
    assert_non_null(s);
    return s;
}

// One example of c in the tokenizer, checked against lc_generate's text at the byte context it
// says: it fits c->context with room for the greedy answer (and is no shorter than half of it);
// the prompt's ids decode to that text's prompt without the space before the answer; the
// expected text is that space and the answer without its full stop; the same again from seed.
static void check_text_example(const lc_config *c, const lc_text *h, uint64_t seed) {
    char err[256];
    int *prompt = malloc((size_t)c->context * sizeof *prompt), *again = malloc((size_t)c->context * sizeof *again);
    lc_text_example ex, ex2;
    memset(&ex, 0, sizeof ex), memset(&ex2, 0, sizeof ex2);  // compared whole below
    uint64_t rng = seed, rng2 = seed;
    if (lc_text_generate(c, h, &rng, prompt, &ex, err, sizeof err)) fail_msg("%s", err);
    const int total = ex.n_prompt + ex.n_answer + LC_TEXT_SLACK;
    assert_true(total <= c->context && 2 * total > c->context);
    lc_config cb = *c;
    cb.context = ex.byte_context;
    int *row = malloc((size_t)ex.byte_context * sizeof *row);
    lc_example bx = generate(&cb, h->text_n, seed, row);
    char *text = malloc((size_t)bx.len + 2), *p = decoded(h->tok, prompt, ex.n_prompt);
    text_of(row, 1, bx.answer_at - 1, text);
    assert_int_equal(row[bx.answer_at - 1], ' ');
    assert_string_equal(p, text);
    text[0] = ' ';
    text_of(row, bx.answer_at, bx.len - 1, text + 1);  // " kobal."
    char *a = decoded(h->tok, ex.answer, ex.n_answer);
    assert_string_equal(a, text);
    assert_int_equal(ex.answer[ex.n_answer - 1], tokenizer_eos_id(h->tok, 0));
    if (c->task == LC_NEEDLE) text[strlen(text) - 1] = 0;  // the full stop
    assert_string_equal(ex.expected, text);
    assert_int_equal(lc_text_generate(c, h, &rng2, again, &ex2, err, sizeof err), 0);
    assert_true(rng2 == rng && !memcmp(&ex, &ex2, sizeof ex) && !memcmp(prompt, again, (size_t)ex.n_prompt * sizeof *prompt));
    free(row), free(text), free(p), free(a), free(prompt), free(again);
}

static void test_text_examples(void **state) {
    (void)state;
    char err[256];
    lc_text h;
    tokenizer *t = text_haystack(HAY_MAX, &h);
    const int contexts[] = {160, 300, 1000};
    for (int k = 0; k < 3; k++) {
        const lc_config cs[] = {{LC_NEEDLE, contexts[k], 4, 1, 0, 0.5, 0},
                                {LC_NEEDLE, contexts[k], 4, 2, 1, -1, 0},
                                {LC_QA1, contexts[k], 0, 0, 0, -1, 3}};
        for (int j = 0; j < 3; j++)
            for (uint64_t seed = 1; seed <= 8; seed++) check_text_example(&cs[j], &h, seed * 7919 + (uint64_t)k);
    }
    // a context too short for the needles in these tokens; a haystack too short; copy
    int prompt[4096];
    lc_text_example ex;
    uint64_t rng = 3;
    const lc_config tiny = {LC_NEEDLE, 40, 4, 1, 0, 0.5, 0}, copy = {LC_COPY, 300, 0, 0, 0, -1, 0};
    assert_int_equal(lc_text_generate(&tiny, &h, &rng, prompt, &ex, err, sizeof err), -1);
    assert_non_null(strstr(err, "too short for the question and its 4 needles"));
    assert_int_equal(lc_text_generate(&copy, &h, &rng, prompt, &ex, err, sizeof err), -1);
    assert_non_null(strstr(err, "byte-level runs only"));
    lc_text small = h;
    small.text_n = 500;
    const lc_config long_one = {LC_NEEDLE, 1000, 4, 1, 0, 0.5, 0};
    assert_int_equal(lc_text_generate(&long_one, &small, &rng, prompt, &ex, err, sizeof err), -1);
    assert_non_null(strstr(err, "haystack of 500 bytes"));
    lc_text_free(&h);
    tokenizer_free(t);
}

// Scoring an answer's text: the expected words, then no letter or digit.
static void test_text_judge(void **state) {
    (void)state;
    char err[256];
    tokenizer *t = tokenizer_load_run("tests/fixtures/tiny_bpe", err, sizeof err);
    assert_non_null(t);
    const int eos = tokenizer_eos_id(t, 0), past = tokenizer_vocab_size(t);
    const struct {
        const char *text;
        int extra, right, retrieved;  // extra: an id after the text (-1: none)
    } cases[] = {{" kobal.", eos, 1, 1}, {" kobal", eos, 1, 1}, {" kobal", -1, 1, 1}, {" kobal and", -1, 1, 1},
                 {" kobalt", -1, 0, 1},  {" kobal7", eos, 0, 1}, {" kob", eos, 0, 0},  {"kobal.", -1, 0, 0},
                 {" kobal", past, 1, 1}, {" Kobal", -1, 0, 0}};
    int32_t *tail;
    size_t n_tail;
    assert_int_equal(tokenizer_encode(t, "A: the door is", 14, 0, &tail, &n_tail, err, sizeof err), 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int32_t *ids;
        size_t n_ids;
        assert_int_equal(tokenizer_encode(t, cases[k].text, strlen(cases[k].text), 0, &ids, &n_ids, err, sizeof err), 0);
        int got[64], n_got = 0, retrieved = -1;
        for (size_t i = 0; i < n_ids; i++) got[n_got++] = ids[i];
        if (cases[k].extra >= 0) got[n_got++] = cases[k].extra;
        if (cases[k].extra == past) got[n_got++] = 't';  // after an id past the vocabulary: not text
        const int right = lc_text_judge(t, tail[n_tail - 1], " kobal", got, n_got, &retrieved);
        if (right != cases[k].right || retrieved != cases[k].retrieved)
            fail_msg("'%s': right %d retrieved %d", cases[k].text, right, retrieved);
        free(ids);
    }
    free(tail);
    tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_needles),
        cmocka_unit_test(test_babi),
        cmocka_unit_test(test_deterministic_and_training_view),
        cmocka_unit_test(test_shortest_context),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_polluted_haystack),
        cmocka_unit_test(test_mixture),
        cmocka_unit_test(test_scoring),
        cmocka_unit_test(test_text_examples),
        cmocka_unit_test(test_text_judge),
    };
    return cmocka_run_group_tests(tests, make_the_hay, free_the_hay);
}
