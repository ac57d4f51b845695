// rope reference: rotary position embedding in place on q and k, the
// rotate-half (GPT-NeoX / Llama-HF) convention, fp64 arithmetic, rounded once
// to bf16 (the trusted reference).
//
// q is tokens x heads x head_dim and k tokens x kv_heads x head_dim, bf16,
// contiguous row-major; cos and sin are tokens x head_dim/2 fp32. For
// i < head_dim/2: x1 = x[i], x2 = x[i + head_dim/2],
//   x[i] = x1*cos[t][i] - x2*sin[t][i], x[i + head_dim/2] = x2*cos[t][i] + x1*sin[t][i].
// One block per token, its threads striding over the token's pairs; each
// pair is read before either element is written, by the same thread.
#include <cuda_bf16.h>

extern "C" __global__ void rope_ref(__nv_bfloat16* __restrict__ q, __nv_bfloat16* __restrict__ k,
                                    const float* __restrict__ cos_t, const float* __restrict__ sin_t,
                                    int heads, int kv_heads, int head_dim) {
  const int t = blockIdx.x, half = head_dim / 2;
  const int pairs = (heads + kv_heads) * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int h = p / half, i = p % half;
    __nv_bfloat16* x = h < heads ? q + ((long long)t * heads + h) * head_dim
                                 : k + ((long long)t * kv_heads + (h - heads)) * head_dim;
    const double c = (double)cos_t[(long long)t * half + i];
    const double s = (double)sin_t[(long long)t * half + i];
    const double x1 = (double)__bfloat162float(x[i]);
    const double x2 = (double)__bfloat162float(x[i + half]);
    x[i] = __double2bfloat16(x1 * c - x2 * s);
    x[i + half] = __double2bfloat16(x2 * c + x1 * s);
  }
}
