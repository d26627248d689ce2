// presets.c: named model configurations (docs/model.md): the paper's toy-task and 830M/300M
// layouts, and small language models sized for a 2-core CPU.
#include "model/model.h"
#include "model/mta_layers.h"

#include <stdio.h>
#include <string.h>

void model_config_mta_pattern(model_config *c, int norm_gate) {
    c->mta = 1;
    for (int l = 2; l < c->n_layers; l += 4) c->qk_layer[l] = 1;
    mta_layer_830m(&c->attn, c->n_heads, norm_gate);
}

static model_config base(int dim, int layers, int heads, int vocab, int hidden) {
    model_config c;
    memset(&c, 0, sizeof c);
    c.dim = dim, c.n_layers = layers, c.n_heads = heads, c.vocab_size = vocab;
    c.hidden_dim = hidden ? hidden : model_default_hidden(dim);
    c.rope_theta = 1e5f, c.norm_eps = 1e-5f;
    c.tie_embeddings = 1;
    return c;
}

static const char *const names[] = {"toy", "toy-baseline", "lm1m", "lm1m-baseline", "lm10m", "lm10m-baseline",
                                    "300m", "300m-baseline", "830m", "830m-baseline"};

int model_preset(const char *name, model_config *c) {
    const int BYTE_VOCAB = 259;  // 256 bytes + BOS, EOS, PAD
    const char *dash = strstr(name, "-baseline");
    int baseline = dash && !strcmp(dash, "-baseline");
    size_t stem = baseline ? (size_t)(dash - name) : strlen(name);
    if (stem == 3 && !strncmp(name, "toy", 3)) {
        // Paper Table 1 setting: pre-softmax Q-K conv only, c_q=2, c_k=9, in all 4 layers.
        *c = base(256, 4, 2, 32, 768);
        c->attn_dropout = 0.1f;
        if (!baseline) {
            c->mta = 1;
            for (int l = 0; l < 4; l++) c->qk_layer[l] = 1;
            mta_layer_toy(&c->attn);
        }
    } else if (stem == 4 && !strncmp(name, "lm1m", 4)) {
        *c = base(128, 4, 4, BYTE_VOCAB, 384);
        if (!baseline) model_config_mta_pattern(c, 1);
    } else if (stem == 5 && !strncmp(name, "lm10m", 5)) {
        *c = base(320, 8, 8, BYTE_VOCAB, 864);
        if (!baseline) model_config_mta_pattern(c, 1);
    } else if (stem == 4 && !strncmp(name, "300m", 4)) {
        *c = base(1024, 20, 16, 128256, 0);
        if (!baseline) model_config_mta_pattern(c, 1);
    } else if (stem == 4 && !strncmp(name, "830m", 4)) {
        *c = base(1536, 24, 16, 128256, 0);
        if (!baseline) model_config_mta_pattern(c, 1);
    } else {
        return -1;
    }
    return 0;
}

const char *model_preset_names(void) {
    static char buf[256];
    buf[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? ", " : "", names[i]);
    return buf;
}
