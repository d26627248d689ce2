// heatmap.c: see heatmap.h.
#include "io/heatmap.h"
#include "io/raster.h"

#include <math.h>
#include <stdio.h>

enum { CELL_W = 72, CELL_H = 40, SCALE = 2 };

int heatmap_png(const char *path, const char *title, const char *row_axis, const char *const *rows, int n_rows,
                const char *col_axis, const char *const *cols, int n_cols, const double *values, char *err, size_t n) {
    int label_w = raster_text_width(row_axis, SCALE);
    for (int r = 0; r < n_rows; r++) {
        const int w = raster_text_width(rows[r], SCALE);
        label_w = w > label_w ? w : label_w;
    }
    const int x0 = label_w + 20, y0 = 60, W = x0 + n_cols * CELL_W + 20, H = y0 + n_rows * CELL_H + 50;
    raster img;
    if (raster_init(&img, W, H, err, n)) return -1;
    const unsigned char black[3] = {0, 0, 0}, white[3] = {255, 255, 255}, grey[3] = {200, 200, 200};
    raster_text(&img, 10, 12, title, black, SCALE);
    raster_text(&img, 10, y0 - 16, row_axis, black, SCALE);
    for (int r = 0; r < n_rows; r++) {
        const int y = y0 + r * CELL_H;
        raster_text(&img, 10, y + CELL_H / 2 - 5, rows[r], black, SCALE);
        for (int c = 0; c < n_cols; c++) {
            const double v = values[(size_t)r * n_cols + c];
            unsigned char rgb[3];
            if (isnan(v)) rgb[0] = rgb[1] = rgb[2] = grey[0];
            else {
                const double t = v < 0 ? 0 : v > 1 ? 1 : v;  // white to (20, 60, 160)
                rgb[0] = (unsigned char)(255 - t * 235), rgb[1] = (unsigned char)(255 - t * 195), rgb[2] = (unsigned char)(255 - t * 95);
            }
            raster_fill(&img, x0 + c * CELL_W, y, CELL_W - 2, CELL_H - 2, rgb);
            char pct[16];
            if (isnan(v)) snprintf(pct, sizeof pct, "-");
            else snprintf(pct, sizeof pct, "%.0f%%", 100 * v);
            raster_text(&img, x0 + c * CELL_W + (CELL_W - raster_text_width(pct, SCALE)) / 2, y + CELL_H / 2 - 5, pct,
                        !isnan(v) && v > 0.5 ? white : black, SCALE);
        }
    }
    const int yl = y0 + n_rows * CELL_H + 6;
    for (int c = 0; c < n_cols; c++)
        raster_text(&img, x0 + c * CELL_W + (CELL_W - raster_text_width(cols[c], SCALE)) / 2, yl, cols[c], black, SCALE);
    raster_text(&img, x0, yl + 20, col_axis, black, SCALE);
    int rc = raster_write_png(&img, path, err, n);
    raster_free(&img);
    return rc;
}
