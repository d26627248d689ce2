// cmd_plot.c: `mtac plot`: loss curves of one or more runs (metrics.jsonl) as a PNG.
#include "cli.h"
#include "io/canvas.h"
#include "io/fsutil.h"
#include "io/plot.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    double *x, *y, *vx, *vy;
    int n, nv;
} curves;

static void curves_free(curves *c) { free(c->x), free(c->y), free(c->vx), free(c->vy); }

// Room for cap points in each of c's four arrays; 0, or -1 when memory runs out.
static int curves_grow(curves *c, int cap) {
    double **a[4] = {&c->x, &c->y, &c->vx, &c->vy};
    for (int i = 0; i < 4; i++) {
        double *p = realloc(*a[i], (size_t)cap * sizeof(double));
        if (!p) return -1;
        *a[i] = p;
    }
    return 0;
}

// Reads step, loss and val_loss from each line of DIR/metrics.jsonl. A loss that was not finite
// is null there (docs/formats.md): that point is left out, and the count of them is printed.
static int read_metrics(const char *dir, curves *c) {
    char path[4096], line[8192];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    char err[4200];
    FILE *f = open_input_file(path, NULL, err, sizeof err);
    if (!f) {
        fprintf(stderr, "mtac plot: %s\n", err);
        return -1;
    }
    int cap = 0, line_no = 0, null_loss = 0, null_val = 0;
    memset(c, 0, sizeof *c);
    while (fgets(line, sizeof line, f)) {
        line_no++;
        cJSON *o = cJSON_Parse(line);
        const cJSON *st = cJSON_GetObjectItem(o, "step"), *l = cJSON_GetObjectItem(o, "loss"),
                    *v = cJSON_GetObjectItem(o, "val_loss");
        const char *why = !cJSON_IsObject(o) ? "is not a JSON object" : !cJSON_IsNumber(st) ? "has no number \"step\""
                          : !cJSON_IsNumber(l) && !cJSON_IsNull(l) ? "has no \"loss\" (a number, or null)" : NULL;
        if (!why && line_no > cap) {  // each line adds at most one point to each curve
            cap = cap ? 2 * cap : 256;
            if (curves_grow(c, cap)) why = "is more than this machine's memory holds";
        }
        if (why) {
            cJSON_Delete(o);
            fclose(f);
            curves_free(c);
            fprintf(stderr, "mtac plot: %s: line %d %s\n", path, line_no, why);
            return -1;
        }
        if (cJSON_IsNumber(l)) c->x[c->n] = st->valuedouble, c->y[c->n++] = l->valuedouble;
        else null_loss++;
        if (cJSON_IsNumber(v)) c->vx[c->nv] = st->valuedouble, c->vy[c->nv++] = v->valuedouble;
        else null_val += cJSON_IsNull(v);
        cJSON_Delete(o);
    }
    fclose(f);
    if (null_loss || null_val)
        fprintf(stderr, "mtac plot: %s: skipped %d training and %d validation losses that are null (not finite)\n", path,
                null_loss, null_val);
    if (c->n) return 0;
    fprintf(stderr, "mtac plot: %s %s\n", path, line_no ? "holds no finite training loss" : "is empty");
    curves_free(c);
    return -1;
}

static const char USAGE[] = "usage: mtac plot --out FILE.png|FILE.svg RUN_DIR [RUN_DIR ...]\n";
static const char ABOUT[] =
    "Draws each run's training loss (thin, lighter) and validation loss (thick) against the\n"
    "step, up to 8 runs, in the colours listed on standard output, with a legend that names\n"
    "each run; a PNG, or an SVG when FILE ends in .svg.\n";

int cmd_plot(int argc, char **argv) {
    const char *out = NULL;
    const cli_opt opts[] = {{"out", CLI_STR, &out, .arg = "FILE", .help = "the picture (.png or .svg)"}};
    const cli_spec spec = {"mtac plot", USAGE, ABOUT, "RUN_DIR", opts, 1, NULL};
    int first, st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    if (argc - first > 8) {
        fprintf(stderr, "mtac plot: at most 8 runs in one picture; '%s' is the 9th (plot the rest in another)\n",
                argv[first + 8]);
        return 2;
    }
    char *const *runs = argv + first;
    int nr = argc - first;
    const int W = 900, H = 500;
    if (!out || !nr) {
        fprintf(stderr, "mtac plot: --out FILE.png and at least one run directory are required\n");
        return 2;
    }
    for (int r = 0; r < nr; r++) {
        char metrics[4200];
        snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", runs[r]);
        if (cli_out_is_input(spec.name, out, metrics)) return 2;
    }
    char perr[512];
    if (canvas_check_path(out, perr, sizeof perr)) {  // before reading any run
        fprintf(stderr, "mtac plot: %s\n", perr);
        return 2;
    }
    static const unsigned char pal[8][3] = {{31, 119, 180}, {255, 127, 14}, {44, 160, 44},  {214, 39, 40},
                                            {148, 103, 189}, {140, 86, 75}, {227, 119, 194}, {127, 127, 127}};
    static const char *names[8] = {"blue", "orange", "green", "red", "purple", "brown", "pink", "grey"};
    curves cv[8];
    plot_series s[16];
    char labels[16][160];  // the legend: each run's directory, train and validation
    int ns = 0, rc = 0;
    for (int r = 0; r < nr && !rc; r++) {
        if (read_metrics(runs[r], &cv[r])) {
            rc = 1;
            nr = r;
            break;
        }
        plot_series tr = {cv[r].x, cv[r].y, cv[r].n, {0}, 1, NULL};
        for (int k = 0; k < 3; k++) tr.rgb[k] = (unsigned char)(pal[r][k] + (255 - pal[r][k]) / 2);
        plot_series va = {cv[r].vx, cv[r].vy, cv[r].nv, {pal[r][0], pal[r][1], pal[r][2]}, 3, NULL};
        snprintf(labels[ns], sizeof labels[ns], "%s, train", runs[r]);
        tr.label = labels[ns], s[ns++] = tr;
        if (cv[r].nv) {
            snprintf(labels[ns], sizeof labels[ns], "%s, validation", runs[r]);
            va.label = labels[ns], s[ns++] = va;
        }
        printf("%-7s %s\n", names[r], runs[r]);
    }
    char err[512];
    if (!rc && plot_png(out, s, ns, W, H, &(plot_text){"Loss", "step", "loss", 0, 0}, err, sizeof err)) {
        fprintf(stderr, "mtac plot: %s\n", err);
        rc = 1;
    }
    if (!rc) printf("wrote %s (x: step, y: loss; thick: validation)\n", out);
    for (int r = 0; r < nr; r++) curves_free(&cv[r]);
    return rc;
}
