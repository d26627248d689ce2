// attn_io.h: an MTA operator problem (config, q/k/v, parameters, optional dout) read from a
// safetensors file, as used by `mtac attn` and the fixture tests (format: docs/formats.md).
#ifndef MTAC_ATTN_IO_H
#define MTAC_ATTN_IO_H

#include "io/safetensors.h"
#include "mta.h"

#include <stddef.h>

// The parameter tensor names, in the order of mta_params / mta_grads.
enum { ATTN_N_PARAMS = 7 };
extern const char *const attn_param_names[ATTN_N_PARAMS];

typedef struct {
    mta_config cfg;
    const float *q, *k, *v, *dout;       // dout is NULL when absent; all point into the st_file
    const float *param[ATTN_N_PARAMS];   // NULL when absent (step off)
    size_t param_numel[ATTN_N_PARAMS];
} attn_problem;

// Builds the problem from a file's tensors and metadata: q, k, v (B,H,T,d) are required; each
// present parameter switches its step on and its shape sets the kernel sizes; metadata layer_id
// (integer) and depth_scale ("1"/"0") set depth scaling. Tensor names that are neither inputs
// nor parameters are an error, unless they start with ignore_prefix (when non-NULL).
// Returns 0, or -1 with a message in err.
int attn_problem_from_file(const st_file *f, const char *ignore_prefix, attn_problem *pr, char *err,
                           size_t err_len);

// The problem's parameters as an mta_params view.
mta_params attn_problem_params(const attn_problem *pr);

#endif
