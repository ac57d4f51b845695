// Pieces shared by the built-in strategies: ranking of judged kernels, the
// summary's bookkeeping, observer fan-out, budgets, idea outcomes in words,
// and the small threading tools the parallel loop runs on.
#ifndef KSEARCH_SEARCH_SEARCH_UTIL_H_
#define KSEARCH_SEARCH_SEARCH_UTIL_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ksearch/generator.h"
#include "ksearch/searcher.h"

namespace ksearch::internal {

using Clock = std::chrono::steady_clock;

inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Median time in ms, or 0 when the evaluation was not timed.
double MedianMs(const Evaluation& evaluation);
// Registers per thread summed over the plan's kernels; INT64_MAX when unknown.
int64_t TotalRegisters(const Evaluation& evaluation);
// Local (stack) bytes summed over the kernels; INT64_MAX when unknown.
int64_t TotalLocalBytes(const Evaluation& evaluation);

// True when `a` ranks strictly before `b` as a kernel: timed before untimed;
// by median time; untimed by fewer registers, then fewer local bytes; finally
// by id (Earlier), so the order is total and deterministic. Both must be
// correct for the answer to mean "faster".
bool Faster(const HistoryEntry& a, const HistoryEntry& b);
// True when a and b count as equally fast: medians within `tie_fraction` of
// the smaller, or (untimed) the same registers and local bytes.
bool Tied(const HistoryEntry& a, const HistoryEntry& b, double tie_fraction);
// Deterministic order of candidates by provenance round, then id ("start"
// first; numbers inside ids compared as numbers: r1.s0.i2.b10 after .b9).
bool Earlier(const Candidate& a, const Candidate& b);

// Orders text with numbers inside compared as numbers ("r1.s2" < "r1.s10").
bool NaturalLess(std::string_view a, std::string_view b);

// Statuses that a repair attempt may fix: the kernel is rejected for what its
// text says (compile log, plan, outputs), not for a crash or a hang.
bool NeedsRepair(EvalStatus status);

// A mix of a seed with up to three coordinates (splitmix64), for the per-call
// seeds of generators.
uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0);

// The first line of `text` that mentions "error" (else the first non-empty
// line), cut to `max_bytes`.
std::string FirstErrorLine(std::string_view text, size_t max_bytes = 160);
// Why a candidate failed, in one short line: "compile_error (error: …)",
// "wrong_result (y on shifted: 12 of 4096 off, L2 2.1e-03 > 1.0e-06)".
std::string FailureReason(const Evaluation& evaluation);

// Writes the idea's outcome (text and best_speedup_over_parent) from the
// judged branches (repairs included) and the notes of its generator calls.
void SetIdeaOutcome(Idea* idea, const HistoryEntry* parent,
                    const std::vector<const HistoryEntry*>& branches, int branches_asked,
                    const std::vector<std::string>& notes);

// Calls every observer (each sees every event); true when one asked to stop.
class Observers {
 public:
  explicit Observers(const std::vector<SearchObserver*>& list) : list_(list) {}
  bool RoundStart(int round, const std::vector<std::string>& seed_ids);
  bool IdeaProposed(const Idea& idea);
  bool Evaluated(const Candidate& candidate, const Evaluation& evaluation);
  bool Revised(const Candidate& candidate, const Evaluation& evaluation);
  bool NewBest(const Candidate& candidate, const Evaluation& evaluation);
  bool RoundEnd(int round);

 private:
  const std::vector<SearchObserver*>& list_;
};

// Counts one judged candidate into the summary (candidates, correct,
// by_status) and updates the best. Returns true when `entry` became the new
// best. A kCancelled evaluation only enters by_status.
bool CountResult(SearchSummary* summary, const HistoryEntry& entry);

// The budget limit that `summary` and the elapsed time have reached, if any:
// candidates, tokens, cost, wall time, GPU time, target speedup (rounds are
// the strategies' own business).
std::optional<TerminationReason> BudgetReached(const SearchBudget& budget,
                                               const SearchSummary& summary,
                                               double elapsed_seconds);

// Sets `flag` when the user's cancel flag is set or the wall-time budget
// passes, from a thread of its own, so that blocking calls (an Evaluate, a
// generator waiting for a model) stop on time. `reason` records which.
class Watchdog {
 public:
  Watchdog(const std::atomic<bool>* user_cancel, double max_wall_seconds, Clock::time_point start,
           std::atomic<bool>* flag);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  // kInterrupted or kBudgetWallTime once the flag was set by this watchdog.
  std::optional<TerminationReason> reason() const;

 private:
  void Loop();
  const std::atomic<bool>* user_cancel_;
  double max_wall_seconds_;
  Clock::time_point start_;
  std::atomic<bool>* flag_;
  std::atomic<int> reason_{0};  // 0 none, 1 interrupted, 2 wall time
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

// A fixed set of threads running submitted closures in FIFO order. The
// destructor runs what is queued, then joins.
class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  void Submit(std::function<void()> task);

 private:
  void Loop();
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool done_ = false;
  std::vector<std::thread> threads_;
};

// Closures posted from any thread, run on the thread that calls RunFor (the
// searcher's own thread, which therefore owns all round state).
class Mailbox {
 public:
  void Post(std::function<void()> closure);
  // Runs everything posted; when nothing is, waits up to `timeout` for a
  // post first. Returns how many closures ran.
  int RunFor(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
};

}  // namespace ksearch::internal

#endif  // KSEARCH_SEARCH_SEARCH_UTIL_H_
