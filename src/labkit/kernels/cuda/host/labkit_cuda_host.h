// labkit's CPU stand-in for CUDA C++ (used only by labkit.cuda_cpp.run_on_host; never given to nvcc/NVRTC).
//
// A learner's kernel is compiled as ordinary C++ with this prelude in front. Every thread of a block is a
// fiber (ucontext) with its own stack, so locals are per thread, `__shared__` variables are per block, and
// `__syncthreads()` really waits for the whole block. Warp-wide operations (`__syncwarp`, shuffles, votes,
// the WMMA fragment calls in <mma.h>) meet the other lanes of the warp and are carried out once for the warp
// as a whole. Barriers some threads never reach, and warp calls only part of a warp makes, are errors, as
// they are undefined behaviour on a GPU. Kernels without any of these run thread after thread, without fibers.
//
// It checks values, not speed: nothing here says anything about how fast a GPU would be.
#pragma once
#ifndef LABKIT_CUDA_HOST_H
#define LABKIT_CUDA_HOST_H

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <assert.h>
#include <float.h>
#include <limits.h>
#include <cmath>
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <utility>
#include <type_traits>
#include <algorithm>
#include <fenv.h>
#include <ucontext.h>
#include <sys/mman.h>

// ------------------------------------------------------------------------------------- qualifiers
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
// Shared memory: one copy per program, used by the block that runs; all of it lies in one section, poisoned
// (every byte 0xFF: NaN as a float or half, -1 as an int) before each block, as a GPU's is uninitialised.
#define __shared__ static __attribute__((section("lk_shared")))
extern "C" char __start_lk_shared[] __attribute__((weak));
extern "C" char __stop_lk_shared[] __attribute__((weak));
static inline void __lk_poison_shared() {
    if (__start_lk_shared && __stop_lk_shared > __start_lk_shared)
        memset(__start_lk_shared, 0xFF, (size_t)(__stop_lk_shared - __start_lk_shared));
}
#define __constant__
#define __managed__
#define __grid_constant__
#ifndef __CUDACC__
#define __CUDACC__ 1
#endif
#define __CUDA_ARCH__ 900
#define LABKIT_CPU_STANDIN 1

// ------------------------------------------------------------------------------------- built-in variables
struct uint3 { unsigned int x, y, z; };
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
// Not static: the compiler must assume a fiber switch can change them.
extern "C" {
extern uint3 threadIdx;
extern uint3 blockIdx;
extern dim3 blockDim;
extern dim3 gridDim;
}
uint3 threadIdx, blockIdx;
dim3 blockDim, gridDim;
static const int warpSize = 32;

// ------------------------------------------------------------------------------------- vector types (CUDA's sizes and alignments)
#define __LK_VEC2(T, N) struct alignas(2 * sizeof(T)) N##2 { T x, y; }; static inline N##2 make_##N##2(T a, T b) { return N##2{a, b}; }
#define __LK_VEC3(T, N) struct N##3 { T x, y, z; }; static inline N##3 make_##N##3(T a, T b, T c) { return N##3{a, b, c}; }
#define __LK_VEC4(T, N) struct alignas(4 * sizeof(T) > 16 ? 16 : 4 * sizeof(T)) N##4 { T x, y, z, w; }; static inline N##4 make_##N##4(T a, T b, T c, T d) { return N##4{a, b, c, d}; }
__LK_VEC2(float, float) __LK_VEC3(float, float) __LK_VEC4(float, float)
__LK_VEC2(double, double) __LK_VEC3(double, double) __LK_VEC4(double, double)
__LK_VEC2(int, int) __LK_VEC3(int, int) __LK_VEC4(int, int)
__LK_VEC2(unsigned int, uint) __LK_VEC4(unsigned int, uint)
__LK_VEC2(signed char, char) __LK_VEC3(signed char, char) __LK_VEC4(signed char, char)
__LK_VEC2(unsigned char, uchar) __LK_VEC3(unsigned char, uchar) __LK_VEC4(unsigned char, uchar)
__LK_VEC2(short, short) __LK_VEC4(short, short)
__LK_VEC2(long long, longlong) __LK_VEC2(unsigned long long, ulonglong)
static inline uint3 make_uint3(unsigned a, unsigned b, unsigned c) { return uint3{a, b, c}; }

// ------------------------------------------------------------------------------------- errors
static char __lk_error_text[1024];
static int __lk_failed = 0;
static char __lk_oob_write[512];  // the first write into an array's guard zone (reported, not stopped)
static char __lk_oob_read[512];   // the first read of an array's guard zone (reported, not stopped)
extern "C" const char* __lk_oob_write_text() { return __lk_oob_write; }
extern "C" const char* __lk_oob_read_text() { return __lk_oob_read; }
static void __lk_fail(const char* fmt, ...);  // defined with the scheduler below

// ------------------------------------------------------------------------------------- fibers and the scheduler
namespace __lk {
enum State { READY, AT_BARRIER, AT_WARP, AT_CLUSTER, DONE };
struct WarpCall;
struct Fiber {
    ucontext_t ctx;
    char* stack;
    State state;
    uint3 tid;
    uint3 bid;     // its block's blockIdx
    int rank;      // its block's rank in the cluster (0 outside clusters)
    bool exists;   // false: a padding slot (fibers of a block start at a multiple of 32, so warps never straddle blocks)
    int barriers;  // how many __syncthreads this thread has passed
    const char* wait_name;  // the warp-wide call it waits in (state AT_WARP)
};
struct WarpCall {  // the warp-wide operation the lanes of one warp are meeting at
    const char* name;     // nullptr: none pending
    unsigned required;    // lanes that must arrive (bit per lane)
    unsigned arrived;
    bool whole_warp;      // WMMA: all 32 lanes must exist and take part
    void* args[32];       // per lane: a pointer to that lane's arguments, on its stack
    void (*perform)(WarpCall&);
    int result_ready;
};
static const size_t STACK_BYTES = 512 * 1024;  // a GPU thread's local memory is at most 512 KiB
static const size_t GUARD_BYTES = 64 * 1024;  // no access: a stack overflow crashes instead of corrupting
static Fiber* fibers = nullptr;
// A launch runs one cluster at a time (a block is a cluster of one): nblk blocks of bthreads threads each, block r's
// threads in fiber slots r*stride .. r*stride+bthreads-1 (stride: bthreads rounded up to a whole warp).
static int nfib = 0, cap = 0, cur = -1;
static int nblk = 1, bthreads = 0, stride = 0, wpb = 0;
static uint3 cdim = {1, 1, 1};  // the cluster's shape in blocks
static int order = 0;           // 0: blocks of a cluster get the CPU lowest rank first; 1: highest rank first
static const int WARP_SLOTS = 8;  // groups of lanes of one warp that may wait in separate warp-wide calls at once
static WarpCall* warps = nullptr;
static int nwarps = 0;
static int* flags = nullptr;    // __syncthreads_count/and/or: one flag per fiber slot
// Each block of a cluster has its own shared memory. The block whose thread runs has its copy in the shared section
// itself (`resident`); the others' copies wait in `sh_backing`, swapped in when one of their threads runs. A pointer
// from cluster.map_shared_rank(p, r) points into block r's copy, which is the live one whenever another block runs.
static char* sh_backing = nullptr;
static size_t sh_size = 0;
static char* dyn_ptr = nullptr;     // the dynamic shared memory window (extern __shared__), per block like the rest
static size_t dyn_size = 0;
static char* dyn_backing = nullptr;
static int resident = 0;
static bool exited[16];
static ucontext_t sched;
static bool fiber_mode = false;
static void (*body)() = nullptr;
// Strict checks (see "strict memory checks" below): every load and store of the kernel is reported to __lk_access.
static int checking = 0;                     // 1 while a learner's thread runs (not the scheduler)
static unsigned block_epoch[16];             // __syncthreads() barriers each block of the cluster has passed
static unsigned* warp_epoch = nullptr;       // warp-wide calls each warp has completed (per warp slot)
static unsigned cluster_epoch = 0;           // cluster barriers passed
static unsigned generation = 0;              // one per cluster run: older shared-memory records are stale

// How many of some fibers have left the kernel or wait at each kind of barrier, and the first fiber of each.
struct Tally {
    int total = 0, done = 0, at_barrier = 0, at_warp = 0, at_cluster = 0;
    int first_done = -1, first_barrier = -1, first_warp = -1, first_cluster = -1;
    void add(int t) {
        ++total;
        switch (fibers[t].state) {
            case DONE: ++done; if (first_done < 0) first_done = t; break;
            case AT_BARRIER: ++at_barrier; if (first_barrier < 0) first_barrier = t; break;
            case AT_WARP: ++at_warp; if (first_warp < 0) first_warp = t; break;
            case AT_CLUSTER: ++at_cluster; if (first_cluster < 0) first_cluster = t; break;
            default: break;
        }
    }
};
static inline unsigned lanes_of(int w) {  // lanes that exist in warp w (a block's last warp may be partial)
    int n = bthreads - 32 * (wpb ? w % wpb : w);
    return n >= 32 ? 0xffffffffu : ((1u << n) - 1u);
}
static inline unsigned live_lanes(int w) {
    unsigned m = 0, exist = lanes_of(w);
    for (int l = 0; l < 32 && 32 * w + l < nfib; ++l)
        if ((exist >> l & 1u) && fibers[32 * w + l].state != DONE) m |= 1u << l;
    return m;
}
static inline int my_lane() { return cur % 32; }
static inline int my_warp() { return cur / 32; }
static void swap_shared(int r) {  // make block r's shared memory the live copy
    if (r == resident) return;
    if (resident >= 0) {
        if (sh_size) memcpy(sh_backing + (size_t)resident * sh_size, __start_lk_shared, sh_size);
        if (dyn_size) memcpy(dyn_backing + (size_t)resident * dyn_size, dyn_ptr, dyn_size);
    }
    if (sh_size) memcpy(__start_lk_shared, sh_backing + (size_t)r * sh_size, sh_size);
    if (dyn_size) memcpy(dyn_ptr, dyn_backing + (size_t)r * dyn_size, dyn_size);
    resident = r;
}
static void enter(int t) {  // about to run fiber t: its built-in variables, its block's shared memory
    cur = t;
    threadIdx = fibers[t].tid;
    blockIdx = fibers[t].bid;
    if (nblk > 1) swap_shared(fibers[t].rank);
}
static void yield_to_scheduler() {
    int me = cur;
    swapcontext(&fibers[me].ctx, &sched);
    cur = me;
    threadIdx = fibers[me].tid;
    blockIdx = fibers[me].bid;
}
static void fiber_main() {
    body();
    fibers[cur].state = DONE;
    swapcontext(&fibers[cur].ctx, &sched);
}
static void describe(int t, char* out, size_t n) {
    if (nblk > 1)
        snprintf(out, n, "(%u, %u, %u) of block (%u, %u, %u) (rank %d in its cluster)", fibers[t].tid.x, fibers[t].tid.y,
                 fibers[t].tid.z, fibers[t].bid.x, fibers[t].bid.y, fibers[t].bid.z, fibers[t].rank);
    else
        snprintf(out, n, "(%u, %u, %u)", fibers[t].tid.x, fibers[t].tid.y, fibers[t].tid.z);
}
}  // namespace __lk

static void __lk_fail(const char* fmt, ...) {
    if (!__lk_failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(__lk_error_text, sizeof __lk_error_text, fmt, ap);
        va_end(ap);
        __lk_failed = 1;
    }
    if (__lk::fiber_mode && __lk::cur >= 0) {
        // park this thread for good; the scheduler stops the launch
        __lk::fibers[__lk::cur].state = __lk::DONE;
        swapcontext(&__lk::fibers[__lk::cur].ctx, &__lk::sched);
    }
}

// A warp-wide call: register this lane's arguments, wait for the other lanes, and let the last one perform it.
static void __lk_warp_meet(const char* name, unsigned mask, bool whole_warp, void* my_args, void (*perform)(__lk::WarpCall&)) {
    using namespace __lk;
    if (!fiber_mode) { __lk_fail("internal: %s outside fiber mode", name); return; }
    int w = my_warp(), lane = my_lane();
    if (whole_warp && lanes_of(w) != 0xffffffffu) {
        __lk_fail("%s needs a whole warp of 32 threads, but the block has %d thread(s), so its last warp has only %d.",
                  name, bthreads, bthreads - 32 * (w % wpb));
        return;
    }
    if (!(mask >> lane & 1u)) {
        __lk_fail("thread %d called %s with a mask 0x%08x that leaves out its own lane %d.", cur, name, mask, lane);
        return;
    }
    // Disjoint groups of lanes (tiles of a warp) may each be meeting in a call of their own: one slot per group.
    unsigned want = (whole_warp ? 0xffffffffu : mask) & lanes_of(w);
    WarpCall* found = nullptr;
    WarpCall* free_slot = nullptr;
    for (int k = 0; k < WARP_SLOTS; ++k) {
        WarpCall& s = warps[w * WARP_SLOTS + k];
        if (!s.name) { if (!free_slot) free_slot = &s; continue; }
        if (s.required >> lane & 1u) { found = &s; break; }
        if (s.required & want) {
            __lk_fail("the lanes of warp %d called %s with different masks (0x%08x and 0x%08x).", w, name, s.required, want);
            return;
        }
    }
    if (!found && !free_slot) { __lk_fail("more than %d groups of warp %d wait in warp-wide calls at once.", WARP_SLOTS, w); return; }
    WarpCall& c = found ? *found : *free_slot;
    if (c.name && strcmp(c.name, name) != 0) {
        __lk_fail("the lanes of warp %d reached different warp-wide calls: %s and %s; every lane must make the same call.",
                  w, c.name, name);
        return;
    }
    if (!c.name) {
        c.name = name; c.arrived = 0; c.whole_warp = whole_warp; c.perform = perform; c.result_ready = 0;
        c.required = (whole_warp ? 0xffffffffu : mask) & lanes_of(w);
        unsigned missing = c.required & ~live_lanes(w);
        if (missing) {
            int l = __builtin_ctz(missing);
            __lk_fail("%s in warp %d: lane %d had already returned; %s.", name, w, l,
                      whole_warp ? "every lane of the warp must call it (leave the kernel as a whole warp, or not at all)"
                                 : "the mask names lanes that are no longer running");
            return;
        }
    } else if (c.required != ((whole_warp ? 0xffffffffu : mask) & lanes_of(w))) {
        __lk_fail("the lanes of warp %d called %s with different masks.", w, name);
        return;
    }
    c.args[lane] = my_args;
    c.arrived |= 1u << lane;
    if ((c.arrived & c.required) == c.required) {
        c.perform(c);
        c.name = nullptr;
        warp_epoch[w]++;  // the lanes that met are ordered: what one wrote before, another may read after
        for (int l = 0; l < 32; ++l)
            if ((c.required >> l & 1u) && l != lane && fibers[32 * w + l].state == AT_WARP) fibers[32 * w + l].state = READY;
        return;
    }
    fibers[cur].state = AT_WARP;
    fibers[cur].wait_name = name;
    yield_to_scheduler();
}

static inline void __syncthreads() {
    using namespace __lk;
    if (!fiber_mode) { __lk_fail("internal: __syncthreads outside fiber mode"); return; }
    fibers[cur].state = AT_BARRIER;
    yield_to_scheduler();
    fibers[cur].barriers++;
}
static inline int __syncthreads_count(int p);
static inline int __syncthreads_and(int p);
static inline int __syncthreads_or(int p);

// A cluster barrier (cooperative groups' cluster.sync()): every thread of every block of the cluster waits here.
static inline void __lk_cluster_sync() {
    using namespace __lk;
    if (!fiber_mode) { __lk_fail("internal: cluster.sync() outside fiber mode"); return; }
    fibers[cur].state = AT_CLUSTER;
    yield_to_scheduler();
}

namespace __lk {
static void block_exited(int r) {  // every thread of block r has returned: its shared memory is gone
    exited[r] = true;
    if (nblk > 1) {
        if (sh_size) memset(sh_backing + (size_t)r * sh_size, 0xFF, sh_size);
        if (dyn_size) memset(dyn_backing + (size_t)r * dyn_size, 0xFF, dyn_size);
        if (resident == r) resident = -1;
    }
}
}  // namespace __lk

// Run one cluster (a block is a cluster of one): every thread a fiber. The blocks get the CPU in a fixed priority
// order (`order`): the first block runs round robin until all its threads wait or are done, releasing its
// __syncthreads() barriers itself, then the next; a cluster barrier is released when every thread of the cluster
// waits at it. So a block that reads a peer's shared memory without waiting at a cluster barrier reads it before
// the peer has run (poisoned), and a block that exits early has its shared memory poisoned for its peers.
static int __lk_run_block_fibers() {
    using namespace __lk;
    for (int r = 0; r < nblk; ++r) exited[r] = false;
    for (int t = 0; t < nfib; ++t) {
        Fiber& f = fibers[t];
        f.state = DONE;
        if (!f.exists) continue;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = STACK_BYTES;
        f.ctx.uc_link = &sched;
        makecontext(&f.ctx, fiber_main, 0);
        f.state = READY;
        f.barriers = 0;
    }
    for (int w = 0; w < nwarps; ++w) { for (int k = 0; k < WARP_SLOTS; ++k) warps[w * WARP_SLOTS + k].name = nullptr; warp_epoch[w] = 0; }
    for (int r = 0; r < nblk; ++r) block_epoch[r] = 0;
    cluster_epoch = 0;
    ++generation;  // every shared-memory record of earlier clusters is stale
    char a[160], b[160];
    for (;;) {
        bool any = false;
        for (int k = 0; k < nblk && !any; ++k) {
            int r = order ? nblk - 1 - k : k;
            if (exited[r]) continue;
            for (;;) {
                bool ran = false;
                for (int j = 0; j < bthreads; ++j) {
                    int t = r * stride + j;
                    if (fibers[t].state != READY) continue;
                    enter(t);
                    checking = 1;
                    swapcontext(&sched, &fibers[t].ctx);
                    checking = 0;
                    cur = -1;
                    ran = true;
                    if (__lk_failed) return 1;
                    if (fibers[t].state == DONE) {
                        // a lane that leaves while its warp-mates wait for it in a warp-wide call
                        int w = t / 32, lane = t % 32;
                        for (int k = 0; k < WARP_SLOTS; ++k) {
                            WarpCall& c = warps[w * WARP_SLOTS + k];
                            if (c.name && (c.required >> lane & 1u) && !(c.arrived >> lane & 1u)) {
                                describe(t, a, sizeof a);
                                __lk_fail("%s in warp %d: thread %s returned without making the call the other lanes of its warp are waiting in%s.",
                                          c.name, w % wpb, a, c.whole_warp ? " (WMMA calls are made by the whole warp together)" : "");
                                return 1;
                            }
                        }
                    }
                }
                if (ran) { any = true; continue; }
                Tally in_block;
                for (int j = 0; j < bthreads; ++j) in_block.add(r * stride + j);
                if (in_block.done == bthreads) { if (!exited[r]) block_exited(r); break; }
                if (in_block.at_barrier == bthreads) {
                    block_epoch[r]++;
                    for (int j = 0; j < bthreads; ++j) fibers[r * stride + j].state = READY;
                    continue;
                }
                if (in_block.at_barrier && in_block.done) {
                    describe(in_block.first_barrier, a, sizeof a);
                    describe(in_block.first_done, b, sizeof b);
                    __lk_fail("a __syncthreads() that only some threads of block (%u, %u, %u) reach: thread %s waits at it, "
                              "thread %s had already left the kernel (%d of %d threads left it, skipping the barrier or returning early). On a GPU this is undefined behaviour; "
                              "keep every thread running to each barrier (put the bounds check around the work, not around the barrier).",
                              fibers[in_block.first_barrier].bid.x, fibers[in_block.first_barrier].bid.y, fibers[in_block.first_barrier].bid.z, a, b, in_block.done, bthreads);
                    return 1;
                }
                break;
            }
        }
        if (any) continue;
        Tally all;
        for (int t = 0; t < nfib; ++t) if (fibers[t].exists) all.add(t);
        if (all.done == all.total) return 0;
        if (all.at_cluster == all.total) {
            cluster_epoch++;
            for (int t = 0; t < nfib; ++t) if (fibers[t].exists) fibers[t].state = READY;
            continue;
        }
        if (all.at_cluster && all.done) {
            describe(all.first_cluster, a, sizeof a);
            describe(all.first_done, b, sizeof b);
            __lk_fail("a cluster.sync() that only some threads of the cluster reach: thread %s waits at it, thread %s had "
                      "already left the kernel without reaching it (%d of the cluster's %d threads left). A cluster barrier "
                      "is for every thread of every block in the cluster: skipped by some, it deadlocks on a GPU or orders "
                      "nothing (the blocks that left take their shared memory with them). Call cluster.sync() from every "
                      "thread of every block, outside any `if` on the rank or thread index.", a, b, all.done, all.total);
            return 1;
        }
        if (all.at_cluster) {
            describe(all.first_cluster, a, sizeof a);
            describe(all.first_warp >= 0 ? all.first_warp : all.first_barrier, b, sizeof b);
            __lk_fail("the threads of the cluster wait for each other at different places (thread %s at cluster.sync(), "
                      "thread %s at %s): this would hang on a GPU. Every thread of every block must reach the same "
                      "barriers in the same order.", a, b, all.first_warp >= 0 ? fibers[all.first_warp].wait_name : "__syncthreads()");
            return 1;
        }
        describe(all.first_warp >= 0 ? all.first_warp : all.first_barrier, a, sizeof a);
        int t0 = all.first_warp >= 0 ? all.first_warp : all.first_barrier;
        __lk_fail("the threads of block (%u, %u, %u) wait for each other at different places (thread %s in %s, %d thread(s) at "
                  "__syncthreads()): this would hang on a GPU.", fibers[t0].bid.x, fibers[t0].bid.y, fibers[t0].bid.z, a,
                  all.first_warp >= 0 ? fibers[all.first_warp].wait_name : "__syncthreads()", all.at_barrier);
        return 1;
    }
}

// Barrier with a reduction over the block (count/and/or): each thread posts its flag before waiting.
static inline int __lk_barrier_reduce(int p, int kind) {
    using namespace __lk;
    flags[cur] = p != 0;
    __syncthreads();
    int count = 0, base = (cur / stride) * stride;
    for (int t = base; t < base + bthreads; ++t) count += flags[t];
    __syncthreads();  // nobody overwrites its flag before all have read
    return kind == 0 ? count : kind == 1 ? (count == bthreads) : (count > 0);
}
static inline int __syncthreads_count(int p) { return __lk_barrier_reduce(p, 0); }
static inline int __syncthreads_and(int p) { return __lk_barrier_reduce(p, 1); }
static inline int __syncthreads_or(int p) { return __lk_barrier_reduce(p, 2); }

// ------------------------------------------------------------------------------------- warp functions
namespace __lk {
struct ShflArgs { const void* in; void* out; unsigned size; int b; int c; int mode; };
// The source lane of `lane` in PTX's shfl.sync (mode 0 idx, 1 up, 2 down, 3 bfly): b is the lane or offset, c packs
// the segment mask (bits 12:8, CUDA passes 32 - width) and the clamp value (bits 4:0: 0 for up, 31 for the others).
// A lane whose computed source is out of range reads its own value; a xor whose mask reaches past the segment can read
// an earlier segment (j <= maxLane still holds), exactly as PTX says.
static inline int shfl_source(int lane, int b, int c, int mode) {
    int bval = b & 31, cval = c & 31, segmask = (c >> 8) & 31;
    int maxLane = (lane & segmask) | (cval & ~segmask), minLane = lane & segmask, j = lane;
    bool pval = false;
    switch (mode) {
        case 0: j = minLane | (bval & ~segmask); pval = j <= maxLane; break;
        case 1: j = lane - bval; pval = j >= maxLane; break;
        case 2: j = lane + bval; pval = j <= maxLane; break;
        case 3: j = lane ^ bval; pval = j <= maxLane; break;
    }
    return pval ? j : lane;
}
static void perform_shfl(WarpCall& c) {
    for (int l = 0; l < 32; ++l) {
        if (!(c.required >> l & 1u)) continue;
        ShflArgs* me = static_cast<ShflArgs*>(c.args[l]);
        int s = shfl_source(l, me->b, me->c, me->mode);
        if (!(c.required >> s & 1u)) {
            __lk_fail("a shuffle in warp %d: lane %d reads lane %d, which is not in the mask (or has returned): its value "
                      "is undefined.", cur / 32, l, s);
            return;
        }
    }
    // every lane's result from its source lane's input (inputs are read before any output is written)
    for (int l = 0; l < 32; ++l) {
        if (!(c.required >> l & 1u)) continue;
        ShflArgs* me = static_cast<ShflArgs*>(c.args[l]);
        int s = shfl_source(l, me->b, me->c, me->mode);
        memcpy(me->out, static_cast<ShflArgs*>(c.args[s])->in, me->size);
    }
}
struct VoteArgs { int pred; unsigned out; };
static void perform_vote(WarpCall& c) {
    unsigned ballot = 0;
    for (int l = 0; l < 32; ++l)
        if ((c.required >> l & 1u) && static_cast<VoteArgs*>(c.args[l])->pred) ballot |= 1u << l;
    for (int l = 0; l < 32; ++l)
        if (c.required >> l & 1u) static_cast<VoteArgs*>(c.args[l])->out = ballot;
}
static void perform_nothing(WarpCall&) {}
}  // namespace __lk

static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    int dummy = 0;
    __lk_warp_meet("__syncwarp", mask, false, &dummy, __lk::perform_nothing);
}
// Any trivially copyable T (cooperative groups shuffle structs such as uint4 word by word; each word follows the rule).
template <class T>
static inline T __lk_shfl(const char* name, unsigned mask, T v, int b, int width, int mode) {
    static_assert(std::is_trivially_copyable<T>::value, "shuffles move trivially copyable values");
    if (width <= 0 || width > 32 || (width & (width - 1))) { __lk_fail("%s: width %d is not a power of 2 from 1 to 32.", name, width); return v; }
    T out = v;
    __lk::ShflArgs a{&v, &out, (unsigned)sizeof(T), b, ((32 - width) << 8) | (mode == 1 ? 0 : 0x1f), mode};
    __lk_warp_meet(name, mask, false, &a, __lk::perform_shfl);
    return out;
}
template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) { return __lk_shfl("__shfl_sync", mask, v, src, width, 0); }
template <class T> static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) { return __lk_shfl("__shfl_up_sync", mask, v, (int)d, width, 1); }
template <class T> static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) { return __lk_shfl("__shfl_down_sync", mask, v, (int)d, width, 2); }
template <class T> static inline T __shfl_xor_sync(unsigned mask, T v, int lm, int width = 32) { return __lk_shfl("__shfl_xor_sync", mask, v, lm, width, 3); }
static inline unsigned __lk_vote(const char* name, unsigned mask, int pred) {
    __lk::VoteArgs a{pred != 0, 0};
    __lk_warp_meet(name, mask, false, &a, __lk::perform_vote);
    return a.out;
}
static inline unsigned __ballot_sync(unsigned mask, int pred) { return __lk_vote("__ballot_sync", mask, pred) & mask; }
static inline int __any_sync(unsigned mask, int pred) { return (__lk_vote("__any_sync", mask, pred) & mask) != 0; }
static inline int __all_sync(unsigned mask, int pred) {
    unsigned b = __lk_vote("__all_sync", mask, pred);
    return (b & mask & __lk::lanes_of(__lk::my_warp())) == (mask & __lk::lanes_of(__lk::my_warp()));
}
static inline unsigned __activemask() {
    return __lk::fiber_mode ? __lk::live_lanes(__lk::my_warp()) : 1u;
}
static inline unsigned __lanemask_lt() { return (1u << (__lk::fiber_mode ? __lk::my_lane() : 0)) - 1u; }

// ------------------------------------------------------------------------------------- strict memory checks
// The kernel is compiled with -fsanitize=thread's instrumentation only (no sanitizer runtime is linked): every load
// and store of the learner's code calls __tsan_{read,write}N(address), defined here as labkit's own checks.
// __lk_access then checks, while a learner's thread runs:
// - global arrays: each array argument lies between guard zones; an access that reaches into one (a read or a write
//   one past the end, `i <= n`) is an error naming the array, the element and the thread;
// - static shared memory: each __shared__ declaration has a red zone on both sides (added by labkit.cuda.host); an
//   access there is an error naming the shared array; dynamic shared memory likewise past the launch's shared_mem;
// - races: per byte of shared memory, the last write and the last two readers (thread, and the barrier epochs of its
//   block, warp and cluster). Two accesses to one byte by different threads, one of them a write, with no
//   __syncthreads() (same block), warp-wide call (same warp) or cluster.sync() (same cluster) between them, are a
//   race: undefined on a GPU, whatever the CPU's order happened to give. Atomics race only with plain accesses.
// - write-write races in global memory: per element of each array argument, the last thread that wrote it in this
//   launch. A plain write by another thread with nothing that orders the two (threads of one block: a
//   __syncthreads(); of one warp: a warp-wide call; of one cluster: cluster.sync(); of different blocks or clusters:
//   nothing within a launch) is a race even when both write the same value, as in labkit's Python simulator.
namespace __lk {
struct ArrayRange { uintptr_t lo, start, end, hi; unsigned long long itemsize; int arg; };
static ArrayRange arrays[64];
static int narrays = 0;
static char arg_names[64][48];
struct SharedVar { long long off, size; char name[64]; };
static SharedVar* shvars = nullptr;
static int nshvars = 0;
static int* sh_owner = nullptr;  // per byte of the static shared section: the variable there, -1 a red zone
static size_t sh_owner_len = 0;
static char* dyn_lo = nullptr;   // the whole dynamic shared buffer with its guard zones
static char* dyn_hi = nullptr;
struct Access { unsigned gen; int t; unsigned b, w, c; int atomic; };  // t: fiber slot + 1 (0: none)
struct Shadow { Access wr, rd1, rd2; };
static Shadow* shadow = nullptr;  // per byte: static shared of each block of the cluster, then dynamic shared of each
static size_t shadow_len = 0;

__attribute__((no_sanitize_thread)) static void who(char* out, size_t n) {
    if (fiber_mode && cur >= 0) { describe(cur, out, n); if (nblk <= 1) { size_t k = strlen(out); snprintf(out + k, n - k, " of block (%u, %u, %u)", blockIdx.x, blockIdx.y, blockIdx.z); } }
    else snprintf(out, n, "(%u, %u, %u) of block (%u, %u, %u)", threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z);
}
__attribute__((no_sanitize_thread)) static void who_slot(int t, char* out, size_t n) { describe(t, out, n); }
__attribute__((no_sanitize_thread)) static const char* verb(int kind) { return kind == 0 ? "read" : kind == 1 ? "wrote" : "updated (atomically)"; }

__attribute__((no_sanitize_thread)) static bool ordered(const Access& r, int me) {
    if (r.gen != generation || r.t == 0 || r.t - 1 == me) return true;
    if (r.c != cluster_epoch) return true;
    int o = r.t - 1;
    if (fibers[o].rank == fibers[me].rank && block_epoch[fibers[me].rank] != r.b) return true;
    if (o / 32 == me / 32 && warp_epoch[me / 32] != r.w) return true;
    return false;
}
__attribute__((no_sanitize_thread)) static void race(const Access& r, int kind, int other_kind, const char* what, long long index) {
    char a[200], b[200];
    who(a, sizeof a);
    who_slot(r.t - 1, b, sizeof b);
    bool same_block = fibers[r.t - 1].rank == fibers[cur].rank;
    __lk_fail("a shared-memory race: thread %s %s %s[%lld] after thread %s %s it, with no %s between the two accesses. "
              "On a GPU their order is not defined, so the value read (or kept) is not either.",
              a, verb(kind), what, index, b, verb(other_kind),
              same_block ? "__syncthreads() (or __syncwarp() within one warp)" : "cluster.sync()");
}
__attribute__((no_sanitize_thread)) static void track(size_t base, size_t n, int kind, const char* what, long long index) {
    int me = cur;
    Access now{generation, me + 1, block_epoch[fibers[me].rank], warp_epoch[me / 32], cluster_epoch, kind == 2};
    for (size_t k = 0; k < n && base + k < shadow_len; ++k) {
        Shadow& sh = shadow[base + k];
        if (!ordered(sh.wr, me) && !(kind == 2 && sh.wr.atomic)) { race(sh.wr, kind, sh.wr.atomic ? 2 : 1, what, index); return; }
        if (kind != 0) {
            if (!ordered(sh.rd1, me)) { race(sh.rd1, kind, 0, what, index); return; }
            if (!ordered(sh.rd2, me)) { race(sh.rd2, kind, 0, what, index); return; }
            sh.wr = now;
        } else if (sh.rd1.gen != generation || sh.rd1.t != now.t) {
            if (sh.rd1.gen == generation && !ordered(sh.rd1, me)) sh.rd2 = sh.rd1;
            sh.rd1 = now;
        }
    }
}
// Write-write races in global memory (see above): the last writer of each element of each array argument.
struct GWrite { unsigned stamp, gen, b, w, c; int slot; unsigned long long thread; int atomic; };
static GWrite* gshadow[64];
static size_t gshadow_len[64];
static unsigned gstamp = 0;  // one per launch: older records are stale
static const size_t GSHADOW_MAX = (size_t)1 << 24;  // elements tracked per array (larger arrays are not tracked)
__attribute__((no_sanitize_thread)) static unsigned long long thread_key() {  // the thread's linear index in the grid
    unsigned long long per_block = (unsigned long long)blockDim.x * blockDim.y * blockDim.z;
    unsigned long long blk = ((unsigned long long)blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    return blk * per_block + ((unsigned long long)threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
}
__attribute__((no_sanitize_thread)) static void describe_key(unsigned long long key, char* out, size_t n) {
    unsigned long long per_block = (unsigned long long)blockDim.x * blockDim.y * blockDim.z;
    unsigned long long blk = key / per_block, t = key % per_block;
    snprintf(out, n, "(%llu, %llu, %llu) of block (%llu, %llu, %llu)", t % blockDim.x, t / blockDim.x % blockDim.y,
             t / ((unsigned long long)blockDim.x * blockDim.y), blk % gridDim.x, blk / gridDim.x % gridDim.y,
             blk / ((unsigned long long)gridDim.x * gridDim.y));
}
__attribute__((no_sanitize_thread)) static void global_write(int k, uintptr_t a, int kind) {
    const ArrayRange& r = arrays[k];
    size_t elems = (size_t)((r.end - r.start) / r.itemsize), idx = (size_t)((a - r.start) / r.itemsize);
    if (elems > GSHADOW_MAX || idx >= elems) return;
    if (gshadow_len[k] < elems) {
        GWrite* ns = (GWrite*)realloc(gshadow[k], sizeof(GWrite) * elems);
        if (!ns) return;  // out of memory: this array's races go unseen rather than the launch failing
        memset(ns + gshadow_len[k], 0, sizeof(GWrite) * (elems - gshadow_len[k]));
        gshadow[k] = ns;
        gshadow_len[k] = elems;
    }
    GWrite& prev = gshadow[k][idx];
    unsigned long long me = thread_key();
    bool atomic = kind == 2;
    GWrite now{gstamp, fiber_mode ? generation : 0, 0, 0, cluster_epoch, fiber_mode ? cur : -1, me, atomic};
    if (fiber_mode && cur >= 0) { now.b = block_epoch[fibers[cur].rank]; now.w = warp_epoch[cur / 32]; }
    if (prev.stamp == gstamp && prev.thread != me && !(atomic && prev.atomic)) {
        bool ordered_ = false;
        if (fiber_mode && cur >= 0 && prev.slot >= 0 && prev.gen == generation) {  // the same cluster run
            if (prev.c != cluster_epoch) ordered_ = true;
            else if (fibers[prev.slot].rank == fibers[cur].rank && prev.b != now.b) ordered_ = true;
            else if (prev.slot / 32 == cur / 32 && prev.w != now.w) ordered_ = true;
        }
        if (!ordered_) {
            char t[200], o[200];
            who(t, sizeof t);
            describe_key(prev.thread, o, sizeof o);
            bool same_block = me / ((unsigned long long)blockDim.x * blockDim.y * blockDim.z) ==
                              prev.thread / ((unsigned long long)blockDim.x * blockDim.y * blockDim.z);
            bool same_cluster = fiber_mode && nblk > 1 && prev.slot >= 0 && prev.gen == generation;
            __lk_fail("a global-memory race: thread %s %s %s[%zu] after thread %s %s it, with nothing that orders the "
                      "two writes (%s). On a GPU which write lands last is not defined; even when both write the same "
                      "value it is a data race, undefined behaviour in CUDA: let one thread write each element.",
                      t, verb(kind), arg_names[r.arg], idx, o, verb(prev.atomic ? 2 : 1),
                      same_block     ? "threads of one block: no __syncthreads() between them"
                      : same_cluster ? "threads of different blocks of one cluster: no cluster.sync() between them"
                                     : "threads of different blocks: nothing orders them within a launch");
            return;
        }
    }
    if (!atomic || !prev.atomic || prev.stamp != gstamp) prev = now;
}
// The shared array nearest to section offset `off` (the one an access into a red zone overran or underran).
__attribute__((no_sanitize_thread)) static int nearest_var(long long off, long long* dist) {
    int best = -1; long long bd = 0;
    for (int v = 0; v < nshvars; ++v) {
        long long d = off < shvars[v].off ? shvars[v].off - off : off - (shvars[v].off + shvars[v].size) + 1;
        if (best < 0 || d < bd) { best = v; bd = d; }
    }
    *dist = bd;
    return best;
}
__attribute__((no_sanitize_thread)) static void shared_access(char* sect, size_t size, int rank, uintptr_t a, size_t n, int kind, bool dynamic) {
    long long off = (long long)(a - (uintptr_t)sect);
    char t[200];
    if (dynamic) {
        if (off < 0 || off + (long long)n > (long long)dyn_size) {
            who(t, sizeof t);
            __lk_fail("thread %s %s dynamic shared memory (extern __shared__) at byte %lld, outside the %zu bytes the "
                      "launch allocated (its shared_mem argument).", t, verb(kind), off, (size_t)dyn_size);
            return;
        }
        if (fiber_mode) track(nblk * sh_size + (size_t)rank * dyn_size + (size_t)off, n, kind, "the extern __shared__ array at byte", off);
        return;
    }
    int v = (size_t)off < sh_owner_len ? sh_owner[off] : -1;
    int v_end = (size_t)(off + (long long)n - 1) < sh_owner_len ? sh_owner[off + n - 1] : -1;
    if (v < 0 || v_end != v) {
        long long dist = 0;
        int near = nearest_var(off, &dist);
        who(t, sizeof t);
        if (near < 0) { __lk_fail("thread %s %s shared memory outside every __shared__ array.", t, verb(kind)); return; }
        const SharedVar& sv = shvars[near];
        long long elem = (long long)n, idx = (off - sv.off) / elem;
        __lk_fail("thread %s %s %s[%lld], %s the shared array %s (%lld elements of %lld bytes): an out-of-bounds "
                  "shared-memory access, undefined on a GPU.", t, verb(kind), sv.name, idx,
                  off < sv.off ? "before the start of" : "past the end of", sv.name, sv.size / elem, elem);
        return;
    }
    if (fiber_mode) track((size_t)rank * sh_size + (size_t)off, n, kind, shvars[v].name, (off - shvars[v].off) / (long long)n);
}
}  // namespace __lk

extern "C" __attribute__((no_sanitize_thread)) void __lk_access(uintptr_t a, size_t n, int kind) {
    using namespace __lk;
    if (!checking || __lk_failed) return;
    for (int k = 0; k < narrays; ++k) {
        const ArrayRange& r = arrays[k];
        if (a + n <= r.lo || a >= r.hi) continue;
        if (a >= r.start && a + n <= r.end) {
            if (kind != 0) global_write(k, a, kind);
            return;
        }
        char t[200];
        who(t, sizeof t);
        // Reported, not stopped (as a GPU would go on): the first write and the first read outside an array are
        // kept; the guard zones read back after the launch name the arrays written outside.
        char* keep = kind == 0 ? __lk_oob_read : __lk_oob_write;
        if (!keep[0]) {
            long long idx = a >= r.start ? (long long)((a - r.start) / r.itemsize) : -(long long)((r.start - a + r.itemsize - 1) / r.itemsize);
            snprintf(keep, sizeof __lk_oob_read, "thread %s %s %s[%lld], outside array argument %d (%s, %lld elements: %s)",
                     t, verb(kind), arg_names[r.arg], idx, r.arg, arg_names[r.arg],
                     (long long)((r.end - r.start) / r.itemsize), idx < 0 ? "before the start" : "past the end");
        }
        return;
    }
    if (!fiber_mode) return;
    char* sect = __start_lk_shared;
    if (sh_size && a + n > (uintptr_t)sect && a < (uintptr_t)(sect + sh_size)) { shared_access(sect, sh_size, resident, a, n, kind, false); return; }
    if (nblk > 1 && sh_size && a >= (uintptr_t)sh_backing && a < (uintptr_t)(sh_backing + sh_size * nblk)) {
        int r = (int)((a - (uintptr_t)sh_backing) / sh_size);
        shared_access(sh_backing + (size_t)r * sh_size, sh_size, r, a, n, kind, false);
        return;
    }
    if (dyn_lo && a + n > (uintptr_t)dyn_lo && a < (uintptr_t)dyn_hi) { shared_access(dyn_ptr, dyn_size, resident, a, n, kind, true); return; }
    if (nblk > 1 && dyn_size && a >= (uintptr_t)dyn_backing && a < (uintptr_t)(dyn_backing + dyn_size * nblk)) {
        int r = (int)((a - (uintptr_t)dyn_backing) / dyn_size);
        shared_access(dyn_backing + (size_t)r * dyn_size, dyn_size, r, a, n, kind, true);
    }
}
#define __LK_TSAN(N) \
    extern "C" __attribute__((no_sanitize_thread)) void __tsan_read##N(void* a) { __lk_access((uintptr_t)a, N, 0); } \
    extern "C" __attribute__((no_sanitize_thread)) void __tsan_write##N(void* a) { __lk_access((uintptr_t)a, N, 1); } \
    extern "C" __attribute__((no_sanitize_thread)) void __tsan_unaligned_read##N(void* a) { __lk_access((uintptr_t)a, N, 0); } \
    extern "C" __attribute__((no_sanitize_thread)) void __tsan_unaligned_write##N(void* a) { __lk_access((uintptr_t)a, N, 1); }
__LK_TSAN(1) __LK_TSAN(2) __LK_TSAN(4) __LK_TSAN(8) __LK_TSAN(16)
extern "C" __attribute__((no_sanitize_thread)) void __tsan_read_range(void* a, size_t n) { __lk_access((uintptr_t)a, n, 0); }
extern "C" __attribute__((no_sanitize_thread)) void __tsan_write_range(void* a, size_t n) { __lk_access((uintptr_t)a, n, 1); }
extern "C" __attribute__((no_sanitize_thread)) void __tsan_init() {}
extern "C" __attribute__((no_sanitize_thread)) void __tsan_func_entry(void*) {}
extern "C" __attribute__((no_sanitize_thread)) void __tsan_func_exit() {}
extern "C" __attribute__((no_sanitize_thread)) void __tsan_vptr_update(void*, void*) {}
extern "C" __attribute__((no_sanitize_thread)) void __tsan_vptr_read(void*) {}

// Called by the helper process before each launch: the array arguments' ranges (lo, start, end, hi, itemsize, index:
// six numbers each) and names ("x\ny\n..."), the static shared arrays (section offset and size, two numbers each) and
// their names, and the dynamic shared buffer's bounds.
extern "C" __attribute__((no_sanitize_thread)) int __lk_setup_checks(int na, const unsigned long long* ranges, const char* names,
                                                                      int nv, const long long* vars, const char* var_names) {
    using namespace __lk;
    ++gstamp;  // a new launch: the global-memory write records of earlier launches are stale
    narrays = na < 64 ? na : 64;
    for (int k = 0; k < narrays; ++k)
        arrays[k] = ArrayRange{(uintptr_t)ranges[6 * k], (uintptr_t)ranges[6 * k + 1], (uintptr_t)ranges[6 * k + 2],
                               (uintptr_t)ranges[6 * k + 3], ranges[6 * k + 4] ? ranges[6 * k + 4] : 1, (int)ranges[6 * k + 5]};
    for (int k = 0; k < 64; ++k) snprintf(arg_names[k], sizeof arg_names[k], "argument %d", k);
    for (int k = 0; names && *names && k < 64; ++k) {
        const char* e = strchr(names, '\n');
        size_t len = e ? (size_t)(e - names) : strlen(names);
        if (len) snprintf(arg_names[k], sizeof arg_names[k], "%.*s", (int)len, names);
        if (!e) break;
        names = e + 1;
    }
    free(shvars);
    nshvars = nv;
    shvars = (SharedVar*)calloc((size_t)(nv ? nv : 1), sizeof(SharedVar));
    for (int v = 0; v < nv; ++v) {
        shvars[v].off = vars[2 * v]; shvars[v].size = vars[2 * v + 1];
        const char* e = var_names ? strchr(var_names, '\n') : nullptr;
        size_t len = e ? (size_t)(e - var_names) : (var_names ? strlen(var_names) : 0);
        snprintf(shvars[v].name, sizeof shvars[v].name, "%.*s", (int)len, var_names ? var_names : "");
        var_names = e ? e + 1 : var_names + len;
    }
    size_t ss = (__start_lk_shared && __stop_lk_shared > __start_lk_shared) ? (size_t)(__stop_lk_shared - __start_lk_shared) : 0;
    free(sh_owner);
    sh_owner_len = ss;
    sh_owner = (int*)malloc(sizeof(int) * (ss ? ss : 1));
    for (size_t k = 0; k < ss; ++k) sh_owner[k] = -1;
    for (int v = 0; v < nv; ++v)
        for (long long k = shvars[v].off; k < shvars[v].off + shvars[v].size && k < (long long)ss; ++k) if (k >= 0) sh_owner[k] = v;
    if (!nv) for (size_t k = 0; k < ss; ++k) sh_owner[k] = 0;  // no symbol table: one array, bounds unknown
    return shvars && sh_owner ? 0 : 1;
}
namespace __lk {
// Room for the race records of a cluster (static and dynamic shared memory of every block), kept between launches.
__attribute__((no_sanitize_thread)) static bool prepare_shadow() {
    size_t need = (sh_size + dyn_size) * (size_t)nblk;
    if (need > shadow_len) {
        Shadow* ns = (Shadow*)realloc(shadow, sizeof(Shadow) * need);
        if (!ns) return false;
        memset(ns + shadow_len, 0, sizeof(Shadow) * (need - shadow_len));
        shadow = ns;
        shadow_len = need;
    }
    return true;
}
}  // namespace __lk

// ------------------------------------------------------------------------------------- atomics (one thread runs at a time)
template <class T, class U> __attribute__((no_sanitize_thread)) static inline T atomicAdd(T* a, U v) { __lk_access((uintptr_t)a, sizeof(T), 2); T o = *a; *a = (T)(o + (T)v); return o; }
template <class T, class U> __attribute__((no_sanitize_thread)) static inline T atomicSub(T* a, U v) { __lk_access((uintptr_t)a, sizeof(T), 2); T o = *a; *a = (T)(o - (T)v); return o; }
template <class T, class U> __attribute__((no_sanitize_thread)) static inline T atomicExch(T* a, U v) { __lk_access((uintptr_t)a, sizeof(T), 2); T o = *a; *a = (T)v; return o; }
template <class T, class U> __attribute__((no_sanitize_thread)) static inline T atomicMax(T* a, U v) { __lk_access((uintptr_t)a, sizeof(T), 2); T o = *a; if ((T)v > o) *a = (T)v; return o; }
template <class T, class U> __attribute__((no_sanitize_thread)) static inline T atomicMin(T* a, U v) { __lk_access((uintptr_t)a, sizeof(T), 2); T o = *a; if ((T)v < o) *a = (T)v; return o; }
template <class T, class U> __attribute__((no_sanitize_thread)) static inline T atomicAnd(T* a, U v) { __lk_access((uintptr_t)a, sizeof(T), 2); T o = *a; *a = o & (T)v; return o; }
template <class T, class U> __attribute__((no_sanitize_thread)) static inline T atomicOr(T* a, U v) { __lk_access((uintptr_t)a, sizeof(T), 2); T o = *a; *a = o | (T)v; return o; }
template <class T, class U> __attribute__((no_sanitize_thread)) static inline T atomicXor(T* a, U v) { __lk_access((uintptr_t)a, sizeof(T), 2); T o = *a; *a = o ^ (T)v; return o; }
template <class T, class U, class V> __attribute__((no_sanitize_thread)) static inline T atomicCAS(T* a, U cmp, V v) { __lk_access((uintptr_t)a, sizeof(T), 2); T o = *a; if (o == (T)cmp) *a = (T)v; return o; }
__attribute__((no_sanitize_thread)) static inline unsigned atomicInc(unsigned* a, unsigned v) { __lk_access((uintptr_t)a, sizeof(unsigned), 2); unsigned o = *a; *a = (o >= v) ? 0u : o + 1u; return o; }
__attribute__((no_sanitize_thread)) static inline unsigned atomicDec(unsigned* a, unsigned v) { __lk_access((uintptr_t)a, sizeof(unsigned), 2); unsigned o = *a; *a = (o == 0u || o > v) ? v : o - 1u; return o; }
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
static inline void __threadfence() {}
static inline void __threadfence_block() {}
static inline void __threadfence_system() {}
static inline void __nanosleep(unsigned) {}
static inline long long clock64() { static long long t = 0; return t += 1000; }
static inline void __trap() { __lk_fail("the kernel called __trap()."); }
static inline void __brkpt() {}

// ------------------------------------------------------------------------------------- loads with cache hints
template <class T> static inline T __ldg(const T* p) { return *p; }
template <class T> static inline T __ldcg(const T* p) { return *p; }
template <class T> static inline T __ldca(const T* p) { return *p; }
template <class T> static inline T __ldcs(const T* p) { return *p; }
template <class T> static inline T __ldlu(const T* p) { return *p; }
template <class T> static inline T __ldcv(const T* p) { return *p; }
template <class T> static inline void __stcg(T* p, T v) { *p = v; }
template <class T> static inline void __stcs(T* p, T v) { *p = v; }
template <class T> static inline void __stwb(T* p, T v) { *p = v; }
template <class T> static inline void __stwt(T* p, T v) { *p = v; }

// ------------------------------------------------------------------------------------- math: CUDA's device functions
template <class A, class B> static inline typename std::common_type<A, B>::type min(A a, B b) {
    typedef typename std::common_type<A, B>::type R; return (R)b < (R)a ? (R)b : (R)a; }
template <class A, class B> static inline typename std::common_type<A, B>::type max(A a, B b) {
    typedef typename std::common_type<A, B>::type R; return (R)a < (R)b ? (R)b : (R)a; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
static inline float rcbrtf(float x) { return 1.0f / cbrtf(x); }
static inline double rcbrt(double x) { return 1.0 / cbrt(x); }
static inline float __lk_exp10f(float x) { return powf(10.0f, x); }
#define exp10f __lk_exp10f
static inline double __lk_exp10(double x) { return pow(10.0, x); }
#define exp10 __lk_exp10
static inline float sinpif(float x) { return sinf((float)M_PI * x); }
static inline float cospif(float x) { return cosf((float)M_PI * x); }
static inline double sinpi(double x) { return sin(M_PI * x); }
static inline double cospi(double x) { return cos(M_PI * x); }
static inline void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
static inline float normcdff(float x) { return 0.5f * erfcf(-x * (float)M_SQRT1_2); }
static inline double normcdf(double x) { return 0.5 * erfc(-x * M_SQRT1_2); }
// The fast intrinsics (__expf, __sinf, __fdividef, ...) are, on a GPU, a few float steps around the multi-function
// unit's approximations (PTX ex2.approx, lg2.approx, sin.approx, cos.approx, rcp.approx). The stand-in does the float
// steps as the GPU does -- the argument scaled by a float constant (log2(e), log2(10), ln(2), 1/(2*pi); rounded toward
// zero before sin/cos), __fdividef's 0 for divisors beyond 2^126 -- so the large errors a GPU gives for large
// arguments show here too; the unit's own operation is computed correctly rounded, where a GPU's is within the bound
// CUDA documents of it (2 ulp for ex2, 2^-22 absolute for lg2 and sin/cos in [-pi, pi]): the last bit or two can differ.
static inline float __lk_ex2(float x) { return exp2f(x); }
static inline float __lk_lg2(float x) { return log2f(x); }
static inline float __lk_rz(double d) {  // d (a float product, exact in double) rounded toward zero to float
    float f = (float)d;
    return std::fabs((double)f) > std::fabs(d) ? std::nextafter(f, 0.0f) : f;
}
static inline double __lk_turns(float x) {  // x in turns, as the GPU scales it (x * 1/(2*pi) in float, toward zero), mod 1
    double t = (double)__lk_rz((double)x * (double)0x1.45f306p-3f /* 1/(2 pi) */);
    return t - std::nearbyint(t);  // exact: t is a float
}
static inline float __lk_sin_unit(float x) { return (float)std::sin(2.0 * M_PI * __lk_turns(x)); }
static inline float __lk_cos_unit(float x) { return (float)std::cos(2.0 * M_PI * __lk_turns(x)); }
static inline float __lk_fdividef(float a, float b) {  // a * rcp(b); PTX div.approx.f32: 0 (NaN for an infinite a) for 2^126 < |b| < 2^128
    float m = std::fabs(b);
    if (m > 0x1p126f && m < INFINITY) return std::isinf(a) ? NAN : a * 0.0f;
    return a * (1.0f / b);
}
#define __fdividef __lk_fdividef
static inline float __lk_expf(float x) { return __lk_ex2(x * 0x1.715476p+0f /* log2(e) */); }
#define __expf __lk_expf
static inline float __lk_fast_exp10f(float x) { return __lk_ex2(x * 0x1.a934f0p+1f /* log2(10) */); }
#define __exp10f __lk_fast_exp10f
static inline float __lk_logf(float x) { return __lk_lg2(x) * 0x1.62e430p-1f /* ln(2) */; }
#define __logf __lk_logf
static inline float __lk_log2f(float x) { return __lk_lg2(x); }
#define __log2f __lk_log2f
static inline float __lk_log10f(float x) { return __lk_lg2(x) * 0x1.344136p-2f /* log10(2) */; }
#define __log10f __lk_log10f
static inline float __lk_sinf(float x) { return __lk_sin_unit(x); }
#define __sinf __lk_sinf
static inline float __lk_cosf(float x) { return __lk_cos_unit(x); }
#define __cosf __lk_cosf
static inline float __lk_tanf(float x) { return __lk_fdividef(__lk_sin_unit(x), __lk_cos_unit(x)); }
#define __tanf __lk_tanf
static inline float __lk_powf(float a, float b) { return __lk_ex2(b * __lk_lg2(a)); }
#define __powf __lk_powf
static inline void __lk_sincosf(float x, float* s, float* c) { *s = __lk_sin_unit(x); *c = __lk_cos_unit(x); }
#define __sincosf __lk_sincosf
static inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : (x != x ? 0.f : x)); }
static inline float __fsqrt_rn(float x) { return sqrtf(x); }
// 1/sqrt(x) rounded once: the double quotient rounded to float, then moved to the neighbour on the correct side of
// each midpoint (m*m*x < 1 decided exactly: m*m is exact in double, fma rounds m*m*x - 1 once, keeping its sign;
// 1/sqrt(x) of a float is never a midpoint, so there are no ties).
static inline float __frsqrt_rn(float x) {
    if (!(x > 0.0f) || std::isinf(x)) return 1.0f / sqrtf(x);
    float r = (float)(1.0 / std::sqrt((double)x));
    for (int k = 0; k < 2; ++k) {
        float up = std::nextafter(r, INFINITY), dn = std::nextafter(r, 0.0f);
        double mu = 0.5 * ((double)r + (double)up), md = 0.5 * ((double)r + (double)dn);
        if (std::fma(mu * mu, (double)x, -1.0) < 0.0) r = up;         // 1/sqrt(x) > mu: the upper neighbour
        else if (std::fma(md * md, (double)x, -1.0) > 0.0) r = dn;    // 1/sqrt(x) < md: the lower one
        else break;
    }
    return r;
}
static inline float __frcp_rn(float x) { return 1.0f / x; }
static inline float __fdiv_rn(float a, float b) { return a / b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
// Directed rounding (_rz toward zero, _ru up, _rd down): the CPU's own rounding mode, set around one operation
// (the operands pass through volatile variables, so the operation cannot move outside the mode).
#define __LK_DIRECTED(T, NAME, OP, MODE)                                                   \
    static inline T NAME(T a, T b) {                                                       \
        int old = fegetround(); fesetround(MODE);                                          \
        volatile T va = a, vb = b; volatile T r = va OP vb;                                \
        fesetround(old); return r;                                                         \
    }
#define __LK_DIRECTED4(T, PRE, OPNAME, OP)                                                 \
    __LK_DIRECTED(T, PRE##OPNAME##_rz, OP, FE_TOWARDZERO)                                  \
    __LK_DIRECTED(T, PRE##OPNAME##_ru, OP, FE_UPWARD)                                      \
    __LK_DIRECTED(T, PRE##OPNAME##_rd, OP, FE_DOWNWARD)
__LK_DIRECTED4(float, __f, add, +) __LK_DIRECTED4(float, __f, sub, -) __LK_DIRECTED4(float, __f, mul, *)
__LK_DIRECTED4(float, __f, div, /) __LK_DIRECTED4(double, __d, add, +) __LK_DIRECTED4(double, __d, sub, -)
__LK_DIRECTED4(double, __d, mul, *) __LK_DIRECTED4(double, __d, div, /)
static inline double __dsub_rn(double a, double b) { return a - b; }
static inline double __ddiv_rn(double a, double b) { return a / b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline double __fma_rn(double a, double b, double c) { return fma(a, b, c); }
static inline double __drcp_rn(double x) { return 1.0 / x; }
static inline double __dsqrt_rn(double x) { return sqrt(x); }
static inline int __float2int_rn(float x) { return (int)nearbyintf(x); }
static inline int __float2int_rz(float x) { return (int)x; }
static inline int __float2int_rd(float x) { return (int)floorf(x); }
static inline int __float2int_ru(float x) { return (int)ceilf(x); }
static inline unsigned __float2uint_rn(float x) { return (unsigned)nearbyintf(x); }
static inline unsigned __float2uint_rz(float x) { return (unsigned)x; }
static inline long long __float2ll_rn(float x) { return (long long)nearbyintf(x); }
static inline int __double2int_rn(double x) { return (int)nearbyint(x); }
static inline int __double2int_rz(double x) { return (int)x; }
static inline float __double2float_rn(double x) { return (float)x; }
static inline float __int2float_rn(int x) { return (float)x; }
static inline float __uint2float_rn(unsigned x) { return (float)x; }
static inline double __int2double_rn(int x) { return (double)x; }
static inline float __ll2float_rn(long long x) { return (float)x; }
static inline int __float_as_int(float x) { int i; memcpy(&i, &x, 4); return i; }
static inline unsigned __float_as_uint(float x) { unsigned i; memcpy(&i, &x, 4); return i; }
static inline float __int_as_float(int i) { float x; memcpy(&x, &i, 4); return x; }
static inline float __uint_as_float(unsigned i) { float x; memcpy(&x, &i, 4); return x; }
static inline long long __double_as_longlong(double x) { long long i; memcpy(&i, &x, 8); return i; }
static inline double __longlong_as_double(long long i) { double x; memcpy(&x, &i, 8); return x; }
static inline int __double2hiint(double x) { return (int)(__double_as_longlong(x) >> 32); }
static inline int __double2loint(double x) { return (int)(__double_as_longlong(x) & 0xffffffff); }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __clzll(long long x) { return x ? __builtin_clzll((unsigned long long)x) : 64; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffsll(long long x) { return __builtin_ffsll(x); }
static inline unsigned __brev(unsigned x) {
    x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1); x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
    x = ((x >> 4) & 0x0f0f0f0fu) | ((x & 0x0f0f0f0fu) << 4); x = ((x >> 8) & 0x00ff00ffu) | ((x & 0x00ff00ffu) << 8);
    return (x >> 16) | (x << 16); }
static inline int __mul24(int a, int b) { return a * b; }
static inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
static inline int __mulhi(int a, int b) { return (int)(((long long)a * b) >> 32); }
static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((unsigned long long)a * b) >> 32); }
static inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) { return (unsigned long long)(((unsigned __int128)a * b) >> 64); }
static inline int __sad(int a, int b, int c) { return (a > b ? a - b : b - a) + c; }
static inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned s) { s &= 31u; return s ? (hi << s) | (lo >> (32 - s)) : hi; }
static inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned s) { s &= 31u; return s ? (lo >> s) | (hi << (32 - s)) : lo; }
static inline int __hadd(int a, int b) { return (int)(((long long)a + b) >> 1); }
static inline int __rhadd(int a, int b) { return (int)(((long long)a + b + 1) >> 1); }

// ------------------------------------------------------------------------------------- half and bfloat16
static inline unsigned short __lk_f2h_bits(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u);
    if (ax >= 0x47800000u) return (unsigned short)(sign | 0x7c00u);
    if (ax >= 0x38800000u) {
        uint32_t mant = ax & 0x7fffffu, e = (ax >> 23) - 112u;
        uint32_t h = (e << 10) | (mant >> 13), rem = mant & 0x1fffu;
        if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h += 1u;
        return (unsigned short)(sign | h);
    }
    if (ax < 0x33000000u) return (unsigned short)sign;
    uint32_t e = ax >> 23, mant = (ax & 0x7fffffu) | 0x800000u, shift = 126u - e;
    uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (h & 1u))) h += 1u;
    return (unsigned short)(sign | h);
}
static inline float __lk_h2f(unsigned short h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
    if (e == 0x1fu) x = sign | 0x7f800000u | (m << 13);
    else if (e) x = sign | ((e + 112u) << 23) | (m << 13);
    else if (!m) x = sign;
    else { float v = ldexpf((float)m, -24); return sign ? -v : v; }
    float f; memcpy(&f, &x, 4); return f;
}
static inline unsigned short __lk_f2bf_bits(float f) {
    uint32_t x; memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
    x += 0x7fffu + ((x >> 16) & 1u);
    return (unsigned short)(x >> 16);
}
static inline float __lk_bf2f(unsigned short b) { uint32_t x = (uint32_t)b << 16; float f; memcpy(&f, &x, 4); return f; }

// Rounding once, as CUDA's fused operations do. __lk_round_to rounds a double to `prec` significant bits with the
// smallest normal exponent `emin` (subnormals below it) and largest finite value `maxv`, to nearest even, in one step
// (the scaled value is an integer-valued double, so nearbyint rounds exactly once). __lk_fma_odd is a*b+c rounded to
// odd in double (53 bits): with two or more bits to spare, rounding that to a narrower format is the same as
// rounding the exact a*b+c once (Boldo and Melquiond's round-to-odd), whatever the exponents of a, b and c.
static inline double __lk_round_to(double x, int prec, int emin, double maxv) {
    if (x != x || x == 0.0 || std::isinf(x)) return x;
    int e; frexp(x, &e);  // |x| in [2^(e-1), 2^e)
    int p = (e - 1 >= emin) ? prec : prec - (emin - (e - 1));
    double r = ldexp(nearbyint(ldexp(x, p - e)), e - p);
    if (fabs(r) > maxv) return x > 0 ? INFINITY : -INFINITY;
    return r;
}
static inline double __lk_fma_odd(double a, double b, double c) {
    double p = a * b;  // exact: two 8- or 11-bit significands make at most 22 bits
    double s = p + c, bb = s - p, err = (p - (s - bb)) + (c - bb);  // TwoSum: s + err == p + c exactly
    if (err == 0.0 || std::isinf(s) || s != s) return s;
    long long bits; memcpy(&bits, &s, 8);
    if (bits & 1) return s;  // already odd
    return nextafter(s, err > 0 ? INFINITY : -INFINITY);  // the other neighbour of the exact value: odd
}
static inline double __lk_round_half(double x) { return __lk_round_to(x, 11, -14, 65504.0); }
static inline double __lk_round_bf16(double x) { return __lk_round_to(x, 8, -126, 0x1.fep127); }

struct __half_raw { unsigned short x; };
struct __half {
    unsigned short __x;
    __half() = default;
    __half(const __half_raw& r) : __x(r.x) {}
    __half(float f) : __x(__lk_f2h_bits(f)) {}
    __half(double f) : __x(__lk_f2h_bits((float)__lk_round_half(f))) {}  // one rounding, from double
    __half(int i) : __x(__lk_f2h_bits((float)i)) {}
    __half(unsigned i) : __x(__lk_f2h_bits((float)i)) {}
    __half(long long i) : __x(__lk_f2h_bits((float)i)) {}
    operator float() const { return __lk_h2f(__x); }
    operator __half_raw() const { return __half_raw{__x}; }
    __half& operator=(float f) { __x = __lk_f2h_bits(f); return *this; }
    __half& operator+=(const __half& o) { __x = __lk_f2h_bits(float(*this) + float(o)); return *this; }
    __half& operator-=(const __half& o) { __x = __lk_f2h_bits(float(*this) - float(o)); return *this; }
    __half& operator*=(const __half& o) { __x = __lk_f2h_bits(float(*this) * float(o)); return *this; }
    __half& operator/=(const __half& o) { __x = __lk_f2h_bits(float(*this) / float(o)); return *this; }
};
typedef __half half;
static inline __half __lk_hraw(unsigned short b) { __half h; h.__x = b; return h; }
static inline __half operator+(const __half& a, const __half& b) { return __half(float(a) + float(b)); }
static inline __half operator-(const __half& a, const __half& b) { return __half(float(a) - float(b)); }
static inline __half operator*(const __half& a, const __half& b) { return __half(float(a) * float(b)); }
static inline __half operator/(const __half& a, const __half& b) { return __half(float(a) / float(b)); }
static inline __half operator-(const __half& a) { return __lk_hraw((unsigned short)(a.__x ^ 0x8000u)); }
static inline bool operator==(const __half& a, const __half& b) { return float(a) == float(b); }
static inline bool operator!=(const __half& a, const __half& b) { return float(a) != float(b); }
static inline bool operator<(const __half& a, const __half& b) { return float(a) < float(b); }
static inline bool operator>(const __half& a, const __half& b) { return float(a) > float(b); }
static inline bool operator<=(const __half& a, const __half& b) { return float(a) <= float(b); }
static inline bool operator>=(const __half& a, const __half& b) { return float(a) >= float(b); }
struct alignas(4) __half2 { __half x, y; };
typedef __half2 half2;
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __double2half(double f) { return __half(f); }
static inline float __half2float(__half h) { return float(h); }
static inline __half __int2half_rn(int i) { return __half((float)i); }
static inline __half __uint2half_rn(unsigned i) { return __half((float)i); }
static inline int __half2int_rn(__half h) { return (int)nearbyintf(float(h)); }
static inline int __half2int_rz(__half h) { return (int)float(h); }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline __half __short_as_half(short s) { return __lk_hraw((unsigned short)s); }
static inline __half __ushort_as_half(unsigned short s) { return __lk_hraw(s); }
static inline __half __hadd(__half a, __half b) { return a + b; }
static inline __half __hsub(__half a, __half b) { return a - b; }
static inline __half __hmul(__half a, __half b) { return a * b; }
static inline __half __hdiv(__half a, __half b) { return a / b; }
static inline __half __hfma(__half a, __half b, __half c) {  // fused: a*b+c rounded once to half
    return __half(__lk_fma_odd(float(a), float(b), float(c)));
}
static inline __half __hneg(__half a) { return -a; }
static inline __half __habs(__half a) { return __lk_hraw((unsigned short)(a.__x & 0x7fffu)); }
static inline __half __hmax(__half a, __half b) { return float(a) < float(b) ? b : a; }
static inline __half __hmin(__half a, __half b) { return float(b) < float(a) ? b : a; }
static inline bool __heq(__half a, __half b) { return a == b; }
static inline bool __hne(__half a, __half b) { return a != b; }
static inline bool __hlt(__half a, __half b) { return a < b; }
static inline bool __hle(__half a, __half b) { return a <= b; }
static inline bool __hgt(__half a, __half b) { return a > b; }
static inline bool __hge(__half a, __half b) { return a >= b; }
static inline bool __hisnan(__half a) { return float(a) != float(a); }
static inline bool __hisinf(__half a) { return (a.__x & 0x7fffu) == 0x7c00u; }
static inline __half hsqrt(__half a) { return __half(sqrtf(float(a))); }
static inline __half hrsqrt(__half a) { return __half(1.0f / sqrtf(float(a))); }
static inline __half hexp(__half a) { return __half(expf(float(a))); }
static inline __half hlog(__half a) { return __half(logf(float(a))); }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
static inline __half2 __float2half2_rn(float a) { return __half2{__half(a), __half(a)}; }
static inline __half2 __halves2half2(__half a, __half b) { return __half2{a, b}; }
static inline __half2 __half2half2(__half a) { return __half2{a, a}; }
static inline float2 __half22float2(__half2 h) { return float2{float(h.x), float(h.y)}; }
static inline float __low2float(__half2 h) { return float(h.x); }
static inline float __high2float(__half2 h) { return float(h.y); }
static inline __half __low2half(__half2 h) { return h.x; }
static inline __half __high2half(__half2 h) { return h.y; }
static inline __half2 __hadd2(__half2 a, __half2 b) { return __half2{a.x + b.x, a.y + b.y}; }
static inline __half2 __hsub2(__half2 a, __half2 b) { return __half2{a.x - b.x, a.y - b.y}; }
static inline __half2 __hmul2(__half2 a, __half2 b) { return __half2{a.x * b.x, a.y * b.y}; }
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) { return __half2{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)}; }
static inline __half operator+(const __half& a) { return a; }
static inline __half& operator++(__half& a) { a += __half(1.0f); return a; }
static inline __half& operator--(__half& a) { a -= __half(1.0f); return a; }
static inline __half operator++(__half& a, int) { __half o = a; a += __half(1.0f); return o; }
static inline __half operator--(__half& a, int) { __half o = a; a -= __half(1.0f); return o; }

struct __nv_bfloat16 {
    unsigned short __x;
    __nv_bfloat16() = default;
    __nv_bfloat16(float f) : __x(__lk_f2bf_bits(f)) {}
    __nv_bfloat16(double f) : __x(__lk_f2bf_bits((float)__lk_round_bf16(f))) {}  // one rounding, from double
    __nv_bfloat16(int i) : __x(__lk_f2bf_bits((float)i)) {}
    operator float() const { return __lk_bf2f(__x); }
    __nv_bfloat16& operator+=(const __nv_bfloat16& o) { __x = __lk_f2bf_bits(float(*this) + float(o)); return *this; }
    __nv_bfloat16& operator*=(const __nv_bfloat16& o) { __x = __lk_f2bf_bits(float(*this) * float(o)); return *this; }
    __nv_bfloat16& operator-=(const __nv_bfloat16& o) { __x = __lk_f2bf_bits(float(*this) - float(o)); return *this; }
    __nv_bfloat16& operator/=(const __nv_bfloat16& o) { __x = __lk_f2bf_bits(float(*this) / float(o)); return *this; }
};
typedef __nv_bfloat16 nv_bfloat16;
struct alignas(4) __nv_bfloat162 { __nv_bfloat16 x, y; };
typedef __nv_bfloat162 nv_bfloat162;
static inline __nv_bfloat16 __lk_bfraw(unsigned short b) { __nv_bfloat16 h; h.__x = b; return h; }
static inline __nv_bfloat16 operator+(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __nv_bfloat16(float(a) + float(b)); }
static inline __nv_bfloat16 operator-(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __nv_bfloat16(float(a) - float(b)); }
static inline __nv_bfloat16 operator*(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __nv_bfloat16(float(a) * float(b)); }
static inline __nv_bfloat16 operator/(const __nv_bfloat16& a, const __nv_bfloat16& b) { return __nv_bfloat16(float(a) / float(b)); }
static inline __nv_bfloat16 operator-(const __nv_bfloat16& a) { return __lk_bfraw((unsigned short)(a.__x ^ 0x8000u)); }
static inline __nv_bfloat16 __float2bfloat16(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) { return __nv_bfloat16(f); }
static inline __nv_bfloat16 __double2bfloat16(double f) { return __nv_bfloat16(f); }
static inline float __bfloat162float(__nv_bfloat16 b) { return float(b); }
static inline short __bfloat16_as_short(__nv_bfloat16 b) { return (short)b.__x; }
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.__x; }
static inline __nv_bfloat16 __short_as_bfloat16(short s) { return __lk_bfraw((unsigned short)s); }
static inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short s) { return __lk_bfraw(s); }
static inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) { return a + b; }
static inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) { return a - b; }
static inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) { return a * b; }
static inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {  // fused: rounded once
    return __nv_bfloat16(__lk_fma_odd(float(a), float(b), float(c)));
}
static inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return __nv_bfloat162{__nv_bfloat16(a), __nv_bfloat16(b)}; }
static inline float2 __bfloat1622float2(__nv_bfloat162 h) { return float2{float(h.x), float(h.y)}; }
static inline __nv_bfloat16 __hdiv(__nv_bfloat16 a, __nv_bfloat16 b) { return a / b; }
static inline __nv_bfloat16 __hneg(__nv_bfloat16 a) { return -a; }
static inline __nv_bfloat16 __habs(__nv_bfloat16 a) { return __lk_bfraw((unsigned short)(a.__x & 0x7fffu)); }
static inline __nv_bfloat16 operator+(const __nv_bfloat16& a) { return a; }
static inline bool operator==(const __nv_bfloat16& a, const __nv_bfloat16& b) { return float(a) == float(b); }
static inline bool operator!=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return float(a) != float(b); }
static inline bool operator<(const __nv_bfloat16& a, const __nv_bfloat16& b) { return float(a) < float(b); }
static inline bool operator>(const __nv_bfloat16& a, const __nv_bfloat16& b) { return float(a) > float(b); }
static inline bool operator<=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return float(a) <= float(b); }
static inline bool operator>=(const __nv_bfloat16& a, const __nv_bfloat16& b) { return float(a) >= float(b); }
static inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) { return float(a) < float(b) ? b : a; }
static inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) { return float(b) < float(a) ? b : a; }
static inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 a, __nv_bfloat16 b) { return __nv_bfloat162{a, b}; }
static inline __nv_bfloat162 __bfloat162bfloat162(__nv_bfloat16 a) { return __nv_bfloat162{a, a}; }
static inline __nv_bfloat162 __float2bfloat162_rn(float a) { return __nv_bfloat162{__nv_bfloat16(a), __nv_bfloat16(a)}; }
static inline float __low2float(__nv_bfloat162 h) { return float(h.x); }
static inline float __high2float(__nv_bfloat162 h) { return float(h.y); }
static inline __nv_bfloat16 __low2bfloat16(__nv_bfloat162 h) { return h.x; }
static inline __nv_bfloat16 __high2bfloat16(__nv_bfloat162 h) { return h.y; }

// Paired types (__half2, __nv_bfloat162): CUDA's lane-wise arithmetic (__hadd2, ...), operators (+ - * /, the
// compound forms, unary -, and comparisons that hold when both lanes hold), and the __h*2 comparisons that give
// 1.0 or 0.0 per lane. Each lane rounds as the scalar operation does.
#define __LK_PAIR_OPS(P, S)                                                                                              \
    static inline P operator+(const P& a, const P& b) { return P{a.x + b.x, a.y + b.y}; }                                \
    static inline P operator-(const P& a, const P& b) { return P{a.x - b.x, a.y - b.y}; }                                \
    static inline P operator*(const P& a, const P& b) { return P{a.x * b.x, a.y * b.y}; }                                \
    static inline P operator/(const P& a, const P& b) { return P{a.x / b.x, a.y / b.y}; }                                \
    static inline P operator-(const P& a) { return P{-a.x, -a.y}; }                                                      \
    static inline P operator+(const P& a) { return a; }                                                                  \
    static inline P& operator+=(P& a, const P& b) { a = a + b; return a; }                                               \
    static inline P& operator-=(P& a, const P& b) { a = a - b; return a; }                                               \
    static inline P& operator*=(P& a, const P& b) { a = a * b; return a; }                                               \
    static inline P& operator/=(P& a, const P& b) { a = a / b; return a; }                                               \
    static inline bool operator==(const P& a, const P& b) { return a.x == b.x && a.y == b.y; }                           \
    static inline bool operator!=(const P& a, const P& b) { return a.x != b.x && a.y != b.y; }                           \
    static inline bool operator<(const P& a, const P& b) { return a.x < b.x && a.y < b.y; }                              \
    static inline bool operator>(const P& a, const P& b) { return a.x > b.x && a.y > b.y; }                              \
    static inline bool operator<=(const P& a, const P& b) { return a.x <= b.x && a.y <= b.y; }                           \
    static inline bool operator>=(const P& a, const P& b) { return a.x >= b.x && a.y >= b.y; }                           \
    static inline P __h2div(P a, P b) { return a / b; }                                                                  \
    static inline P __hneg2(P a) { return -a; }                                                                          \
    static inline P __habs2(P a) { return P{__habs(a.x), __habs(a.y)}; }                                                 \
    static inline P __hmax2(P a, P b) { return P{__hmax(a.x, b.x), __hmax(a.y, b.y)}; }                                  \
    static inline P __hmin2(P a, P b) { return P{__hmin(a.x, b.x), __hmin(a.y, b.y)}; }                                  \
    static inline P __heq2(P a, P b) { return P{S(a.x == b.x ? 1.0f : 0.0f), S(a.y == b.y ? 1.0f : 0.0f)}; }             \
    static inline P __hne2(P a, P b) { return P{S(a.x != b.x ? 1.0f : 0.0f), S(a.y != b.y ? 1.0f : 0.0f)}; }             \
    static inline P __hlt2(P a, P b) { return P{S(a.x < b.x ? 1.0f : 0.0f), S(a.y < b.y ? 1.0f : 0.0f)}; }               \
    static inline P __hle2(P a, P b) { return P{S(a.x <= b.x ? 1.0f : 0.0f), S(a.y <= b.y ? 1.0f : 0.0f)}; }             \
    static inline P __hgt2(P a, P b) { return P{S(a.x > b.x ? 1.0f : 0.0f), S(a.y > b.y ? 1.0f : 0.0f)}; }               \
    static inline P __hge2(P a, P b) { return P{S(a.x >= b.x ? 1.0f : 0.0f), S(a.y >= b.y ? 1.0f : 0.0f)}; }             \
    static inline bool __hbeq2(P a, P b) { return a == b; }                                                              \
    static inline bool __hbne2(P a, P b) { return a != b; }                                                              \
    static inline bool __hblt2(P a, P b) { return a < b; }                                                               \
    static inline bool __hble2(P a, P b) { return a <= b; }                                                              \
    static inline bool __hbgt2(P a, P b) { return a > b; }                                                               \
    static inline bool __hbge2(P a, P b) { return a >= b; }                                                              \
    static inline P __lowhigh2highlow(P a) { return P{a.y, a.x}; }
__LK_PAIR_OPS(__half2, __half)
__LK_PAIR_OPS(__nv_bfloat162, __nv_bfloat16)
static inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) { return a + b; }
static inline __nv_bfloat162 __hsub2(__nv_bfloat162 a, __nv_bfloat162 b) { return a - b; }
static inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) { return a * b; }
static inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
    return __nv_bfloat162{__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}

// ------------------------------------------------------------------------------------- the launch
namespace __lk {
// Start the launch: fiber stacks for a cluster of `blocks` blocks of `threads` threads (allocated once, grown as needed).
static bool prepare(unsigned threads, unsigned blocks, bool use_fibers) {
    fiber_mode = use_fibers;
    bthreads = (int)threads;
    nblk = use_fibers ? (int)blocks : 1;
    stride = use_fibers ? ((bthreads + 31) / 32) * 32 : bthreads;
    wpb = stride / 32 ? stride / 32 : 1;
    nfib = nblk * stride;
    nwarps = (nfib + 31) / 32;
    if (!use_fibers) return true;
    sh_size = (__start_lk_shared && __stop_lk_shared > __start_lk_shared) ? (size_t)(__stop_lk_shared - __start_lk_shared) : 0;
    if (nblk > 1) {
        free(sh_backing); free(dyn_backing);
        sh_backing = (char*)malloc(sh_size * (size_t)nblk + 1);
        dyn_backing = (char*)malloc(dyn_size * (size_t)nblk + 1);
        if (!sh_backing || !dyn_backing) return false;
    }
    if (nfib > cap) {
        Fiber* nf = (Fiber*)realloc(fibers, sizeof(Fiber) * (size_t)nfib);
        if (!nf) return false;
        fibers = nf;
        for (int t = cap; t < nfib; ++t) {
            void* base = mmap(nullptr, STACK_BYTES + GUARD_BYTES, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (base == MAP_FAILED) return false;
            mprotect(base, GUARD_BYTES, PROT_NONE);  // stacks grow down, into this
            fibers[t].stack = (char*)base + GUARD_BYTES;
        }
        cap = nfib;
        free(warps);
        warps = (WarpCall*)calloc((size_t)nwarps * WARP_SLOTS, sizeof(WarpCall));
        free(warp_epoch);
        warp_epoch = (unsigned*)calloc((size_t)nwarps, sizeof(unsigned));
        if (!warp_epoch) return false;
        free(flags);
        flags = (int*)calloc((size_t)nfib, sizeof(int));
        if (!warps || !flags) return false;
    }
    for (int t = 0; t < nfib; ++t) {
        fibers[t].rank = t / stride;
        fibers[t].exists = t % stride < bthreads;
    }
    return true;
}
// Poison every block's shared memory before a cluster runs (uninitialised, as on a GPU); block 0's copy is live.
static void poison_cluster_shared() {
    __lk_poison_shared();
    if (nblk > 1) {
        if (sh_size) memset(sh_backing, 0xFF, sh_size * (size_t)nblk);
        if (dyn_size) memset(dyn_backing, 0xFF, dyn_size * (size_t)nblk);
    }
    resident = 0;
}
}  // namespace __lk

#define __LK_THREAD_LOOP(bx, by, bz, BODY) \
    for (unsigned __tz = 0; __tz < (bz); ++__tz) for (unsigned __ty = 0; __ty < (by); ++__ty) \
    for (unsigned __tx = 0; __tx < (bx); ++__tx) { BODY }

#endif  // LABKIT_CUDA_HOST_H
