// Evaluator: compiles, checks and times candidates for one problem.
//
// Every candidate ends in exactly one Evaluation status; a failing candidate is
// data, never an error of the caller. The in-process evaluator (CreateLocal
// Evaluator) runs GPU work in the calling process: use it for trusted templates
// inside an application; generated kernels belong in isolated workers, where a
// crash or a hang cannot take the caller down.
//
//   ksearch::EvaluatorOptions options;
//   auto evaluator = ksearch::CreateLocalEvaluator(problem, options);
//   if (!evaluator.ok()) return evaluator.status();   // e.g. no CUDA driver
//   std::vector<ksearch::Evaluation> results = (*evaluator)->Evaluate(candidates);
//
// Thread safety: an Evaluator may be called from any thread, one call at a time
// per object (calls are serialized internally: one timing lane per GPU).
#ifndef KSEARCH_EVALUATOR_H_
#define KSEARCH_EVALUATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ksearch/candidate.h"
#include "ksearch/evaluation.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch {

struct EvaluatorOptions {
  // CUDA device ordinal to run on.
  int device_ordinal = 0;
  // Compile target such as "sm_90". Empty: the device's compute capability.
  // Required when compile_only is set.
  std::string arch;
  // Compile, report resources and check plans only; no GPU is touched. The
  // evaluation lists the checks that did not run.
  bool compile_only = false;
  // NVRTC time limit per compile; a compile past it is kTimeout.
  double compile_timeout_seconds = 60.0;
  // Compile logs longer than this are truncated with a note.
  int64_t max_log_bytes = 64 * 1024;
  // Candidate sources compile in a confined helper process, ksearch-compile
  // (docs/evaluation.md, "What is confined and how"). Where this machine
  // offers no confinement (no Landlock), creating an evaluator fails with the
  // reason, unless this is set: then candidates compile unconfined, in
  // process, and every such evaluation's message says so.
  bool allow_unsandboxed_compile = false;
  // Address-space limit (RLIMIT_AS) of the compile helper.
  int64_t compile_memory_limit_bytes = int64_t{4} << 30;
  // On-disk compile cache folder. Empty: $KSEARCH_CACHE_DIR, else
  // $XDG_CACHE_HOME/ksearch, else ~/.cache/ksearch. "off" (here or as
  // $KSEARCH_CACHE_DIR) disables it.
  std::string compile_cache_dir;
  // 0 (the default): every input seed and every spot-check decision is
  // drawn from the operating system's randomness when it is used, so that
  // nothing a kernel can observe predicts the next run's inputs or whether
  // it will be checked (docs/evaluation.md, "Secrets"). Nonzero: a fixed
  // sequence derived from this value, for tests and replays that need the
  // same inputs again; a kernel that knows it can predict its inputs, so a
  // figure obtained with it proves nothing against an adversary.
  uint64_t replay_input_seed = 0;
  // Correctness trials per input set of the problem.
  int trials_per_input_set = 1;
  // Warm-up before timing, in milliseconds of kernel time (at least one
  // run), bounded by max_warmup_seconds of wall time; the warm-up is not
  // charged to max_timing_seconds.
  double warmup_ms = 20.0;
  double max_warmup_seconds = 1.0;
  // Repetitions continue until the 95% CI of the median is within
  // ±target_ci_fraction of it, or until the caps below.
  double target_ci_fraction = 0.01;
  int min_repetitions = 10;
  int max_repetitions = 500;
  // Cap on the wall time of one candidate's timed runs, each with its
  // preparation (fresh inputs, poison, L2 flush); the checks of timed runs
  // and the interleaved baseline runs are the judge's time and are not
  // charged. A candidate is judged only on at least min_repetitions timed
  // runs: one whose runs do not fit (slower than about 0.2 s a run at the
  // defaults) is kTimeout, with the counts in its message.
  double max_timing_seconds = 2.0;
  // Cap on the GPU time of one candidate's checks (before timing): a kernel
  // so slow that its checks would take longer is kTimeout after a few runs.
  double max_check_seconds = 10.0;
  // Which timed runs have their outputs checked, decided after each run
  // from the operating system's randomness (the kernel cannot know): the
  // first timing_checked_runs runs all are, the i-th run after them with
  // probability max(timing_spot_check_probability, timing_checked_runs / i),
  // and the last run always. A kernel that skips its work on more than half
  // of n runs (what moving the median takes) escapes every check with
  // probability at most exp(-timing_checked_runs / 2) (docs/evaluation.md,
  // "Timing").
  double timing_spot_check_probability = 0.125;
  int timing_checked_runs = 24;
  // Flush L2 before every timed repetition.
  bool flush_l2 = true;
  // Time the problem's baseline interleaved with each candidate.
  bool time_baseline = true;
  // Time-out per candidate run (one plan execution) is
  // max(watchdog_floor_seconds, watchdog_reference_multiple × reference time).
  double watchdog_floor_seconds = 2.0;
  double watchdog_reference_multiple = 100.0;
  // What kernels print with device printf: the device's buffer for it per
  // launch, and how much of it an evaluation keeps (Evaluation::device_log,
  // truncated with a note). While a candidate is judged, file descriptor 1
  // of the process is redirected to capture it, so that it never reaches
  // the caller's output; false leaves stdout alone (the output then goes
  // wherever stdout goes).
  int64_t device_printf_buffer_bytes = 256 * 1024;
  int64_t max_device_output_bytes = 16 * 1024;
  bool capture_device_output = true;
  // A median time below floor × suspicious_floor_fraction is kSuspiciousSpeed.
  // The floor comes from peaks measured at start with ksearch's own kernels;
  // the fraction allows for a kernel that reaches those peaks more closely
  // than the measuring kernels do.
  double suspicious_floor_fraction = 0.9;
};

class Evaluator {
 public:
  virtual ~Evaluator() = default;

  // Judges each candidate; returns one Evaluation per candidate, in order. If
  // `cancel` becomes true, candidates not yet started get kCancelled. Blocks
  // until all are judged.
  virtual std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                           const std::atomic<bool>* cancel = nullptr) = 0;

  // The problem this evaluator judges against; outlives the evaluator's calls.
  virtual const Problem& problem() const = 0;
  // The device figures are attached to (name and arch only when compile-only).
  virtual const DeviceInfo& device() const = 0;
  // Times of the reference and baseline measured when the evaluator started
  // (nullopt when compile-only or not timed).
  virtual std::optional<TimingStats> reference_timing() const = 0;
  virtual std::optional<TimingStats> baseline_timing() const = 0;
  // Whether the judge itself still works. Not OK once it cannot judge any
  // further candidate (its context is lost for good, no worker is left, one
  // of its own steps failed): the evaluations it returned meanwhile are
  // kCancelled, and a search stops with TerminationReason::kFailed and this
  // status instead of charging candidates for it. Thread safety: callable
  // from any thread.
  virtual Status health() const { return Status::Ok(); }
};

// Creates the in-process evaluator. For a problem with shape cases
// (Problem::shapes) it judges every candidate at each case, each calibrated
// at its own dims (docs/evaluation.md, "Shape sets"). Errors: kFailedPrecondition when no CUDA
// driver or no device is present (message says so in one line, e.g. "no CUDA
// driver found (libcuda.so.1: cannot open shared object file)"), kInvalidArgument
// for a bad problem or options, kInternal when the reference itself fails.
StatusOr<std::unique_ptr<Evaluator>> CreateLocalEvaluator(const Problem& problem,
                                                          const EvaluatorOptions& options);

// True when libcuda.so.1 loads and reports at least one device; `why` (if not
// null) receives the one-line reason otherwise.
bool CudaDriverAvailable(std::string* why = nullptr);

// True when candidate compiles can be confined on this machine (Landlock and
// seccomp; docs/evaluation.md, "What is confined and how"); `why` (if not
// null) receives the one-line reason otherwise.
bool CompileConfinementAvailable(std::string* why = nullptr);

}  // namespace ksearch

#endif  // KSEARCH_EVALUATOR_H_
