// fuzz_attn_problem.c: `mtac attn` problem files (src/io/attn_io.c: attn_problem_from_file after
// st_read, then attn_problem_check_size): q, k, v, dout and the MTA parameters, whose shapes set
// the operator's config. The input is the safetensors file ("expect." tensors are ignored, as in
// the fixture tests, so the fixtures are seeds). An accepted problem must give every parameter
// exactly the size its step needs, and on small problems the operator runs on it, forward and
// (with dout) backward, so that anything the checks let through reads out of bounds under
// AddressSanitizer.
#include "fuzz_util.h"
#include "io/attn_io.h"

#include <stdlib.h>

// Operator runs are capped to keep the fuzzer fast: the map work, B*H*T*T times the kernel taps.
enum { MAX_ELEMS = 4096, MAX_WORK = 1 << 20 };

static void run_operator(const attn_problem *pr) {
    const mta_config *c = &pr->cfg;
    const size_t n = (size_t)c->B * c->H * c->T * c->d;
    const size_t taps = 1 + (size_t)c->pre_cq * c->pre_ck + (size_t)c->post_cq * c->post_ck + (size_t)c->H;
    if (n > MAX_ELEMS || (size_t)c->B * c->H * c->T * c->T * taps > MAX_WORK) return;
    size_t np = 0;
    for (int i = 0; i < MTA_N_PARAMS; i++) np += pr->param_numel[i];
    float *buf = calloc(4 * n + np + 1, sizeof(float));
    fuzz_require(buf != NULL, "out of memory");
    float *out = buf, *dq = buf + n, *dk = buf + 2 * n, *dv = buf + 3 * n, *gp[MTA_N_PARAMS] = {0}, *cur = buf + 4 * n;
    for (int i = 0; i < MTA_N_PARAMS; i++)
        if (pr->param[i]) gp[i] = cur, cur += pr->param_numel[i];
    mta_ctx *ctx;
    char err[256];
    fuzz_require(mta_create(&ctx, c, err, sizeof err) == MTA_OK, "mta_create accepts the problem's config");
    const mta_params p = attn_problem_params(pr);
    fuzz_require(mta_forward(ctx, pr->q, pr->k, pr->v, &p, out) == MTA_OK, "forward runs");
    if (pr->dout) {
        mta_grads g;
        for (int i = 0; i < MTA_N_PARAMS; i++) g.w[i] = gp[i];
        fuzz_require(mta_backward(ctx, pr->q, pr->k, pr->v, &p, pr->dout, dq, dk, dv, &g) == MTA_OK, "backward runs");
    }
    mta_destroy(ctx);
    free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    st_file f;
    char err[512];
    if (st_read(fuzz_file(data, size), &f, err, sizeof err)) return 0;
    attn_problem pr;
    // As mtac attn reads it: the problem, then the size limit of --max-T (its default).
    if (attn_problem_from_file(&f, "expect.", &pr, err, sizeof err) == 0 &&
        attn_problem_check_size(&pr.cfg, ATTN_DEFAULT_MAX_T, err, sizeof err) == 0) {
        const mta_config *c = &pr.cfg;
        // What each step reads (mta.h's table): the kernels' sizes follow from the config.
        const mta_param_sizes ps = mta_param_sizes_of(c);
        const size_t *want = ps.w;
        for (int i = 0; i < MTA_N_PARAMS; i++)
            fuzz_require(pr.param_numel[i] == want[i] && !pr.param[i] == !want[i], "parameter sizes match the config");
        run_operator(&pr);
    }
    st_free(&f);
    return 0;
}
