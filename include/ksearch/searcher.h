// Searcher: the search loop and its strategy, its budgets, stop conditions and
// observers.
//
// Built-in strategies (docs/search.md): ParallelBranchSearch
// (ideas in natural language, parallel branches, the best as next seeds),
// SequentialRefineSearch (one candidate at a time; the baseline the method is
// compared with) and ParameterTuneSearch (offline tuning of a template's
// parameters). All three are written on SearchRun, the bookkeeping of one
// run (history, summary, observers, budgets, duplicates, ranking, idea
// outcomes, the stop flags); a strategy of your own derives from Searcher and
// is written on it too, with the same budgets and stops as the built-ins
// (docs/search.md, examples/custom_strategy):
//
//   StatusOr<SearchSummary> MyStrategy::Run(SearchContext& context) {
//     SearchRun run(context, budget_, name());
//     if (run.BeginRound(0, {"start"})) {
//       auto judged = run.Evaluate({context.problem->start.ToCandidate("start", "start")});
//       if (!judged.empty()) run.summary().start = *judged.front();
//       run.EndRound(0);
//     }
//     for (int round = 1; run.MayStartRound(round); ++round) {
//       if (!run.BeginRound(round, seed_ids)) break;
//       … ask context.ideas / context.brancher (cancel: run.generation_cancel(),
//         spending: run.spending()), run.AddUsage(result), run.ProposeIdea(idea) …
//       for (const HistoryEntry* e : run.Evaluate(std::move(candidates))) …
//       … SearchRun::SetIdeaOutcome(&idea, parent, branches, asked, notes);
//         run.summary().history.ideas.push_back(idea) …
//       run.EndRound(round);
//     }
//     return run.Finish();
//   }
//
// Thread safety: one Run() at a time per Searcher. Observer callbacks run on
// the searcher's threads, one at a time (the searcher serializes them).
#ifndef KSEARCH_SEARCHER_H_
#define KSEARCH_SEARCHER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
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
// is not begun past max_rounds; no candidate is judged past max_candidates).
// Tokens and money are checked before each model request is sent
// (SpendingGate: a request is sent only when its prompt, estimated, plus its
// maximum output fits in what is left); the run stops at the first request
// that does not fit, and the requests in flight then finish, are counted and
// their kernels judged. The others are checked continuously, and work in
// flight when one is reached is cancelled (wall time, GPU time, target).
// docs/search.md has the details per strategy.
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
  // A problem with dispatch buckets (Problem::dispatch): per bucket, the
  // fastest candidate correct at every shape case of that bucket, with its
  // evaluation restricted to the bucket (timing: the bucket's weighted
  // time); nullopt where none was. Empty without buckets. Kept by
  // SearchRun::Record for every strategy; KernelCache::PutTable stores it.
  std::vector<std::optional<HistoryEntry>> best_per_bucket;
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

// One run of a strategy: the bookkeeping every strategy needs, so that a
// strategy is only its choices (what to ask the generators, what to judge,
// what to keep). It owns
// - the summary and the history (summary().history): Evaluate() and Record()
//   add judged candidates, the strategy adds ideas when their outcome is
//   known;
// - the observers: each event goes to every observer of the context, and a
//   kStop from any of them stops the run (kStoppedByObserver);
// - the budgets of SearchBudget and the stop conditions: the user's cancel
//   flag, the wall-time budget (watched by a thread of its own, so blocking
//   calls stop on time), candidates, tokens, money, GPU time, the target
//   speedup; rounds through MayStartRound();
// - duplicates: a candidate whose content was already judged in the run is
//   recorded with a copy of the first verdict, not judged again;
// - ranking (Faster, Tied, Earlier) and idea outcomes in words
//   (SetIdeaOutcome), the same for every strategy.
//
// Stopping. The first reason wins; a strategy starts no generator call once
// stopped() is set. Every stop but the token and money budgets sets
// generation_cancel(), which generator calls should watch; a stop that must
// not wait for the work in flight (interrupted, wall time, GPU time, target,
// observer, failure) also sets evaluation_cancel(), which Evaluate() hands
// to the evaluator. The token and money budgets cancel nothing: a provider
// bills a reply it has begun whether or not the client waits, so requests
// in flight finish, their usage is counted and their kernels are judged
// (spending() sends nothing new). The candidate budget leaves evaluations
// running: what was written is still judged. kCompleted and kBudgetRounds
// cancel nothing (they are reached between rounds).
//
// Thread safety: a SearchRun is used by one thread, the strategy's (the one
// that calls Searcher::Run); observers are called on it. The two cancel flags
// may be read from any thread. Borrows the context, which must outlive it.
class SearchRun {
 public:
  struct Options {
    // A candidate whose content (Candidate::ContentHash) was already judged
    // in this run is recorded with a copy of that evaluation, its message
    // "same kernel as <id>, not judged again: …", instead of being judged
    // again (Evaluate). Off for a strategy that re-measures on purpose.
    bool skip_duplicates = true;
  };

  // Starts the run's clock and the watchdog of the cancel flag and the
  // wall-time budget. `strategy` is SearchSummary::strategy.
  SearchRun(const SearchContext& context, const SearchBudget& budget, std::string strategy);
  SearchRun(const SearchContext& context, const SearchBudget& budget, std::string strategy,
            const Options& options);
  ~SearchRun();
  SearchRun(const SearchRun&) = delete;
  SearchRun& operator=(const SearchRun&) = delete;

  const SearchContext& context() const;
  const SearchBudget& budget() const;
  // The summary so far. Strategies fill in what only they know (start, notes,
  // repairs) and append ideas to summary().history.ideas; counts, best,
  // tokens, cost and time are kept by the run.
  SearchSummary& summary();
  const SearchHistory& history() const;
  double elapsed_seconds() const;

  // ---- Stopping.
  // Hand these to blocking calls: IdeaRequest/BranchRequest::cancel, and the
  // cancel of an Evaluate that the strategy makes itself.
  const std::atomic<bool>* generation_cancel() const;
  const std::atomic<bool>* evaluation_cancel() const;
  // Hand this to generator calls too (IdeaRequest/BranchRequest::spending):
  // the gate of the run's token and money budgets. CheckLimits() stops the
  // run once it has refused a request.
  SpendingGate* spending();
  // Stops the run for `reason` (see the class comment for what it cancels).
  // A later reason does not replace an earlier one.
  void Stop(TerminationReason reason);
  // Stops with kFailed and SearchSummary::error = `error` (already worded
  // with its context). Replaces kCompleted, no other reason.
  void Fail(Status error);
  // For a generator call that returned an error: a kCancelled that this run
  // asked for (a stop was under way) is no failure; anything else fails the
  // run with `error` given the context `what` ("ideas r1.s0").
  void GeneratorFailed(const Status& error, const std::string& what);
  // The reason the run is stopping, or nullopt while it goes on.
  std::optional<TerminationReason> stopped() const;
  // Checks the cancel flag and every budget but rounds; stops at the first
  // reached. Returns true when the run is stopping. Evaluate(), Record() and
  // AddUsage() call it; a strategy that waits calls it as it waits.
  bool CheckLimits();

  // ---- Rounds.
  // CheckLimits(), then the round budget (round >= max_rounds stops with
  // kBudgetRounds). True when round `round` may start.
  bool MayStartRound(int round);
  // Reports the round's start to the observers. False when one said kStop.
  bool BeginRound(int round, const std::vector<std::string>& seed_ids);
  // SearchSummary::rounds = round + 1; reports the end to the observers.
  void EndRound(int round);

  // ---- Candidates.
  // Candidates that may still be judged under max_candidates (INT64_MAX
  // without that budget), counting every candidate reserved so far.
  int64_t CandidatesLeft() const;
  // Takes one candidate out of max_candidates. False, and the run stops with
  // kBudgetCandidates, when none is left: do not judge that candidate.
  bool ReserveCandidate();
  // Judges `batch` in one Evaluator::Evaluate call and records each candidate
  // (Record), in batch order, into the history. Candidates past the
  // candidate budget are dropped; duplicates (Options::skip_duplicates) are
  // answered with a copy of the first verdict, within the batch too; the time
  // inside Evaluate counts as GPU time; an evaluator whose health() is not OK
  // afterwards fails the run. Returns the new history entries, valid until
  // the history next grows. A stopped run still judges (a token budget leaves
  // what was written to be judged); after a stop that cancels evaluations the
  // evaluator answers kCancelled, which counts in by_status only.
  std::vector<const HistoryEntry*> Evaluate(std::vector<Candidate> batch);
  // For a strategy that runs the evaluator itself (on threads of its own,
  // say): counts a judged candidate into the summary (candidates, correct,
  // by_status, best, and for a problem with dispatch buckets each bucket's
  // best in best_per_bucket), reports it to the observers, remembers it as the
  // original of its content unless `duplicate`, and checks the limits. It
  // does not add it to the history: the strategy appends its entries to
  // summary().history.entries in the order it wants. A kCancelled evaluation
  // only enters by_status. Returns true when `entry` became the best.
  bool Record(const HistoryEntry& entry, bool duplicate = false);
  void AddGpuSeconds(double seconds);
  // Fails the run when the evaluator reports itself broken (health()).
  void CheckEvaluator();
  // The first judged candidate with this content hash, or null.
  const HistoryEntry* FindJudged(const std::string& content_hash) const;
  // Makes `entry` the original of its content (a strategy that reorders
  // duplicates canonically).
  void SetJudged(const std::string& content_hash, const HistoryEntry& entry);
  // Reports an evaluation whose text changed after it was reported
  // (SearchObserver::OnEvaluationRevised).
  void Revised(const HistoryEntry& entry);
  // "same kernel as <original_id>, not judged again: <message>", and back.
  static std::string DuplicateMessage(const std::string& original_id, const std::string& message);
  static std::string RawMessage(const std::string& message);

  // ---- Ideas and generator costs.
  // Counts a proposed idea and reports it to the observers.
  void ProposeIdea(const Idea& idea);
  // Adds a reply's or a call's tokens and cost, then checks the limits.
  void AddUsage(const GeneratorUsage& usage);
  void AddUsage(const IdeaResult& result);
  void AddUsage(const BranchResult& result);

  // Ends the run: termination (the stop reason; kCompleted when none, or
  // the watchdog's when it fired and nothing else was reached) and wall time.
  // Call once; the run is spent afterwards.
  SearchSummary Finish();

  // ---- Ranking, the same for every strategy.
  // True when `a` ranks strictly before `b` as a kernel: timed before
  // untimed; by median time; untimed by fewer registers, then fewer local
  // bytes; finally by Earlier, so the order is total and deterministic. Both
  // must be correct for the answer to mean "faster".
  static bool Faster(const HistoryEntry& a, const HistoryEntry& b);
  // True when a and b count as equally fast: medians within `tie_fraction`
  // of the smaller, or (untimed) the same registers and local bytes.
  static bool Tied(const HistoryEntry& a, const HistoryEntry& b, double tie_fraction);
  // Candidates by provenance round, then id ("start" first; numbers inside
  // ids compared as numbers: r1.s0.i2.b10 after .b9).
  static bool Earlier(const Candidate& a, const Candidate& b);
  // Text with numbers inside compared as numbers ("r1.s2" < "r1.s10").
  static bool NaturalLess(std::string_view a, std::string_view b);
  // Statuses a repair attempt may fix: the kernel is rejected for what its
  // text says (compile log, plan, outputs), not for a crash or a hang.
  static bool NeedsRepair(EvalStatus status);
  // Why a candidate failed, in one short line: "compile_error (error: …)",
  // "wrong_result (y on shifted: 12 of 4096 elements off, L2 2.1e-03 > …)".
  static std::string FailureReason(const Evaluation& evaluation);
  // A mix of a seed with up to three coordinates (splitmix64), for the
  // per-call seeds of generators.
  static uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b = 0, uint64_t c = 0);
  // Writes the idea's outcome in words (Idea::outcome, e.g. "best branch
  // r1.s0.i2.b1 1.31x faster than the parent (…); 3 of 4 branches correct;
  // 1× compile_error (…)") and best_speedup_over_parent, from its judged
  // branches (repairs included), the number asked for, and the notes of its
  // generator calls. Later idea prompts read it.
  static void SetIdeaOutcome(Idea* idea, const HistoryEntry* parent,
                             const std::vector<const HistoryEntry*>& branches, int branches_asked,
                             const std::vector<std::string>& notes);

 private:
  void RecordBuckets(const HistoryEntry& entry);
  struct Impl;
  std::unique_ptr<Impl> impl_;
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
