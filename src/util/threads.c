// threads.c: the work a thread must have to be worth waking (threads.h).
#include "util/threads.h"

// Sleeping waiters (passive) make a thread costly to wake, so it needs much more work than with
// spinning ones. How the figures were chosen: docs/benchmarks.md, "Threads on a busy machine".
#define PASSIVE {5e8, 65536}
#define SPINNING {2.5e6, 4096}

threads_cost threads_min_work = PASSIVE;

void threads_set_spinning(int spinning) {
    const threads_cost passive = PASSIVE, spin = SPINNING;
    threads_min_work = spinning ? spin : passive;
}
