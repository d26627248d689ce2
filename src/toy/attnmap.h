// attnmap.h: pictures of where the toy models attend (mtac attnmap).
#ifndef MTAC_ATTNMAP_H
#define MTAC_ATTNMAP_H

#include "toy/toyplan.h"

#include <stddef.h>
#include <stdint.h>

// For test sample `sample` of the run in dir (trained with `seed`), runs every model of the plan
// (weights DIR/<model>-seed<S>.safetensors) and draws, for each chosen layer and head, the
// attention of the '#', query and answer positions over the whole input, the models side by
// side, the target block underlined; writes the PNG to out. layers/heads NULL = all.
int toy_attnmap(const toy_plan *p, const char *dir, uint64_t seed, int sample, const int *layers, int n_layers,
                const int *heads, int n_heads, const char *out, char *err, size_t n);

#endif
