// dist.h: the group of processes (ranks) a data-parallel run spans, and the few collectives its
// training step needs. Over MPI when mtac is built with it (MTAC_MPI, dist_mpi.c); otherwise
// (dist_single.c) a group of one, where every collective is a copy or nothing. Every rank calls
// the collectives in the same order; counts and offsets are in elements.
#ifndef MTAC_DIST_H
#define MTAC_DIST_H

#include <stddef.h>
#include <stdint.h>

typedef struct dist dist;

// The processes this one was launched with. With MPI and a launcher (mpirun, srun), initialises
// MPI (`mtac train` calls this once, after parsing its config, before reading any data) and
// returns the world; else a group of one that calls no MPI, or NULL when a launcher started
// several processes and this build has no MPI to join them. dist_finalize ends it.
dist *dist_world(int *argc, char ***argv);
void dist_finalize(dist *d);
// How many processes the launcher started, from its environment: 1 when none did (or it started
// one), 0 when it did not say how many.
int dist_launched_size(void);
// A group of this process alone (what a library caller without MPI passes).
dist *dist_self(void);

int dist_rank(const dist *d);
int dist_size(const dist *d);

// Ends every rank of the group with exit code code (MPI_Abort); returns only without MPI.
void dist_abort(dist *d, int code);

void dist_bcast(dist *d, void *buf, size_t bytes, int root);
void dist_allreduce_sum(dist *d, double *buf, int count);
// bound[0..size]: rank r owns elements [bound[r], bound[r+1]) of a whole array. allgather: every
// rank's part of buf to every rank (in place: each part is already where it belongs in buf).
void dist_allgather_f32(dist *d, float *buf, const size_t *bound);
void dist_allgather_f64(dist *d, double *buf, const size_t *bound);
// gather: each rank's part (bound[r+1] - bound[r] elements) into root's whole array; scatter: the
// reverse. On root, part is whole + bound[root].
void dist_gather_f32(dist *d, const float *part, float *whole, const size_t *bound, int root);
void dist_scatter_f32(dist *d, const float *whole, float *part, const size_t *bound, int root);

// How many ranks hold a value other than rank 0's, with their numbers in ranks ("1 3").
// Collective: every rank gets the same answer.
int dist_differs_from_root(dist *d, uint64_t value, char *ranks, size_t n);

// A non-blocking all-to-all exchange of float ranges: rank r sends send[sdispl[c] ..
// + scount[c]) to each rank c and receives from each rank c into recv[rdispl[c] .. + rcount[c]).
// dist_exchange_start returns a handle (NULL only without MPI, where it has copied already);
// dist_progress lets MPI move the outstanding exchanges on; dist_exchange_wait completes one.
typedef struct dist_exchange dist_exchange;
dist_exchange *dist_exchange_start(dist *d, const float *send, const int *scount, const int *sdispl, float *recv,
                                   const int *rcount, const int *rdispl);
void dist_progress(dist_exchange **x, int count);
void dist_exchange_wait(dist_exchange *x);

#endif
