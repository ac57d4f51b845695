// The fp32 twin of reference.cu: the same copy, and the same tree in float.
extern "C" __global__ void __launch_bounds__(128)
tile_ref_fp32(const float* __restrict__ x, float* __restrict__ y, float* __restrict__ s, int cols) {
  __shared__ float red[128];
  const long long row = blockIdx.x;
  float sum = 0.0;
  for (int c = threadIdx.x; c < cols; c += 128) {
    float v = x[row * cols + c];
    y[row * cols + c] = v;
    sum += v;
  }
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int k = 64; k > 0; k >>= 1) {
    if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) s[row] = red[0];
}
