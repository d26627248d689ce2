// canvas.c: see canvas.h. The drawing is recorded (a cairo recording surface) and replayed onto a
// PNG image or an SVG surface when it is written, so one drawing gives either format.
#include "io/canvas.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct canvas {
    cairo_surface_t *rec;
    cairo_t *cr;
    int w, h;
};

canvas *canvas_new(int w, int h, char *err, size_t n) {
    if (w < 1 || h < 1 || w > 16384 || h > 16384) {
        snprintf(err, n, "picture of %d x %d pixels: each side must be 1 to 16384", w, h);
        return NULL;
    }
    canvas *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, n, "out of memory");
        return NULL;
    }
    const cairo_rectangle_t extent = {0, 0, w, h};
    c->rec = cairo_recording_surface_create(CAIRO_CONTENT_COLOR, &extent);
    c->cr = cairo_create(c->rec);
    c->w = w, c->h = h;
    if (cairo_status(c->cr) != CAIRO_STATUS_SUCCESS) {
        snprintf(err, n, "cairo: %s", cairo_status_to_string(cairo_status(c->cr)));
        canvas_free(c);
        return NULL;
    }
    cairo_set_source_rgb(c->cr, 1, 1, 1);
    cairo_paint(c->cr);
    return c;
}

void canvas_free(canvas *c) {
    if (!c) return;
    cairo_destroy(c->cr);
    cairo_surface_destroy(c->rec);
    free(c);
}

static void ink(canvas *c, const unsigned char rgb[3]) {
    cairo_set_source_rgb(c->cr, rgb[0] / 255.0, rgb[1] / 255.0, rgb[2] / 255.0);
}

void canvas_line(canvas *c, double x0, double y0, double x1, double y1, const unsigned char rgb[3], double width) {
    ink(c, rgb);
    cairo_set_line_width(c->cr, width);
    cairo_set_line_cap(c->cr, CAIRO_LINE_CAP_ROUND);
    cairo_move_to(c->cr, x0, y0);
    cairo_line_to(c->cr, x1, y1);
    cairo_stroke(c->cr);
}

void canvas_fill(canvas *c, double x, double y, double w, double h, const unsigned char rgb[3]) {
    ink(c, rgb);
    cairo_rectangle(c->cr, x, y, w, h);
    cairo_fill(c->cr);
}

void canvas_clip(canvas *c, double x, double y, double w, double h) {
    cairo_save(c->cr);
    cairo_rectangle(c->cr, x, y, w, h);
    cairo_clip(c->cr);
}

void canvas_unclip(canvas *c) { cairo_restore(c->cr); }

static void font(canvas *c, canvas_font f) {
    cairo_select_font_face(c->cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, f.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_font_size(c->cr, f.size);
}

double canvas_text_width(canvas *c, const char *s, canvas_font f) {
    cairo_text_extents_t e;
    font(c, f);
    cairo_text_extents(c->cr, s, &e);
    return e.x_advance;
}

void canvas_text(canvas *c, double x, double y, const char *s, const unsigned char rgb[3], canvas_font f) {
    cairo_font_extents_t fe;
    font(c, f);
    cairo_font_extents(c->cr, &fe);
    const double w = canvas_text_width(c, s, f), shift = f.align == 1 ? w / 2 : f.align == 2 ? w : 0;
    ink(c, rgb);
    cairo_save(c->cr);
    if (f.vertical) {  // reads upwards: the text's top edge faces left
        cairo_translate(c->cr, x + fe.ascent, y);
        cairo_rotate(c->cr, -1.5707963267948966);
        cairo_move_to(c->cr, -shift, 0);
    } else {
        cairo_move_to(c->cr, x - shift, y + fe.ascent);
    }
    cairo_show_text(c->cr, s);
    cairo_restore(c->cr);
}

static int ends_with(const char *s, const char *tail) {
    const size_t a = strlen(s), b = strlen(tail);
    return a >= b && !strcmp(s + a - b, tail);
}

// The recording replayed onto an image (PNG) or an SVG surface written to tmp.
static cairo_status_t render(canvas *c, const char *tmp, int svg) {
    cairo_surface_t *out = svg ? cairo_svg_surface_create(tmp, c->w, c->h)
                               : cairo_image_surface_create(CAIRO_FORMAT_RGB24, c->w, c->h);
    cairo_t *cr = cairo_create(out);
    cairo_set_source_surface(cr, c->rec, 0, 0);
    cairo_paint(cr);
    cairo_destroy(cr);
    cairo_surface_flush(out);
    cairo_status_t st = cairo_surface_status(out);
    if (!st && !svg) st = cairo_surface_write_to_png(out, tmp);
    cairo_surface_finish(out);  // an SVG is written out here
    if (!st) st = cairo_surface_status(out);
    cairo_surface_destroy(out);
    return st;
}

int canvas_write(canvas *c, const char *path, char *err, size_t n) {
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        snprintf(err, n, "%s: path too long", path);
        return -1;
    }
    const cairo_status_t st = cairo_status(c->cr) ? cairo_status(c->cr) : render(c, tmp, ends_with(path, ".svg"));
    if (st) {
        snprintf(err, n, "%s: cannot write the picture: %s", path, cairo_status_to_string(st));
        remove(tmp);
        return -1;
    }
    if (rename(tmp, path)) {
        snprintf(err, n, "%s: cannot rename into place: %s", path, strerror(errno));
        remove(tmp);
        return -1;
    }
    return 0;
}
