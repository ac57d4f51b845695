// Trusted: one thread per output, products and sum in double, one rounding
// to bf16 at the end.
#include <cuda_bf16.h>

extern "C" __global__ void gemm_ref(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                    __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  double acc = 0.0;
  for (int k = 0; k < K; ++k) {
    acc += (double)__bfloat162float(A[(long long)row * K + k]) * (double)__bfloat162float(B[(long long)k * N + col]);
  }
  C[(long long)row * N + col] = __double2bfloat16(acc);
}
