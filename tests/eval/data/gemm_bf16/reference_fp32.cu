// The fp32 twin: bf16 inputs, products and sum in fp32, one rounding to bf16.
#include <cuda_bf16.h>

extern "C" __global__ void gemm_ref_fp32(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                                         __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  int col = blockIdx.x * blockDim.x + threadIdx.x, row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= M || col >= N) return;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) {
    acc = fmaf(__bfloat162float(A[(long long)row * K + k]), __bfloat162float(B[(long long)k * N + col]), acc);
  }
  C[(long long)row * N + col] = __float2bfloat16_rn(acc);
}
