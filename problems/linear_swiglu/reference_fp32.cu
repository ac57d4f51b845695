// linear_swiglu, fp32 twin: Y = silu(X · Wgᵀ) · (X · Wuᵀ), the
// gate/up projection of a SwiGLU MLP writing only its product.
//
// X is M x K; W is 2N x K, nn.Linear's weight of the merged gate/up
// projection: rows 0 .. N-1 are Wg, rows N .. 2N-1 are Wu; Y is M x N; all
// bf16, contiguous row-major. With g = X[m]·W[n] and u = X[m]·W[N + n],
// Y[m][n] = g / (1 + exp(-g)) * u with fp32 products and sums (fmaf, one chain
// over k per sum) and an fp32 epilogue (expf), rounded to bf16 once: the plain
// kernel an engineer would write first, whose error against the fp64
// reference sets the strict tolerance.
//
// Block: 16 x 16 threads computing a 64 x 64 tile of Y; thread (tx, ty) owns
// the 4 x 4 outputs at rows ty + 16*i and columns tx + 16*j (i, j in 0..3),
// with a gate and an up sum for each. Tiles of X, Wg and Wu (16 values of k
// each) are staged in shared memory as floats; out-of-range elements are
// zero. Grid: (ceil_div(N, 64), ceil_div(M, 64), 1). Any M, N, K >= 1.
#include <cuda_bf16.h>

#define TILE 64
#define TILE_K 16
#define THREADS 16

extern "C" __global__ void __launch_bounds__(THREADS * THREADS)
linear_swiglu_ref_fp32(const __nv_bfloat16* __restrict__ X, const __nv_bfloat16* __restrict__ W,
                  __nv_bfloat16* __restrict__ Y, int M, int N, int K) {
  // The tiles are indexed [k][row]; the +1 keeps the column stores of the
  // staging loop off one bank.
  __shared__ float Xs[TILE_K][TILE + 1];
  __shared__ float Gs[TILE_K][TILE + 1];
  __shared__ float Us[TILE_K][TILE + 1];

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int tid = ty * THREADS + tx;
  const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;

  float gate[4][4], up[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) gate[i][j] = up[i][j] = 0.0f;

  for (int k0 = 0; k0 < K; k0 += TILE_K) {
    for (int e = tid; e < TILE * TILE_K; e += THREADS * THREADS) {
      const int r = e / TILE_K, k = e % TILE_K;
      const int gk = k0 + k;
      const int gm = row0 + r, gn = col0 + r;
      const bool in_k = gk < K, in_n = gn < N && in_k;
      Xs[k][r] = (gm < M && in_k) ? __bfloat162float(X[(long long)gm * K + gk]) : 0.0f;
      Gs[k][r] = in_n ? __bfloat162float(W[(long long)gn * K + gk]) : 0.0f;
      Us[k][r] = in_n ? __bfloat162float(W[(long long)(N + gn) * K + gk]) : 0.0f;
    }
    __syncthreads();
    for (int k = 0; k < TILE_K; ++k) {
      float g[4], u[4];
      for (int j = 0; j < 4; ++j) {
        g[j] = Gs[k][tx + 16 * j];
        u[j] = Us[k][tx + 16 * j];
      }
      for (int i = 0; i < 4; ++i) {
        const float x = Xs[k][ty + 16 * i];
        for (int j = 0; j < 4; ++j) {
          gate[i][j] = fmaf(x, g[j], gate[i][j]);
          up[i][j] = fmaf(x, u[j], up[i][j]);
        }
      }
    }
    __syncthreads();
  }

  for (int i = 0; i < 4; ++i) {
    const int m = row0 + ty + 16 * i;
    if (m >= M) continue;
    for (int j = 0; j < 4; ++j) {
      const int n = col0 + tx + 16 * j;
      if (n >= N) continue;
      const float g = gate[i][j];
      Y[(long long)m * N + n] = __float2bfloat16_rn(g / (1.0f + expf(-g)) * up[i][j]);
    }
  }
}
