// The fp32 twin: the reference's loop with a float fma, one rounding.
#include <cuda_bf16.h>

extern "C" __global__ void __launch_bounds__(256)
scale_shift_ref_fp32(__nv_bfloat16* __restrict__ y, const float* __restrict__ s, const float* __restrict__ b,
                     int rows, int cols) {
  long long i = (long long)blockIdx.x * 256 + threadIdx.x;
  if (i >= (long long)rows * cols) return;
  int c = (int)(i % cols);
  y[i] = __float2bfloat16_rn(fmaf(__bfloat162float(y[i]), s[c], b[c]));
}
