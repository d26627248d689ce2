// cmd_attn.c: `mtac attn --in IN.safetensors --out OUT.safetensors`: the operator on a file.
#include "cli.h"
#include "io/attn_io.h"
#include "io/safetensors.h"
#include "mta.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtac attn --in IN.safetensors --out OUT.safetensors [--threads N] [--backend NAME]\n"
            "                 [--max-T N] [--tol X]\n"
            "\n"
            "Runs the MTA operator on the float32 tensors of IN and writes OUT.\n"
            "  IN must hold q, k, v of shape (B,H,T,d). Each parameter present switches its step on:\n"
            "    w_pre (H,c_q,c_k)          pre-softmax key-query convolution (c_k odd)\n"
            "    w_pre_head (H,H)           pre-softmax head mixing\n"
            "    w_post (H,c_q,c_k)         post-softmax key-query convolution\n"
            "    w_post_head (H/c_h,c_h,c_h) post-softmax head convolution\n"
            "    gn_weight (d)              group norm (metadata depth_scale \"1\" and layer_id N add depth scaling)\n"
            "    gate_w (d), gate_b (1)     output gate\n"
            "  and optionally dout (B,H,T,d), the gradient of the loss w.r.t. the output.\n"
            "  OUT gets `out`, and with dout also grad.q, grad.k, grad.v and grad.<param> for each parameter.\n"
            "  The format is documented in docs/formats.md.\n"
            "  IN may also hold expect.out, expect.grad.q, ... (as the files of tests/fixtures/ do): each is\n"
            "  compared with the result of that name, and the command fails (exit status 1, after writing\n"
            "  OUT) when the largest difference exceeds --tol (default 2e-4) times the largest |expected|\n"
            "  (at least 0.1).\n"
            "  --backend: fused (the default: no (T,T) map held, docs/fused.md), reference (materialises\n"
            "  the maps), cuda (an NVIDIA GPU, in builds with the CUDA toolkit) or cuda-emu (the CUDA\n"
            "  backend's source run on the CPU, in builds made with -DMTAC_CUDA_EMU=ON; slow); all compute\n"
            "  the same function within float32 rounding. The tensors go to a GPU backend's memory and the\n"
            "  results come back. Without the flag, the environment variable MTAC_BACKEND (fused or\n"
            "  reference) picks one.\n"
            "  --max-T: the largest T run (default %d), checked before any work: the work grows as B*H*T^2\n"
            "  while the file grows as B*H*T*d. The reference backend also needs B*H*T*T <= N^2 (it holds\n"
            "  several maps of B*H*T*T floats: 1 GiB each at the default).\n",
            ATTN_DEFAULT_MAX_T);
}

// Compares each result with the file's expect.<name>, if any; prints one line each. Returns the
// number of results beyond tol (relative to the largest |expected|, as the project's tests
// compare, with a floor), or -1 when an expect tensor does not match its result's size.
static int compare_expected(const st_file *f, const st_tensor *ts, int nt, double tol) {
    int bad = 0;
    for (int i = 0; i < nt; i++) {
        char key[64];
        snprintf(key, sizeof key, "expect.%s", ts[i].name);
        const st_tensor *e = st_find(f, key);
        if (!e) continue;
        if (e->numel != ts[i].numel) {
            fprintf(stderr, "mtac attn: %s has %zu entries, the result %s %zu\n", key, e->numel, ts[i].name, ts[i].numel);
            return -1;
        }
        const float *x = ts[i].data, *y = e->data;
        double diff = 0, scale = 0;
        for (size_t j = 0; j < e->numel; j++) {
            const double dj = fabs((double)x[j] - y[j]);
            if (isnan(dj)) diff = NAN;  // a NaN expected value fails the comparison, never skipped
            else if (dj > diff) diff = dj;
            if (fabs(y[j]) > scale) scale = fabs(y[j]);
        }
        // A floor under the scale, as tests/test_attn_fixtures.c has: a gradient that is zero up to
        // rounding (1e-5 here) is float32 noise of products a hundred thousand times larger.
        const int ok = diff <= tol * (scale > 0.1 ? scale : 0.1);
        printf("  %-18s max |diff| %.3g, largest |expected| %.3g: %s\n", ts[i].name, diff, scale, ok ? "ok" : "DIFFERS");
        bad += !ok;
    }
    return bad;
}

// The index of the first non-finite entry of x (n entries), or -1.
static long first_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return (long)i;
    return -1;
}

int cmd_attn(int argc, char **argv) {
    const char *in = NULL, *outp = NULL;
    int threads = 0, backend = -1, max_T = ATTN_DEFAULT_MAX_T;
    double tol = 2e-4;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mtac attn: %s needs a value (see --help)\n", a);
            return 2;
        }
        if (!strcmp(a, "--in")) in = argv[++i];
        else if (!strcmp(a, "--out")) outp = argv[++i];
        else if (!strcmp(a, "--threads")) {
            if (!cli_parse_pos_int("--threads", argv[++i], &threads)) return 2;
        } else if (!strcmp(a, "--max-T")) {
            if (!cli_parse_pos_int("--max-T", argv[++i], &max_T)) return 2;
        } else if (!strcmp(a, "--tol")) {
            char *end;
            tol = strtod(argv[++i], &end);
            if (*end || !(tol >= 0 && tol <= 1)) {
                fprintf(stderr, "mtac attn: --tol must be a number in [0, 1], got '%s'\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--backend")) {
            mta_backend be;
            if (!cli_backend_usable("mtac attn", argv[++i], &be)) return 2;
            backend = (int)be;
        } else {
            fprintf(stderr, "mtac attn: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    if (!in || !outp) {
        fprintf(stderr, "mtac attn: --in and --out are required (see --help)\n");
        return 2;
    }
    if (threads) cli_set_threads(threads);

    char err[512];
    st_file f;
    if (st_read(in, &f, err, sizeof err)) {
        fprintf(stderr, "mtac attn: %s\n", err);
        return 1;
    }
    attn_problem pr;
    if (attn_problem_from_file(&f, "expect.", &pr, err, sizeof err)) {
        fprintf(stderr, "mtac attn: %s: %s\n", in, err);
        st_free(&f);
        return 1;
    }
    mta_backend env_backend;
    if (backend < 0 && cli_default_backend(&env_backend)) {
        st_free(&f);
        return 2;
    }
    pr.cfg.backend = backend >= 0 ? (mta_backend)backend : env_backend;
    // Before any allocation: the reference backend's maps at T = 200000 would be 160 GB each.
    if (attn_problem_check_size(&pr.cfg, max_T, err, sizeof err)) {
        fprintf(stderr, "mtac attn: %s: %s; raise --max-T to run it anyway\n", in, err);
        st_free(&f);
        return 1;
    }
    const mta_config *c = &pr.cfg;
    const size_t n = (size_t)c->B * c->H * c->T * c->d;
    // The operator propagates NaN (mta.h); a file's NaN or Inf is refused here instead.
    const float *inputs[4] = {pr.q, pr.k, pr.v, pr.dout};
    const char *input_names[4] = {"q", "k", "v", "dout"};
    for (int i = 0; i < 4 + MTA_N_PARAMS; i++) {
        const float *x = i < 4 ? inputs[i] : pr.param[i - 4];
        const long at = x ? first_nonfinite(x, i < 4 ? n : pr.param_numel[i - 4]) : -1;
        if (at >= 0) {
            fprintf(stderr, "mtac attn: %s: tensor %s has a non-finite value (%g) at flat index %ld\n", in,
                    i < 4 ? input_names[i] : mta_param_info(i - 4)->name, (double)x[at], at);
            st_free(&f);
            return 1;
        }
    }
    // One block: out, dq, dk, dv, then the parameter gradients.
    size_t ngrad = 0;
    for (int i = 0; i < MTA_N_PARAMS; i++) ngrad += pr.param_numel[i];
    const size_t nbuf = 4 * n + ngrad;
    float *buf = calloc(nbuf, sizeof(float));
    // Every tensor where the backend's calls take it (a copy in a GPU backend's memory).
    const mta_backend be = c->backend;
    float *placed[4 + MTA_N_PARAMS] = {0}, *pbuf = NULL;
    mta_ctx *ctx = NULL;
    int rc = 1;
    if (!buf) {
        fprintf(stderr, "mtac attn: out of memory\n");
        goto done;
    }
    for (int i = 0; i < 4 + MTA_N_PARAMS; i++) {
        const float *x = i < 4 ? inputs[i] : pr.param[i - 4];
        if (x && !(placed[i] = cli_on_backend(be, x, i < 4 ? n : pr.param_numel[i - 4]))) goto done;
    }
    if (!(pbuf = cli_on_backend(be, buf, nbuf))) goto done;
    mta_params p;
    for (int i = 0; i < MTA_N_PARAMS; i++) p.w[i] = placed[4 + i];
    if (mta_create(&ctx, c, err, sizeof err) != MTA_OK) {
        fprintf(stderr, "mtac attn: %s\n", err);
        goto done;
    }
    float *out = buf, *dq = buf + n, *dk = buf + 2 * n, *dv = buf + 3 * n;
    if (mta_forward(ctx, placed[0], placed[1], placed[2], &p, pbuf) != MTA_OK) {
        fprintf(stderr, "mtac attn: forward failed: %s\n", mta_ctx_error(ctx));
        goto done;
    }
    st_tensor ts[4 + MTA_N_PARAMS];
    char names[MTA_N_PARAMS][32];
    int nt = 0;
    const st_tensor *qt = st_find(&f, "q");
    const char *base[4] = {"out", "grad.q", "grad.k", "grad.v"};
    float *bd[4] = {out, dq, dk, dv};
    int nbase = pr.dout ? 4 : 1;
    for (int i = 0; i < nbase; i++) {
        ts[nt] = *qt;
        ts[nt].name = (char *)base[i];
        ts[nt++].data = bd[i];
    }
    if (pr.dout) {
        mta_grads g = {{0}};
        size_t at = 4 * n;
        for (int i = 0; i < MTA_N_PARAMS; i++) {
            if (!pr.param[i]) continue;
            g.w[i] = pbuf + at;
            const st_tensor *pt = st_find(&f, mta_param_info(i)->name);
            snprintf(names[i], sizeof names[i], "grad.%s", mta_param_info(i)->name);
            ts[nt] = *pt;
            ts[nt].name = names[i];
            ts[nt++].data = buf + at;
            at += pr.param_numel[i];
        }
        if (mta_backward(ctx, placed[0], placed[1], placed[2], &p, placed[3], pbuf + n, pbuf + 2 * n, pbuf + 3 * n, &g) !=
            MTA_OK) {
            fprintf(stderr, "mtac attn: backward failed: %s\n", mta_ctx_error(ctx));
            goto done;
        }
    }
    if (cli_from_backend(be, buf, pbuf, nbuf)) goto done;
    // Finite inputs can still overflow float32 (scores of q, k near 1e19 and beyond): say so
    // instead of writing NaN.
    for (int i = 0; i < nt; i++) {
        const long at = first_nonfinite(ts[i].data, ts[i].numel);
        if (at >= 0) {
            fprintf(stderr, "mtac attn: the result %s has a non-finite value at flat index %ld (the inputs overflow float32 "
                    "arithmetic; scale q and k down); nothing written\n", ts[i].name, at);
            goto done;
        }
    }
    if (st_write(outp, ts, nt, NULL, 0, err, sizeof err)) {
        fprintf(stderr, "mtac attn: %s\n", err);
        goto done;
    }
    char steps[160] = "";
    const char *step_names[] = {" pre-conv", " head-mix", " post-conv", " head-conv",
                           c->depth_scale ? " group-norm(depth-scaled)" : " group-norm", " gate"};
    const int on[] = {c->pre_cq > 0, c->pre_head_mix, c->post_cq > 0, c->post_ch > 0, c->group_norm, c->gate};
    for (int i = 0; i < 6; i++)
        if (on[i]) strncat(steps, step_names[i], sizeof steps - strlen(steps) - 1);
    printf("mtac attn: B=%d H=%d T=%d d=%d, steps:%s; wrote %d tensor%s to %s\n", c->B, c->H, c->T, c->d,
           steps[0] ? steps : " none (plain causal attention)", nt, nt == 1 ? "" : "s", outp);
    const int bad = compare_expected(&f, ts, nt, tol);
    if (bad > 0) fprintf(stderr, "mtac attn: %d result%s differ from the file's expect.* beyond --tol %g\n", bad, bad == 1 ? "" : "s", tol);
    rc = bad != 0;
done:
    mta_destroy(ctx);
    for (int i = 0; i < 4 + MTA_N_PARAMS; i++) cli_off_backend(be, i < 4 ? inputs[i] : pr.param[i - 4], placed[i]);
    cli_off_backend(be, buf, pbuf);
    free(buf);
    st_free(&f);
    return rc;
}
