// The in-process evaluator: the judge of docs/evaluation.md on one GPU.
//
// One class, its protocol steps in one file each:
//   local_evaluator.cc  set-up, the order of the steps for a candidate, faults
//   device_steps.cc     launches, the watchdog, inputs, poison, guards, compare
//   calibration.cc      peaks and floors, tolerances, problem sanity, baseline
//   prepare.cc          loading a plan: resolve, signature, device limits
//   correctness.cc      the checks of a candidate's outputs
//   timing.cc           timed runs that do the work
//
// Where the buffers live decides what a candidate can reach:
//   vault_     the reference's inputs and outputs, the fp32 twin's outputs,
//              the determinism copy: unmapped (sealed) whenever a candidate
//              runs (lib/eval/vault.h)
//   cand_      the candidate's inputs (a copy) and outputs, each between two
//              guard regions that are checked after every candidate run
//   base_      the baseline's own inputs and outputs while timing; fresh
//              inputs before each of its runs, so nothing a candidate leaves
//              there can change the baseline's work
#ifndef KSEARCH_EVAL_LOCAL_EVALUATOR_H_
#define KSEARCH_EVAL_LOCAL_EVALUATOR_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "baselines/library_baseline.h"
#include "core/plan_resolve.h"
#include "core/thread_pool.h"
#include "cuda/compiler.h"
#include "cuda/driver.h"
#include "cuda/objects.h"
#include "cuda/plan_executor.h"
#include "eval/judge_kernels.h"
#include "eval/secrets.h"
#include "eval/vault.h"
#include "ksearch/evaluator.h"

namespace ksearch::internal {

class DeviceOutputCapture;

using EvalClock = std::chrono::steady_clock;

double MsSince(EvalClock::time_point start);

// Why a run of a plan failed, already classified for the Evaluation.
struct RunFailure {
  EvalStatus status = EvalStatus::kOk;
  std::string message;
  bool context_lost = false;
  bool ok() const { return status == EvalStatus::kOk; }
};

// Bytes of guard on each side of every candidate buffer.
inline constexpr int64_t kGuardBytes = 64 * 1024;

// A device buffer with a guard region on each side.
struct GuardedBuffer {
  DeviceBuffer raw;
  CUdeviceptr ptr = 0;  // raw + kGuardBytes
  int64_t bytes = 0;    // usable bytes
};

// A compiled, loaded and validated launch plan of a candidate.
struct PreparedPlan {
  Module module;
  ResolvedPlan resolved;
  PlanExecutor executor;  // the plan bound to the module's kernels
  std::vector<GuardedBuffer> workspace;
  std::vector<DType> workspace_dtypes;
};

// Device pointers for one family of tensors, indexed like Problem::tensors.
struct TensorBuffers {
  std::vector<CUdeviceptr> ptr;
  std::vector<int64_t> bytes;
};

// Tolerance for one input set (measured under kStrict, fixed under kRelaxed).
struct SetTolerance {
  double atol = 0.0;
  double rtol = 0.0;  // fp32 and fp64 outputs
  double allowed_l2 = 0.0;
  double fp32_l2 = 0.0;
  // Half-precision outputs (docs/evaluation.md "Half precision"): the
  // twin's 99.9th-percentile relative error, at least one rounding step of
  // the output type (Rtol); and the fraction of elements that may differ
  // from the reference by more than atol at all (1: not checked).
  double half_quantile = 0.0;
  double allowed_inexact_fraction = 1.0;
  double twin_inexact_fraction = 0.0;
  // The absolute part of the elementwise bound (atol and the row atols) is
  // multiplied by this: 1 except under kLibrary, where it widens to what the
  // library's worst element needs on the same inputs (LibraryTolerance);
  // the relative part (Rtol) stays the strict one.
  double elementwise_scale = 1.0;
  // kLibrary: what the library measured on this check's inputs (L2
  // relative error, share of half-precision elements more than atol from
  // the reference, and its worst element: the atols its error needs beyond
  // the strict relative part, Comparison::max_excess); -1 under other
  // policies.
  double library_l2 = -1.0;
  double library_inexact_fraction = -1.0;
  double library_worst = -1.0;
  // kLibrary: the library's worst element over kLibraryCalibrationSeeds
  // fresh inputs of this set, measured once at calibration. The worst
  // element of one check is the largest of the few elements the library
  // rounds more than a step off, a noisy statistic; the bound uses the larger
  // of it and this one (docs/evaluation.md).
  double library_worst_calibrated = 0.0;

  // The share of a half output's elements that may sit on the other side of
  // a rounding boundary from the reference, whatever the twin does.
  static constexpr double kMinInexactFraction = 0.01;

  // One rounding step of a half-precision type relative to the value (at
  // most: 2^-7 for bf16, 2^-10 for f16); 0 for other types.
  static double HalfStep(DType dtype) {
    return dtype == DType::kBF16 ? 0x1p-7 : dtype == DType::kF16 ? 0x1p-10 : 0.0;
  }
  static double AllowedInexactFraction(double strict_multiple, double twin_fraction) {
    return std::min(1.0, std::max(kMinInexactFraction, strict_multiple * twin_fraction));
  }
  double Rtol(DType output) const {
    return HalfStep(output) > 0 ? std::max(half_quantile, HalfStep(output)) : rtol;
  }
};

// Per-row (or per-column) atols of one output, for input sets whose
// distributions scale rows or columns (ks_group_atol); axis 0: none.
struct GroupAtol {
  int axis = 0;  // 1 rows, 2 columns
  long long row_len = 1;
  CUdeviceptr atol = 0;
};

// An output comparison, with the L2 relative error derived from it.
struct Comparison {
  CompareResults raw{};
  double l2 = 0.0;        // +inf when the expected output is all zero but got is not
  double max_rel = 0.0;
  // The largest max(0, |got-want| - rtol*|want|) / atol: the atols an
  // element needs beyond the relative part of its bound.
  double max_excess = 0.0;
};

class LocalEvaluator final : public Evaluator {
 public:
  LocalEvaluator(Problem problem, EvaluatorOptions options);
  ~LocalEvaluator() override;

  Status Initialize();

  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel) override;
  // Evaluate, with precompiled[i] used instead of compiling candidates[i] when
  // `precompiled` is not empty (lib/eval/judge.h).
  std::vector<Evaluation> EvaluateWith(std::span<const Candidate> candidates,
                                       std::span<const CompileResult> precompiled,
                                       const std::atomic<bool>* cancel);
  const Problem& problem() const override { return problem_; }
  const DeviceInfo& device() const override { return device_; }
  std::optional<TimingStats> reference_timing() const override { return reference_timing_; }
  std::optional<TimingStats> baseline_timing() const override { return baseline_timing_; }
  Status health() const override;

  // For the shape-set evaluator (shape_set_evaluator.cc), which holds one
  // LocalEvaluator per shape case on the same primary context:
  // Compiles candidates as EvaluateWith does (wall times in *wall_ms).
  std::vector<StatusOr<CompileResult>> CompileAll(std::span<const Candidate> candidates,
                                                  const std::atomic<bool>* cancel,
                                                  std::vector<double>* wall_ms);
  // A check-only case: candidates are checked, never timed.
  void set_check_only(bool check_only) { check_only_ = check_only; }
  // The device's peaks as another case's evaluator measured them (same
  // device, same allowed paths): Initialize takes them instead of measuring
  // again, and computes this case's floor from them. Before Initialize.
  void set_measured_peaks(const DeviceInfo& measured) { measured_peaks_ = measured; }
  // How often a candidate's crash made this evaluator reset the context.
  int context_resets() const { return context_resets_; }
  // Rebuilds every driver object after another evaluator reset the shared
  // primary context (the measured tolerances and figures are kept).
  Status RebuildDevice();
  // Seals the vault while other cases judge (their candidates run in the
  // same address space), and unseals it again.
  Status Park();
  Status Unpark();

 private:
  // local_evaluator.cc
  Status SetUpDevice();
  void TearDownDevice();
  void Judge(const Candidate& candidate, const CompileResult& compiled, Evaluation* e);
  void JudgeCompileOnly(const Candidate& candidate, const CompileResult& compiled, Evaluation* e);
  void Fail(Evaluation* e, const RunFailure& failure);
  void RecoverContext(Evaluation* e);
  // The judge itself failed (not the candidate): no further candidate is
  // judged, and health() says why.
  void BreakJudge(Evaluation* e, const std::string& during, const Status& status);

  // device_steps.cc
  RunFailure Classify(CUresult result, const char* call);
  RunFailure Launch(PreparedPlan& plan, const TensorBuffers& buffers);
  RunFailure Wait(double limit_seconds);
  // A trusted plan (reference, twin) on the stream, then the watchdog.
  RunFailure RunTrusted(PreparedPlan& plan, const TensorBuffers& buffers);
  // The candidate's plan, then the guard check: an out-of-bounds write
  // becomes kOutOfBoundsWrite. With `seal`, the vault is unmapped around
  // it. `timed` records events around the launches and returns the
  // milliseconds in *ms.
  RunFailure RunCandidate(PreparedPlan& plan, bool seal, bool timed, double* ms);
  // Overwrites everything the vault holds with poison: while timing, the
  // vault stays mapped (unmapping flushes the GPU's TLBs, which would slow
  // the timed run), so it must hold no truth then (see timing.cc).
  Status PoisonVault();
  // Inputs and inout tensors of `set` from `seed` into `family` (same seed,
  // same bits in any family): an inout tensor a kernel overwrote holds its
  // generated values again.
  Status Generate(const InputSet& set, uint64_t seed, const TensorBuffers& family);
  // The reference on (set, seed) in ref_; first each inout tensor's
  // generated values are copied into ref32_, so that the twin (or the
  // library) gets its own fresh copy rather than the reference's result.
  Status RunReference(const InputSet& set, uint64_t seed);
  // Outputs and inout tensors (what a kernel writes).
  Status CopyOutputs(const TensorBuffers& from, const TensorBuffers& to);
  Status CopyInouts(const TensorBuffers& from, const TensorBuffers& to);
  Status CopyTensors(const TensorBuffers& from, const TensorBuffers& to, bool (*pick)(TensorRole),
                     const char* what);
  // Outputs and the plan's workspace; an inout tensor keeps its generated
  // values (the kernel must read them).
  Status Poison(const TensorBuffers& buffers, PreparedPlan* plan);
  Status FlushL2();
  // An element fails when |got - want| > scale * atol + rtol * |want|
  // (atol the smaller of `atol` and its row's, with `groups`).
  StatusOr<Comparison> Compare(CUdeviceptr got, CUdeviceptr want, int64_t n, DType dtype,
                               double atol, double rtol,
                               std::vector<uint64_t>* histogram = nullptr,
                               double histogram_min_abs = 0.0, const GroupAtol& groups = {},
                               double scale = 1.0);
  // The L2 bound of output `t` against the expected output at `want`:
  // tol.allowed_l2, and for a half-precision output under a policy other
  // than kRelaxed never below the L2 error that one rounding step on the
  // largest kMinInexactFraction of its elements gives (TopMassShare). That
  // floor costs a pass over the output: it is measured only when `l2`, the
  // error being judged, is above tol.allowed_l2.
  StatusOr<double> AllowedL2(const SetTolerance& tol, size_t t, CUdeviceptr want, double l2);
  // The share of the sum of squares of the `n` values at `want` that their
  // `k` largest magnitudes hold, an upper bound to within a quarter octave.
  StatusOr<double> TopMassShare(CUdeviceptr want, int64_t n, DType dtype, int64_t k);
  // The row or column atols of output `t` for inputs of `set`, from the
  // expected output at `want`: {} (axis 0) unless an input of `set` is
  // scaled per row or per column, then that axis of the output's last dim.
  StatusOr<GroupAtol> GroupTolerance(const InputSet& set, size_t t, CUdeviceptr want);
  StatusOr<double> ReadElement(CUdeviceptr p, DType dtype, int64_t index);
  StatusOr<bool> InputsDiffer(const TensorBuffers& a, const TensorBuffers& b);
  // Words in the guard regions of cand_ and of the plan's workspace that no
  // longer hold kGuard32.
  StatusOr<uint64_t> GuardViolations(const PreparedPlan& plan);
  Status FillGuards(const GuardedBuffer& buffer);
  StatusOr<GuardedBuffer> AllocateGuarded(int64_t bytes);

  // calibration.cc
  Status MeasurePeaks();
  // Takes the peaks of `measured`, then SetFloor().
  void UsePeaks(const DeviceInfo& measured);
  // floor_ms_ and floor_path_ from device_'s peaks and this problem's
  // flops and bytes.
  void SetFloor();
  Status MeasureTolerances();
  StatusOr<SetTolerance> CalibrateSet(const InputSet& set);
  Status CheckProblemIsSound(const InputSet& set, const SetTolerance& tol);
  // The library baseline, checked on the inputs ref_ holds: under kStrict it
  // must pass the strict check to be the baseline (otherwise the fp32
  // reference is, and the reason is noted); under kLibrary it must exist and
  // be sane, or the problem cannot be judged (an error).
  Status SetUpLibraryBaseline(const SetTolerance& tol);
  // kLibrary: the tolerance of one check from `strict`, widened to the
  // library's error on the inputs the vault holds now (the library runs on
  // them into ref32_, after RunReference), never narrower than `strict`.
  StatusOr<SetTolerance> LibraryTolerance(const InputSet& set, const SetTolerance& strict);
  // kLibrary: SetTolerance::library_worst_calibrated of every set, from the
  // library on kLibraryCalibrationSeeds fresh inputs of each.
  Status CalibrateLibraryWorst();
  Status TimeReferenceAndBaseline();
  // One timed run of the baseline on base_ with fresh inputs of `set`.
  StatusOr<double> TimeBaselineOnce(const InputSet& set, RunFailure* failure);

  // prepare.cc
  std::unique_ptr<PreparedPlan> Prepare(const CompileResult& compiled, const LaunchPlan& plan,
                                        Evaluation* evaluation, RunFailure* failure);
  StatusOr<std::unique_ptr<PreparedPlan>> PrepareTrusted(const KernelSpec& kernel,
                                                         const std::string& what);

  // correctness.cc
  // Checks the candidate on every input set; false with e filled on failure.
  bool CheckCorrectness(PreparedPlan& plan, const std::string& phase, Evaluation* e);
  // The reference on the vault's copy of (set, seed), then the candidate's
  // outputs in cand_ against it; `phase` names the step in messages.
  bool CheckOutputs(const InputSet& set, size_t set_index, uint64_t seed,
                    const std::string& phase, Evaluation* e);
  // The mismatch report of output `t` against `want` (worst element read back).
  Mismatch DescribeMismatch(const TensorSpec& spec, size_t t, const InputSet& set, const std::string& phase,
                            const Comparison& c, const SetTolerance& tol, CUdeviceptr want);
  // Half-precision outputs: true (and the evaluation's verdict set) when more
  // elements of output `t` differ from `want` than tol allows.
  StatusOr<bool> TooInexact(const TensorSpec& spec, size_t t, const InputSet& set, const std::string& phase,
                            const SetTolerance& tol, CUdeviceptr want, const GroupAtol& groups, Evaluation* e);
  bool Mismatched(const TensorSpec& spec, size_t t, const InputSet& set, const std::string& phase,
                  const Comparison& c, const SetTolerance& tol, CUdeviceptr want, Evaluation* e);

  // timing.cc
  void TimeCandidate(PreparedPlan& plan, Evaluation* e);

  // A fresh input seed for every generation, from secrets_: inputs never
  // repeat across candidates, checks, timed runs or re-checks, and no run's
  // inputs predict another's.
  uint64_t NextSeed() { return secrets_.Next(); }
  bool OverBudget(const Evaluation& e) const;

  Problem problem_;
  EvaluatorOptions options_;
  DeviceInfo device_;
  std::unique_ptr<Compiler> compiler_;
  std::unique_ptr<ThreadPool> compile_pool_;  // candidates' compiles
  std::mutex mutex_;  // one Evaluate at a time: one timing lane per GPU
  JudgeSecrets secrets_;  // input seeds and spot-check decisions

  // GPU side.
  std::unique_ptr<CudaContext> ctx_;
  const DriverApi* api_ = nullptr;
  Stream stream_;
  Event start_event_, end_event_;
  Module judge_module_;
  CUfunction fill_fn_ = nullptr, compare_fn_ = nullptr, diff_fn_ = nullptr, read_fn_ = nullptr,
             fma_fn_ = nullptr, mma_fn_ = nullptr, count_ne_fn_ = nullptr,
             wgmma_fn_ = nullptr,  // Hopper only
             group_atol_fn_ = nullptr, magnitude_fn_ = nullptr;
  DeviceBuffer results_;  // CompareResults, a histogram and scratch words
  DeviceBuffer magnitudes_;  // ks_magnitude_hist's counts and masses
  DeviceBuffer group_atol_;  // GroupTolerance's atols, one per row or column
  DeviceBuffer flush_;
  TruthVault vault_;
  TensorBuffers ref_, ref32_, scratch_;  // inside the vault
  TensorBuffers cand_;                   // guarded
  std::vector<GuardedBuffer> cand_owned_;
  TensorBuffers base_;
  std::vector<DeviceBuffer> base_owned_;
  std::unique_ptr<PreparedPlan> reference_, reference_fp32_;
  std::unique_ptr<LibraryBaseline> library_;
  std::vector<int64_t> elements_;  // per tensor
  std::vector<SetTolerance> tolerances_;
  std::optional<TimingStats> reference_timing_, baseline_timing_;
  // kLibrary: the widest tolerance the library gave one candidate's checks
  // (reset per candidate; said in its details).
  SetTolerance library_widest_;
  // kLibrary: the largest worst element of one candidate's checks (atols past
  // the relative bound) and its largest share of what its check allowed
  // (reset per candidate; said in its details).
  double candidate_worst_ = 0.0;
  double candidate_worst_share_ = 0.0;
  std::string baseline_name_;
  double watchdog_seconds_ = 2.0;
  double floor_ms_ = 0.0;
  std::string floor_path_;  // what the floor's arithmetic term assumes
  std::optional<DeviceInfo> measured_peaks_;  // set_measured_peaks
  bool broken_ = false;
  bool check_only_ = false;
  int context_resets_ = 0;
  bool hung_ = false;  // a kernel may still be running: never wait on the device again
  std::string broken_reason_;
  unsigned flush_value_ = 1;
  EvalClock::time_point candidate_start_;
  std::unique_ptr<DeviceOutputCapture> output_;  // null: stdout is left alone
};

}  // namespace ksearch::internal

#endif  // KSEARCH_EVAL_LOCAL_EVALUATOR_H_
