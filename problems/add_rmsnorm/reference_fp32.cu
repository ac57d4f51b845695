// add_rmsnorm, fp32 twin: the plain kernel an engine would write first. It
// reads bf16, computes in fp32 (float sum of squares, 1/sqrtf), and rounds h
// and y once to bf16. The evaluator compares it with the fp64 reference to
// measure how accurate such a kernel is; the strict tolerance is a multiple
// of that.
//
// x, residual, h, y: tokens x hidden bf16, row-major; weight: hidden bf16.
// One block of BLOCK threads per token; BLOCK a power of two, at most 1024.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
add_rmsnorm_ref_fp32(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ residual,
                     const __nv_bfloat16* __restrict__ weight, __nv_bfloat16* __restrict__ h,
                     __nv_bfloat16* __restrict__ y, int tokens, int hidden, float eps) {
  __shared__ float red[BLOCK];
  const long long row = blockIdx.x;
  if (row >= tokens) return;
  const long long base = row * hidden;
  float sum_sq = 0.0f;
  for (int c = threadIdx.x; c < hidden; c += BLOCK) {
    const __nv_bfloat16 stored =
        __float2bfloat16_rn(__bfloat162float(x[base + c]) + __bfloat162float(residual[base + c]));
    h[base + c] = stored;
    const float v = __bfloat162float(stored);
    sum_sq += v * v;
  }
  red[threadIdx.x] = sum_sq;
  __syncthreads();
  for (int half = BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
    __syncthreads();
  }
  const float scale = 1.0f / sqrtf(red[0] / hidden + eps);
  for (int c = threadIdx.x; c < hidden; c += BLOCK) {
    const float v = __bfloat162float(h[base + c]);
    y[base + c] = __float2bfloat16_rn(v * scale * __bfloat162float(weight[c]));
  }
}
