// cmd_attn.c: `mtac attn --in IN.safetensors --out OUT.safetensors`: the operator on a file.
#include "cli.h"
#include "io/attn_io.h"
#include "attn/cuda_kernel_steps.h"
#include "io/fsutil.h"
#include "io/safetensors.h"
#include "model/model.h"
#include "mta.h"
#include "util/rng.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: mtac attn --in IN.safetensors --out OUT.safetensors [--threads N] [--backend NAME]\n"
    "                 [--precision fp32|bf16] [--max-T N] [--tol X] [--nondeterministic]\n"
    "       mtac attn --plan --backend cuda|cuda-emu [--precision fp32|bf16] [--counts FILE] [--nondeterministic]\n"
    "                 (--in IN.safetensors | --model PRESET --layer L [--d N])\n";
static const char ABOUT[] =
    "Runs the MTA operator on the float32 tensors of IN and writes OUT.\n"
    "  IN must hold q (B,H,T,d), and k, v (B,H_kv,T,d) (H_kv dividing H: grouped-query attention).\n"
    "  Each parameter present switches its step on:\n"
    "    w_pre (H,c_q,c_k)          pre-softmax key-query convolution (c_k odd)\n"
    "    w_pre_head (H,H)           pre-softmax head mixing\n"
    "    w_post (H,c_q,c_k)         post-softmax key-query convolution\n"
    "    w_post_head (H/c_h,c_h,c_h) post-softmax head convolution\n"
    "    gn_weight (d)              group norm (metadata depth_scale \"1\" and layer_id N add depth scaling)\n"
    "    gate_w (d), gate_b (1)     output gate\n"
    "  and optionally dout (B,H,T,d), the gradient of the loss w.r.t. the output, and doc (B,T),\n"
    "  document ids of packed documents (whole numbers; a run of equal ids is one document, which\n"
    "  attends and convolves within itself alone, as if it ran alone).\n"
    "  OUT gets `out`, and with dout also grad.q, grad.k, grad.v and grad.<param> for each parameter.\n"
    "  The format is documented in docs/formats.md.\n"
    "  IN may also hold expect.out, expect.grad.q, ... (as the files of tests/fixtures/ do): each is\n"
    "  compared with the result of that name, and the command fails (exit status 1, after writing\n"
    "  OUT) when the largest difference exceeds --tol times the scale, the largest |expected| (at least 0.1).\n"
    "  --backend: fused (no (T,T) map held, docs/fused.md), reference (materialises the maps), cuda\n"
    "  (an NVIDIA GPU, in builds with the CUDA toolkit) or cuda-emu (the CUDA backend's source run on\n"
    "  the CPU, in builds made with -DMTAC_CUDA_EMU=ON; slow); all compute the same function within\n"
    "  float32 rounding. The tensors go to a GPU backend's memory and the results come back. Without\n"
    "  the flag, the environment variable MTAC_BACKEND (fused or reference) picks one; else fused.\n"
    "  --precision bf16: tensor-core products on the cuda backends where their tensor-core path covers\n"
    "  the config, else their float32 path (docs/cuda.md); the other backends refuse it.\n"
    "  --plan: which kernels a forward and a backward of the config launch, each with the steps of\n"
    "  docs/spec.md section 2.1 it computes, and `fallback: none` or `fallback: <steps>`, the steps\n"
    "  that run on the float32 path instead of the tensor-core one (docs/cuda.md, \"Which kernels run\").\n"
    "  It runs one small forward and backward (B = 1, T = 130: three 64-row tiles) of the config of\n"
    "  IN (its tensors unused), or of layer L of a model preset (830m: layer 2 has the convolutions,\n"
    "  layer 3 the head steps alone), with --d setting the head size. Nothing is written\n"
    "  (--out, --tol and --max-T are refused).\n"
    "  --counts FILE (--plan on cuda-emu): writes the emulator's counts of each kernel's warp\n"
    "  operations (mma.sync, ldmatrix, cp.async, shuffles; mta_ctx_launch_ops) and the backend's\n"
    "  workspace bytes (mta_ctx_workspace_bytes) as JSON, the \"emulated\" object that\n"
    "  bench/cuda_perf_model.py --kernel-counts reads (docs/cuda.md).\n"
    "  --nondeterministic: mta_set_deterministic(ctx, 0): the cuda backends' bf16 every-step backward\n"
    "  (a convolution with another step) adds dk, dv by atomics in one kernel fewer, their last bits\n"
    "  varying run to run (docs/cuda.md); every other result, and every other config, is unchanged.\n"
    "  --max-T: the largest T run, checked before any work: the work grows as B*H*T^2 while the file\n"
    "  grows as B*H*T*d. The reference backend also needs B*H*T*T <= N^2 (it holds several maps of\n"
    "  B*H*T*T floats: 1 GiB each at the default).\n";

typedef struct {
    const char *in, *out, *model, *counts;
    int threads, backend, max_T;  // backend < 0: MTAC_BACKEND's, else fused
    int bf16, plan, layer, d;     // layer, d: -1, 0 when not given
    int nondeterministic;         // mta_set_deterministic(ctx, 0)
    int tol_given, max_T_given;   // options of a run on a file's tensors, which --plan refuses
    double tol;
} attn_args;

static int plan(const attn_args *a);

// --plan's flags: a config from --in, or from --model and --layer; no --out. -1, or 2 after a message.
static int plan_args_check(const char *cmd, const attn_args *a) {
    const char *why = a->out ? "--plan writes nothing: drop --out"
                      : !a->in == !a->model ? "--plan takes the config of --in or of --model, one of them"
                      : a->model && a->layer < 0 ? "--model needs --layer L"
                      : a->in && a->layer >= 0 ? "--layer goes with --model"
                      : a->tol_given ? "--plan compares nothing with expect.*: drop --tol"
                      : a->max_T_given ? "--plan runs its own small T: drop --max-T"
                                                 : NULL;
    if (why) fprintf(stderr, "%s: %s\n", cmd, why);
    return why ? 2 : -1;
}

// The flags into a: -1 to go on, else the exit status.
static int parse_args(int argc, char **argv, attn_args *a) {
    const cli_opt opts[] = {
        {"in", CLI_STR, &a->in, .arg = "IN.safetensors", .help = "q, k, v, the parameters, dout, doc, expect.* (required but with --plan --model)"},
        {"out", CLI_STR, &a->out, .arg = "OUT.safetensors", .help = "where the results go (required without --plan)"},
        {"threads", CLI_INT, &a->threads, 1, 1e9, .arg = "N", .help = "OpenMP/BLAS threads (default: OMP_NUM_THREADS, else all cores)"},
        {"backend", CLI_CHOICE, &a->backend, .choices = cli_backend_names(), .arg = "NAME", .help = "the backend that computes"},
        {"max-T", CLI_INT, &a->max_T, 1, 1e9, .arg = "N", .help = "the largest T run", .given = &a->max_T_given},
        {"tol", CLI_NUM, &a->tol, 0, 1, .arg = "X", .help = "the largest difference from expect.*, relative",
         .given = &a->tol_given},
        {"precision", CLI_CHOICE, &a->bf16, .choices = CLI_PRECISIONS, .arg = "P", .help = "mta_config.precision"},
        {"plan", CLI_FLAG, &a->plan, .help = "print the kernels a forward and backward launch, and the fallback"},
        {"model", CLI_STR, &a->model, .arg = "PRESET", .help = "--plan: the config of a preset's layer (830m, lm10m, ...)"},
        {"layer", CLI_INT, &a->layer, 0, MODEL_MAX_LAYERS - 1, .arg = "L", .help = "--plan: the preset's layer"},
        {"d", CLI_INT, &a->d, 1, 4096, .arg = "N", .help = "--plan: the head size (default: the config's)"},
        {"counts", CLI_STR, &a->counts, .arg = "FILE", .help = "--plan on cuda-emu: each kernel's warp operations, as JSON"},
        {"nondeterministic", CLI_FLAG, &a->nondeterministic,
         .help = "mta_set_deterministic(ctx, 0): the bf16 every-step backward's dk, dv by atomics"},
    };
    const cli_spec spec = {"mtac attn", USAGE, ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    int first;
    const int st = cli_parse(&spec, argc, argv, &first);
    if (st >= 0) return st;
    if (a->backend >= 0 && !cli_backend_usable(spec.name, (mta_backend)a->backend)) return 2;
    if (a->plan) return plan_args_check(spec.name, a);
    const char *missing = !a->in ? "--in IN.safetensors" : !a->out ? "--out OUT.safetensors" : NULL;
    const char *plan_only = a->model ? "--model" : a->layer >= 0 ? "--layer" : a->d ? "--d" : a->counts ? "--counts" : NULL;
    if (missing) fprintf(stderr, "%s: %s is required (see --help)\n", spec.name, missing);
    else if (plan_only) fprintf(stderr, "%s: %s goes with --plan\n", spec.name, plan_only);
    if (missing || plan_only) return 2;
    if (cli_out_is_input(spec.name, a->out, a->in)) return 2;
    return -1;
}

// What one run holds: the file, the problem read from it, the results and their copies where the
// backend's calls take them.
typedef struct {
    st_file f;
    attn_problem pr;
    size_t n, nkv, nbuf;                     // entries of q (and of out, dq); of k (and v, dk, dv); of buf
    float *buf;                              // out, dq, dk, dv, then the parameter gradients
    float *placed[4 + MTA_N_PARAMS], *pbuf;  // the inputs and buf on the backend
    int32_t *doc;                            // the document ids (host), or NULL
    float *placed_doc;                       // and on the backend (int32 bits)
    mta_ctx *ctx;
    st_tensor ts[4 + MTA_N_PARAMS];          // the results, named as OUT has them
    char names[MTA_N_PARAMS][32];
    int nt;
} attn_run;

// Input i of the run: q, k, v, dout, then the parameters by mta.h's index (NULL when absent);
// its entries into *n.
static const float *input(const attn_run *r, int i, size_t *n) {
    const float *qkvd[4] = {r->pr.q, r->pr.k, r->pr.v, r->pr.dout};
    *n = i == 1 || i == 2 ? r->nkv : i < 4 ? r->n : r->pr.param_numel[i - 4];
    return i < 4 ? qkvd[i] : r->pr.param[i - 4];
}

static const char *input_name(int i) {
    static const char *const names[4] = {"q", "k", "v", "dout"};
    return i < 4 ? names[i] : mta_param_info(i - 4)->name;
}

// Compares each result with the file's expect.<name>, if any (attn_compare_expected); prints one
// line each. Returns the number of results beyond tol, or -1 when an expect tensor does not match
// its result's size.
static int compare_expected(const st_file *f, const st_tensor *ts, int nt, double tol) {
    int bad = 0;
    for (int i = 0; i < nt; i++) {
        double diff, scale;
        char err[256];
        const int r = attn_compare_expected(f, ts[i].name, ts[i].data, ts[i].numel, &diff, &scale, err, sizeof err);
        if (r < 0) {
            fprintf(stderr, "mtac attn: %s\n", err);
            return -1;
        }
        if (r == 0) continue;
        const int ok = diff <= tol * scale;
        printf("  %-18s max |diff| %.3g, scale %.3g: %s\n", ts[i].name, diff, scale, ok ? "ok" : "DIFFERS");
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

// Reads the problem of file in into *f and *pr (whose tensors point into f; st_free(f) either way).
// 0, or 1 after a message.
static int read_problem(const char *in, st_file *f, attn_problem *pr) {
    char err[512];
    if (st_read(in, f, err, sizeof err)) {
        memset(f, 0, sizeof *f);
        fprintf(stderr, "mtac attn: %s\n", err);
        return 1;
    }
    if (attn_problem_from_file(f, "expect.", pr, err, sizeof err)) {
        fprintf(stderr, "mtac attn: %s: %s\n", in, err);
        return 1;
    }
    return 0;
}

// The backend (--backend, else MTAC_BACKEND's) and precision asked for, into c: 0, or 2 after a message.
static int settle_backend(const attn_args *a, mta_config *c) {
    if (a->backend >= 0) c->backend = (mta_backend)a->backend;
    else if (cli_default_backend(&c->backend)) return 2;
    c->precision = a->bf16 ? MTA_BF16 : MTA_FP32;
    return 0;
}

// Reads a->in into r and settles its configuration (backend, size limit); refuses non-finite
// inputs. 0, or the exit status after a message.
static int load(const attn_args *a, attn_run *r) {
    char err[512];
    if (read_problem(a->in, &r->f, &r->pr)) return 1;
    mta_config *c = &r->pr.cfg;
    if (settle_backend(a, c)) return 2;
    // Before any allocation: the reference backend's maps at T = 200000 would be 160 GB each.
    if (attn_problem_check_size(c, a->max_T, err, sizeof err)) {
        fprintf(stderr, "mtac attn: %s: %s; raise --max-T to run it anyway\n", a->in, err);
        return 1;
    }
    r->n = (size_t)c->B * c->H * c->T * c->d;
    r->nkv = r->n / c->H * (size_t)c->H_kv;
    // The operator propagates NaN (mta.h); a file's NaN or Inf is refused here instead.
    for (int i = 0; i < 4 + MTA_N_PARAMS; i++) {
        size_t n;
        const float *x = input(r, i, &n);
        const long at = x ? first_nonfinite(x, n) : -1;
        if (at >= 0) {
            fprintf(stderr, "mtac attn: %s: tensor %s has a non-finite value (%g) at flat index %ld\n", a->in,
                    input_name(i), (double)x[at], at);
            return 1;
        }
    }
    return 0;
}

// Names result i of r->ts: shape as the file's tensor like, data at host.
static void add_result(attn_run *r, const char *like, const char *name, float *host) {
    r->ts[r->nt] = *st_find(&r->f, like);
    r->ts[r->nt].name = (char *)name;
    r->ts[r->nt++].data = host;
}

// The backward into pbuf (dq, dk, dv, then the gradient of each parameter present), naming the
// parameters' gradients in r->ts: 0, or 1 after a message.
static int backward(attn_run *r, const mta_params *p) {
    const size_t n = r->n;
    mta_grads g = {{0}};
    size_t at = 4 * n;
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        if (!r->pr.param[i]) continue;
        g.w[i] = r->pbuf + at;
        snprintf(r->names[i], sizeof r->names[i], "grad.%s", mta_param_info(i)->name);
        add_result(r, mta_param_info(i)->name, r->names[i], r->buf + at);
        at += r->pr.param_numel[i];
    }
    float *const *x = r->placed;
    if (mta_backward(r->ctx, x[0], x[1], x[2], p, x[3], r->pbuf + n, r->pbuf + 2 * n, r->pbuf + 3 * n, &g) != MTA_OK) {
        fprintf(stderr, "mtac attn: backward failed: %s\n", mta_ctx_error(r->ctx));
        return 1;
    }
    return 0;
}

// The forward, and the backward when the file has dout, on the backend; the results in r->buf,
// named in r->ts: 0, or 1 after a message.
static int compute(attn_run *r, int deterministic) {
    const mta_backend be = r->pr.cfg.backend;
    size_t ngrad = 0;
    for (int i = 0; i < MTA_N_PARAMS; i++) ngrad += r->pr.param_numel[i];
    r->nbuf = 4 * r->n + ngrad;
    if (!(r->buf = calloc(r->nbuf, sizeof(float)))) {
        fprintf(stderr, "mtac attn: out of memory\n");
        return 1;
    }
    // Every tensor where the backend's calls take it (a copy in a GPU backend's memory).
    for (int i = 0; i < 4 + MTA_N_PARAMS; i++) {
        size_t n;
        const float *x = input(r, i, &n);
        if (x && !(r->placed[i] = cli_on_backend(be, x, n))) return 1;
    }
    if (!(r->pbuf = cli_on_backend(be, r->buf, r->nbuf))) return 1;
    const size_t BT = (size_t)r->pr.cfg.B * r->pr.cfg.T;
    if (r->pr.doc) {
        if (!(r->doc = malloc(BT * sizeof(int32_t)))) {
            fprintf(stderr, "mtac attn: out of memory\n");
            return 1;
        }
        attn_problem_doc_ids(&r->pr, r->doc);
        if (!(r->placed_doc = cli_on_backend(be, (const float *)r->doc, BT))) return 1;  // int32 bits, copied as they are
    }
    mta_params p;
    for (int i = 0; i < MTA_N_PARAMS; i++) p.w[i] = r->placed[4 + i];
    char err[512];
    if (mta_create(&r->ctx, &r->pr.cfg, err, sizeof err) != MTA_OK) {
        fprintf(stderr, "mtac attn: %s\n", err);
        return 1;
    }
    mta_set_documents(r->ctx, (const int32_t *)r->placed_doc);
    mta_set_deterministic(r->ctx, deterministic);
    if (mta_forward(r->ctx, r->placed[0], r->placed[1], r->placed[2], &p, r->pbuf) != MTA_OK) {
        fprintf(stderr, "mtac attn: forward failed: %s\n", mta_ctx_error(r->ctx));
        return 1;
    }
    static const char *const base[4] = {"out", "grad.q", "grad.k", "grad.v"};
    for (int i = 0; i < (r->pr.dout ? 4 : 1); i++) add_result(r, i < 2 ? "q" : "k", base[i], r->buf + i * r->n);
    if (r->pr.dout && backward(r, &p)) return 1;
    return cli_from_backend(be, r->buf, r->pbuf, r->nbuf) ? 1 : 0;
}

// Writes the results to path and says what ran: 0, or 1 after a message.
static int write_results(const attn_run *r, const char *path) {
    // Finite inputs can still overflow float32 (scores of q, k near 1e19 and beyond): say so
    // instead of writing NaN.
    for (int i = 0; i < r->nt; i++) {
        const long at = first_nonfinite(r->ts[i].data, r->ts[i].numel);
        if (at >= 0) {
            fprintf(stderr, "mtac attn: the result %s has a non-finite value at flat index %ld (the inputs overflow float32 "
                    "arithmetic; scale q and k down); nothing written\n", r->ts[i].name, at);
            return 1;
        }
    }
    char err[512];
    if (st_write(path, r->ts, r->nt, NULL, 0, err, sizeof err)) {
        fprintf(stderr, "mtac attn: %s\n", err);
        return 1;
    }
    const mta_config *c = &r->pr.cfg;
    char steps[160] = "";
    const char *step_names[] = {" pre-conv", " head-mix", " post-conv", " head-conv",
                                c->depth_scale ? " group-norm(depth-scaled)" : " group-norm", " gate"};
    const int on[] = {c->pre_cq > 0, c->pre_head_mix, c->post_cq > 0, c->post_ch > 0, c->group_norm, c->gate};
    for (int i = 0; i < 6; i++)
        if (on[i]) strncat(steps, step_names[i], sizeof steps - strlen(steps) - 1);
    char kv[48] = "";  // grouped-query attention: k and v's heads; packed documents
    if (c->H_kv != c->H) snprintf(kv, sizeof kv, " H_kv=%d", c->H_kv);
    if (r->doc) strncat(kv, " (packed documents)", sizeof kv - strlen(kv) - 1);
    printf("mtac attn: B=%d H=%d%s T=%d d=%d, steps:%s; wrote %d tensor%s to %s\n", c->B, c->H, kv, c->T, c->d,
           steps[0] ? steps : " none (plain causal attention)", r->nt, r->nt == 1 ? "" : "s", path);
    return 0;
}

static void run_free(attn_run *r) {
    const mta_backend be = r->pr.cfg.backend;
    mta_destroy(r->ctx);
    for (int i = 0; i < 4 + MTA_N_PARAMS; i++) {
        size_t n;
        cli_off_backend(be, input(r, i, &n), r->placed[i]);
    }
    cli_off_backend(be, r->buf, r->pbuf);
    if (r->doc) cli_off_backend(be, (const float *)r->doc, r->placed_doc);
    free(r->buf);
    free(r->doc);
    st_free(&r->f);
}

// ---- --plan: the kernels a config launches (docs/cuda.md, "Which kernels run: --plan") ----------

// The length of --plan's call: three tiles of the tensor-core path's 64 rows, the last one partial
// (and as many strips of the float32 path), so that every kernel a long call launches runs.
enum { PLAN_T = 130 };

// --plan's config: that of --in (its tensors unused) or of layer --layer of preset --model, at
// B = 1, T = PLAN_T, on the backend and precision asked; *docs: the file has packed documents.
// 0, or the exit status after a message.
static int plan_config(const attn_args *a, mta_config *c, int *docs, char *label, size_t n) {
    *docs = 0;
    if (a->model) {
        model_config m;
        if (model_preset(a->model, &m)) {
            fprintf(stderr, "mtac attn: unknown preset '%s' (presets: %s)\n", a->model, model_preset_names());
            return 2;
        }
        if (a->layer >= m.n_layers) {
            fprintf(stderr, "mtac attn: --layer %d: preset %s has layers 0-%d\n", a->layer, a->model, m.n_layers - 1);
            return 2;
        }
        *c = model_layer_mta_config(&m, a->layer, 1, PLAN_T);
        snprintf(label, n, "%s layer %d", a->model, a->layer);
    } else {
        st_file f;
        attn_problem pr;
        const int bad = read_problem(a->in, &f, &pr);
        if (!bad) *c = pr.cfg, *docs = pr.doc != NULL;
        st_free(&f);
        if (bad) return 1;
        snprintf(label, n, "the config of %s", a->in);
    }
    c->B = 1, c->T = PLAN_T;
    if (a->d) c->d = a->d;
    return settle_backend(a, c);
}

// The inputs of --plan's call, in one buffer on the backend: q, dout, out, dq (n each), k, v, dk,
// dv (nkv each), the parameters and their gradients (np each), the document ids (T int32).
typedef struct {
    float *host, *placed;
    size_t n, nkv, np, total;
    mta_params p;
    mta_grads g;
} plan_buffers;

// Fills b for c: small random q, k, v, dout and gate_w, the other parameters the identity, two
// documents' ids (that mta_set_documents may read). 0, or 1 after a message.
static int plan_inputs(const mta_config *c, plan_buffers *b) {
    const mta_param_sizes ps = mta_param_sizes_of(c);
    b->n = (size_t)c->B * c->H * c->T * c->d, b->nkv = b->n / c->H * (size_t)(c->H_kv ? c->H_kv : c->H);
    b->np = 0;
    for (int i = 0; i < MTA_N_PARAMS; i++) b->np += ps.w[i];
    b->total = 4 * b->n + 4 * b->nkv + 2 * b->np + (size_t)c->B * c->T;
    if (!(b->host = calloc(b->total, sizeof(float)))) return fprintf(stderr, "mtac attn: out of memory\n"), 1;
    uint64_t seed = 46;
    for (size_t i = 0; i < 4 * b->n + 4 * b->nkv; i++) b->host[i] = (float)(rng_uniform(&seed) - 0.5);
    float *par = b->host + 4 * b->n + 4 * b->nkv, *at = par;
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        mta_param_init_identity(c, i, at);
        if (i == MTA_GATE_W)
            for (size_t e = 0; e < ps.w[i]; e++) at[e] = (float)(rng_uniform(&seed) - 0.5);
        at += ps.w[i];
    }
    int32_t *doc = (int32_t *)(par + 2 * b->np);  // int32 bits in float slots, copied as they are
    for (int t = 0; t < c->T; t++) doc[t] = t >= c->T / 2;
    if (!(b->placed = cli_on_backend(c->backend, b->host, b->total))) return 1;
    float *x = b->placed + 4 * b->n + 4 * b->nkv;
    for (int i = 0; i < MTA_N_PARAMS; i++) {
        b->p.w[i] = ps.w[i] ? x : NULL;
        b->g.w[i] = ps.w[i] ? x + b->np : NULL;
        x += ps.w[i];
    }
    return 0;
}

// --counts: kernel i of ctx's record added to ops as {"launches": n, "mma": n, ...}, the
// emulator's counts (mta_ctx_launch_ops), as bench/cuda_perf_model.py's EMU_FIELDS names them.
static void plan_add_ops(cJSON *ops, const mta_ctx *ctx, int i, int times) {
    static const char *const names[] = {"launches", "mma", "ldmatrix", "ldmatrix_bytes", "cp_async", "cp_async_bytes",
                                        "shfl"};
    mta_kernel_ops k;
    cJSON *o = cJSON_AddObjectToObject(ops, mta_ctx_launch_ops(ctx, i, &k));
    const double v[] = {times, k.mma, k.ldmatrix, k.ldmatrix_bytes, k.cp_async, k.cp_async_bytes, k.shfl};
    for (size_t j = 0; j < sizeof v / sizeof v[0]; j++) cJSON_AddNumberToObject(o, names[j], v[j]);
}

// Prints the kernels recorded on ctx, each with its launches and the steps of on it computes
// (cuda_kernel_steps.h), and adds to *fallback the steps of those of the float32 path (and of
// both paths when tc is 0), and to ops (when not NULL) their counts. Returns how many kernels
// contradict the table: no row, or a kernel of the path that did not run (tc: 1 the tensor-core
// path ran, 0 the float32 one).
static int plan_print_phase(const mta_ctx *ctx, const char *phase, unsigned on, int tc, unsigned *fallback,
                            cJSON *ops) {
    int bad = 0, times;
    const char *name;
    printf("%s:\n", phase);
    for (int i = 0; (name = mta_ctx_launch(ctx, i, &times)); i++) {
        if (ops) plan_add_ops(ops, ctx, i, times);
        const mta_kernel_steps *k = mta_kernel_steps_of(name);
        char steps[64] = "";
        for (int s = 1; k && s <= 9; s++)
            if (k->steps & on & MTA_STEP(s)) snprintf(steps + strlen(steps), sizeof steps - strlen(steps), " %d", s);
        const int wrong_path = k && ((tc && k->path == MTA_PATH_FP32) || (!tc && k->path == MTA_PATH_TC));
        if (k && (k->path == MTA_PATH_FP32 || (!tc && k->path == MTA_PATH_BOTH))) *fallback |= k->steps & on;
        printf("  %-26s x%-4d steps%-18s %s\n", name, times, steps[0] ? steps : " -",
               !k ? "NO ROW in src/attn/cuda_kernel_steps.h" : wrong_path ? "ON THE PATH THAT DID NOT RUN" : k->what);
        bad += !k || wrong_path;
    }
    if (mta_ctx_launches_lost(ctx)) printf("  (and %d kernels past the record's room)\n", mta_ctx_launches_lost(ctx));
    return bad + (mta_ctx_launches_lost(ctx) > 0);
}

// The header of --plan: the config and its steps, and the path its backend runs it on.
static void plan_header(const mta_config *c, const char *label, int docs, int tc, const char *why) {
    printf("mtac attn --plan: %s on the %s backend, precision %s: B=%d H=%d", label, mta_backend_name(c->backend),
           CLI_PRECISIONS[c->precision], c->B, c->H);
    if (c->H_kv && c->H_kv != c->H) printf(" H_kv=%d", c->H_kv);
    printf(" T=%d d=%d%s%s\nsteps:", c->T, c->d, docs ? ", packed documents" : "", c->dropout > 0 ? ", dropout" : "");
    const unsigned on = mta_steps_on(c);
    for (int s = 1; s <= 9; s++)
        if (on & MTA_STEP(s)) printf(" %d %s%s", s, mta_step_names[s], s < 9 && (on >> (s + 1)) ? "," : "");
    if (tc) printf("\npath: tensor cores\n");
    else printf("\npath: float32 (not the tensor-core path: %s)\n", why);
}

// --counts: the JSON of the emulator's counts of c's call, its kernels to be added to the
// "forward" and "backward" objects of ["emulated"]; NULL when out of memory.
static cJSON *plan_counts_new(const mta_config *c, const char *label) {
    cJSON *root = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(root, "emulated");
    cJSON *cfg = cJSON_AddObjectToObject(e, "config");
    cJSON_AddStringToObject(cfg, "label", label);
    cJSON_AddStringToObject(cfg, "precision", CLI_PRECISIONS[c->precision]);
    const int v[] = {c->B, c->H, c->H_kv ? c->H_kv : c->H, c->T, c->d};
    static const char *const names[] = {"B", "H", "H_kv", "T", "d"};
    for (int j = 0; j < 5; j++) cJSON_AddNumberToObject(cfg, names[j], v[j]);
    if (!cJSON_AddObjectToObject(e, "forward") || !cJSON_AddObjectToObject(e, "backward")) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

// --counts: js written to path. 0, or 1 after a message.
static int plan_counts_write(cJSON *js, const char *path) {
    char err[512], *text = cJSON_Print(js);
    const int bad = !text || write_text_atomic(path, text, err, sizeof err);
    if (bad) fprintf(stderr, "mtac attn: --counts: %s\n", text ? err : "out of memory");
    cJSON_free(text);
    return bad;
}

// The forward and backward of c on its backend, recorded and printed, and with counts (a path) the
// emulator's counts written there: 0, or 1 after a message.
static int plan_run(const mta_config *c, int docs, const char *label, const char *counts, int deterministic) {
    char why[1024];
    const int tc = mta_tensor_core_path(c, why, sizeof why);
    if (tc < 0) {
        fprintf(stderr, "mtac attn: --plan shows the kernels of a CUDA backend (cuda, cuda-emu): %s\n", why);
        return 2;
    }
    char err[512];
    mta_ctx *ctx = NULL;
    plan_buffers b = {0};
    int rc = 1;
    if (mta_create(&ctx, c, err, sizeof err)) {
        fprintf(stderr, "mtac attn: %s\n", err);
        return 1;
    }
    cJSON *js = counts ? plan_counts_new(c, label) : NULL, *e = cJSON_GetObjectItem(js, "emulated");
    if (counts && !js) fprintf(stderr, "mtac attn: out of memory\n");
    if ((counts && !js) || plan_inputs(c, &b)) goto done;
    float *x = b.placed;
    const size_t n = b.n, nkv = b.nkv;
    mta_set_dropout(ctx, 1, 46);
    mta_set_deterministic(ctx, deterministic);
    if (docs) mta_set_documents(ctx, (const int32_t *)(x + 4 * n + 4 * nkv + 2 * b.np));
    plan_header(c, label, docs, tc, why);
    const unsigned on = mta_steps_on(c);
    unsigned fallback = 0;
    int bad = 0;
    if (mta_ctx_record_launches(ctx, 1) || mta_forward(ctx, x, x + 4 * n, x + 4 * n + nkv, &b.p, x + 2 * n)) goto failed;
    bad += plan_print_phase(ctx, "forward", on, tc, &fallback, cJSON_GetObjectItem(e, "forward"));
    if (mta_ctx_record_launches(ctx, 1) || mta_backward(ctx, x, x + 4 * n, x + 4 * n + nkv, &b.p, x + n, x + 3 * n,
                                                       x + 4 * n + 2 * nkv, x + 4 * n + 3 * nkv, &b.g))
        goto failed;
    bad += plan_print_phase(ctx, "backward", on, tc, &fallback, cJSON_GetObjectItem(e, "backward"));
    // the backend's device memory beyond the caller's tensors (its workspace and float32 buffers)
    if (e) cJSON_AddNumberToObject(cJSON_GetObjectItem(e, "config"), "workspace_bytes", (double)mta_ctx_workspace_bytes(ctx));
    if (c->precision != MTA_BF16) {
        printf("fallback: n/a (precision fp32 asks for the float32 path)\n");
    } else {
        printf("fallback:%s", fallback ? "" : " none");
        for (int s = 1; s <= 9; s++)
            if (fallback & MTA_STEP(s)) printf(" %d", s);
        printf("\n");
    }
    if (bad) fprintf(stderr, "mtac attn: --plan: %d kernel%s above contradict src/attn/cuda_kernel_steps.h\n", bad, bad == 1 ? "" : "s");
    rc = bad != 0 || (js && plan_counts_write(js, counts));
    goto done;
failed:
    fprintf(stderr, "mtac attn: --plan: %s\n", mta_ctx_error(ctx));
done:
    if (b.placed) cli_off_backend(c->backend, b.host, b.placed);
    free(b.host);
    cJSON_Delete(js);
    mta_destroy(ctx);
    return rc;
}

static int plan(const attn_args *a) {
    mta_config c;
    int docs;
    char label[300];
    const int rc = plan_config(a, &c, &docs, label, sizeof label);
    if (rc) return rc;
    // Only the emulator executes the kernels' source, and so counts what they do.
    if (a->counts && c.backend != MTA_BACKEND_CUDA_EMU) {
        fprintf(stderr, "mtac attn: --counts: only the cuda-emu backend counts its kernels' operations, not %s\n",
                mta_backend_name(c.backend));
        return 2;
    }
    return plan_run(&c, docs, label, a->counts, !a->nondeterministic);
}

int cmd_attn(int argc, char **argv) {
    attn_args a = {.backend = -1, .max_T = ATTN_DEFAULT_MAX_T, .tol = 2e-4, .layer = -1};
    int rc = parse_args(argc, argv, &a);
    if (rc >= 0) return rc;
    if (a.threads) cli_set_threads(a.threads);
    if (a.plan) return plan(&a);
    attn_run r = {0};
    rc = load(&a, &r);
    if (!rc) rc = compute(&r, !a.nondeterministic) || write_results(&r, a.out);
    if (!rc) {
        const int bad = compare_expected(&r.f, r.ts, r.nt, a.tol);
        if (bad > 0)
            fprintf(stderr, "mtac attn: %d result%s differ from the file's expect.* beyond --tol %g\n", bad, bad == 1 ? "" : "s",
                    a.tol);
        rc = bad != 0;
    }
    run_free(&r);
    return rc;
}
