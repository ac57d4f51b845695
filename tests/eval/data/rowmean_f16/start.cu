// One warp per row: fp32 partial sums, shuffle reduction, one rounding.
#include <cuda_fp16.h>

#ifndef WARPS
#define WARPS 4
#endif

extern "C" __global__ void __launch_bounds__(32 * WARPS)
rowmean_warp(const __half* __restrict__ x, __half* __restrict__ y, int rows, int cols) {
  int row = blockIdx.x * WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  const __half* xr = x + (long long)row * cols;
  float s = 0.0f;
  for (int c = lane; c < cols; c += 32) s += __half2float(xr[c]);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) y[row] = __float2half_rn(s / cols);
}
