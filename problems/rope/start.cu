// rope starting kernel: one thread per (token, head, i < head_dim/2) pair,
// q's pairs first, then k's; scalar bf16 loads, fp32 arithmetic, one rounding.
#include <cuda_bf16.h>

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
rope(__nv_bfloat16* __restrict__ q, __nv_bfloat16* __restrict__ k, const float* __restrict__ cos_t,
     const float* __restrict__ sin_t, int tokens, int heads, int kv_heads, int head_dim) {
  const int half = head_dim / 2;
  const long long q_pairs = (long long)tokens * heads * half;
  const long long all_pairs = q_pairs + (long long)tokens * kv_heads * half;
  long long p = (long long)blockIdx.x * BLOCK + threadIdx.x;
  if (p >= all_pairs) return;
  const bool is_q = p < q_pairs;
  if (!is_q) p -= q_pairs;
  const long long row = p / half;  // token * heads + head
  const int i = (int)(p % half);
  const long long t = row / (is_q ? heads : kv_heads);
  __nv_bfloat16* x = (is_q ? q : k) + row * head_dim;
  const float c = cos_t[t * half + i], s = sin_t[t * half + i];
  const float x1 = __bfloat162float(x[i]), x2 = __bfloat162float(x[i + half]);
  x[i] = __float2bfloat16_rn(fmaf(x1, c, -(x2 * s)));
  x[i + half] = __float2bfloat16_rn(fmaf(x2, c, x1 * s));
}
