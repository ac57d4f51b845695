// attention, fp32 twin: the plain kernel an engineer would write first, the
// same organization as the fp64 reference with float in place of double. It
// reads bf16, computes the scores, the online softmax (expf) and the weighted
// sum of v in fp32, and rounds o once to bf16. The evaluator compares it with
// the fp64 reference to measure how accurate such a kernel is; the strict
// tolerance is a multiple of that.
//
// q, o: [B, Sq, H, D]; k, v: [B, Skv, H, D]; bf16, contiguous row-major.
// Query i attends key j when j <= i + (Skv - Sq) (and j < Skv). One block of
// 256 threads per (64-query tile, head, batch), key tiles of 64 in shared
// memory, D <= 128 (traps otherwise).
//
// Dynamic shared memory: 4*64*68 + 4*64*(3*D + 2) bytes.
#include <cuda_bf16.h>

#define BQ 64
#define BK 64
#define NT 256
#define DMAX 128

extern "C" __global__ void __launch_bounds__(NT)
attention_ref_fp32(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
              const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ o,
              int B, int H, int Sq, int Skv, int D) {
  if (D > DMAX) __trap();
  extern __shared__ float smem[];
  float* S = smem;                   // [BQ][BK + 1] scores, then probabilities
  float* row_m = S + BQ * (BK + 1);  // running max per row
  float* row_l = row_m + BQ;         // running sum per row
  float* row_a = row_l + BQ;         // this tile's rescale factor per row
  float* Qs = (float*)(row_a + BQ);   // [BQ][D + 1]
  float* Ks = Qs + BQ * (D + 1);      // [BK][D + 1]
  float* Vs = Ks + BK * (D + 1);      // [BK][D]
  const float NEG_INF = -__int_as_float(0x7f800000);

  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int h = blockIdx.y, b = blockIdx.z, q0 = blockIdx.x * BQ;
  const long long pos = (long long)H * D;  // elements between consecutive positions
  const __nv_bfloat16* qb = q + ((long long)b * Sq * H + h) * D;
  const __nv_bfloat16* kb = k + ((long long)b * Skv * H + h) * D;
  const __nv_bfloat16* vb = v + ((long long)b * Skv * H + h) * D;
  __nv_bfloat16* ob = o + ((long long)b * Sq * H + h) * D;
  const float scale = 1.0f / sqrtf(D);
  const int off = Skv - Sq;

  for (int e = tid; e < BQ * D; e += NT) {
    const int r = e / D, c = e % D, i = q0 + r;
    Qs[r * (D + 1) + c] = i < Sq ? __bfloat162float(qb[i * pos + c]) : 0.0f;
  }
  if (tid < BQ) {
    row_m[tid] = NEG_INF;
    row_l[tid] = 0.0f;
  }
  float acc[4][DMAX / 16];  // rows ty + 16r, columns tx + 16c
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < DMAX / 16; ++c) acc[r][c] = 0.0f;

  const int last = min(Skv - 1, q0 + BQ - 1 + off);  // the last key any row here sees
  for (int k0 = 0; k0 <= last; k0 += BK) {
    __syncthreads();  // the previous tile's Ks, Vs and S are no longer read
    for (int e = tid; e < BK * D; e += NT) {
      const int r = e / D, c = e % D, j = k0 + r;
      Ks[r * (D + 1) + c] = j < Skv ? __bfloat162float(kb[j * pos + c]) : 0.0f;
      Vs[r * D + c] = j < Skv ? __bfloat162float(vb[j * pos + c]) : 0.0f;
    }
    __syncthreads();
    float s[4][4];
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) s[r][c] = 0.0f;
    for (int d = 0; d < D; ++d) {
      float qv[4], kv[4];
      for (int r = 0; r < 4; ++r) qv[r] = Qs[(ty + 16 * r) * (D + 1) + d];
      for (int c = 0; c < 4; ++c) kv[c] = Ks[(tx + 16 * c) * (D + 1) + d];
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 4; ++c) s[r][c] += qv[r] * kv[c];
    }
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) {
        const int i = q0 + ty + 16 * r, j = k0 + tx + 16 * c;
        const bool visible = j < Skv && j <= i + off;
        S[(ty + 16 * r) * (BK + 1) + tx + 16 * c] = visible ? s[r][c] * scale : NEG_INF;
      }
    __syncthreads();
    {  // online softmax: four threads per row, 16 keys each
      const int row = tid >> 2, part = tid & 3;
      float* Sr = S + row * (BK + 1) + part * 16;
      float mx = NEG_INF;
      for (int jj = 0; jj < 16; ++jj) mx = fmaxf(mx, Sr[jj]);
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_old = row_m[row];
      const float m_new = fmaxf(m_old, mx);
      float sum = 0.0f;
      for (int jj = 0; jj < 16; ++jj) {
        const float p = Sr[jj] == NEG_INF ? 0.0f : expf(Sr[jj] - m_new);
        Sr[jj] = p;
        sum += p;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      if (part == 0) {
        // m_old = -inf: nothing accumulated yet, so the factor is irrelevant.
        const float alpha = m_old == NEG_INF ? 0.0f : expf(m_old - m_new);
        row_l[row] = row_l[row] * alpha + sum;
        row_m[row] = m_new;
        row_a[row] = alpha;
      }
    }
    __syncthreads();
    for (int r = 0; r < 4; ++r) {
      const float a = row_a[ty + 16 * r];
      for (int c = 0; c < DMAX / 16; ++c) acc[r][c] *= a;
    }
    for (int j = 0; j < BK; ++j) {
      float p[4];
      for (int r = 0; r < 4; ++r) p[r] = S[(ty + 16 * r) * (BK + 1) + j];
      for (int c = 0; c < DMAX / 16; ++c) {
        const int col = tx + 16 * c;
        const float vv = col < D ? Vs[j * D + col] : 0.0f;
        for (int r = 0; r < 4; ++r) acc[r][c] += p[r] * vv;
      }
    }
  }
  __syncthreads();
  for (int r = 0; r < 4; ++r) {
    const int i = q0 + ty + 16 * r;
    if (i >= Sq) continue;
    const float l = row_l[ty + 16 * r];
    for (int c = 0; c < DMAX / 16; ++c) {
      const int col = tx + 16 * c;
      if (col < D) ob[i * pos + col] = __float2bfloat16_rn(l > 0.0f ? acc[r][c] / l : 0.0f);
    }
  }
}
