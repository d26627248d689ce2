// attn_io.c: reading an MTA operator problem from safetensors tensors (see attn_io.h).
#include "io/attn_io.h"
#include "util/errmsg.h"

#include <errno.h>
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

// A key-query conv kernel (H, c_q, c_k): checks its shape and reads the kernel sizes.
static int conv_kernel_sizes(const st_tensor *w, int H, int *cq, int *ck, char *err, size_t n) {
    int64_t s[3] = {H, -1, -1};
    char want[64];
    snprintf(want, sizeof want, "(H=%d, c_q, c_k)", H);
    if (!shape_is(w, 3, s)) return bad_shape(w, want, err, n);
    if (w->shape[1] < 1 || w->shape[2] < 1 || w->shape[1] > 65536 || w->shape[2] > 65536)
        return bad_shape(w, "kernel sizes in 1..65536", err, n);
    *cq = (int)w->shape[1], *ck = (int)w->shape[2];
    return 0;
}

static int is_known(const char *name) {
    const char *inputs[] = {"q", "k", "v", "dout"};
    for (size_t i = 0; i < 4; i++)
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

int attn_problem_from_file(const st_file *f, const char *ignore_prefix, attn_problem *pr, char *err, size_t n) {
    memset(pr, 0, sizeof *pr);
    for (int i = 0; i < f->n_tensors; i++) {
        const char *name = f->tensors[i].name;
        if (is_known(name)) continue;
        if (ignore_prefix && !strncmp(name, ignore_prefix, strlen(ignore_prefix))) continue;
        char known[256] = "q, k, v, dout";
        for (int j = 0; j < MTA_N_PARAMS; j++)
            snprintf(known + strlen(known), sizeof known - strlen(known), ", %s", mta_param_info(j)->name);
        return errmsg(err, n, "unknown tensor '%s' (expected %s)", name, known);
    }
    const st_tensor *q = st_find(f, "q"), *k = st_find(f, "k"), *v = st_find(f, "v");
    if (!q || !k || !v) return errmsg(err, n, "tensors q, k and v are required (missing %s)", !q ? "q" : !k ? "k" : "v");
    if (q->ndim != 4) return bad_shape(q, "(B,H,T,d)", err, n);
    for (int i = 0; i < 4; i++)
        if (q->shape[i] < 1 || q->shape[i] > 0x7fffffff)
            return errmsg(err, n, "q has a dimension of size %lld; sizes must be in 1..2^31-1", (long long)q->shape[i]);
    const int B = (int)q->shape[0], H = (int)q->shape[1], T = (int)q->shape[2], d = (int)q->shape[3];
    char qs[128];
    shape_str(q, qs, sizeof qs);
    if (!shape_is(k, 4, q->shape)) return bad_shape(k, qs, err, n);
    if (!shape_is(v, 4, q->shape)) return bad_shape(v, qs, err, n);
    const st_tensor *dout = st_find(f, "dout");
    if (dout && !shape_is(dout, 4, q->shape)) return bad_shape(dout, qs, err, n);

    mta_config c = mta_config_default(B, H, T, d);
    const st_tensor *t[MTA_N_PARAMS];
    for (int i = 0; i < MTA_N_PARAMS; i++) t[i] = st_find(f, mta_param_info(i)->name);
    char want[128];
    if (t[MTA_W_PRE] && conv_kernel_sizes(t[MTA_W_PRE], H, &c.pre_cq, &c.pre_ck, err, n)) return -1;
    if (t[MTA_W_PRE_HEAD]) {
        int64_t s[2] = {H, H};
        snprintf(want, sizeof want, "(H,H) = (%d,%d)", H, H);
        if (!shape_is(t[MTA_W_PRE_HEAD], 2, s)) return bad_shape(t[MTA_W_PRE_HEAD], want, err, n);
        c.pre_head_mix = 1;
    }
    if (t[MTA_W_POST] && conv_kernel_sizes(t[MTA_W_POST], H, &c.post_cq, &c.post_ck, err, n)) return -1;
    if (t[MTA_W_POST_HEAD]) {
        const st_tensor *w = t[MTA_W_POST_HEAD];
        snprintf(want, sizeof want, "(H/c_h, c_h, c_h) with H=%d", H);
        if (w->ndim != 3 || w->shape[1] != w->shape[2] || w->shape[1] < 1 || w->shape[1] > H ||
            w->shape[0] * w->shape[1] != H)
            return bad_shape(w, want, err, n);
        c.post_ch = (int)w->shape[1];
    }
    int64_t sd[1] = {d}, s1[1] = {1};
    snprintf(want, sizeof want, "(d) = (%d)", d);
    if (t[MTA_GN_WEIGHT]) {
        if (!shape_is(t[MTA_GN_WEIGHT], 1, sd)) return bad_shape(t[MTA_GN_WEIGHT], want, err, n);
        c.group_norm = 1;
    }
    if (!t[MTA_GATE_W] != !t[MTA_GATE_B]) return errmsg(err, n, "gate_w and gate_b must be given together");
    if (t[MTA_GATE_W]) {
        if (!shape_is(t[MTA_GATE_W], 1, sd)) return bad_shape(t[MTA_GATE_W], want, err, n);
        if (!shape_is(t[MTA_GATE_B], 1, s1) && t[MTA_GATE_B]->ndim != 0) return bad_shape(t[MTA_GATE_B], "(1)", err, n);
        c.gate = 1;
    }
    const char *lid = st_meta_get(f, "layer_id"), *dsc = st_meta_get(f, "depth_scale");
    if (lid) {
        long x;
        if (!parse_int(lid, &x) || x < 0 || x > 1000000)
            return errmsg(err, n, "metadata layer_id='%s' is not a non-negative integer", lid);
        c.layer_id = (int)x;
    }
    if (dsc) {
        if (strcmp(dsc, "0") && strcmp(dsc, "1")) return errmsg(err, n, "metadata depth_scale='%s' must be \"0\" or \"1\"", dsc);
        c.depth_scale = dsc[0] == '1';
    }
    if (mta_config_check(&c, err, n) != MTA_OK) return -1;
    // Every tensor given has the size the table says its step needs under the config read.
    const mta_param_sizes want_n = mta_param_sizes_of(&c);
    for (int i = 0; i < MTA_N_PARAMS; i++)
        if (t[i] && (size_t)t[i]->numel != want_n.w[i])
            return bad_shape(t[i], want_n.w[i] ? "the size of its step under the config" : "no tensor: its step is off", err, n);

    pr->cfg = c;
    pr->q = q->data, pr->k = k->data, pr->v = v->data, pr->dout = dout ? dout->data : NULL;
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

mta_params attn_problem_params(const attn_problem *pr) {
    mta_params p;
    for (int i = 0; i < MTA_N_PARAMS; i++) p.w[i] = pr->param[i];
    return p;
}
