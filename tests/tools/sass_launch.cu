// sass_launch.cu: the CUDA backend's source (mta_cuda.cu, included whole) with a main that prints,
// per kernel, the threads and dynamic shared memory its launches ask, from the host code's own
// sizing functions (the ones mta_cuda_tc.cuh's launches call), for the 830M layer's steps at
// d = 64, 96 and 128: one line "kernel threads bytes case" per case. tests/tools/check_sass.py compiles
// this file, reads ptxas's report and the SASS of its kernels (the same as libmtac_cuda.so's) and
// runs it (no GPU needed: it calls no CUDA function). A kernel launched with dynamic shared memory
// must have a line here; a kernel without one is launched with none (MTA_LAUNCH(..., 0, ...)).
#include "attn/mta_cuda.cu"

#include <stdio.h>

namespace {

int d_now;  // the case being printed
// An H100's opt-in shared memory per block (227 KB): the limit the launches are sized for there.
const size_t H100_SMEM_OPTIN = 232448;

void print_launch(const char *kernel, int threads, size_t bytes) { printf("%s %d %zu d=%d\n", kernel, threads, bytes, d_now); }

// The head kernels for a layer of H heads with mixing and the head convolution over all of them
// (G = H: the 830M layer's head steps at H = 16, their <1> instances; H = 32, the <2> ones), as the
// launches size them (fh_smem_bytes), named as c++filt names their instance.
void print_head_kernels(int d, int H) {
    mta_config c;
    memset(&c, 0, sizeof c);
    c.H = H, c.d = d, c.pre_head_mix = 1, c.post_ch = H;
    const tc_heads hd = tc_heads_of(&c, NULL, H100_SMEM_OPTIN);
    if (hd.nq == 0) return;  // the float32 path runs this config: no head kernel is launched
    const char *kind[3] = {"forward", "dq", "dkdv"};
    const int kinds[3] = {TC_FWD, TC_DQ, TC_DKDV};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, "k_fa_head_%s_t<%d>", kind[i], hd.nq);
        print_launch(name, TC_THREADS, fh_smem_bytes(kinds[i], hd.G, tc_dp(d)));
    }
    if (hd.nq == 1) {  // the forward on clusters (fhc_forward_at), on an H100
        print_launch(tc_dp(d) <= 64 ? "k_fa_head_cl_forward_t<64>" : "k_fa_head_cl_forward_t<128>", FHC_THREADS,
                     fhc_smem_bytes(hd.ch, tc_dp(d)));
        // and the dK, dV on clusters (fhd_dkdv_at)
        print_launch(tc_dp(d) <= 64 ? "k_fa_head_cl_dkdv_t<64>" : "k_fa_head_cl_dkdv_t<128>", FHD_THREADS,
                     fhd_smem_bytes(fh_cl_nbuf(fhd_smem_bytes, tc_dp(d), H100_SMEM_OPTIN), tc_dp(d)));
        // and the dQ on clusters (fqc_dq_at)
        print_launch(tc_dp(d) <= 64 ? "k_fa_head_cl_dq_t<64>" : "k_fa_head_cl_dq_t<128>", FHC_THREADS,
                     fqc_smem_bytes(fh_cl_nbuf(fqc_smem_bytes, tc_dp(d), H100_SMEM_OPTIN), tc_dp(d)));
    }
}

// The attention kernels at padded width dp, named as c++filt names their instance (<64> serves
// dp <= 64, <128> the rest: fa_forward, fa_backward).
void print_fa_kernels(int dp) {
    const char *w = dp <= 64 ? "64" : "128";
    char name[64];
    snprintf(name, sizeof name, "k_fa_forward_t<%s>", w);
    print_launch(name, TC_THREADS, fa_smem_bytes(TC_FWD, dp));
    snprintf(name, sizeof name, "k_fa_dkdv_t<%s>", w);
    print_launch(name, TC_THREADS, fa_smem_bytes(TC_DKDV, dp));
    snprintf(name, sizeof name, "k_fa_dq_t<%s>", w);
    print_launch(name, TC_THREADS, fa_smem_bytes(TC_DQ, dp));
}

// The pre-softmax convolution's mma.sync kernels at padded width dp for a c_q x c_k kernel (as
// fa_conv_forward launches them).
void print_fa_conv_kernels(int dp, int cq, int ck) {
    char name[64];
    snprintf(name, sizeof name, "k_fa_conv_forward_t<%s>", dp <= 64 ? "64" : "128");
    print_launch(name, TC_THREADS, fa_conv_smem_bytes(dp, cq, ck));
    snprintf(name, sizeof name, "k_fa_conv_dkdv_t<%s>", dp <= 64 ? "64" : "128");
    print_launch(name, TC_THREADS, fa_conv_bwd_smem_bytes(TC_DKDV, cq, ck));
    snprintf(name, sizeof name, "k_fa_conv_dq_t<%s>", dp <= 64 ? "64" : "128");
    print_launch(name, TC_THREADS, fa_conv_bwd_smem_bytes(TC_DQ, cq, ck));
}

// The post-softmax convolution's kernels at padded width dp for a c_q x c_k kernel (as
// fa_post_forward and fa_post_backward launch them).
void print_fa_post_kernels(int dp, int cq, int ck) {
    const char *w = dp <= 64 ? "64" : "128";
    char name[64];
    snprintf(name, sizeof name, "k_fa_post_forward_t<%s>", w);
    print_launch(name, TC_THREADS, fa_post_smem_bytes(dp, cq, ck));
    snprintf(name, sizeof name, "k_fa_post_dq_t<%s>", w);
    print_launch(name, TC_THREADS, fa_post_bwd_smem_bytes(TC_DQ, dp, cq, ck));
    snprintf(name, sizeof name, "k_fa_post_dkdv_t<%s>", w);
    print_launch(name, TC_THREADS, fa_post_bwd_smem_bytes(TC_DKDV, dp, cq, ck));
}

// The every-step kernels at padded width dp for the 830M layer 2 (both convolutions c_q x c_k, 16
// heads mixed and convolved: G = 16), as fe_forward and fe_backward launch them (fe_smem_bytes,
// fe_bwd_smem_bytes).
void print_fa_every_kernels(int dp, int cq, int ck) {
    print_launch("k_fa_every_stats", TC_THREADS, fe_smem_bytes(FE_STATS, dp, cq, ck, cq, ck));
    print_launch("k_fa_every_forward", TC_THREADS, fe_smem_bytes(TC_FWD, dp, cq, ck, cq, ck));
    print_launch("k_fa_every_D", TC_THREADS, fe_bwd_smem_bytes(FEB_D, dp, cq, ck, cq, ck));
    print_launch("k_fa_every_dq", FE_BWD_THREADS, fe_bwd_smem_bytes(TC_DQ, dp, cq, ck, cq, ck));
    print_launch("k_fa_every_dkdv", FE_BWD_THREADS, fe_bwd_smem_bytes(TC_DKDV, dp, cq, ck, cq, ck));
    print_launch("k_fa_every_dqkv", FE_BWD_THREADS, fe_bwd_smem_bytes(FEB_DQKV, dp, cq, ck, cq, ck));
}

}  // namespace

// --coverage: what the tensor-core path covers (tc_covers) at H = 16 under an H100's and an A100's
// opt-in shared memory: plain attention, four convolution kernels, the 830M head steps (16 heads
// mixed and convolved), and 32 heads mixed and convolved (H = 32).
int print_coverage(void) {
    const size_t limit[2] = {H100_SMEM_OPTIN, 166912};
    const int ks[4][2] = {{6, 11}, {17, 17}, {33, 33}, {3, 19}};
    printf("device d plain 6x11 17x17 33x33 3x19 heads heads32\n");
    for (int dev = 0; dev < 2; dev++)
        for (int d = 64; d <= 128; d += 32) {
            mta_config c;
            memset(&c, 0, sizeof c);
            c.B = 1, c.H = 16, c.T = 64, c.d = d;
            c.precision = MTA_BF16, c.backend = MTA_BACKEND_CUDA;
            printf("%s %d %d", dev ? "A100" : "H100", d, tc_covers(&c, limit[dev]));
            for (int i = 0; i < 4; i++) {
                mta_config e = c;
                e.pre_cq = ks[i][0], e.pre_ck = ks[i][1];
                printf(" %d", tc_covers(&e, limit[dev]));
            }
            mta_config h = c;
            h.pre_head_mix = 1, h.post_ch = 16;
            printf(" %d", tc_covers(&h, limit[dev]));
            h.H = h.post_ch = 32;
            printf(" %d\n", tc_covers(&h, limit[dev]));
        }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--coverage")) return print_coverage();
    for (int d = 64; d <= 128; d += 32) {
        d_now = d;
        const int dp = tc_dp(d), cq = 6, ck = 11;  // the 830M layer's pre-softmax convolution
        print_fa_kernels(dp);
        print_fa_conv_kernels(dp, cq, ck);
        print_fa_post_kernels(dp, cq, ck);  // the 830M layer's post-softmax convolution, 6 x 11 too
        print_head_kernels(d, 16);
        print_head_kernels(d, 32);
        print_fa_every_kernels(dp, cq, ck);
    }
    return 0;
}
