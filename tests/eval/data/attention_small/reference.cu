// Trusted: one block per query row (row i, head h, batch b), one thread per
// element of the head (blockDim.x == D, D <= 256). Scores, softmax and the
// weighted sum of v in double, over chunks of keys with the running maximum
// rescaled (exact up to double rounding); one rounding to bf16 at the end.
// causal != 0: query i sees keys j <= i + (SKV - SQ) (bottom-right aligned).
#include <cuda_bf16.h>

#define CHUNK 256

extern "C" __global__ void attention_ref(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                                         const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ o, int H,
                                         int SQ, int SKV, int D, int causal) {
  __shared__ double qs[256];
  __shared__ double p[CHUNK];
  const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, t = threadIdx.x;
  const long long row = (long long)H * D;
  const __nv_bfloat16* kb = k + (long long)b * SKV * row + (long long)h * D;
  const __nv_bfloat16* vb = v + (long long)b * SKV * row + (long long)h * D;
  qs[t] = (double)__bfloat162float(q[((long long)b * SQ + i) * row + (long long)h * D + t]);
  const int keys = causal ? min(SKV, i + SKV - SQ + 1) : SKV;
  const double scale = 1.0 / sqrt((double)D);
  double m = -1e300, l = 0.0, acc = 0.0;  // m: below any score; the first rescale is 0
  __syncthreads();
  for (int j0 = 0; j0 < keys; j0 += CHUNK) {
    const int n = min(CHUNK, keys - j0);
    for (int c = t; c < n; c += blockDim.x) {
      const __nv_bfloat16* kj = kb + (long long)(j0 + c) * row;
      double s = 0.0;
      for (int e = 0; e < D; ++e) s += qs[e] * (double)__bfloat162float(kj[e]);
      p[c] = s * scale;
    }
    __syncthreads();
    double chunk_max = m;
    for (int c = 0; c < n; ++c) chunk_max = fmax(chunk_max, p[c]);
    __syncthreads();
    for (int c = t; c < n; c += blockDim.x) p[c] = exp(p[c] - chunk_max);
    __syncthreads();
    const double rescale = exp(m - chunk_max);
    l *= rescale;
    acc *= rescale;
    for (int c = 0; c < n; ++c) {
      l += p[c];
      acc += p[c] * (double)__bfloat162float(vb[(long long)(j0 + c) * row + t]);
    }
    m = chunk_max;
    __syncthreads();
  }
  o[((long long)b * SQ + i) * row + (long long)h * D + t] = __double2bfloat16(acc / l);
}
