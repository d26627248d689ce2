// cmd_demo.c: `mtac demo`: a short, checked tour of the operator for a new user.
#include "cli.h"
#include "model/mta_layers.h"
#include "mta.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float urand(uint64_t *s) {
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*s >> 40) / 16777216.0) * 2.0f - 1.0f;
}

static double max_abs_diff(const float *a, const float *b, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

int cmd_demo(int argc, char **argv) {
    int T = 256;
    const cli_opt opts[] = {{"T", CLI_INT, &T, 1, 1e9, .arg = "N", .help = "sequence length"}};
    const cli_spec spec = {"mtac demo", "usage: mtac demo [--T N]\n",
                           "Runs MTA and plain attention on random inputs (B=1, H=4, d=32), shows\n"
                           "that identity kernels reproduce plain attention, and that the gradients flow.\n",
                           NULL, opts, 1, NULL};
    int first, done = cli_parse(&spec, argc, argv, &first);
    if (done >= 0) return done;
    const int B = 1, H = 4, d = 32;
    const size_t n = (size_t)B * H * T * d;
    mta_config plain = mta_config_default(B, H, T, d), mta = plain;
    mta_layer_830m(&mta, H, 0);  // the buffers below hold its 6 x 11 kernels
    float *buf = calloc(9 * n + 2 * (2 * H * 6 * 11 + 2 * H * H), sizeof(float));
    if (!buf) {
        fprintf(stderr, "mtac demo: out of memory\n");
        return 1;
    }
    float *q = buf, *k = q + n, *v = k + n, *o_plain = v + n, *o_mta = o_plain + n, *dout = o_mta + n,
          *dq = dout + n, *dk = dq + n, *dv = dk + n;
    float *w_pre = dv + n, *w_post = w_pre + H * 66, *w_mix = w_post + H * 66, *w_hc = w_mix + H * H,
          *g_pre = w_hc + H * H;
    uint64_t s = 1;
    for (size_t i = 0; i < 3 * n; i++) q[i] = 2.0f * urand(&s);
    for (size_t i = 0; i < n; i++) dout[i] = urand(&s);
    mta_params_init_identity(&mta, w_pre, w_mix, w_post, w_hc, NULL, NULL);
    mta_params pm = {.w_pre = w_pre, .w_pre_head = w_mix, .w_post = w_post, .w_post_head = w_hc};

    char err[256];
    mta_ctx *cp, *cm;
    if (mta_create(&cp, &plain, err, sizeof err) || mta_create(&cm, &mta, err, sizeof err)) {
        fprintf(stderr, "mtac demo: %s\n", err);
        free(buf);
        return 1;
    }
    printf("MTA operator demo: B=%d H=%d T=%d d=%d\n", B, H, T, d);
    printf("MTA setting: pre- and post-softmax 6x11 key-query convolutions, head mixing, head convolution\n\n");
    double t0 = cli_now();
    mta_forward(cp, q, k, v, NULL, o_plain);
    double t1 = cli_now();
    mta_forward(cm, q, k, v, &pm, o_mta);
    double t2 = cli_now();
    printf("1. identity kernels: max |MTA - plain attention| = %.3g   (forward %.1f ms vs %.1f ms)\n",
           max_abs_diff(o_plain, o_mta, n), 1e3 * (t2 - t1), 1e3 * (t1 - t0));

    for (size_t i = 0; i < (size_t)H * 66; i++) w_pre[i] += 0.3f * urand(&s), w_post[i] += 0.1f * urand(&s);
    for (size_t i = 0; i < (size_t)H * H; i++) w_mix[i] += 0.3f * urand(&s), w_hc[i] += 0.3f * urand(&s);
    mta_forward(cm, q, k, v, &pm, o_mta);
    printf("2. perturbed kernels: max |MTA - plain attention| = %.3g   (the convolutions now mix neighbours)\n",
           max_abs_diff(o_plain, o_mta, n));

    mta_grads g = {.w_pre = g_pre};
    double t3 = cli_now();
    mta_status st = mta_backward(cm, q, k, v, &pm, dout, dq, dk, dv, &g);
    double t4 = cli_now();
    double gn = 0;
    for (int i = 0; i < H * 66; i++) gn += (double)g_pre[i] * g_pre[i];
    printf("3. backward: %s in %.1f ms; |d loss / d w_pre| = %.4g\n", mta_status_str(st), 1e3 * (t4 - t3), sqrt(gn));
    printf("\nNext: `mtac attn --help` runs the operator on your own tensors; `mtac bench attn` times it.\n");
    mta_destroy(cp);
    mta_destroy(cm);
    free(buf);
    return st == MTA_OK ? 0 : 1;
}
