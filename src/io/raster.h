// raster.h: a small RGB canvas for the PNG pictures (loss curves, attention maps): lines, filled
// rectangles, text in a 3x5 pixel font, and an atomic PNG writer (libpng).
#ifndef MTAC_RASTER_H
#define MTAC_RASTER_H

#include <stddef.h>

typedef struct {
    unsigned char *px;  // (h, w, 3) RGB, row-major
    int w, h;
} raster;

// A white canvas; 0, or -1 + message.
int raster_init(raster *r, int w, int h, char *err, size_t n);
void raster_free(raster *r);

void raster_dot(raster *r, int x, int y, const unsigned char rgb[3]);
void raster_line(raster *r, int x0, int y0, int x1, int y1, const unsigned char rgb[3], int thick);
void raster_fill(raster *r, int x, int y, int w, int h, const unsigned char rgb[3]);

// Text in the 3x5 font (digits, letters shown as capitals, and . - # : % ( ) , / = ^ > < _ + $),
// each pixel drawn as a scale x scale square; glyphs advance 4*scale. Unknown characters leave a gap.
void raster_text(raster *r, int x, int y, const char *s, const unsigned char rgb[3], int scale);
int raster_text_width(const char *s, int scale);

// Writes the canvas as an 8-bit RGB PNG through path.tmp and a rename; 0, or -1 + message.
int raster_write_png(const raster *r, const char *path, char *err, size_t n);

#endif
