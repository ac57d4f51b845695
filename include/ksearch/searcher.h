// Searcher: the search loop and its strategy, its budgets, stop conditions and
// observers.
//
// Built-in strategies (docs/search.md): ParallelBranchSearch
// (ideas in natural language, parallel branches, the best as next seeds),
// SequentialRefineSearch (one candidate at a time; the baseline the method is
// compared with) and ParameterTuneSearch (offline tuning of a template's
// parameters). A user strategy derives from Searcher and uses the context's
// evaluator, generators and observers (examples/custom_strategy).
//
// Thread safety: one Run() at a time per Searcher. Observer callbacks run on
// the searcher's threads, one at a time (the searcher serializes them).
#ifndef KSEARCH_SEARCHER_H_
#define KSEARCH_SEARCHER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/evaluation.h"
#include "ksearch/evaluator.h"
#include "ksearch/generator.h"
#include "ksearch/idea.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch {

// Every limit is off when zero; limits compose: a run stops at the first one
// reached. Rounds and candidates are checked before work is started (a round
// is not begun past max_rounds; no candidate is judged past max_candidates);
// the others are checked continuously, and work in flight when one is reached
// is cancelled (wall time, GPU time, target) or, for tokens and money, the
// requests in flight are cancelled while what was already written is still
// judged. docs/search.md has the details per strategy.
struct SearchBudget {
  int max_rounds = 0;             // rounds (SequentialRefineSearch: steps)
  int64_t max_candidates = 0;     // candidates judged, duplicates included
  int64_t max_tokens = 0;         // LLM input + output tokens
  double max_cost_usd = 0.0;      // LLM spending, from the price table
  double max_wall_seconds = 0.0;  // since Run() began
  double max_gpu_seconds = 0.0;   // time spent inside Evaluator::Evaluate
  double target_speedup = 0.0;    // stop once the best beats the baseline by this
};

struct SearchOptions {
  SearchBudget budget;
  int seeds = 4;       // k: top correct kernels carried into the next round
  int ideas = 4;       // n: ideas per seed per round
  int branches = 4;    // b: implementations per idea
  // Ideas are spread across these categories: idea j of seed s in round r is
  // asked for in categories[(r·k·n + s·n + j) mod size], so every category
  // comes up as the rounds go by. Empty: all six.
  std::vector<IdeaCategory> categories = {kAllIdeaCategories.begin(), kAllIdeaCategories.end()};
  // Give a branch that fails to compile or is wrong one repair attempt with its
  // compile log or mismatch report.
  bool repair = false;
  // Seed for every random choice; same seed + ReplayLlmClient = same tree.
  uint64_t seed = 1;
};

enum class ObserverAction { kContinue, kStop };

// Receives search events. Default implementations do nothing and continue.
// kStop asks the search to stop gracefully (like SIGINT).
class SearchObserver {
 public:
  virtual ~SearchObserver() = default;
  virtual ObserverAction OnRoundStart(int /*round*/, const std::vector<std::string>& /*seed_ids*/) {
    return ObserverAction::kContinue;
  }
  virtual ObserverAction OnIdea(const Idea& /*idea*/) { return ObserverAction::kContinue; }
  virtual ObserverAction OnCandidateEvaluated(const Candidate& /*candidate*/,
                                              const Evaluation& /*evaluation*/) {
    return ObserverAction::kContinue;
  }
  virtual ObserverAction OnNewBest(const Candidate& /*candidate*/,
                                   const Evaluation& /*evaluation*/) {
    return ObserverAction::kContinue;
  }
  // At the end of a round, for an evaluation already reported whose text the
  // searcher has since made canonical (ParallelBranchSearch: a duplicate
  // names the earliest candidate with its content by id, whatever order they
  // arrived in). Recorders should store the new text; counters should not
  // count it again.
  virtual ObserverAction OnEvaluationRevised(const Candidate& /*candidate*/,
                                             const Evaluation& /*evaluation*/) {
    return ObserverAction::kContinue;
  }
  virtual ObserverAction OnRoundEnd(int /*round*/) { return ObserverAction::kContinue; }
};

enum class TerminationReason {
  kCompleted,        // the strategy ran out of work (all rounds done)
  kBudgetRounds,
  kBudgetCandidates,
  kBudgetTokens,
  kBudgetCost,
  kBudgetWallTime,
  kBudgetGpuTime,
  kTargetReached,
  kStoppedByObserver,
  kInterrupted,      // SIGINT or the cancel flag
  kFailed,           // a generator or the evaluator failed (see Summary::error)
};
std::string_view ToString(TerminationReason reason);

struct SearchSummary {
  std::string strategy;
  TerminationReason termination = TerminationReason::kCompleted;
  Status error;                      // set when termination == kFailed
  int rounds = 0;
  int64_t ideas = 0;
  int64_t candidates = 0;
  int64_t correct = 0;
  std::map<std::string, int64_t> by_status;  // "wrong_result" → 12
  std::optional<HistoryEntry> best;  // fastest correct candidate
  std::optional<HistoryEntry> start; // the starting kernel's evaluation
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0.0;
  double wall_seconds = 0.0;
  double gpu_seconds = 0.0;
  int64_t repairs = 0;               // repair attempts requested
  // The run's tree: every idea with its outcome and every judged candidate
  // (provenance links each to its parent and idea), in a deterministic order:
  // by round, then by id within a round.
  SearchHistory history;
  // What went wrong without stopping the search, one line each: malformed
  // replies, failed requests, branches skipped ("r1.s0.i2 branch 3: reply has
  // no ```json block").
  std::vector<std::string> notes;

  // One line: strategy, termination, best time and speedup, counts.
  std::string BriefReport() const;
  // Several lines: the above plus status counts, tokens, cost, repairs, the
  // first 20 notes, the starting and best kernels' evaluation reports.
  std::string FullReport() const;
};

// Everything a strategy works with; borrowed, must outlive Run().
struct SearchContext {
  const Problem* problem = nullptr;
  Evaluator* evaluator = nullptr;
  IdeaGenerator* ideas = nullptr;      // may be null for ParameterTuneSearch
  Brancher* brancher = nullptr;        // may be null for ParameterTuneSearch
  std::vector<SearchObserver*> observers;
  const std::atomic<bool>* cancel = nullptr;  // set to stop gracefully
};

class Searcher {
 public:
  virtual ~Searcher() = default;
  // Runs the search to a stop condition. A failed candidate never fails the
  // run; errors are reserved for a context that cannot work (no evaluator,
  // no generator for a strategy that needs one): kInvalidArgument.
  virtual StatusOr<SearchSummary> Run(SearchContext& context) = 0;
  virtual std::string name() const = 0;
};

}  // namespace ksearch

#endif  // KSEARCH_SEARCHER_H_
