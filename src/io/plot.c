// plot.c: see plot.h. Drawn on a canvas (io/canvas.h).
#include "io/plot.h"
#include "io/canvas.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

// A "nice" tick step (1, 2 or 5 times a power of ten) for about 5 ticks over span.
static double tick_step(double span) {
    double raw = span / 5, p = pow(10, floor(log10(raw))), f = raw / p;
    return p * (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10);
}

// A tick's label with as many decimals as the step needs.
static void tick_label(char *buf, size_t n, double v, double step) {
    const int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
    snprintf(buf, n, "%.*f", dec, fabs(v) < step * 1e-9 ? 0.0 : v);
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
    canvas *c = canvas_new(path, W, H, err, en);
    if (!c) return -1;
    const canvas_font title = {16, 0, 1, 0}, label = {13, 1, 0, 0}, tick = {12, 0, 0, 0};
    const double L = 74, R = W - 20, T = txt && txt->title ? 44 : 16, B = H - 56;  // the plot area
    const unsigned char grid[3] = {228, 228, 228}, axis[3] = {70, 70, 70};
    char lab[32];
    const double ys = tick_step(y1 - y0), xs = tick_step(x1 - x0);
    for (double v = ceil(y0 / ys) * ys; v <= y1 + ys * 1e-9; v += ys) {
        const double py = B - (v - y0) / (y1 - y0) * (B - T);
        canvas_line(c, L, py, R, py, grid, 1);
        tick_label(lab, sizeof lab, v, ys);
        canvas_text(c, L - 8, py - 7, lab, axis, (canvas_font){tick.size, 2, 0, 0});
    }
    for (double v = ceil(x0 / xs) * xs; v <= x1 + xs * 1e-9; v += xs) {
        const double px = L + (v - x0) / (x1 - x0) * (R - L);
        canvas_line(c, px, T, px, B, grid, 1);
        tick_label(lab, sizeof lab, v, xs);
        canvas_text(c, px, B + 6, lab, axis, (canvas_font){tick.size, 1, 0, 0});
    }
    canvas_line(c, L, T, L, B, axis, 1.2);
    canvas_line(c, L, B, R, B, axis, 1.2);
    canvas_clip(c, L, T - 2, R - L + 2, B - T + 2);
    for (int k = 0; k < ns; k++) {
        int have = 0;
        double px0 = 0, py0 = 0;
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].y[i])) continue;
            const double px = L + (s[k].x[i] - x0) / (x1 - x0) * (R - L);
            const double py = B - (s[k].y[i] - y0) / (y1 - y0) * (B - T);
            if (have) canvas_line(c, px0, py0, px, py, s[k].rgb, 0.6 + 0.8 * s[k].thick);
            px0 = px, py0 = py, have = 1;
        }
    }
    canvas_unclip(c);
    if (txt && txt->title) canvas_text(c, L, 14, txt->title, axis, title);
    if (txt && txt->xlabel) canvas_text(c, (L + R) / 2, B + 28, txt->xlabel, axis, label);
    if (txt && txt->ylabel) canvas_text(c, 10, (T + B) / 2, txt->ylabel, axis, (canvas_font){label.size, 1, 0, 1});
    // the legend, top right: a short line and the label of each labelled series, on white
    double lw = 0;
    int nl = 0;
    for (int k = 0; k < ns; k++)
        if (s[k].label) lw = fmax(lw, canvas_text_width(c, s[k].label, label)), nl++;
    if (nl) {
        const unsigned char white[3] = {255, 255, 255}, frame[3] = {200, 200, 200};
        const double bx = R - lw - 50, by = T + 8, bh = 20.0 * nl + 8;
        canvas_fill(c, bx - 1, by - 1, lw + 44, bh + 2, frame);
        canvas_fill(c, bx, by, lw + 42, bh, white);
        double ly = by + 14;
        for (int k = 0; k < ns; k++) {
            if (!s[k].label) continue;
            canvas_line(c, bx + 8, ly, bx + 30, ly, s[k].rgb, 3);
            canvas_text(c, bx + 36, ly - 8, s[k].label, axis, (canvas_font){label.size, 0, 0, 0});
            ly += 20;
        }
    }
    const int rc = canvas_write(c, err, en);
    canvas_free(c);
    return rc;
}
