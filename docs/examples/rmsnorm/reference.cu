// rmsnorm reference (trusted): y[r][c] = x[r][c] / sqrt(mean_c x[r][c]^2 + eps) * weight[c],
// fp32 in and out, the sum of squares in double.
// x and y: rows x cols, contiguous row-major; weight: cols.
// One block of BLOCK threads per row: grid (rows, 1, 1), block (BLOCK, 1, 1).
// BLOCK must be a power of two, at most 1024.

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
rmsnorm_ref(const float* __restrict__ x, const float* __restrict__ weight, float* __restrict__ y,
            int cols, float eps) {
  __shared__ double red[BLOCK];
  const long long row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;

  double ss = 0.0;
  for (int c = threadIdx.x; c < cols; c += BLOCK) ss += (double)xr[c] * (double)xr[c];
  red[threadIdx.x] = ss;
  __syncthreads();
  for (int half = BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
    __syncthreads();
  }
  const double inv_rms = 1.0 / sqrt(red[0] / cols + (double)eps);

  for (int c = threadIdx.x; c < cols; c += BLOCK) {
    yr[c] = (float)((double)xr[c] * inv_rms * (double)weight[c]);
  }
}
