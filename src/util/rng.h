// rng.h: splitmix64, the project's one small deterministic generator (initialisation, data
// order, toy samples, benchmark inputs): the same numbers on every machine, its whole state one
// uint64_t; the uniform and normal samplers drawn from it, and the one Box-Muller step (which the
// C tests' draws also take, tests/testutil.c).
#ifndef MTAC_RNG_H
#define MTAC_RNG_H

#include <math.h>
#include <stdint.h>

static inline uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// Uniform in (0, 1): the top 53 bits, offset by half a step so that log() never sees 0.
static inline double rng_uniform(uint64_t *s) {
    return ((splitmix64(s) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
}

// Box-Muller: a standard normal from two uniforms, u0 in (0, 1] (the cosine's value; the sine's
// is not kept, so that a generator's state stays one uint64_t).
static inline double rng_box_muller(double u0, double u1) {
    return sqrt(-2.0 * log(u0)) * cos(6.283185307179586 * u1);
}

// The project's normal sampler. Two declarators fix the order of the draws, which model_init's
// weights (and so every checkpoint) depend on.
static inline double rng_normal(uint64_t *s) {
    const double u0 = rng_uniform(s), u1 = rng_uniform(s);
    return rng_box_muller(u0, u1);
}

#endif
