// model.h: the Llama-style MTA transformer (docs/model.md, docs/spec.md section 3).
// Forward and backward over token batches (B,T); parameters in one allocation with named
// pointers; weights load and save as safetensors with the documented names.
#ifndef MTAC_MODEL_H
#define MTAC_MODEL_H

#include "mta.h"

#include <stddef.h>
#include <stdint.h>

enum { MODEL_MAX_LAYERS = 256 };

typedef struct {
    int dim, n_layers, n_heads, vocab_size, hidden_dim;
    // Key/value heads (grouped-query attention): wk, wv are (n_kv_heads*head_dim, dim) and query
    // head h reads kv head h/(n_heads/n_kv_heads). 0 means n_heads; must divide n_heads.
    int n_kv_heads;
    // Packed documents: 1 = the EOS token (TOK_EOS, util/tokens.h) ends a document; each
    // position attends and convolves within its own document only, and RoPE counts positions from
    // the document's start, so a row of packed documents computes what each document would alone.
    int doc_mask;
    float rope_theta, norm_eps, attn_dropout;
    // RoPE frequency scaling of Llama 3.1 (rope_type "llama3"); rope_factor 0 = none. Pairs whose
    // wavelength exceeds rope_orig_ctx / rope_low_freq turn factor times slower, those below
    // rope_orig_ctx / rope_high_freq keep theirs, and those between are interpolated.
    float rope_factor, rope_low_freq, rope_high_freq;
    int rope_orig_ctx;
    // 1: the output projection is tok_embeddings (tied); 0: its own tensor "output.weight" (V, D).
    int tie_embeddings;
    // MTA; mta = 0 is the baseline Transformer
    int mta;
    unsigned char qk_layer[MODEL_MAX_LAYERS];  // 1 where the key-query convolutions apply
    // The MTA steps of every layer: pre_cq, pre_ck, post_cq, post_ck (the key-query convolutions,
    // in the qk_layer layers only), pre_head_mix, post_ch, group_norm, depth_scale, gate. Its
    // other members (sizes, layer_id, dropout, backend, ...) are unused: model_layer_mta_config
    // sets them per layer.
    mta_config attn;
} model_config;

// The key/value heads of c: n_kv_heads, or n_heads when 0.
static inline int model_kv_heads(const model_config *c) { return c->n_kv_heads ? c->n_kv_heads : c->n_heads; }

// Default SwiGLU width: 256 * ceil(int(8*dim/3) / 256).
int model_default_hidden(int dim);

// Checks a config (sizes, head split, kernel shapes); message in msg. 0 on success.
int model_config_check(const model_config *c, char *msg, size_t n);

// Reads a config JSON (docs/model.md); unknown keys are errors. 0 on success.
int model_config_from_json(const char *json, model_config *c, char *msg, size_t n);
int model_config_load(const char *path, model_config *c, char *msg, size_t n);
// Writes the config as JSON (malloc'd string; caller frees).
char *model_config_to_json(const model_config *c);

// Named presets (toy, toy-baseline, lm1m, lm10m, 300m, 830m, each also "-baseline"): 0, or -1
// for an unknown name. model_preset_names lists them.
int model_preset(const char *name, model_config *c);
const char *model_preset_names(void);

// The paper's 830M MTA pattern on c (the presets use it): Q-K convolutions c_q = 6, c_k = 11
// before and after the softmax in layers 2, 6, 10, ...; head mixing and head convolution over all
// heads in every layer; group norm and gate in every layer when norm_gate.
void model_config_mta_pattern(model_config *c, int norm_gate);

// The MTA operator config of layer l at batch B and length T.
mta_config model_layer_mta_config(const model_config *c, int l, int B, int T);

// One named parameter tensor inside the parameter block.
typedef struct {
    char name[80];
    int ndim;
    int64_t shape[3];
    size_t offset, numel;
} model_tensor;

typedef struct {
    float *attn_norm, *wq, *wk, *wv, *wo;
    float *mta_w[MTA_N_PARAMS];  // the MTA parameters by mta.h's index (MTA_W_PRE ...); NULL if absent
    float *ffn_norm, *w1, *w2, *w3;
} layer_weights;

typedef struct {
    float *tok_embeddings;   // (V, D); also the output projection when tied
    layer_weights layer[MODEL_MAX_LAYERS];
    float *norm;             // (D)
    float *output;           // (V, D) the untied output projection; NULL when tied
} model_weights;

// The output projection of w: its own tensor when untied, else the embedding.
static inline float *model_output_weights(const model_weights *w) { return w->output ? w->output : w->tok_embeddings; }

typedef struct model model;

// Allocates a model with zeroed parameters and gradients. NULL with a message on failure.
model *model_create(const model_config *c, char *msg, size_t n);
void model_free(model *m);

const model_config *model_cfg(const model *m);
size_t model_num_params(const model *m);
float *model_params(model *m);   // all parameters, model_num_params floats
float *model_grads(model *m);    // their gradients, same layout
const model_tensor *model_tensors(const model *m, int *count);
model_weights model_weights_of(model *m, float *base);  // named pointers into params or grads

// Initialisation (spec section 3): truncated normal std dim^-0.5 (cut at 3 std) for embeddings,
// wq, wk, wv, wo, w1, w3 and the gate weight; w2 std hidden^-0.5; norms 1; MTA identity kernels.
void model_init(model *m, uint64_t seed);

// Forward over tokens (B,T) (ids in [0,V)); B*T must fit an int (the row index). With targets (B,T) (-1 = ignored) it also computes
// the mean cross-entropy loss into *loss and keeps what model_backward needs; without, it holds
// one layer's activations at a time (all layers reuse them). logits (B,T,V) are available from
// model_logits after the call. Returns 0, or -1 with a message.
int model_forward(model *m, const int *tokens, const int *targets, int B, int T, float *loss, char *msg,
                  size_t n);
const float *model_logits(const model *m);

// Allocates the activations of a forward with targets over (B,T) now rather than at the first
// one, so that a batch too large for the memory is refused before any data is read for it. 0, or
// -1 with a message (B*T past an int, or out of memory).
int model_reserve(model *m, int B, int T, char *msg, size_t n);

// The operator backend of the attention layers: MTA_BACKEND_FUSED by default (no (T,T) maps held;
// see mta.h); MTA_BACKEND_REFERENCE keeps the maps, which model_attention_map needs. Changing it
// drops the activations of the last forward.
void model_set_backend(model *m, mta_backend b);

// The attention weights (T,T) of layer l, head h, sequence b of the last forward (what multiplied
// V: after the MTA convolutions, before dropout), with the reference backend. 0, or -1 with a
// message.
int model_attention_map(model *m, int l, int b, int h, float *out, char *msg, size_t n);

// Training mode: attention dropout (attn_dropout > 0) applies to the forwards that follow, with
// masks drawn from seed (give each step its own seed). Off by default (evaluation).
void model_set_training(model *m, int training, uint64_t seed);

// Backward of the last forward with targets: gradients are ADDED to model_grads.
int model_backward(model *m, char *msg, size_t n);

// Called by model_backward as soon as the gradients model_grads()[lo, hi) are final, in the order
// they become so: the final norm (with the untied output projection that follows it), layers
// n_layers-1 down to 0 (each layer's tensors one range), then the embedding. Data-parallel training starts reducing a range while the backward
// goes on. NULL (the default) calls nothing.
typedef void (*model_grad_hook)(void *arg, size_t lo, size_t hi);
void model_set_grad_hook(model *m, model_grad_hook fn, void *arg);
void model_zero_grad(model *m);

// ---- incremental decoding (KV cache) ----
// Decodes B sequences one token at a time, each layer's attention through an mta_cache (K, V and
// the few score/probability rows the MTA convolutions need), so a token costs O(t) instead of a
// forward over the t tokens before it. The logits equal those of model_forward over the same
// tokens. Sequences may have different lengths; none sees another. Holds at most capacity tokens
// per sequence. The decoder reads the model's weights when it runs, so it must not outlive it.
typedef struct model_decoder model_decoder;
model_decoder *model_decoder_create(model *m, int B, int capacity, char *msg, size_t n);
void model_decoder_free(model_decoder *dec);

// Starts every sequence from a prompt: tokens (B,T), sequence b's prompt is its first lens[b]
// tokens (1 <= lens[b] <= T; what follows is ignored). One batched forward, then the caches are
// filled from it. The logits of each prompt's last token are then in model_decoder_logits (only
// those are computed: model_logits then holds these B rows, not the forward's B*T).
int model_decoder_prefill(model_decoder *dec, const int *tokens, int T, const int *lens, char *msg, size_t n);
// Appends one token per sequence (tokens: B ids) and computes their logits.
int model_decoder_step(model_decoder *dec, const int *tokens, char *msg, size_t n);
const float *model_decoder_logits(const model_decoder *dec);  // (B,V), of the last prefill or step
int model_decoder_len(const model_decoder *dec, int b);       // tokens sequence b holds

// Copies every tensor of src into the tensor of dst with the same name and shape; the count
// copied. (A baseline's weights into an MTA model of the same sizes: all but the MTA tensors.)
int model_copy_matching(model *dst, const model *src);

// Weights as safetensors with the names of docs/model.md, and the metadata key weights_checksum:
// FNV-1a 64 over the tensors' bytes in the model's order (docs/checkpoints.md). Loading refuses a
// file whose checksum does not match (a damaged file) or whose weights hold a NaN or an infinity
// (naming the tensor): such a model only computes NaN. A file without the key (written by an
// older mtac or another program, or a checkpoint, whose own checksum is checkpoint_load's) loads
// unchecked.
int model_save_weights(const model *m, const char *path, char *msg, size_t n);
int model_load_weights(model *m, const char *path, char *msg, size_t n);

// The first value in base (model_num_params floats laid out as the model's tensors: the weights,
// their gradients or optimizer moments) that is NaN or infinite: its tensor, with the index
// within the tensor in *at and the value in *value. NULL when every value is finite.
const model_tensor *model_find_nonfinite(const model *m, const float *base, size_t *at, float *value);

#endif
