// attnmap.c: see attnmap.h.
#include "toy/attnmap.h"
#include "io/attnplot.h"
#include "util/errmsg.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_PANELS = 64 };

int toy_attnmap(const toy_plan *p, const char *dir, uint64_t seed, int sample, const int *layers, int nl,
                const int *heads, int nh, const char *out, char *err, size_t n) {
    const toy_config *task = &p->run.task;
    const int R = toy_row_len(task), T = R - 1, N = task->block_len, L = task->query_len, P = R - 1 - N;
    int all_l[MODEL_MAX_LAYERS], all_h[MODEL_MAX_LAYERS];
    if (!layers) {
        nl = p->models[0].n_layers;
        for (int i = 0; i < nl; i++) all_l[i] = i;
        layers = all_l;
    }
    if (!heads) {
        nh = p->models[0].n_heads;
        for (int i = 0; i < nh && i < MODEL_MAX_LAYERS; i++) all_h[i] = i;
        heads = all_h;
    }
    if (sample < 0 || sample >= p->run.n_test)
        return errmsg(err, n, "sample %d is not one of the %d test samples", sample, p->run.n_test);
    if (nl * nh * p->n_models > MAX_PANELS)
        return errmsg(err, n, "%d layers x %d heads x %d models is more than %d panels; choose fewer", nl, nh,
                      p->n_models, MAX_PANELS);
    for (int mi = 0; mi < p->n_models; mi++) {
        for (int i = 0; i < nl; i++)
            if (layers[i] < 0 || layers[i] >= p->models[mi].n_layers)
                return errmsg(err, n, "layer %d: %s has layers 0..%d", layers[i], p->model_name[mi], p->models[mi].n_layers - 1);
        for (int i = 0; i < nh; i++)
            if (heads[i] < 0 || heads[i] >= p->models[mi].n_heads)
                return errmsg(err, n, "head %d: %s has heads 0..%d", heads[i], p->model_name[mi], p->models[mi].n_heads - 1);
    }
    int *rows = malloc((size_t)(sample + 1) * R * sizeof(int));
    float *maps = malloc((size_t)nl * nh * p->n_models * T * T * sizeof(float));
    char *tokens = malloc((size_t)T + 1), labels[MAX_PANELS][64];
    unsigned char *mark = calloc((size_t)T, 1);
    int rc = rows && maps && tokens && mark ? 0 : errmsg(err, n, "out of memory");
    if (!rc) {
        toy_test_rows(task, seed, sample + 1, rows);
        const int *row = rows + (size_t)sample * R;
        for (int t = 0; t < T; t++) tokens[t] = toy_token_char(row[t]);
        tokens[T] = 0;
        // the target block: the one whose letters are the answer row[P..P+N-1]
        for (int b = 0; b < task->n_blocks; b++) {
            const int at = 1 + b * (N + 1);
            if (!memcmp(row + at, row + P, (size_t)N * sizeof(int)))
                for (int j = 0; j < N; j++) mark[at + j] = 1;
        }
    }
    attnplot_panel panels[MAX_PANELS];
    for (int mi = 0; mi < p->n_models && !rc; mi++) {
        model *m = model_create(&p->models[mi], err, n);
        char path[4096];
        toy_plan_path(path, sizeof path, dir, p->model_name[mi], seed, ".safetensors");
        if (m) model_set_backend(m, MTA_BACKEND_REFERENCE);
        if (!m || model_load_weights(m, path, err, n) ||
            model_forward(m, rows + (size_t)sample * R, NULL, 1, T, NULL, err, n)) {
            rc = -1;
        }
        for (int li = 0; li < nl && !rc; li++)
            for (int hi = 0; hi < nh && !rc; hi++) {
                const int k = (li * nh + hi) * p->n_models + mi;
                rc = model_attention_map(m, layers[li], 0, heads[hi], maps + (size_t)k * T * T, err, n);
                snprintf(labels[k], sizeof labels[k], "%s, layer %d, head %d", p->models[mi].mta ? "MTA" : "baseline",
                         layers[li], heads[hi]);
                panels[k].label = labels[k], panels[k].map = maps + (size_t)k * T * T;
            }
        model_free(m);
    }
    if (!rc) {
        char title[256];
        snprintf(title, sizeof title, "Seed %" PRIu64 ", test sample %d: attention of the #, query and answer positions; the target block in red",
                 seed, sample);
        attnplot_layout lay = {T, P - L - 1, T, tokens, mark, title};
        rc = attnplot_png(out, &lay, panels, nl * nh * p->n_models, p->n_models, err, n);
    }
    free(rows), free(maps), free(tokens), free(mark);
    return rc;
}
