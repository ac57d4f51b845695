// layernorm, round-0 starting kernel: y = layer_norm(x, (C, H, W), weight, bias, eps)
// in fp32.
//
// x and y are N x D with D = C * H * W (one contiguous row of D floats per
// sample); weight and bias hold D floats. A row has millions of elements and
// there are few rows, so every pass splits each row over SPLIT blocks
// (grid (SPLIT, N, 1)); block s covers [s * chunk, min((s + 1) * chunk, D)),
// chunk = ceil_div(D, SPLIT). Three launches, two-pass statistics (the mean
// first, then squared deviations from it: numerically stable even when the
// mean is much larger than the spread):
//   ln_partial_sum  psum[n * SPLIT + s] = sum of x over the chunk
//   ln_partial_m2   mean_n = sum_s psum / D;  pm2[n * SPLIT + s] = sum of (x - mean_n)^2
//   ln_apply        var_n = sum_s pm2 / D;    y = (x - mean_n) / sqrt(var_n + eps) * w + b
// (every block of the later launches re-adds the row's SPLIT partials itself).
// Workspace: psum and pm2, f32, N * SPLIT each. BLOCK: a power of two <= 1024.

#ifndef BLOCK
#define BLOCK 256
#endif

__device__ float block_reduce_sum(float v, float* red) {
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

// Sum of the row's SPLIT partials: thread t adds partials t, t + BLOCK, ...,
// then a tree over the block (a tree keeps the rounding error of long fp32
// sums small).
__device__ float row_total(const float* partial_row, int splits, float* red) {
  float acc = 0.0f;
  for (int i = threadIdx.x; i < splits; i += BLOCK) acc += partial_row[i];
  return block_reduce_sum(acc, red);
}

extern "C" __global__ void ln_partial_sum(const float* __restrict__ x, float* __restrict__ psum,
                                          long long D) {
  __shared__ float red[BLOCK];
  const long long n = blockIdx.y;
  const long long chunk = (D + gridDim.x - 1) / gridDim.x;
  const long long begin = blockIdx.x * chunk;
  const long long end = begin + chunk < D ? begin + chunk : D;
  float acc = 0.0f;
  for (long long i = begin + threadIdx.x; i < end; i += BLOCK) acc += x[n * D + i];
  acc = block_reduce_sum(acc, red);
  if (threadIdx.x == 0) psum[n * gridDim.x + blockIdx.x] = acc;
}

extern "C" __global__ void ln_partial_m2(const float* __restrict__ x, const float* __restrict__ psum,
                                         float* __restrict__ pm2, long long D) {
  __shared__ float red[BLOCK];
  const long long n = blockIdx.y;
  const int splits = gridDim.x;
  const float mean = row_total(psum + n * splits, splits, red) / (float)D;
  const long long chunk = (D + splits - 1) / splits;
  const long long begin = blockIdx.x * chunk;
  const long long end = begin + chunk < D ? begin + chunk : D;
  float acc = 0.0f;
  for (long long i = begin + threadIdx.x; i < end; i += BLOCK) {
    const float d = x[n * D + i] - mean;
    acc += d * d;
  }
  acc = block_reduce_sum(acc, red);
  if (threadIdx.x == 0) pm2[n * splits + blockIdx.x] = acc;
}

extern "C" __global__ void ln_apply(const float* __restrict__ x, const float* __restrict__ weight,
                                    const float* __restrict__ bias, const float* __restrict__ psum,
                                    const float* __restrict__ pm2, float* __restrict__ y,
                                    long long D, float eps) {
  __shared__ float red[BLOCK];
  const long long n = blockIdx.y;
  const int splits = gridDim.x;
  const float mean = row_total(psum + n * splits, splits, red) / (float)D;
  const float var = row_total(pm2 + n * splits, splits, red) / (float)D;
  const float rstd = 1.0f / sqrtf(var + eps);
  const long long chunk = (D + splits - 1) / splits;
  const long long begin = blockIdx.x * chunk;
  const long long end = begin + chunk < D ? begin + chunk : D;
  for (long long i = begin + threadIdx.x; i < end; i += BLOCK) {
    y[n * D + i] = (x[n * D + i] - mean) * rstd * weight[i] + bias[i];
  }
}
