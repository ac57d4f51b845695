// RunSession: one session of a recorded search, new (BeginRun) or resumed
// (ResumeRun): it records the search into a Store and hands out the
// evaluator and LLM client that serve what the run already has.
//
// Recording and resuming a search (what `ksearch run --db/--resume` does):
//
//   auto store = ksearch::Store::Open("ksearch.db");
//   if (!store.ok()) return store.status();
//   ksearch::RunSettings settings;
//   settings.strategy = searcher->name();
//   settings.options_json = ksearch::ArgvToOptionsJson(argv);  // to re-run identically
//   settings.seed = options.seed;
//   settings.device = evaluator->device();
//   auto session = ksearch::BeginRun(**store, problem, settings);
//   //   or: auto session = ksearch::ResumeRun(**store, run_id);
//   auto evaluator = (*session)->WrapEvaluator(*inner_evaluator);  // serves stored results
//   auto llm = (*session)->WrapLlmClient(*http_client);              // serves stored replies
//   context.evaluator = evaluator->get();
//   context.observers.push_back((*session)->observer());
//   auto summary = searcher->Run(context);
//   Status finished = (*session)->Finish(summary);
//
// A resume re-runs the same strategy with the same seed and options: the
// wrapped evaluator answers candidates already judged in the run from the
// store (by problem fingerprint and Candidate::ContentHash), the wrapped LLM
// client answers requests already answered in the run from the stored
// exchanges (by RequestHash, in the order they were issued), and only the rest
// costs GPU time or tokens.
//
// Thread safety: see RunSession.
#ifndef KSEARCH_RUN_SESSION_H_
#define KSEARCH_RUN_SESSION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/evaluator.h"
#include "ksearch/llm_client.h"
#include "ksearch/problem.h"
#include "ksearch/run_recorder.h"
#include "ksearch/searcher.h"
#include "ksearch/status.h"
#include "ksearch/store.h"

namespace ksearch {

namespace internal {
struct SessionCounters;
}  // namespace internal

// What BeginRun records about a new run.
struct RunSettings {
  // Searcher::name() of the strategy ("tune", "branch", …).
  std::string strategy;
  // Everything the caller needs to re-run the search identically on resume
  // (its flags: budgets, k/n/b, batch size, model, evaluator options), as a
  // JSON object. Stored verbatim; the store never reads it.
  std::string options_json = "{}";
  // SearchOptions::seed.
  uint64_t seed = 1;
  // Evaluator::device() of the evaluator the run uses.
  DeviceInfo device;
};

struct SessionOptions {
  // CachingEvaluator::Options::chunk_size.
  int evaluation_chunk_size = 1;
  // Stop the search when a record cannot be written (disk full, …).
  bool stop_on_store_error = true;
  // ResumeRun refuses a run whose status is kRunning while its process is
  // still alive on this host (two sessions would interleave). Set to resume
  // anyway (the other process is known to be gone, e.g. on another host).
  bool take_over_running = false;
  // ResumeRun refuses a kCompleted run unless this is set (to extend a
  // finished run with a larger budget).
  bool reopen_completed = false;
};

// One session of a recorded run: a new run (BeginRun) or a resumed one
// (ResumeRun). Owns the RunRecorder and hands out the decorators.
//
// Thread safety: create the wrappers before the search starts; observer() and
// the wrappers are then used by the searcher's threads as their own contracts
// say. Borrows the store, which must outlive the session and its wrappers.
class RunSession {
 public:
  ~RunSession();
  RunSession(const RunSession&) = delete;
  RunSession& operator=(const RunSession&) = delete;

  const RunInfo& run() const { return run_; }
  int64_t run_id() const { return run_.id; }
  // True for ResumeRun.
  bool resumed() const { return resumed_; }
  // The run's problem, rebuilt from the stored JSON. Errors: kDataLoss when
  // the stored problem no longer parses.
  [[nodiscard]] StatusOr<Problem> problem() const;
  // What was recorded before this session (empty for a new run).
  const RunHistory& history() const { return history_; }

  // The recorder: add it to SearchContext::observers.
  SearchObserver* observer() { return &recorder_; }
  // Wraps the evaluator the search uses (see CachingEvaluator). Errors:
  // kFailedPrecondition for a different problem or device.
  [[nodiscard]] StatusOr<std::unique_ptr<Evaluator>> WrapEvaluator(Evaluator& inner);
  // As WrapEvaluator, for an evaluator made only when a candidate must
  // actually be judged: `make` runs then, once. A resumed run thus replays
  // what the store holds, and asks the model for what follows, on a machine
  // without a GPU. Until `make` has run, device() is the device the run was
  // measured on (its stored evaluations carry it, so prompts read as they
  // would on that device). When `make` fails, or makes an evaluator on
  // another device, `on_unavailable` (may be empty) runs once with the
  // reason, on the evaluating thread, before that Evaluate returns; the
  // candidates of that call and of every later one come back kCancelled
  // with the reason, so a caller that stops the search there leaves the run
  // resumable. Errors: kFailedPrecondition when the run never judged a
  // candidate (no device is recorded to stand in).
  using EvaluatorFactory = std::function<StatusOr<std::unique_ptr<Evaluator>>()>;
  [[nodiscard]] StatusOr<std::unique_ptr<Evaluator>> WrapDeferredEvaluator(
      EvaluatorFactory make, std::function<void(const Status&)> on_unavailable);
  // Wraps the live LLM client the generators use (see ResumingLlmClient).
  // Every live exchange is recorded in the run. Call it once per session and
  // give the wrapper to every generator: each wrapper serves the stored
  // replies once.
  [[nodiscard]] StatusOr<std::unique_ptr<LlmClient>> WrapLlmClient(LlmClient& live);

  // Evaluations and LLM replies served from the store so far.
  int64_t reused_evaluations() const;
  int64_t reused_replies() const;
  // OK, or the first error writing a record.
  Status status() const;

  // Records how the run ended (RunEnd::FromSummary). When a record could not
  // be written during the run, the run is marked kFailed with that error and
  // the error is returned.
  [[nodiscard]] Status Finish(const StatusOr<SearchSummary>& summary);

 private:
  friend StatusOr<std::unique_ptr<RunSession>> BeginRun(Store&, const Problem&, const RunSettings&,
                                                        const SessionOptions&);
  friend StatusOr<std::unique_ptr<RunSession>> ResumeRun(Store&, int64_t, const SessionOptions&);
  RunSession(Store& store, RunInfo run, RunHistory history, bool resumed, SessionOptions options);

  Store& store_;
  RunInfo run_;
  RunHistory history_;
  bool resumed_;
  SessionOptions options_;
  RunRecorder recorder_;
  // Shared with the wrappers, which the caller owns and may destroy first.
  std::shared_ptr<internal::SessionCounters> counters_;
};

// Creates a run and a session that records it.
[[nodiscard]] StatusOr<std::unique_ptr<RunSession>> BeginRun(Store& store, const Problem& problem,
                                                             const RunSettings& settings,
                                                             const SessionOptions& options = {});
// Reopens run `run_id` for a resume: loads what it recorded and marks it
// running again (check and claim in one transaction: Store::ReopenRun).
// Errors: kNotFound; kFailedPrecondition when the run is kCompleted ("run 3
// already completed"; see SessionOptions::reopen_completed); kAborted when it
// is still running in a live process (see SessionOptions::take_over_running).
[[nodiscard]] StatusOr<std::unique_ptr<RunSession>> ResumeRun(Store& store, int64_t run_id,
                                                              const SessionOptions& options = {});

// RunSettings::options_json for a search started from a command line: the
// arguments as {"argv": ["softmax", "--rounds", "6", …]}, which a resume parses
// again with the same flags. ArgvFromOptionsJson errors: kInvalidArgument
// (not that shape, named in the message).
std::string ArgvToOptionsJson(const std::vector<std::string>& argv);
[[nodiscard]] StatusOr<std::vector<std::string>> ArgvFromOptionsJson(std::string_view options_json);

}  // namespace ksearch

#endif  // KSEARCH_RUN_SESSION_H_
