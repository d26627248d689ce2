// attnplot.h: attention maps as pictures (PNG, or SVG for a .svg path): for chosen query rows of a
// (T,T) attention map, one heat strip per row over all key positions, with the tokens written
// along both axes; several maps side by side in a grid (e.g. baseline beside MTA, one line per
// layer and head).
#ifndef MTAC_ATTNPLOT_H
#define MTAC_ATTNPLOT_H

#include <stddef.h>

typedef struct {
    int T;                        // sequence length of every map
    int row0, row1;               // query rows [row0, row1) are drawn
    const char *tokens;           // T characters: the token at each position (axis labels)
    const unsigned char *mark;    // T flags, or NULL: columns to underline (e.g. the target block)
    const char *title;            // picture title, or NULL
} attnplot_layout;

typedef struct {
    const char *label;  // panel heading, e.g. "MTA  LAYER 1  HEAD 0"
    const float *map;   // (T,T) row-stochastic attention weights
} attnplot_panel;

// Panels fill a grid n_cols wide, row by row. Each strip is scaled to its own row maximum (white
// = 0, dark = the row's largest weight), so where a query looks is visible whatever the spread.
// 0, or -1 + message.
int attnplot_png(const char *path, const attnplot_layout *lay, const attnplot_panel *p, int n_panels, int n_cols,
                 char *err, size_t n);

#endif
