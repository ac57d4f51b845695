// softmax template "online": y = softmax(x, dim=1) in fp32, one block per row,
// one pass for max and sum together (online rescaling), one pass to write.
// Tunable through the -D params:
//   BLOCK  threads per block (a multiple of 32, at most 1024)
//   VEC    floats per load (1, 2 or 4; needs cols % VEC == 0 for alignment)
// Grid: (rows, 1, 1). Block: (BLOCK, 1, 1). x and y: rows x cols, row-major.

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef VEC
#define VEC 4
#endif

#define WARPS (BLOCK / 32)
#define NEG_INF (-__int_as_float(0x7f800000))

__device__ __forceinline__ void load_vec(const float* p, float (&v)[VEC]) {
#if VEC == 4
  const float4 t = *reinterpret_cast<const float4*>(p);
  v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
#elif VEC == 2
  const float2 t = *reinterpret_cast<const float2*>(p);
  v[0] = t.x; v[1] = t.y;
#else
  v[0] = *p;
#endif
}

__device__ __forceinline__ void store_vec(float* p, const float (&v)[VEC]) {
#if VEC == 4
  *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
#elif VEC == 2
  *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
#else
  *p = v[0];
#endif
}

// Merges the running (max, sum) pair (m, s) with (m2, s2); a pair with max -inf
// holds nothing.
__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  if (m2 == NEG_INF) return;
  if (m == NEG_INF) { m = m2; s = s2; return; }
  const float mn = fmaxf(m, m2);
  s = s * expf(m - mn) + s2 * expf(m2 - mn);
  m = mn;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
softmax_online(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
  __shared__ float warp_m[WARPS];
  __shared__ float warp_s[WARPS];
  const int row = blockIdx.x;
  if (row >= rows) return;
  const float* xr = x + (long long)row * cols;
  float* yr = y + (long long)row * cols;
  const int t = threadIdx.x;

  float m = NEG_INF, s = 0.0f;
  for (int j = t * VEC; j < cols; j += BLOCK * VEC) {
    float v[VEC];
    load_vec(xr + j, v);
    float vm = v[0];
#pragma unroll
    for (int i = 1; i < VEC; ++i) vm = fmaxf(vm, v[i]);
    float vs = 0.0f;
#pragma unroll
    for (int i = 0; i < VEC; ++i) vs += expf(v[i] - vm);
    merge(m, s, vm, vs);
  }

#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
    const float s2 = __shfl_xor_sync(0xffffffffu, s, off);
    merge(m, s, m2, s2);
  }
  if (t % 32 == 0) { warp_m[t / 32] = m; warp_s[t / 32] = s; }
  __syncthreads();
  m = warp_m[0];
  s = warp_s[0];
  for (int w = 1; w < WARPS; ++w) merge(m, s, warp_m[w], warp_s[w]);

  for (int j = t * VEC; j < cols; j += BLOCK * VEC) {
    float v[VEC];
    load_vec(xr + j, v);
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = expf(v[i] - m) / s;
    store_vec(yr + j, v);
  }
}
