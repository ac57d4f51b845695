// linear_qkv_rope reference (trusted): the q, k and v projections of an
// attention layer as one GEMM over the merged weight [Wq; Wk; Wv], with the
// rotary position embedding applied to q and k (rotate half, as the rope
// problem) and the results written where the engine keeps them.
//
// X is M x K, W is (heads + 2 kv_heads) * head_dim x K (nn.Linear's weight:
// q's rows, then k's, then v's), all bf16 row-major; cos and sin are
// M x head_dim/2 fp32 (token m's angles). q is M x heads x head_dim, k and
// v are M x kv_heads x head_dim (the KV cache's rows of these tokens), bf16.
// With t = X · Wᵀ exact, for each head of q and k and each i < head_dim/2:
// x1 = t[.. + i], x2 = t[.. + i + head_dim/2], out[i] = x1 cos - x2 sin,
// out[i + head_dim/2] = x2 cos + x1 sin; v = t's last kv_heads heads. Every
// product and sum in double, each output rounded to bf16 once.
//
// Two launches. qkv_ref_gemm: t = X · Wᵀ into a double workspace (M x NT,
// NT = (heads + 2 kv_heads) * head_dim), 16 x 16 threads per 64 x 64 tile,
// each thread 4 x 4 outputs, tiles of X and W staged in shared memory as
// doubles, each output one double chain over k; grid (ceil_div(NT, 64),
// ceil_div(M, 64), 1). qkv_ref_rope: one block per token (grid M), its
// threads striding over the token's rotated pairs and v's elements. Any
// dims >= 1 with head_dim even.
#include <cuda_bf16.h>

#define TILE 64
#define TILE_K 16
#define THREADS 16

extern "C" __global__ void __launch_bounds__(THREADS * THREADS)
qkv_ref_gemm(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ W, double* __restrict__ t,
             int M, int N, int K) {
  // Both tiles are indexed [k][row]; the +1 keeps the column stores of the
  // staging loop off one bank.
  __shared__ double Xs[TILE_K][TILE + 1];
  __shared__ double Ws[TILE_K][TILE + 1];

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * THREADS + tx;
  const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;

  double acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0;

  for (int k0 = 0; k0 < K; k0 += TILE_K) {
    for (int e = tid; e < TILE * TILE_K; e += THREADS * THREADS) {
      const int r = e / TILE_K, k = e % TILE_K;
      const int gk = k0 + k;
      const int gm = row0 + r, gn = col0 + r;
      Xs[k][r] = (gm < M && gk < K) ? (double)__bfloat162float(X[(long long)gm * K + gk]) : 0.0;
      Ws[k][r] = (gn < N && gk < K) ? (double)__bfloat162float(W[(long long)gn * K + gk]) : 0.0;
    }
    __syncthreads();
    for (int k = 0; k < TILE_K; ++k) {
      double w[4];
      for (int j = 0; j < 4; ++j) w[j] = Ws[k][tx + 16 * j];
      for (int i = 0; i < 4; ++i) {
        const double x = Xs[k][ty + 16 * i];
        for (int j = 0; j < 4; ++j) acc[i][j] += x * w[j];
      }
    }
    __syncthreads();
  }

  for (int i = 0; i < 4; ++i) {
    const int m = row0 + ty + 16 * i;
    if (m >= M) continue;
    for (int j = 0; j < 4; ++j) {
      const int n = col0 + tx + 16 * j;
      if (n < N) t[(long long)m * N + n] = acc[i][j];
    }
  }
}

extern "C" __global__ void qkv_ref_rope(const double* __restrict__ t, const float* __restrict__ cos_t,
                                        const float* __restrict__ sin_t, __nv_bfloat16* __restrict__ q,
                                        __nv_bfloat16* __restrict__ k, __nv_bfloat16* __restrict__ v, int heads,
                                        int kv_heads, int head_dim) {
  const int m = blockIdx.x, half = head_dim / 2;
  const double* row = t + (long long)m * (heads + 2 * kv_heads) * head_dim;
  const int pairs = (heads + kv_heads) * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const int h = p / half, i = p % half;
    __nv_bfloat16* out = h < heads ? q + ((long long)m * heads + h) * head_dim
                                   : k + ((long long)m * kv_heads + (h - heads)) * head_dim;
    const double c = (double)cos_t[(long long)m * half + i];
    const double s = (double)sin_t[(long long)m * half + i];
    const double x1 = row[h * head_dim + i], x2 = row[h * head_dim + i + half];
    out[i] = __double2bfloat16(x1 * c - x2 * s);
    out[i + half] = __double2bfloat16(x2 * c + x1 * s);
  }
  const double* v_row = row + (heads + kv_heads) * head_dim;
  for (int e = threadIdx.x; e < kv_heads * head_dim; e += blockDim.x) {
    v[(long long)m * kv_heads * head_dim + e] = __double2bfloat16(v_row[e]);
  }
}
