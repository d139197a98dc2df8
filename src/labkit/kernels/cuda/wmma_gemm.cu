#include <cuda_fp16.h>
#include <mma.h>
using namespace nvcuda;

// C (M x N, float) = A (M x K, half) @ B (K x N, half), all row-major; M, N, K multiples of 16.
// One warp computes one 16 x 16 tile of C. Launch: block (32, WARPS), grid (N / 16, ceil(M / 16 / WARPS)).
extern "C" __global__ void wmma_gemm(const half* A, const half* B, float* C, int M, int N, int K)
{
    const int tile_row = blockIdx.y * blockDim.y + threadIdx.y;   // which 16-row strip of C
    const int tile_col = blockIdx.x;                              // which 16-column strip of C
    if (tile_row * 16 >= M || tile_col * 16 >= N) return;         // the whole warp leaves together

    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);

    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + (size_t)tile_row * 16 * K + k, K);   // 16 x 16 block of A
        wmma::load_matrix_sync(b, B + (size_t)k * N + tile_col * 16, N);   // 16 x 16 block of B
        wmma::mma_sync(acc, a, b, acc);                                    // acc += a @ b on Tensor Cores
    }
    wmma::store_matrix_sync(C + (size_t)tile_row * 16 * N + tile_col * 16, acc, N, wmma::mem_row_major);
}
