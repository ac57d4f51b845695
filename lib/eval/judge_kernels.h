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
};

extern const char kJudgeKernelSource[];

}  // namespace ksearch::internal

#endif  // KSEARCH_EVAL_JUDGE_KERNELS_H_
