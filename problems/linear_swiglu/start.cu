// linear_swiglu: Y = silu(X · Wgᵀ) · (X · Wuᵀ), a plain tiled kernel. X is
// M x K, W is 2N x K (rows 0 .. N-1 the gate projection, N .. 2N-1 the up
// projection), Y is M x N, all bf16 row-major. A TILE x TILE block computes a
// TILE x TILE tile of Y; tiles of X, Wg and Wu (TILE values of k) are staged
// in shared memory as fp32, each thread keeps an fp32 gate and up sum and
// rounds silu(gate) * up to bf16 once. Any M, N, K >= 1. Grid
// (ceil_div(N, TILE), ceil_div(M, TILE), 1), block TILE * TILE threads.
#include <cuda_bf16.h>

#ifndef TILE
#define TILE 16
#endif

extern "C" __global__ void __launch_bounds__(TILE * TILE)
linear_swiglu_tiled(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ W,
                    __nv_bfloat16* __restrict__ Y, int M, int N, int K) {
  // xs[row][k], gs[col][k], us[col][k]: consecutive threads on consecutive k.
  __shared__ float xs[TILE][TILE + 1], gs[TILE][TILE + 1], us[TILE][TILE + 1];
  const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
  const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  const int wrow = blockIdx.x * TILE + ty;  // the gate row (and up row N + wrow) this thread stages
  float gate = 0.0f, up = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    const int k = k0 + tx;
    const bool in_w = wrow < N && k < K;
    xs[ty][tx] = row < M && k < K ? __bfloat162float(X[(long long)row * K + k]) : 0.0f;
    gs[ty][tx] = in_w ? __bfloat162float(W[(long long)wrow * K + k]) : 0.0f;
    us[ty][tx] = in_w ? __bfloat162float(W[(long long)(N + wrow) * K + k]) : 0.0f;
    __syncthreads();
    for (int kk = 0; kk < TILE; ++kk) {
      gate = fmaf(xs[ty][kk], gs[tx][kk], gate);
      up = fmaf(xs[ty][kk], us[tx][kk], up);
    }
    __syncthreads();
  }
  if (row < M && col < N) Y[(long long)row * N + col] = __float2bfloat16_rn(gate / (1.0f + expf(-gate)) * up);
}
