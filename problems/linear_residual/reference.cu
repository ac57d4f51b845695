// linear_residual reference (trusted): Y = X · Wᵀ + R, the o and down
// projections of a decoder layer with the residual added in the epilogue.
//
// X is M x K, W is N x K (nn.Linear's weight), R and Y are M x N; all bf16,
// contiguous row-major. Y[m][n] = X[m][·]·W[n][·] + R[m][n] with every
// product and sum in double, rounded to bf16 once.
//
// Block: 16 x 16 threads computing a 64 x 64 tile of Y; thread (tx, ty) owns
// the 4 x 4 outputs at rows ty + 16*i and columns tx + 16*j (i, j in 0..3).
// Tiles of X and W (16 values of k each) are staged in shared memory as
// doubles; out-of-range elements are zero. Grid: (ceil_div(N, 64),
// ceil_div(M, 64), 1). Any M, N, K >= 1. Each output is one double chain
// over k, then + R.
#include <cuda_bf16.h>

#define TILE 64
#define TILE_K 16
#define THREADS 16

extern "C" __global__ void __launch_bounds__(THREADS * THREADS)
linear_residual_ref(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ W,
                    const __nv_bfloat16* __restrict__ R, __nv_bfloat16* __restrict__ Y, int M, int N, int K) {
  // Both tiles are indexed [k][row]; the +1 keeps the column stores of the
  // staging loop off one bank.
  __shared__ double Xs[TILE_K][TILE + 1];
  __shared__ double Ws[TILE_K][TILE + 1];

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * THREADS + tx;
  const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;

  double acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;

  for (int k0 = 0; k0 < K; k0 += TILE_K) {
    for (int e = tid; e < TILE * TILE_K; e += THREADS * THREADS) {
      const int r = e / TILE_K, k = e % TILE_K;
      const int gk = k0 + k;
      const int gm = row0 + r, gn = col0 + r;
      Xs[k][r] = (gm < M && gk < K) ? (double)__bfloat162float(X[(long long)gm * K + gk]) : 0.0;
      Ws[k][r] = (gn < N && gk < K) ? (double)__bfloat162float(W[(long long)gn * K + gk]) : 0.0;
    }
    __syncthreads();
    for (int k = 0; k < TILE_K; ++k) {
      double w[4];
      for (int j = 0; j < 4; ++j) w[j] = Ws[k][tx + 16 * j];
      for (int i = 0; i < 4; ++i) {
        const double x = Xs[k][ty + 16 * i];
        for (int j = 0; j < 4; ++j) acc[i][j] += x * w[j];
      }
    }
    __syncthreads();
  }

  for (int i = 0; i < 4; ++i) {
    const int m = row0 + ty + 16 * i;
    if (m >= M) continue;
    for (int j = 0; j < 4; ++j) {
      const int n = col0 + tx + 16 * j;
      if (n >= N) continue;
      const long long at = (long long)m * N + n;
      Y[at] = __double2bfloat16(acc[i][j] + (double)__bfloat162float(R[at]));
    }
  }
}
