// attn_io.h: an MTA operator problem (config, q/k/v, parameters, optional dout) read from a
// safetensors file, as used by `mtac attn` and the fixture tests (format: docs/formats.md).
#ifndef MTAC_ATTN_IO_H
#define MTAC_ATTN_IO_H

#include "io/safetensors.h"
#include "mta.h"

#include <stddef.h>
#include <stdint.h>

typedef struct {
    mta_config cfg;
    const float *q, *k, *v, *dout;       // dout is NULL when absent; all point into the st_file
    const float *param[MTA_N_PARAMS];    // by mta.h's index (MTA_W_PRE ...), named as mta_param_info
                                         // says; NULL when absent (step off)
    size_t param_numel[MTA_N_PARAMS];
    const float *doc;                    // (B,T) document ids of packed documents (whole numbers in
                                         // float32, checked), or NULL: attn_problem_doc_ids
} attn_problem;

// Builds the problem from a file's tensors and metadata: q (B,H,T,d), k and v (B,H_kv,T,d) are
// required (k's head count sets cfg.H_kv: grouped-query attention when below H); each
// present parameter switches its step on and its shape sets the kernel sizes; metadata layer_id
// (integer) and depth_scale ("1"/"0") set depth scaling; an optional doc (B,T) holds document
// ids (mta_set_documents), whole numbers within int32 stored as float32. Tensor names that are neither inputs
// nor parameters are an error, unless they start with ignore_prefix (when non-NULL).
// Returns 0, or -1 with a message in err.
int attn_problem_from_file(const st_file *f, const char *ignore_prefix, attn_problem *pr, char *err,
                           size_t err_len);

// The default limit on T of `mtac attn` (docs/formats.md): T = 16384 at B*H = 8, d = 64 is
// already a long fused forward and backward on two cores.
enum { ATTN_DEFAULT_MAX_T = 16384 };

// Refuses a problem too large to have been meant, before any of its workspace is allocated: T
// above max_T (the work grows as B*H*T^2 while the file grows only as B*H*T*d, so a 2.4 MB file
// of T = 200000 asks for minutes), and, on the reference backend (cfg.backend), maps larger than
// max_T^2 floats (it holds several (T,T) maps of B*H*T*T floats each: at most 1 GiB each at the
// default). Returns 0, or -1 with a message in err.
int attn_problem_check_size(const mta_config *cfg, int max_T, char *err, size_t err_len);

// The problem's document ids as mta_set_documents takes them, into ids (B*T); nothing without doc.
void attn_problem_doc_ids(const attn_problem *pr, int32_t *ids);

// The problem's parameters as an mta_params view.
mta_params attn_problem_params(const attn_problem *pr);

// Compares the result `name` (n floats) with the file's expect.<name>, as the fixtures carry it
// (PyTorch's result): 0 when the file has none; else 1 with *diff = the largest |got - expected|
// (+INFINITY when either holds a NaN or an infinity, so that no tolerance passes them) and
// *scale = the largest finite |expected|, at least 0.1 (a gradient that is zero up to rounding is
// float32 noise of products far larger), so that diff <= tol * scale is the check; -1 with a
// message in err when the sizes differ. `mtac attn` and the fixture tests compare this way.
int attn_compare_expected(const st_file *f, const char *name, const float *got, size_t n, double *diff,
                          double *scale, char *err, size_t err_len);

#endif
