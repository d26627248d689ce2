// plot.c: see plot.h. A small raster: lines by Bresenham, tick labels in a 3x5 digit font.
#include "io/plot.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    unsigned char *px;
    int w, h;
} canvas;

static void dot(canvas *c, int x, int y, const unsigned char *rgb) {
    if (x < 0 || y < 0 || x >= c->w || y >= c->h) return;
    memcpy(c->px + 3 * ((size_t)y * c->w + x), rgb, 3);
}

static void line(canvas *c, int x0, int y0, int x1, int y1, const unsigned char *rgb, int thick) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
        for (int a = 0; a < thick; a++)
            for (int b = 0; b < thick; b++) dot(c, x0 + a - thick / 2, y0 + b - thick / 2, rgb);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * e;
        if (e2 >= dy) e += dy, x0 += sx;
        if (e2 <= dx) e += dx, y0 += sy;
    }
}

// 3x5 glyphs for "0123456789.-", one row per 3 bits, drawn at scale 2.
static const unsigned char FONT[12][5] = {
    {7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7}, {5, 5, 7, 1, 1}, {7, 4, 7, 1, 7},
    {7, 4, 7, 5, 7}, {7, 1, 1, 1, 1}, {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7}, {0, 0, 0, 0, 2}, {0, 0, 7, 0, 0}};

static void text(canvas *c, int x, int y, const char *s, const unsigned char *rgb) {
    for (; *s; s++, x += 8) {
        int g = *s == '.' ? 10 : *s == '-' ? 11 : (*s >= '0' && *s <= '9') ? *s - '0' : -1;
        if (g < 0) continue;
        for (int r = 0; r < 5; r++)
            for (int b = 0; b < 3; b++)
                if (FONT[g][r] & (4 >> b))
                    for (int k = 0; k < 4; k++) dot(c, x + 2 * b + k % 2, y + 2 * r + k / 2, rgb);
    }
}

// A "nice" tick step (1, 2 or 5 times a power of ten) for about 5 ticks over span.
static double tick_step(double span) {
    double raw = span / 5, p = pow(10, floor(log10(raw))), f = raw / p;
    return p * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

int plot_png(const char *path, const plot_series *s, int ns, int W, int H, char *err, size_t en) {
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].y[i])) {
                x0 = fmin(x0, s[k].x[i]), x1 = fmax(x1, s[k].x[i]);
                y0 = fmin(y0, s[k].y[i]), y1 = fmax(y1, s[k].y[i]);
            }
    if (!(x1 >= x0)) {
        snprintf(err, en, "nothing to plot");
        return -1;
    }
    if (x1 == x0) x1 = x0 + 1;
    if (y1 == y0) y1 = y0 + 1;
    canvas c = {calloc((size_t)W * H * 3, 1), W, H};
    if (!c.px) {
        snprintf(err, en, "out of memory");
        return -1;
    }
    memset(c.px, 255, (size_t)W * H * 3);
    const int L = 70, R = W - 20, T = 20, B = H - 40;  // plot area
    const unsigned char grid[3] = {225, 225, 225}, axis[3] = {60, 60, 60};
    char lab[32];
    double ys = tick_step(y1 - y0), xs = tick_step(x1 - x0);
    for (double v = ceil(y0 / ys) * ys; v <= y1 + 1e-12; v += ys) {
        int py = B - (int)lround((v - y0) / (y1 - y0) * (B - T));
        line(&c, L, py, R, py, grid, 1);
        snprintf(lab, sizeof lab, ys < 1 ? "%.1f" : "%.0f", v);
        text(&c, 8, py - 5, lab, axis);
    }
    for (double v = ceil(x0 / xs) * xs; v <= x1 + 1e-12; v += xs) {
        int px = L + (int)lround((v - x0) / (x1 - x0) * (R - L));
        line(&c, px, T, px, B, grid, 1);
        snprintf(lab, sizeof lab, "%.0f", v);
        text(&c, px - 4 * (int)strlen(lab), B + 12, lab, axis);
    }
    line(&c, L, T, L, B, axis, 1);
    line(&c, L, B, R, B, axis, 1);
    for (int k = 0; k < ns; k++) {
        int have = 0, px0 = 0, py0 = 0;
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i])) continue;
            int px = L + (int)lround((s[k].x[i] - x0) / (x1 - x0) * (R - L));
            int py = B - (int)lround((s[k].y[i] - y0) / (y1 - y0) * (B - T));
            if (have) line(&c, px0, py0, px, py, s[k].rgb, s[k].thick);
            px0 = px, py0 = py, have = 1;
        }
    }
    // write the PNG atomically
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    volatile int rc = -1;  // survives libpng's longjmp
    png_structp png = f ? png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL) : NULL;
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!f) snprintf(err, en, "%s: cannot create: %s", tmp, strerror(errno));
    else if (!png || !info) snprintf(err, en, "libpng could not start");
    else if (setjmp(png_jmpbuf(png))) snprintf(err, en, "%s: libpng write error", path);
    else {
        png_init_io(png, f);
        png_set_IHDR(png, info, (png_uint_32)W, (png_uint_32)H, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
        png_write_info(png, info);
        for (int y = 0; y < H; y++) png_write_row(png, c.px + (size_t)y * W * 3);
        png_write_end(png, NULL);
        rc = 0;
    }
    if (png) png_destroy_write_struct(&png, info ? &info : NULL);
    if (f && fclose(f)) rc = -1;
    if (!rc && rename(tmp, path)) {
        snprintf(err, en, "%s: cannot rename into place: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc && f) remove(tmp);
    free(c.px);
    return rc;
}
