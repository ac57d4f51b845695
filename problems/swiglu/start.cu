// swiglu, round-0 starting kernel: out = silu(gate) * up, bf16 in and out,
// fp32 arithmetic, one element per thread.
//
// gate, up, out: tokens x inter bf16, contiguous row-major, seen as
// n = tokens * inter elements. Grid: (ceil(n / BLOCK), 1, 1); block (BLOCK, 1, 1).
#include <cuda_bf16.h>

extern "C" __global__ void swiglu(const __nv_bfloat16* __restrict__ gate,
                                  const __nv_bfloat16* __restrict__ up,
                                  __nv_bfloat16* __restrict__ out, long long n) {
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = __bfloat162float(gate[i]);
  out[i] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * __bfloat162float(up[i]));
}
