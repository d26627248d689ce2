// mta_layers.h: the MTA steps of the paper's layers, written out once: the model presets,
// `mtac bench attn`, bench_cuda and the tests switch them on with these. Each sets the steps of
// an mta_config whose sizes are already set. Header-only, so that bench_cuda, which links
// libmtac alone, can use it.
#ifndef MTAC_MTA_LAYERS_H
#define MTAC_MTA_LAYERS_H

#include "mta.h"

// Every step: pre- and post-softmax key-query convolutions of cq x ck, head mixing, the head
// convolution over groups of ch heads, and the group norm and gate when norm_gate.
static inline void mta_layer_all_steps(mta_config *c, int cq, int ck, int ch, int norm_gate) {
    c->pre_cq = cq, c->pre_ck = ck, c->post_cq = cq, c->post_ck = ck;
    c->pre_head_mix = 1, c->post_ch = ch, c->group_norm = norm_gate, c->gate = norm_gate;
}

// The 830M (and 300M) layer of the paper: every step, c_q = 6, c_k = 11, the head convolution
// over all H heads.
static inline void mta_layer_830m(mta_config *c, int H, int norm_gate) { mta_layer_all_steps(c, 6, 11, H, norm_gate); }

// The 830M layer's steps without the key-query convolutions: its layers other than every fourth
// from layer 2 (model_config_mta_pattern), 18 of its 24.
static inline void mta_layer_830m_heads(mta_config *c, int H, int norm_gate) { mta_layer_all_steps(c, 0, 0, H, norm_gate); }

// The toy task's layer (paper Table 1): the pre-softmax convolution alone, c_q = 2, c_k = 9.
static inline void mta_layer_toy(mta_config *c) { c->pre_cq = 2, c->pre_ck = 9; }

#endif
