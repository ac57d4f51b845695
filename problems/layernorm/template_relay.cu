// layernorm template "relay": y = layer_norm(x, (C, H, W), weight, bias, eps) in
// fp32, one persistent kernel; weight and bias come from DRAM once, x once
// (its second read is meant to hit L2), y is written once.
//
// x and y are N x D (D = C * H * W, one contiguous row per sample); weight and
// bias hold D floats. The grid is G = CTAS CTAs, all resident at once (one per
// SM).
// CTA c owns the same slice of D in every sample: S = ceil_div(D / E, G)
// groups of E floats (E = 4, float4, when D % 4 == 0; else E = 1), so its
// slice of weight and bias is the same for all samples and is kept in shared
// memory (up to `cap` groups: weight, then bias; the rest of the slice, if
// any, is read from global memory each sample).
//
// Phase k (k = 0 .. N-1) streams two samples at once:
//   - the statistics of sample k + 1: x[k+1] from DRAM, summed per CTA;
//   - the output of sample k: x[k] again (read one phase earlier, so it is
//     still in L2) normalized with sample k's statistics, written to y.
// Sample k's statistics are complete when all G CTAs have published their
// partial sums of it, at the end of phase k - 1 (a counter in a __device__
// global plus a workspace of partials). The wait for them comes LAG steps
// into phase k, after this CTA has already issued the first loads of x[k+1],
// so the counter's latency is hidden behind useful memory traffic instead of
// stalling between phases. A prologue phase computes sample 0's statistics and
// loads weight and bias into shared memory.
//
// Statistics: per sample, every CTA sums d = x - K and d * d with the same
// shift K = x[n][0] (a value of the sample, so |mean - K| is a few standard
// deviations at most and nothing cancels catastrophically), in float over one
// group and in double across groups, threads and CTAs. Then mean = K + S1 / D
// and var = S2 / D - (S1 / D)^2 in double: on normal(100, 1) the subtraction
// loses at most a few bits of double's 53. Every CTA adds the G partials in
// the same order, so all agree exactly on mean and rstd.
// y = ((x - mean_hi) - mean_lo) * rstd * w + b, with mean = mean_hi + mean_lo
// split into two floats: x - mean_hi is exact for x near the mean.
//
// Tunable -D params:
//   CTAS      the grid size G (only the plan uses it; the kernel reads gridDim.x)
//   BLOCK     threads per CTA (a multiple of 32, at most 1024)
//   UNROLL    groups per thread per step (the loads of a step are all in flight at once)
//   LAG       steps of the next sample's statistics issued before waiting (0: wait first)
//   HINT      0: plain loads and stores;
//             1: the last read of x and the store of y stream (ld/st.global.cs: evict
//                first), so the x of the next sample is what L2 keeps;
//             2: as 1, and the first read of x and the global part of weight/bias use
//                an L2 evict_last policy (their last use applies evict_first)
//   PREFETCH  1: at the start of each phase, ask the copy engine
//             (cp.async.bulk.prefetch.L2) for this CTA's whole slice of the next
//             sample, so DRAM stays busy however few loads the registers allow in
//             flight (float4 path only)
// Plan: grid (CTAS, 1, 1) with CTAS <= the number of SMs (all CTAs must be resident:
// the shared memory below allows one CTA per SM), block (BLOCK, 1, 1),
// shared_bytes 32 * cap, workspace `partial` f64 of 2 * N * G elements.
// Counters: g_arrivals / g_finished restore themselves to 0 at the end of every
// launch (the last CTA to finish resets them), so the NaN-poisoned workspace
// needs no initializing launch. A wait that exceeds 50 ms gives up (its output
// is then wrong, never a hang) in case the CTAs are not all resident.

#ifndef BLOCK
#define BLOCK 512
#endif
#ifndef UNROLL
#define UNROLL 4
#endif
#ifndef LAG
#define LAG 1
#endif
#ifndef HINT
#define HINT 1
#endif
#ifndef PREFETCH
#define PREFETCH 1
#endif

#define WARPS (BLOCK / 32)
#define WAIT_LIMIT_NS 50000000ull

__device__ unsigned int g_arrivals;  // CTA arrivals, summed over the launch's samples
__device__ unsigned int g_finished;  // CTAs done with the launch

__device__ __forceinline__ unsigned long long EvictLastPolicy() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  return p;
}
__device__ __forceinline__ unsigned long long EvictFirstPolicy() {
  unsigned long long p;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}

// Brings [p, p + bytes) into L2 without registers or shared memory; p and bytes
// are multiples of 16. The CTA's threads split it into 4 KiB requests. `hinted`
// (with HINT >= 2) applies the evict_last policy `keep`.
__device__ __forceinline__ void PrefetchL2(const float* p, long long bytes, bool hinted,
                                           unsigned long long keep) {
  const char* c = reinterpret_cast<const char*>(p);
  for (long long off = threadIdx.x * 4096LL; off < bytes; off += BLOCK * 4096LL) {
    const unsigned size = (unsigned)min(4096LL, bytes - off);
    if (HINT >= 2 && hinted) {
      asm volatile("cp.async.bulk.prefetch.L2.global.L2::cache_hint [%0], %1, %2;"
                   :
                   : "l"(c + off), "r"(size), "l"(keep)
                   : "memory");
    } else {
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;"
                   :
                   : "l"(c + off), "r"(size)
                   : "memory");
    }
  }
}

__device__ __forceinline__ float4 LoadPolicy(const float4* p, unsigned long long pol) {
  float4 v;
  asm volatile("ld.global.nc.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p), "l"(pol));
  return v;
}
__device__ __forceinline__ float LoadPolicy(const float* p, unsigned long long pol) {
  float v;
  asm volatile("ld.global.nc.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(p), "l"(pol));
  return v;
}

// First read of x (statistics of the next sample): it must survive one phase in L2.
template <typename V>
__device__ __forceinline__ V LoadFirst(const V* p, unsigned long long keep) {
#if HINT >= 2
  return LoadPolicy(p, keep);
#else
  return __ldg(p);
#endif
}

// Second and last read of x.
template <typename V>
__device__ __forceinline__ V LoadLast(const V* p, unsigned long long drop) {
#if HINT >= 2
  return LoadPolicy(p, drop);
#elif HINT == 1
  return __ldcs(p);
#else
  return __ldg(p);
#endif
}

// Weight or bias beyond the shared-memory part, read every sample.
template <typename V>
__device__ __forceinline__ V LoadParam(const V* p, bool last_use, unsigned long long keep,
                                       unsigned long long drop) {
#if HINT >= 2
  return LoadPolicy(p, last_use ? drop : keep);
#else
  return __ldg(p);
#endif
}

template <typename V>
__device__ __forceinline__ void StoreY(V* p, V v) {
#if HINT >= 1
  __stcs(p, v);
#else
  *p = v;
#endif
}

// The shifted sums of one group, in float: (sum d, sum d * d) with d = x - k.
__device__ __forceinline__ float2 GroupSums(float4 v, float k) {
  const float a = v.x - k, b = v.y - k, c = v.z - k, d = v.w - k;
  return make_float2((a + b) + (c + d), fmaf(a, a, b * b) + fmaf(c, c, d * d));
}
__device__ __forceinline__ float2 GroupSums(float v, float k) {
  const float a = v - k;
  return make_float2(a, a * a);
}

__device__ __forceinline__ float4 Normalize(float4 v, float4 w, float4 b, float mh, float ml,
                                            float rstd) {
  return make_float4(
      fmaf(((v.x - mh) - ml) * rstd, w.x, b.x), fmaf(((v.y - mh) - ml) * rstd, w.y, b.y),
      fmaf(((v.z - mh) - ml) * rstd, w.z, b.z), fmaf(((v.w - mh) - ml) * rstd, w.w, b.w));
}
__device__ __forceinline__ float Normalize(float v, float w, float b, float mh, float ml,
                                           float rstd) {
  return fmaf(((v - mh) - ml) * rstd, w, b);
}

template <typename V>
__device__ __forceinline__ V Zero();
template <>
__device__ __forceinline__ float4 Zero<float4>() {
  return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}
template <>
__device__ __forceinline__ float Zero<float>() {
  return 0.0f;
}

__device__ __forceinline__ double WarpSum(double v) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

struct Stats {
  float mean_hi, mean_lo, rstd;
};

// Publishes this CTA's sums of sample n and counts its arrival.
__device__ void Publish(double s1, double s2, int n, double* partial, double2* red) {
  s1 = WarpSum(s1);
  s2 = WarpSum(s2);
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = make_double2(s1, s2);
  __syncthreads();
  if (threadIdx.x == 0) {
    double t1 = 0.0, t2 = 0.0;
    for (int w = 0; w < WARPS; ++w) {
      t1 += red[w].x;
      t2 += red[w].y;
    }
    double* p = partial + 2 * ((long long)n * gridDim.x + blockIdx.x);
    p[0] = t1;
    p[1] = t2;
    __threadfence();
    atomicAdd(&g_arrivals, 1u);
  }
}

// Waits until every CTA has published sample n, then combines the partials.
// Every warp adds them in the same order, so all CTAs get identical stats.
__device__ Stats WaitStats(int n, const double* partial, float k, long long D, float eps) {
  if (threadIdx.x == 0) {
    const unsigned target = (unsigned)(n + 1) * gridDim.x;
    unsigned long long start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    for (;;) {
      unsigned seen;
      asm volatile("ld.acquire.gpu.u32 %0, [%1];" : "=r"(seen) : "l"(&g_arrivals) : "memory");
      if (seen >= target) break;
      unsigned long long now;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
      if (now - start > WAIT_LIMIT_NS) break;
      __nanosleep(32);
    }
  }
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const double* p = partial + 2LL * n * gridDim.x;
  double s1 = 0.0, s2 = 0.0;
#pragma unroll 1
  for (int c = lane; c < (int)gridDim.x; c += 32) {
    s1 += __ldcg(p + 2 * c);
    s2 += __ldcg(p + 2 * c + 1);
  }
  s1 = WarpSum(s1);
  s2 = WarpSum(s2);
  const double shifted_mean = s1 / (double)D;
  const double var = fmax(s2 / (double)D - shifted_mean * shifted_mean, 0.0);
  const double mean = (double)k + shifted_mean;
  Stats st;
  st.mean_hi = (float)mean;
  st.mean_lo = (float)(mean - (double)st.mean_hi);
  st.rstd = (float)(1.0 / sqrt(var + (double)eps));
  return st;
}

template <typename V>
__device__ void Relay(const float* __restrict__ x, const float* __restrict__ weight,
                      const float* __restrict__ bias, float* __restrict__ y,
                      double* __restrict__ partial, int n_samples, long long D, int cap_groups,
                      float eps) {
  constexpr int kE = sizeof(V) / sizeof(float);
  constexpr int kStep = UNROLL * BLOCK;
  extern __shared__ float4 wb_smem[];
  __shared__ double2 red[WARPS];

  const long long dg = D / kE;  // groups per sample
  const long long per_cta = (dg + gridDim.x - 1) / gridDim.x;
  const long long base = (long long)blockIdx.x * per_cta;
  const int len = (int)max(0LL, min(per_cta, dg - base));
  // The shared buffer is 32 * cap_groups bytes: cap weight groups, then cap bias groups.
  const int cap = cap_groups * (4 / kE);
  V* sw = reinterpret_cast<V*>(wb_smem);
  V* sb = sw + cap;
  const V* wg = reinterpret_cast<const V*>(weight) + base;
  const V* bg = reinterpret_cast<const V*>(bias) + base;
  const int steps = (len + kStep - 1) / kStep;
  const int t = threadIdx.x;

  unsigned long long keep = 0, drop = 0;
#if HINT >= 2
  keep = EvictLastPolicy();
  drop = EvictFirstPolicy();
#endif

  const bool prefetch = PREFETCH && kE == 4;
  const long long slice_bytes = (long long)len * sizeof(V);

  // Prologue: sample 0's sums; this CTA's weight and bias into shared memory.
  {
    if (prefetch) {
      // Weight and bias are read once from here on (into shared memory): no hint.
      PrefetchL2(x + base * kE, slice_bytes, true, keep);
      PrefetchL2(weight + base * kE, slice_bytes, false, keep);
      PrefetchL2(bias + base * kE, slice_bytes, false, keep);
    }
    const V* xs = reinterpret_cast<const V*>(x) + base;
    const float k = __ldg(x);
    double s1 = 0.0, s2 = 0.0;
#pragma unroll 1
    for (int j = 0; j < steps; ++j) {
      V a[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int l = j * kStep + u * BLOCK + t;
        a[u] = l < len ? LoadFirst(xs + l, keep) : Zero<V>();
        if (l < len && l < cap) {
          sw[l] = __ldg(wg + l);
          sb[l] = __ldg(bg + l);
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        if (j * kStep + u * BLOCK + t < len) {
          const float2 g = GroupSums(a[u], k);
          s1 += (double)g.x;
          s2 += (double)g.y;
        }
      }
    }
    Publish(s1, s2, 0, partial, red);
  }

  for (int n = 0; n < n_samples; ++n) {
    const bool next = n + 1 < n_samples;
    const int lag = next ? min(LAG, steps) : 0;
    const V* xs = reinterpret_cast<const V*>(x + (next ? (n + 1) * D : 0)) + base;
    const V* xc = reinterpret_cast<const V*>(x + n * D) + base;
    V* yc = reinterpret_cast<V*>(y + n * D) + base;
    const float k_next = next ? __ldg(x + (n + 1) * D) : 0.0f;
    const float k_this = __ldg(x + n * D);
    if (prefetch && next) PrefetchL2(x + (n + 1) * D + base * kE, slice_bytes, true, keep);
    double s1 = 0.0, s2 = 0.0;
    // The first `lag` steps of the next sample's sums go out before the wait
    // (kept out of the main loop so that the wait's registers do not add to it).
    int j = 0;
#pragma unroll 1
    for (; j < lag; ++j) {
      V a[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int l = j * kStep + u * BLOCK + t;
        a[u] = l < len ? LoadFirst(xs + l, keep) : Zero<V>();
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        if (j * kStep + u * BLOCK + t < len) {
          const float2 g = GroupSums(a[u], k_next);
          s1 += (double)g.x;
          s2 += (double)g.y;
        }
      }
    }
    const Stats st = WaitStats(n, partial, k_this, D, eps);
#pragma unroll 1
    for (; j < steps + lag; ++j) {
      const bool do_stats = next && j < steps;
      const int jn = j - lag;  // the step normalized in this iteration
      V a[UNROLL], c[UNROLL], wv[UNROLL], bv[UNROLL];
      if (do_stats) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          const int l = j * kStep + u * BLOCK + t;
          a[u] = l < len ? LoadFirst(xs + l, keep) : Zero<V>();
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int l = jn * kStep + u * BLOCK + t;
        c[u] = Zero<V>();
        wv[u] = Zero<V>();
        bv[u] = Zero<V>();
        if (l < len) {
          c[u] = LoadLast(xc + l, drop);
          if (l < cap) {
            wv[u] = sw[l];
            bv[u] = sb[l];
          } else {
            wv[u] = LoadParam(wg + l, !next, keep, drop);
            bv[u] = LoadParam(bg + l, !next, keep, drop);
          }
        }
      }
      if (do_stats) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
          if (j * kStep + u * BLOCK + t < len) {
            const float2 g = GroupSums(a[u], k_next);
            s1 += (double)g.x;
            s2 += (double)g.y;
          }
        }
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int l = jn * kStep + u * BLOCK + t;
        if (l < len) StoreY(yc + l, Normalize(c[u], wv[u], bv[u], st.mean_hi, st.mean_lo, st.rstd));
      }
    }
    if (next) Publish(s1, s2, n + 1, partial, red);
  }

  // Every CTA that gets here has passed all its waits; the last one resets the
  // counters for the next launch.
  if (t == 0) {
    if (atomicAdd(&g_finished, 1u) == gridDim.x - 1) {
      atomicExch(&g_arrivals, 0u);
      atomicExch(&g_finished, 0u);
    }
  }
}

extern "C" __global__ void __launch_bounds__(BLOCK, 1)
    ln_relay(const float* __restrict__ x, const float* __restrict__ weight,
             const float* __restrict__ bias, float* __restrict__ y, double* __restrict__ partial,
             int n_samples, long long D, int cap_groups, float eps) {
  if (D % 4 == 0) {
    Relay<float4>(x, weight, bias, y, partial, n_samples, D, cap_groups, eps);
  } else {
    Relay<float>(x, weight, bias, y, partial, n_samples, D, cap_groups, eps);
  }
}
