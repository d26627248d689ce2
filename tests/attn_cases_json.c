// attn_cases_json.c: the case list (attn_cases.h) as JSON, for the Python side
// (tests/ref/attn_cases.json, read by tests/ref/cases.py). With --check FILE (the test
// test_attn_cases), fails when FILE is not what it would write, or when the list breaks a count
// that testutil.h's enums state.
//   build/attn_cases_json > tests/ref/attn_cases.json     (after changing the list)
#include "attn_cases.h"
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void print_modes(FILE *f, int modes) {
    static const char *const names[] = {"fixture", "grad", "combo", "variant", "identity", "large", "bf16", "perf", "issue15"};
    fprintf(f, "\"modes\": [");
    for (int i = 0, k = 0; i < (int)(sizeof names / sizeof names[0]); i++)
        if (modes >> i & 1) fprintf(f, "%s\"%s\"", k++ ? ", " : "", names[i]);
    fprintf(f, "]");
}

// One case as a JSON object in tests/ref/cases.py's spec keys; steps that are off are left out.
static void print_case(FILE *f, const tc_case *t) {
    const mta_config c = tc_config(t);
    fprintf(f, "{\"name\": \"%s\", ", t->name);
    print_modes(f, t->modes);
    fprintf(f, ", \"B\": %d, \"H\": %d, \"T\": %d, \"d\": %d", c.B, c.H, c.T, c.d);
    if (c.H_kv != c.H) fprintf(f, ", \"H_kv\": %d", c.H_kv);
    if (c.pre_cq) fprintf(f, ", \"pre\": [%d, %d]", c.pre_cq, c.pre_ck);
    if (c.pre_head_mix) fprintf(f, ", \"pre_head\": true");
    if (c.post_cq) fprintf(f, ", \"post\": [%d, %d]", c.post_cq, c.post_ck);
    if (c.post_ch) fprintf(f, ", \"c_h\": %d", c.post_ch);
    if (c.group_norm) fprintf(f, ", \"gn\": true");
    if (c.depth_scale) fprintf(f, ", \"depth_scale\": true");
    if (c.depth_scale || c.layer_id) fprintf(f, ", \"layer_id\": %d", c.layer_id);
    if (c.gate) fprintf(f, ", \"gate\": true");
    if (c.dropout > 0) fprintf(f, ", \"dropout\": %g", (double)c.dropout);
    const int *lens;
    const int n = tc_docs(t, &lens);
    for (int i = 0; i < n; i++) fprintf(f, "%s%d", i ? ", " : ", \"docs\": [", lens[i]);
    if (n) fprintf(f, "]");
    if (t->docs_first) fprintf(f, ", \"docs_first\": %d", t->docs_first);
    fprintf(f, "}");
}

// The counts the tests' enums state, and unique names: 0, or 1 after a message.
static int check_list(void) {
    int bad = 0;
    if (tc_count(TC_COMBO) != TU_NSHAPES || tc_count(TC_VARIANT) != TU_NVARIANTS) {
        fprintf(stderr, "attn_cases: %d combo shapes and %d variants, testutil.h says %d and %d\n", tc_count(TC_COMBO),
                tc_count(TC_VARIANT), TU_NSHAPES, TU_NVARIANTS);
        bad = 1;
    }
    for (int i = 0; i < TC_NCASES; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(TC_CASES[i].name, TC_CASES[j].name)) {
                fprintf(stderr, "attn_cases: two cases are named %s\n", TC_CASES[i].name);
                bad = 1;
            }
    return bad;
}

// Whether file path holds exactly the n bytes of text.
static int same_text(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char *buf = malloc(n + 1);
    const size_t got = buf ? fread(buf, 1, n + 1, f) : 0;
    const int same = buf && got == n && !memcmp(buf, text, n);
    free(buf);
    fclose(f);
    return same;
}

int main(int argc, char **argv) {
    if (!(argc == 1 || (argc == 3 && !strcmp(argv[1], "--check")))) {
        fprintf(stderr, "usage: attn_cases_json [--check FILE]\n");
        return 2;
    }
    char *text = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&text, &n);
    if (!f) return 1;
    fprintf(f, "[\n");
    for (int i = 0; i < TC_NCASES; i++) print_case(f, &TC_CASES[i]), fprintf(f, i + 1 < TC_NCASES ? ",\n" : "\n");
    fprintf(f, "]\n");
    fclose(f);
    int st = 0;
    if (argc == 1) fwrite(text, 1, n, stdout);
    else if (check_list()) st = 1;
    else if (!same_text(argv[2], text, n)) {
        fprintf(stderr, "attn_cases: %s is not the list of tests/attn_cases.c: regenerate it with\n"
                        "  build/attn_cases_json > %s\n", argv[2], argv[2]);
        st = 1;
    }
    free(text);
    return st;
}
