// rmsnorm_bf16 reference: y = x / sqrt(mean(x^2) + eps) * weight, bf16 storage,
// fp64 arithmetic (the trusted reference).
//
// x and y are tokens x hidden bf16, contiguous row-major; weight is hidden
// bf16. The sum of squares is taken in fp64 and y rounded once to bf16. One
// block of BLOCK threads per token (grid (tokens, 1, 1)); BLOCK a power of
// two, at most 1024.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
rmsnorm_bf16_ref(const __nv_bfloat16* __restrict__ x, const __nv_bfloat16* __restrict__ weight,
            __nv_bfloat16* __restrict__ y, int tokens, int hidden, float eps) {
  __shared__ double red[BLOCK];
  const long long row = blockIdx.x;
  if (row >= tokens) return;
  const long long base = row * hidden;
  double sum_sq = 0.0;
  for (int c = threadIdx.x; c < hidden; c += BLOCK) {
    const double v = (double)__bfloat162float(x[base + c]);
    sum_sq += v * v;
  }
  red[threadIdx.x] = sum_sq;
  __syncthreads();
  for (int half = BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
    __syncthreads();
  }
  const double scale = 1.0 / sqrt(red[0] / hidden + (double)eps);
  for (int c = threadIdx.x; c < hidden; c += BLOCK) {
    const double v = (double)__bfloat162float(x[base + c]);
    y[base + c] = __double2bfloat16(v * scale * (double)__bfloat162float(weight[c]));
  }
}
