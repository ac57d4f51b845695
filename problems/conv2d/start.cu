// conv2d, round-0 starting kernel: y = conv2d(x, weight, bias, stride, padding)
// in fp32, one thread per output element.
//
// NCHW, contiguous: x is N x C x H x W, weight is OC x C x KH x KW, bias is OC,
// y is N x OC x OH x OW. Thread t of the 1-D grid computes output element t
// (t = ((n * OC + oc) * OH + oh) * OW + ow): the bias plus the dot product of
// the filter with its input window, zero outside the image.
// Launch: grid (ceil_div(N * OC * OH * OW, BLOCK), 1, 1), block (BLOCK, 1, 1).

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void conv2d_direct(const float* __restrict__ x, const float* __restrict__ weight,
                                         const float* __restrict__ bias, float* __restrict__ y,
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
  y[t] = acc + bias[oc];
}
