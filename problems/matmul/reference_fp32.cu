// matmul reference, fp32 twin: C = A * B in plain fp32 arithmetic.
//
// The same kernel as reference.cu with float in place of double. The evaluator
// compares it with reference.cu to measure how accurate plain fp32 is for this
// op; the strict tolerance is a multiple of that error.
//
// A is M x K, B is K x N, C is M x N, all contiguous row-major.
// Block: 16 x 16 threads computing a 64 x 64 tile of C; thread (tx, ty) owns the
// 4 x 4 outputs at rows ty + 16*i and columns tx + 16*j (i, j in 0..3).
// Tiles of A and B are staged in shared memory as floats; every product and
// every partial sum is a float, in the order reference.cu uses.
// Grid: (ceil_div(N, 64), ceil_div(M, 64), 1). Any M, N, K >= 1.

#define TILE_M 64
#define TILE_N 64
#define TILE_K 16
#define THREADS_X 16
#define THREADS_Y 16

extern "C" __global__ void __launch_bounds__(THREADS_X * THREADS_Y)
matmul_ref_fp32(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
           int M, int N, int K) {
  __shared__ float As[TILE_M][TILE_K];
  __shared__ float Bs[TILE_K][TILE_N];

  const int tx = threadIdx.x;
  const int ty = threadIdx.y;
  const int tid = ty * THREADS_X + tx;
  const int row0 = blockIdx.y * TILE_M;
  const int col0 = blockIdx.x * TILE_N;

  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += TILE_K) {
    // Stage A[row0 .. row0+63][k0 .. k0+15] and B[k0 .. k0+15][col0 .. col0+63];
    // out-of-range elements are zero.
    for (int e = tid; e < TILE_M * TILE_K; e += THREADS_X * THREADS_Y) {
      const int r = e / TILE_K, k = e % TILE_K;
      const int gr = row0 + r, gk = k0 + k;
      As[r][k] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;
    }
    for (int e = tid; e < TILE_K * TILE_N; e += THREADS_X * THREADS_Y) {
      const int k = e / TILE_N, c = e % TILE_N;
      const int gk = k0 + k, gc = col0 + c;
      Bs[k][c] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < TILE_K; ++k) {
      for (int i = 0; i < 4; ++i) {
        const float a = As[ty + 16 * i][k];
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
      if (c < N) C[(long long)r * N + c] = acc[i][j];
    }
  }
}
