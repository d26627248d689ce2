// cmd_bench.c: `mtac bench attn`: forward+backward time and peak memory of plain causal attention
// and MTA (the 830M layer setting) in this library, beside the naive PyTorch MTA of tests/ref.
#include "cli.h"
#include "model/model.h"
#include "mta.h"
#include "train/step.h"

#include <cblas.h>
#include <malloc.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: mtac bench attn [options]\n"
            "\n"
            "Times forward+backward, at one thread count, of: plain = tiled causal attention (the fused\n"
            "backend with every MTA step off); mta = fused MTA (the default backend); mta_ref = the\n"
            "reference backend, which materialises the (T,T) maps; torch = the naive PyTorch MTA of\n"
            "tests/ref/bench_torch.py (when torch is installed). MTA uses the 830M layer setting: pre- and\n"
            "post-softmax 6x11 key-query convolutions, pre-softmax head mixing, post-softmax head\n"
            "convolution over all heads, group norm and gate.\n"
            "Peak memory is the growth of the process's peak resident set during the first call (the\n"
            "workspace, the output and the gradients; the inputs exist before).\n"
            "\n"
            "options:\n"
            "  --T LIST          sequence lengths, comma separated (default 512,1024,2048,4096,8192,16384)\n"
            "  --B N, --H N, --d N  batch, heads, head dim (default 1, 8, 64)\n"
            "  --threads N       OpenMP/BLAS threads for every implementation (default: all cores)\n"
            "  --reps N          timed repetitions, the best is reported (default 1; one warm-up first)\n"
            "  --rows R          the fused backend's query rows per strip (default: chosen from its memory\n"
            "                    budget, docs/fused.md)\n"
            "  --keep-o          the fused MTA forward keeps O for the backward (mta_config.keep_o: one\n"
            "                    more (B,H,T,d) tensor, one product per head fewer)\n"
            "  --impl LIST       any of plain,mta,mta_ref,torch (default all four)\n"
            "  --backend NAME    the backend of plain and mta: fused (default), reference, cuda (a GPU: the\n"
            "                    tensors live in its memory, each call is timed to its synchronisation, and\n"
            "                    peak MB is the workspace) or cuda-emu (the CUDA source on the CPU: slow)\n"
            "  --naive-max-T N   run mta_ref and torch only up to this T (default 4096: they hold\n"
            "                    several (T,T) maps per head, 8.6 GB each per 8 heads at T=16384)\n"
            "  --python PATH     Python with torch for the PyTorch reference (default /usr/bin/python3)\n"
            "  --torch-script P  default tests/ref/bench_torch.py (run from the repository root)\n"
            "  --json            one JSON object per line instead of a table\n");
}

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
    for (size_t i = 0; i < n; i += 2) {
        // Box-Muller on a 64-bit LCG: plenty for benchmark inputs.
        *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u1 = ((*s >> 11) + 1.0) / 9007199254740993.0;
        *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
        double u2 = (*s >> 11) / 9007199254740992.0;
        double r = sqrt(-2.0 * log(u1));
        x[i] = (float)(scale * r * cos(6.283185307179586 * u2));
        if (i + 1 < n) x[i + 1] = (float)(scale * r * sin(6.283185307179586 * u2));
    }
}

typedef struct {
    double fwd_bwd_s, peak_mb, workspace_mb, matmul_gflops;
    int ok;
} result;

static mta_config mta830m(int B, int H, int T, int d) {
    mta_config c = mta_config_default(B, H, T, d);
    c.pre_cq = 6, c.pre_ck = 11, c.pre_head_mix = 1;
    c.post_cq = 6, c.post_ck = 11, c.post_ch = H;
    c.group_norm = 1, c.gate = 1;
    return c;
}

static result run_c(const mta_config *c, int reps) {
    result r = {0};
    const size_t n = (size_t)c->B * c->H * c->T * c->d;
    const mta_param_sizes ps = mta_param_sizes_of(c);
    size_t np = 0;
    for (int i = 0; i < MTA_N_PARAMS; i++) np += ps.w[i];
    float *buf = malloc((8 * n + 2 * np) * sizeof(float));
    if (!buf) return r;
    float *q = buf, *k = q + n, *v = k + n, *dout = v + n, *out = dout + n, *dq = out + n, *dk = dq + n,
          *dv = dk + n, *w = dv + n, *gw = w + np;
    uint64_t seed = 42;
    fill_randn(buf, 4 * n, &seed, 1.0f);
    fill_randn(w, np, &seed, 0.05f);
    const size_t *sz = ps.w;
    float *pw[MTA_N_PARAMS], *pg[MTA_N_PARAMS];
    for (size_t i = 0, off = 0; i < MTA_N_PARAMS; off += sz[i], i++) {
        pw[i] = sz[i] ? w + off : NULL;
        pg[i] = sz[i] ? gw + off : NULL;
    }
    // Identity kernels plus the noise drawn above, as a trained model's would roughly be.
    float *tmp = calloc(np ? np : 1, sizeof(float));
    if (tmp) {
        for (size_t i = 0, off = 0; i < MTA_N_PARAMS; off += sz[i], i++)
            mta_param_init_identity(c, (int)i, sz[i] ? tmp + off : NULL);
        for (size_t i = 0; i < np; i++) w[i] += tmp[i];
        free(tmp);
    }
    // Everything where the backend's calls take it: a copy in a GPU backend's memory.
    float *dbuf = cli_on_backend(c->backend, buf, 8 * n + 2 * np);
    if (!dbuf) {
        free(buf);
        return r;
    }
#define PLACED(x) ((x) ? dbuf + ((x) - buf) : NULL)
    mta_params p;
    mta_grads g;
    for (int i = 0; i < MTA_N_PARAMS; i++) p.w[i] = PLACED(pw[i]), g.w[i] = PLACED(pg[i]);
    q = PLACED(q), k = PLACED(k), v = PLACED(v), dout = PLACED(dout), out = PLACED(out);
    dq = PLACED(dq), dk = PLACED(dk), dv = PLACED(dv);
#undef PLACED
    const int device = dbuf != buf;
    char err[256];
    mta_ctx *ctx;
    if (mta_create(&ctx, c, err, sizeof err) != MTA_OK) {
        fprintf(stderr, "mtac bench: %s\n", err);
        cli_off_backend(c->backend, buf, dbuf);
        free(buf);
        return r;
    }
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
            memset(dq, 0, 3 * n * sizeof(float));
            memset(gw, 0, np * sizeof(float));
        }
        mta_ctx_reset_stats(ctx);
        double t0 = cli_now();
        if (mta_forward(ctx, q, k, v, &p, out) || mta_backward(ctx, q, k, v, &p, dout, dq, dk, dv, &g)) {
            fprintf(stderr, "mtac bench: %s\n", mta_ctx_error(ctx));
            break;
        }
        if (device && mta_backend_synchronize(c->backend)) {
            fprintf(stderr, "mtac bench: the %s backend failed\n", mta_backend_name(c->backend));
            break;
        }
        double t = cli_now() - t0;
        if (it == 0) hwm = proc_status_kb("VmHWM");
        // With reps >= 1 the first call is a warm-up and is not timed.
        if (it > 0 || reps == 0) {
            if (t < best) {
                best = t;
                mta_stats s = mta_ctx_stats(ctx);
                r.matmul_gflops = s.matmul_s > 0 ? s.matmul_flop / s.matmul_s * 1e-9 : 0;
            }
            r.ok = 1;
        }
    }
    r.fwd_bwd_s = best;
    r.peak_mb = (hwm - base) / 1024.0;
    r.workspace_mb = mta_ctx_workspace_bytes(ctx) / 1048576.0;
    if (device) r.peak_mb = r.workspace_mb;  // the host's memory says nothing of the device's
    mta_destroy(ctx);
    cli_off_backend(c->backend, buf, dbuf);
    free(buf);
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

int cli_parse_list(const char *s, int *out, int max) {
    int n = 0;
    const char *p = s;
    while (*p && n < max) {
        char *end;
        long x = strtol(p, &end, 10);
        if (end == p || x < 1 || x > 1 << 20 || (*end != ',' && *end != '\0')) return 0;
        out[n++] = (int)x;
        p = *end ? end + 1 : end;
    }
    return *p ? 0 : n;
}

void cli_cpu_name(char *buf, size_t n) {
    snprintf(buf, n, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                c += 2;
                c[strcspn(c, "\n")] = 0;
                snprintf(buf, n, "%s", c);
            }
            break;
        }
    fclose(f);
}

static int bench_attn(int argc, char **argv) {
    int Ts[16] = {512, 1024, 2048, 4096, 8192, 16384}, nT = 6, B = 1, H = 8, d = 64, threads = omp_get_num_procs(), reps = 1;
    int json = 0, do_plain = 1, do_mta = 1, do_ref = 1, do_torch = 1, naive_max_T = 4096, rows = 0, keep_o = 0;
    mta_backend backend = MTA_BACKEND_FUSED;
    const char *python = "/usr/bin/python3", *script = "tests/ref/bench_torch.py";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!strcmp(a, "--keep-o")) {
            keep_o = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mtac bench attn: %s needs a value (see --help)\n", a);
            return 2;
        }
        const char *val = argv[++i];
        if (!strcmp(a, "--T")) {
            if (!(nT = cli_parse_list(val, Ts, 16))) {
                fprintf(stderr, "mtac bench attn: --T expects a comma-separated list of positive integers, got '%s'\n", val);
                return 2;
            }
        } else if (!strcmp(a, "--B")) {
            if (!cli_parse_pos_int(a, val, &B)) return 2;
        } else if (!strcmp(a, "--H")) {
            if (!cli_parse_pos_int(a, val, &H)) return 2;
        } else if (!strcmp(a, "--d")) {
            if (!cli_parse_pos_int(a, val, &d)) return 2;
        } else if (!strcmp(a, "--threads")) {
            if (!cli_parse_pos_int(a, val, &threads)) return 2;
        } else if (!strcmp(a, "--reps")) {
            if (!cli_parse_pos_int(a, val, &reps)) return 2;
        } else if (!strcmp(a, "--rows")) {
            if (!cli_parse_pos_int(a, val, &rows)) return 2;
        } else if (!strcmp(a, "--backend")) {
            if (!cli_backend_usable("mtac bench attn", val, &backend)) return 2;
        } else if (!strcmp(a, "--python")) {
            python = val;
        } else if (!strcmp(a, "--torch-script")) {
            script = val;
        } else if (!strcmp(a, "--naive-max-T")) {
            if (!cli_parse_pos_int(a, val, &naive_max_T)) return 2;
        } else if (!strcmp(a, "--impl")) {
            do_plain = do_mta = do_ref = do_torch = 0;
            char list[256];
            snprintf(list, sizeof list, "%s", val);
            char *save = NULL;
            for (char *it = strtok_r(list, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
                if (!strcmp(it, "plain")) do_plain = 1;
                else if (!strcmp(it, "mta")) do_mta = 1;
                else if (!strcmp(it, "mta_ref")) do_ref = 1;
                else if (!strcmp(it, "torch")) do_torch = 1;
                else {
                    fprintf(stderr, "mtac bench attn: --impl expects plain, mta, mta_ref and/or torch, got '%s'\n", it);
                    return 2;
                }
            }
        } else {
            fprintf(stderr, "mtac bench attn: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    cli_set_threads(threads);
    // A fixed mmap threshold: large buffers come from mmap and go back to the system when freed,
    // whatever ran before (glibc otherwise raises the threshold after the first large free).
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    char cpu[256];
    cli_cpu_name(cpu, sizeof cpu);
    double peak = sgemm_rate_gflops();
    if (json)
        printf("{\"impl\":\"sgemm_2048\",\"threads\":%d,\"gflops\":%.1f,\"cpu\":\"%s\",\"blas_core\":\"%s\"}\n", threads, peak, cpu, openblas_get_corename());
    else {
        printf("machine: %s, %d threads, OpenBLAS core %s; sgemm 2048^3: %.1f GFLOP/s\n", cpu, threads, openblas_get_corename(), peak);
        printf("%-6s %-16s %10s %9s %9s %12s %9s\n", "T", "impl", "fwd+bwd s", "peak MB", "vs plain", "matmul GF/s",
               "%sgemm");
    }
    int n_ran = 0;  // measurements printed: none (e.g. only --impl torch, which could not start) is a failure
    for (int ti = 0; ti < nT; ti++) {
        int T = Ts[ti];
        mta_config plain = mta_config_default(B, H, T, d), mta = mta830m(B, H, T, d), ref = mta;
        plain.backend = mta.backend = backend;
        plain.strip_rows = mta.strip_rows = rows;
        mta.keep_o = keep_o;
        ref.backend = MTA_BACKEND_REFERENCE;
        char err[256];
        if (mta_config_check(&mta, err, sizeof err)) {
            fprintf(stderr, "mtac bench attn: %s\n", err);
            return 2;
        }
        result rs[4] = {{0}};
        const char *names[4] = {"mtac_plain", "mtac_mta", "mtac_mta_reference", "torch_naive_mta"};
        const char *short_names[4] = {"plain", "mta", "mta_ref", "torch_naive_mta"};
        if (do_plain) rs[0] = run_c(&plain, reps);
        if (do_mta) rs[1] = run_c(&mta, reps);
        if (do_ref && T <= naive_max_T) rs[2] = run_c(&ref, reps);
        if (do_torch && T <= naive_max_T) {
            rs[3] = run_torch(python, script, &mta, threads, reps);
            if (!rs[3].ok && !json && ti == 0)
                fprintf(stderr, "mtac bench attn: the PyTorch reference did not run (%s %s); skipping it\n", python, script);
        }
        for (int i = 0; i < 4; i++) {
            if (!rs[i].ok) continue;
            n_ran++;
            if (json) {
                printf("{\"impl\":\"%s\",\"T\":%d,\"B\":%d,\"H\":%d,\"d\":%d,\"threads\":%d,\"fwd_bwd_s\":%.4f,"
                       "\"peak_mb\":%.1f",
                       names[i], T, B, H, d, threads, rs[i].fwd_bwd_s, rs[i].peak_mb);
                if (i < 3)
                    printf(",\"backend\":\"%s\",\"workspace_mb\":%.1f,\"matmul_gflops\":%.1f,\"sgemm_gflops\":%.1f",
                           mta_backend_name(i < 2 ? backend : MTA_BACKEND_REFERENCE), rs[i].workspace_mb,
                           rs[i].matmul_gflops, peak);
                printf("}\n");
            } else {
                char ratio[32] = "", mm[32] = "", pct[32] = "";
                if (rs[0].ok) snprintf(ratio, sizeof ratio, "%.2fx", rs[i].fwd_bwd_s / rs[0].fwd_bwd_s);
                if (i < 3) {
                    snprintf(mm, sizeof mm, "%.1f", rs[i].matmul_gflops);
                    snprintf(pct, sizeof pct, "%.0f%%", 100 * rs[i].matmul_gflops / peak);
                }
                printf("%-6d %-16s %10.3f %9.1f %9s %12s %9s\n", T, short_names[i], rs[i].fwd_bwd_s,
                       rs[i].peak_mb, ratio, mm, pct);
            }
            fflush(stdout);
        }
    }
    if (!n_ran) {
        fprintf(stderr, "mtac bench attn: nothing was measured (the implementations asked for did not run%s)\n",
                do_torch ? "; for torch: does the --python given import torch, and is --torch-script there?" : "");
        return 1;
    }
    return 0;
}

// ---- bench train ----------------------------------------------------------------------------

static void train_usage(FILE *f) {
    fprintf(f, "usage: mtac bench train [--presets LIST] [--B N] [--T N] [--steps N] [--threads N] [--impl c,torch]\n"
               "                        [--python PATH] [--json]\n\n"
               "Training speed (forward, backward, clip, AdamW) of model presets in this library and of the\n"
               "PyTorch reference model (tests/ref/bench_train_torch.py) at the same thread count: tokens/s,\n"
               "and MFU = (6 * matmul params + 6 * layers * T * dim) FLOPs per token / the measured 2048^3 sgemm\n"
               "rate. Default presets toy-baseline,toy,lm10m-baseline,lm10m; T = 321 for toy presets (the\n"
               "toy-task row), 256 otherwise; B = 8; best of --steps (default 3) after one warm-up step.\n");
}

typedef struct {
    double step_s, tokens_per_s;
    int ok;
} train_result;

static train_result time_c_train(const model_config *mc, int B, int T, int steps) {
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
    adamw opt;
    if (adamw_init(&opt, model_num_params(m), 1e-4f, 0.9f, 0.98f, 1e-8f, 0.0f)) {
        model_free(m);
        return r;
    }
    int *tok = malloc(2 * (size_t)B * T * sizeof(int));
    uint64_t s = 3;
    for (int i = 0; tok && i < 2 * B * T; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        tok[i] = (int)((s >> 33) % (uint64_t)mc->vocab_size);
    }
    step_same_batch src = {tok, tok + (size_t)B * T, (size_t)B * T};  // random tokens and targets
    const step_config sc = {B, T, 1, 1.0f, 0, step_same_batch_fn, &src};
    trainer *tr = tok ? trainer_create(m, &opt, dist_self(), &sc, err, sizeof err) : NULL;
    if (!tr) fprintf(stderr, "mtac bench train: %s\n", tok ? err : "out of memory");
    double best = 1e30;
    for (int it = 0; tr && it <= steps; it++) {
        double t0 = cli_now();
        step_stats st;
        if (trainer_step(tr, it, 1e-4f, &st, err, sizeof err)) {
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
    snprintf(cmd, sizeof cmd, "%s tests/ref/bench_train_torch.py --config %s --B %d --T %d --threads %d --steps %d",
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
    double matmul = L * (4 * D * D + 3 * D * F) + V * D;
    return 6 * matmul + 6 * L * T * D;
}

static int bench_train(int argc, char **argv) {
    char presets[256] = "toy-baseline,toy,lm10m-baseline,lm10m";
    int B = 8, T = 0, steps = 3, threads = omp_get_num_procs(), json = 0, do_c = 1, do_torch = 1;
    const char *python = "/usr/bin/python3";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            train_usage(stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "mtac bench train: %s needs a value (see --help)\n", a);
            return 2;
        }
        const char *v = argv[++i];
        if (!strcmp(a, "--presets")) snprintf(presets, sizeof presets, "%s", v);
        else if (!strcmp(a, "--B")) { if (!cli_parse_pos_int(a, v, &B)) return 2; }
        else if (!strcmp(a, "--T")) { if (!cli_parse_pos_int(a, v, &T)) return 2; }
        else if (!strcmp(a, "--steps")) { if (!cli_parse_pos_int(a, v, &steps)) return 2; }
        else if (!strcmp(a, "--threads")) { if (!cli_parse_pos_int(a, v, &threads)) return 2; }
        else if (!strcmp(a, "--python")) python = v;
        else if (!strcmp(a, "--impl")) do_c = strstr(v, "c") != NULL, do_torch = strstr(v, "torch") != NULL;
        else {
            fprintf(stderr, "mtac bench train: unknown option '%s' (see --help)\n", a);
            return 2;
        }
    }
    cli_set_threads(threads);
    char cpu[256];
    cli_cpu_name(cpu, sizeof cpu);
    double peak = sgemm_rate_gflops();
    if (!json) {
        printf("machine: %s, %d threads, OpenBLAS core %s; sgemm 2048^3: %.1f GFLOP/s\n", cpu, threads,
               openblas_get_corename(), peak);
        printf("%-16s %-6s %5s %11s %12s %7s\n", "preset", "impl", "T", "step s", "tokens/s", "MFU");
    }
    char *save = NULL;
    for (char *name = strtok_r(presets, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        model_config mc;
        if (model_preset(name, &mc)) {
            fprintf(stderr, "mtac bench train: unknown preset '%s' (available: %s)\n", name, model_preset_names());
            return 2;
        }
        int t = T ? T : (!strncmp(name, "toy", 3) ? 321 : 256);
        train_result rs[2] = {{0}};
        if (do_c) rs[0] = time_c_train(&mc, B, t, steps);
        if (do_torch) rs[1] = time_torch_train(python, &mc, B, t, threads, steps);
        const char *impl[2] = {"mtac", "torch"};
        for (int k = 0; k < 2; k++) {
            if (!rs[k].ok) continue;
            double mfu = flops_per_token(&mc, t) * rs[k].tokens_per_s * 1e-9 / peak;
            if (json)
                printf("{\"impl\":\"%s\",\"preset\":\"%s\",\"B\":%d,\"T\":%d,\"threads\":%d,\"step_s\":%.4f,"
                       "\"tokens_per_s\":%.1f,\"mfu\":%.4f,\"sgemm_gflops\":%.1f}\n",
                       impl[k], name, B, t, threads, rs[k].step_s, rs[k].tokens_per_s, mfu, peak);
            else
                printf("%-16s %-6s %5d %11.3f %12.0f %6.1f%%\n", name, impl[k], t, rs[k].step_s, rs[k].tokens_per_s,
                       100 * mfu);
            fflush(stdout);
        }
    }
    return 0;
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: mtac bench attn|train|decode [options]   (mtac bench attn --help, and so on)\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "attn")) return bench_attn(argc - 1, argv + 1);
    if (!strcmp(argv[1], "train")) return bench_train(argc - 1, argv + 1);
    if (!strcmp(argv[1], "decode")) return bench_decode(argc - 1, argv + 1);
    fprintf(stderr, "mtac bench: unknown benchmark '%s' (available: attn, train, decode)\n", argv[1]);
    return 2;
}
