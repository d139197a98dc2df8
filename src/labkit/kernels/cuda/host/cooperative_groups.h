// labkit's CPU stand-in for <cooperative_groups.h> (labkit.cuda_cpp only): the block, thread-block clusters
// (Hopper's distributed shared memory) and warp tiles. A cluster's blocks run together as fibers, each with its own
// shared memory; cluster.sync() waits for every thread of every block of the cluster; map_shared_rank gives the
// address of the same variable in another block's shared memory, which must still be running.
#pragma once
#include "labkit_cuda_host.h"

namespace __lk {
// The address of the variable at `p` (in this block's shared memory) in block `rank`'s shared memory.
static inline char* map_shared(const void* p, unsigned rank) {
    char* c = (char*)p;
    if (rank >= (unsigned)nblk) {
        __lk_fail("cluster.map_shared_rank(ptr, %u): the cluster has %d block(s), ranks 0 to %d.", rank, nblk, nblk - 1);
        return c;
    }
    int me = cur >= 0 ? fibers[cur].rank : 0;
    if (exited[rank]) {
        char a[160];
        describe(cur, a, sizeof a);
        __lk_fail("thread %s read the shared memory of block rank %u of its cluster, which had already left the kernel "
                  "(its shared memory no longer exists). A block must not exit while a peer may read its shared memory: "
                  "end the kernel with cluster.sync(), reached by every thread of every block.", a, rank);
        return c;
    }
    if ((int)rank == me) return c;
    if (sh_size && c >= __start_lk_shared && c < __start_lk_shared + sh_size)
        return sh_backing + (size_t)rank * sh_size + (size_t)(c - __start_lk_shared);
    if (dyn_size && c >= dyn_ptr && c < dyn_ptr + dyn_size)
        return dyn_backing + (size_t)rank * dyn_size + (size_t)(c - dyn_ptr);
    __lk_fail("cluster.map_shared_rank(ptr, %u): ptr is not the address of a __shared__ variable of this block.", rank);
    return c;
}
}  // namespace __lk

namespace cooperative_groups {
struct thread_block {
    void sync() const { __syncthreads(); }
    unsigned thread_rank() const { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
    unsigned size() const { return blockDim.x * blockDim.y * blockDim.z; }
    unsigned num_threads() const { return size(); }
    dim3 group_index() const { return dim3(blockIdx); }
    dim3 thread_index() const { return dim3(threadIdx); }
    dim3 dim_threads() const { return blockDim; }
    dim3 group_dim() const { return blockDim; }
};
static inline thread_block this_thread_block() { return thread_block(); }

struct cluster_group {
    void sync() const { __lk_cluster_sync(); }
    void barrier_arrive() const {}
    void barrier_wait() const { __lk_cluster_sync(); }  // arrive + wait, taken together
    unsigned block_rank() const { return (unsigned)__lk::fibers[__lk::cur].rank; }
    unsigned num_blocks() const { return (unsigned)__lk::nblk; }
    dim3 dim_blocks() const { return dim3(__lk::cdim.x, __lk::cdim.y, __lk::cdim.z); }
    dim3 block_index() const {
        return dim3(blockIdx.x % __lk::cdim.x, blockIdx.y % __lk::cdim.y, blockIdx.z % __lk::cdim.z);
    }
    unsigned num_threads() const { return num_blocks() * blockDim.x * blockDim.y * blockDim.z; }
    unsigned size() const { return num_threads(); }
    unsigned thread_rank() const {
        return block_rank() * blockDim.x * blockDim.y * blockDim.z
               + threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    }
    bool is_valid() const { return true; }
    template <class T> T* map_shared_rank(T* p, unsigned rank) const { return (T*)__lk::map_shared(p, rank); }
    template <class T> T& map_shared_rank(T& v, unsigned rank) const { return *(T*)__lk::map_shared(&v, rank); }
    template <class T> unsigned query_shared_rank(T* p) const { return block_rank(); }
};
static inline cluster_group this_cluster() { return cluster_group(); }

// A tile of N threads of a warp (N a power of two up to 32): shuffles within the tile.
template <unsigned N>
struct thread_block_tile {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0, "tiled_partition<N>: N is a power of two up to 32");
    unsigned lane() const { return thread_block().thread_rank() % 32; }
    unsigned mask() const {
        unsigned m = N == 32 ? 0xffffffffu : ((1u << N) - 1u) << (lane() / N * N);
        return m & __lk::lanes_of(__lk::my_warp());
    }
    void sync() const { __syncwarp(mask()); }
    unsigned thread_rank() const { return lane() % N; }
    unsigned size() const { return N; }
    unsigned num_threads() const { return N; }
    unsigned meta_group_rank() const { return thread_block().thread_rank() / N; }
    unsigned meta_group_size() const { return (thread_block().size() + N - 1) / N; }
    template <class T> T shfl(T v, int src) const { return __shfl_sync(mask(), v, src, (int)N); }
    template <class T> T shfl_down(T v, unsigned d) const { return __shfl_down_sync(mask(), v, d, (int)N); }
    template <class T> T shfl_up(T v, unsigned d) const { return __shfl_up_sync(mask(), v, d, (int)N); }
    template <class T> T shfl_xor(T v, int m) const { return __shfl_xor_sync(mask(), v, m, (int)N); }
    int any(int p) const { return __any_sync(mask(), p); }
    int all(int p) const { return __all_sync(mask(), p); }
    unsigned ballot(int p) const { return __ballot_sync(mask(), p) >> (lane() / N * N); }
};
template <unsigned N> static inline thread_block_tile<N> tiled_partition(const thread_block&) { return thread_block_tile<N>(); }

// The generic group (cooperative groups' thread_group): a whole block, or a tile of n threads (n a power of two up
// to 32) from tiled_partition(block, n); sync(), thread_rank(), size()/num_threads() as for the group it holds.
class thread_group {
    unsigned n_;  // 0: the whole block; else the tile size
  public:
    thread_group(const thread_block&) : n_(0) {}
    template <unsigned N> thread_group(const thread_block_tile<N>&) : n_(N) {}
    explicit thread_group(unsigned tile) : n_(tile) {}
    void sync() const {
        if (!n_) { __syncthreads(); return; }
        unsigned lane = thread_block().thread_rank() % 32;
        unsigned m = n_ == 32 ? 0xffffffffu : ((1u << n_) - 1u) << (lane / n_ * n_);
        __syncwarp(m & __lk::lanes_of(__lk::my_warp()));
    }
    unsigned thread_rank() const { return n_ ? thread_block().thread_rank() % n_ : thread_block().thread_rank(); }
    unsigned size() const { return n_ ? n_ : thread_block().size(); }
    unsigned num_threads() const { return size(); }
};
static inline thread_group tiled_partition(const thread_group& parent, unsigned n) {
    if (n == 0 || n > 32 || (n & (n - 1)) || parent.size() != thread_block().size())
        __lk_fail("tiled_partition(group, %u): the CPU stand-in partitions a whole block into tiles of a power of two up to 32 threads.", n);
    return thread_group(n);
}
static inline thread_group tiled_partition(const thread_block& parent, unsigned n) { return tiled_partition(thread_group(parent), n); }
template <class G> static inline void sync(const G& g) { g.sync(); }
}  // namespace cooperative_groups
