// matmul reference (trusted): C = A * B, fp32 in and out, fp64 accumulation.
//
// A is M x K, B is K x N, C is M x N, all contiguous row-major.
// Block: 16 x 16 threads computing a 64 x 64 tile of C; thread (tx, ty) owns the
// 4 x 4 outputs at rows ty + 16*i and columns tx + 16*j (i, j in 0..3).
// Tiles of A and B are staged in shared memory as doubles; every product and
// every partial sum is a double, rounded to float once, at the store.
// Grid: (ceil_div(N, 64), ceil_div(M, 64), 1). Any M, N, K >= 1.

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16
#define THREADS_X 16
#define THREADS_Y 16

extern "C" __global__ void __launch_bounds__(THREADS_X * THREADS_Y)
matmul_ref(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
           int M, int N, int K) {
  __shared__ double As[TILE_M][TILE_K];
  __shared__ double Bs[TILE_K][TILE_N];

  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int tid = ty * THREADS_X + tx;
  const int row0 = blockIdx.y * TILE_M;
  const int col0 = blockIdx.x * TILE_N;

  double acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;

  for (int k0 = 0; k0 < K; k0 += TILE_K) {
    // Stage A[row0 .. row0+63][k0 .. k0+15] and B[k0 .. k0+15][col0 .. col0+63];
    // out-of-range elements are zero.
    for (int e = tid; e < TILE_M * TILE_K; e += THREADS_X * THREADS_Y) {
      const int r = e / TILE_K, k = e % TILE_K;
      const int gr = row0 + r, gk = k0 + k;
      As[r][k] = (gr < M && gk < K) ? (double)A[(long long)gr * K + gk] : 0.0;
    }
    for (int e = tid; e < TILE_K * TILE_N; e += THREADS_X * THREADS_Y) {
      const int k = e / TILE_N, c = e % TILE_N;
      const int gk = k0 + k, gc = col0 + c;
      Bs[k][c] = (gk < K && gc < N) ? (double)B[(long long)gk * N + gc] : 0.0;
    }
    __syncthreads();
    for (int k = 0; k < TILE_K; ++k) {
      for (int i = 0; i < 4; ++i) {
        const double a = As[ty + 16 * i][k];
        for (int j = 0; j < 4; ++j) acc[i][j] += a * Bs[k][tx + 16 * j];
      }
    }
    __syncthreads();
  }

  for (int i = 0; i < 4; ++i) {
    const int r = row0 + ty + 16 * i;
    if (r >= M) continue;
    for (int j = 0; j < 4; ++j) {
      const int c = col0 + tx + 16 * j;
      if (c < N) C[(long long)r * N + c] = (float)acc[i][j];
    }
  }
}
