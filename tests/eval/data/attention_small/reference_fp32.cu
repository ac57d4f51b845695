// The fp32 twin: the reference's algorithm in float. Scores, exp, sums and
// the weighted sum of v in fp32 (P is never rounded to bf16), one rounding to
// bf16 at the end. One block per query row, one thread per element of the
// head (blockDim.x == D, D <= 256); causal != 0: bottom-right aligned.
#include <cuda_bf16.h>

#define CHUNK 256

extern "C" __global__ void attention_ref_fp32(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                                         const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ o, int H,
                                         int SQ, int SKV, int D, int causal) {
  __shared__ float qs[256];
  __shared__ float p[CHUNK];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, t = threadIdx.x;
  const long long row = (long long)H * D;
  const __nv_bfloat16* kb = k + (long long)b * SKV * row + (long long)h * D;
  const __nv_bfloat16* vb = v + (long long)b * SKV * row + (long long)h * D;
  qs[t] = __bfloat162float(q[((long long)b * SQ + i) * row + (long long)h * D + t]);
  const int keys = causal ? min(SKV, i + SKV - SQ + 1) : SKV;
  const float scale = 1.0f / sqrtf((float)D);
  float m = -3.0e38f, l = 0.0f, acc = 0.0f;  // m: below any score; the first rescale is 0
  __syncthreads();
  for (int j0 = 0; j0 < keys; j0 += CHUNK) {
    const int n = min(CHUNK, keys - j0);
    for (int c = t; c < n; c += blockDim.x) {
      const __nv_bfloat16* kj = kb + (long long)(j0 + c) * row;
      float s = 0.0f;
      for (int e = 0; e < D; ++e) s = fmaf(qs[e], __bfloat162float(kj[e]), s);
      p[c] = s * scale;
    }
    __syncthreads();
    float chunk_max = m;
    for (int c = 0; c < n; ++c) chunk_max = fmaxf(chunk_max, p[c]);
    __syncthreads();
    for (int c = t; c < n; c += blockDim.x) p[c] = expf(p[c] - chunk_max);
    __syncthreads();
    const float rescale = expf(m - chunk_max);
    l *= rescale;
    acc *= rescale;
    for (int c = 0; c < n; ++c) {
      l += p[c];
      acc = fmaf(p[c], __bfloat162float(vb[(long long)(j0 + c) * row + t]), acc);
    }
    m = chunk_max;
    __syncthreads();
  }
  o[((long long)b * SQ + i) * row + (long long)h * D + t] = __float2bfloat16_rn(acc / l);
}
