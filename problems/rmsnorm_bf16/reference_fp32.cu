// rmsnorm_bf16, fp32 twin: y = x * rsqrt(mean(x^2) + eps) * weight, bf16 storage,
// fp32 arithmetic (a shared-memory tree for the sum), each output rounded
// once: the plain kernel whose error against the fp64 reference sets the
// strict tolerance.
//
// x and y are tokens x hidden bf16, contiguous row-major; weight is hidden
// bf16. One block of BLOCK threads per token (grid (tokens, 1, 1)); BLOCK a
// power of two, at most 1024.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
rmsnorm_bf16_ref_fp32(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
                 __nv_bfloat16* __restrict__ y, int tokens, int hidden, float eps) {
  __shared__ float red[BLOCK];
  const long long row = blockIdx.x;
  if (row >= tokens) return;
  const long long base = row * hidden;
  float sum_sq = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += BLOCK) {
    const float v = __bfloat162float(x[base + c]);
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
    y[base + c] = __float2bfloat16_rn(__bfloat162float(x[base + c]) * scale * __bfloat162float(weight[c]));
  }
}
