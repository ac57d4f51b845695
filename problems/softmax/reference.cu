// softmax reference (trusted): y = softmax(x, dim=1), fp32 in and out, fp64 sums.
//
// x and y are rows x cols, contiguous row-major. One block of BLOCK threads per
// row (grid (rows, 1, 1), block (BLOCK, 1, 1)), three passes over the row:
//   1. m = max_j x[j]                      (float; a max is exact in any order)
//   2. s = sum_j exp((double)x[j] - m)     (double)
//   3. y[j] = (float)(exp((double)x[j] - m) / s)
// BLOCK must be a power of two, at most 1024.

#ifndef BLOCK
#define BLOCK 512
#endif

__device__ float block_max(float v, float* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int half = BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + half]);
    __syncthreads();
  }
  const float out = red[0];
  __syncthreads();
  return out;
}

__device__ double block_sum(double v, double* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int half = BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
    __syncthreads();
  }
  const double out = red[0];
  __syncthreads();
  return out;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_ref(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float red_f[BLOCK];
  __shared__ double red_d[BLOCK];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;

  float m = -__int_as_float(0x7f800000);  // -inf
  for (int j = threadIdx.x; j < cols; j += BLOCK) m = fmaxf(m, xr[j]);
  m = block_max(m, red_f);

  double s = 0.0;
  for (int j = threadIdx.x; j < cols; j += BLOCK) s += exp((double)xr[j] - (double)m);
  s = block_sum(s, red_d);

  for (int j = threadIdx.x; j < cols; j += BLOCK) {
    yr[j] = (float)(exp((double)xr[j] - (double)m) / s);
  }
}
