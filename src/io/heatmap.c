// heatmap.c: see heatmap.h. Drawn on a canvas (io/canvas.h).
#include "io/heatmap.h"
#include "io/canvas.h"

#include <math.h>
#include <stdio.h>

enum { CELL_W = 72, CELL_H = 40 };

int heatmap_png(const char *path, const char *title, const char *row_axis, const char *const *rows, int n_rows,
                const char *col_axis, const char *const *cols, int n_cols, const double *values, char *err, size_t n) {
    const canvas_font head = {16, 0, 1, 0}, text = {13, 0, 0, 0}, axis = {13, 0, 1, 0};
    // measured on a throwaway canvas: the row labels' width sets the left margin
    canvas *m = canvas_new(NULL, 1, 1, err, n);
    if (!m) return -1;
    double label_w = canvas_text_width(m, row_axis, axis);
    for (int r = 0; r < n_rows; r++) label_w = fmax(label_w, canvas_text_width(m, rows[r], text));
    canvas_free(m);
    const int x0 = (int)label_w + 24, y0 = 66, W = x0 + n_cols * CELL_W + 20, H = y0 + n_rows * CELL_H + 56;
    canvas *c = canvas_new(path, W, H, err, n);
    if (!c) return -1;
    const unsigned char black[3] = {30, 30, 30}, white[3] = {255, 255, 255}, grey[3] = {200, 200, 200};
    canvas_text(c, 12, 12, title, black, head);
    canvas_text(c, 12, y0 - 22, row_axis, black, axis);
    for (int r = 0; r < n_rows; r++) {
        const int y = y0 + r * CELL_H;
        canvas_text(c, 12, y + CELL_H / 2 - 9, rows[r], black, text);
        for (int col = 0; col < n_cols; col++) {
            const double v = values[(size_t)r * n_cols + col];
            unsigned char rgb[3];
            if (isnan(v)) rgb[0] = rgb[1] = rgb[2] = grey[0];
            else {
                const double t = v < 0 ? 0 : v > 1 ? 1 : v;  // white to (20, 60, 160)
                rgb[0] = (unsigned char)(255 - t * 235), rgb[1] = (unsigned char)(255 - t * 195), rgb[2] = (unsigned char)(255 - t * 95);
            }
            canvas_fill(c, x0 + col * CELL_W, y, CELL_W - 2, CELL_H - 2, rgb);
            char pct[16];
            if (isnan(v)) snprintf(pct, sizeof pct, "-");
            else snprintf(pct, sizeof pct, "%.0f%%", 100 * v);
            canvas_text(c, x0 + col * CELL_W + (CELL_W - 2) / 2.0, y + CELL_H / 2 - 9, pct, !isnan(v) && v > 0.5 ? white : black,
                        (canvas_font){text.size, 1, 0, 0});
        }
    }
    const int yl = y0 + n_rows * CELL_H + 6;
    for (int col = 0; col < n_cols; col++)
        canvas_text(c, x0 + col * CELL_W + (CELL_W - 2) / 2.0, yl, cols[col], black, (canvas_font){text.size, 1, 0, 0});
    canvas_text(c, x0 + n_cols * CELL_W / 2.0, yl + 22, col_axis, black, (canvas_font){axis.size, 1, 1, 0});
    const int rc = canvas_write(c, err, n);
    canvas_free(c);
    return rc;
}
