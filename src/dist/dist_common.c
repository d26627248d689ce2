// dist_common.c: what both builds share (see dist.h): the launcher's environment, and comparisons
// built on the collectives.
#include "dist/dist.h"

#include <stdio.h>
#include <stdlib.h>

// Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE; MPICH's hydra and Slurm's PMI-2 set PMI_SIZE;
// a PMIx launcher (srun --mpi=pmix) sets PMIX_RANK but no size.
int dist_launched_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *s = getenv(vars[i]);
        if (s && atoi(s) >= 1) return atoi(s);
    }
    return getenv("PMIX_RANK") ? 0 : 1;
}

int dist_differs_from_root(dist *d, uint64_t value, char *ranks, size_t n) {
    const int size = dist_size(d);
    if (n) ranks[0] = 0;
    if (size == 1) return 0;
    uint64_t root = value;
    dist_bcast(d, &root, sizeof root, 0);
    double *differs = calloc((size_t)size, sizeof(double));
    if (!differs) dist_abort(d, 1);  // cannot tell the others: end them all
    differs[dist_rank(d)] = value != root;
    dist_allreduce_sum(d, differs, size);
    int count = 0;
    size_t len = 0;
    for (int r = 0; r < size; r++)
        if (differs[r]) {
            count++;
            if (len < n) len += (size_t)snprintf(ranks + len, n - len, "%s%d", len ? " " : "", r);
        }
    free(differs);
    return count;
}
