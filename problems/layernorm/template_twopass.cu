// layernorm template "twopass": y = layer_norm(x, (C, H, W), weight, bias, eps)
// in fp32, two ordinary launches with many small CTAs (no grid-wide waiting
// inside a kernel, so every SM holds several CTAs and many loads in flight).
//
// x and y are N x D (D = C * H * W, one contiguous row per sample); weight and
// bias hold D floats. Both kernels split every sample into P = ceil_div(D, CE)
// chunks of CE = 4 * BLOCK * ITEMS floats and run one CTA per (chunk, sample):
// grid N * P, linear CTA index i -> column col = i / N, sample n = i % N. The
// sample is the fast index so that the N CTAs of one column run at about the
// same time: in ln2_apply they read the same chunk of weight and bias, which
// then comes from DRAM once and from L2 for the other N - 1 samples.
//
//   ln2_stats: the shifted sums (sum d, sum d^2), d = x - K, K = x[n][0], of
//              one chunk, into the workspace `partial` (f64, 2 * N * P).
//   ln2_apply: adds the P partials of its sample (in the same order in every
//              CTA, so all agree on the statistics), then normalizes its chunk.
//              With REVERSE = 1 it walks the columns last to first: the x that
//              ln2_stats read last is still in L2 (50 MB on the H200) and is
//              read from there instead of DRAM.
//
// Statistics as in template_relay.cu: float within a group of 4, double across
// groups, threads and chunks; mean = K + S1 / D, var = S2 / D - (S1 / D)^2 in
// double (K is a value of the sample, so |mean - K| is a few standard
// deviations and the subtraction loses a few of double's 53 bits even on
// normal(100, 1)); y = ((x - mean_hi) - mean_lo) * rstd * w + b with the mean
// split into two floats.
//
// Tunable -D params:
//   BLOCK    threads per CTA (a multiple of 32)
//   ITEMS    float4 groups per thread per chunk; ln2_stats issues all ITEMS loads
//            of a thread before using any (4 * ITEMS registers of loads in flight)
//   UNROLL   groups per thread per step of ln2_apply (x, weight and bias of UNROLL
//            groups in flight: 12 * UNROLL registers); ITEMS % UNROLL == 0
//   REVERSE  1: ln2_apply takes the columns in reverse order (L2 reuse of x)
//   HINT     1: ln2_apply's read of x (its last use) and its store of y are
//            evict-first (.cs), so they do not push weight/bias out of L2
//   ASYNC    1: ln2_apply copies its whole chunk of x into shared memory with
//            cp.async (16 * BLOCK * ITEMS bytes of dynamic shared memory) before
//            anything else, so all of it is in flight without registers; the
//            registers then only carry weight and bias (L2 hits). 0: x goes
//            through registers UNROLL groups at a time
// Plan: both launches grid (N * ceil_div(C * H * W, 4 * BLOCK * ITEMS), 1, 1),
// block (BLOCK, 1, 1), ln2_apply's shared_bytes ASYNC * 16 * BLOCK * ITEMS;
// workspace `partial` f64 of 2 * N * P elements, written by ln2_stats before
// ln2_apply reads it. D % 4 != 0 runs a scalar path (registers only).

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 16
#endif
#ifndef UNROLL
#define UNROLL 4
#endif
#ifndef REVERSE
#define REVERSE 1
#endif
#ifndef HINT
#define HINT 1
#endif
#ifndef ASYNC
#define ASYNC 0
#endif

#define WARPS (BLOCK / 32)
// Floats per chunk.
#define CE (4LL * BLOCK * ITEMS)

__device__ __forceinline__ double WarpSum(double v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

// The shifted sums of one group, in float: (sum d, sum d * d) with d = x - k.
__device__ __forceinline__ float2 GroupSums(float4 v, float k) {
  const float a = v.x - k, b = v.y - k, c = v.z - k, d = v.w - k;
  return make_float2((a + b) + (c + d), fmaf(a, a, b * b) + fmaf(c, c, d * d));
}

__device__ __forceinline__ float4 Normalize(float4 v, float4 w, float4 b, float mh, float ml,
                                            float rstd) {
  return make_float4(
      fmaf(((v.x - mh) - ml) * rstd, w.x, b.x), fmaf(((v.y - mh) - ml) * rstd, w.y, b.y),
      fmaf(((v.z - mh) - ml) * rstd, w.z, b.z), fmaf(((v.w - mh) - ml) * rstd, w.w, b.w));
}

// 16 bytes global -> shared without registers (cached in L2 only).
__device__ __forceinline__ void CopyAsync16(float4* dst, const float4* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
}

__device__ __forceinline__ float4 LoadX(const float4* p) {
#if HINT
  return __ldcs(p);
#else
  return __ldg(p);
#endif
}
__device__ __forceinline__ float LoadX(const float* p) {
#if HINT
  return __ldcs(p);
#else
  return __ldg(p);
#endif
}
__device__ __forceinline__ void StoreY(float4* p, float4 v) {
#if HINT
  __stcs(p, v);
#else
  *p = v;
#endif
}
__device__ __forceinline__ void StoreY(float* p, float v) {
#if HINT
  __stcs(p, v);
#else
  *p = v;
#endif
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    ln2_stats(const float* __restrict__ x, double* __restrict__ partial, int n_samples,
              long long D) {
  __shared__ double2 red[WARPS];
  const int n = blockIdx.x % n_samples;
  const int col = blockIdx.x / n_samples;
  const long long begin = (long long)col * CE;
  const int len = (int)min(CE, D - begin);  // floats in this chunk
  const float* xs = x + (long long)n * D + begin;
  const float k = __ldg(x + (long long)n * D);
  const int t = threadIdx.x;
  double s1 = 0.0, s2 = 0.0;
  if (D % 4 == 0) {
    const float4* x4 = reinterpret_cast<const float4*>(xs);
    const int groups = len / 4;
    float4 a[ITEMS];
    // All loads first: ITEMS * 16 bytes per thread in flight before the first use.
    // Every chunk but a sample's last is full: there the loads are unconditional,
    // so nothing keeps the compiler from issuing them back to back.
    if (groups == BLOCK * ITEMS) {
#pragma unroll
      for (int u = 0; u < ITEMS; ++u) a[u] = __ldg(x4 + u * BLOCK + t);
    } else {
#pragma unroll
      for (int u = 0; u < ITEMS; ++u) {
        const int l = u * BLOCK + t;
        a[u] = l < groups ? __ldg(x4 + l) : make_float4(k, k, k, k);
      }
    }
#pragma unroll
    for (int u = 0; u < ITEMS; ++u) {
      // Padding groups hold k, so they add exactly 0 to both sums.
      const float2 g = GroupSums(a[u], k);
      s1 += (double)g.x;
      s2 += (double)g.y;
    }
  } else {
    for (int l = t; l < len; l += BLOCK) {
      const float d = __ldg(xs + l) - k;
      s1 += (double)d;
      s2 += (double)(d * d);
    }
  }
  s1 = WarpSum(s1);
  s2 = WarpSum(s2);
  if (t % 32 == 0) red[t / 32] = make_double2(s1, s2);
  __syncthreads();
  if (t == 0) {
    double t1 = 0.0, t2 = 0.0;
    for (int w = 0; w < WARPS; ++w) {
      t1 += red[w].x;
      t2 += red[w].y;
    }
    const long long p = (long long)gridDim.x / n_samples;
    double* out = partial + 2 * ((long long)n * p + col);
    out[0] = t1;
    out[1] = t2;
  }
}

extern "C" __global__ void __launch_bounds__(BLOCK)
    ln2_apply(const float* __restrict__ x, const float* __restrict__ weight,
              const float* __restrict__ bias, float* __restrict__ y,
              const double* __restrict__ partial, int n_samples, long long D, float eps) {
  const int p = (int)(gridDim.x / n_samples);
  const int n = blockIdx.x % n_samples;
  const int col = REVERSE ? p - 1 - (int)(blockIdx.x / n_samples) : (int)(blockIdx.x / n_samples);
  const long long begin = (long long)col * CE;
  const int len = (int)min(CE, D - begin);
  const long long row = (long long)n * D;
  const int t = threadIdx.x;
  const bool vec = D % 4 == 0;

  // The first step's loads go out before the statistics, whose partials are a
  // round of L2 reads and a CTA barrier; the latencies overlap.
  const float4* x4 = reinterpret_cast<const float4*>(x + row + begin);
  const float4* w4 = reinterpret_cast<const float4*>(weight + begin);
  const float4* b4 = reinterpret_cast<const float4*>(bias + begin);
  float4* y4 = reinterpret_cast<float4*>(y + row + begin);
  const int groups = len / 4;
  float4 c[UNROLL], wv[UNROLL], bv[UNROLL];
  // ASYNC: every thread reads back only the groups it copied itself, so
  // cp.async.wait_all alone (no barrier) makes them visible to it.
  extern __shared__ float4 sx[];
  if (vec) {
    if (ASYNC) {
#pragma unroll
      for (int u = 0; u < ITEMS; ++u) {
        const int l = u * BLOCK + t;
        if (l < groups) CopyAsync16(sx + l, x4 + l);
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int l = u * BLOCK + t;
      if (l < groups) {
        if (!ASYNC) c[u] = LoadX(x4 + l);
        wv[u] = __ldg(w4 + l);
        bv[u] = __ldg(b4 + l);
      }
    }
  }

  // The P partials of sample n are spread over the whole CTA (P <= 4 * BLOCK in
  // the space, so one round of independent L2 loads per thread), then combined
  // through shared memory. Partial q always goes to thread q % BLOCK and the
  // warps are added in a fixed order: every CTA of the sample gets identical
  // statistics. (A loop over the partials in one warp would chain P / 32 L2
  // round trips, several microseconds, into every CTA's life.)
  __shared__ double2 red[WARPS];
  const double* ps = partial + 2LL * n * p;
  double s1 = 0.0, s2 = 0.0;
#pragma unroll 1
  for (int q0 = 0; q0 < p; q0 += 4 * BLOCK) {
    double a1[4], a2[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int q = q0 + i * BLOCK + t;
      a1[i] = q < p ? ps[2 * q] : 0.0;
      a2[i] = q < p ? ps[2 * q + 1] : 0.0;
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      s1 += a1[i];
      s2 += a2[i];
    }
  }
  s1 = WarpSum(s1);
  s2 = WarpSum(s2);
  if (t % 32 == 0) red[t / 32] = make_double2(s1, s2);
  __syncthreads();
  s1 = 0.0;
  s2 = 0.0;
#pragma unroll
  for (int w = 0; w < WARPS; ++w) {
    s1 += red[w].x;
    s2 += red[w].y;
  }
  const float k = __ldg(x + row);
  const double shifted_mean = s1 / (double)D;
  const double var = fmax(s2 / (double)D - shifted_mean * shifted_mean, 0.0);
  const double mean = (double)k + shifted_mean;
  const float mh = (float)mean;
  const float ml = (float)(mean - (double)mh);
  const float rstd = (float)(1.0 / sqrt(var + (double)eps));

  if (vec) {
    if (ASYNC) asm volatile("cp.async.wait_all;" ::: "memory");
#pragma unroll
    for (int s = 0; s < ITEMS; s += UNROLL) {
      if (s > 0) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          const int l = (s + u) * BLOCK + t;
          if (l < groups) {
            if (!ASYNC) c[u] = LoadX(x4 + l);
            wv[u] = __ldg(w4 + l);
            bv[u] = __ldg(b4 + l);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int l = (s + u) * BLOCK + t;
        if (l < groups) {
          if (ASYNC) c[u] = sx[l];
          StoreY(y4 + l, Normalize(c[u], wv[u], bv[u], mh, ml, rstd));
        }
      }
    }
  } else {
    const float* xs = x + row + begin;
    float* ys = y + row + begin;
    for (int l = t; l < len; l += BLOCK) {
      const float v = LoadX(xs + l);
      StoreY(ys + l,
             fmaf(((v - mh) - ml) * rstd, __ldg(weight + begin + l), __ldg(bias + begin + l)));
    }
  }
}
