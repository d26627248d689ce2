// heatmap.h: a table of values in [0, 1] as a picture (PNG, or SVG for a .svg path): one coloured
// cell per value (white 0 to dark blue 1) with its percentage, row and column labels and a title.
#ifndef MTAC_HEATMAP_H
#define MTAC_HEATMAP_H

#include <stddef.h>

// values[r * n_cols + c]; NAN cells are grey. 0, or -1 with a message (atomic write).
int heatmap_png(const char *path, const char *title, const char *row_axis, const char *const *rows, int n_rows,
                const char *col_axis, const char *const *cols, int n_cols, const double *values, char *err, size_t n);

#endif
