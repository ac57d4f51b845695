// RunRecorder: the SearchObserver that writes a search into a Store as it
// runs (RunSession owns one; use it alone to record into a run you manage).
#ifndef KSEARCH_RUN_RECORDER_H_
#define KSEARCH_RUN_RECORDER_H_

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "ksearch/candidate.h"
#include "ksearch/evaluation.h"
#include "ksearch/idea.h"
#include "ksearch/searcher.h"
#include "ksearch/status.h"
#include "ksearch/store.h"

namespace ksearch {

// Writes every round, idea, candidate and evaluation of a search to the store
// as the searcher reports it, each in its own transaction. A write that fails
// (disk full) is kept in status() and, with stop_on_error, stops the search
// (kStop) rather than letting it run on unrecorded.
//
// Thread safety: the searcher serializes observer calls; status() may be read
// from any thread. Borrows the store, which must outlive it.
class RunRecorder final : public SearchObserver {
 public:
  RunRecorder(Store& store, int64_t run_id, bool stop_on_error = true);

  ObserverAction OnRoundStart(int round, const std::vector<std::string>& seed_ids) override;
  ObserverAction OnIdea(const Idea& idea) override;
  ObserverAction OnCandidateEvaluated(const Candidate& candidate, const Evaluation& evaluation) override;
  ObserverAction OnNewBest(const Candidate& candidate, const Evaluation& evaluation) override;
  // Stores the canonical text (the same upsert).
  ObserverAction OnEvaluationRevised(const Candidate& candidate, const Evaluation& evaluation) override;
  ObserverAction OnRoundEnd(int round) override;

  // OK, or the first write error.
  Status status() const;

 private:
  ObserverAction Check(Status status);
  Store& store_;
  int64_t run_id_;
  bool stop_on_error_;
  mutable std::mutex mutex_;
  Status status_;
};

}  // namespace ksearch

#endif  // KSEARCH_RUN_RECORDER_H_
