// softmax, round-0 starting kernel: y = softmax(x, dim=1) in fp32.
//
// x and y are rows x cols, contiguous row-major. One block per row (grid
// (rows, 1, 1), block (BLOCK, 1, 1), BLOCK a power of two <= 1024), three
// passes over the row, with shared-memory tree reductions:
//   1. m = max_j x[j]            (subtracting the max keeps expf from overflowing)
//   2. s = sum_j expf(x[j] - m)
//   3. y[j] = expf(x[j] - m) / s

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                                        int rows, int cols) {
  __shared__ float red[BLOCK];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* xr = x + (long long)row * cols;
  float* yr = y + (long long)row * cols;
  const int t = threadIdx.x;

  float m = -3.402823466e38f;
  for (int j = t; j < cols; j += BLOCK) m = fmaxf(m, xr[j]);
  red[t] = m;
  __syncthreads();
  for (int half = BLOCK / 2; half > 0; half /= 2) {
    if (t < half) red[t] = fmaxf(red[t], red[t + half]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();

  float s = 0.0f;
  for (int j = t; j < cols; j += BLOCK) s += expf(xr[j] - m);
  red[t] = s;
  __syncthreads();
  for (int half = BLOCK / 2; half > 0; half /= 2) {
    if (t < half) red[t] += red[t + half];
    __syncthreads();
  }
  s = red[0];

  for (int j = t; j < cols; j += BLOCK) yr[j] = expf(xr[j] - m) / s;
}
