// WorkerPool: an Evaluator whose GPU work runs in isolated `ksearch-worker`
// processes, one per GPU, so that a kernel which crashes the CUDA context,
// spins forever or takes its process down never stops the caller.
//
// The calling process (the orchestrator) needs no GPU and never initializes
// CUDA. It compiles candidates with NVRTC on a pool of CPU threads and ships
// the cubins to the workers, so GPUs only check and time (one timing lane per
// GPU). Each worker runs the in-process judge (CreateLocalEvaluator) on its
// GPU and answers over a local socket (docs/workers.md has the protocol).
//
// Faults, and what the caller sees:
//   - a sticky CUDA error (illegal address, __trap()): the candidate is
//     kCrashed with the CUDA error's name; that worker exits and is replaced.
//   - a kernel past the launch watchdog (max(watchdog_floor_seconds,
//     watchdog_reference_multiple x reference time), EvaluatorOptions): the
//     candidate is kTimeout; the worker exits and is replaced.
//   - a worker silent past the per-evaluation watchdog (a hang the in-process
//     watchdog did not catch): the orchestrator kills it; kTimeout.
//   - a worker that dies (SIGSEGV, abort, SIGKILL from outside, the OOM
//     killer): it is replaced and the candidate it was judging is judged again
//     on the new worker, up to retries_after_worker_death times; past that it
//     is kCrashed with how the process ended.
// In every case the other candidates the worker held go back to the queue:
// each candidate gets exactly one Evaluation, its own.
//
//   ksearch::WorkerPoolOptions options;
//   options.gpus = {0, 1};                     // default: every visible GPU
//   auto pool = ksearch::CreateWorkerPoolEvaluator(problem, options);
//   if (!pool.ok()) return pool.status();      // e.g. "worker binary missing: …"
//   std::unique_ptr<ksearch::Evaluator> evaluator = std::move(*pool);
//   std::vector<ksearch::Evaluation> results = evaluator->Evaluate(candidates);
//
// Thread safety: Evaluate() may be called from any thread, one call at a time
// per pool (calls are serialized); stats() and worker_pids() from any thread
// at any time. Distinct pools are independent.
//
// Processes: workers are started with posix_spawn (never a bare fork), in
// their own process group (a terminal's Ctrl-C reaches only the caller), and
// stopped by the pool's destructor. A worker whose caller dies exits when it
// finds its socket closed.
#ifndef KSEARCH_WORKER_POOL_H_
#define KSEARCH_WORKER_POOL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ksearch/evaluator.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch {

struct WorkerPoolOptions {
  // How each worker judges: the in-process evaluator's options (seed,
  // repetitions, launch watchdog, compile cache, …). device_ordinal is
  // replaced by each entry of `gpus`; compile_only is not supported (use
  // CreateLocalEvaluator, which needs no GPU for it). compile_timeout_seconds,
  // max_log_bytes and compile_cache_dir also apply to the orchestrator's
  // compiles.
  EvaluatorOptions evaluator;
  // CUDA device ordinals (as the workers see them, after CUDA_VISIBLE_DEVICES)
  // to run one worker on each. Empty: every visible GPU.
  std::vector<int> gpus;
  // The ksearch-worker executable. Empty: $KSEARCH_WORKER, else
  // `ksearch-worker` beside the running executable, beside libksearch or in
  // its ../bin, then the install and build locations known at build time.
  std::string worker_binary;
  // NVRTC threads in the orchestrator. 0: one per hardware thread (at most 32).
  int compile_threads = 0;
  // Ship sources instead of cubins and compile in the workers (with the same
  // disk cache). Off by default: GPUs should only check and time.
  bool compile_in_workers = false;
  // Candidates a worker holds beyond the one it is judging, so that the next
  // one is already on its side of the socket when it finishes. 0 or more.
  int prefetch_per_worker = 1;
  // Per-evaluation watchdog in the orchestrator, from the worker's "started"
  // to its result. 0: derived as max(evaluation_timeout_floor_seconds,
  // 10 x the launch watchdog + 2 x evaluator.max_timing_seconds +
  // evaluator.max_warmup_seconds), the launch
  // watchdog being max(watchdog_floor_seconds, watchdog_reference_multiple x
  // the reference's median time). A worker past it is killed; kTimeout.
  double evaluation_timeout_seconds = 0.0;
  double evaluation_timeout_floor_seconds = 30.0;
  // Time a worker may take to start: process start, CUDA initialization,
  // judge kernels, tolerance and reference measurement.
  double worker_start_timeout_seconds = 120.0;
  // How many times a candidate is judged again after its worker died while
  // holding it (a SIGKILL from outside is not the candidate's fault; a
  // candidate that kills every worker is kCrashed after this many).
  int retries_after_worker_death = 1;
  // Failed starts in a row, on one GPU, after which that GPU is left out
  // until the next Evaluate() call.
  int max_start_failures = 3;
};

// Figures since the pool was created; summed over candidates (divide by
// `candidates` for means). The benchmark's breakdown comes from here.
struct WorkerPoolStats {
  int64_t candidates = 0;        // evaluations returned (all statuses)
  int64_t compiles = 0;          // orchestrator compiles, cache hits included
  int64_t judged = 0;            // evaluations that came back from a worker
  int64_t worker_starts = 0;     // processes started, the first ones included
  int64_t worker_exits = 0;      // processes that ended other than by shutdown
  int64_t watchdog_kills = 0;    // workers killed by the per-evaluation watchdog
  int64_t requeued = 0;          // candidates sent again after their worker ended
  double compile_ms = 0.0;       // orchestrator NVRTC wall time (cache hits are short)
  double queue_wait_ms = 0.0;    // compiled -> started on a worker (judged only)
  double check_ms = 0.0;         // correctness checks, as the workers report them
  double timing_ms = 0.0;        // timing, as the workers report it
  double worker_start_ms = 0.0;  // spawn -> ready, summed over starts
};

class WorkerPoolEvaluator : public Evaluator {
 public:
  // See Evaluator::Evaluate. Blocks until every candidate has its Evaluation.
  // If `cancel` becomes true, candidates not yet sent to a worker get
  // kCancelled; those already sent finish. When no worker can be started on
  // any GPU (the binary was removed, the GPUs failed), the candidates left get
  // kCancelled with the reason, and the next call tries to start workers again.
  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel = nullptr) override = 0;

  virtual WorkerPoolStats stats() const = 0;
  // Process ids of the live workers, in `gpus` order (0 for a GPU whose worker
  // is being replaced or was left out). For diagnostics and fault tests.
  virtual std::vector<int> worker_pids() const = 0;
  // The GPU ordinals the pool runs on.
  virtual std::vector<int> gpus() const = 0;
};

// Starts one worker per GPU and waits until each is ready (has measured the
// reference). Errors:
//   kNotFound           "worker binary missing: …" naming the places searched
//                       (or the explicit path) and how to point at one;
//   kFailedPrecondition from a worker: no CUDA driver, no such GPU (the text
//                       says so); a worker speaking another protocol version;
//   kInvalidArgument    bad problem or options (compile_only, a negative GPU,
//                       GPUs of different archs);
//   kDeadlineExceeded   a worker did not become ready in time;
//   kUnavailable        a worker ended while starting (the text says how:
//                       "killed by signal 6 (SIGABRT)");
//   kDataLoss           a worker wrote something that is not a frame;
//   kInternal           the reference failed on the GPU.
// Errors that come from a worker keep the code the worker reported and are
// prefixed "starting ksearch-worker for GPU N: ".
StatusOr<std::unique_ptr<WorkerPoolEvaluator>> CreateWorkerPoolEvaluator(
    const Problem& problem, const WorkerPoolOptions& options);

// Where the pool would look for the worker binary and what it found: the path,
// or kNotFound listing the places searched. `explicit_path` as in
// WorkerPoolOptions::worker_binary.
StatusOr<std::string> FindWorkerBinary(const std::string& explicit_path = "");

// The body of the ksearch-worker executable: an application shipped as one
// binary may call it from main() when started as a worker. Returns the
// process exit code. Not for use inside a process that does anything else.
int WorkerProcessMain(int argc, char** argv);

}  // namespace ksearch

#endif  // KSEARCH_WORKER_POOL_H_
