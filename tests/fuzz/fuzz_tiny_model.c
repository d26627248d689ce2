// fuzz_tiny_model.c: see fuzz_tiny_model.h.
#include "fuzz_tiny_model.h"

#include <string.h>

model_config fuzz_tiny_model_config(int mta) {
    model_config c;
    memset(&c, 0, sizeof c);
    c.dim = 8, c.n_layers = 2, c.n_heads = 2, c.vocab_size = 11, c.hidden_dim = 16;
    c.rope_theta = 1e4f, c.norm_eps = 1e-5f;
    c.tie_embeddings = 1;
    if (mta) {
        c.mta = 1, c.qk_layer[1] = 1;
        c.attn.pre_cq = 2, c.attn.pre_ck = 3, c.attn.post_cq = 2, c.attn.post_ck = 3;
        c.attn.pre_head_mix = 1, c.attn.post_ch = 2, c.attn.group_norm = 1, c.attn.depth_scale = 1, c.attn.gate = 1;
    }
    return c;
}
