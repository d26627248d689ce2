// fpenv.h: flush-to-zero and denormals-are-zero. A subnormal float (below 2^-126) takes the
// slow microcoded path in x86 multiply-adds, dozens of times slower than a normal one: weights or
// activations that decay into that range (a diverging --lr, a large weight decay) make sgemm
// and the attention kernels crawl. With both modes on, a subnormal input reads as 0 and a
// subnormal result is written as 0, at full speed; the rounding of every normal number is
// unchanged. The mode is per thread (x86 MXCSR, AArch64 FPCR); a new thread inherits its
// creator's, and the OpenMP build of OpenBLAS computes on the OpenMP threads.
#ifndef MTAC_FPENV_H
#define MTAC_FPENV_H

#include <omp.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
enum { FP_FLUSH_BITS = 0x8040 };  // MXCSR FTZ (bit 15) and DAZ (bit 6)
static inline unsigned fp_mode_get(void) { return _mm_getcsr(); }
static inline void fp_mode_set(unsigned m) { _mm_setcsr(m); }
#elif defined(__aarch64__)
enum { FP_FLUSH_BITS = 1u << 24 };  // FPCR.FZ: flushes inputs and results alike
static inline unsigned fp_mode_get(void) {
    unsigned long r;
    __asm__ volatile("mrs %0, fpcr" : "=r"(r));
    return (unsigned)r;
}
static inline void fp_mode_set(unsigned m) { __asm__ volatile("msr fpcr, %0" : : "r"((unsigned long)m)); }
#else
enum { FP_FLUSH_BITS = 0 };  // no such mode here: nothing to do
static inline unsigned fp_mode_get(void) { return 0; }
static inline void fp_mode_set(unsigned m) { (void)m; }
#endif

// Whether the calling thread flushes subnormals.
static inline int fp_flushing(void) { return FP_FLUSH_BITS != 0 && (fp_mode_get() & FP_FLUSH_BITS) == FP_FLUSH_BITS; }

// Turns flushing on or off in the calling thread alone.
static inline void fp_flush_this_thread(int on) {
    fp_mode_set(on ? fp_mode_get() | FP_FLUSH_BITS : fp_mode_get() & ~(unsigned)FP_FLUSH_BITS);
}

// Turns flushing on or off in the calling thread and in each thread of an OpenMP parallel region
// of the default size (the pool later regions, and OpenBLAS, reuse). Returns the calling thread's
// previous setting, for a second call to restore.
static inline int fp_flush_subnormals(int on) {
    const int was = fp_flushing();
#pragma omp parallel
    fp_flush_this_thread(on);
    fp_flush_this_thread(on);
    return was;
}

#endif
