// rng.h: splitmix64, the project's one small deterministic generator (initialisation, data
// order, toy samples): the same numbers on every machine, its whole state one uint64_t.
#ifndef MTAC_RNG_H
#define MTAC_RNG_H

#include <stdint.h>

static inline uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

#endif
