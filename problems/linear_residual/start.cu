// linear_residual: Y = X · Wᵀ + R, a plain tiled kernel. X is M x K, W is
// N x K, R and Y are M x N, all bf16 row-major. A TILE x TILE block computes a
// TILE x TILE tile of Y; tiles of X and W (TILE values of k) are staged in
// shared memory as fp32, each thread keeps one fp32 sum, adds R in fp32 and
// rounds to bf16 once. Any M, N, K >= 1. Grid (ceil_div(N, TILE), ceil_div(M, TILE), 1),
// block TILE * TILE threads.
#include <cuda_bf16.h>

#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void __launch_bounds__(TILE * TILE)
linear_residual_tiled(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ W,
                      const __nv_bfloat16* __restrict__ R, __nv_bfloat16* __restrict__ Y, int M, int N, int K) {
  // xs[row][k], ws[col][k]: each thread loads one element of each with
  // consecutive threads on consecutive k (coalesced along the rows of X and W).
  __shared__ float xs[TILE][TILE + 1], ws[TILE][TILE + 1];
  const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  const int wrow = blockIdx.x * TILE + ty;  // the row of W this thread stages
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    const int k = k0 + tx;
    xs[ty][tx] = row < M && k < K ? __bfloat162float(X[(long long)row * K + k]) : 0.0f;
    ws[ty][tx] = wrow < N && k < K ? __bfloat162float(W[(long long)wrow * K + k]) : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < TILE; ++kk) acc = fmaf(xs[ty][kk], ws[tx][kk], acc);
    __syncthreads();
  }
  if (row < M && col < N) {
    const long long at = (long long)row * N + col;
    Y[at] = __float2bfloat16_rn(acc + __bfloat162float(R[at]));
  }
}
