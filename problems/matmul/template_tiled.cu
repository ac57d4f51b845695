// matmul template "tiled": C = A * B in fp32 with shared-memory tiles and a
// TM x TN register tile per thread. Tunable through the -D params:
//   BM, BN  rows and columns of C computed by one block
//   BK      depth of the A and B tiles staged in shared memory per step
//   TM, TN  rows and columns of C computed by one thread
// Block: (BM / TM) * (BN / TN) threads (1-D). Grid: (ceil_div(N, BN), ceil_div(M, BM), 1).
// A is M x K, B is K x N, C is M x N, contiguous row-major; any M, N, K >= 1
// (edges are zero-padded on load and guarded on store). Each output is a float
// sum over k in increasing order, as in the starting kernel.

#ifndef BM
#define BM 64
#endif
#ifndef BN
#define BN 64
#endif
#ifndef BK
#define BK 16
#endif
#ifndef TM
#define TM 4
#endif
#ifndef TN
#define TN 4
#endif

#define THREADS ((BM / TM) * (BN / TN))

extern "C" __global__ void __launch_bounds__(THREADS)
matmul_tiled(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
             int M, int N, int K) {
  __shared__ float As[BK][BM + 1];  // A tile, transposed: As[k][m]
  __shared__ float Bs[BK][BN];

  const int tid = threadIdx.x;
  const int tcol = tid % (BN / TN);
  const int trow = tid / (BN / TN);
  const int row0 = blockIdx.y * BM;
  const int col0 = blockIdx.x * BN;

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  float a_reg[TM];
  float b_reg[TN];

  for (int k0 = 0; k0 < K; k0 += BK) {
    for (int e = tid; e < BM * BK; e += THREADS) {
      const int r = e / BK, k = e % BK;
      const int gr = row0 + r, gk = k0 + k;
      As[k][r] = (gr < M && gk < K) ? A[(long long)gr * K + gk] : 0.0f;
    }
    for (int e = tid; e < BK * BN; e += THREADS) {
      const int k = e / BN, c = e % BN;
      const int gk = k0 + k, gc = col0 + c;
      Bs[k][c] = (gk < K && gc < N) ? B[(long long)gk * N + gc] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < BK; ++k) {
#pragma unroll
      for (int i = 0; i < TM; ++i) a_reg[i] = As[k][trow * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b_reg[j] = Bs[k][tcol * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a_reg[i] * b_reg[j];
    }
    __syncthreads();
  }

#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + trow * TM + i;
    if (r >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int c = col0 + tcol * TN + j;
      if (c < N) C[(long long)r * N + c] = acc[i][j];
    }
  }
}
