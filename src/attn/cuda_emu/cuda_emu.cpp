// cuda_emu.cpp: the CUDA emulator's runtime (cuda_emu.h): fibers for a block's threads, the
// scheduler that runs them pass by pass in varied orders, block and warp barriers (with the
// warp's shuffles), per-block shared memory, the launch checks, device memory, and cuBLAS on
// OpenBLAS. Plain C-style C++ (no exceptions, no C++ library at run time), so that C programs
// link libmtac with a C linker.
#include "attn/cuda_emu/cuda_emu.h"
#include "attn/cuda_emu/cuda_emu_ctl.h"
#include "attn/cuda_emu/include/cublas_v2.h"

#include <cblas.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define CUEMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUEMU_ASAN 1
#endif
#endif
#ifdef CUEMU_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace cuemu {

__thread uint3 thread_idx, block_idx;
__thread dim3 block_dim, grid_dim;

namespace {

// The GPU's limits that a launch is checked against (those of an H100, compute capability 9.0).
const unsigned MAX_THREADS = 1024, MAX_BLOCK_XY = 1024, MAX_BLOCK_Z = 64, MAX_GRID_YZ = 65535;
// Thread block clusters: at most 8 blocks (the portable size), run together as one set of fibers.
const unsigned MAX_CLUSTER = 8, MAX_FIBERS = MAX_CLUSTER * MAX_THREADS;
const unsigned long long MAX_GRID_X = 2147483647ULL;
const size_t SHARED_DEFAULT = 48 * 1024, SHARED_OPTIN = 227 * 1024;
const size_t DEVICE_MEMORY = (size_t)4 << 30;  // the emulated device's memory
size_t shared_optin = SHARED_OPTIN;  // the opt-in limit per block (mta_cuda_emu_set_shared_optin)
int clusters_on = 1;                 // cudaDevAttrClusterLaunch (mta_cuda_emu_set_clusters)
int sm_count = 1;                    // cudaDevAttrMultiProcessorCount (mta_cuda_emu_set_sms)

void fatal(const char *fmt, const char *kernel, const char *what) {
    fprintf(stderr, "cuda-emu: kernel %s: ", kernel);
    fprintf(stderr, fmt, what);
    fputc('\n', stderr);
    abort();
}

// ---- fibers: one stack each, switched by saving the callee-saved registers (x86-64) ----

#if defined(__x86_64__)
extern "C" void mtac_cuemu_switch(void **save_sp, void *to_sp);
extern "C" void mtac_cuemu_fiber_start(void);
// mtac_cuemu_switch saves rbp, rbx, r12-r15 and the stack pointer in *save_sp, and resumes the
// fiber whose stack pointer is to_sp. A new fiber's stack holds those six registers and the
// address of mtac_cuemu_fiber_start, which calls r13(r12).
__asm__(".text\n"
        ".globl mtac_cuemu_switch\n.hidden mtac_cuemu_switch\n.type mtac_cuemu_switch,@function\n"
        "mtac_cuemu_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size mtac_cuemu_switch, .-mtac_cuemu_switch\n"
        ".globl mtac_cuemu_fiber_start\n.hidden mtac_cuemu_fiber_start\n.type mtac_cuemu_fiber_start,@function\n"
        "mtac_cuemu_fiber_start:\n"
        "  movq %r12, %rdi\n  callq *%r13\n  ud2\n"
        ".size mtac_cuemu_fiber_start, .-mtac_cuemu_fiber_start\n");
#endif

// A thread waits at __syncthreads() (F_BARRIER), at barrier.cluster's wait (F_CLUSTER) or at a
// warp-collective operation (F_WARP) until its warp has all arrived (F_WOKEN: released, runs in
// the next pass; when warps run ahead, F_READY at once instead, queued to run before the rest of
// the pass).
enum { F_READY, F_BARRIER, F_WARP, F_WOKEN, F_DONE, F_CLUSTER };

// A cp.async copy issued and not yet complete: the group it belongs to is the calling thread's
// number of commits at its issue (uncommitted while that is still the thread's count).
struct cp_copy {
    void *dst;
    const void *src;
    size_t bytes;
    unsigned group;
    bool full;
};

struct fiber {
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t uc;
#endif
    char *stack;        // lowest address (a guard page below it)
    uint3 idx, bidx;    // its threadIdx, blockIdx
    unsigned blk;       // its block's rank in the cluster
    int state;
    unsigned shared_n;  // static shared arrays this thread has declared so far
    void *fake_stack;   // ASan's fake stack while switched out
    cp_copy *copies;    // its cp.async copies not yet complete, in issue order (the array is kept)
    unsigned ncopies, copies_cap;
    unsigned groups;    // the cp.async groups it has committed
    bool queued;        // in the run-ahead queue (sched::ahead)
    bool arrived;       // at barrier.cluster, in phase arrive_phase, and not yet waited
    uint64_t arrive_phase;
    bool held;          // not started yet: its block lags (release_cluster)
};

// A block of the cluster being run: its shared memory and how many of its threads have exited.
struct block_state {
    void *shared[64];  // its static shared arrays
    size_t shared_bytes[64], shared_total;
    unsigned shared_n;
    void *dyn_shared;
    unsigned done;
};

// A warp-collective operation's meeting point: the lanes named in mask gather at op, each
// depositing only its own registers in vals[lane]; the last to arrive releases them all, and
// each then computes only its own results from what the others deposited and leaves. The
// meeting is free again when every lane has left, so no lane's next deposit overwrites a slot
// that another lane has yet to read. Lanes of a warp with other masks meet apart; at most two
// meetings of one mask are in use at a time (one being read, the next gathering).
struct meeting {
    const char *op;  // NULL: free
    unsigned mask, arrived, to_read;
    int gathering;
    uint32_t vals[32][6];
    uint32_t rows[32][4];  // ldmatrix's rows, read from shared memory when the last lane arrived
};
enum { MEETINGS = 8 };
struct warp_state {
    meeting m[MEETINGS];
};

// Per OS thread: the fibers and stacks, the cluster being run (a launch without clusters: one
// block) and its blocks' shared memory. Fiber i is thread i % nthreads of block i / nthreads.
struct sched {
    fiber *fibers;
    char *stacks;
    unsigned nguarded;  // the stacks with a guard page below them so far
    size_t stack_size;
    fiber main;  // the scheduler's own context
    fiber *cur;  // the thread running (NULL: the scheduler)
    unsigned order[MAX_FIBERS], norder, pos;  // the pass's order, and the next of it to run
    // Warps running ahead: the lanes a warp-collective operation released, to run before the rest
    // of the pass (a ring: a thread is in it at most once, so MAX_FIBERS entries suffice).
    unsigned ahead[MAX_FIBERS], ahead_head, ahead_n;
    void (*fn)(void *);
    void *arg;
    const char *kernel;
    void *main_bottom;  // the scheduler's own stack, for ASan's switch annotations
    size_t main_size;
    block_state blk[MAX_CLUSTER];
    unsigned cs, nthreads;  // blocks in the cluster, threads per block
    uint3 first_block;      // the blockIdx of its rank 0
    // barrier.cluster: arrivals in the current phase, phases completed.
    unsigned cl_arrivals;
    uint64_t cl_phase;
    size_t dyn_bytes, shared_limit;
    uint64_t launch;  // the number of the launch being run
    mta_kernel_ops *ops;  // its warp-level operations (tally)
    warp_state warps[MAX_FIBERS / 32];
};

thread_local sched *S;
// Every OS thread's scheduler, kept for the life of the process (the threads of OpenMP's pool
// come back for the next launch), and reachable from here for LeakSanitizer.
sched *all_scheds[1024];
unsigned nscheds;
uint64_t schedule_seed;     // mta_cuda_emu_set_schedule
int block_order = -1;       // mta_cuda_emu_set_block_order
// Schedules from 3 up also run on at once the warps a warp operation releases (release_ahead).
bool run_ahead() { return schedule_seed >= 3; }
uint64_t launches;          // counted over all OS threads

// The next thread of the pass to run, or the scheduler when every one has run: first the lanes
// that warps running ahead have queued, then the pass's order.
fiber *next_of_pass(void) {
    while (S->ahead_n) {
        fiber *f = &S->fibers[S->ahead[S->ahead_head]];
        S->ahead_head = (S->ahead_head + 1) % MAX_FIBERS, S->ahead_n--;
        f->queued = false;
        if (f->state == F_READY) return f;
    }
    while (S->pos < S->norder) {
        fiber *f = &S->fibers[S->order[S->pos++]];
        if (f->state == F_READY) return f;
    }
    return &S->main;
}

// Leaves from (a thread, or the scheduler: &S->main) for to. A thread passes the block straight to
// the next one of the pass; the last one hands it back to the scheduler. A thread that is done is
// never resumed.
void switch_fibers(fiber *from, fiber *to) {
    if (from == to) return;  // a lane that released its warp and runs on first
    const int to_main = to == &S->main;
    S->cur = to_main ? NULL : to;
    if (!to_main) thread_idx = to->idx, block_idx = to->bidx;
#ifdef CUEMU_ASAN
    __sanitizer_start_switch_fiber(from->state == F_DONE ? NULL : &from->fake_stack, to_main ? S->main_bottom : to->stack,
                                   to_main ? S->main_size : S->stack_size);
#endif
#if defined(__x86_64__)
    mtac_cuemu_switch(&from->sp, to->sp);
#else
    swapcontext(&from->uc, &to->uc);
#endif
#ifdef CUEMU_ASAN
    __sanitizer_finish_switch_fiber(from->fake_stack, NULL, NULL);
#endif
}

void fiber_main(void *p) {
    fiber *f = (fiber *)p;
#ifdef CUEMU_ASAN
    __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
    S->fn(S->arg);
    if (f->ncopies)
        fatal("%s", S->kernel, "a thread ended with cp.async copies that no cp.async.wait_group completed");
    f->state = F_DONE;
    S->blk[f->blk].done++;
    switch_fibers(f, next_of_pass());
}

#if !defined(__x86_64__)
void fiber_entry(unsigned lo, unsigned hi) { fiber_main((void *)((uintptr_t)lo | (uintptr_t)hi << 32)); }
#endif

// A fresh fiber on stack i that will run fiber_main(f): thread i % nthreads of block i / nthreads.
void fiber_init(fiber *f, unsigned i) {
    f->stack = S->stacks + (size_t)i * (S->stack_size + 4096) + 4096;
    f->state = F_READY, f->shared_n = 0, f->fake_stack = NULL, f->ncopies = 0, f->groups = 0, f->queued = false;
    f->arrived = false, f->arrive_phase = 0, f->held = false;
    const unsigned t = i % S->nthreads;
    f->blk = i / S->nthreads, f->bidx = S->first_block, f->bidx.x += f->blk;
    f->idx.x = t % block_dim.x, f->idx.y = t / block_dim.x % block_dim.y, f->idx.z = t / (block_dim.x * block_dim.y);
#if defined(__x86_64__)
    // Stacks are a power of two apart: their tops are staggered by 3 cache lines a fiber, or the
    // live frames of a block's threads would all fall in the same cache sets.
    void **top = (void **)(f->stack + S->stack_size - (size_t)(i % 21) * 192);  // 16-byte aligned
    void **sp = top - 7;
    sp[0] = sp[1] = NULL;                                   // r15, r14
    sp[2] = (void *)fiber_main;                             // r13
    sp[3] = f;                                              // r12
    sp[4] = sp[5] = NULL;                                   // rbx, rbp
    sp[6] = (void *)mtac_cuemu_fiber_start;                 // return address
    f->sp = sp;
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = S->stack_size;
    f->uc.uc_link = NULL;
    makecontext(&f->uc, (void (*)(void))fiber_entry, 2, (unsigned)(uintptr_t)f, (unsigned)((uintptr_t)f >> 32));
#endif
}

// Guard pages below the first n stacks (each mprotect splits the mapping: only what runs gets them).
void guard_stacks(unsigned n) {
    for (; S->nguarded < n; S->nguarded++)
        mprotect(S->stacks + (size_t)S->nguarded * (S->stack_size + 4096), 4096, PROT_NONE);
}

sched *sched_get(void) {
    if (S) return S;
    S = (sched *)calloc(1, sizeof *S);
    if (!S) abort();
    // Kernels use little stack; AddressSanitizer's redzones make frames larger.
#ifdef CUEMU_ASAN
    S->stack_size = 256 * 1024;
#else
    S->stack_size = 64 * 1024;
#endif
    // Room for a whole cluster's stacks, reserved only (the guard pages are set as they come in use).
    const size_t span = (S->stack_size + 4096) * MAX_FIBERS;
    void *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    S->fibers = (fiber *)calloc(MAX_FIBERS, sizeof(fiber));
    if (m == MAP_FAILED || !S->fibers) {
        fprintf(stderr, "cuda-emu: cannot map the fibers' stacks\n");
        abort();
    }
    S->stacks = (char *)m;
    guard_stacks(MAX_THREADS);
#ifdef CUEMU_ASAN
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) || pthread_attr_getstack(&attr, &S->main_bottom, &S->main_size)) {
        fprintf(stderr, "cuda-emu: cannot find this thread's stack\n");
        abort();
    }
    pthread_attr_destroy(&attr);
#endif
    const unsigned k = __atomic_fetch_add(&nscheds, 1, __ATOMIC_RELAXED);
    if (k < sizeof all_scheds / sizeof all_scheds[0]) all_scheds[k] = S;
    return S;
}

uint64_t gcd(uint64_t a, uint64_t b) {
    while (b) {
        const uint64_t t = a % b;
        a = b, b = t;
    }
    return a;
}

// (a i + c) mod n, for i, c < n.
uint64_t affine(uint64_t a, uint64_t i, uint64_t c, uint64_t n) {
    const uint64_t x = (uint64_t)((unsigned __int128)a * i % n) + c;
    return x >= n ? x - n : x;
}

uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// order[0..n) for pass p of unit u: in order, reversed or shuffled (see cuda_emu_ctl.h).
void make_order(unsigned *order, unsigned n, uint64_t pass, uint64_t unit) {
    const unsigned mode = (unsigned)((pass + S->launch + schedule_seed) % 3);
    for (unsigned i = 0; i < n; i++) order[i] = mode == 1 ? n - 1 - i : i;
    if (mode != 2) return;
    uint64_t r = mix64(schedule_seed * 0x9E3779B97F4A7C15ULL + mix64(S->launch * 31 + unit) + pass);
    for (unsigned i = n; i > 1; i--) {
        r = mix64(r + 0x9E3779B97F4A7C15ULL);
        const unsigned j = (unsigned)(r % i), t = order[i - 1];
        order[i - 1] = order[j], order[j] = t;
    }
}

void shared_free(void) {
    for (unsigned r = 0; r < S->cs; r++) {
        block_state *b = &S->blk[r];
        for (unsigned i = 0; i < b->shared_n; i++) free(b->shared[i]);
        free(b->dyn_shared);
        b->shared_n = 0, b->shared_total = 0, b->dyn_shared = NULL;
    }
}

// Shared memory: 128-byte aligned, as a GPU's dynamic shared memory is at least (ldmatrix and
// cp.async need 16 bytes).
void *poisoned(size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, 128, bytes ? bytes : 1)) return NULL;
    memset(p, 0xff, bytes);  // every float, double, bf16 and fp16 of it NaN
    return p;
}

// The waiters at barrier.cluster for a completed phase (and the threads held at the start): all
// (every block's), or, so that the blocks of a cluster lag one another when warps run ahead, one
// block's only (the first in (phase + schedule + k) % cs order that has any). 1 when it released any.
bool release_cluster(bool all) {
    bool any = false;
    for (unsigned k = 0; k < S->cs && (all || !any); k++) {
        fiber *f = S->fibers + (unsigned)((S->cl_phase + schedule_seed + k) % S->cs) * S->nthreads;
        for (unsigned t = 0; t < S->nthreads; t++)
            if (f[t].state == F_CLUSTER && (f[t].held || f[t].arrive_phase < S->cl_phase))
                f[t].state = F_READY, f[t].held = false, any = true;
    }
    return any;
}

// Releases the threads waiting at __syncthreads() in each block where all wait there, and those
// waiting at barrier.cluster for a phase that has completed: with warps running ahead (unless
// all), those of one block, and only when no block barrier released (release_cluster). 1 when it
// released any; fatal when a block's barrier can never release (some of its threads exited).
bool release_barriers(bool all) {
    bool any = false;
    for (unsigned r = 0; r < S->cs; r++) {
        fiber *f = S->fibers + r * S->nthreads;
        unsigned waiting = 0;
        for (unsigned t = 0; t < S->nthreads; t++) waiting += f[t].state == F_BARRIER;
        if (waiting && S->blk[r].done)
            fatal("%s", S->kernel, "barrier divergence: some threads of a block exited while others wait at __syncthreads()");
        if (waiting < S->nthreads) continue;
        for (unsigned t = 0; t < S->nthreads; t++) f[t].state = F_READY;
        any = true;
    }
    if (all || !run_ahead()) return release_cluster(true) || any;
    return any || release_cluster(false);
}

// After a pass: 1 when every thread is done; else makes ready those that can run on (fatal when
// none can).
bool pass_end(void) {
    const unsigned n = S->cs * S->nthreads;
    unsigned done = 0, woken = 0, waiting = 0, cluster = 0;
    for (unsigned t = 0; t < n; t++) {
        const int st = S->fibers[t].state;
        done += st == F_DONE, woken += st == F_WOKEN, waiting += st == F_WARP, cluster += st == F_CLUSTER;
    }
    if (woken) {  // warps released in this pass run on in the next, in its order
        for (unsigned t = 0; t < n; t++)
            if (S->fibers[t].state == F_WOKEN) S->fibers[t].state = F_READY;
        return false;
    }
    // Lanes at a warp operation may wait for lanes of their warp at a cluster barrier whose phase
    // completed in this pass (the last to arrive ran on): those are released first.
    if (waiting && release_barriers(true)) return false;
    if (waiting)
        fatal("%s", S->kernel,
              "warp divergence: some lanes of a warp wait at a warp-collective operation for lanes of its mask that "
              "exited, wait at __syncthreads() or at another warp operation");
    if (done == n) return true;
    if (release_barriers(false)) return false;
    // A GPU's exit would release the barrier (PTX "exit"); cluster_ptx.cuh's rule is that every
    // thread arrives, so a thread that leaves without arriving is a bug, as at __syncthreads().
    if (cluster && done)
        fatal("%s", S->kernel,
              "cluster barrier divergence: some threads of the cluster exited while others wait at barrier.cluster");
    fatal("%s", S->kernel,
          "deadlock: threads wait at __syncthreads() and at barrier.cluster, and neither barrier can release (threads "
          "of a block wait at different barriers)");
    return false;
}

// One cluster (a launch without clusters: one block): the threads of all its blocks as fibers,
// pass by pass in one order over them all, until all are done.
void run_cluster(uint64_t cluster_no) {
    const unsigned n = S->cs * S->nthreads;
    guard_stacks(n);
    for (unsigned r = 0; r < S->cs; r++) {
        block_state *b = &S->blk[r];
        if (S->dyn_bytes && !(b->dyn_shared = poisoned(S->dyn_bytes))) fatal("%s", S->kernel, "out of memory");
        b->shared_total = S->dyn_bytes, b->done = 0;
    }
    for (unsigned t = 0; t < n; t++) fiber_init(&S->fibers[t], t);
    // With warps running ahead, one block starts: it runs to its first barrier.cluster wait (or
    // its exit) before the next starts (release_cluster), as when a GPU starts a cluster's blocks late.
    for (unsigned t = 0; run_ahead() && t < n; t++)
        if (t / S->nthreads != schedule_seed % S->cs) S->fibers[t].state = F_CLUSTER, S->fibers[t].held = true;
    for (unsigned w = 0; w < n / 32; w++)
        for (meeting &m : S->warps[w].m) m.op = NULL;
    S->ahead_head = S->ahead_n = 0, S->cl_arrivals = 0, S->cl_phase = 0;
    for (uint64_t pass = 0;; pass++) {
        make_order(S->order, n, pass, cluster_no + 1);
        S->norder = n, S->pos = 0;
        fiber *first = next_of_pass();
        if (first != &S->main) switch_fibers(&S->main, first);
        if (pass_end()) break;
    }
    shared_free();
}

cudaError_t last_error;  // what cudaGetLastError returns (and clears)

cudaError_t fail(cudaError_t e) {
    last_error = e;
    return e;
}

// Device allocations, for cudaFree's and the copies' checks.
struct alloc {
    char *p;
    size_t bytes;
    alloc *next;
};
alloc *allocs;
size_t device_used;
pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;

// 1 when [p, p + bytes) lies within one device allocation.
int on_device(const void *p, size_t bytes) {
    pthread_mutex_lock(&mem_lock);
    int ok = 0;
    for (alloc *a = allocs; a && !ok; a = a->next)
        ok = (const char *)p >= a->p && (const char *)p + bytes <= a->p + a->bytes && (const char *)p < a->p + (a->bytes ? a->bytes : 1);
    pthread_mutex_unlock(&mem_lock);
    return ok;
}

// Kernels that opted in to more dynamic shared memory (cudaFuncSetAttribute).
struct optin {
    const void *kernel;
    size_t bytes;
} optins[64];
int noptins;

size_t shared_limit_of(const void *kernel) {
    for (int i = 0; i < noptins; i++)
        if (optins[i].kernel == kernel) return optins[i].bytes;
    return SHARED_DEFAULT;
}

struct cuemu_stream_ok {
    int magic;
};

}  // namespace

void syncthreads(void) {
    fiber *f = S ? S->cur : NULL;
    if (!f) abort();
    f->state = F_BARRIER;
    switch_fibers(f, next_of_pass());
}

namespace {

// Static shared array k of block b, of bytes: allocated by the first of its threads to declare it
// (or by cluster_map, for a block of the cluster whose threads have not declared it yet).
void *block_array(block_state *b, unsigned k, size_t bytes, size_t align) {
    if (k == b->shared_n) {
        if (k == 64) fatal("%s", S->kernel, "more than 64 shared arrays");
        b->shared_total += bytes;
        if (b->shared_total > S->shared_limit)
            fatal("uses %s of shared memory: a GPU refuses this launch", S->kernel, "more than the limit (48 KB without the opt-in)");
        void *p = poisoned(bytes);
        if (!p || ((uintptr_t)p % align)) fatal("%s", S->kernel, "cannot allocate shared memory");
        b->shared[k] = p, b->shared_bytes[k] = bytes, b->shared_n++;
    } else if (k > b->shared_n || b->shared_bytes[k] != bytes) {
        fatal("%s", S->kernel, "the threads of a block declare different shared arrays");
    }
    return b->shared[k];
}

}  // namespace

void *shared_array(size_t bytes, size_t align) {
    fiber *f = S->cur;
    return block_array(&S->blk[f->blk], f->shared_n++, bytes, align);
}

void *dynamic_shared(void) { return S->blk[S->cur->blk].dyn_shared; }

namespace {

// The calling thread of a kernel (fatal outside one).
fiber *kernel_thread(const char *op) {
    fiber *f = S ? S->cur : NULL;
    if (!f) {
        fprintf(stderr, "cuda-emu: %s called outside a kernel\n", op);
        abort();
    }
    return f;
}

// The calling thread, after the checks every warp-collective operation gets: in a kernel, in a
// block of whole warps, and named in the operation's mask (PTX: the executing thread must be in
// membermask).
fiber *lane_of(const char *op, unsigned mask) {
    fiber *f = kernel_thread(op);
    if ((block_dim.x * block_dim.y * block_dim.z) % 32)
        fatal("%s: warp-collective, and this block is not a whole number of warps", S->kernel, op);
    const unsigned lane = (unsigned)(f - S->fibers) % 32;
    if (!(mask >> lane & 1)) {
        fprintf(stderr, "cuda-emu: kernel %s: %s: lane %u executes it with mask 0x%08x, which does not name it\n",
                S->kernel, op, lane, mask);
        abort();
    }
    return f;
}

const unsigned FULL = 0xffffffffu;

// Adds n to count c of the running launch (its blocks run on several OS threads at once).
void tally(uint64_t mta_kernel_ops::*c, uint64_t n) { __atomic_fetch_add(&(S->ops->*c), n, __ATOMIC_RELAXED); }
// 1 when f is the first lane of mask: a warp instruction is counted once, by that lane.
bool counts_for_warp(const fiber *f, unsigned mask) { return (unsigned)(f - S->fibers) % 32 == (unsigned)__builtin_ctz(mask); }

// Warps running ahead: the lanes in mask of the warp from thread w0 are ready at once and run
// next, before the rest of the pass, in the pass's order; so the warp goes on to its next block
// barrier, its exit or a wait on another warp before the warps after it start, and which warp
// leads (the first whose lanes all arrive) follows the pass's order: the first warp in order, the
// last reversed, any shuffled.
void release_ahead(unsigned w0, unsigned mask) {
    for (unsigned i = 0; i < S->norder; i++) {
        const unsigned t = S->order[i];
        fiber *f = &S->fibers[t];
        if (t < w0 || t >= w0 + 32 || !(mask >> (t - w0) & 1)) continue;
        f->state = F_READY;
        if (f->queued) continue;
        f->queued = true;
        S->ahead[(S->ahead_head + S->ahead_n++) % MAX_FIBERS] = t;
    }
}

// f deposits its nwords words at op's meeting of the lanes in mask and waits until all of them
// have arrived; the last to arrive runs at_release (if any) on the gathered words, then releases
// them for the next pass (at once, when warps run ahead). The caller reads what it needs from the meeting, then leave()s it.
meeting *meet(fiber *f, const char *op, unsigned mask, const uint32_t *words, unsigned nwords,
              void (*at_release)(meeting *)) {
    const unsigned i = (unsigned)(f - S->fibers), lane = i % 32, w0 = i / 32 * 32;
    warp_state *w = &S->warps[i / 32];
    meeting *m = NULL, *free_m = NULL;
    for (meeting *x = w->m; x < w->m + MEETINGS && !m; x++) {
        if (!x->op) free_m = free_m ? free_m : x;
        else if (x->gathering && x->mask == mask) m = x;
    }
    if (m && strcmp(m->op, op)) {
        fprintf(stderr, "cuda-emu: kernel %s: the lanes of warp %u reach different warp operations (%s, %s)\n", S->kernel,
                w0 / 32, m->op, op);
        abort();
    }
    if (!m) {
        if (!free_m) fatal("%s", S->kernel, "more warp operations of one warp in progress than the emulator holds (8)");
        m = free_m, m->op = op, m->mask = mask, m->arrived = 0, m->gathering = 1;
    }
    if (nwords) memcpy(m->vals[lane], words, nwords * sizeof *words);
    m->arrived |= 1u << lane;
    f->state = F_WARP;
    if (m->arrived == mask) {
        if (at_release) at_release(m);
        m->gathering = 0, m->to_read = mask;
        if (run_ahead()) release_ahead(w0, mask);
        else
            for (unsigned l = 0; l < 32; l++)
                if (mask >> l & 1) S->fibers[w0 + l].state = F_WOKEN;
    }
    switch_fibers(f, next_of_pass());
    return m;
}

void leave(meeting *m, const fiber *f) {
    m->to_read &= ~(1u << (unsigned)(f - S->fibers) % 32);
    if (!m->to_read) m->op = NULL;
}

// Which of block b's shared arrays [p, p + bytes) lies within: its static array k (0..63), 64 its
// dynamic shared memory, -1 none.
int shared_index(const block_state *b, const void *p, size_t bytes) {
    const char *c = (const char *)p;
    for (unsigned i = 0; i < b->shared_n; i++)
        if (c >= (char *)b->shared[i] && c + bytes <= (char *)b->shared[i] + b->shared_bytes[i]) return (int)i;
    return b->dyn_shared && c >= (char *)b->dyn_shared && c + bytes <= (char *)b->dyn_shared + S->dyn_bytes ? 64 : -1;
}

// 1 when [p, p + bytes) lies within one of the running block's shared arrays (static or dynamic).
int in_shared(const void *p, size_t bytes) { return shared_index(&S->blk[S->cur->blk], p, bytes) >= 0; }

void lane_fatal(const char *op, unsigned lane, const char *what) {
    fprintf(stderr, "cuda-emu: kernel %s: %s: lane %u: %s\n", S->kernel, op, lane, what);
    abort();
}

// ldmatrix at the moment the warp has gathered: every lane asked for the same shape, and lanes
// 0..8n-1 gave the addresses of 16-byte, 16-byte aligned rows in the block's shared memory; the
// rows are read now, before any lane runs on (a GPU reads them as one instruction).
void ldmatrix_rows(meeting *m) {
    const unsigned n = m->vals[0][2];
    for (unsigned l = 0; l < 32; l++)
        if (m->vals[l][2] != n || m->vals[l][3] != m->vals[0][3])
            lane_fatal("ldmatrix", l, "the lanes of the warp ask for different shapes (.x1/.x2/.x4, .trans)");
    for (unsigned l = 0; l < 8 * n; l++) {
        const void *p = (const void *)((uintptr_t)m->vals[l][0] | (uintptr_t)m->vals[l][1] << 32);
        if ((uintptr_t)p % 16) lane_fatal("ldmatrix", l, "its row address is not 16-byte aligned");
        if (!in_shared(p, 16)) lane_fatal("ldmatrix", l, "its row is not within the block's shared memory");
        memcpy(m->rows[l], p, 16);
    }
}

float bf16_half(uint32_t w, unsigned h) {
    const uint32_t u = (w >> 16 * h & 0xffff) << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

// The m16n8k16 fragments' elements (mma_ptx.cuh's table, PTX ISA "Matrix Fragments for
// mma.m16n8k16"): A[r][k] is half k % 2 of register r / 8 + 2 (k / 8) of lane 4 (r % 8) + (k % 8) / 2;
// B[k][n] half k % 2 of register k / 8 of lane 4 n + (k % 8) / 2 (vals[lane][4..5]).
float frag_a(const meeting *m, unsigned r, unsigned k) { return bf16_half(m->vals[4 * (r % 8) + k % 8 / 2][r / 8 + 2 * (k / 8)], k % 2); }
float frag_b(const meeting *m, unsigned k, unsigned n) { return bf16_half(m->vals[4 * n + k % 8 / 2][4 + k / 8], k % 2); }

// The 16-bit element e of a 16-byte row (little-endian, as the host and a GPU store it).
uint32_t row_elem(const uint32_t row[4], unsigned e) { return row[e / 2] >> 16 * (e % 2) & 0xffff; }

void complete_copy(const cp_copy &c) {
    if (c.full) memcpy(c.dst, c.src, c.bytes);
    else memset(c.dst, 0, c.bytes);
}

}  // namespace

void warp_sync(const char *op) {
    fiber *f = lane_of(op, FULL);
    leave(meet(f, op, FULL, NULL, 0, NULL), f);
}

void syncwarp(unsigned mask) {
    fiber *f = lane_of("__syncwarp", mask);
    leave(meet(f, "__syncwarp", mask, NULL, 0, NULL), f);
}

uint32_t warp_shuffle(const char *op, unsigned mask, uint32_t v, int arg, int width, int butterfly) {
    fiber *f = lane_of(op, mask);
    if (width < 1 || width > 32 || (width & (width - 1)))
        fatal("%s: width must be a power of two up to 32", S->kernel, op);
    const unsigned lane = (unsigned)(f - S->fibers) % 32, w = (unsigned)width;
    // The source lane as PTX's shfl.sync defines it, within the lane's segment of w lanes
    // [first, first + w): srcLane modulo w, or lane ^ laneMask (its low 5 bits), the lane's own
    // value when that is in a later segment.
    const unsigned first = lane & ~(w - 1);
    unsigned src = first + ((unsigned)arg & (w - 1));
    if (butterfly) {
        src = lane ^ ((unsigned)arg & 31);
        if (src >= first + w) src = lane;
    }
    // A lane outside the mask takes no part: what it would give is undefined.
    if (!(mask >> src & 1)) lane_fatal(op, lane, "it reads a lane that its mask does not name");
    if (counts_for_warp(f, mask)) tally(&mta_kernel_ops::shfl, 1);
    meeting *m = meet(f, op, mask, &v, 1, NULL);
    const uint32_t r = m->vals[src][0];
    leave(m, f);
    return r;
}

void mma_16816_bf16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    static const char op[] = "mma.sync.m16n8k16";
    fiber *f = lane_of(op, FULL);
    const uint32_t regs[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    if (counts_for_warp(f, FULL)) tally(&mta_kernel_ops::mma, 1);
    meeting *m = meet(f, op, FULL, regs, 6, NULL);
    const unsigned lane = (unsigned)(f - S->fibers) % 32, g = lane / 4, t = lane % 4;
    // d[i] = D[g + 8 (i / 2)][2 t + i % 2]: the accumulator plus the 16 products in k order, in
    // float32. A product of two bf16 (8-bit significands) is exact in float32, so only the 16
    // additions round, each to nearest.
    for (unsigned i = 0; i < 4; i++) {
        const unsigned r = g + 8 * (i / 2), n = 2 * t + i % 2;
        float acc = d[i];
        for (unsigned k = 0; k < 16; k++) acc += frag_a(m, r, k) * frag_b(m, k, n);
        d[i] = acc;
    }
    leave(m, f);
}

void ldmatrix(uint32_t *r, const void *p, int n, int trans) {
    static const char op[] = "ldmatrix";
    fiber *f = lane_of(op, FULL);
    if (n != 1 && n != 2 && n != 4) fatal("%s: .x1, .x2 or .x4 only", S->kernel, op);
    const uint32_t words[4] = {(uint32_t)(uintptr_t)p, (uint32_t)((uintptr_t)p >> 32), (uint32_t)n, (uint32_t)!!trans};
    if (counts_for_warp(f, FULL)) tally(&mta_kernel_ops::ldmatrix, 1), tally(&mta_kernel_ops::ldmatrix_bytes, 128 * (unsigned)n);
    meeting *m = meet(f, op, FULL, words, 4, ldmatrix_rows);
    const unsigned lane = (unsigned)(f - S->fibers) % 32, g = lane / 4, t = lane % 4;
    // r[j]: matrix j's row g, elements 2t and 2t + 1; .trans: its rows 2t and 2t + 1, element g.
    for (int j = 0; j < n; j++) {
        const uint32_t(*rows)[4] = m->rows + 8 * j;
        r[j] = trans ? row_elem(rows[2 * t], g) | row_elem(rows[2 * t + 1], g) << 16
                     : row_elem(rows[g], 2 * t) | row_elem(rows[g], 2 * t + 1) << 16;
    }
    leave(m, f);
}

void cp_async(void *dst, const void *src, size_t bytes, bool full) {
    fiber *f = kernel_thread("cp.async");
    if (bytes != 4 && bytes != 8 && bytes != 16) fatal("%s", S->kernel, "cp.async: copies of 4, 8 or 16 bytes only");
    if ((uintptr_t)dst % bytes || (uintptr_t)src % bytes)
        fatal("%s", S->kernel, "cp.async: its shared and global addresses must be aligned to its size");
    if (!in_shared(dst, bytes)) fatal("%s", S->kernel, "cp.async: its destination is not in the block's shared memory");
    if (full && !on_device(src, bytes)) fatal("%s", S->kernel, "cp.async: its source is not in device memory");
    if (f->ncopies == f->copies_cap) {
        f->copies_cap = f->copies_cap ? 2 * f->copies_cap : 64;
        f->copies = (cp_copy *)realloc(f->copies, f->copies_cap * sizeof *f->copies);
        if (!f->copies) fatal("%s", S->kernel, "out of memory");
    }
    f->copies[f->ncopies++] = cp_copy{dst, src, bytes, f->groups, full};
    tally(&mta_kernel_ops::cp_async, 1), tally(&mta_kernel_ops::cp_async_bytes, bytes);
    memset(dst, 0xff, bytes);  // NaN until a wait completes the copy: a read before it shows
}

void cp_async_commit(void) { kernel_thread("cp.async.commit_group")->groups++; }

// PTX: wait until at most the n most recent committed groups are pending. Copies not yet
// committed belong to no group, and wait_group does not complete them.
void cp_async_wait(int n) {
    fiber *f = kernel_thread("cp.async.wait_group");
    if (n < 0) fatal("%s", S->kernel, "cp.async.wait_group: a negative count");
    const unsigned below = f->groups > (unsigned)n ? f->groups - (unsigned)n : 0;
    unsigned kept = 0;
    for (unsigned i = 0; i < f->ncopies; i++) {
        if (f->copies[i].group < below) complete_copy(f->copies[i]);
        else f->copies[kept++] = f->copies[i];
    }
    f->ncopies = kept;
}

// ---- thread block clusters ----

// A launch without clusters is a cluster of one block, as on a GPU (%cluster_nctarank is 1).
unsigned cluster_rank(void) { return kernel_thread("%cluster_ctarank")->blk; }
unsigned cluster_size(void) { return (void)kernel_thread("%cluster_nctarank"), S->cs; }

void *cluster_map(const void *p, unsigned rank) {
    fiber *f = kernel_thread("mapa");
    block_state *b = &S->blk[f->blk];
    const int k = shared_index(b, p, 1);
    if (k < 0) fatal("%s", S->kernel, "mapa: the address is not in the calling block's shared memory");
    if (rank >= S->cs) fatal("%s", S->kernel, "mapa: the rank is not that of a block of the cluster");
    block_state *to = &S->blk[rank];
    if (k == 64) return (char *)to->dyn_shared + ((const char *)p - (char *)b->dyn_shared);
    // Block rank's threads may not have declared the array yet: a GPU's static shared memory is
    // there from the block's start.
    for (unsigned i = to->shared_n; i <= (unsigned)k; i++) block_array(to, i, b->shared_bytes[i], 128);
    return (char *)block_array(to, (unsigned)k, b->shared_bytes[k], 128) + ((const char *)p - (char *)b->shared[k]);
}

namespace {

// The block of the caller's cluster whose shared memory [p, p + bytes) lies within (one array of
// it), checked as a GPU's ld/st.shared::cluster needs it: aligned, and its block still running.
block_state *cluster_target(const char *op, const void *p, size_t bytes) {
    kernel_thread(op);
    if (bytes != 4 && bytes != 8 && bytes != 16) fatal("%s: 4, 8 or 16 bytes only", S->kernel, op);
    if ((uintptr_t)p % bytes) fatal("%s: the address is not aligned to its size", S->kernel, op);
    for (unsigned r = 0; r < S->cs; r++) {
        block_state *b = &S->blk[r];
        if (shared_index(b, p, bytes) < 0) continue;
        if (b->done == S->nthreads)
            fatal("%s: the block whose shared memory it reaches has exited (end the kernel with cl_arrive_relaxed(); "
                  "cl_wait())", S->kernel, op);
        return b;
    }
    fatal("%s: the address is not within one shared array of a block of the cluster", S->kernel, op);
    return NULL;
}

}  // namespace

void cluster_store(void *dst, const void *src, size_t bytes) {
    cluster_target("st.shared::cluster", dst, bytes);
    memcpy(dst, src, bytes);
    tally(&mta_kernel_ops::dsmem_stores, 1), tally(&mta_kernel_ops::dsmem_store_bytes, bytes);
}

void cluster_load(void *dst, const void *src, size_t bytes) {
    cluster_target("ld.shared::cluster", src, bytes);
    memcpy(dst, src, bytes);
    tally(&mta_kernel_ops::dsmem_loads, 1), tally(&mta_kernel_ops::dsmem_load_bytes, bytes);
}

// barrier.cluster in phases: a phase completes when every thread of the cluster has arrived; the
// threads waiting for it are released at the end of the pass, and run on in the next.
void cluster_arrive(int release) {
    (void)release;  // the emulator's memory is sequentially consistent: release orders nothing more
    fiber *f = kernel_thread("barrier.cluster.arrive");
    if (f->arrived) fatal("%s", S->kernel, "barrier.cluster.arrive: a thread arrives twice without waiting between");
    f->arrived = true, f->arrive_phase = S->cl_phase;
    if (++S->cl_arrivals < S->cs * S->nthreads) return;
    S->cl_arrivals = 0, S->cl_phase++;
    tally(&mta_kernel_ops::cluster_barriers, S->cs);
}

void cluster_wait(void) {
    fiber *f = kernel_thread("barrier.cluster.wait");
    if (!f->arrived) fatal("%s", S->kernel, "barrier.cluster.wait: a thread waits without having arrived");
    if (f->arrive_phase == S->cl_phase || run_ahead()) {  // the last to arrive too, so that blocks lag
        f->state = F_CLUSTER;
        switch_fibers(f, next_of_pass());
    }
    f->arrived = false;
}

void launch_grid(const char *name, const void *kernel, dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
                 void (*fn)(void *), void *arg, mta_kernel_ops *ops, unsigned cluster) {
    sched_get();
    const unsigned long long nthreads = (unsigned long long)block.x * block.y * block.z;
    if (!block.x || !block.y || !block.z || block.x > MAX_BLOCK_XY || block.y > MAX_BLOCK_XY || block.z > MAX_BLOCK_Z ||
        nthreads > MAX_THREADS || !grid.x || !grid.y || !grid.z || grid.x > MAX_GRID_X || grid.y > MAX_GRID_YZ ||
        grid.z > MAX_GRID_YZ) {
        fail(cudaErrorInvalidConfiguration);
        return;
    }
    if (!cluster || cluster > MAX_CLUSTER || grid.x % cluster) {  // the portable size: 8 at most
        fail(cudaErrorInvalidClusterSize);
        return;
    }
    const size_t limit = shared_limit_of(kernel);
    if (shmem > limit || shmem > shared_optin) {
        fail(cudaErrorInvalidValue);
        return;
    }
    (void)s;  // every stream runs in call order
    if (S->fn) fatal("%s", name, "a kernel launched from inside a kernel");
    const uint64_t launch = __atomic_fetch_add(&launches, 1, __ATOMIC_RELAXED);
    const uint64_t nblocks = (uint64_t)grid.x / cluster * grid.y * grid.z;  // clusters (of one block, or more)
    // Blocks (clusters) in order, reversed, or shuffled by b = (a i + c) mod nblocks with a
    // coprime to nblocks.
    const unsigned mode = block_order >= 0 ? (unsigned)block_order : (unsigned)((launch + schedule_seed) % 3);
    const uint64_t r = mix64(schedule_seed * 0x9E3779B97F4A7C15ULL + launch);
    uint64_t a = nblocks > 1 ? r % nblocks : 1;
    while (gcd(a, nblocks) != 1) a = (a + 1) % nblocks;
    const uint64_t c = nblocks ? (r >> 32) % nblocks : 0;
    mta_kernel_ops counted = {};
    // Blocks (clusters) are independent on a GPU: the CPU's threads share out those of a large
    // launch (each with its own fibers), one after another in the order above on each.
#pragma omp parallel for schedule(static, 1) if (nblocks * cluster * nthreads >= 16384)
    for (uint64_t i = 0; i < nblocks; i++) {
        sched_get();
        S->fn = fn, S->arg = arg, S->kernel = name, S->dyn_bytes = shmem, S->shared_limit = limit, S->launch = launch;
        S->ops = &counted, S->cs = cluster, S->nthreads = (unsigned)nthreads;
        block_dim = block, grid_dim = grid;
        const uint64_t b = mode == 0 ? i : mode == 1 ? nblocks - 1 - i : affine(a, i, c, nblocks), gx = grid.x / cluster;
        S->first_block.x = (unsigned)(b % gx * cluster), S->first_block.y = (unsigned)(b / gx % grid.y);
        S->first_block.z = (unsigned)(b / (gx * grid.y));
        block_idx = S->first_block;
        run_cluster(b);
        S->fn = NULL, S->cur = NULL;
    }
    if (!ops) return;
    ops->mma += counted.mma, ops->ldmatrix += counted.ldmatrix, ops->ldmatrix_bytes += counted.ldmatrix_bytes;
    ops->cp_async += counted.cp_async, ops->cp_async_bytes += counted.cp_async_bytes;
    ops->shfl += counted.shfl, ops->dsmem_stores += counted.dsmem_stores;
    ops->dsmem_store_bytes += counted.dsmem_store_bytes, ops->dsmem_loads += counted.dsmem_loads;
    ops->dsmem_load_bytes += counted.dsmem_load_bytes, ops->cluster_barriers += counted.cluster_barriers;
}

}  // namespace cuemu

using namespace cuemu;

// ---- the runtime API ----

cudaError_t cudaMalloc(void **p, size_t bytes) {
    if (!p) return fail(cudaErrorInvalidValue);
    *p = NULL;
    pthread_mutex_lock(&mem_lock);
    const int room = bytes <= DEVICE_MEMORY - device_used;
    pthread_mutex_unlock(&mem_lock);
    if (!room) return fail(cudaErrorMemoryAllocation);
    alloc *a = (alloc *)malloc(sizeof *a);
    // 256-byte aligned, as cudaMalloc's; every byte 0xff (NaN) until written
    char *m = NULL;
    if (!a || posix_memalign((void **)&m, 256, bytes ? (bytes + 255) / 256 * 256 : 256)) {
        free(a);
        return fail(cudaErrorMemoryAllocation);
    }
    memset(m, 0xff, bytes);
    a->p = m, a->bytes = bytes;
    pthread_mutex_lock(&mem_lock);
    a->next = allocs, allocs = a, device_used += bytes;
    pthread_mutex_unlock(&mem_lock);
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p) {
    if (!p) return cudaSuccess;
    pthread_mutex_lock(&mem_lock);
    alloc **at = &allocs;
    while (*at && (*at)->p != (char *)p) at = &(*at)->next;
    alloc *a = *at;
    if (a) *at = a->next, device_used -= a->bytes;
    pthread_mutex_unlock(&mem_lock);
    if (!a) return fail(cudaErrorInvalidDevicePointer);
    free(a->p);
    free(a);
    return cudaSuccess;
}

cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *at, const void *p) {
    if (!at) return fail(cudaErrorInvalidValue);
    const int dev = p && on_device(p, 1);
    at->type = dev ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
    at->device = 0;
    at->devicePointer = dev ? (void *)p : NULL, at->hostPointer = dev ? NULL : (void *)p;
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind) {
    if (!bytes) return cudaSuccess;
    if (!dst || !src) return fail(cudaErrorInvalidValue);
    const int dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const int src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind > cudaMemcpyDefault) return fail(cudaErrorInvalidMemcpyDirection);
    if (kind != cudaMemcpyDefault && ((dst_dev && !on_device(dst, bytes)) || (src_dev && !on_device(src, bytes))))
        return fail(cudaErrorInvalidValue);
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(dst, src, bytes, kind);
}

cudaError_t cudaMemset(void *p, int value, size_t bytes) {
    if (!bytes) return cudaSuccess;
    if (!on_device(p, bytes)) return fail(cudaErrorInvalidValue);
    memset(p, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t) { return cudaMemset(p, value, bytes); }

cudaError_t cudaGetLastError(void) {
    const cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorInvalidClusterSize: return "a kernel launch error has occurred due to cluster misconfiguration";
    }
    return "unrecognized error code";
}

cudaError_t cudaGetDeviceCount(int *n) {
    if (!n) return fail(cudaErrorInvalidValue);
    *n = 1;
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *dev) {
    if (!dev) return fail(cudaErrorInvalidValue);
    *dev = 0;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *prop, int dev) {
    if (!prop) return fail(cudaErrorInvalidValue);
    if (dev != 0) return fail(cudaErrorInvalidDevice);
    memset(prop, 0, sizeof *prop);
    snprintf(prop->name, sizeof prop->name, "mtac CUDA emulator (CPU)");
    prop->totalGlobalMem = DEVICE_MEMORY;
    prop->sharedMemPerBlock = SHARED_DEFAULT, prop->sharedMemPerBlockOptin = shared_optin;
    prop->major = MTAC_CUDA_EMU_ARCH / 10, prop->minor = MTAC_CUDA_EMU_ARCH % 10;
    prop->multiProcessorCount = sm_count, prop->maxThreadsPerBlock = (int)MAX_THREADS, prop->warpSize = 32;
    prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = (int)MAX_BLOCK_XY, prop->maxThreadsDim[2] = (int)MAX_BLOCK_Z;
    prop->maxGridSize[0] = (int)MAX_GRID_X, prop->maxGridSize[1] = prop->maxGridSize[2] = (int)MAX_GRID_YZ;
    return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int dev) {
    if (!value) return fail(cudaErrorInvalidValue);
    if (dev != 0) return fail(cudaErrorInvalidDevice);
    if (attr == cudaDevAttrComputeCapabilityMajor) *value = MTAC_CUDA_EMU_ARCH / 10;
    else if (attr == cudaDevAttrComputeCapabilityMinor) *value = MTAC_CUDA_EMU_ARCH % 10;
    else if (attr == cudaDevAttrMaxSharedMemoryPerBlockOptin) *value = (int)shared_optin;
    else if (attr == cudaDevAttrClusterLaunch) *value = clusters_on;
    else if (attr == cudaDevAttrMultiProcessorCount) *value = sm_count;
    else return fail(cudaErrorInvalidValue);
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }

cudaError_t cudaStreamCreate(cudaStream_t *s) {
    if (!s) return fail(cudaErrorInvalidValue);
    *s = (cudaStream_t)malloc(sizeof(cuemu_stream_ok));
    return *s ? cudaSuccess : fail(cudaErrorMemoryAllocation);
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s) return fail(cudaErrorInvalidResourceHandle);
    free(s);
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaFuncSetAttribute(const void *kernel, cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || (size_t)value > shared_optin || !kernel)
        return fail(cudaErrorInvalidValue);
    for (int i = 0; i < noptins; i++)
        if (optins[i].kernel == kernel) {
            optins[i].bytes = (size_t)value > SHARED_DEFAULT ? (size_t)value : SHARED_DEFAULT;
            return cudaSuccess;
        }
    if (noptins == 64) return fail(cudaErrorInvalidValue);
    optins[noptins].kernel = kernel;
    optins[noptins++].bytes = (size_t)value > SHARED_DEFAULT ? (size_t)value : SHARED_DEFAULT;
    return cudaSuccess;
}

// ---- cuBLAS ----

struct cuemu_blas {
    cudaStream_t stream;
};

cublasStatus_t cublasCreate(cublasHandle_t *h) {
    if (!h) return CUBLAS_STATUS_INVALID_VALUE;
    *h = (cublasHandle_t)calloc(1, sizeof(cuemu_blas));
    return *h ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_ALLOC_FAILED;
}

cublasStatus_t cublasDestroy(cublasHandle_t h) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

static int max1(int x) { return x > 1 ? x : 1; }

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *A, int lda, long long sA,
                                         const float *B, int ldb, long long sB, const float *beta, float *C, int ldc,
                                         long long sC, int batch) {
    if (!h) return CUBLAS_STATUS_NOT_INITIALIZED;
    // cuBLAS's checks: op(A) is m x k, op(B) k x n, C m x n, each stored with its leading dimension
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T) || m < 0 || n < 0 || k < 0 ||
        batch < 0 || !alpha || !beta || lda < max1(ta == CUBLAS_OP_N ? m : k) || ldb < max1(tb == CUBLAS_OP_N ? k : n) ||
        ldc < max1(m))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!m || !n || !batch) return CUBLAS_STATUS_SUCCESS;
    for (int i = 0; i < batch; i++) {
        float *c = C + i * sC;
        if (*beta == 0.0f)  // C is not read: a NaN there is overwritten, as cuBLAS does
            for (int j = 0; j < n; j++) memset(c + (size_t)j * ldc, 0, (size_t)m * sizeof(float));
        if (k == 0) {
            for (int j = 0; j < n && *beta != 0.0f; j++)
                for (int r = 0; r < m; r++) c[(size_t)j * ldc + r] *= *beta;
            continue;
        }
        cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                    m, n, k, *alpha, A + i * sA, lda, B + i * sB, ldb, *beta, c, ldc);
    }
    return CUBLAS_STATUS_SUCCESS;
}

// ---- settings for the tests ----

extern "C" void mta_cuda_emu_set_schedule(uint64_t schedule) { schedule_seed = schedule; }
extern "C" void mta_cuda_emu_set_block_order(int order) { block_order = order >= 0 && order <= 2 ? order : -1; }
extern "C" void mta_cuda_emu_set_shared_optin(size_t bytes) {
    shared_optin = bytes ? (bytes > SHARED_DEFAULT ? bytes : SHARED_DEFAULT) : SHARED_OPTIN;
}
extern "C" void mta_cuda_emu_set_clusters(int on) { clusters_on = on != 0; }
extern "C" void mta_cuda_emu_set_sms(int n) { sm_count = n > 0 ? n : 1; }
extern "C" uint64_t mta_cuda_emu_launches(void) { return __atomic_load_n(&launches, __ATOMIC_RELAXED); }
