// attnplot.c: see attnplot.h. Drawn on a canvas (io/canvas.h).
#include "io/attnplot.h"
#include "io/canvas.h"

#include <math.h>
#include <stdio.h>

int attnplot_png(const char *path, const attnplot_layout *lay, const attnplot_panel *p, int np, int ncols, char *err,
                 size_t n) {
    const int T = lay->T, rows = lay->row1 - lay->row0;
    if (T < 1 || rows < 1 || lay->row0 < 0 || lay->row1 > T || np < 1 || ncols < 1) {
        snprintf(err, n, "attention plot: bad layout (T=%d, rows %d..%d, %d panels)", T, lay->row0, lay->row1, np);
        return -1;
    }
    // cells wide enough for a letter per column while the picture stays under ~2000 px
    const double fs = T * 10 * ncols <= 2000 ? 10 : 7;  // token font size
    const double cw = fs, ch = fs + 4;                  // cell width and height
    const double left = fs + 10, head = 22, below = fs + 12, gap = 24;
    const double pw = left + T * cw, ph = head + rows * ch + below;  // one panel
    const int nrows = (np + ncols - 1) / ncols;
    const double top = lay->title ? 36 : 8;
    const canvas_font title = {16, 0, 1, 0}, label = {12, 0, 1, 0}, tok = {fs, 1, 0, 0};
    double W = 16 + ncols * pw + (ncols - 1) * gap;
    const double H = top + nrows * (ph + gap);
    canvas *c = canvas_new(path, (int)ceil(W), (int)ceil(H), err, n);
    if (!c) return -1;
    if (lay->title && canvas_text_width(c, lay->title, title) + 16 > W) {  // a wider picture for the title
        W = canvas_text_width(c, lay->title, title) + 16;
        canvas_free(c);
        if (!(c = canvas_new(path, (int)ceil(W), (int)ceil(H), err, n))) return -1;
    }
    const unsigned char ink[3] = {40, 40, 40}, markc[3] = {214, 39, 40}, frame[3] = {200, 200, 200};
    if (lay->title) canvas_text(c, 8, 10, lay->title, ink, title);
    for (int k = 0; k < np; k++) {
        const double x0 = 8 + (k % ncols) * (pw + gap), y0 = top + (k / ncols) * (ph + gap);
        const double hx = x0 + left, hy = y0 + head;  // the heat area's origin
        canvas_text(c, x0, y0, p[k].label, ink, label);
        canvas_fill(c, hx - 1, hy - 1, T * cw + 2, rows * ch + 2, frame);
        for (int i = 0; i < rows; i++) {
            const float *a = p[k].map + (size_t)(lay->row0 + i) * T;
            float mx = 0.0f;
            for (int j = 0; j < T; j++) mx = a[j] > mx ? a[j] : mx;
            const char q[2] = {lay->tokens[lay->row0 + i], 0};
            canvas_text(c, x0 + fs / 2, hy + i * ch + 1, q, ink, tok);
            for (int j = 0; j < T; j++) {
                // white -> dark blue, linear in the weight relative to the row's maximum
                const double w = mx > 0 ? a[j] / mx : 0.0;
                const unsigned char rgb[3] = {(unsigned char)lround(255 - w * (255 - 8)), (unsigned char)lround(255 - w * (255 - 48)),
                                              (unsigned char)lround(255 - w * (255 - 107))};
                canvas_fill(c, hx + j * cw, hy + i * ch, cw, ch, rgb);
            }
        }
        const double ty = hy + rows * ch + 3;
        for (int j = 0; j < T; j++) {
            const char key[2] = {lay->tokens[j], 0};
            const int marked = lay->mark && lay->mark[j];
            canvas_text(c, hx + (j + 0.5) * cw, ty, key, marked ? markc : ink, tok);
            if (marked) canvas_fill(c, hx + j * cw + 1, ty + fs + 3, cw - 2, 2, markc);
        }
    }
    const int rc = canvas_write(c, err, n);
    canvas_free(c);
    return rc;
}
