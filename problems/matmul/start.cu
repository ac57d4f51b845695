// matmul, round-0 starting kernel: C = A * B in fp32, one thread per output.
//
// A is M x K, B is K x N, C is M x N, contiguous row-major.
// Thread (x, y) of the 2-D grid computes C[row][col] with row = y, col = x: a
// plain dot product of row `row` of A and column `col` of B, accumulated in
// float in increasing k. No shared memory, no tiling: the point a search starts
// from. Launch: block (16, 16), grid (ceil_div(N, 16), ceil_div(M, 16)).

extern "C" __global__ void matmul_naive(const float* __restrict__ A, const float* __restrict__ B,
                                        float* __restrict__ C, int M, int N, int K) {
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    acc += A[(long long)row * K + k] * B[(long long)k * N + col];
  }
  C[(long long)row * N + col] = acc;
}
