// The fp32 twin: the same tree with float partial sums, one rounding to fp16.
#include <cuda_fp16.h>

extern "C" __global__ void __launch_bounds__(256)
rowmean_ref_fp32(const __half* __restrict__ x, __half* __restrict__ y, int cols) {
  __shared__ float red[256];
  const __half* xr = x + (long long)blockIdx.x * cols;
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += 256) s += __half2float(xr[c]);
  red[threadIdx.x] = s;
  __syncthreads();
  for (int k = 128; k > 0; k >>= 1) {
    if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) y[blockIdx.x] = __float2half_rn(red[0] / cols);
}
