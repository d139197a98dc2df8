// Lab 10 reference (10.cluster): thread-block clusters and distributed shared memory (sm_90 and later).
// Launch it with a cluster dimension (cuda.core: LaunchConfig(grid=clusters, cluster=blocks_per_cluster, block=threads)).
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// Each cluster of blocks sums its part of x: every block reduces its elements in its own shared memory, then
// block rank 0 of the cluster adds the blocks' partial sums, read from their shared memory (distributed shared memory).
extern "C" __global__ void cluster_sum(const float* x, float* out, int n)
{
    __shared__ float partial[256];  // blockDim.x: a power of two up to 256
    cg::cluster_group cluster = cg::this_cluster();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    partial[threadIdx.x] = i < n ? x[i] : 0.0f;
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            partial[threadIdx.x] += partial[threadIdx.x + s];
        __syncthreads();
    }
    cluster.sync();  // every block of the cluster has its partial[0]
    if (cluster.block_rank() == 0 && threadIdx.x == 0) {
        float total = 0.0f;
        for (unsigned int r = 0; r < cluster.num_blocks(); ++r)
            total += *cluster.map_shared_rank(&partial[0], r);  // block r's shared memory
        out[blockIdx.x / cluster.num_blocks()] = total;
    }
    cluster.sync();  // no block exits while rank 0 may still read its shared memory
}
