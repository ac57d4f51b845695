// swiglu, fp32 twin: the plain kernel an engine would write first. It reads
// bf16, computes silu(gate) * up in fp32 (expf) and rounds the output once to
// bf16. The evaluator compares it with the fp64 reference to measure how
// accurate such a kernel is; the strict tolerance is a multiple of that.
//
// gate, up, out: n = tokens * inter bf16 elements. Grid-stride loop.
#include <cuda_bf16.h>

extern "C" __global__ void swiglu_ref_fp32(const __nv_bfloat16* __restrict__ gate,
                                           const __nv_bfloat16* __restrict__ up,
                                           __nv_bfloat16* __restrict__ out, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const float g = __bfloat162float(gate[i]);
    const float u = __bfloat162float(up[i]);
    out[i] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * u);
  }
}
