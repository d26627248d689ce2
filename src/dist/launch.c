// launch.c: what the launcher told this process (see dist.h).
#include "dist/dist.h"

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
