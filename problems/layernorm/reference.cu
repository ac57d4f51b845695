// layernorm reference (trusted): y = layer_norm(x, (C, H, W), weight, bias, eps),
// fp32 in and out, fp64 statistics and fp64 normalization.
//
// x and y are N x D with D = C * H * W (each sample is one contiguous row of D
// floats); weight and bias hold D floats each. Two-pass statistics, all in
// double:
//   mean_n = sum_i x[n][i] / D
//   var_n  = sum_i (x[n][i] - mean_n)^2 / D          (biased, as PyTorch)
//   y[n][i] = (float)((x[n][i] - mean_n) / sqrt(var_n + eps) * weight[i] + bias[i])
// A row has millions of elements, so each pass is split over SPLIT blocks per
// row (grid (SPLIT, N, 1)): block s of row n covers elements
// [s * chunk, min((s + 1) * chunk, D)) with chunk = ceil_div(D, SPLIT), and
// writes its partial sum to partial[n * SPLIT + s]; a kernel with one block per
// row then adds the SPLIT partials (a tree over BLOCK threads). Workspace:
// partial (f64, N * SPLIT) and stats (f64, 2 * N: mean_n at 2n,
// 1 / sqrt(var_n + eps) at 2n + 1).
// BLOCK must be a power of two, at most 1024.

#ifndef BLOCK
#define BLOCK 256
#endif

__device__ double block_sum(double v) {
  __shared__ double red[BLOCK];
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

// The elements [begin, end) of this block's part of its row.
__device__ void chunk_of_block(long long D, long long* begin, long long* end) {
  const long long chunk = (D + gridDim.x - 1) / gridDim.x;
  *begin = (long long)blockIdx.x * chunk;
  *end = *begin + chunk < D ? *begin + chunk : D;
}

// Grid (SPLIT, N, 1): partial[n * SPLIT + s] = sum of x over block s's chunk.
extern "C" __global__ void __launch_bounds__(BLOCK)
ln_ref_partial_sum(const float* __restrict__ x, double* __restrict__ partial, long long D) {
  const long long n = blockIdx.y;
  long long begin, end;
  chunk_of_block(D, &begin, &end);
  const float* xr = x + n * D;
  double acc = 0.0;
  for (long long i = begin + threadIdx.x; i < end; i += BLOCK) acc += (double)xr[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[n * gridDim.x + blockIdx.x] = acc;
}

// Sum of the row's `splits` partials: thread t adds partials t, t + BLOCK, ...,
// then a tree over the threads.
__device__ double row_total(const double* __restrict__ partial_row, int splits) {
  double acc = 0.0;
  for (int s = threadIdx.x; s < splits; s += BLOCK) acc += partial_row[s];
  return block_sum(acc);
}

// Grid (N, 1, 1), block (BLOCK, 1, 1): stats[2n] = mean_n.
extern "C" __global__ void __launch_bounds__(BLOCK)
ln_ref_mean(const double* __restrict__ partial, double* __restrict__ stats, int splits, long long D) {
  const long long n = blockIdx.x;
  const double sum = row_total(partial + n * splits, splits);
  if (threadIdx.x == 0) stats[2 * n] = sum / (double)D;
}

// Grid (SPLIT, N, 1): partial[n * SPLIT + s] = sum of (x - mean_n)^2 over the chunk.
extern "C" __global__ void __launch_bounds__(BLOCK)
ln_ref_partial_sq(const float* __restrict__ x, const double* __restrict__ stats,
                  double* __restrict__ partial, long long D) {
  const long long n = blockIdx.y;
  long long begin, end;
  chunk_of_block(D, &begin, &end);
  const float* xr = x + n * D;
  const double mean = stats[2 * n];
  double acc = 0.0;
  for (long long i = begin + threadIdx.x; i < end; i += BLOCK) {
    const double d = (double)xr[i] - mean;
    acc += d * d;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partial[n * gridDim.x + blockIdx.x] = acc;
}

// Grid (N, 1, 1), block (BLOCK, 1, 1): stats[2n + 1] = 1 / sqrt(var_n + eps).
extern "C" __global__ void __launch_bounds__(BLOCK)
ln_ref_rstd(const double* __restrict__ partial, double* __restrict__ stats, int splits, long long D,
            float eps) {
  const long long n = blockIdx.x;
  const double var = row_total(partial + n * splits, splits) / (double)D;
  if (threadIdx.x == 0) stats[2 * n + 1] = 1.0 / sqrt(var + (double)eps);
}

// Grid (SPLIT, N, 1): y = (x - mean) * rstd * weight + bias over the chunk.
extern "C" __global__ void __launch_bounds__(BLOCK)
ln_ref_apply(const float* __restrict__ x, const float* __restrict__ weight,
             const float* __restrict__ bias, const double* __restrict__ stats,
             float* __restrict__ y, long long D) {
  const long long n = blockIdx.y;
  long long begin, end;
  chunk_of_block(D, &begin, &end);
  const double mean = stats[2 * n];
  const double rstd = stats[2 * n + 1];
  for (long long i = begin + threadIdx.x; i < end; i += BLOCK) {
    const double v = ((double)x[n * D + i] - mean) * rstd * (double)weight[i] + (double)bias[i];
    y[n * D + i] = (float)v;
  }
}
