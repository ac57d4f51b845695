// ksearch's own device code: input generation, poison detection and the
// on-device comparison, plus the FMA kernel the roofline's peak is measured
// with. Compiled with NVRTC at evaluator start (and cached like any kernel).
#ifndef KSEARCH_EVAL_JUDGE_KERNELS_H_
#define KSEARCH_EVAL_JUDGE_KERNELS_H_

namespace ksearch::internal {

// dtype codes shared with the kernels below.
enum JudgeDType { kJudgeF32 = 0, kJudgeF64 = 1, kJudgeF16 = 2, kJudgeBF16 = 3, kJudgeI32 = 4,
                  kJudgeI64 = 5, kJudgeU8 = 6 };

// The poison written into outputs and workspaces before every candidate run:
// quiet NaNs with a payload no arithmetic produces.
inline constexpr unsigned kPoison32 = 0x7fbadbadu;
inline constexpr unsigned short kPoison16 = 0x7dadu;    // f16 NaN
inline constexpr unsigned short kPoisonBf16 = 0x7fadu;  // bf16 NaN

// Results of ks_compare, laid out as the kernel writes them.
struct CompareResults {
  double sum_sq_diff;
  double sum_sq_want;
  unsigned long long bad;
  unsigned long long unwritten;
  unsigned long long worst;    // (violation float bits << 32) | index, for atomicMax
  unsigned long long max_rel;  // float bits of the largest |got-want|/(|want|+atol)
  unsigned long long nonfinite_want;  // NaN/Inf in the expected output
  unsigned long long nonfinite_got;   // NaN/Inf written where the expected value is finite
  // float bits of the largest max(0, |got-want| - rtol*|want|) / atol: how
  // many atols an element needs beyond the relative part of the bound.
  unsigned long long max_excess;
};

// The histogram of relative errors ks_compare fills: 256 quarter-octave
// bins; bin b > 0 holds errors in [2^((b-224)/4), 2^((b-223)/4)).
inline constexpr int kRelHistogramBins = 256;
// The value an output's guard regions hold; any other word there is a write
// out of bounds.
inline constexpr unsigned kGuard32 = 0x5afe6a7du;

extern const char kJudgeKernelSource[];

}  // namespace ksearch::internal

#endif  // KSEARCH_EVAL_JUDGE_KERNELS_H_
