// fuzz_tiny_model.h: the tiny model configs the checkpoint target loads into and its seeds are
// made from (2 layers, dim 8, 2 heads, vocabulary 11).
#ifndef MTAC_FUZZ_TINY_MODEL_H
#define MTAC_FUZZ_TINY_MODEL_H

#include "model/model.h"

// mta = 0: the baseline; 1: MTA with every step on (key-query convolutions in layer 1).
model_config fuzz_tiny_model_config(int mta);

#endif
