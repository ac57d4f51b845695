// conv2d_relu_maxpool reference, fp32 twin:
//   y = max_pool2d(relu(conv2d(x, weight, bias, stride, padding)), POOL, POOL_STRIDE)
// in plain fp32 arithmetic.
//
// The same kernels as reference.cu with float in place of double. The evaluator
// compares it with reference.cu to measure how accurate plain fp32 is for this
// op; the strict tolerance is a multiple of that error.
//
// NCHW, contiguous: x is N x C x H x W, weight is OC x C x KH x KW, bias is OC.
// The convolution (zero padding, cross-correlation, as PyTorch) gives
// N x OC x OH x OW values, OH = (H + 2 * PAD - KH) / STRIDE + 1, likewise OW;
// they are kept in float in the workspace `conv`. The pool takes the maximum
// of each POOL x POOL window at stride POOL_STRIDE (no padding, floor mode):
// y is N x OC x PH x PW, PH = (OH - POOL) / POOL_STRIDE + 1, likewise PW; ReLU
// is applied to that maximum (max and ReLU commute).
// Launches:
//   conv2d_ref_f32     grid (ceil_div(OH * OW, BLOCK), OC, N), block (BLOCK, 1, 1)
//   relu_maxpool_ref32 grid (ceil_div(PH * PW, BLOCK), OC, N), block (BLOCK, 1, 1)

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
conv2d_ref_f32(const float* __restrict__ x, const float* __restrict__ weight,
               const float* __restrict__ bias, float* __restrict__ conv,
               int N, int C, int H, int W, int OC, int KH, int KW,
               int STRIDE, int PAD, int OH, int OW) {
  const int p = blockIdx.x * BLOCK + threadIdx.x;  // output pixel within the plane
  const int oc = blockIdx.y;
  const int n = blockIdx.z;
  if (p >= OH * OW || oc >= OC || n >= N) return;
  const int oh = p / OW;
  const int ow = p % OW;

  float acc = 0.0f;
  for (int c = 0; c < C; ++c) {
    for (int kh = 0; kh < KH; ++kh) {
      const int ih = oh * STRIDE - PAD + kh;
      if (ih < 0 || ih >= H) continue;
      for (int kw = 0; kw < KW; ++kw) {
        const int iw = ow * STRIDE - PAD + kw;
        if (iw < 0 || iw >= W) continue;
        const float xv = x[(((long long)n * C + c) * H + ih) * W + iw];
        const float wv = weight[(((long long)oc * C + c) * KH + kh) * KW + kw];
        acc += xv * wv;
      }
    }
  }
  acc += bias[oc];
  conv[(((long long)n * OC + oc) * OH + oh) * OW + ow] = acc;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
relu_maxpool_ref32(const float* __restrict__ conv, float* __restrict__ y,
                   int N, int OC, int OH, int OW, int POOL, int POOL_STRIDE, int PH, int PW) {
  const int p = blockIdx.x * BLOCK + threadIdx.x;  // pooled pixel within the plane
  const int oc = blockIdx.y;
  const int n = blockIdx.z;
  if (p >= PH * PW || oc >= OC || n >= N) return;
  const int ph = p / PW;
  const int pw = p % PW;
  const float* plane = conv + ((long long)n * OC + oc) * OH * OW;

  float m = 0.0f;  // ReLU: the result is max(0, window maximum)
  for (int i = 0; i < POOL; ++i) {
    const int oh = ph * POOL_STRIDE + i;
    if (oh >= OH) continue;
    for (int j = 0; j < POOL; ++j) {
      const int ow = pw * POOL_STRIDE + j;
      if (ow >= OW) continue;
      const float v = plane[(long long)oh * OW + ow];
      if (v > m) m = v;
    }
  }
  y[(((long long)n * OC + oc) * PH + ph) * PW + pw] = m;
}
