// canvas.c: see canvas.h. A PNG is drawn on an image surface and encoded at the end; an SVG on
// cairo's SVG surface, which streams its text as it goes. Either goes to memory first, then to the
// file in one atomic write (out_open), so nothing is opened before the picture is done.
#include "io/canvas.h"
#include "io/fsutil.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct canvas {
    cairo_surface_t *surface;
    cairo_t *cr;
    int svg;
    char path[4096];      // empty: a canvas to measure text on, not to write
    unsigned char *bytes; // the encoded picture so far
    size_t len, cap;
    int oom;              // bytes could not grow
};

// cairo's stream writer: appends to the canvas's bytes.
static cairo_status_t append(void *closure, const unsigned char *data, unsigned int len) {
    canvas *c = closure;
    if (c->len + len > c->cap) {
        const size_t cap = 2 * (c->len + len) + 4096;
        unsigned char *b = realloc(c->bytes, cap);
        if (!b) return c->oom = 1, CAIRO_STATUS_NO_MEMORY;
        c->bytes = b, c->cap = cap;
    }
    memcpy(c->bytes + c->len, data, len);
    c->len += len;
    return CAIRO_STATUS_SUCCESS;
}

// cairo and fontconfig keep the fonts of the text drawn for the rest of the process; given back at
// exit, when every canvas is gone, so that a leak checker sees only what mtac itself kept.
static void release_font_caches(void) {
    cairo_debug_reset_static_data();
    FcFini();
}

// The picture format of path by its extension: 1 for .svg, 0 for .png or no extension (a device
// such as /dev/stdout), -1 for another (cairo writes only these two; a .jpg of PNG bytes would
// mislead every program that opens it).
static int format_of(const char *path) {
    const char *base = strrchr(path, '/'), *dot = strrchr(base ? base + 1 : path, '.');
    if (!dot || dot == (base ? base + 1 : path)) return 0;
    return !strcasecmp(dot, ".svg") ? 1 : !strcasecmp(dot, ".png") ? 0 : -1;
}

int canvas_check_path(const char *path, char *err, size_t n) {
    if (format_of(path) >= 0) return 0;
    snprintf(err, n, "%s: cannot write a %s picture: name it .png or .svg", path, strrchr(path, '.'));
    return -1;
}

canvas *canvas_new(const char *path, int w, int h, char *err, size_t n) {
    static int at_exit;
    if (!at_exit) at_exit = !atexit(release_font_caches);
    if (w < 1 || h < 1 || w > 16384 || h > 16384) {
        snprintf(err, n, "picture of %d x %d pixels: each side must be 1 to 16384", w, h);
        return NULL;
    }
    canvas *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, n, "out of memory");
        return NULL;
    }
    if (path && snprintf(c->path, sizeof c->path, "%s", path) >= (int)sizeof c->path) {
        snprintf(err, n, "%.200s...: path too long", path);
        free(c);
        return NULL;
    }
    if (path && canvas_check_path(path, err, n)) {
        free(c);
        return NULL;
    }
    c->svg = path ? format_of(path) : 0;
    c->surface = c->svg ? cairo_svg_surface_create_for_stream(append, c, w, h)
                        : cairo_image_surface_create(CAIRO_FORMAT_RGB24, w, h);
    c->cr = cairo_create(c->surface);
    if (cairo_status(c->cr) != CAIRO_STATUS_SUCCESS) {
        snprintf(err, n, "%s: cannot start the picture: %s", path ? path : "(measure)", cairo_status_to_string(cairo_status(c->cr)));
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
    cairo_surface_destroy(c->surface);
    free(c->bytes);
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

int canvas_write(canvas *c, char *err, size_t n) {
    const char *path = c->path;
    if (!path[0]) {
        snprintf(err, n, "a canvas made to measure text on has no file to write");
        return -1;
    }
    cairo_status_t st = cairo_status(c->cr);
    cairo_surface_flush(c->surface);
    if (!st && !c->svg) st = cairo_surface_write_to_png_stream(c->surface, append, c);
    cairo_surface_finish(c->surface);  // an SVG's text is complete here
    if (!st) st = cairo_surface_status(c->surface);
    if (st) {
        snprintf(err, n, "%s: cannot write the picture: %s", path, c->oom ? "out of memory" : cairo_status_to_string(st));
        return -1;
    }
    out_file o;
    if (out_open(&o, path, err, n)) return -1;
    fwrite(c->bytes, 1, c->len, o.f);
    return out_close(&o, err, n);
}
