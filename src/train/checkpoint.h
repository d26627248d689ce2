// checkpoint.h: a training checkpoint in one safetensors file (docs/checkpoints.md): the model's
// weights under their documented names, the AdamW moments as "optim.m.<name>" / "optim.v.<name>",
// and string metadata (step, RNG and data positions, configs) plus a checksum of all tensor
// bytes and all metadata, verified on load. Written atomically (temp file, fsync, rename), so the
// previous checkpoint stays intact until its successor is complete.
#ifndef MTAC_CHECKPOINT_H
#define MTAC_CHECKPOINT_H

#include "io/safetensors.h"
#include "model/model.h"

#include <stddef.h>

// Saves weights, moments (m, v: model_num_params floats each, or NULL to omit) and metadata (the
// keys checksum and checkpoint_version are the checkpoint's own). Refuses, writing nothing, when
// a weight or moment is NaN or infinite.
int checkpoint_save(const char *path, const model *m, const float *adam_m, const float *adam_v,
                    const st_meta_kv *meta, int n_meta, char *err, size_t err_len);

// Loads a checkpoint into a model built from the same config (and m, v when non-NULL); the
// metadata stays readable in *f until st_free. Fails on a checksum mismatch, a missing or
// mis-shaped tensor, moments absent when asked for, a NaN or infinite weight or moment among those
// loaded, or a negative second moment. Reads format version 2 and version 1 (no checkpoint_version
// key: the checksum covered the tensors only).
int checkpoint_load(const char *path, model *m, float *adam_m, float *adam_v, st_file *f, char *err,
                    size_t err_len);

#endif
