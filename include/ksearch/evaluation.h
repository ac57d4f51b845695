// Evaluation: the verdict on one candidate — exactly one status, a one-line
// message, and the figures behind it (docs/evaluation.md is the protocol).
//
// Thread safety: plain values.
#ifndef KSEARCH_EVALUATION_H_
#define KSEARCH_EVALUATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ksearch {

enum class EvalStatus {
  kOk,                // correct and timed: every check ran and passed
  kCompiled,          // compile-only: compiled and its plan checked, never run, so
                      // neither correct nor timed
  kCompileError,      // NVRTC rejected the source; details hold the log
  kInvalidPlan,       // the launch plan is malformed or does not fit the kernel
  kResourceLimit,     // registers/shared memory/threads beyond the device
  kLaunchError,       // the driver refused a launch (non-sticky)
  kCrashed,           // a sticky CUDA error (illegal address, trap); the context died
  kTimeout,           // the kernel ran past the watchdog, or the compile past its limit
  kWrongResult,       // outputs differ from the reference beyond tolerance
  kUnwrittenOutput,   // some output elements still hold the poison pattern
  kInputModified,     // the candidate wrote into an input tensor
  kOutOfBoundsWrite,  // the candidate wrote into the guard region around a buffer
  kNondeterministic,  // two runs on the same inputs disagreed beyond rounding
  kSuspiciousSpeed,   // faster than the physical floor of the device
  kCancelled,         // the search stopped before this candidate was judged
};
// "ok", "compiled", "compile_error", …, as in docs/evaluation.md.
std::string_view ToString(EvalStatus status);
bool ParseEvalStatus(std::string_view text, EvalStatus* out);

// What the compiler and the driver report for one kernel of the plan.
struct KernelResources {
  std::string kernel;
  int registers = -1;               // per thread; -1 when unknown
  int64_t static_shared_bytes = -1;
  int64_t max_dynamic_shared_bytes = -1;  // the largest the plan asks for
  int64_t local_bytes = -1;         // stack frame per thread (spills land here)
  int64_t spill_store_bytes = -1;   // from the compiler log, -1 when not reported
  int64_t spill_load_bytes = -1;
  int max_threads_per_block = -1;   // the driver's limit for this kernel
};

// The first failing comparison of a correctness check.
struct Mismatch {
  std::string tensor;       // output tensor name
  std::string input_set;    // e.g. "shifted"
  std::string phase;        // "check", "timing" (a timed run) or "recheck" (after timing)
  int64_t bad_count = 0;    // elements beyond tolerance
  int64_t elements = 0;
  int64_t worst_index = -1; // flat index of the largest violation
  double expected = 0.0;    // at worst_index
  double got = 0.0;
  double max_rel_error = 0.0;
  double l2_rel_error = 0.0;
  double allowed_l2_rel_error = 0.0;
};

// Times in milliseconds of repeated runs of a whole launch plan.
struct TimingStats {
  double median_ms = 0.0;
  double min_ms = 0.0;
  double p10_ms = 0.0;
  double p90_ms = 0.0;
  double ci_low_ms = 0.0;   // 95% confidence interval of the median
  double ci_high_ms = 0.0;
  int repetitions = 0;
};

// Candidate vs baseline, interleaved A B A B…: the median of per-pair ratios
// baseline/candidate (> 1 means the candidate is faster) and its 95% interval.
struct Speedup {
  std::string baseline;     // "cublas_sgemm", "reference", …
  double ratio = 0.0;
  double ci_low = 0.0;
  double ci_high = 0.0;
  int pairs = 0;
};

struct DeviceInfo {
  std::string name;             // "NVIDIA H200"
  int ordinal = -1;
  int cc_major = 0;
  int cc_minor = 0;
  int driver_version = 0;       // cuDriverGetVersion, e.g. 13000
  std::string nvrtc_version;    // "13.0"
  int multiprocessors = 0;
  int64_t l2_bytes = 0;
  int64_t global_memory_bytes = 0;
  int sm_clock_mhz = 0;         // observed while timing (0 when unknown)
  int memory_clock_mhz = 0;
  double peak_bandwidth_gbps = 0.0;  // measured device-to-device copy, read + write
  double peak_gflops = 0.0;          // measured fp32 FMA rate
  // Measured tensor-core rates of the paths the problem allows ("tf32_mma",
  // "fp16_mma", "bf16_mma"; mma.sync), in GFLOP/s.
  std::vector<std::pair<std::string, double>> peak_mma_gflops;
  std::string baseline_library;      // "cuBLAS 13.0.0" when a library is the baseline
  std::string Arch() const;     // "sm_90"
  // The arch kernels are compiled for on this device: the capability's
  // arch-specific feature set where it has one ("sm_90a": wgmma, setmaxnreg;
  // "sm_100a": tcgen05), else Arch(). Such code runs only on this exact
  // capability, which is the device it is judged and cached for.
  std::string CompileArch() const;
};

// The verdict at one shape case of a problem that declares shape cases
// (Problem::shapes): the case's own check, time and speedup.
struct CaseResult {
  std::string name;                                   // ShapeCase::name
  std::vector<std::pair<std::string, int64_t>> dims;  // every dim at this case
  double weight = 0.0;   // ShapeCase::weight; 0 for a check-only case
  bool timed = true;     // false: check-only
  // kOk when correct here (and timed, for a timed case); else why not.
  // kCancelled when not judged here: an earlier case failed first.
  EvalStatus status = EvalStatus::kCancelled;
  std::string message;
  // A timed case that passed: the candidate's and the baseline's median
  // time here, with the candidate's 95% interval and repetitions.
  double median_ms = 0.0;
  double min_ms = 0.0;
  double p10_ms = 0.0;
  double p90_ms = 0.0;
  double ci_low_ms = 0.0;
  double ci_high_ms = 0.0;
  int repetitions = 0;
  double baseline_median_ms = 0.0;
  // Paired speedup against the problem's baseline at this case (> 1:
  // faster), with its 95% interval; 0 when not timed.
  std::string baseline;
  double speedup = 0.0;
  double speedup_ci_low = 0.0;
  double speedup_ci_high = 0.0;
  double floor_ms = 0.0;              // roofline floor at this case's dims
  double max_l2_rel_error = 0.0;      // worst over the checks that passed
  double allowed_l2_rel_error = 0.0;  // this case's measured tolerance
};

struct Evaluation {
  std::string candidate_id;
  std::string content_hash;     // Candidate::ContentHash()
  EvalStatus status = EvalStatus::kCancelled;
  std::string message;          // one line for people
  std::string details;          // compile log (truncated with a note), driver error, …
  std::string device_log;       // what the kernel printed (bounded, escaped)
  std::vector<std::string> checks_not_run;  // e.g. "correctness (compile-only)"
  bool relaxed_tolerance = false;           // figures were obtained under kRelaxed

  std::vector<KernelResources> resources;
  std::optional<Mismatch> mismatch;
  double max_l2_rel_error = 0.0;            // worst over all checks that passed
  double allowed_l2_rel_error = 0.0;

  std::optional<TimingStats> timing;
  std::optional<TimingStats> baseline_timing;
  std::optional<Speedup> speedup;           // against the problem's baseline
  double floor_ms = 0.0;                    // roofline floor on this device
  double roofline_fraction = 0.0;           // floor_ms / median_ms
  // A problem with shape cases: one result per case, in the problem's order
  // (empty for a problem with one shape). `timing` and `baseline_timing`
  // then hold the weighted means over the timed cases (the objective;
  // sum(weight × figure) / sum(weight)), `speedup` the ratio of those
  // weighted times, and `status` the first failing case's, its message
  // naming the case (docs/evaluation.md, "Shape sets").
  std::vector<CaseResult> cases;

  DeviceInfo device;
  bool compile_cached = false;
  double compile_ms = 0.0;
  double check_ms = 0.0;
  double timing_ms = 0.0;                   // wall time spent timing
  double total_ms = 0.0;

  // Passed every check that was run: kOk, or kCompiled for a compile-only
  // evaluator (searches go on from such kernels).
  bool ok() const { return status == EvalStatus::kOk || status == EvalStatus::kCompiled; }
  // Judged correct on the GPU (kOk). A kCompiled kernel is never correct.
  bool correct() const { return status == EvalStatus::kOk; }
  // One paragraph for people: status, message, time, speedup, resources.
  std::string Report() const;
  // Machine-readable form (the CLI's --json).
  std::string ToJson() const;
};

}  // namespace ksearch

#endif  // KSEARCH_EVALUATION_H_
