// CachingEvaluator: an Evaluator that answers what a run already judged from
// the Store and writes each new evaluation there before the search sees it
// (RunSession::WrapEvaluator makes one).
#ifndef KSEARCH_CACHING_EVALUATOR_H_
#define KSEARCH_CACHING_EVALUATOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ksearch/evaluation.h"
#include "ksearch/evaluator.h"
#include "ksearch/generator.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"
#include "ksearch/store.h"

namespace ksearch {

class RunSession;

// An Evaluator decorator for resumable runs. Candidates whose content hash
// already has an evaluation in the run (and that was not kCancelled) are
// answered from it, with the candidate id of the request; the rest go to the
// inner evaluator in chunks of `chunk_size`, and each chunk's evaluations are
// written to the store (with their candidates) as soon as the chunk returns,
// before the searcher sees them. A kill therefore loses at most the chunk in
// progress.
//
// Thread safety: as Evaluator (one call at a time). Borrows the inner
// evaluator and the store; both must outlive it.
class CachingEvaluator final : public Evaluator {
 public:
  struct Options {
    // Candidates handed to the inner evaluator per call. 1 loses nothing that
    // finished; the in-process evaluator then compiles one candidate at a time
    // (GPU timing is one at a time anyway). Raise it for compile-only runs or
    // for an evaluator that spreads a batch over several GPUs. 0: the whole
    // batch in one call.
    int chunk_size = 1;
  };

  // `known`: the run's evaluations so far (RunHistory::entries). Errors:
  // kFailedPrecondition when the inner evaluator's problem is not the run's
  // (fingerprints differ) or its device is not the one the run was measured on
  // (name or arch differ): stored and new figures would not be comparable.
  [[nodiscard]] static StatusOr<std::unique_ptr<CachingEvaluator>> Create(
      Evaluator& inner, Store& store, const RunInfo& run, const std::vector<HistoryEntry>& known,
      const Options& options);
  // The same, owning `inner`.
  [[nodiscard]] static StatusOr<std::unique_ptr<CachingEvaluator>> Create(
      std::unique_ptr<Evaluator> inner, Store& store, const RunInfo& run,
      const std::vector<HistoryEntry>& known, const Options& options);
  ~CachingEvaluator() override;

  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel = nullptr) override;
  const Problem& problem() const override;
  const DeviceInfo& device() const override;
  std::optional<TimingStats> reference_timing() const override;
  std::optional<TimingStats> baseline_timing() const override;

  // Candidates answered from the store, and judged by the inner evaluator.
  int64_t reused() const;
  int64_t evaluated() const;
  // OK, or the first error writing an evaluation (the evaluation itself is
  // still returned to the caller).
  Status status() const;

 private:
  friend class RunSession;
  struct State;
  explicit CachingEvaluator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace ksearch

#endif  // KSEARCH_CACHING_EVALUATOR_H_
