// test_pictures.c: the pictures (io/canvas.h on cairo): a line chart, a heatmap and an attention
// map written as PNG (the signature, the size asked for, pixels that are not all white) and as
// SVG; nothing left behind (no .tmp) and a clear error for a path that cannot be written.
#include "io/attnplot.h"
#include "io/heatmap.h"
#include "io/plot.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[] = "/tmp/mtac_pictures_XXXXXX";

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    assert_int_equal(fread(b, 1, *n, f), *n);
    b[*n] = 0;
    fclose(f);
    return b;
}

static uint32_t be32(const unsigned char *p) { return (uint32_t)p[0] << 24 | p[1] << 16 | p[2] << 8 | p[3]; }

// A PNG of w x h (0: any size) and an SVG, both from draw(path); no .tmp beside either.
static void check_both(int (*draw)(const char *path, char *err, size_t n), const char *name, int w, int h) {
    char path[256], tmp[300], err[256];
    snprintf(path, sizeof path, "%s/%s.png", dir, name);
    assert_int_equal(draw(path, err, sizeof err), 0);
    size_t n;
    unsigned char *b = slurp(path, &n);
    assert_true(n > 100 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8) && !memcmp(b + 12, "IHDR", 4));
    if (w) assert_true(be32(b + 16) == (uint32_t)w && be32(b + 20) == (uint32_t)h);
    free(b);
    snprintf(path, sizeof path, "%s/%s.svg", dir, name);
    assert_int_equal(draw(path, err, sizeof err), 0);
    b = slurp(path, &n);
    assert_true(strstr((char *)b, "<svg") && strstr((char *)b, "</svg>"));
    free(b);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_not_equal(access(tmp, F_OK), 0);
}

static int draw_plot(const char *path, char *err, size_t n) {
    static double x[20], y[20];
    for (int i = 0; i < 20; i++) x[i] = i, y[i] = exp(-i / 5.0);
    const plot_series s = {x, y, 20, {31, 119, 180}, 2, "a curve"};
    const plot_text t = {"Loss", "step", "loss", 0, 0};
    return plot_png(path, &s, 1, 640, 400, &t, err, n);
}

static int draw_heatmap(const char *path, char *err, size_t n) {
    const char *rows[2] = {"a", "b"}, *cols[3] = {"1k", "2k", "4k"};
    const double v[6] = {1, 0.5, 0, NAN, 0.25, 0.75};
    return heatmap_png(path, "accuracy", "model", rows, 2, "context", cols, 3, v, err, n);
}

static int draw_attention(const char *path, char *err, size_t n) {
    static float m[16 * 16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j <= i; j++) m[i * 16 + j] = 1.0f / (i + 1);
    const attnplot_layout lay = {16, 12, 16, "abcdefghijklmnop", NULL, "where the last rows look"};
    const attnplot_panel p[2] = {{"baseline", m}, {"MTA", m}};
    return attnplot_png(path, &lay, p, 2, 2, err, n);
}

static void test_pictures(void **s) {
    (void)s;
    check_both(draw_plot, "plot", 640, 400);
    check_both(draw_heatmap, "heatmap", 0, 0);
    check_both(draw_attention, "attention", 0, 0);
}

static void test_errors(void **s) {
    (void)s;
    char err[256] = "";
    assert_int_equal(plot_png("/nonexistent-dir/x.png", NULL, 0, 100, 100, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "nothing to plot"));
    const double x[2] = {0, 1}, y[2] = {0, 1};
    const plot_series c = {x, y, 2, {0, 0, 0}, 1, NULL};
    assert_int_equal(plot_png("/nonexistent-dir/x.png", &c, 1, 100, 100, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent-dir/x.png"));
    assert_int_equal(plot_png("/tmp/x.png", &c, 1, 0, 100, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "pixels"));
}

int main(void) {
    if (!mkdtemp(dir)) return 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_pictures), cmocka_unit_test(test_errors)};
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    const char *names[6] = {"plot.png", "plot.svg", "heatmap.png", "heatmap.svg", "attention.png", "attention.svg"};
    for (int i = 0; i < 6; i++) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        remove(p);
    }
    rmdir(dir);
    return rc;
}
