// attention reference: causal softmax(q k^T / sqrt(D)) v with the mask aligned
// to the bottom right, bf16 storage, fp64 arithmetic, o rounded once to bf16
// (the trusted reference).
//
// q, o: [B, Sq, H, D]; k, v: [B, Skv, H, D]; bf16, contiguous row-major, so
// the vector of position i of head h of batch b is at ((b*S + i)*H + h)*D.
// Query i attends key j when j <= i + (Skv - Sq) (and j < Skv).
//
// One block of 256 threads per (64-query tile, head, batch); key tiles of 64
// are staged in shared memory (bf16 widened to float, which is exact), the
// scores of a tile are kept in double, and the softmax is the online one in
// double: a running row max m, a running sum l and the accumulator rescaled
// by exp(m_old - m_new) when the max grows. Key tiles past the last key the
// tile's bottom row may see are skipped. Rows with no visible key (only when
// Sq > Skv) are written as 0. D <= 128 (the kernel traps otherwise).
//
// Dynamic shared memory: 8*64*68 + 4*64*(3*D + 2) bytes.
#include <cuda_bf16.h>

#define BQ 64
#define BK 64
#define NT 256
#define DMAX 128

extern "C" __global__ void __launch_bounds__(NT)
attention_ref(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
              const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ o,
              int B, int H, int Sq, int Skv, int D) {
  if (D > DMAX) __trap();
  extern __shared__ double smem[];
  double* S = smem;                   // [BQ][BK + 1] scores, then probabilities
  double* row_m = S + BQ * (BK + 1);  // running max per row
  double* row_l = row_m + BQ;         // running sum per row
  double* row_a = row_l + BQ;         // this tile's rescale factor per row
  float* Qs = (float*)(row_a + BQ);   // [BQ][D + 1]
  float* Ks = Qs + BQ * (D + 1);      // [BK][D + 1]
  float* Vs = Ks + BK * (D + 1);      // [BK][D]
  const double NEG_INF = -__longlong_as_double(0x7ff0000000000000ll);

  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int h = blockIdx.y, b = blockIdx.z, q0 = blockIdx.x * BQ;
  const long long pos = (long long)H * D;  // elements between consecutive positions
  const __nv_bfloat16* qb = q + ((long long)b * Sq * H + h) * D;
  const __nv_bfloat16* kb = k + ((long long)b * Skv * H + h) * D;
  const __nv_bfloat16* vb = v + ((long long)b * Skv * H + h) * D;
  __nv_bfloat16* ob = o + ((long long)b * Sq * H + h) * D;
  const double scale = 1.0 / sqrt((double)D);
  const int off = Skv - Sq;

  for (int e = tid; e < BQ * D; e += NT) {
    const int r = e / D, c = e % D, i = q0 + r;
    Qs[r * (D + 1) + c] = i < Sq ? __bfloat162float(qb[i * pos + c]) : 0.0f;
  }
  if (tid < BQ) {
    row_m[tid] = NEG_INF;
    row_l[tid] = 0.0;
  }
  double acc[4][DMAX / 16];  // rows ty + 16r, columns tx + 16c
  for (int r = 0; r < 4; ++r)
    for (int c = 0; c < DMAX / 16; ++c) acc[r][c] = 0.0;

  const int last = min(Skv - 1, q0 + BQ - 1 + off);  // the last key any row here sees
  for (int k0 = 0; k0 <= last; k0 += BK) {
    __syncthreads();  // the previous tile's Ks, Vs and S are no longer read
    for (int e = tid; e < BK * D; e += NT) {
      const int r = e / D, c = e % D, j = k0 + r;
      Ks[r * (D + 1) + c] = j < Skv ? __bfloat162float(kb[j * pos + c]) : 0.0f;
      Vs[r * D + c] = j < Skv ? __bfloat162float(vb[j * pos + c]) : 0.0f;
    }
    __syncthreads();
    double s[4][4];
    for (int r = 0; r < 4; ++r)
      for (int c = 0; c < 4; ++c) s[r][c] = 0.0;
    for (int d = 0; d < D; ++d) {
      double qv[4], kv[4];
      for (int r = 0; r < 4; ++r) qv[r] = (double)Qs[(ty + 16 * r) * (D + 1) + d];
      for (int c = 0; c < 4; ++c) kv[c] = (double)Ks[(tx + 16 * c) * (D + 1) + d];
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
      double* Sr = S + row * (BK + 1) + part * 16;
      double mx = NEG_INF;
      for (int jj = 0; jj < 16; ++jj) mx = fmax(mx, Sr[jj]);
      mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmax(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const double m_old = row_m[row];
      const double m_new = fmax(m_old, mx);
      double sum = 0.0;
      for (int jj = 0; jj < 16; ++jj) {
        const double p = Sr[jj] == NEG_INF ? 0.0 : exp(Sr[jj] - m_new);
        Sr[jj] = p;
        sum += p;
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      if (part == 0) {
        // m_old = -inf: nothing accumulated yet, so the factor is irrelevant.
        const double alpha = m_old == NEG_INF ? 0.0 : exp(m_old - m_new);
        row_l[row] = row_l[row] * alpha + sum;
        row_m[row] = m_new;
        row_a[row] = alpha;
      }
    }
    __syncthreads();
    for (int r = 0; r < 4; ++r) {
      const double a = row_a[ty + 16 * r];
      for (int c = 0; c < DMAX / 16; ++c) acc[r][c] *= a;
    }
    for (int j = 0; j < BK; ++j) {
      double p[4];
      for (int r = 0; r < 4; ++r) p[r] = S[(ty + 16 * r) * (BK + 1) + j];
      for (int c = 0; c < DMAX / 16; ++c) {
        const int col = tx + 16 * c;
        const double vv = col < D ? (double)Vs[j * D + col] : 0.0;
        for (int r = 0; r < 4; ++r) acc[r][c] += p[r] * vv;
      }
    }
  }
  __syncthreads();
  for (int r = 0; r < 4; ++r) {
    const int i = q0 + ty + 16 * r;
    if (i >= Sq) continue;
    const double l = row_l[ty + 16 * r];
    for (int c = 0; c < DMAX / 16; ++c) {
      const int col = tx + 16 * c;
      if (col < D) ob[i * pos + col] = __double2bfloat16(l > 0.0 ? acc[r][c] / l : 0.0);
    }
  }
}
