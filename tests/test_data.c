// test_data.c: the byte tokenizer (round trip), token shards (round trip, every kind of
// corruption) and the batch sampler (determinism, saved state, bounds, sequential evaluation).
#include "data/dataloader.h"
#include "data/shard.h"
#include "data/tokenizer.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char path[64];

static int setup(void **s) {
    (void)s;
    snprintf(path, sizeof path, "/tmp/mtac_test_shard_%d.bin", (int)getpid());
    return 0;
}
static int teardown(void **s) {
    (void)s;
    remove(path);
    return 0;
}

static uint32_t sample_token(size_t i) { return (uint32_t)(i * 7919 % TOK_VOCAB); }

static void write_sample(int dtype, size_t n) {
    uint32_t *t = malloc((n + 1) * sizeof *t);
    for (size_t i = 0; i < n; i++) t[i] = sample_token(i);
    char err[256];
    assert_int_equal(shard_write(path, t, n, dtype, err, sizeof err), 0);
    free(t);
}

static void test_tokenizer(void **s) {
    (void)s;
    unsigned char bytes[512];
    for (int i = 0; i < 512; i++) bytes[i] = (unsigned char)(i * 37 + 11);  // every byte value, NUL included
    uint32_t ids[512];
    assert_int_equal(tok_encode(bytes, 512, ids), 512);
    for (int i = 0; i < 512; i++) assert_int_equal(ids[i], bytes[i]);
    unsigned char back[512 * 5];
    assert_int_equal(tok_decode_size(ids, 512, 0), 512);
    assert_int_equal(tok_decode(ids, 512, 0, back), 512);
    assert_memory_equal(back, bytes, 512);
    assert_int_equal(tok_encode(bytes, 0, ids), 0);

    // special tokens: nothing, or a visible marker
    const uint32_t mixed[] = {TOK_BOS, 'h', 'i', TOK_EOS, TOK_PAD, 999};
    assert_int_equal(tok_decode_size(mixed, 6, 0), 2);
    assert_int_equal(tok_decode(mixed, 6, 0, back), 2);
    assert_memory_equal(back, "hi", 2);
    const char *want = "<bos>hi<eos><pad><?>";
    assert_int_equal(tok_decode_size(mixed, 6, 1), strlen(want));
    assert_int_equal(tok_decode(mixed, 6, 1, back), strlen(want));
    assert_memory_equal(back, want, strlen(want));
    assert_null(tok_marker('a'));
    assert_int_equal(TOK_VOCAB, 259);
}

static void test_round_trip(void **s) {
    (void)s;
    int dtypes[2] = {SHARD_U16, SHARD_U32};
    size_t sizes[3] = {0, 1, 1000};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < 3; k++) {
            write_sample(dtypes[d], sizes[k]);
            shard sh;
            char err[256];
            assert_int_equal(shard_read(path, &sh, err, sizeof err), 0);
            assert_int_equal(sh.n, sizes[k]);
            assert_int_equal(sh.dtype, dtypes[d]);
            for (size_t i = 0; i < sh.n; i++) assert_int_equal(sh.tokens[i], sample_token(i));
            shard_free(&sh);
        }
    // the whole id range of each dtype
    uint32_t ext[4] = {0, 65535, 65536, 0xFFFFFFFFu};
    char err[256];
    shard sh;
    assert_int_equal(shard_write(path, ext, 4, SHARD_U32, err, sizeof err), 0);
    assert_int_equal(shard_read(path, &sh, err, sizeof err), 0);
    assert_memory_equal(sh.tokens, ext, sizeof ext);
    shard_free(&sh);
    assert_int_equal(shard_write(path, ext, 2, SHARD_U16, err, sizeof err), 0);
    // an id over 65535 is refused for uint16, and the old file stays as it was
    assert_int_equal(shard_write(path, ext, 3, SHARD_U16, err, sizeof err), -1);
    assert_non_null(strstr(err, "uint16"));
    assert_int_equal(shard_read(path, &sh, err, sizeof err), 0);
    assert_int_equal(sh.n, 2);
    shard_free(&sh);
    assert_int_equal(shard_write(path, ext, 1, 3, err, sizeof err), -1);
    assert_non_null(strstr(err, "dtype"));
    // no directory: an error naming the temp file, and nothing left behind
    assert_int_equal(shard_write("/nonexistent/x.bin", ext, 1, SHARD_U16, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/x.bin.tmp"));
    char tmp[80];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(access(tmp, F_OK), -1);
}

// Writes a 100-token uint16 shard, rewrites one byte (at >= 0) and/or cuts or extends it to
// new_len (>= 0), and expects an error naming the file and mentioning needle.
static void corrupt(long at, int byte, long new_len, const char *needle) {
    write_sample(SHARD_U16, 100);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    if (at >= 0) {
        fseek(f, at, SEEK_SET);
        fputc(byte, f);
    }
    fclose(f);
    if (new_len >= 0) assert_int_equal(truncate(path, new_len), 0);
    shard sh;
    char err[256] = "";
    assert_int_equal(shard_read(path, &sh, err, sizeof err), -1);
    if (!strstr(err, needle)) fail_msg("at %ld len %ld: '%s' does not mention '%s'", at, new_len, err, needle);
    if (!strstr(err, path)) fail_msg("'%s' does not name the file", err);
    assert_null(sh.tokens);
    assert_int_equal(sh.n, 0);
}

static void test_corruption(void **s) {
    (void)s;
    corrupt(0, 'X', -1, "bad magic");
    corrupt(7, '2', -1, "bad magic");
    corrupt(8, 9, -1, "version");
    corrupt(11, 1, -1, "version");
    corrupt(12, 7, -1, "dtype");
    corrupt(12, 0, -1, "dtype");
    corrupt(16, 200, -1, "header says");  // count larger than the file
    corrupt(16, 50, -1, "trailing bytes");  // count smaller than the file
    corrupt(23, 1, -1, "truncated");  // count near 2^56: no overflow in the size check
    corrupt(24, 0x55, -1, "checksum");  // the stored checksum itself
    corrupt(40, 1, -1, "reserved");
    corrupt(63, 1, -1, "reserved");
    // every token byte, flipped, breaks the checksum
    for (long at = 64; at < 64 + 200; at++) corrupt(at, 0xEE, -1, "checksum");
    // truncated anywhere: in the header, or in the tokens
    long cuts[] = {0, 1, 8, 31, 63};
    for (int i = 0; i < 5; i++) corrupt(-1, 0, cuts[i], "too short");
    for (long len = 64; len < 64 + 200; len += 7) corrupt(-1, 0, len, "truncated");
    corrupt(-1, 0, 64 + 199, "truncated");
    // trailing bytes, even a single one, or a whole extra token
    corrupt(-1, 0, 64 + 201, "trailing bytes");
    corrupt(-1, 0, 64 + 202, "trailing bytes");
    corrupt(-1, 0, 4096, "trailing bytes");
    shard sh;
    char err[256];
    assert_int_equal(shard_read("/nonexistent/x.bin", &sh, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot open"));
    assert_int_equal(shard_read("/tmp", &sh, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a regular file"));
}

static void test_loader(void **s) {
    (void)s;
    const size_t N = 500;
    write_sample(SHARD_U16, N);
    dataloader a, b;
    char err[256];
    assert_int_equal(dataloader_open(&a, path, 3, 16, 5, err, sizeof err), 0);
    assert_int_equal(dataloader_open(&b, path, 3, 16, 5, err, sizeof err), 0);
    int ta[48], ga[48], tb[48], gb[48];
    for (int i = 0; i < 200; i++) {
        dataloader_next(&a, ta, ga);
        dataloader_next(&b, tb, gb);
        assert_memory_equal(ta, tb, sizeof ta);
        assert_memory_equal(ga, gb, sizeof ga);
        for (int r = 0; r < 3; r++) {
            // each row is a real window of the shard: find where it starts
            size_t p = 0;
            while (p + 16 < N && (sample_token(p) != (uint32_t)ta[r * 16] || sample_token(p + 1) != (uint32_t)ta[r * 16 + 1] ||
                                  sample_token(p + 2) != (uint32_t)ta[r * 16 + 2]))
                p++;
            assert_true(p + 16 < N);  // the target of the last input is inside the shard
            for (int t = 0; t < 16; t++) {
                assert_int_equal(ta[r * 16 + t], sample_token(p + t));
                assert_int_equal(ga[r * 16 + t], sample_token(p + t + 1));
            }
        }
    }
    // a saved state continues identically, in either API
    char st[64];
    dataloader_state_str(&a, st, sizeof st);
    assert_int_equal(strlen(st), 16);
    uint64_t raw = a.state;
    dataloader_next(&a, ta, ga);
    uint32_t win[3 * 17];
    b.state = 0;
    assert_int_equal(dataloader_state_parse(&b, st), 0);
    assert_true(b.state == raw);
    dataloader_next_windows(&b, win);
    for (int r = 0; r < 3; r++)
        for (int t = 0; t < 16; t++) {
            assert_int_equal(win[r * 17 + t], ta[r * 16 + t]);
            assert_int_equal(win[r * 17 + t + 1], ga[r * 16 + t]);
        }
    assert_int_equal(dataloader_state_parse(&b, "xyz"), -1);
    assert_int_equal(dataloader_state_parse(&b, "+000000000000001"), -1);
    assert_int_equal(dataloader_state_parse(&b, "00000000000000012"), -1);
    // another seed, other batches
    dataloader c;
    assert_int_equal(dataloader_open(&c, path, 3, 16, 6, err, sizeof err), 0);
    assert_int_equal(dataloader_state_parse(&a, st), 0);
    dataloader_next(&a, ta, ga);
    dataloader_next(&c, tb, gb);
    assert_memory_not_equal(ta, tb, sizeof ta);
    dataloader_close(&a);
    dataloader_close(&b);
    dataloader_close(&c);
    // too short for one window; bad sizes
    assert_int_equal(dataloader_open(&a, path, 1, (int)N, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "fewer than"));
    assert_null(a.s.tokens);
    assert_int_equal(dataloader_open(&a, path, 0, 4, 1, err, sizeof err), -1);
    assert_int_equal(dataloader_open(&a, path, 1, 0, 1, err, sizeof err), -1);
    assert_null(a.s.tokens);
    // the shortest shard: exactly T+1 tokens, one possible window
    assert_int_equal(dataloader_open(&a, path, 2, (int)N - 1, 1, err, sizeof err), 0);
    int *t1 = malloc(2 * (N - 1) * sizeof(int)), *g1 = malloc(2 * (N - 1) * sizeof(int));
    dataloader_next(&a, t1, g1);
    assert_int_equal(t1[N - 2], sample_token(N - 2));
    assert_int_equal(g1[2 * (N - 1) - 1], sample_token(N - 1));
    free(t1);
    free(g1);
    dataloader_close(&a);
}

// Sequential windows cover every target exactly once, in order, padding the last window.
static void check_seq(size_t n, int B, int T) {
    uint32_t *tok = malloc(n * sizeof *tok);
    for (size_t i = 0; i < n; i++) tok[i] = sample_token(i);
    dataloader dl;
    char err[256];
    assert_int_equal(dataloader_open_tokens(&dl, tok, n, B, T, 1, err, sizeof err), 0);
    int *x = malloc((size_t)B * T * sizeof(int)), *y = malloc((size_t)B * T * sizeof(int));
    for (int pass = 0; pass < 2; pass++) {
        size_t next = 1, windows = 0;  // the next token expected as a target
        int rows;
        while ((rows = dataloader_next_seq(&dl, x, y)) > 0) {
            for (int r = 0; r < B; r++)
                for (int t = 0; t < T; t++) {
                    int i = r * T + t;
                    if (y[i] < 0) {
                        assert_int_equal(x[i], TOK_PAD);
                        continue;
                    }
                    assert_int_equal(y[i], tok[next]);
                    assert_int_equal(x[i], tok[next - 1]);
                    next++;
                }
            for (int r = rows; r < B; r++) assert_int_equal(y[r * T], -1);  // empty rows come last
            windows += (size_t)rows;
        }
        assert_int_equal(next, n);
        assert_int_equal(windows, dataloader_seq_windows(&dl));
        assert_int_equal(dataloader_next_seq(&dl, x, y), 0);
        dataloader_seq_reset(&dl);
    }
    free(x);
    free(y);
    free(tok);
    dataloader_close(&dl);
}

static void test_sequential(void **s) {
    (void)s;
    check_seq(17, 1, 16);   // exactly one window
    check_seq(33, 2, 16);   // exactly one batch
    check_seq(34, 2, 16);   // one target left over: a third, padded window
    check_seq(500, 3, 16);  // partial last batch
    check_seq(101, 4, 1);
}

// The tokens of v as text, each EOS written as '|' (the test texts hold none).
static char *as_text(const shard_tokens *v) {
    char *t = malloc(v->n + 1);
    for (size_t i = 0; i < v->n; i++) t[i] = v->t[i] == TOK_EOS ? '|' : (char)v->t[i];
    t[v->n] = 0;
    return t;
}

static void split(const char *text, size_t len, int documents, int k, char **tr, char **va) {
    shard_tokens a = {0}, b = {0};
    size_t block_no = 0;
    assert_int_equal(shard_split_text((const unsigned char *)text, len, documents, k, &block_no, &a, &b), 0);
    *tr = as_text(&a), *va = as_text(&b);
    free(a.t), free(b.t);
}

// mtac data's documents: an EOS after each file (in both shards), or after each paragraph
// (blank lines, also of spaces, tabs or CRs, dropped; blocks end at a paragraph's end).
static void test_split_documents(void **s) {
    (void)s;
    char *tr, *va;
    const char *text = "\n \na b\n\n\n  \t\r\nc\nd\n\ne";
    split(text, strlen(text), SHARD_DOC_FILE, 20, &tr, &va);
    assert_string_equal(tr, "\n \na b\n\n\n  \t\r\nc\nd\n\ne|");
    assert_string_equal(va, "|");
    free(tr), free(va);
    split(text, strlen(text), SHARD_DOC_PARAGRAPH, 20, &tr, &va);
    assert_string_equal(tr, "a b\n|c\nd\n|e|");
    assert_string_equal(va, "");
    free(tr), free(va);
    split("\n\n", 2, SHARD_DOC_PARAGRAPH, 20, &tr, &va);  // no paragraph, no document
    assert_string_equal(tr, "");
    free(tr), free(va);

    // 13 paragraphs of 6,000 bytes (paragraph p: lines of letter 'a' + p), one of 40,000; every
    // 2nd block to validation. A block takes paragraphs until it holds 16,384 bytes: 3 of them,
    // or the long one alone, which stays whole.
    enum { P = 14, LINE = 100, SMALL = 6000, BIG = 40000 };
    char *t = malloc(P * (BIG + 2)), *at = t;
    for (int p = 0; p < P; p++) {
        const int n = p == 7 ? BIG : SMALL;
        for (int i = 0; i < n; i++) *at++ = i % LINE == LINE - 1 ? '\n' : (char)('a' + p);
        *at++ = '\n';  // the blank line after it
    }
    split(t, (size_t)(at - t), SHARD_DOC_PARAGRAPH, 2, &tr, &va);
    // blocks: {0,1,2} train, {3,4,5} val, {6,7} train, {8,9,10} val, {11,12,13} train
    const char *want_tr = "abcghlmn", *want_va = "defijk";
    for (int w = 0; w < 2; w++) {
        const char *got = w ? va : tr, *want = w ? want_va : want_tr;
        size_t docs = 0;
        for (const char *d = got; *d; docs++) {
            const char *eos = strchr(d, '|');
            assert_non_null(eos);
            const int p = d[0] - 'a';
            assert_int_equal(p, want[docs] - 'a');
            assert_int_equal(eos - d, p == 7 ? BIG : SMALL);  // the whole paragraph, its last line's '\n' too
            assert_memory_equal(d, t + (size_t)p * (SMALL + 1) + (p > 7 ? BIG - SMALL : 0), (size_t)(eos - d));
            d = eos + 1;
        }
        assert_int_equal(docs, strlen(want));
    }
    free(tr), free(va), free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tokenizer),
        cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_corruption, setup, teardown),
        cmocka_unit_test_setup_teardown(test_loader, setup, teardown),
        cmocka_unit_test(test_sequential),
        cmocka_unit_test(test_split_documents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
