// A teaching tile for Hopper (sm_90a): one warpgroup (4 warps, 128 threads) computes a 64 x 64 tile of
// C = A @ B (FP16 inputs, FP32 accumulator), K in steps of 16, with the two mechanisms that reach Hopper's Tensor
// Core peak (PTX ISA; CUDA Hopper Tuning Guide):
//   TMA     cp.async.bulk.tensor.2d copies each 64 x 16 tile of A and of B from global to shared memory. One thread
//           issues it; an mbarrier in shared memory counts the bytes as they arrive, and the others wait on it.
//   wgmma   wgmma.mma_async: the four warps multiply the two tiles straight out of shared memory (each operand
//           named by a 64-bit matrix descriptor) into the accumulator registers, asynchronously; commit_group
//           and wait_group say when the result is there.
// It exists to be compiled by NVRTC for sm_90a (no GPU needed) and its PTX read next to lab 06's WMMA kernel.
// It is simplified on purpose (a single stage instead of a pipeline, no bounds checks) and it is not a tested GEMM:
// cuBLAS and CUTLASS's SM90 kernels are the real ones. Its inputs: the two tensor maps (CUtensorMap, built on the host
// with cuTensorMapEncodeTiled: 2-D FP16, K contiguous, box TMA_BOX_K x TMA_BOX_ROWS = 16 x 64 elements,
// CU_TENSOR_MAP_SWIZZLE_32B) as __grid_constant__ parameters, A as M x K and B stored transposed (N x K), both with
// K contiguous, as K-major wgmma operands want; C is M x N, row-major.
// The layout both sides must agree on (PTX ISA, "Shared Memory Matrix Layout"): TMA writes each 64 x 16 box as 64 rows
// of 32 bytes with the 32-byte swizzle (in every 256 bytes, rows 4-7 swap their two 16-byte halves); the descriptor
// says the same: swizzle mode 32B, 8-row groups SBO = 256 bytes apart, LBO unused (the 16 K-elements of one wgmma are
// one 32-byte row). Without the swizzle, a 16-element box would need two 8-element boxes and LBO = 1024, SBO = 128:
// the dense 32-byte rows a single unswizzled box writes are no layout wgmma can read. tests/test_rehearsal_wgmma_layout.py
// checks the two address maps element by element on the CPU (no GPU runs this tile).
// It includes no header: the FP16 tiles are raw 16-bit words (unsigned short), as the Tensor Cores read them.

#define TMA_BOX_K 16        // box: 16 FP16 along K (32 bytes) ...
#define TMA_BOX_ROWS 64     // ... by 64 rows of A (or of B^T)
#define TMA_SWIZZLE_BYTES 32  // CU_TENSOR_MAP_SWIZZLE_32B in both tensor maps
#define DESC_SWIZZLE 3      // descriptor bits 62-63: 0 none, 1 128B, 2 64B, 3 32B
#define DESC_LBO_BYTES 16   // leading byte offset: unused by a swizzled K-major operand (encoded 1)
#define DESC_SBO_BYTES 256  // stride byte offset: 8 rows x 32 bytes, from one 8-row group to the next

struct alignas(64) TensorMap { unsigned long long opaque[16]; };  // the 128 opaque bytes of a CUtensorMap

__device__ static inline unsigned smem_addr(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// wgmma matrix descriptor: start address, leading- and stride-dimension byte offsets (each >> 4), base offset 0 (the
// tiles are 256-byte aligned, the 32-byte swizzle's period), swizzle mode
__device__ static inline unsigned long long descriptor(const void* tile)
{
    const unsigned long long start = (smem_addr(tile) & 0x3FFFF) >> 4;
    const unsigned long long leading = DESC_LBO_BYTES >> 4, stride = DESC_SBO_BYTES >> 4, swizzle = DESC_SWIZZLE;
    return start | (leading << 16) | (stride << 32) | (swizzle << 62);
}

extern "C" __global__ void __launch_bounds__(128) wgmma_tile(const __grid_constant__ TensorMap map_a,
                                                             const __grid_constant__ TensorMap map_b,
                                                             float* C, int N, int K)
{
    __shared__ alignas(256) unsigned short tile_a[64 * 16];  // FP16 bit patterns, 32-byte swizzled rows
    __shared__ alignas(256) unsigned short tile_b[64 * 16];
    __shared__ alignas(8) unsigned long long arrived;  // the mbarrier
    const int row0 = blockIdx.y * 64, col0 = blockIdx.x * 64;
    float d[32];  // this thread's share of the 64 x 64 FP32 accumulator (64 * 64 / 128)
    for (int i = 0; i < 32; ++i) d[i] = 0.0f;

    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_addr(&arrived)));
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    unsigned phase = 0;
#pragma unroll 1  // one copy of the loop body in the PTX, easier to read
    for (int k0 = 0; k0 < K; k0 += 16) {
        if (threadIdx.x == 0) {  // TMA: one thread asks for both tiles; the mbarrier expects their bytes
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                         :: "r"(smem_addr(&arrived)), "r"(2 * 64 * 16 * 2) : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         :: "r"(smem_addr(tile_a)), "l"(&map_a), "r"(k0), "r"(row0), "r"(smem_addr(&arrived)) : "memory");
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         :: "r"(smem_addr(tile_b)), "l"(&map_b), "r"(k0), "r"(col0), "r"(smem_addr(&arrived)) : "memory");
        }
        asm volatile("{\n"
                     ".reg .pred ready;\n"
                     "WAIT:\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 ready, [%0], %1;\n"
                     "@!ready bra WAIT;\n"
                     "}\n" :: "r"(smem_addr(&arrived)), "r"(phase) : "memory");
        phase ^= 1;

        // wgmma: the warpgroup multiplies the two tiles in shared memory, d += A_tile @ B_tile
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        asm volatile("{\n"
                     ".reg .pred accumulate;\n"
                     "setp.ne.b32 accumulate, %34, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                     "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, accumulate, 1, 1, 0, 0;\n"
                     "}\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
          "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
          "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
          "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                     : "l"(descriptor(tile_a)), "l"(descriptor(tile_b)), "r"(1));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncthreads();  // both tiles consumed: the next TMA copy may overwrite them
    }

    // the accumulator layout of m64nNk16: warp w holds rows 16w .. 16w + 15; per 8 columns, four values per thread
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int r = row0 + warp * 16 + lane / 4;
    for (int j = 0; j < 8; ++j) {
        const int c = col0 + 8 * j + 2 * (lane % 4);
        C[(size_t)r * N + c] = d[4 * j];
        C[(size_t)r * N + c + 1] = d[4 * j + 1];
        C[(size_t)(r + 8) * N + c] = d[4 * j + 2];
        C[(size_t)(r + 8) * N + c + 1] = d[4 * j + 3];
    }
}
