// softmax reference, fp32 twin: y = softmax(x, dim=1) in plain fp32 arithmetic.
//
// The same kernel as reference.cu with float in place of double (expf, float
// sums). The evaluator compares it with reference.cu to measure how accurate
// plain fp32 is for this op; the strict tolerance is a multiple of that error.
//
// x and y are rows x cols, contiguous row-major. One block of BLOCK threads per
// row (grid (rows, 1, 1), block (BLOCK, 1, 1)), three passes over the row:
//   1. m = max_j x[j]
//   2. s = sum_j expf(x[j] - m)
//   3. y[j] = expf(x[j] - m) / s
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

__device__ float block_sum(float v, float* red) {
  red[threadIdx.x] = v;
  __syncthreads();
  for (int half = BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
    __syncthreads();
  }
  const float out = red[0];
  __syncthreads();
  return out;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_ref_fp32(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float red[BLOCK];
  const long long row = blockIdx.x;
  if (row >= rows) return;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;

  float m = -__int_as_float(0x7f800000);  // -inf
  for (int j = threadIdx.x; j < cols; j += BLOCK) m = fmaxf(m, xr[j]);
  m = block_max(m, red);

  float s = 0.0f;
  for (int j = threadIdx.x; j < cols; j += BLOCK) s += expf(xr[j] - m);
  s = block_sum(s, red);

  for (int j = threadIdx.x; j < cols; j += BLOCK) yr[j] = expf(xr[j] - m) / s;
}
