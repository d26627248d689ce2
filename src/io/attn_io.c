// attn_io.c: reading an MTA operator problem from safetensors tensors (see attn_io.h).
#include "io/attn_io.h"
#include "util/errmsg.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void shape_str(const st_tensor *t, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < t->ndim && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", i ? "," : "", (long long)t->shape[i]);
    if (used < n) snprintf(buf + used, n - used, ")");
}

// Checks t's shape against want[0..ndim) (entries < 0 match anything).
static int shape_is(const st_tensor *t, int ndim, const int64_t *want) {
    if (t->ndim != ndim) return 0;
    for (int i = 0; i < ndim; i++)
        if (want[i] >= 0 && t->shape[i] != want[i]) return 0;
    return 1;
}

static int bad_shape(const st_tensor *t, const char *expect, char *err, size_t n) {
    char got[128];
    shape_str(t, got, sizeof got);
    return errmsg(err, n, "tensor '%s' has shape %s, expected %s", t->name, got, expect);
}

static int is_known(const char *name) {
    const char *inputs[] = {"q", "k", "v", "dout", "doc"};
    for (size_t i = 0; i < 5; i++)
        if (!strcmp(name, inputs[i])) return 1;
    return mta_param_index(name) >= 0;
}

static int parse_int(const char *s, long *out) {
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0') return 0;
    *out = x;
    return 1;
}

// The document ids: (B,T), each a whole number within int32 (float32 holds them exactly up to
// 2^24 in size; larger whole numbers are still distinct ids as read).
static int check_doc(const st_tensor *doc, int B, int T, char *err, size_t n) {
    const int64_t want[2] = {B, T};
    char ws[64];
    snprintf(ws, sizeof ws, "(B,T) = (%d,%d)", B, T);
    if (!shape_is(doc, 2, want)) return bad_shape(doc, ws, err, n);
    for (size_t i = 0; i < doc->numel; i++) {
        const float x = doc->data[i];
        if (!(x == floorf(x) && fabsf(x) <= 2147483520.0f))
            return errmsg(err, n, "tensor 'doc' holds %g at flat index %zu: document ids are whole numbers within int32",
                          (double)x, i);
    }
    return 0;
}

// Every tensor is an input, a parameter of mta.h's table, or under ignore_prefix.
static int check_names(const st_file *f, const char *ignore_prefix, char *err, size_t n) {
    for (int i = 0; i < f->n_tensors; i++) {
        const char *name = f->tensors[i].name;
        if (is_known(name)) continue;
        if (ignore_prefix && !strncmp(name, ignore_prefix, strlen(ignore_prefix))) continue;
        char known[256] = "q, k, v, dout, doc";
        for (int j = 0; j < MTA_N_PARAMS; j++)
            snprintf(known + strlen(known), sizeof known - strlen(known), ", %s", mta_param_info(j)->name);
        return errmsg(err, n, "unknown tensor '%s' (expected %s)", name, known);
    }
    return 0;
}

typedef struct {
    const st_tensor *q, *k, *v, *dout, *doc;  // dout and doc may be NULL
} inputs;

// q (B,H,T,d); k and v (B,H_kv,T,d); dout as q; doc (B,T).
static int read_inputs(const st_file *f, inputs *in, char *err, size_t n) {
    const st_tensor *q = st_find(f, "q"), *k = st_find(f, "k"), *v = st_find(f, "v");
    if (!q || !k || !v) return errmsg(err, n, "tensors q, k and v are required (missing %s)", !q ? "q" : !k ? "k" : "v");
    if (q->ndim != 4) return bad_shape(q, "(B,H,T,d)", err, n);
    for (int i = 0; i < 4; i++)
        if (q->shape[i] < 1 || q->shape[i] > 0x7fffffff)
            return errmsg(err, n, "q has a dimension of size %lld; sizes must be in 1..2^31-1", (long long)q->shape[i]);
    const int B = (int)q->shape[0], H = (int)q->shape[1], T = (int)q->shape[2], d = (int)q->shape[3];
    char qs[128];
    shape_str(q, qs, sizeof qs);
    // k and v: (B,H_kv,T,d), their head count H_kv (grouped-query attention when below H; the
    // config's check says when it does not divide H)
    const int64_t kvs[4] = {B, k->ndim == 4 && k->shape[1] >= 1 && k->shape[1] <= H ? k->shape[1] : H, T, d};
    if (!shape_is(k, 4, kvs)) {
        char want[160];
        snprintf(want, sizeof want, "(%d,H_kv,%d,%d) with H_kv <= H = %d", B, T, d, H);
        return bad_shape(k, want, err, n);
    }
    char ks[128];
    shape_str(k, ks, sizeof ks);
    if (!shape_is(v, 4, k->shape)) return bad_shape(v, ks, err, n);
    const st_tensor *dout = st_find(f, "dout");
    if (dout && !shape_is(dout, 4, q->shape)) return bad_shape(dout, qs, err, n);
    const st_tensor *doc = st_find(f, "doc");
    if (doc && check_doc(doc, B, T, err, n)) return -1;
    *in = (inputs){q, k, v, dout, doc};
    return 0;
}

// The metadata layer_id and depth_scale, when given.
static int read_metadata(const st_file *f, mta_config *c, char *err, size_t n) {
    const char *lid = st_meta_get(f, "layer_id"), *dsc = st_meta_get(f, "depth_scale");
    if (lid) {
        long x;
        if (!parse_int(lid, &x) || x < 0 || x > 1000000)
            return errmsg(err, n, "metadata layer_id='%s' is not a non-negative integer", lid);
        c->layer_id = (int)x;
    }
    if (dsc) {
        if (strcmp(dsc, "0") && strcmp(dsc, "1")) return errmsg(err, n, "metadata depth_scale='%s' must be \"0\" or \"1\"", dsc);
        c->depth_scale = dsc[0] == '1';
    }
    return 0;
}

// Every tensor given has the shape the table gives its step under the config read (a shape (1)
// may be a scalar).
static int check_param_shapes(const mta_config *c, const st_tensor *const t[MTA_N_PARAMS], char *err, size_t n) {
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        int64_t want[3];
        const int nd = mta_param_shape(c, i, want);
        if (!t[i] || (nd && shape_is(t[i], nd, want)) || (nd == 1 && want[0] == 1 && t[i]->ndim == 0)) continue;
        char ws[160];
        const st_tensor w = {.ndim = nd, .shape = {want[0], want[1], want[2]}};
        shape_str(&w, ws, sizeof ws);
        char expect[200];
        const char *words = mta_param_info(i)->shape;
        if (strcmp(words, ws)) snprintf(expect, sizeof expect, "%s = %s", words, ws);
        else snprintf(expect, sizeof expect, "%s", ws);
        return bad_shape(t[i], expect, err, n);
    }
    return 0;
}

int attn_problem_from_file(const st_file *f, const char *ignore_prefix, attn_problem *pr, char *err, size_t n) {
    memset(pr, 0, sizeof *pr);
    inputs in = {0};
    if (check_names(f, ignore_prefix, err, n) || read_inputs(f, &in, err, n)) return -1;
    const st_tensor *q = in.q;
    const int B = (int)q->shape[0], H = (int)q->shape[1], T = (int)q->shape[2], d = (int)q->shape[3];

    // Each parameter given switches its step on and its shape sets the step's sizes (mta.h's table:
    // mta_config_from_shapes); every given tensor then has the shape the table gives its step.
    mta_config c = mta_config_default(B, H, T, d);
    c.H_kv = (int)in.k->shape[1];
    if (H % c.H_kv)
        return errmsg(err, n, "tensors k and v have %d heads, which must divide q's H=%d (grouped-query attention)", c.H_kv, H);
    const st_tensor *t[MTA_N_PARAMS];
    int ndim[MTA_N_PARAMS];
    const int64_t *shape[MTA_N_PARAMS];
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        t[i] = st_find(f, mta_param_info(i)->name);
        ndim[i] = t[i] ? t[i]->ndim : -1;
        shape[i] = t[i] ? t[i]->shape : NULL;
    }
    if (mta_config_from_shapes(&c, ndim, shape, err, n) != MTA_OK || read_metadata(f, &c, err, n)) return -1;
    if (mta_config_check(&c, err, n) != MTA_OK || check_param_shapes(&c, t, err, n)) return -1;

    pr->cfg = c;
    pr->q = q->data, pr->k = in.k->data, pr->v = in.v->data, pr->dout = in.dout ? in.dout->data : NULL;
    pr->doc = in.doc ? in.doc->data : NULL;
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        pr->param[i] = t[i] ? t[i]->data : NULL;
        pr->param_numel[i] = t[i] ? t[i]->numel : 0;
    }
    return 0;
}

int attn_problem_check_size(const mta_config *c, int max_T, char *err, size_t n) {
    if (max_T < 1) return errmsg(err, n, "the limit on T must be >= 1 (got %d)", max_T);
    if (c->T > max_T)
        return errmsg(err, n, "T = %d is above the limit of %d (the work grows as B*H*T^2: %.3g map entries per pass)",
                      c->T, max_T, (double)c->B * c->H * (double)c->T * c->T);
    if (c->backend != MTA_BACKEND_REFERENCE) return 0;
    // B*H*T*T <= max_T^2, without overflow: for positive integers x*T*T <= L exactly when
    // x <= floor(floor(L/T)/T).
    const uint64_t bh = (uint64_t)c->B * (uint64_t)c->H, lim = (uint64_t)max_T * (uint64_t)max_T;
    if (bh > lim / (uint64_t)c->T / (uint64_t)c->T) {
        const double floats = (double)bh * c->T * c->T;
        return errmsg(err, n,
                      "the reference backend holds several (T,T) maps of B*H*T*T = %.3g floats (%.3g GB) each, above "
                      "the limit of %d^2 = %.3g floats; the fused backend holds no such map",
                      floats, floats * 4 / 1e9, max_T, (double)lim);
    }
    return 0;
}

void attn_problem_doc_ids(const attn_problem *pr, int32_t *ids) {
    const size_t n = pr->doc ? (size_t)pr->cfg.B * pr->cfg.T : 0;
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)pr->doc[i];
}

mta_params attn_problem_params(const attn_problem *pr) {
    mta_params p;
    for (int i = 0; i < MTA_N_PARAMS; i++) p.w[i] = pr->param[i];
    return p;
}

int attn_compare_expected(const st_file *f, const char *name, const float *got, size_t n, double *diff,
                          double *scale, char *err, size_t err_len) {
    char key[96];
    snprintf(key, sizeof key, "expect.%s", name);
    const st_tensor *e = st_find(f, key);
    if (!e) return 0;
    if (e->numel != n) return errmsg(err, err_len, "%s has %zu entries, the result %s %zu", key, e->numel, name, n);
    double d = 0, s = 0.1;
    for (size_t i = 0; i < n; i++) {
        const double di = fabs((double)got[i] - e->data[i]);  // NaN or infinite exactly when either is
        d = isfinite(d) && isfinite(di) ? fmax(d, di) : INFINITY;
        if (isfinite(e->data[i])) s = fmax(s, fabs(e->data[i]));  // finite: diff <= tol * scale fails on INFINITY
    }
    *diff = d, *scale = s;
    return 1;
}
