// swiglu reference: out = silu(gate) * up = gate / (1 + exp(-gate)) * up,
// bf16 storage, fp64 arithmetic, rounded once to bf16 (the trusted reference).
//
// gate, up and out are tokens x inter bf16, contiguous row-major; the kernel
// treats them as n = tokens * inter elements. Grid-stride loop; any grid.
#include <cuda_bf16.h>

extern "C" __global__ void swiglu_ref(const __nv_bfloat16* __restrict__ gate,
                                      const __nv_bfloat16* __restrict__ up,
                                      __nv_bfloat16* __restrict__ out, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    const double g = (double)__bfloat162float(gate[i]);
    const double u = (double)__bfloat162float(up[i]);
    out[i] = __double2bfloat16(g / (1.0 + exp(-g)) * u);
  }
}
