// rmsnorm reference, fp32 twin: the kernel of reference.cu with float in place
// of double, to measure how accurate plain fp32 is for this op.
// x and y: rows x cols, contiguous row-major; weight: cols.
// One block of BLOCK threads per row: grid (rows, 1, 1), block (BLOCK, 1, 1).

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
rmsnorm_ref_fp32(const float* __restrict__ x, const float* __restrict__ weight,
                 float* __restrict__ y, int cols, float eps) {
  __shared__ float red[BLOCK];
  const long long row = blockIdx.x;
  const float* xr = x + row * cols;
  float* yr = y + row * cols;

  float ss = 0.0f;
  for (int c = threadIdx.x; c < cols; c += BLOCK) ss += xr[c] * xr[c];
  red[threadIdx.x] = ss;
  __syncthreads();
  for (int half = BLOCK / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
    __syncthreads();
  }
  const float inv_rms = 1.0f / sqrtf(red[0] / cols + eps);

  for (int c = threadIdx.x; c < cols; c += BLOCK) yr[c] = xr[c] * inv_rms * weight[c];
}
