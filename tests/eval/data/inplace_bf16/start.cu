// ROWS_PER_BLOCK rows per block, the threads striding along each row: read
// y, fp32 fma, one rounding, written back in place.
#include <cuda_bf16.h>

#ifndef ROWS_PER_BLOCK
#define ROWS_PER_BLOCK 4
#endif

extern "C" __global__ void __launch_bounds__(256)
scale_shift(__nv_bfloat16* __restrict__ y, const float* __restrict__ s, const float* __restrict__ b,
            int rows, int cols) {
  for (int r = blockIdx.x * ROWS_PER_BLOCK; r < min(rows, (int)(blockIdx.x + 1) * ROWS_PER_BLOCK); ++r) {
    __nv_bfloat16* yr = y + (long long)r * cols;
    for (int c = threadIdx.x; c < cols; c += 256) {
      yr[c] = __float2bfloat16_rn(fmaf(__bfloat162float(yr[c]), s[c], b[c]));
    }
  }
}
