// attn_cases.c: the list (attn_cases.h). One case a line; a case in several modes is listed once.
// Appending keeps every earlier case's draws (the fixtures advance one generator case by case,
// the other modes seed each case by its place in its mode).
#include "attn_cases.h"
#include "model/mta_layers.h"

// tests/ref/gen_fixtures.py's FULL: every step, small kernels
#define FULL .pre_cq = 3, .pre_ck = 5, .mix = 1, .post_cq = 2, .post_ck = 3, .gn = 1, .gate = 1
// every step with one kernel size before and after the softmax (mta_layer_all_steps)
#define ALL(cq, ck, c_h) .pre_cq = cq, .pre_ck = ck, .post_cq = cq, .post_ck = ck, .ch = c_h, .all = 1
// the 830M layer (mta_layer_830m)
#define L830M .l830m = 1

const tc_case TC_CASES[] = {
    // ---- fixtures, in the order their generator draws them (plain; each step alone) ----
    {"plain_T7", TC_FIXTURE, .B = 1, .H = 2, .T = 7, .d = 4},
    {"plain_B3_H3_T37_d9", TC_FIXTURE, .B = 3, .H = 3, .T = 37, .d = 9},
    {"plain_T1", TC_FIXTURE, .B = 1, .H = 2, .T = 1, .d = 5},
    {"pre_6x11_T13", TC_FIXTURE, .B = 1, .H = 2, .T = 13, .d = 4, .pre_cq = 6, .pre_ck = 11},
    {"pre_3x5_B2_T37", TC_FIXTURE, .B = 2, .H = 2, .T = 37, .d = 4, .pre_cq = 3, .pre_ck = 5},
    {"pre_cq1_ck5", TC_FIXTURE, .B = 1, .H = 2, .T = 13, .d = 4, .pre_cq = 1, .pre_ck = 5},
    {"pre_cq4_ck1", TC_FIXTURE, .B = 1, .H = 2, .T = 13, .d = 4, .pre_cq = 4, .pre_ck = 1},
    {"pre_1x1", TC_FIXTURE, .B = 1, .H = 2, .T = 7, .d = 4, .pre_cq = 1, .pre_ck = 1},
    {"pre_T3_2x9", TC_FIXTURE, .B = 1, .H = 2, .T = 3, .d = 4, .pre_cq = 2, .pre_ck = 9},
    {"prehead_H4", TC_FIXTURE, .B = 1, .H = 4, .T = 13, .d = 4, .mix = 1},
    {"prehead_H1", TC_FIXTURE, .B = 1, .H = 1, .T = 7, .d = 5, .mix = 1},
    {"post_6x11_T13", TC_FIXTURE, .B = 1, .H = 2, .T = 13, .d = 4, .post_cq = 6, .post_ck = 11},
    {"post_2x3_T70", TC_FIXTURE, .B = 1, .H = 2, .T = 70, .d = 8, .post_cq = 2, .post_ck = 3},
    {"post_cq1_ck7", TC_FIXTURE, .B = 1, .H = 2, .T = 13, .d = 4, .post_cq = 1, .post_ck = 7},
    {"post_T3_3x9", TC_FIXTURE, .B = 1, .H = 2, .T = 3, .d = 4, .post_cq = 3, .post_ck = 9},
    {"posthead_ch4_H4", TC_FIXTURE, .B = 1, .H = 4, .T = 13, .d = 4, .ch = 4},
    {"posthead_ch2_H4", TC_FIXTURE, .B = 1, .H = 4, .T = 13, .d = 4, .ch = 2},
    {"posthead_ch1_H3", TC_FIXTURE, .B = 1, .H = 3, .T = 7, .d = 4, .ch = 1},
    {"gn_d5", TC_FIXTURE, .B = 1, .H = 2, .T = 13, .d = 5, .gn = 1},
    {"gn_depth_l3", TC_FIXTURE, .B = 1, .H = 2, .T = 13, .d = 4, .gn = 1, .depth_scale = 1, .layer_id = 3},
    {"gn_depth_l0", TC_FIXTURE, .B = 1, .H = 2, .T = 7, .d = 4, .gn = 1, .depth_scale = 1, .layer_id = 0},
    {"gn_layer5_depth_off", TC_FIXTURE, .B = 1, .H = 2, .T = 7, .d = 4, .gn = 1, .layer_id = 5},
    {"gate_d9", TC_FIXTURE, .B = 1, .H = 2, .T = 13, .d = 9, .gate = 1},
    // combinations
    {"pre_prehead_H4", TC_FIXTURE, .B = 1, .H = 4, .T = 13, .d = 4, .pre_cq = 3, .pre_ck = 5, .mix = 1},
    {"pre_post_B2_T37", TC_FIXTURE, .B = 2, .H = 2, .T = 37, .d = 4, .pre_cq = 6, .pre_ck = 11, .post_cq = 3,
     .post_ck = 5},
    {"post_posthead_ch2", TC_FIXTURE, .B = 1, .H = 4, .T = 13, .d = 4, .post_cq = 2, .post_ck = 3, .ch = 2},
    {"prehead_posthead_ch4", TC_FIXTURE, .B = 1, .H = 4, .T = 13, .d = 4, .mix = 1, .ch = 4},
    {"pre_gn", TC_FIXTURE, .B = 1, .H = 2, .T = 13, .d = 4, .pre_cq = 2, .pre_ck = 3, .gn = 1},
    {"post_gate_d5", TC_FIXTURE, .B = 1, .H = 2, .T = 13, .d = 5, .post_cq = 4, .post_ck = 7, .gate = 1},
    {"gn_gate_B2", TC_FIXTURE, .B = 2, .H = 2, .T = 13, .d = 4, .gn = 1, .gate = 1},
    // everything together
    {"all_H4_ch2_T37", TC_FIXTURE, .B = 1, .H = 4, .T = 37, .d = 4, .ch = 2, FULL},
    {"all_H1_T13", TC_FIXTURE, .B = 1, .H = 1, .T = 13, .d = 5, .ch = 1, FULL},
    {"all_B2_H4_ch4_T70_d8", TC_FIXTURE, .B = 2, .H = 4, .T = 70, .d = 8, .ch = 4, FULL},
    {"all_B3_H2_T7_d5", TC_FIXTURE, .B = 3, .H = 2, .T = 7, .d = 5, .ch = 2, FULL},
    {"all_T3_ck9", TC_FIXTURE, .B = 1, .H = 2, .T = 3, .d = 4, .pre_cq = 2, .pre_ck = 9, .mix = 1, .post_cq = 3,
     .post_ck = 9, .ch = 2, .gn = 1, .gate = 1},
    {"all_1x1", TC_FIXTURE, .B = 1, .H = 4, .T = 13, .d = 4, ALL(1, 1, 2)},
    {"all_T1", TC_FIXTURE, .B = 1, .H = 2, .T = 1, .d = 4, .ch = 2, FULL},
    {"all_depth_l3_T13", TC_FIXTURE, .B = 1, .H = 4, .T = 13, .d = 4, .ch = 4, FULL, .depth_scale = 1, .layer_id = 3},
    {"mta830m_like_T20", TC_FIXTURE, .B = 1, .H = 4, .T = 20, .d = 16, L830M},
    {"mta830m_like_depth_l3_T13", TC_FIXTURE, .B = 1, .H = 4, .T = 13, .d = 16, L830M, .depth_scale = 1, .layer_id = 3},
    // grouped-query attention and packed documents (last: the cases above keep their draws)
    {"gqa_H4_kv2_all_T13", TC_FIXTURE, .B = 1, .H = 4, .H_kv = 2, .T = 13, .d = 4, .ch = 2, FULL},
    {"gqa_H6_kv1_posthead_ch3", TC_FIXTURE, .B = 1, .H = 6, .H_kv = 1, .T = 11, .d = 5, .post_cq = 2, .post_ck = 3,
     .ch = 3},
    {"docs_B2_H4_all_T29", TC_FIXTURE, .B = 2, .H = 4, .T = 29, .d = 6, .ch = 2, FULL, .docs = {1, 5, 2, 9, 3, 13}},
    {"docs_gqa_H4_kv2_pre_post_T17", TC_FIXTURE, .B = 1, .H = 4, .H_kv = 2, .T = 17, .d = 5, .pre_cq = 3, .pre_ck = 5,
     .post_cq = 2, .post_ck = 3, .docs = {6, 1, 4}},
    // groups of 17-32 heads (the head kernels' two mixing k steps, fh_nq = 2): the 830M head-only
    // layer at 32 heads, and 24 heads mixed (a group padded to 32)
    {"heads_H32_mix_ch32_T13", TC_FIXTURE, .B = 1, .H = 32, .T = 13, .d = 4, .mix = 1, .ch = 32, .gn = 1, .gate = 1},
    {"heads_H24_mix_T7", TC_FIXTURE, .B = 1, .H = 24, .T = 7, .d = 4, .mix = 1},

    // ---- gradient checks: each step alone, every step, grouped-query attention ----
    {"grad_plain", TC_GRAD, .B = 2, .H = 2, .T = 6, .d = 4},
    {"grad_pre", TC_GRAD, .B = 1, .H = 2, .T = 7, .d = 4, .pre_cq = 3, .pre_ck = 3},
    {"grad_pre_wider_than_T", TC_GRAD, .B = 1, .H = 1, .T = 5, .d = 3, .pre_cq = 2, .pre_ck = 7},
    {"grad_mix", TC_GRAD, .B = 2, .H = 3, .T = 5, .d = 4, .mix = 1},
    {"grad_post", TC_GRAD, .B = 1, .H = 2, .T = 7, .d = 4, .post_cq = 2, .post_ck = 5},
    {"grad_hconv", TC_GRAD, .B = 1, .H = 4, .T = 5, .d = 3, .ch = 2},
    {"grad_gn_depth", TC_GRAD, .B = 1, .H = 2, .T = 5, .d = 6, .gn = 1, .depth_scale = 1, .layer_id = 3},
    {"grad_gate", TC_GRAD, .B = 1, .H = 2, .T = 5, .d = 6, .gate = 1},
    {"grad_all", TC_GRAD, .B = 2, .H = 4, .T = 6, .d = 5, ALL(2, 3, 4)},
    {"grad_gqa_all", TC_GRAD, .B = 2, .H = 4, .H_kv = 2, .T = 6, .d = 5, ALL(2, 3, 2)},  // dk, dv sum pairs
    {"grad_gqa_hconv", TC_GRAD, .B = 1, .H = 3, .H_kv = 1, .T = 5, .d = 4, .ch = 3},

    // ---- tu_combo's shapes: each step's kernel sizes (tu_combo switches the steps on and off) ----
    {"combo_H1", TC_COMBO, .B = 1, .H = 1, .T = 7, .d = 3, .pre_cq = 2, .pre_ck = 9, .post_cq = 3, .post_ck = 11,
     .ch = 1},  // c_k > T
    {"combo_B2_H3", TC_COMBO, .B = 2, .H = 3, .T = 23, .d = 5, .pre_cq = 1, .pre_ck = 3, .post_cq = 4, .post_ck = 5,
     .ch = 1},  // odd H with c_h = 1, pre c_q = 1
    {"combo_ch_H", TC_COMBO, .B = 1, .H = 3, .T = 29, .d = 4, .pre_cq = 3, .pre_ck = 5, .post_cq = 1, .post_ck = 3,
     .ch = 3},  // c_h = H (odd), post c_q = 1
    {"combo_wide_cq", TC_COMBO, .B = 2, .H = 4, .T = 31, .d = 6, .pre_cq = 6, .pre_ck = 11, .post_cq = 5, .post_ck = 7,
     .ch = 2},  // 1 < c_h < H, c_q wider than small strips
    {"combo_d17", TC_COMBO, .B = 1, .H = 6, .T = 37, .d = 17, .pre_cq = 5, .pre_ck = 3, .post_cq = 2, .post_ck = 13,
     .ch = 3},  // d past a vector with a tail
    {"combo_gqa2", TC_COMBO, .B = 2, .H = 4, .H_kv = 2, .T = 31, .d = 6, .pre_cq = 6, .pre_ck = 11, .post_cq = 5,
     .post_ck = 7, .ch = 2},  // 2 query heads per kv head, c_h = H/H_kv
    {"combo_gqa6", TC_COMBO, .B = 1, .H = 6, .H_kv = 1, .T = 37, .d = 5, .pre_cq = 3, .pre_ck = 5, .post_cq = 2,
     .post_ck = 3, .ch = 2},  // one kv head for 6 query heads
    {"combo_docs", TC_COMBO, .B = 2, .H = 4, .T = 31, .d = 6, .pre_cq = 3, .pre_ck = 5, .post_cq = 4, .post_ck = 7,
     .ch = 2, .docs = {1, 5, 2, 9, 3, 13, 1, 7, 4}},
    {"combo_docs_gqa", TC_COMBO, .B = 2, .H = 6, .H_kv = 2, .T = 29, .d = 5, .pre_cq = 5, .pre_ck = 3, .post_cq = 2,
     .post_ck = 5, .ch = 3, .docs = {1, 5, 2, 9, 3, 13, 1, 7, 4}, .docs_first = 4},

    // ---- tu_variant: hand-picked configs ----
    {"variant_plain", TC_VARIANT, .B = 2, .H = 4, .T = 29, .d = 6},
    {"variant_pre", TC_VARIANT, .B = 2, .H = 4, .T = 29, .d = 6, .pre_cq = 3, .pre_ck = 5},
    {"variant_post", TC_VARIANT, .B = 2, .H = 4, .T = 29, .d = 6, .post_cq = 4, .post_ck = 3},
    {"variant_mix", TC_VARIANT, .B = 2, .H = 4, .T = 29, .d = 6, .mix = 1},
    {"variant_hconv", TC_VARIANT, .B = 2, .H = 4, .T = 29, .d = 6, .ch = 2},  // units of 2 heads
    {"variant_gn_gate", TC_VARIANT, .B = 2, .H = 4, .T = 29, .d = 6, .gn = 1, .depth_scale = 1, .layer_id = 3,
     .gate = 1},
    {"variant_830m", TC_VARIANT, .B = 2, .H = 4, .T = 45, .d = 8, L830M},
    {"variant_hconv_in_mix", TC_VARIANT, .B = 1, .H = 4, .T = 23, .d = 5, ALL(2, 3, 2)},  // groups inside the unit
    {"variant_no_mix", TC_VARIANT, .B = 2, .H = 4, .T = 29, .d = 6, .pre_cq = 2, .pre_ck = 3, .post_cq = 3, .post_ck = 5,
     .ch = 2},
    {"variant_T_below_ck", TC_VARIANT, .B = 1, .H = 3, .T = 4, .d = 5, ALL(3, 9, 1)},
    {"variant_cq1", TC_VARIANT, .B = 2, .H = 2, .T = 19, .d = 4, ALL(1, 7, 2)},
    {"variant_all_dropout", TC_VARIANT, .B = 2, .H = 4, .T = 33, .d = 8, ALL(3, 5, 2), .dropout = 0.25f},
    {"variant_plain_dropout", TC_VARIANT, .B = 2, .H = 4, .T = 29, .d = 6, .dropout = 0.3f},
    {"variant_hconv_dropout", TC_VARIANT, .B = 2, .H = 4, .T = 29, .d = 6, .ch = 4, .dropout = 0.2f},
    {"variant_d20", TC_VARIANT, .B = 1, .H = 4, .T = 70, .d = 20, ALL(6, 11, 4)},  // vector tiles and a scalar tail
    {"variant_gqa_all_dropout", TC_VARIANT, .B = 2, .H = 4, .H_kv = 1, .T = 33, .d = 8, ALL(3, 5, 2), .dropout = 0.2f},

    // ---- identity kernels against plain attention (no norm, no gate) ----
    {"identity_small", TC_IDENTITY, .B = 1, .H = 2, .T = 9, .d = 8, .pre_cq = 3, .pre_ck = 5, .mix = 1, .post_cq = 3,
     .post_ck = 5, .ch = 2},
    {"identity_830m_kernels", TC_IDENTITY, .B = 2, .H = 4, .T = 37, .d = 16, .pre_cq = 6, .pre_ck = 11, .mix = 1,
     .post_cq = 6, .post_ck = 11, .ch = 4},
    {"identity_T_below_ck", TC_IDENTITY, .B = 1, .H = 3, .T = 4, .d = 5, .pre_cq = 2, .pre_ck = 9, .mix = 1,
     .post_cq = 2, .post_ck = 9, .ch = 1},
    {"identity_two_blocks", TC_IDENTITY, .B = 1, .H = 8, .T = 300, .d = 32, .pre_cq = 6, .pre_ck = 11, .mix = 1,
     .post_cq = 6, .post_ck = 11, .ch = 8},  // spans two causal matmul blocks

    // ---- the 830M layer over several default strips, T a multiple of none; long documents ----
    {"large_830m_H8_d64", TC_LARGE, .B = 1, .H = 8, .T = 333, .d = 64, L830M},
    {"large_830m_B2_d96_dropout", TC_LARGE, .B = 2, .H = 4, .T = 200, .d = 96, L830M, .dropout = 0.1f},
    {"large_docs_1_to_300_gqa", TC_LARGE, .B = 2, .H = 4, .H_kv = 2, .T = 333, .d = 16, L830M, .dropout = 0.1f,
     .docs = {1, 300, 5, 27, 2}},  // past the products' key blocks (256)

    // ---- issue 15's cases, where the fused dq and dk were wrong: head mixing, post conv and head
    // conv without the pre conv (the transposed mixing wrote dS1 over its own input) ----
    {"issue15_6x11_gn", TC_ISSUE15, .B = 1, .H = 2, .T = 64, .d = 8, .mix = 1, .post_cq = 6, .post_ck = 11, .ch = 1,
     .gn = 1, .depth_scale = 1, .layer_id = 4},
    {"issue15_H6_ch6_gn", TC_ISSUE15, .B = 2, .H = 6, .T = 50, .d = 32, .mix = 1, .post_cq = 4, .post_ck = 7, .ch = 6,
     .gn = 1, .depth_scale = 1, .layer_id = 4},
    {"issue15_2x3", TC_ISSUE15, .B = 1, .H = 2, .T = 40, .d = 16, .mix = 1, .post_cq = 2, .post_ck = 3, .ch = 1,
     .layer_id = 4},
    {"issue15_2x3_gn", TC_ISSUE15, .B = 1, .H = 2, .T = 40, .d = 16, .mix = 1, .post_cq = 2, .post_ck = 3, .ch = 1,
     .gn = 1, .depth_scale = 1, .layer_id = 4},
    {"issue15_2x3_gn_gate", TC_ISSUE15, .B = 1, .H = 2, .T = 40, .d = 16, .mix = 1, .post_cq = 2, .post_ck = 3,
     .ch = 1, .gn = 1, .depth_scale = 1, .layer_id = 4, .gate = 1},
    {"issue15_2x3_gate", TC_ISSUE15, .B = 1, .H = 2, .T = 40, .d = 16, .mix = 1, .post_cq = 2, .post_ck = 3, .ch = 1,
     .layer_id = 4, .gate = 1},

    // ---- the bf16 tensor-core path beyond tu_combo's shapes (test_bf16_tensor_cores) ----
    // d up to 128 (padded to 16's), grouped-query attention, documents of 1 to 300 positions
    {"bf16_d64", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 64, .gn = 1, .depth_scale = 1, .layer_id = 3,
     .gate = 1, .dropout = 0.1f, .seed = 4000},
    {"bf16_d100_docs", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 100, .gn = 1, .depth_scale = 1,
     .layer_id = 3, .gate = 1, .dropout = 0.1f, .docs = {1, 300, 5, 27, 2}, .docs_first = 1, .seed = 4001},
    {"bf16_d128_docs", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 128, .gn = 1, .depth_scale = 1,
     .layer_id = 3, .gate = 1, .dropout = 0.1f, .docs = {1, 300, 5, 27, 2}, .docs_first = 2, .seed = 4002,
     .sweeps = TC_QUICK | TC_SANITIZED},
    // the convolution past one tile: documents starting 2 rows and 1 row before a tile's end (at 62
    // and 127), so that the next tile's halo rows, and a kernel wider than the rows left, cross a
    // document start; kernels 6x11 (the paper's), 2x9 and 17x17 (halos of 16 and 32)
    {"bf16_tile_end_6x11", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 64, .pre_cq = 6, .pre_ck = 11, .gn = 1,
     .gate = 1, .docs = {62, 4, 61, 3, 70}, .seed = 5000},
    {"bf16_tile_end_6x11_dropout", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 64, .pre_cq = 6, .pre_ck = 11,
     .gn = 1, .gate = 1, .dropout = 0.25f, .docs = {62, 4, 61, 3, 70}, .seed = 5001, .sweeps = TC_SANITIZED},
    {"bf16_tile_end_2x9", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 100, .pre_cq = 2, .pre_ck = 9,
     .docs = {62, 4, 61, 3, 70}, .seed = 5002},
    {"bf16_tile_end_2x9_dropout", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 100, .pre_cq = 2, .pre_ck = 9,
     .dropout = 0.25f, .docs = {62, 4, 61, 3, 70}, .seed = 5003},
    {"bf16_tile_end_17x17", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 128, .pre_cq = 17, .pre_ck = 17,
     .gn = 1, .gate = 1, .docs = {62, 4, 61, 3, 70}, .seed = 5004, .sweeps = TC_QUICK},
    {"bf16_tile_end_17x17_dropout", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 128, .pre_cq = 17,
     .pre_ck = 17, .gn = 1, .gate = 1, .dropout = 0.25f, .docs = {62, 4, 61, 3, 70}, .seed = 5005, .sweeps = TC_QUICK},
    // the post-softmax convolution across the same document starts (P's halo rows above a tile and
    // dP1's below it cross them), with norm, gate and dropout
    {"bf16_post_6x11", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 64, .post_cq = 6, .post_ck = 11, .gn = 1,
     .gate = 1, .docs = {62, 4, 61, 3, 70}, .seed = 5100},
    {"bf16_post_6x11_dropout", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 64, .post_cq = 6, .post_ck = 11,
     .gn = 1, .gate = 1, .dropout = 0.25f, .docs = {62, 4, 61, 3, 70}, .seed = 5101, .sweeps = TC_SANITIZED},
    {"bf16_post_2x9_dropout", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 100, .post_cq = 2, .post_ck = 9,
     .dropout = 0.25f, .docs = {62, 4, 61, 3, 70}, .seed = 5102},
    // d <= 16 with a one-row kernel (c_q' = 1 reads P's first rows): dQ's kernel-gradient scratch
    // must not reach them
    {"bf16_post_1x3_d16", TC_BF16, .B = 1, .H = 2, .T = 100, .d = 16, .post_cq = 1, .post_ck = 3, .seed = 5104,
     .sweeps = TC_QUICK},
    // query-only kernels (c_k = 1): the kernel gradient's diagonal sums need only the first half of
    // fcb_dw's columns
    {"bf16_pre_4x1", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 100, .d = 32, .pre_cq = 4, .pre_ck = 1,
     .docs = {62, 4, 61, 3, 70}, .seed = 5006, .sweeps = TC_QUICK},
    {"bf16_post_3x1", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 100, .d = 32, .post_cq = 3, .post_ck = 1,
     .docs = {62, 4, 61, 3, 70}, .seed = 5106, .sweeps = TC_QUICK},
    {"bf16_post_17x17", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 200, .d = 128, .post_cq = 17, .post_ck = 17,
     .gn = 1, .gate = 1, .dropout = 0.25f, .docs = {62, 4, 61, 3, 70}, .seed = 5103, .sweeps = TC_QUICK},
    // head steps of other group sizes: 12 heads mixed at d = 128, 16 mixed alone at d = 96 and 8 at
    // d = 100 (documents, norm and gate). On clusters (k_fa_head_cl_forward, k_fa_head_cl_dkdv; 8
    // heads a block) 9-16 heads take 2 blocks: the 830M layer's 16 heads (documents, norm and gate),
    // 12 (4 padding heads), 10 mixed alone (O rescaled by alpha per key tile); 8 take 1
    {"bf16_heads_H12_d128", TC_BF16, .B = 1, .H = 12, .H_kv = 4, .T = 70, .d = 128, .mix = 1, .ch = 4,
     .dropout = 0.1f, .seed = 6000, .sweeps = TC_QUICK},
    {"bf16_heads_H16_d128_docs", TC_BF16, .B = 1, .H = 16, .H_kv = 4, .T = 70, .d = 128, .mix = 1, .ch = 16, .gn = 1,
     .gate = 1, .dropout = 0.1f, .docs = {21, 3, 30, 16}, .seed = 6007, .sweeps = TC_QUICK},
    {"bf16_heads_H10_mix_d64", TC_BF16, .B = 2, .H = 10, .H_kv = 5, .T = 70, .d = 64, .mix = 1, .seed = 6008,
     .sweeps = TC_QUICK | TC_SANITIZED},
    {"bf16_heads_H16_mix_d96_docs", TC_BF16, .B = 1, .H = 16, .H_kv = 4, .T = 80, .d = 96, .mix = 1, .gn = 1,
     .gate = 1, .dropout = 0.1f, .docs = {21, 3, 30, 16}, .seed = 6009, .sweeps = TC_QUICK},
    // an odd group: 13 heads, the last pair of rank 1 half padding; one kv head, d' padded from 40
    {"bf16_heads_H13_kv1_d40", TC_BF16, .B = 1, .H = 13, .H_kv = 1, .T = 45, .d = 40, .mix = 1, .dropout = 0.1f,
     .seed = 6010, .sweeps = TC_QUICK},
    {"bf16_heads_H8_d100_docs", TC_BF16, .B = 2, .H = 8, .H_kv = 2, .T = 150, .d = 100, .mix = 1, .ch = 2, .gn = 1,
     .gate = 1, .dropout = 0.1f, .docs = {1, 300, 5, 27, 2}, .docs_first = 1, .seed = 6001,
     .sweeps = TC_QUICK | TC_SANITIZED},
    // groups of 17 to 32 heads (the head kernels' <2> instances: the mixings' K in two k steps, tiles
    // of 16 keys): 32 heads mixed at d = 64 (grouped-query attention) and d = 100 (documents, norm
    // and gate), 32 in one head-conv group without mixing, 24 mixed (the padded group's heads 24-31
    // zero), and 32 mixed alone (O rescaled by the online softmax's alpha per key tile) at d = 128
    // across document starts inside key tiles, with grouped-query attention
    {"bf16_heads_H32_d64", TC_BF16, .B = 1, .H = 32, .H_kv = 8, .T = 70, .d = 64, .mix = 1, .ch = 4, .dropout = 0.1f,
     .seed = 6002, .sweeps = TC_QUICK},
    {"bf16_heads_H32_d100_docs", TC_BF16, .B = 2, .H = 32, .H_kv = 4, .T = 90, .d = 100, .mix = 1, .ch = 8, .gn = 1,
     .gate = 1, .dropout = 0.1f, .docs = {1, 300, 5, 27, 2}, .docs_first = 1, .seed = 6003, .sweeps = TC_QUICK},
    {"bf16_heads_ch32_d64", TC_BF16, .B = 1, .H = 32, .H_kv = 16, .T = 70, .d = 64, .ch = 32, .dropout = 0.1f,
     .seed = 6004},
    {"bf16_heads_H24_d128", TC_BF16, .B = 1, .H = 24, .H_kv = 6, .T = 70, .d = 128, .mix = 1, .ch = 3,
     .dropout = 0.1f, .seed = 6005, .sweeps = TC_QUICK},
    {"bf16_heads_H32_mix_d128_docs", TC_BF16, .B = 1, .H = 32, .H_kv = 8, .T = 70, .d = 128, .mix = 1,
     .dropout = 0.1f, .docs = {21, 3, 30, 16}, .seed = 6006, .sweeps = TC_QUICK},
    // every step at once (the every-step kernels, k_fa_every_*: a convolution with another step):
    // the 830M layer's 16 heads at d = 64 and, across document starts, d = 128; 8 heads mixed and
    // convolved in groups of 4 with both convolutions, grouped-query attention and dropout; the
    // pre-softmax convolution with mixing only; both convolutions without head steps; the
    // post-softmax one with the head convolution only
    {"bf16_every_830m_H16_d64", TC_BF16, .B = 1, .H = 16, .T = 40, .d = 64, L830M, .seed = 7000, .sweeps = TC_QUICK},
    {"bf16_every_830m_H16_d128_docs", TC_BF16, .B = 1, .H = 16, .T = 50, .d = 128, L830M, .docs = {14, 3, 20, 13},
     .seed = 7001},
    {"bf16_every_H8_gqa_dropout", TC_BF16, .B = 1, .H = 8, .H_kv = 2, .T = 60, .d = 100, .pre_cq = 6, .pre_ck = 11,
     .mix = 1, .post_cq = 6, .post_ck = 11, .ch = 4, .dropout = 0.25f, .seed = 7002, .sweeps = TC_QUICK},
    {"bf16_every_pre_mix", TC_BF16, .B = 2, .H = 4, .H_kv = 2, .T = 70, .d = 64, .pre_cq = 6, .pre_ck = 11, .mix = 1,
     .gn = 1, .gate = 1, .docs = {30, 4, 36}, .seed = 7003},
    {"bf16_every_two_convs", TC_BF16, .B = 2, .H = 2, .T = 70, .d = 64, .pre_cq = 2, .pre_ck = 9, .post_cq = 6,
     .post_ck = 11, .dropout = 0.1f, .docs = {30, 4, 36}, .seed = 7004},
    {"bf16_every_post_ch", TC_BF16, .B = 1, .H = 4, .T = 60, .d = 64, .post_cq = 4, .post_ck = 7, .ch = 2, .gn = 1,
     .seed = 7005},
    // the every-step kernels' edges: T shorter than a tile with one-column kernels; d = 8 with
    // one-column kernels of 15 and 16 rows over one-row documents at tile starts; one kv head for
    // 16 heads convolved as one group, documents starting one row before and at tile edges; the
    // pre-softmax kernel at its limit (16 x 17) with T = 17
    {"bf16_every_T3", TC_BF16, .B = 4, .H = 2, .T = 3, .d = 16, .pre_cq = 2, .pre_ck = 3, .post_cq = 3, .post_ck = 1,
     .seed = 7006},
    {"bf16_every_d8_rows", TC_BF16, .B = 1, .H = 3, .T = 47, .d = 8, .pre_cq = 15, .pre_ck = 1, .post_cq = 16,
     .post_ck = 1, .gate = 1, .docs = {1, 1, 14, 1, 15, 16}, .seed = 7007},
    {"bf16_every_kv1_ch16", TC_BF16, .B = 2, .H = 16, .H_kv = 1, .T = 48, .d = 16, .pre_cq = 6, .pre_ck = 11, .mix = 1,
     .post_cq = 6, .post_ck = 11, .ch = 16, .dropout = 0.2f, .docs = {15, 1, 16, 1, 31, 2}, .seed = 7008},
    {"bf16_every_pre16x17", TC_BF16, .B = 2, .H = 4, .T = 17, .d = 8, .pre_cq = 16, .pre_ck = 17, .mix = 1, .ch = 2,
     .docs = {3, 9, 5}, .seed = 7009},

    // ---- what bench_cuda times by default: the 830M layer at B = 1, H = 8, d = 64 ----
    {"perf_830m_T2048", TC_PERF, .B = 1, .H = 8, .T = 2048, .d = 64, L830M},
    {"perf_830m_T4096", TC_PERF, .B = 1, .H = 8, .T = 4096, .d = 64, L830M},
};
const int TC_NCASES = (int)(sizeof TC_CASES / sizeof TC_CASES[0]);

const tc_case *tc_nth(int mode, int k) {
    for (int i = 0; i < TC_NCASES; i++)
        if (TC_CASES[i].modes & mode && k-- == 0) return &TC_CASES[i];
    return NULL;
}

int tc_count(int mode) {
    int n = 0;
    while (tc_nth(mode, n)) n++;
    return n;
}

mta_config tc_config(const tc_case *t) {
    mta_config c = mta_config_default(t->B, t->H, t->T, t->d);
    if (t->H_kv) c.H_kv = t->H_kv;
    c.pre_cq = t->pre_cq, c.pre_ck = t->pre_ck, c.pre_head_mix = t->mix;
    c.post_cq = t->post_cq, c.post_ck = t->post_ck, c.post_ch = t->ch;
    c.group_norm = t->gn, c.depth_scale = t->depth_scale, c.layer_id = t->layer_id, c.gate = t->gate;
    if (t->all) mta_layer_all_steps(&c, t->pre_cq, t->pre_ck, t->ch, 1);
    if (t->l830m) mta_layer_830m(&c, t->H, 1);
    c.dropout = t->dropout;
    return c;
}

int tc_docs(const tc_case *t, const int **lens) {
    int n = 0;
    while (n < TC_MAX_DOCS && t->docs[n]) n++;
    *lens = t->docs;
    return n;
}
