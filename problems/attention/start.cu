// attention, starting kernel: causal softmax(q k^T / sqrt(D)) v, bottom-right
// mask, bf16 in and out, fp32 arithmetic, o rounded once.
//
// q, o: [B, Sq, H, D]; k, v: [B, Skv, H, D], contiguous row-major: position i
// of head h of batch b is at ((b*S + i)*H + h)*D. Query i sees key j when
// j <= i + (Skv - Sq) and j < Skv.
//
// One block of 4 warps per (ROWS-query tile, head, batch): ROWS / 4 queries
// per warp. Key tiles of 32 are staged in shared memory as float; for each of
// its queries a warp gives one key per lane (a 32-wide dot product from
// shared memory), takes the tile max and sum with shuffles (online softmax:
// running max m and sum l, the accumulator rescaled when m grows) and
// accumulates p * v with lane c owning columns c, c + 32, c + 64, c + 96.
// D <= 128 (the kernel traps otherwise).
//
// Static shared memory: ROWS*128 + 2*32*129 floats.
#include <cuda_bf16.h>

#ifndef ROWS
#define ROWS 16
#endif

#define KT 32
#define DMAX 128
#define WARPS 4
#define RPW (ROWS / WARPS)

extern "C" __global__ void __launch_bounds__(WARPS * 32)
attention_start(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ o,
                int B, int H, int Sq, int Skv, int D) {
  if (D > DMAX) __trap();
  __shared__ float Qs[ROWS][DMAX];
  __shared__ float Ks[KT][DMAX + 1];
  __shared__ float Vs[KT][DMAX];
  const float NEG_INF = -__int_as_float(0x7f800000);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int h = blockIdx.y, b = blockIdx.z, q0 = blockIdx.x * ROWS;
  const long long pos = (long long)H * D;
  const __nv_bfloat16* kb = k + ((long long)b * Skv * H + h) * D;
  const __nv_bfloat16* vb = v + ((long long)b * Skv * H + h) * D;
  const float scale = rsqrtf((float)D);
  const int off = Skv - Sq;

  for (int e = threadIdx.x; e < ROWS * DMAX; e += WARPS * 32) {
    const int r = e / DMAX, c = e % DMAX, i = q0 + r;
    Qs[r][c] = (i < Sq && c < D) ? __bfloat162float(q[((long long)b * Sq * H + h) * D + i * pos + c]) : 0.0f;
  }
  float m[RPW], l[RPW], acc[RPW][4];
#pragma unroll
  for (int r = 0; r < RPW; ++r) {
    m[r] = NEG_INF;
    l[r] = 0.0f;
    for (int c = 0; c < 4; ++c) acc[r][c] = 0.0f;
  }
  const int last = min(Skv - 1, q0 + ROWS - 1 + off);
  for (int k0 = 0; k0 <= last; k0 += KT) {
    __syncthreads();
    for (int e = threadIdx.x; e < KT * DMAX; e += WARPS * 32) {
      const int r = e / DMAX, c = e % DMAX, j = k0 + r;
      const bool in = j < Skv && c < D;
      Ks[r][c] = in ? __bfloat162float(kb[j * pos + c]) : 0.0f;
      Vs[r][c] = in ? __bfloat162float(vb[j * pos + c]) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int r = 0; r < RPW; ++r) {
      const int row = warp * RPW + r, i = q0 + row, j = k0 + lane;
      float s = 0.0f;
      for (int d = 0; d < D; ++d) s += Qs[row][d] * Ks[lane][d];
      s = (j < Skv && j <= i + off) ? s * scale : NEG_INF;
      float mx = s;
      for (int w = 16; w > 0; w >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, w));
      const float m_new = fmaxf(m[r], mx);
      if (m_new == NEG_INF) continue;  // no key visible to this row yet (uniform over the warp)
      const float p = s == NEG_INF ? 0.0f : expf(s - m_new);
      const float alpha = m[r] == NEG_INF ? 0.0f : expf(m[r] - m_new);
      float sum = p;
      for (int w = 16; w > 0; w >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, w);
      l[r] = l[r] * alpha + sum;
      m[r] = m_new;
      for (int c = 0; c < 4; ++c) acc[r][c] *= alpha;
      for (int jj = 0; jj < KT; ++jj) {
        const float pj = __shfl_sync(0xffffffffu, p, jj);
        for (int c = 0; c < 4; ++c) acc[r][c] += pj * Vs[jj][lane + 32 * c];
      }
    }
  }
  __nv_bfloat16* ob = o + ((long long)b * Sq * H + h) * D;
#pragma unroll
  for (int r = 0; r < RPW; ++r) {
    const int i = q0 + warp * RPW + r;
    if (i >= Sq) continue;
    for (int c = 0; c < 4; ++c) {
      const int col = lane + 32 * c;
      if (col < D) ob[i * pos + col] = __float2bfloat16_rn(l[r] > 0.0f ? acc[r][c] / l[r] : 0.0f);
    }
  }
}
