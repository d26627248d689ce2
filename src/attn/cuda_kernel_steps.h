// cuda_kernel_steps.h: which steps of docs/spec.md section 2.1 each kernel of the CUDA backend
// computes (its forward or its backward), and on which path, declared once as data beside the
// kernels (cuda_kernels.cuh, mta_cuda.cu, mta_cuda_tc.cuh). `mtac attn --plan` prints the
// kernels a call launched (mta_ctx_record_launches) with this table. A launched kernel without a
// row makes --plan fail, and tests/test_attn_plan.sh checks that every MTA_LAUNCH of the sources
// has a row and every row a launch: add the row with the kernel.
#ifndef MTAC_ATTN_CUDA_KERNEL_STEPS_H
#define MTAC_ATTN_CUDA_KERNEL_STEPS_H

#include "mta.h"

#include <string.h>

#define MTA_STEP(s) (1u << (s))

// The spec's steps 1-9 in a word each ([0] unused).
static const char *const mta_step_names[10] = {"",       "scores",  "pre-conv",  "head-mix",   "softmax",
                                               "post-conv", "head-conv", "output", "group-norm", "gate"};

// The steps cfg switches on (MTA_STEP bits): 1, 4 and 7 always.
static inline unsigned mta_steps_on(const mta_config *c) {
    return MTA_STEP(1) | MTA_STEP(4) | MTA_STEP(7) | (c->pre_cq > 0 ? MTA_STEP(2) : 0) |
           (c->pre_head_mix ? MTA_STEP(3) : 0) | (c->post_cq > 0 ? MTA_STEP(5) : 0) | (c->post_ch > 0 ? MTA_STEP(6) : 0) |
           (c->group_norm ? MTA_STEP(8) : 0) | (c->gate ? MTA_STEP(9) : 0);
}

// The path a kernel belongs to: the float32 one, the tensor-core one (precision MTA_BF16 where it
// covers the config), or both (the float32 helpers the tensor-core path launches too).
typedef enum { MTA_PATH_FP32, MTA_PATH_TC, MTA_PATH_BOTH } mta_kernel_path;

typedef struct {
    const char *kernel;  // the name MTA_LAUNCH notes (the cuBLAS products: the routine's)
    unsigned steps;      // MTA_STEP(s) of each step whose forward or backward it computes (0: none)
    mta_kernel_path path;
    const char *what;
} mta_kernel_steps;

#define S1 MTA_STEP(1)
#define S2 MTA_STEP(2)
#define S3 MTA_STEP(3)
#define S4 MTA_STEP(4)
#define S5 MTA_STEP(5)
#define S6 MTA_STEP(6)
#define S7 MTA_STEP(7)
#define S8 MTA_STEP(8)
#define S9 MTA_STEP(9)
static const mta_kernel_steps mta_kernel_table[] = {
    // the float32 path (mta_cuda.cu, cuda_kernels.cuh)
    {"cublasSgemmStridedBatched", S1 | S7, MTA_PATH_FP32, "q k^T, P v and their gradients (cuBLAS)"},
    {"k_mats", S3 | S6, MTA_PATH_FP32, "the mixing matrices on the device"},
    {"k_conv", S2 | S5, MTA_PATH_FP32, "a key-query convolution of a map"},
    {"k_conv_t", S1 | S2 | S5, MTA_PATH_FP32, "a transposed convolution (without one: dZ's masked copy)"},
    {"k_conv_wgrad", S2 | S5, MTA_PATH_FP32, "a convolution's kernel gradient"},
    {"k_mix", S3 | S6, MTA_PATH_FP32, "head mixing of a map (or its transpose)"},
    {"k_pair_grad", S3 | S6, MTA_PATH_FP32, "a mixing matrix's gradient"},
    {"k_softmax", S4, MTA_PATH_FP32, "the masked softmax of map rows"},
    {"k_softmax_t", S4, MTA_PATH_FP32, "the softmax backward"},
    {"k_drop", S7, MTA_PATH_FP32, "dropout and the causal mask of the map that multiplies v"},
    // both paths
    {"k_doc_starts", 0, MTA_PATH_BOTH, "packed documents' starts"},
    {"k_normgate", S8 | S9, MTA_PATH_BOTH, "group norm and gate"},
    {"k_normgate_t", S8 | S9, MTA_PATH_BOTH, "group norm and gate backward (tensor cores: and k_tc_prep's dO, D)"},
    {"k_sum_grad", S2 | S3 | S5 | S6 | S8 | S9, MTA_PATH_BOTH, "the parameters' gradients from per-head partials"},
    {"k_bf16_widen", 0, MTA_PATH_BOTH, "bfloat16 tensors (mta_config.dtype) widened to float32"},
    {"k_bf16_narrow", 0, MTA_PATH_BOTH, "out, dq, dk, dv rounded once to bfloat16 (mta_config.dtype)"},
    // the tensor-core path (mta_cuda_tc.cuh)
    {"k_tc_round", S1 | S7, MTA_PATH_TC, "q, k, v rounded to bf16"},
    {"k_tc_prep", S4 | S7, MTA_PATH_TC, "dO rounded to bf16; D = rowsum(dO O) where O is P v"},
    {"k_fa_forward", S1 | S4 | S7, MTA_PATH_TC, "fused attention forward (mma.sync)"},
    {"k_fa_dkdv", S1 | S4 | S7, MTA_PATH_TC, "fused attention dK, dV (mma.sync)"},
    {"k_fa_dq", S1 | S4 | S7, MTA_PATH_TC, "fused attention dQ (mma.sync)"},
    {"k_fa_conv_forward", S1 | S2 | S4 | S7, MTA_PATH_TC, "fused forward, the pre-softmax convolution as band MMAs"},
    {"k_fa_conv_dkdv", S1 | S2 | S4 | S7, MTA_PATH_TC, "mma.sync dK, dV with the pre-softmax convolution (band MMAs)"},
    {"k_fa_conv_dq", S1 | S2 | S4 | S7, MTA_PATH_TC, "mma.sync dQ and the convolution's kernel partials (band MMAs)"},
    {"k_tc_conv_wgrad", S2 | S5, MTA_PATH_TC, "a convolution's kernel gradient from its partials"},
    {"k_fa_post_forward", S1 | S4 | S5 | S7, MTA_PATH_TC, "forward's second pass, the post-softmax convolution as band MMAs"},
    {"k_fa_post_dq", S1 | S4 | S5 | S7, MTA_PATH_TC, "dQ, D and the kernel partials with the post-softmax convolution"},
    {"k_fa_post_dkdv", S1 | S4 | S5 | S7, MTA_PATH_TC, "dK, dV with the post-softmax convolution (mma.sync)"},
    {"k_fa_head_forward", S1 | S3 | S4 | S6 | S7, MTA_PATH_TC, "mma.sync forward of a group of <= 32 heads (head steps)"},
    {"k_fa_head_cl_forward", S1 | S3 | S4 | S6 | S7, MTA_PATH_TC,
     "mma.sync forward of a group of <= 16 heads on a thread block cluster (head steps, sm_90)"},
    {"k_fa_head_dq", S1 | S3 | S4 | S6 | S7, MTA_PATH_TC, "mma.sync dQ, D and kernel partials of <= 32 heads"},
    {"k_fa_head_cl_dq", S1 | S3 | S4 | S6 | S7, MTA_PATH_TC,
     "mma.sync dQ, D and kernel partials of <= 16 heads on a thread block cluster (head steps, sm_90)"},
    {"k_fa_head_dkdv", S1 | S3 | S4 | S6 | S7, MTA_PATH_TC, "mma.sync per-query-head dK, dV of <= 32 heads"},
    {"k_fa_head_cl_dkdv", S1 | S3 | S4 | S6 | S7, MTA_PATH_TC,
     "mma.sync dK, dV of <= 16 heads on a cluster (head steps, sm_90), per kv head where a block has all"},
    {"k_fa_every_stats", S1 | S2 | S3 | S4 | S7, MTA_PATH_TC, "every-step forward's log-sum-exp (band MMAs, head MMAs)"},
    {"k_fa_every_forward", S1 | S2 | S3 | S4 | S5 | S6 | S7, MTA_PATH_TC,
     "every-step forward: both convolutions and both head steps as MMAs"},
    {"k_fa_every_D", S1 | S2 | S3 | S4 | S5 | S6 | S7, MTA_PATH_TC, "every-step backward's D = rowsum(P dP)"},
    {"k_fa_every_dq", S1 | S2 | S3 | S4 | S5 | S6 | S7, MTA_PATH_TC,
     "every-step dQ and the four kernels' gradient partials (band and head MMAs)"},
    {"k_fa_every_dkdv", S1 | S2 | S3 | S4 | S5 | S6 | S7, MTA_PATH_TC, "every-step per-query-head dK, dV"},
    {"k_fa_every_dqkv", S1 | S2 | S3 | S4 | S5 | S6 | S7, MTA_PATH_TC,
     "every-step dQ, partials and per-query-head dK, dV by atomics (mta_set_deterministic off)"},
    {"k_tc_head_kv", S1 | S7, MTA_PATH_TC, "dK, dV summed over each kv head's query heads"},
    {"k_tc_head_wgrad", S3 | S6, MTA_PATH_TC, "the head kernels' gradients from their partials"},
};
#undef S1
#undef S2
#undef S3
#undef S4
#undef S5
#undef S6
#undef S7
#undef S8
#undef S9

// The row of kernel name, or NULL when the table has none.
static inline const mta_kernel_steps *mta_kernel_steps_of(const char *name) {
    for (size_t i = 0; i < sizeof mta_kernel_table / sizeof mta_kernel_table[0]; i++)
        if (!strcmp(mta_kernel_table[i].kernel, name)) return &mta_kernel_table[i];
    return NULL;
}

#endif
