// add_rmsnorm, round-0 starting kernel: h = x + residual (bf16), then
// y = h * rsqrt(mean(h^2) + eps) * weight (bf16), fp32 arithmetic.
//
// x, residual, h, y: tokens x hidden bf16, contiguous row-major; weight:
// hidden bf16. One block per token (grid (tokens, 1, 1), block (BLOCK, 1, 1),
// BLOCK a power of two <= 1024); one element per thread per step, a
// shared-memory tree for the sum, and a second pass that reads h back.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void add_rmsnorm(const __nv_bfloat16* __restrict__ x,
                                       const __nv_bfloat16* __restrict__ residual,
                                       const __nv_bfloat16* __restrict__ weight,
                                       __nv_bfloat16* __restrict__ h, __nv_bfloat16* __restrict__ y,
                                       int tokens, int hidden, float eps) {
  __shared__ float red[BLOCK];
  const int row = blockIdx.x;
  if (row >= tokens) return;
  const long long base = (long long)row * hidden;
  float sum_sq = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += BLOCK) {
    const __nv_bfloat16 s =
        __float2bfloat16_rn(__bfloat162float(x[base + c]) + __bfloat162float(residual[base + c]));
    h[base + c] = s;
    const float v = __bfloat162float(s);
    sum_sq += v * v;
  }
  red[threadIdx.x] = sum_sq;
  __syncthreads();
  for (int half = BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
    __syncthreads();
  }
  const float scale = rsqrtf(red[0] / hidden + eps);
  for (int c = threadIdx.x; c < hidden; c += BLOCK) {
    y[base + c] = __float2bfloat16_rn(__bfloat162float(h[base + c]) * scale * __bfloat162float(weight[c]));
  }
}
