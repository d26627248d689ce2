// dist_single.c: the group of one process, for builds without MPI (see dist.h).
#include "dist/dist.h"

#include <stdlib.h>
#include <string.h>

struct dist {
    int unused;
};
static dist g_self;

void dist_finalize(dist *d) {}
dist *dist_self(void) { return &g_self; }
int dist_rank(const dist *d) { return 0; }
int dist_size(const dist *d) { return 1; }
void dist_abort(dist *d, int code) {}

dist *dist_world(int *argc, char ***argv) { return dist_launched_size() == 1 ? &g_self : NULL; }

void dist_bcast(dist *d, void *buf, size_t bytes, int root) {}
void dist_allreduce_sum(dist *d, double *buf, int count) {}
void dist_allgather_f32(dist *d, float *buf, const size_t *bound) {}
void dist_allgather_f64(dist *d, double *buf, const size_t *bound) {}
void dist_gather_f32(dist *d, const float *part, float *whole, const size_t *bound, int root) {}
void dist_scatter_f32(dist *d, const float *whole, float *part, const size_t *bound, int root) {}

dist_exchange *dist_exchange_start(dist *d, const float *send, const int *scount, const int *sdispl, float *recv,
                                   const int *rcount, const int *rdispl) {
    if (scount[0]) memmove(recv + rdispl[0], send + sdispl[0], (size_t)scount[0] * sizeof(float));
    return NULL;
}
void dist_progress(dist_exchange **x, int count) {}
void dist_exchange_wait(dist_exchange *x) {}
