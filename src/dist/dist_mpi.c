// dist_mpi.c: the group of ranks over MPI (see dist.h). Counts past INT_MAX elements are refused
// by the callers (trainer_create checks the parameter count). A group of one (dist_self, or a
// world of one) calls no MPI at all: a library caller need not initialise MPI to train alone.
#include "dist/dist.h"

#include <mpi.h>
#include <stdlib.h>
#include <string.h>

struct dist {
    MPI_Comm comm;
    int rank, size;
};

struct dist_exchange {
    MPI_Request req;
};

static dist g_world, g_self;

dist *dist_world(int *argc, char ***argv) {
    if (dist_launched_size() == 1) return dist_self();  // run alone: no MPI (nor its singleton start-up)
    int inited, provided;
    MPI_Initialized(&inited);
    // Only the main thread calls MPI; OpenMP threads compute between the calls.
    if (!inited) MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    g_world.comm = MPI_COMM_WORLD;
    MPI_Comm_rank(g_world.comm, &g_world.rank);
    MPI_Comm_size(g_world.comm, &g_world.size);
    return &g_world;
}

void dist_finalize(dist *d) {
    int fin;
    MPI_Finalized(&fin);
    if (d == &g_world && !fin) MPI_Finalize();
}

dist *dist_self(void) {
    g_self.comm = MPI_COMM_NULL, g_self.rank = 0, g_self.size = 1;
    return &g_self;
}

int dist_rank(const dist *d) { return d->rank; }
int dist_size(const dist *d) { return d->size; }
void dist_abort(dist *d, int code) {
    if (d->size > 1) MPI_Abort(d->comm, code);
}

void dist_bcast(dist *d, void *buf, size_t bytes, int root) {
    if (d->size == 1) return;
    for (size_t at = 0; at < bytes; at += 1u << 30) {
        size_t k = bytes - at < (1u << 30) ? bytes - at : (1u << 30);
        MPI_Bcast((char *)buf + at, (int)k, MPI_BYTE, root, d->comm);
    }
}

void dist_allreduce_sum(dist *d, double *buf, int count) {
    if (d->size == 1) return;
    MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_DOUBLE, MPI_SUM, d->comm);
}

// The counts (first size ints) and displacements (next size) of the parts bound[] describes,
// malloc'd; a failed allocation ends every rank (the others are waiting in the collective).
static int *parts(dist *d, const size_t *bound) {
    int *cnt = malloc(2 * (size_t)d->size * sizeof(int));
    if (!cnt) MPI_Abort(d->comm, 1);
    for (int r = 0; r < d->size; r++) cnt[d->size + r] = (int)bound[r], cnt[r] = (int)(bound[r + 1] - bound[r]);
    return cnt;
}

static void allgather(dist *d, void *buf, const size_t *bound, MPI_Datatype t) {
    if (d->size == 1) return;
    int *cnt = parts(d, bound), *dsp = cnt + d->size;
    MPI_Allgatherv(MPI_IN_PLACE, 0, t, buf, cnt, dsp, t, d->comm);
    free(cnt);
}

void dist_allgather_f32(dist *d, float *buf, const size_t *bound) { allgather(d, buf, bound, MPI_FLOAT); }
void dist_allgather_f64(dist *d, double *buf, const size_t *bound) { allgather(d, buf, bound, MPI_DOUBLE); }

void dist_gather_f32(dist *d, const float *part, float *whole, const size_t *bound, int root) {
    if (d->size == 1) return;
    int *cnt = parts(d, bound), *dsp = cnt + d->size;
    if (d->rank == root) MPI_Gatherv(MPI_IN_PLACE, 0, MPI_FLOAT, whole, cnt, dsp, MPI_FLOAT, root, d->comm);
    else MPI_Gatherv(part, cnt[d->rank], MPI_FLOAT, NULL, NULL, NULL, MPI_FLOAT, root, d->comm);
    free(cnt);
}

void dist_scatter_f32(dist *d, const float *whole, float *part, const size_t *bound, int root) {
    if (d->size == 1) return;
    int *cnt = parts(d, bound), *dsp = cnt + d->size;
    if (d->rank == root) MPI_Scatterv(whole, cnt, dsp, MPI_FLOAT, MPI_IN_PLACE, 0, MPI_FLOAT, root, d->comm);
    else MPI_Scatterv(NULL, NULL, NULL, MPI_FLOAT, part, cnt[d->rank], MPI_FLOAT, root, d->comm);
    free(cnt);
}

dist_exchange *dist_exchange_start(dist *d, const float *send, const int *scount, const int *sdispl, float *recv,
                                   const int *rcount, const int *rdispl) {
    if (d->size == 1) {
        if (scount[0]) memmove(recv + rdispl[0], send + sdispl[0], (size_t)scount[0] * sizeof(float));
        return NULL;
    }
    dist_exchange *x = malloc(sizeof *x);
    if (!x) MPI_Abort(d->comm, 1);
    MPI_Ialltoallv(send, scount, sdispl, MPI_FLOAT, recv, rcount, rdispl, MPI_FLOAT, d->comm, &x->req);
    return x;
}

// Open MPI moves non-blocking collectives on only inside MPI calls: a test of each is such a call.
void dist_progress(dist_exchange **x, int count) {
    for (int i = 0; i < count; i++) {
        int done;
        if (x[i]) MPI_Test(&x[i]->req, &done, MPI_STATUS_IGNORE);
    }
}

void dist_exchange_wait(dist_exchange *x) {
    if (!x) return;
    MPI_Wait(&x->req, MPI_STATUS_IGNORE);
    free(x);
}
