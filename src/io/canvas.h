// canvas.h: the pictures' drawing surface (loss curves, error curves, heatmaps, attention maps), on
// cairo: anti-aliased lines and rectangles, text in a real sans-serif font, written as PNG, or SVG
// when the path ends in ".svg", atomically (out_open in io/fsutil.h).
#ifndef MTAC_CANVAS_H
#define MTAC_CANVAS_H

#include <stddef.h>

typedef struct canvas canvas;

// A white w x h canvas (pixels of a PNG, points of an SVG) for the picture at path: SVG when path
// ends in ".svg", PNG when in ".png" or in no extension at all (/dev/stdout); another extension
// is refused. path NULL: a canvas to measure text on, never written. NULL with a message.
canvas *canvas_new(const char *path, int w, int h, char *err, size_t n);
// 0 when canvas_new can write path's format (.png, .svg, or no extension: PNG), else -1 + message;
// for commands that check --out before their work.
int canvas_check_path(const char *path, char *err, size_t n);
void canvas_free(canvas *c);

// Lines (width in pixels) and filled rectangles, in 8-bit RGB.
void canvas_line(canvas *c, double x0, double y0, double x1, double y1, const unsigned char rgb[3], double width);
void canvas_fill(canvas *c, double x, double y, double w, double h, const unsigned char rgb[3]);
// Lines and fills after canvas_clip draw only inside that rectangle, until canvas_unclip.
void canvas_clip(canvas *c, double x, double y, double w, double h);
void canvas_unclip(canvas *c);

// Text of `size` pixels whose top edge is at y: align 0 puts its left end at x, 1 its centre, 2 its
// right end. bold: the title weight. vertical: rotated a quarter turn (reading upwards; x is then
// its left edge and y its centre).
typedef struct {
    double size;
    int align, bold, vertical;
} canvas_font;
void canvas_text(canvas *c, double x, double y, const char *s, const unsigned char rgb[3], canvas_font f);
// The advance width of s at that font, in pixels.
double canvas_text_width(canvas *c, const char *s, canvas_font f);

// Writes the picture to the path it was made for (out_open: atomically, a symlink followed, a
// device written in place). 0, or -1 + message.
int canvas_write(canvas *c, char *err, size_t n);

#endif
