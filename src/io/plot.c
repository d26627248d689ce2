// plot.c: see plot.h. Drawn on a raster (io/raster.h).
#include "io/plot.h"
#include "io/raster.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// A "nice" tick step (1, 2 or 5 times a power of ten) for about 5 ticks over span.
static double tick_step(double span) {
    double raw = span / 5, p = pow(10, floor(log10(raw))), f = raw / p;
    return p * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

int plot_png(const char *path, const plot_series *s, int ns, int W, int H, const plot_text *txt, char *err, size_t en) {
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
    if (txt && txt->y_max > txt->y_min) y0 = txt->y_min, y1 = txt->y_max;
    if (x1 == x0) x1 = x0 + 1;
    if (y1 == y0) y1 = y0 + 1;
    raster c;
    if (raster_init(&c, W, H, err, en)) return -1;
    const int L = 70, R = W - 20, T = 40, B = H - 48;  // plot area
    const unsigned char grid[3] = {225, 225, 225}, axis[3] = {60, 60, 60};
    char lab[32];
    double ys = tick_step(y1 - y0), xs = tick_step(x1 - x0);
    for (double v = ceil(y0 / ys) * ys; v <= y1 + 1e-12; v += ys) {
        int py = B - (int)lround((v - y0) / (y1 - y0) * (B - T));
        raster_line(&c, L, py, R, py, grid, 1);
        snprintf(lab, sizeof lab, ys < 1 ? "%.1f" : "%.0f", v);
        raster_text(&c, 8, py - 5, lab, axis, 2);
    }
    for (double v = ceil(x0 / xs) * xs; v <= x1 + 1e-12; v += xs) {
        int px = L + (int)lround((v - x0) / (x1 - x0) * (R - L));
        raster_line(&c, px, T, px, B, grid, 1);
        snprintf(lab, sizeof lab, "%.0f", v);
        raster_text(&c, px - raster_text_width(lab, 2) / 2, B + 10, lab, axis, 2);
    }
    raster_line(&c, L, T, L, B, axis, 1);
    raster_line(&c, L, B, R, B, axis, 1);
    for (int k = 0; k < ns; k++) {
        int have = 0, px0 = 0, py0 = 0;
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i])) continue;
            int px = L + (int)lround((s[k].x[i] - x0) / (x1 - x0) * (R - L));
            int py = B - (int)lround((s[k].y[i] - y0) / (y1 - y0) * (B - T));
            if (have) raster_line(&c, px0, py0, px, py, s[k].rgb, s[k].thick);
            px0 = px, py0 = py, have = 1;
        }
    }
    if (txt && txt->title) raster_text(&c, L, 6, txt->title, axis, 2);
    if (txt && txt->xlabel) raster_text(&c, (L + R - raster_text_width(txt->xlabel, 2)) / 2, B + 30, txt->xlabel, axis, 2);
    if (txt && txt->ylabel) raster_text(&c, 8, 20, txt->ylabel, axis, 2);
    // legend, top right: a short line and the label for each labelled series
    int ly = T + 8, lw = 0;
    for (int k = 0; k < ns; k++)
        if (s[k].label && raster_text_width(s[k].label, 2) > lw) lw = raster_text_width(s[k].label, 2);
    for (int k = 0; k < ns; k++) {
        if (!s[k].label) continue;
        const unsigned char white[3] = {255, 255, 255};
        raster_fill(&c, R - lw - 40, ly - 4, lw + 36, 18, white);
        raster_line(&c, R - lw - 34, ly + 4, R - lw - 14, ly + 4, s[k].rgb, 3);
        raster_text(&c, R - lw - 6, ly, s[k].label, axis, 2);
        ly += 18;
    }
    int rc = raster_write_png(&c, path, err, en);
    raster_free(&c);
    return rc;
}
