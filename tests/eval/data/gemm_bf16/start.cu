// A plain tiled GEMM: 16×16 tiles of A and B in shared memory as fp32,
// fp32 accumulation, one rounding to bf16.
#include <cuda_bf16.h>

#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void __launch_bounds__(TILE * TILE)
gemm_tiled(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B, __nv_bfloat16* __restrict__ C,
           int M, int N, int K) {
  __shared__ float as[TILE][TILE + 1], bs[TILE][TILE + 1];
  int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    as[ty][tx] = row < M && k0 + tx < K ? __bfloat162float(A[(long long)row * K + k0 + tx]) : 0.0f;
    bs[ty][tx] = k0 + ty < K && col < N ? __bfloat162float(B[(long long)(k0 + ty) * N + col]) : 0.0f;
    __syncthreads();
    for (int k = 0; k < TILE; ++k) acc = fmaf(as[ty][k], bs[k][tx], acc);
    __syncthreads();
  }
  if (row < M && col < N) C[(long long)row * N + col] = __float2bfloat16_rn(acc);
}
