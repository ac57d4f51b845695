// rope fp32 twin: the reference's loop in float (each output one fma over a
// rounded product), rounded once to bf16. It sets how far from the fp64
// reference an honest fp32 kernel may land.
#include <cuda_bf16.h>

extern "C" __global__ void rope_ref_fp32(__nv_bfloat16* __restrict__ q, __nv_bfloat16* __restrict__ k,
                                         const float* __restrict__ cos_t, const float* __restrict__ sin_t,
                                         int heads, int kv_heads, int head_dim) {
  const int t = blockIdx.x, half = head_dim / 2;
  const int pairs = (heads + kv_heads) * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int h = p / half, i = p % half;
    __nv_bfloat16* x = h < heads ? q + ((long long)t * heads + h) * head_dim
                                 : k + ((long long)t * kv_heads + (h - heads)) * head_dim;
    const float c = cos_t[(long long)t * half + i], s = sin_t[(long long)t * half + i];
    const float x1 = __bfloat162float(x[i]), x2 = __bfloat162float(x[i + half]);
    x[i] = __float2bfloat16_rn(fmaf(x1, c, -(x2 * s)));
    x[i + half] = __float2bfloat16_rn(fmaf(x2, c, x1 * s));
  }
}
