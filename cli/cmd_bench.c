// cmd_bench.c: `mtac bench attn`: forward+backward time and peak memory of plain causal attention
// and MTA (the 830M layer setting) in this library, beside the naive PyTorch MTA; `mtac bench
// train`: training steps of model presets, beside the PyTorch reference model.
#include "cli.h"
#include "model/model.h"
#include "model/mta_layers.h"
#include "mta.h"
#include "train/step.h"
#include "util/fpenv.h"
#include "util/rng.h"

#include <cblas.h>
#include <malloc.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] = "usage: mtac bench attn [options]\n";
static const char ABOUT[] =
    "Times forward+backward, at one thread count, of: plain = tiled causal attention (the fused\n"
    "backend with every MTA step off); mta = fused MTA (the default backend); mta_ref = the\n"
    "reference backend, which materialises the (T,T) maps; torch = the naive PyTorch MTA of\n"
    "--torch-script (when torch is installed). MTA uses the 830M layer setting: pre- and\n"
    "post-softmax 6x11 key-query convolutions, pre-softmax head mixing, post-softmax head\n"
    "convolution over all heads, group norm and gate.\n"
    "Peak memory is the growth of the process's peak resident set during the first call (the\n"
    "workspace, the output and the gradients; the inputs exist before). With --backend cuda the\n"
    "tensors live in the GPU's memory, each call is timed to its synchronisation, and peak MB is\n"
    "the workspace; cuda-emu runs the CUDA source on the CPU (slow).\n"
    "--docs LEN packs documents of LEN positions into each sequence (ids position / LEN,\n"
    "mta_set_documents) for plain, mta and mta_ref; torch is then not run.\n"
    "--H_kv N gives k and v N heads (grouped-query attention, N dividing H) in plain, mta and\n"
    "mta_ref; torch is then not run.\n";

// Peak-RSS measurement: writing 5 to clear_refs resets VmHWM, so HWM - RSS after the call is the
// memory the call itself touched at its peak.
static long proc_status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = atol(line + kl + 1);
            break;
        }
    fclose(f);
    return v;
}

static void reset_peak(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

static void fill_randn(float *x, size_t n, uint64_t *s, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = (float)(scale * rng_normal(s));
}

typedef struct {
    double fwd_bwd_s, peak_mb, workspace_mb, matmul_gflops;
    int ok;
} result;

// One problem's tensors in one block: q, k, v, dout, out, dq, dk, dv (n each), the parameters
// and their gradients (np each); where the backend's calls take them (a copy in a GPU backend's
// memory) as at.
typedef struct {
    size_t n, np;
    float *buf, *dbuf;
    float *q, *k, *v, *dout, *out, *dq, *dk, *dv, *gw;  // in dbuf
    mta_params p;
    mta_grads g;
    int32_t *doc, *ddoc;  // document ids (B,T) with --docs, and where the backend reads them; else NULL
} bench_io;

// Document ids position / len of every sequence (len > 0), placed on c's backend as ddoc (4-byte
// words copied as they are, as mtac attn places a file's). 0, or -1 after a message.
static int io_docs(const mta_config *c, int len, bench_io *io) {
    const size_t n = (size_t)c->B * c->T;
    if (!(io->doc = malloc(n * sizeof(int32_t)))) {
        fprintf(stderr, "mtac bench: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < n; i++) io->doc[i] = (int32_t)(i % c->T / len);
    io->ddoc = (int32_t *)cli_on_backend(c->backend, (const float *)io->doc, n);
    return io->ddoc ? 0 : -1;
}

// Random q, k, v, dout; identity kernels plus noise, as a trained model's would roughly be; all
// placed on c's backend. 0, or -1.
static int io_make(const mta_config *c, bench_io *io) {
    const mta_param_sizes ps = mta_param_sizes_of(c);
    const size_t n = io->n = (size_t)c->B * c->H * c->T * c->d, *sz = ps.w;
    io->np = 0;
    for (int i = 0; i < MTA_N_PARAMS; i++) io->np += sz[i];
    const size_t np = io->np, total = 8 * n + 2 * np;
    float *buf = io->buf = malloc(total * sizeof(float)), *tmp = calloc(np ? np : 1, sizeof(float));
    if (!buf || !tmp) {
        fprintf(stderr, "mtac bench: out of memory\n");
        free(tmp);
        return -1;
    }
    uint64_t seed = 42;
    fill_randn(buf, 4 * n, &seed, 1.0f);
    float *w = buf + 8 * n;
    fill_randn(w, np, &seed, 0.05f);
    for (size_t i = 0, off = 0; i < MTA_N_PARAMS; off += sz[i], i++)
        mta_param_init_identity(c, (int)i, sz[i] ? tmp + off : NULL);
    for (size_t i = 0; i < np; i++) w[i] += tmp[i];
    free(tmp);
    float *d = io->dbuf = cli_on_backend(c->backend, buf, total);
    if (!d) return -1;
    io->q = d, io->k = d + n, io->v = d + 2 * n, io->dout = d + 3 * n, io->out = d + 4 * n;
    io->dq = d + 5 * n, io->dk = d + 6 * n, io->dv = d + 7 * n, io->gw = d + 8 * n + np;
    for (size_t i = 0, off = 0; i < MTA_N_PARAMS; off += sz[i], i++) {
        io->p.w[i] = sz[i] ? d + 8 * n + off : NULL;
        io->g.w[i] = sz[i] ? io->gw + off : NULL;
    }
    return 0;
}

static void io_free(const mta_config *c, bench_io *io) {
    cli_off_backend(c->backend, io->buf, io->dbuf);
    free(io->buf);
    cli_off_backend(c->backend, (const float *)io->doc, (float *)io->ddoc);
    free(io->doc);
}

// reps + 1 forward+backward calls (the first a warm-up, timed only when reps is 0): the best time,
// the first call's peak memory, the matmul rate into r.
static void time_calls(mta_ctx *ctx, const mta_config *c, const bench_io *io, int reps, result *r) {
    const int device = io->dbuf != io->buf;
    double best = 1e30;
    long base = 0, hwm = 0;
    for (int it = 0; it <= reps; it++) {
        if (it == 0) {
            // The first call allocates the workspace: its peak is what a training step needs.
            // Memory freed by earlier measurements goes back to the system first, so that it
            // cannot hide this call's allocations.
            malloc_trim(0);
            reset_peak();
            base = proc_status_kb("VmRSS");
        }
        if (!device) {  // a device's gradients just accumulate: the same work
            memset(io->dq, 0, 3 * io->n * sizeof(float));
            memset(io->gw, 0, io->np * sizeof(float));
        }
        mta_ctx_reset_stats(ctx);
        double t0 = cli_now();
        if (mta_forward(ctx, io->q, io->k, io->v, &io->p, io->out) ||
            mta_backward(ctx, io->q, io->k, io->v, &io->p, io->dout, io->dq, io->dk, io->dv, &io->g)) {
            fprintf(stderr, "mtac bench: %s\n", mta_ctx_error(ctx));
            break;
        }
        if (device && mta_backend_synchronize(c->backend)) {
            fprintf(stderr, "mtac bench: the %s backend failed\n", mta_backend_name(c->backend));
            break;
        }
        double t = cli_now() - t0;
        if (it == 0) hwm = proc_status_kb("VmHWM");
        if (it > 0 || reps == 0) {
            if (t < best) {
                best = t;
                mta_stats s = mta_ctx_stats(ctx);
                r->matmul_gflops = s.matmul_s > 0 ? s.matmul_flop / s.matmul_s * 1e-9 : 0;
            }
            r->ok = 1;
        }
    }
    r->fwd_bwd_s = best;
    r->peak_mb = (hwm - base) / 1024.0;
    r->workspace_mb = mta_ctx_workspace_bytes(ctx) / 1048576.0;
    if (device) r->peak_mb = r->workspace_mb;  // the host's memory says nothing of the device's
}

// docs: document length (0: one document per sequence).
static result run_c(const mta_config *c, int reps, int docs) {
    result r = {0};
    bench_io io = {0};
    char err[256];
    mta_ctx *ctx = NULL;
    if (!io_make(c, &io) && (!docs || !io_docs(c, docs, &io))) {  // else after a message
        if (mta_create(&ctx, c, err, sizeof err) != MTA_OK) fprintf(stderr, "mtac bench: %s\n", err);
        else if (mta_set_documents(ctx, io.ddoc) == MTA_OK) time_calls(ctx, c, &io, reps, &r);
    }
    mta_destroy(ctx);
    io_free(c, &io);
    return r;
}

// Runs the PyTorch reference as a child process and reads its JSON line.
static result run_torch(const char *python, const char *script, const mta_config *c, int threads, int reps) {
    result r = {0};
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s --T %d --H %d --d %d --B %d --threads %d --config mta830m --reps %d --warmup 1",
             python, script, c->T, c->H, c->d, c->B, threads, reps);
    FILE *pf = popen(cmd, "r");
    if (!pf) return r;
    char line[1024];
    while (fgets(line, sizeof line, pf)) {
        const char *a = strstr(line, "\"fwd_bwd_s\":"), *b = strstr(line, "\"peak_mb\":");
        if (a && b) {
            r.fwd_bwd_s = atof(a + 12);
            r.peak_mb = atof(b + 10);
            r.ok = 1;
        }
    }
    int st = pclose(pf);
    if (st != 0) r.ok = 0;
    return r;
}

static double sgemm_rate_gflops(void) {
    const int n = 2048;
    float *a = malloc(3 * (size_t)n * n * sizeof(float));
    if (!a) return 0;
    uint64_t seed = 7;
    fill_randn(a, 3 * (size_t)n * n, &seed, 1.0f);
    double best = 1e30;
    for (int it = 0; it < 3; it++) {
        double t0 = cli_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, a + (size_t)n * n, n, 0.0f,
                    a + 2 * (size_t)n * n, n);
        double t = cli_now() - t0;
        if (t < best) best = t;
    }
    free(a);
    return 2.0 * n * n * (double)n / best * 1e-9;
}

enum { IMPL_PLAIN = 1, IMPL_MTA = 2, IMPL_REF = 4, IMPL_TORCH = 8 };
static const char *const IMPLS[] = {"plain", "mta", "mta_ref", "torch", NULL};

typedef struct {
    uint64_t Ts[16];
    int nT, B, H, d, threads, reps, rows, keep_o, impl, backend, naive_max_T, json, docs, H_kv;
    const char *python, *script;
    double sgemm;  // the machine's sgemm rate, GFLOP/s
} attn_args;

int cli_parse_bench(const cli_spec *spec, int argc, char **argv, int *threads) {
    int first;
    const int st = cli_parse(spec, argc, argv, &first);
    if (st < 0 && !*threads) *threads = omp_get_num_procs();
    return st;
}

// The flags into a: -1 to go on, else the exit status.
static int attn_parse(int argc, char **argv, attn_args *a) {
    const cli_opt opts[] = {
        {"T", CLI_LIST, a->Ts, 1, 1 << 20, .max = 16, .count = &a->nT, .arg = "LIST",
         .help = "sequence lengths; default 512,1024,2048,4096,8192,16384"},
        {"B", CLI_INT, &a->B, 1, 1e9, .arg = "N", .help = "batch"},
        {"H", CLI_INT, &a->H, 1, 1e9, .arg = "N", .help = "heads"},
        {"d", CLI_INT, &a->d, 1, 1e9, .arg = "N", .help = "head dim"},
        {"H_kv", CLI_INT, &a->H_kv, 1, 1e9, .arg = "N", .help = "key/value heads, dividing H (default H)"},
        {"threads", CLI_INT, &a->threads, 1, 1e9, .arg = "N", .help = "OpenMP/BLAS threads of every implementation (default: all cores)"},
        {"reps", CLI_INT, &a->reps, 1, 1e9, .arg = "N", .help = "timed repetitions after one warm-up; the best is reported"},
        {"rows", CLI_INT, &a->rows, 1, 1e9, .arg = "R",
         .help = "the fused backend's query rows per strip (default: from its memory budget, docs/fused.md)"},
        {"keep-o", CLI_FLAG, &a->keep_o,
         .help = "the fused MTA forward keeps O for the backward (mta_config.keep_o: one more (B,H,T,d) tensor, one product per head fewer)"},
        {"docs", CLI_INT, &a->docs, 1, 1 << 20, .arg = "LEN",
         .help = "packed documents of LEN positions in each sequence (ids position / LEN); default one per sequence"},
        {"impl", CLI_SET, &a->impl, .choices = IMPLS, .arg = "LIST", .help = "what to time"},
        {"backend", CLI_CHOICE, &a->backend, .choices = cli_backend_names(), .arg = "NAME", .help = "the backend of plain and mta"},
        {"naive-max-T", CLI_INT, &a->naive_max_T, 1, 1e9, .arg = "N",
         .help = "mta_ref and torch only up to this T (they hold several (T,T) maps per head: 8.6 GB each per 8 heads at T=16384)"},
        {"python", CLI_STR, &a->python, .arg = "PATH", .help = "Python with torch, for the PyTorch reference"},
        {"torch-script", CLI_STR, &a->script, .arg = "P", .help = "the PyTorch reference (run from the repository root)"},
        {"json", CLI_FLAG, &a->json, .help = "one JSON object per line instead of a table"},
    };
    const cli_spec spec = {"mtac bench attn", USAGE, ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    const int st = cli_parse_bench(&spec, argc, argv, &a->threads);
    if (st >= 0) return st;
    return cli_backend_usable(spec.name, (mta_backend)a->backend) ? -1 : 2;
}

// The machine's line (and the table's head): its CPU, threads, BLAS core and sgemm rate.
static void attn_header(attn_args *a) {
    char cpu[256];
    cli_cpu_name(cpu, sizeof cpu);
    a->sgemm = sgemm_rate_gflops();
    if (a->json) {
        printf("{\"impl\":\"sgemm_2048\",\"threads\":%d,\"gflops\":%.1f,\"cpu\":\"%s\",\"blas_core\":\"%s\"}\n", a->threads,
               a->sgemm, cpu, openblas_get_corename());
        return;
    }
    printf("machine: %s, %d threads, OpenBLAS core %s; sgemm 2048^3: %.1f GFLOP/s\n", cpu, a->threads,
           openblas_get_corename(), a->sgemm);
    if (a->docs) printf("packed documents of %d positions\n", a->docs);
    if (a->H_kv) printf("grouped-query attention: %d key/value heads for %d query heads\n", a->H_kv, a->H);
    printf("%-6s %-16s %10s %9s %9s %12s %9s\n", "T", "impl", "fwd+bwd s", "peak MB", "vs plain", "matmul GF/s", "%sgemm");
}

// Prints the measurements of one T that ran (rs[i].ok): plain, mta, mta_ref, torch.
static void attn_print(const attn_args *a, int T, const result rs[4]) {
    const char *names[4] = {"mtac_plain", "mtac_mta", "mtac_mta_reference", "torch_naive_mta"};
    const char *short_names[4] = {"plain", "mta", "mta_ref", "torch_naive_mta"};
    for (int i = 0; i < 4; i++) {
        if (!rs[i].ok) continue;
        if (a->json) {
            printf("{\"impl\":\"%s\",\"T\":%d,\"B\":%d,\"H\":%d,\"d\":%d,\"threads\":%d,\"fwd_bwd_s\":%.4f,\"peak_mb\":%.1f",
                   names[i], T, a->B, a->H, a->d, a->threads, rs[i].fwd_bwd_s, rs[i].peak_mb);
            if (a->docs) printf(",\"docs\":%d", a->docs);
            if (a->H_kv) printf(",\"H_kv\":%d", a->H_kv);
            if (i < 3)
                printf(",\"backend\":\"%s\",\"workspace_mb\":%.1f,\"matmul_gflops\":%.1f,\"sgemm_gflops\":%.1f",
                       mta_backend_name(i < 2 ? (mta_backend)a->backend : MTA_BACKEND_REFERENCE), rs[i].workspace_mb,
                       rs[i].matmul_gflops, a->sgemm);
            printf("}\n");
        } else {
            char ratio[32] = "", mm[32] = "", pct[32] = "";
            if (rs[0].ok) snprintf(ratio, sizeof ratio, "%.2fx", rs[i].fwd_bwd_s / rs[0].fwd_bwd_s);
            if (i < 3) {
                snprintf(mm, sizeof mm, "%.1f", rs[i].matmul_gflops);
                snprintf(pct, sizeof pct, "%.0f%%", 100 * rs[i].matmul_gflops / a->sgemm);
            }
            printf("%-6d %-16s %10.3f %9.1f %9s %12s %9s\n", T, short_names[i], rs[i].fwd_bwd_s, rs[i].peak_mb, ratio, mm,
                   pct);
        }
        fflush(stdout);
    }
}

// Times what a asks for at one T into rs: 0, or 2 after a message when the setting is invalid.
static int attn_measure(const attn_args *a, int T, int first, result rs[4]) {
    mta_config plain = mta_config_default(a->B, a->H, T, a->d), mta = plain;
    mta_layer_830m(&mta, a->H, 1);
    mta_config ref = mta;
    plain.backend = mta.backend = (mta_backend)a->backend;
    plain.strip_rows = mta.strip_rows = a->rows;
    plain.H_kv = mta.H_kv = ref.H_kv = a->H_kv;
    mta.keep_o = a->keep_o;
    ref.backend = MTA_BACKEND_REFERENCE;
    char err[256];
    if (mta_config_check(&mta, err, sizeof err) || mta_config_check(&plain, err, sizeof err)) {
        fprintf(stderr, "mtac bench attn: %s\n", err);
        return 2;
    }
    const int naive = T <= a->naive_max_T;
    if (a->impl & IMPL_PLAIN) rs[0] = run_c(&plain, a->reps, a->docs);
    if (a->impl & IMPL_MTA) rs[1] = run_c(&mta, a->reps, a->docs);
    if (a->impl & IMPL_REF && naive) rs[2] = run_c(&ref, a->reps, a->docs);
    if (a->impl & IMPL_TORCH && naive && !a->docs && !a->H_kv) {
        rs[3] = run_torch(a->python, a->script, &mta, a->threads, a->reps);
        if (!rs[3].ok && !a->json && first)
            fprintf(stderr, "mtac bench attn: the PyTorch reference did not run (%s %s); skipping it\n", a->python, a->script);
    }
    return 0;
}

int cmd_bench_attn(int argc, char **argv) {
    attn_args a = {.Ts = {512, 1024, 2048, 4096, 8192, 16384}, .nT = 6, .B = 1, .H = 8, .d = 64, .reps = 1,
                   .impl = IMPL_PLAIN | IMPL_MTA | IMPL_REF | IMPL_TORCH, .backend = MTA_BACKEND_FUSED,
                   .naive_max_T = 4096, .python = "/usr/bin/python3", .script = "bench/bench_torch.py"};
    const int st = attn_parse(argc, argv, &a);
    if (st >= 0) return st;
    cli_set_threads(a.threads);
    // A fixed mmap threshold: large buffers come from mmap and go back to the system when freed,
    // whatever ran before (glibc otherwise raises the threshold after the first large free).
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    attn_header(&a);
    int n_ran = 0;  // measurements printed: none (e.g. only --impl torch, which could not start) is a failure
    for (int ti = 0; ti < a.nT; ti++) {
        result rs[4] = {{0}};
        if (attn_measure(&a, (int)a.Ts[ti], ti == 0, rs)) return 2;
        attn_print(&a, (int)a.Ts[ti], rs);
        for (int i = 0; i < 4; i++) n_ran += rs[i].ok;
    }
    if (!n_ran) {
        fprintf(stderr, "mtac bench attn: nothing was measured (the implementations asked for did not run%s)\n",
                a.impl & IMPL_TORCH ? "; for torch: does the --python given import torch, and is --torch-script there?" : "");
        return 1;
    }
    return 0;
}

// ---- bench train ----------------------------------------------------------------------------

static const char TRAIN_USAGE[] =
    "usage: mtac bench train [--presets LIST] [--B N] [--T N] [--steps N] [--threads N] [--impl c,torch]\n"
    "                        [--python PATH] [--json] [--subnormal]\n";
static const char TRAIN_ABOUT[] =
    "Training speed (forward, backward, clip, AdamW) of model presets in this library and of the\n"
    "PyTorch reference model (bench/bench_train_torch.py) at the same thread count: tokens/s,\n"
    "and MFU = (6 * matmul params + 6 * layers * T * dim) FLOPs per token / the measured 2048^3 sgemm\n"
    "rate. Default presets toy-baseline,toy,lm10m-baseline,lm10m; T = 321 for toy presets (the\n"
    "toy-task row), 256 otherwise; B = 8; best of --steps (default 3) after one warm-up step.\n"
    "--subnormal: this library's step (lr 0) with every weight scaled by 2^-135 into the subnormal\n"
    "range, subnormals flushed (as mtac train runs) and not, against the step of the unscaled\n"
    "weights: the times and their ratios.\n";

typedef struct {
    double step_s, tokens_per_s;
    int ok;
} train_result;

// scale: every weight multiplied by it (1: none); then lr 0, so that the weights stay so.
static train_result time_c_train(const model_config *mc, int B, int T, int steps, float scale) {
    train_result r = {0};
    char err[256];
    mta_backend backend;
    if (cli_default_backend(&backend)) return r;
    model *m = model_create(mc, err, sizeof err);
    if (!m) {
        fprintf(stderr, "mtac bench train: %s\n", err);
        return r;
    }
    model_set_backend(m, backend);
    model_init(m, 1);
    for (size_t i = 0; scale != 1 && i < model_num_params(m); i++) model_params(m)[i] *= scale;
    const float lr = scale != 1 ? 0.0f : 1e-4f;
    adamw opt;
    if (adamw_init(&opt, model_num_params(m), 1e-4f, 0.9f, 0.98f, 1e-8f, 0.0f)) {
        model_free(m);
        return r;
    }
    int *tok = malloc(2 * (size_t)B * T * sizeof(int));
    uint64_t s = 3;
    for (int i = 0; tok && i < 2 * B * T; i++) tok[i] = (int)(splitmix64(&s) % (uint64_t)mc->vocab_size);
    step_same_batch src = {tok, tok + (size_t)B * T, (size_t)B * T};  // random tokens and targets
    const step_config sc = {B, T, 1, 1.0f, 0, step_same_batch_fn, &src, NULL};
    trainer *tr = tok ? trainer_create(m, &opt, dist_self(), &sc, err, sizeof err) : NULL;
    if (!tr) fprintf(stderr, "mtac bench train: %s\n", tok ? err : "out of memory");
    double best = 1e30;
    for (int it = 0; tr && it <= steps; it++) {
        double t0 = cli_now();
        step_stats st;
        if (trainer_step(tr, it, lr, &st, err, sizeof err)) {
            fprintf(stderr, "mtac bench train: %s\n", err);
            break;
        }
        double t = cli_now() - t0;
        if (it > 0 && t < best) best = t, r.ok = 1;
    }
    r.step_s = best, r.tokens_per_s = (double)B * T / best;
    trainer_free(tr);
    free(tok);
    adamw_free(&opt);
    model_free(m);
    return r;
}

static train_result time_torch_train(const char *python, const model_config *mc, int B, int T, int threads,
                                     int steps) {
    train_result r = {0};
    char path[] = "/tmp/mtac_bench_cfg_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return r;
    char *js = model_config_to_json(mc);
    FILE *f = fdopen(fd, "w");
    fputs(js, f);
    fclose(f);
    free(js);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s bench/bench_train_torch.py --config %s --B %d --T %d --threads %d --steps %d",
             python, path, B, T, threads, steps);
    FILE *pf = popen(cmd, "r");
    char line[1024];
    while (pf && fgets(line, sizeof line, pf)) {
        const char *a = strstr(line, "\"step_s\":");
        if (a) r.step_s = atof(a + 9), r.ok = 1;
    }
    if (!pf || pclose(pf) != 0) r.ok = 0;
    remove(path);
    r.tokens_per_s = r.ok ? (double)B * T / r.step_s : 0;
    return r;
}

// Matmul FLOPs per token, forward and backward: 6 per weight of every matrix product (the output
// projection included, the embedding lookup not) plus causal attention's 6 * T * dim per layer.
static double flops_per_token(const model_config *c, int T) {
    double D = c->dim, F = c->hidden_dim, V = c->vocab_size, L = c->n_layers;
    double KV = D / c->n_heads * model_kv_heads(c);  // wk, wv rows (D without grouped-query attention)
    double matmul = L * (2 * D * D + 2 * D * KV + 3 * D * F) + V * D;
    return 6 * matmul + 6 * L * T * D;
}

static const char *const TRAIN_IMPLS[] = {"c", "torch", NULL};

typedef struct {
    const char *presets, *python;
    int B, T, steps, threads, impl, json, subnormal;
    double sgemm;  // the machine's sgemm rate, GFLOP/s
} train_args;

// The flags into a: -1 to go on, else the exit status.
static int train_parse(int argc, char **argv, train_args *a) {
    const cli_opt opts[] = {
        {"presets", CLI_STR, &a->presets, .arg = "LIST", .help = "model presets, comma-separated"},
        {"B", CLI_INT, &a->B, 1, 1e9, .arg = "N", .help = "batch"},
        {"T", CLI_INT, &a->T, 1, 1e9, .arg = "N", .help = "sequence length (default: 321 for toy presets, 256 otherwise)"},
        {"steps", CLI_INT, &a->steps, 1, 1e9, .arg = "N", .help = "timed steps after one warm-up; the best is reported"},
        {"threads", CLI_INT, &a->threads, 1, 1e9, .arg = "N", .help = "OpenMP/BLAS threads of both (default: all cores)"},
        {"impl", CLI_SET, &a->impl, .choices = TRAIN_IMPLS, .arg = "LIST", .help = "this library (c), the PyTorch reference (torch)"},
        {"python", CLI_STR, &a->python, .arg = "PATH", .help = "Python with torch, for the PyTorch reference"},
        {"json", CLI_FLAG, &a->json, .help = "one JSON object per line instead of a table"},
        {"subnormal", CLI_FLAG, &a->subnormal, .help = "a step on subnormal weights, flushed and not (mtac only)"},
    };
    const cli_spec spec = {"mtac bench train", TRAIN_USAGE, TRAIN_ABOUT, NULL, opts, sizeof opts / sizeof opts[0], NULL};
    return cli_parse_bench(&spec, argc, argv, &a->threads);
}

// Times preset name (its configuration mc) as a asks and prints a line per implementation.
static void train_measure(const train_args *a, const char *name, const model_config *mc) {
    const int t = a->T ? a->T : (!strncmp(name, "toy", 3) ? 321 : 256);
    train_result rs[2] = {{0}};
    if (a->impl & 1) rs[0] = time_c_train(mc, a->B, t, a->steps, 1);
    if (a->impl & 2) rs[1] = time_torch_train(a->python, mc, a->B, t, a->threads, a->steps);
    const char *impl[2] = {"mtac", "torch"};
    for (int k = 0; k < 2; k++) {
        if (!rs[k].ok) continue;
        const double mfu = flops_per_token(mc, t) * rs[k].tokens_per_s * 1e-9 / a->sgemm;
        if (a->json)
            printf("{\"impl\":\"%s\",\"preset\":\"%s\",\"B\":%d,\"T\":%d,\"threads\":%d,\"step_s\":%.4f,"
                   "\"tokens_per_s\":%.1f,\"mfu\":%.4f,\"sgemm_gflops\":%.1f}\n",
                   impl[k], name, a->B, t, a->threads, rs[k].step_s, rs[k].tokens_per_s, mfu, a->sgemm);
        else
            printf("%-16s %-6s %5d %11.3f %12.0f %6.1f%%\n", name, impl[k], t, rs[k].step_s, rs[k].tokens_per_s, 100 * mfu);
        fflush(stdout);
    }
}

// --subnormal: the step of normal weights and of subnormal ones (2^-135 times them), flushing on
// (as train_run does) and off, as one line per preset.
static void subnormal_measure(const train_args *a, const char *name, const model_config *mc) {
    const int t = a->T ? a->T : (!strncmp(name, "toy", 3) ? 321 : 256);
    const int was = fp_flush_subnormals(1);
    const train_result normal = time_c_train(mc, a->B, t, a->steps, 1), flushed = time_c_train(mc, a->B, t, a->steps, 0x1p-135f);
    fp_flush_subnormals(0);
    const train_result kept = time_c_train(mc, a->B, t, a->steps, 0x1p-135f);
    fp_flush_subnormals(was);
    if (!normal.ok || !flushed.ok || !kept.ok) return;
    const double rf = flushed.step_s / normal.step_s, rk = kept.step_s / normal.step_s;
    if (a->json)
        printf("{\"preset\":\"%s\",\"B\":%d,\"T\":%d,\"threads\":%d,\"normal_s\":%.4f,\"subnormal_flushed_s\":%.4f,"
               "\"subnormal_kept_s\":%.4f,\"flushed_ratio\":%.3f,\"kept_ratio\":%.3f}\n",
               name, a->B, t, a->threads, normal.step_s, flushed.step_s, kept.step_s, rf, rk);
    else
        printf("%-16s %5d %9.3f %9.3f %6.2fx %9.3f %6.2fx\n", name, t, normal.step_s, flushed.step_s, rf, kept.step_s, rk);
    fflush(stdout);
}

int cmd_bench_train(int argc, char **argv) {
    train_args a = {.presets = "toy-baseline,toy,lm10m-baseline,lm10m", .python = "/usr/bin/python3", .B = 8, .steps = 3,
                    .impl = 3};
    int st = train_parse(argc, argv, &a);
    if (st >= 0) return st;
    cli_set_threads(a.threads);
    char cpu[256], presets[256];
    cli_cpu_name(cpu, sizeof cpu);
    a.sgemm = sgemm_rate_gflops();
    if (!a.json) {
        printf("machine: %s, %d threads, OpenBLAS core %s; sgemm 2048^3: %.1f GFLOP/s\n", cpu, a.threads,
               openblas_get_corename(), a.sgemm);
        if (a.subnormal)
            printf("%-16s %5s %9s %9s %7s %9s %7s\n", "preset", "T", "normal s", "flushed s", "ratio", "kept s", "ratio");
        else printf("%-16s %-6s %5s %11s %12s %7s\n", "preset", "impl", "T", "step s", "tokens/s", "MFU");
    }
    snprintf(presets, sizeof presets, "%s", a.presets);
    char *save = NULL;
    for (char *name = strtok_r(presets, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        model_config mc;
        if (model_preset(name, &mc)) {
            fprintf(stderr, "mtac bench train: unknown preset '%s' (available: %s)\n", name, model_preset_names());
            return 2;
        }
        if (a.subnormal) subnormal_measure(&a, name, &mc);
        else train_measure(&a, name, &mc);
    }
    return 0;
}
