// layernorm reference, fp32 twin: y = layer_norm(x, (C, H, W), weight, bias, eps)
// in plain fp32 arithmetic.
//
// The same kernels as reference.cu with float in place of double (float
// partial sums, float statistics, sqrtf). The evaluator compares it with
// reference.cu to measure how accurate plain fp32 is for this op; the strict
// tolerance is a multiple of that error.
//
// x and y are N x D with D = C * H * W; weight and bias hold D floats.
// Two passes: mean, then the mean of squared deviations; each pass is split
// over SPLIT blocks per row (grid (SPLIT, N, 1)) writing partial sums, which a
// kernel with one block per row adds (a tree over BLOCK threads). Workspace:
// partial (f32, N * SPLIT) and stats (f32, 2 * N: mean_n at 2n,
// 1 / sqrtf(var_n + eps) at 2n + 1). BLOCK must be a power of two, at most 1024.

#ifndef BLOCK
#define BLOCK 256
#endif

__device__ float block_sum(float v) {
  __shared__ float red[BLOCK];
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

// The elements [begin, end) of this block's part of its row.
__device__ void chunk_of_block(long long D, long long* begin, long long* end) {
  const long long chunk = (D + gridDim.x - 1) / gridDim.x;
  *begin = (long long)blockIdx.x * chunk;
  *end = *begin + chunk < D ? *begin + chunk : D;
}

// Grid (SPLIT, N, 1): partial[n * SPLIT + s] = sum of x over block s's chunk.
extern "C" __global__ void __launch_bounds__(BLOCK)
ln_ref32_partial_sum(const float* __restrict__ x, float* __restrict__ partial, long long D) {
  const long long n = blockIdx.y;
  long long begin, end;
  chunk_of_block(D, &begin, &end);
  const float* xr = x + n * D;
  float acc = 0.0f;
  for (long long i = begin + threadIdx.x; i < end; i += BLOCK) acc += xr[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[n * gridDim.x + blockIdx.x] = acc;
}

// Sum of the row's `splits` partials: thread t adds partials t, t + BLOCK, ...,
// then a tree over the threads.
__device__ float row_total(const float* __restrict__ partial_row, int splits) {
  float acc = 0.0f;
  for (int s = threadIdx.x; s < splits; s += BLOCK) acc += partial_row[s];
  return block_sum(acc);
}

// Grid (N, 1, 1), block (BLOCK, 1, 1): stats[2n] = mean_n.
extern "C" __global__ void __launch_bounds__(BLOCK)
ln_ref32_mean(const float* __restrict__ partial, float* __restrict__ stats, int splits, long long D) {
  const long long n = blockIdx.x;
  const float sum = row_total(partial + n * splits, splits);
  if (threadIdx.x == 0) stats[2 * n] = sum / (float)D;
}

// Grid (SPLIT, N, 1): partial[n * SPLIT + s] = sum of (x - mean_n)^2 over the chunk.
extern "C" __global__ void __launch_bounds__(BLOCK)
ln_ref32_partial_sq(const float* __restrict__ x, const float* __restrict__ stats,
                    float* __restrict__ partial, long long D) {
  const long long n = blockIdx.y;
  long long begin, end;
  chunk_of_block(D, &begin, &end);
  const float* xr = x + n * D;
  const float mean = stats[2 * n];
  float acc = 0.0f;
  for (long long i = begin + threadIdx.x; i < end; i += BLOCK) {
    const float d = xr[i] - mean;
    acc += d * d;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[n * gridDim.x + blockIdx.x] = acc;
}

// Grid (N, 1, 1), block (BLOCK, 1, 1): stats[2n + 1] = 1 / sqrtf(var_n + eps).
extern "C" __global__ void __launch_bounds__(BLOCK)
ln_ref32_rstd(const float* __restrict__ partial, float* __restrict__ stats, int splits, long long D,
              float eps) {
  const long long n = blockIdx.x;
  const float var = row_total(partial + n * splits, splits) / (float)D;
  if (threadIdx.x == 0) stats[2 * n + 1] = 1.0f / sqrtf(var + eps);
}

// Grid (SPLIT, N, 1): y = (x - mean) * rstd * weight + bias over the chunk.
extern "C" __global__ void __launch_bounds__(BLOCK)
ln_ref32_apply(const float* __restrict__ x, const float* __restrict__ weight,
               const float* __restrict__ bias, const float* __restrict__ stats,
               float* __restrict__ y, long long D) {
  const long long n = blockIdx.y;
  long long begin, end;
  chunk_of_block(D, &begin, &end);
  const float mean = stats[2 * n];
  const float rstd = stats[2 * n + 1];
  for (long long i = begin + threadIdx.x; i < end; i += BLOCK) {
    const float v = (x[n * D + i] - mean) * rstd * weight[i] + bias[i];
    y[n * D + i] = v;
  }
}
