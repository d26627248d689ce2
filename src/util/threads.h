// threads.h: how many OpenMP threads a piece of work is worth. Every parallel region wakes its
// threads and waits for the last of them: with OMP_WAIT_POLICY=passive (what mtac runs with) a
// wake-up is a futex call and a reschedule, and on a machine whose cores other jobs hold it also
// waits for the scheduler to give the woken thread a core. Work below a few wake-ups per thread
// is faster on fewer threads. The thread count only decides who computes which rows, heads or
// elements of the loops that use it here (the fused attention's strips excepted: their size
// follows the thread count).
#ifndef MTAC_THREADS_H
#define MTAC_THREADS_H

#include <omp.h>

// The work a thread must have to be worth waking: much more with sleeping waiters (passive, the
// default here) than with spinning ones (OMP_WAIT_POLICY=active, GOMP_SPINCOUNT). The figures
// behind the thresholds (threads.c): docs/benchmarks.md, "Threads on a busy machine".
typedef struct {
    double flops;  // floating-point operations of a model forward or decoding step
    double elems;  // elements of an elementwise loop (AdamW, a scale, a sum)
} threads_cost;
extern threads_cost threads_min_work;  // the passive thresholds until threads_set_spinning
void threads_set_spinning(int spinning);

// One thread per `per_thread` of work, at least 1 and at most the calling thread's OpenMP
// default (omp_get_max_threads: OMP_NUM_THREADS, omp_set_num_threads).
static inline int threads_for(double work, double per_thread) {
    const int max = omp_get_max_threads();
    const double n = work / per_thread;
    return n < 2 ? 1 : n >= max ? max : (int)n;
}

// Lowers the calling thread's OpenMP default to threads_for(work, per_thread) for what follows
// (parallel regions, the OpenMP build of OpenBLAS, mta_forward with cfg.threads = 0); returns
// what threads_leave restores (0: nothing changed).
static inline int threads_enter(double work, double per_thread) {
    const int max = omp_get_max_threads(), n = threads_for(work, per_thread);
    if (n >= max) return 0;
    omp_set_num_threads(n);
    return max;
}

static inline void threads_leave(int prev) {
    if (prev > 0) omp_set_num_threads(prev);
}

#endif
