// fuzz_tiny_model.c: see fuzz_tiny_model.h.
#include "fuzz_tiny_model.h"

#include <string.h>

model_config fuzz_tiny_model_config(int mta) {
    model_config c;
    memset(&c, 0, sizeof c);
    c.dim = 8, c.n_layers = 2, c.n_heads = 2, c.vocab_size = 11, c.hidden_dim = 16;
    c.rope_theta = 1e4f, c.norm_eps = 1e-5f;
    if (mta) {
        c.mta = 1, c.qk_layer[1] = 1;
        c.pre_cq = 2, c.pre_ck = 3, c.post_cq = 2, c.post_ck = 3;
        c.pre_head_mix = 1, c.post_ch = 2, c.group_norm = 1, c.depth_scale = 1, c.gate = 1;
    }
    return c;
}
