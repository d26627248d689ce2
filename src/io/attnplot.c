// attnplot.c: see attnplot.h.
#include "io/attnplot.h"
#include "io/raster.h"

#include <math.h>
#include <stdio.h>

int attnplot_png(const char *path, const attnplot_layout *lay, const attnplot_panel *p, int np, int ncols, char *err,
                 size_t n) {
    const int T = lay->T, rows = lay->row1 - lay->row0;
    if (T < 1 || rows < 1 || lay->row0 < 0 || lay->row1 > T || np < 1 || ncols < 1) {
        snprintf(err, n, "attention plot: bad layout (T=%d, rows %d..%d, %d panels)", T, lay->row0, lay->row1, np);
        return -1;
    }
    // cell sizes: wide enough for a letter per column while the picture stays under ~2000 px
    const int fs = T * 8 * ncols <= 2000 ? 2 : 1;  // font scale
    const int cw = 4 * fs, ch = 6 * fs + 4;         // cell width and height
    const int left = 6 * fs + 8, head = 16, below = 6 * fs + 10, gap = 24;
    const int pw = left + T * cw, ph = head + rows * ch + below;  // one panel
    const int nrows = (np + ncols - 1) / ncols, top = lay->title ? 30 : 8;
    int W = 16 + ncols * pw + (ncols - 1) * gap;
    const int H = top + nrows * (ph + gap);
    if (lay->title && raster_text_width(lay->title, 2) + 16 > W) W = raster_text_width(lay->title, 2) + 16;
    raster r;
    if (raster_init(&r, W, H, err, n)) return -1;
    const unsigned char ink[3] = {40, 40, 40}, markc[3] = {214, 39, 40}, frame[3] = {200, 200, 200};
    if (lay->title) raster_text(&r, 8, 8, lay->title, ink, 2);
    for (int k = 0; k < np; k++) {
        const int x0 = 8 + (k % ncols) * (pw + gap), y0 = top + (k / ncols) * (ph + gap);
        const int hx = x0 + left, hy = y0 + head;  // heat area origin
        raster_text(&r, x0, y0, p[k].label, ink, 2);
        raster_fill(&r, hx - 1, hy - 1, T * cw + 2, rows * ch + 2, frame);
        for (int i = 0; i < rows; i++) {
            const float *a = p[k].map + (size_t)(lay->row0 + i) * T;
            float mx = 0.0f;
            for (int j = 0; j < T; j++) mx = a[j] > mx ? a[j] : mx;
            char tok[2] = {lay->tokens[lay->row0 + i], 0};
            raster_text(&r, x0, hy + i * ch + 2, tok, ink, fs);
            for (int j = 0; j < T; j++) {
                // white -> dark blue, linear in the weight relative to the row's maximum
                double w = mx > 0 ? a[j] / mx : 0.0;
                unsigned char c[3] = {(unsigned char)lround(255 - w * (255 - 8)), (unsigned char)lround(255 - w * (255 - 48)),
                                      (unsigned char)lround(255 - w * (255 - 107))};
                raster_fill(&r, hx + j * cw, hy + i * ch, cw, ch, c);
            }
        }
        const int ty = hy + rows * ch + 4;
        for (int j = 0; j < T; j++) {
            char tok[2] = {lay->tokens[j], 0};
            int marked = lay->mark && lay->mark[j];
            raster_text(&r, hx + j * cw, ty, tok, marked ? markc : ink, fs);
            if (marked) raster_fill(&r, hx + j * cw, ty + 5 * fs + 2, cw - 1, fs + 1, markc);
        }
    }
    int rc = raster_write_png(&r, path, err, n);
    raster_free(&r);
    return rc;
}
