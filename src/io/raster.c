// raster.c: see raster.h.
#include "io/raster.h"

#include <errno.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int raster_init(raster *r, int w, int h, char *err, size_t n) {
    r->w = w, r->h = h;
    r->px = w > 0 && h > 0 ? malloc((size_t)w * h * 3) : NULL;
    if (!r->px) {
        snprintf(err, n, "cannot allocate a %dx%d picture", w, h);
        return -1;
    }
    memset(r->px, 255, (size_t)w * h * 3);
    return 0;
}

void raster_free(raster *r) {
    free(r->px);
    r->px = NULL;
}

void raster_dot(raster *r, int x, int y, const unsigned char rgb[3]) {
    if (x < 0 || y < 0 || x >= r->w || y >= r->h) return;
    memcpy(r->px + 3 * ((size_t)y * r->w + x), rgb, 3);
}

// Bresenham, with a square pen of side thick.
void raster_line(raster *r, int x0, int y0, int x1, int y1, const unsigned char rgb[3], int thick) {
    int dx = abs(x1 - x0), dy = -abs(y1 - y0), sx = x0 < x1 ? 1 : -1, sy = y0 < y1 ? 1 : -1, e = dx + dy;
    for (;;) {
        raster_fill(r, x0 - thick / 2, y0 - thick / 2, thick, thick, rgb);
        if (x0 == x1 && y0 == y1) break;
        int e2 = 2 * e;
        if (e2 >= dy) e += dy, x0 += sx;
        if (e2 <= dx) e += dx, y0 += sy;
    }
}

void raster_fill(raster *r, int x, int y, int w, int h, const unsigned char rgb[3]) {
    for (int j = y; j < y + h; j++)
        for (int i = x; i < x + w; i++) raster_dot(r, i, j, rgb);
}

// 3x5 glyphs, one 3-bit row each (4 = left pixel).
static const char GLYPH_CHARS[] = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ.-#:%(),/=^><_+$";
static const unsigned char GLYPHS[][5] = {
    {7, 5, 5, 5, 7}, {2, 6, 2, 2, 7}, {7, 1, 7, 4, 7}, {7, 1, 7, 1, 7}, {5, 5, 7, 1, 1},  // 0-4
    {7, 4, 7, 1, 7}, {7, 4, 7, 5, 7}, {7, 1, 1, 1, 1}, {7, 5, 7, 5, 7}, {7, 5, 7, 1, 7},  // 5-9
    {2, 5, 7, 5, 5}, {6, 5, 6, 5, 6}, {3, 4, 4, 4, 3}, {6, 5, 5, 5, 6}, {7, 4, 6, 4, 7},  // A-E
    {7, 4, 6, 4, 4}, {3, 4, 5, 5, 3}, {5, 5, 7, 5, 5}, {7, 2, 2, 2, 7}, {1, 1, 1, 5, 2},  // F-J
    {5, 5, 6, 5, 5}, {4, 4, 4, 4, 7}, {5, 7, 7, 5, 5}, {6, 5, 5, 5, 5}, {2, 5, 5, 5, 2},  // K-O
    {6, 5, 6, 4, 4}, {2, 5, 5, 6, 3}, {6, 5, 6, 5, 5}, {3, 4, 2, 1, 6}, {7, 2, 2, 2, 2},  // P-T
    {5, 5, 5, 5, 7}, {5, 5, 5, 5, 2}, {5, 5, 7, 7, 5}, {5, 5, 2, 5, 5}, {5, 5, 2, 2, 2},  // U-Y
    {7, 1, 2, 4, 7},                                                                      // Z
    {0, 0, 0, 0, 2}, {0, 0, 7, 0, 0}, {5, 7, 5, 7, 5}, {0, 2, 0, 2, 0}, {5, 1, 2, 4, 5},  // . - # : %
    {1, 2, 2, 2, 1}, {4, 2, 2, 2, 4}, {0, 0, 0, 2, 4}, {1, 1, 2, 4, 4}, {0, 7, 0, 7, 0},  // ( ) , / =
    {2, 5, 0, 0, 0}, {4, 2, 1, 2, 4}, {1, 2, 4, 2, 1}, {0, 0, 0, 0, 7}, {0, 2, 7, 2, 0},  // ^ > < _ +
    {3, 6, 2, 3, 6},                                                                      // $
};

void raster_text(raster *r, int x, int y, const char *s, const unsigned char rgb[3], int scale) {
    for (; *s; s++, x += 4 * scale) {
        char ch = *s >= 'a' && *s <= 'z' ? (char)(*s - 'a' + 'A') : *s;
        const char *at = ch ? strchr(GLYPH_CHARS, ch) : NULL;
        if (!at) continue;
        const unsigned char *g = GLYPHS[at - GLYPH_CHARS];
        for (int row = 0; row < 5; row++)
            for (int b = 0; b < 3; b++)
                if (g[row] & (4 >> b)) raster_fill(r, x + b * scale, y + row * scale, scale, scale, rgb);
    }
}

int raster_text_width(const char *s, int scale) { return s && *s ? (int)strlen(s) * 4 * scale - scale : 0; }

int raster_write_png(const raster *r, const char *path, char *err, size_t n) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        snprintf(err, n, "path too long");
        return -1;
    }
    FILE *f = fopen(tmp, "wb");
    volatile int rc = -1;  // survives libpng's longjmp
    png_structp png = f ? png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL) : NULL;
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!f) snprintf(err, n, "%s: cannot create: %s", tmp, strerror(errno));
    else if (!png || !info) snprintf(err, n, "libpng could not start");
    else if (setjmp(png_jmpbuf(png))) snprintf(err, n, "%s: libpng write error", path);
    else {
        png_init_io(png, f);
        png_set_IHDR(png, info, (png_uint_32)r->w, (png_uint_32)r->h, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
                     PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
        png_write_info(png, info);
        for (int y = 0; y < r->h; y++) png_write_row(png, r->px + (size_t)y * r->w * 3);
        png_write_end(png, NULL);
        rc = 0;
    }
    if (png) png_destroy_write_struct(&png, info ? &info : NULL);
    if (f && fclose(f) && !rc) {
        snprintf(err, n, "%s: write failed: %s", tmp, strerror(errno));
        rc = -1;
    }
    if (!rc && rename(tmp, path)) {
        snprintf(err, n, "%s: cannot rename into place: %s", path, strerror(errno));
        rc = -1;
    }
    if (rc && f) remove(tmp);
    return rc;
}
