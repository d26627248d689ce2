// plot.h: line charts as PNG (libpng): loss curves with axes, grid and numeric tick labels.
#ifndef MTAC_PLOT_H
#define MTAC_PLOT_H

#include <stddef.h>

typedef struct {
    const double *x, *y;
    int n;
    unsigned char rgb[3];
    int thick;  // line width in pixels (1-3)
} plot_series;

// Draws the series on one set of axes (ranges from the data) and writes path. 0, or -1 + message.
int plot_png(const char *path, const plot_series *s, int n_series, int width, int height, char *err, size_t n);

#endif
