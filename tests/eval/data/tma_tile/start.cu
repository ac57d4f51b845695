// Tiles of x through the Tensor Memory Accelerator: one block per band of BR
// rows walks the columns in BR x BC boxes, each fetched by one
// cp.async.bulk.tensor into shared memory and waited for on an mbarrier.
// Every element of a box is summed, including the parts past the tensor's
// last row or column, which TMA fills with zeros: the row sums are right only
// if it does. In-bounds elements are copied to y.
//
// The tensor map is the plan's {"tensor_map": "x", "box": ["BC", "BR"]}: the
// judge encodes it over x's buffer; the kernel only names it.
#ifndef BR
#define BR 32
#endif
#ifndef BC
#define BC 32  // four threads per row, eight columns each
#endif

// CUtensorMap's layout: 128 opaque bytes, 64-byte aligned (cuda.h is a host
// header).
struct __align__(64) TensorMap {
  unsigned long long opaque[16];
};

__device__ __forceinline__ unsigned SharedAddress(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

extern "C" __global__ void __launch_bounds__(4 * BR)
tile_copy_tma(const __grid_constant__ TensorMap x_map, float* __restrict__ y, float* __restrict__ s,
              int rows, int cols) {
  __shared__ __align__(128) float tile[BR * BC];
  __shared__ __align__(8) unsigned long long barrier;
  const int r = threadIdx.x / 4;        // row within the band
  const int part = threadIdx.x % 4;     // which eight columns of the box
  const int row0 = blockIdx.x * BR;
  const unsigned bar = SharedAddress(&barrier);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(bar));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  float sum = 0.0f;
  unsigned phase = 0;
  for (int col0 = 0; col0 < cols; col0 += BC) {
    if (threadIdx.x == 0) {
      // Generic-proxy reads of the last tile are done (the barrier below);
      // order them before the async proxy's writes.
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                   "r"(static_cast<unsigned>(sizeof(tile)))
                   : "memory");
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
          " [%0], [%1, {%2, %3}], [%4];" ::"r"(SharedAddress(tile)),
          "l"(reinterpret_cast<unsigned long long>(&x_map)), "r"(col0), "r"(row0), "r"(bar)
          : "memory");
    }
    unsigned done = 0;
    while (!done) {
      asm volatile(
          "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
          " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(bar), "r"(phase) : "memory");
    }
    phase ^= 1;
    const int row = row0 + r;
    for (int j = 0; j < 8; ++j) {
      const int c = part * 8 + j;
      const float v = tile[r * BC + c];
      sum += v;  // zero past the tensor's edge, or the sum is wrong
      if (row < rows && col0 + c < cols) y[(long long)row * cols + col0 + c] = v;
    }
    __syncthreads();  // every thread has read the tile before the next copy
  }
  sum += __shfl_xor_sync(0xffffffffu, sum, 1);
  sum += __shfl_xor_sync(0xffffffffu, sum, 2);
  if (part == 0 && row0 + r < rows) s[row0 + r] = sum;
}
