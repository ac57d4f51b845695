// conv2d_relu_maxpool, round-0 starting kernel, fp32:
//   y = max_pool2d(relu(conv2d(x, weight, bias, stride, padding)), POOL, POOL_STRIDE)
//
// Two launches, one thread per element each:
//   conv2d_relu  conv[t] = max(0, bias[oc] + dot(filter, input window)) for every
//                element t of the N x OC x OH x OW convolution output (workspace)
//   maxpool      y[t] = max of the POOL x POOL window of conv at stride POOL_STRIDE
// NCHW, contiguous, zero padding for the convolution, no padding for the pool.
// Grids: (ceil_div(N * OC * OH * OW, BLOCK), 1, 1) and (ceil_div(N * OC * PH * PW, BLOCK), 1, 1).

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void conv2d_relu(const float* __restrict__ x, const float* __restrict__ weight,
                                       const float* __restrict__ bias, float* __restrict__ conv,
                                       int N, int C, int H, int W, int OC, int KH, int KW,
                                       int STRIDE, int PAD, int OH, int OW) {
  const long long t = (long long)blockIdx.x * BLOCK + threadIdx.x;
  const long long total = (long long)N * OC * OH * OW;
  if (t >= total) return;
  const int ow = (int)(t % OW);
  const int oh = (int)((t / OW) % OH);
  const int oc = (int)((t / ((long long)OW * OH)) % OC);
  const int n = (int)(t / ((long long)OW * OH * OC));

  float acc = 0.0f;
  for (int c = 0; c < C; ++c) {
    for (int kh = 0; kh < KH; ++kh) {
      const int ih = oh * STRIDE - PAD + kh;
      if (ih < 0 || ih >= H) continue;
      for (int kw = 0; kw < KW; ++kw) {
        const int iw = ow * STRIDE - PAD + kw;
        if (iw < 0 || iw >= W) continue;
        acc += x[(((long long)n * C + c) * H + ih) * W + iw] *
               weight[((oc * C + c) * KH + kh) * KW + kw];
      }
    }
  }
  conv[t] = fmaxf(acc + bias[oc], 0.0f);
}

extern "C" __global__ void maxpool(const float* __restrict__ conv, float* __restrict__ y,
                                   int N, int OC, int OH, int OW, int POOL, int POOL_STRIDE,
                                   int PH, int PW) {
  const long long t = (long long)blockIdx.x * BLOCK + threadIdx.x;
  const long long total = (long long)N * OC * PH * PW;
  if (t >= total) return;
  const int pw = (int)(t % PW);
  const int ph = (int)((t / PW) % PH);
  const long long plane = t / ((long long)PW * PH);  // n * OC + oc
  const float* src = conv + plane * OH * OW;
  float m = src[(long long)(ph * POOL_STRIDE) * OW + pw * POOL_STRIDE];
  for (int i = 0; i < POOL; ++i) {
    for (int j = 0; j < POOL; ++j) {
      m = fmaxf(m, src[(long long)(ph * POOL_STRIDE + i) * OW + pw * POOL_STRIDE + j]);
    }
  }
  y[t] = m;
}
