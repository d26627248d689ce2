// longctx.c: the long-context retrieval tasks (see longctx.h, docs/longctx.md).
#include "data/longctx.h"
#include "data/tokenizer.h"
#include "util/errmsg.h"
#include "util/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Word lists. One-word keys and the compound keys' words are everyday nouns and colours; values
// are made-up words; the bAbI people are names the King James Bible does not hold, so that a fact
// about them can only come from the facts.
static const char *const NOUNS[] = {"falcon", "lantern", "cellar", "kettle", "ribbon", "compass", "violin", "pebble",
                                    "harbor", "meadow", "blanket", "candle", "saddle", "whistle", "mirror", "basket",
                                    "feather", "anchor", "ladder", "button", "carpet", "helmet", "pillow", "rocket",
                                    "tunnel", "wagon", "barrel", "jacket", "marble", "cactus", "parrot", "walnut"};
static const char *const COLOURS[] = {"red", "blue", "green", "black", "white", "yellow", "purple", "orange"};
static const char *const OBJECTS[] = {"door", "lamp", "box", "cup", "chair", "key", "bell", "coat"};
static const char *const PEOPLE[] = {"Sandra", "Fred", "Bill", "Julie", "Emma", "Oliver", "Greta", "Hugo"};
static const char *const PLACES[] = {"kitchen", "garden", "office", "hallway", "bathroom", "bedroom", "cellar", "attic"};
static const char *const THINGS[] = {"apple", "football", "milk", "book", "umbrella", "hat"};
enum { N_NOUNS = 32, N_COLOURS = 8, N_OBJECTS = 8, N_PEOPLE = 8, N_PLACES = 8, N_THINGS = 6 };

static const char *const TASK_NAMES[] = {"needle", "qa1", "qa2", "qa3", "copy"};

int lc_task_from_name(const char *name) {
    for (int t = 0; t < 5; t++)
        if (!strcmp(name, TASK_NAMES[t])) return t;
    return -1;
}
const char *lc_task_name(lc_task t) { return t >= LC_NEEDLE && t <= LC_COPY ? TASK_NAMES[t] : "unknown"; }

static int below(uint64_t *rng, int n) { return (int)(splitmix64(rng) % (uint64_t)n); }

// The longest texts, for lc_config_check: a bAbI fact "Oliver dropped the football. ", its question
// and answer; for needles, from the longest key (K tokens) and a five-letter value:
//   needle   "the KEY is kobal. "                                   K + 15
//   question "\nQ: what are " "? A: the KEY is " and "kobal."        26 + K + 6
//   per key  "the KEY" and ", " or " and " in the question          K + 9
//            " the KEY is kobal." in the answer (all but the first)  K + 15
enum { MAX_INSERT = 40, MAX_QA_FIXED = 40, MAX_QA_PER_KEY = 40 };

static int longest_key(int compound) {
    size_t k = 0;
    if (compound) {
        size_t c = 0, o = 0;
        for (int i = 0; i < N_COLOURS; i++) c = strlen(COLOURS[i]) > c ? strlen(COLOURS[i]) : c;
        for (int i = 0; i < N_OBJECTS; i++) o = strlen(OBJECTS[i]) > o ? strlen(OBJECTS[i]) : o;
        k = c + 1 + o;
    } else
        for (int i = 0; i < N_NOUNS; i++) k = strlen(NOUNS[i]) > k ? strlen(NOUNS[i]) : k;
    return (int)k;
}

// The fewest facts that can support a question: a move (qa1); a move, a take and a move (qa2); and
// one more move for qa3 (the thing must have been in two places before its last).
static int least_facts(lc_task t) { return t == LC_QA1 ? 1 : t == LC_QA2 ? 3 : 4; }

int lc_config_check(const lc_config *c, char *err, size_t n) {
    if (c->task < LC_NEEDLE || c->task > LC_COPY) return errmsg(err, n, "unknown task %d", (int)c->task);
    if (c->task == LC_COPY) return c->context < 64 ? errmsg(err, n, "context %d tokens: copy needs at least 64", c->context) : 0;
    int inserts;
    if (c->task == LC_NEEDLE) {
        if (c->n_needles < 1 || c->n_needles > LC_MAX_NEEDLES)
            return errmsg(err, n, "needles: %d, expected 1 to %d", c->n_needles, LC_MAX_NEEDLES);
        if (c->n_queries < 1 || c->n_queries > c->n_needles)
            return errmsg(err, n, "queries: %d, expected 1 to the number of needles (%d)", c->n_queries, c->n_needles);
        if (c->compound && c->n_needles > N_COLOURS * N_OBJECTS)
            return errmsg(err, n, "compound keys: at most %d needles", N_COLOURS * N_OBJECTS);
        if (!c->compound && c->n_needles > N_NOUNS) return errmsg(err, n, "one-word keys: at most %d needles", N_NOUNS);
        if (!(c->depth <= 1.0)) return errmsg(err, n, "depth %g: expected a fraction in [0, 1], or < 0 for any", c->depth);
        inserts = c->n_needles;
    } else {
        const int least = least_facts(c->task);
        if (c->n_facts < least || c->n_facts > LC_MAX_FACTS)
            return errmsg(err, n, "%s needs %d to %d facts, not %d", lc_task_name(c->task), least, LC_MAX_FACTS, c->n_facts);
        inserts = c->n_facts;
    }
    const int K = longest_key(c->compound), q = c->n_queries;
    const int need = c->task == LC_NEEDLE ? 2 + inserts * (K + 15) + 32 + K + q * (K + 9) + (q - 1) * (K + 15)
                                          : 2 + inserts * MAX_INSERT + MAX_QA_FIXED + MAX_QA_PER_KEY;
    if (c->context < need || c->context < 64)
        return errmsg(err, n, "context %d tokens: too short for the question and its %d %s (at least %d)", c->context,
                      inserts, c->task == LC_NEEDLE ? "needles" : "facts", need > 64 ? need : 64);
    return 0;
}

// ---- what goes into the haystack ----------------------------------------------------------------

typedef struct {
    char text[LC_MAX_FACTS][64];  // the inserts, in order of position
    int n;
    int asked;                    // the insert the depth applies to (needles), -1 for anywhere
    char question[512], answer[256];
    char unique[LC_MAX_FACTS + LC_MAX_NEEDLES][64];  // strings that must occur exactly once
    int n_unique;
} plan;

static void made_up_word(uint64_t *rng, char *w) {
    static const char cons[] = "bdfgklmnprstvz", vow[] = "aeiou";
    for (int i = 0; i < 5; i++) w[i] = i % 2 ? vow[below(rng, 5)] : cons[below(rng, 14)];
    w[5] = 0;
}

static void plan_needles(const lc_config *c, uint64_t *rng, plan *p) {
    const int N = c->n_needles;
    char keys[LC_MAX_NEEDLES][32], vals[LC_MAX_NEEDLES][8];
    int used[N_COLOURS * N_OBJECTS] = {0};
    if (c->compound) {
        // a kc x ko grid of colours and objects, as square as N allows, so that keys share words
        int kc = 1;
        while (kc * kc < N) kc++;
        const int ko = (N + kc - 1) / kc;
        int col[N_COLOURS], obj[N_OBJECTS];
        for (int i = 0; i < N_COLOURS; i++) col[i] = i;
        for (int i = 0; i < N_OBJECTS; i++) obj[i] = i;
        for (int i = N_COLOURS - 1; i > 0; i--) { int j = below(rng, i + 1), t = col[i]; col[i] = col[j], col[j] = t; }
        for (int i = N_OBJECTS - 1; i > 0; i--) { int j = below(rng, i + 1), t = obj[i]; obj[i] = obj[j], obj[j] = t; }
        for (int i = 0; i < N; i++) {
            int cell;
            do cell = below(rng, kc * ko);
            while (used[cell]);
            used[cell] = 1;
            snprintf(keys[i], sizeof keys[i], "%s %s", COLOURS[col[cell / ko]], OBJECTS[obj[cell % ko]]);
        }
    } else {
        int pick[N_NOUNS];
        for (int i = 0; i < N_NOUNS; i++) pick[i] = i;
        for (int i = 0; i < N; i++) {
            int j = i + below(rng, N_NOUNS - i), t = pick[i];
            pick[i] = pick[j], pick[j] = t;
            snprintf(keys[i], sizeof keys[i], "%s", NOUNS[pick[i]]);
        }
    }
    for (int i = 0; i < N; i++) {
        int fresh;
        do {
            made_up_word(rng, vals[i]);
            fresh = 1;
            for (int j = 0; j < i; j++) fresh &= strcmp(vals[i], vals[j]) != 0;
        } while (!fresh);
        snprintf(p->text[i], sizeof p->text[i], "the %.31s is %.7s. ", keys[i], vals[i]);
    }
    p->n = N, p->asked = 0, p->n_unique = 0;
    // the asked keys are needles 0 .. n_queries-1 (the needles go in at random places anyway). The
    // prompt ends with the first asked needle's own words, "A: the KEY is ", so the answer is a
    // cloze: the value and its full stop follow the same words as in the needle (an induction
    // head's pattern, which would copy the full stop too); further asked keys are answered with
    // their needles' sentences, " the KEY is VALUE.".
    size_t q = (size_t)snprintf(p->question, sizeof p->question, "\nQ: what %s ", c->n_queries > 1 ? "are" : "is");
    size_t a = 0;
    p->answer[0] = 0;
    for (int i = 0; i < c->n_queries; i++) {
        q += (size_t)snprintf(p->question + q, sizeof p->question - q, "%sthe %s", i ? (i + 1 == c->n_queries ? " and " : ", ") : "",
                              keys[i]);
        if (i) a += (size_t)snprintf(p->answer + a, sizeof p->answer - a, " the %s is ", keys[i]);
        a += (size_t)snprintf(p->answer + a, sizeof p->answer - a, "%s.", vals[i]);
        snprintf(p->unique[p->n_unique++], sizeof p->unique[0], "the %s is ", keys[i]);
    }
    snprintf(p->question + q, sizeof p->question - q, "? A: the %s is ", keys[0]);
    for (int i = 0; i < N; i++) snprintf(p->unique[p->n_unique++], sizeof p->unique[0], " %.7s.", vals[i]);
}

// The bAbI world: where each person is (-1: nowhere yet), who holds each thing (-1: nobody) and
// where each thing is; every fact is a move, a take or a drop that the world allows.
static int plan_babi(const lc_config *c, uint64_t *rng, plan *p) {
    int at[N_PEOPLE], holder[N_THINGS], thing_at[N_THINGS], hist[N_THINGS][LC_MAX_FACTS + 1], n_hist[N_THINGS];
    for (int i = 0; i < N_PEOPLE; i++) at[i] = -1;
    for (int i = 0; i < N_THINGS; i++) holder[i] = thing_at[i] = -1, n_hist[i] = 0;
    // qa2, qa3: three people and three things, so that even a few facts carry one thing somewhere
    const int people = c->task == LC_QA1 ? N_PEOPLE : 3, things = c->task == LC_QA1 ? N_THINGS : 3;
    for (int f = 0; f < c->n_facts; f++) {
        const int who = below(rng, people), kind = c->task == LC_QA1 || at[who] < 0 ? 0 : below(rng, 3);
        const int t = kind ? below(rng, things) : -1;
        if (t >= 0 && kind == 1 && holder[t] < 0 && (thing_at[t] < 0 || thing_at[t] == at[who])) {  // take
            holder[t] = who;
            if (thing_at[t] != at[who]) thing_at[t] = at[who], hist[t][n_hist[t]++] = at[who];
            snprintf(p->text[f], sizeof p->text[f], "%s took the %s. ", PEOPLE[who], THINGS[t]);
        } else if (t >= 0 && holder[t] == who) {  // drop
            holder[t] = -1;
            snprintf(p->text[f], sizeof p->text[f], "%s dropped the %s. ", PEOPLE[who], THINGS[t]);
        } else {  // a move (also when there is nothing to take or drop); things held move along
            int to;
            do to = below(rng, N_PLACES);
            while (to == at[who]);
            at[who] = to;
            snprintf(p->text[f], sizeof p->text[f], "%s went to the %s. ", PEOPLE[who], PLACES[to]);
            for (int u = 0; u < N_THINGS; u++)
                if (holder[u] == who) thing_at[u] = to, hist[u][n_hist[u]++] = to;
        }
    }
    p->n = c->n_facts, p->asked = -1, p->n_unique = 0;
    // the question: about one person (qa1), or one thing that was carried from one place to another
    // (qa2: at least two facts place it; qa3: it has been in two places at least)
    int cand[N_PEOPLE > N_THINGS ? N_PEOPLE : N_THINGS], nc = 0;
    if (c->task == LC_QA1) {
        for (int i = 0; i < people; i++)
            if (at[i] >= 0) cand[nc++] = i;
        if (!nc) return -1;
        const int i = cand[below(rng, nc)];
        snprintf(p->question, sizeof p->question, "\nQ: Where is %s? A: ", PEOPLE[i]);
        snprintf(p->answer, sizeof p->answer, "%s", PLACES[at[i]]);
        return 0;
    }
    for (int t = 0; t < N_THINGS; t++)
        if (c->task == LC_QA2 ? thing_at[t] >= 0 && n_hist[t] >= 2 : n_hist[t] >= 2) cand[nc++] = t;
    if (!nc) return -1;
    const int t = cand[below(rng, nc)];
    if (c->task == LC_QA2) {
        snprintf(p->question, sizeof p->question, "\nQ: Where is the %s? A: ", THINGS[t]);
        snprintf(p->answer, sizeof p->answer, "%s", PLACES[thing_at[t]]);
    } else {
        // the place it was in before it last came to its last place
        const int last = hist[t][n_hist[t] - 1];
        int before = -1;
        for (int k = n_hist[t] - 2; k >= 0 && before < 0; k--)
            if (hist[t][k] != last) before = hist[t][k];
        if (before < 0) return -1;
        snprintf(p->question, sizeof p->question, "\nQ: Where was the %s before the %s? A: ", THINGS[t], PLACES[last]);
        snprintf(p->answer, sizeof p->answer, "%s", PLACES[before]);
    }
    return 0;
}

// ---- assembling an example --------------------------------------------------------------------

static int put_text(int *row, int at, const char *s) {
    for (; *s; s++) row[at++] = (unsigned char)*s;
    return at;
}

// Occurrences of s in row[0 .. len) (special tokens match nothing).
static int count_in(const int *row, int len, const char *s) {
    const int m = (int)strlen(s);
    int count = 0;
    for (int i = 0; i + m <= len; i++) {
        int k = 0;
        while (k < m && row[i + k] == (unsigned char)s[k]) k++;
        count += k == m;
    }
    return count;
}

// The first word boundary at or after p in hay[w0 .. w0+H) (a position after a space or a line
// break), looking at most 32 tokens on; p itself when there is none.
static int snap(const uint32_t *hay, size_t w0, int H, int p) {
    for (int q = p; q <= H && q < p + 32; q++)
        if (q == 0 || q == H || hay[w0 + q - 1] == ' ' || hay[w0 + q - 1] == '\n') return q;
    return p;
}

static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

// copy: <bos> window \nQ: go on. A: a random span's first CUE tokens, then (the answer) the
// span's next ones <eos>. The span starts anywhere, so only matching the cue in the window finds
// it (not a fixed offset).
static int generate_copy(const lc_config *c, const uint32_t *hay, size_t hay_n, uint64_t *rng, int *row, lc_example *ex,
                         char *err, size_t n) {
    static const char question[] = "\nQ: go on. A: ";
    enum { CUE = 12 };
    const int rest = c->context - 2 - (int)strlen(question) - CUE, M = rest / 3, W = rest - M;
    if (hay_n < (size_t)W + 1) return errmsg(err, n, "haystack of %zu tokens: shorter than the %d the context needs", hay_n, W);
    const size_t w0 = (size_t)(splitmix64(rng) % (hay_n - (size_t)W + 1));
    const int s = below(rng, W - CUE - M + 1);
    int at = 0;
    row[at++] = TOK_BOS;
    for (int h = 0; h < W; h++) row[at++] = (int)hay[w0 + h];
    at = put_text(row, at, question);
    for (int h = s; h < s + CUE; h++) row[at++] = (int)hay[w0 + h];
    ex->answer_at = at;
    for (int h = s + CUE; h < s + CUE + M; h++) row[at++] = (int)hay[w0 + h];
    row[at++] = TOK_EOS;
    ex->len = at, ex->n_marks = 0, ex->asked_at = -1, ex->hay_before_asked = -1, ex->hay_len = W;
    return 0;
}

int lc_generate(const lc_config *c, const uint32_t *hay, size_t hay_n, uint64_t *rng, int *row, lc_example *ex,
                char *err, size_t n) {
    if (lc_config_check(c, err, n)) return -1;
    if (c->task == LC_COPY) return generate_copy(c, hay, hay_n, rng, row, ex, err, n);
    plan p;
    int tries = 0;
    while (c->task == LC_NEEDLE ? (plan_needles(c, rng, &p), 0) : plan_babi(c, rng, &p))
        if (++tries == 10000)
            return errmsg(err, n, "%s: no question in 10000 draws of %d facts", lc_task_name(c->task), c->n_facts);
    int fixed = 2 + (int)strlen(p.question) + (int)strlen(p.answer);
    for (int i = 0; i < p.n; i++) fixed += (int)strlen(p.text[i]);
    const int H = c->context - fixed;
    if (H < 0) return errmsg(err, n, "context %d tokens: the question and its inserts need %d", c->context, fixed);
    if (hay_n < (size_t)H + 1) return errmsg(err, n, "haystack of %zu tokens: shorter than the %d the context needs", hay_n, H);
    for (int attempt = 0; attempt < 100; attempt++) {
        const size_t w0 = (size_t)(splitmix64(rng) % (hay_n - (size_t)H + 1));
        // insertion points in the window: the asked needle at its depth, the others anywhere; facts
        // keep their order (the points are sorted, the texts are in fact order)
        int pos[LC_MAX_FACTS], order[LC_MAX_FACTS];
        for (int i = 0; i < p.n; i++) pos[i] = below(rng, H + 1);
        if (p.asked >= 0 && c->depth >= 0) pos[p.asked] = (int)(c->depth * H + 0.5);
        for (int i = 0; i < p.n; i++) pos[i] = snap(hay, w0, H, pos[i]);
        for (int i = 0; i < p.n; i++) order[i] = i;
        if (c->task == LC_NEEDLE) {  // needles: sort by position, keeping which is which
            for (int i = 1; i < p.n; i++)
                for (int j = i; j > 0 && pos[order[j]] < pos[order[j - 1]]; j--) {
                    int t = order[j];
                    order[j] = order[j - 1], order[j - 1] = t;
                }
        } else qsort(pos, (size_t)p.n, sizeof pos[0], cmp_int);
        int at = 0, h = 0;
        row[at++] = TOK_BOS;
        ex->asked_at = -1, ex->hay_before_asked = -1, ex->n_marks = p.n, ex->hay_len = H;
        for (int k = 0; k < p.n; k++) {
            const int i = order[k], where = c->task == LC_NEEDLE ? pos[i] : pos[k];
            for (; h < where; h++) row[at++] = (int)hay[w0 + h];
            ex->mark[k] = at;
            if (i == p.asked) ex->asked_at = at, ex->hay_before_asked = h;
            at = put_text(row, at, p.text[i]);
        }
        for (; h < H; h++) row[at++] = (int)hay[w0 + h];
        const int question_at = at;
        at = put_text(row, at, p.question);
        ex->answer_at = at;
        at = put_text(row, at, p.answer);
        row[at++] = TOK_EOS;
        ex->len = at;
        // before the question: the asked sentences and the values once each; bAbI facts as often as
        // inserted
        int clean = 1;
        for (int u = 0; u < p.n_unique && clean; u++) clean = count_in(row, question_at, p.unique[u]) == 1;
        for (int i = 0; i < p.n && clean && c->task != LC_NEEDLE; i++) {
            int times = 0;
            for (int j = 0; j < p.n; j++) times += !strcmp(p.text[i], p.text[j]);
            char sentence[64];
            snprintf(sentence, sizeof sentence, "%.*s", (int)strlen(p.text[i]) - 1, p.text[i]);  // without the space
            clean = count_in(row, question_at, sentence) == times;
        }
        if (clean) return 0;
    }
    return errmsg(err, n, "no haystack window without a copy of the inserted text in 100 draws");
}

void lc_training_view(const int *row, const lc_example *ex, int answers_only, int *tokens, int *targets) {
    for (int t = 0; t + 1 < ex->len; t++) {
        tokens[t] = row[t];
        targets[t] = answers_only && t + 1 < ex->answer_at ? -1 : row[t + 1];
    }
}

// ---- the training mixture ---------------------------------------------------------------------

// The most needles or facts (up to 4 and 8) whose example fits context tokens; 0 if none.
static int most_that_fit(lc_task t, int context) {
    if (t == LC_COPY) return context >= 64;
    const int lo = t == LC_NEEDLE ? 1 : least_facts(t), hi = t == LC_NEEDLE ? 4 : 8;
    int best = 0;
    for (int k = lo; k <= hi; k++) {
        lc_config c = {t, context, k, 1, 0, -1, k};
        if (!lc_config_check(&c, NULL, 0)) best = k;
    }
    return best;
}

int lc_mix_parse(const char *tasks, const char *loss, lc_mix *m, int *min_seq_len, char *err, size_t n) {
    memset(m, 0, sizeof *m);
    if (!strcmp(loss, "answer")) m->answers_only = 1;
    else if (strcmp(loss, "all")) return errmsg(err, n, "mix_loss: '%s', expected answer or all", loss);
    char buf[128];
    if (strlen(tasks) >= sizeof buf) return errmsg(err, n, "mix_tasks: too long");
    snprintf(buf, sizeof buf, "%s", tasks);
    int longest = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        const int k = lc_task_from_name(t);
        if (k < 0) return errmsg(err, n, "mix_tasks: unknown task '%s' (needle, qa1, qa2, qa3, copy)", t);
        for (int j = 0; j < m->n_tasks; j++)
            if (m->task[j] == (lc_task)k) return errmsg(err, n, "mix_tasks: '%s' twice", t);
        m->task[m->n_tasks++] = (lc_task)k;
        int ctx = 64;
        while (!most_that_fit((lc_task)k, ctx)) ctx++;
        longest = ctx > longest ? ctx : longest;
    }
    if (!m->n_tasks) return errmsg(err, n, "mix_tasks: no task");
    *min_seq_len = longest - 1;  // an example of T + 1 tokens is a sequence of T
    return 0;
}

int lc_mix_sequence(const lc_mix *m, const uint32_t *hay, size_t hay_n, uint64_t seed, int T, int *tokens,
                    int *targets, char *err, size_t n) {
    uint64_t rng = seed;
    const lc_task task = m->task[below(&rng, m->n_tasks)];
    if (!most_that_fit(task, T + 1))
        return errmsg(err, n, "a sequence of %d tokens is too short for %s examples", T, lc_task_name(task));
    // an example of L tokens, L from 64 to T + 1 (at least what one needle or the fewest facts
    // need), so that where the question sits says nothing about its answer
    int L = 64 + below(&rng, T + 1 - 64 + 1), most;
    while (!(most = most_that_fit(task, L))) L++;
    const int lo = task == LC_NEEDLE ? 1 : least_facts(task);
    const int k = lo + below(&rng, most - lo + 1);
    // needles: 1 to k asked; where compound keys make it too long, fewer asked, then fewer
    // needles, then one-word keys (one needle with a one-word key fits: most_that_fit)
    lc_config c = {task, L, k, task == LC_NEEDLE ? 1 + below(&rng, k) : 1, below(&rng, 2), -1, k};
    while (lc_config_check(&c, NULL, 0)) {
        if (c.n_queries > 1) c.n_queries--;
        else if (c.n_needles > 1) c.n_needles--;
        else c.compound = 0;
    }
    int *row = malloc((size_t)L * sizeof *row);
    if (!row) return errmsg(err, n, "out of memory");
    lc_example ex;
    const int rc = lc_generate(&c, hay, hay_n, &rng, row, &ex, err, n);
    if (!rc) {
        // The example goes anywhere in the sequence: the caller's text before it (head tokens) and
        // after its EOS. When examples always ended the sequence, the answer's EOS was always the
        // sequence's last position, and MTA models learned to stop there (by position) instead of
        // after the value: they answered "kobal. t..." at other lengths.
        const int head = below(&rng, T + 1 - L + 1), tail = head + L - 1;
        lc_training_view(row, &ex, m->answers_only, tokens + head, targets + head);
        // With answers only the caller's text is context, not loss (its hundred-odd language-
        // modelling targets would outweigh the answer's few in the batch's mean). Either way the
        // last token before the example is followed by the example's BOS, not by the text its
        // target names.
        if (m->answers_only) {
            for (int t = 0; t < head; t++) targets[t] = -1;
            for (int t = tail; t < T; t++) targets[t] = -1;
        } else if (head > 0) targets[head - 1] = -1;
    }
    free(row);
    return rc;
}
