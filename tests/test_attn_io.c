// test_attn_io.c: building an operator problem from a file's tensors (what `mtac attn` reads):
// shapes that disagree, kernels the operator refuses, and bad metadata all give clear errors.
#include "io/attn_io.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

static float zeros[4096];

typedef struct {
    st_tensor t[12];
    st_meta_kv m[4];
    st_file f;
} fake_file;

static void add(fake_file *ff, const char *name, int ndim, int64_t a, int64_t b, int64_t c, int64_t d) {
    st_tensor *t = &ff->t[ff->f.n_tensors++];
    memset(t, 0, sizeof *t);
    t->name = (char *)name;
    t->ndim = ndim;
    int64_t s[4] = {a, b, c, d};
    t->numel = 1;
    for (int i = 0; i < ndim; i++) t->shape[i] = s[i], t->numel *= (size_t)s[i];
    t->data = zeros;
}

static void meta(fake_file *ff, const char *k, const char *v) {
    ff->m[ff->f.n_meta].key = (char *)k;
    ff->m[ff->f.n_meta++].value = (char *)v;
}

// q, k, v of shape (1,4,6,8).
static void base(fake_file *ff) {
    memset(ff, 0, sizeof *ff);
    ff->f.tensors = ff->t;
    ff->f.meta = ff->m;
    add(ff, "q", 4, 1, 4, 6, 8);
    add(ff, "k", 4, 1, 4, 6, 8);
    add(ff, "v", 4, 1, 4, 6, 8);
}

static void expect_error(fake_file *ff, const char *needle) {
    attn_problem pr;
    char err[256] = "";
    assert_int_equal(attn_problem_from_file(&ff->f, NULL, &pr, err, sizeof err), -1);
    if (!strstr(err, needle)) fail_msg("error '%s' does not mention '%s'", err, needle);
}

static void test_good_problem(void **s) {
    (void)s;
    fake_file ff;
    base(&ff);
    add(&ff, "w_pre", 3, 4, 6, 11, 0);
    add(&ff, "w_pre_head", 2, 4, 4, 0, 0);
    add(&ff, "w_post", 3, 4, 2, 3, 0);
    add(&ff, "w_post_head", 3, 2, 2, 2, 0);
    add(&ff, "gn_weight", 1, 8, 0, 0, 0);
    add(&ff, "gate_w", 1, 8, 0, 0, 0);
    add(&ff, "gate_b", 1, 1, 0, 0, 0);
    add(&ff, "dout", 4, 1, 4, 6, 8);
    meta(&ff, "layer_id", "3");
    meta(&ff, "depth_scale", "1");
    attn_problem pr;
    char err[256];
    assert_int_equal(attn_problem_from_file(&ff.f, NULL, &pr, err, sizeof err), 0);
    const mta_config *c = &pr.cfg;
    assert_int_equal(c->B * 1000 + c->H * 100 + c->T * 10 + c->d, 1000 + 400 + 60 + 8);
    assert_int_equal(c->pre_cq, 6);
    assert_int_equal(c->pre_ck, 11);
    assert_int_equal(c->post_cq, 2);
    assert_int_equal(c->post_ck, 3);
    assert_int_equal(c->post_ch, 2);
    assert_true(c->pre_head_mix && c->group_norm && c->gate && c->depth_scale);
    assert_int_equal(c->layer_id, 3);
    assert_int_equal(c->H_kv, 4);
    assert_non_null(pr.dout);
    // grouped-query attention: k and v with 2 heads of q's 4 set H_kv
    base(&ff);
    ff.t[1].shape[1] = ff.t[2].shape[1] = 2;
    assert_int_equal(attn_problem_from_file(&ff.f, NULL, &pr, err, sizeof err), 0);
    assert_int_equal(pr.cfg.H, 4);
    assert_int_equal(pr.cfg.H_kv, 2);
}

// An edit of base()'s q, k, v that the reader refuses: tensor `t` (mask of q=1, k=2, v=4) gets
// `value` in shape dimension `dim`; dim -1 sets ndim instead, and t = 0 drops v from the file.
typedef struct {
    int t, dim;
    int64_t value;
    const char *needle;  // what the error must mention
} bad_qkv;

static const bad_qkv bad_qkvs[] = {
    {0, 0, 0, "missing v"},
    {2, 2, 5, "tensor 'k' has shape"},
    {6, 1, 3, "3 heads, which must divide q's H=4"},                    // 3 kv heads, 4 query heads
    {6, 1, 8, "tensor 'k' has shape (1,8,6,8), expected (1,H_kv,6,8)"},  // more kv than query heads
    {4, 1, 2, "tensor 'v' has shape (1,2,6,8), expected (1,4,6,8)"},    // v's heads differ from k's
    {1, -1, 3, "(B,H,T,d)"},
};

// A tensor added to base() (name NULL: none) and a metadata pair (key NULL: none) it refuses.
typedef struct {
    const char *name;
    int ndim;
    int64_t shape[4];
    const char *key, *value;
    const char *needle;
} bad_extra;

static const bad_extra bad_extras[] = {
    {"doc", 2, {1, 5}, NULL, NULL, "tensor 'doc' has shape (1,5), expected (B,T) = (1,6)"},
    {"dout", 4, {1, 4, 6, 7}, NULL, NULL, "'dout'"},
    {"w_pre", 3, {4, 2, 4}, NULL, NULL, "must be odd"},
    {"w_pre", 3, {3, 2, 5}, NULL, NULL, "'w_pre'"},
    {"w_post_head", 3, {3, 3, 3}, NULL, NULL, "w_post_head"},  // 3 groups of 3 heads != H = 4
    {"gate_w", 1, {8}, NULL, NULL, "together"},
    {"gn_weight", 1, {7}, NULL, NULL, "gn_weight"},
    {"bias", 1, {8}, NULL, NULL, "unknown tensor 'bias'"},
    {"gn_weight", 1, {8}, "layer_id", "two", "layer_id"},
    {"gn_weight", 1, {8}, "depth_scale", "yes", "depth_scale"},
    {NULL, 0, {0}, "depth_scale", "1", "group_norm"},  // depth scaling without group norm
};

static void test_bad_problems(void **s) {
    (void)s;
    fake_file ff;
    for (size_t i = 0; i < sizeof bad_qkvs / sizeof *bad_qkvs; i++) {
        const bad_qkv *b = &bad_qkvs[i];
        base(&ff);
        if (!b->t) ff.f.n_tensors = 2;
        for (int j = 0; j < 3; j++)
            if (b->t >> j & 1) {
                if (b->dim < 0)
                    ff.t[j].ndim = (int)b->value;
                else
                    ff.t[j].shape[b->dim] = b->value;
            }
        expect_error(&ff, b->needle);
    }
    for (size_t i = 0; i < sizeof bad_extras / sizeof *bad_extras; i++) {
        const bad_extra *b = &bad_extras[i];
        base(&ff);
        if (b->name) add(&ff, b->name, b->ndim, b->shape[0], b->shape[1], b->shape[2], b->shape[3]);
        if (b->key) meta(&ff, b->key, b->value);
        expect_error(&ff, b->needle);
    }
}

// Document ids are whole numbers: a fraction, a nan or one past int32 is refused; -1 is kept.
static void test_doc_ids(void **s) {
    (void)s;
    fake_file ff;
    float ids[6] = {0, 0, 1, 1.5f, 2, 2};
    base(&ff);
    add(&ff, "doc", 2, 1, 6, 0, 0);
    ff.t[3].data = ids;
    expect_error(&ff, "tensor 'doc' holds 1.5 at flat index 3: document ids are whole numbers");
    ids[3] = NAN;
    expect_error(&ff, "holds nan at flat index 3");
    ids[3] = 3e9f;
    expect_error(&ff, "holds 3e+09 at flat index 3");
    ids[3] = -1;
    attn_problem pr;
    char err[256];
    assert_int_equal(attn_problem_from_file(&ff.f, NULL, &pr, err, sizeof err), 0);
    int32_t got[6];
    attn_problem_doc_ids(&pr, got);
    assert_int_equal(got[3], -1);
    assert_int_equal(got[5], 2);
}

static void test_ignore_prefix(void **s) {
    (void)s;
    fake_file ff;
    base(&ff);
    add(&ff, "expect.out", 4, 1, 4, 6, 8);
    attn_problem pr;
    char err[256];
    assert_int_equal(attn_problem_from_file(&ff.f, "expect.", &pr, err, sizeof err), 0);
    assert_int_equal(attn_problem_from_file(&ff.f, NULL, &pr, err, sizeof err), -1);
}

static void expect_size(int B, int H, int T, mta_backend be, int max_T, int ok, const char *needle) {
    mta_config c = mta_config_default(B, H, T, 1);
    c.backend = be;
    char err[256] = "";
    assert_int_equal(attn_problem_check_size(&c, max_T, err, sizeof err), ok ? 0 : -1);
    if (!ok && !strstr(err, needle)) fail_msg("error '%s' does not mention '%s'", err, needle);
}

// The size guard of mtac attn: T against the limit on either backend, and the reference backend's
// B*H*T*T maps against its square, exactly at the boundary and without overflow at the extremes.
static void test_size_limits(void **s) {
    (void)s;
    const mta_backend F = MTA_BACKEND_FUSED, R = MTA_BACKEND_REFERENCE;
    const int M = ATTN_DEFAULT_MAX_T, big = 0x7fffffff;
    expect_size(1, 1, 200000, F, M, 0, "T = 200000 is above the limit of 16384");
    expect_size(1, 1, 200000, R, M, 0, "T = 200000");
    expect_size(1, 1, 200000, F, 200000, 1, "");
    expect_size(1, 1, 200000, R, 200000, 1, "");
    expect_size(2, 1, 200000, R, 200000, 0, "reference backend");
    expect_size(8, 8, M, F, M, 1, "");
    expect_size(4, 2, 12000, R, M, 0, "B*H*T*T = 1.15e+09");
    expect_size(4, 1, 8192, R, M, 1, "");  // 4 * 8192^2 = 16384^2
    expect_size(5, 1, 8192, R, M, 0, "reference backend");
    expect_size(big, big, big, R, big, 0, "reference backend");
    expect_size(1, 1, big, R, big, 1, "");
    expect_size(1, 1, 1, F, 0, 0, ">= 1");
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_good_problem), cmocka_unit_test(test_bad_problems),
                                       cmocka_unit_test(test_doc_ids), cmocka_unit_test(test_ignore_prefix),
                                       cmocka_unit_test(test_size_limits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
