// plot.h: line charts (cairo, io/canvas.h): curves with axes, grid, numeric tick labels, a title,
// axis names and a legend; PNG, or SVG for a path ending in .svg.
#ifndef MTAC_PLOT_H
#define MTAC_PLOT_H

#include <stddef.h>

typedef struct {
    const double *x, *y;
    int n;
    unsigned char rgb[3];
    int thick;          // line width in pixels (1-3)
    const char *label;  // legend entry; NULL = not listed
} plot_series;

typedef struct {
    const char *title, *xlabel, *ylabel;  // each may be NULL
    double y_min, y_max;                  // the y range; both 0 = from the data
} plot_text;

// Draws the series on one set of axes (ranges from the data) and writes path. 0, or -1 + message.
int plot_png(const char *path, const plot_series *s, int n_series, int width, int height, const plot_text *txt,
             char *err, size_t n);

#endif
