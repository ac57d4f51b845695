// SearchRun: the bookkeeping of one search run that every strategy shares
// (see ksearch/searcher.h for the contract).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "core/shape_cases.h"
#include "ksearch/searcher.h"
#include "search/search_util.h"

namespace ksearch {
namespace {

using internal::Clock;

constexpr std::string_view kSameKernel = "same kernel as ";
constexpr std::string_view kNotJudgedAgain = ", not judged again: ";

// Splits "r1.s0.i10" into text and number runs so that numbers compare as
// numbers.
int CompareNatural(std::string_view a, std::string_view b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
    bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (da && db) {
      size_t ei = i, ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      std::string_view na = a.substr(i, ei - i), nb = b.substr(j, ej - j);
      while (na.size() > 1 && na[0] == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb[0] == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size() ? -1 : 1;
      if (int c = na.compare(nb); c != 0) return c;
      i = ei;
      j = ej;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j] ? -1 : 1;
    ++i;
    ++j;
  }
  if (i == a.size() && j == b.size()) return 0;
  return i == a.size() ? -1 : 1;
}


// Sets the run's two cancel flags when the user's cancel flag is set or the
// wall-time budget passes, from a thread of its own, so that blocking calls
// (an Evaluate, a generator waiting for a model) stop on time. reason() says
// which.
class Watchdog {
 public:
  Watchdog(const std::atomic<bool>* user_cancel, double max_wall_seconds, Clock::time_point start,
           std::atomic<bool>* generation, std::atomic<bool>* evaluation)
      : user_cancel_(user_cancel),
        max_wall_seconds_(max_wall_seconds),
        start_(start),
        generation_(generation),
        evaluation_(evaluation),
        thread_([this] { Loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // kInterrupted or kBudgetWallTime once this watchdog set the flags.
  std::optional<TerminationReason> reason() const {
    switch (reason_.load()) {
      case 1:
        return TerminationReason::kInterrupted;
      case 2:
        return TerminationReason::kBudgetWallTime;
      default:
        return std::nullopt;
    }
  }

 private:
  void Loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    // 10 ms: a stop is noticed well within what a person perceives as "at once".
    while (!wake_.wait_for(lock, std::chrono::milliseconds(10), [this] { return done_; })) {
      int why = 0;
      if (user_cancel_ && user_cancel_->load()) {
        why = 1;
      } else if (max_wall_seconds_ > 0 && internal::SecondsSince(start_) >= max_wall_seconds_) {
        why = 2;
      }
      if (why != 0) {
        reason_.store(why);
        generation_->store(true);
        evaluation_->store(true);
        return;
      }
    }
  }

  const std::atomic<bool>* user_cancel_;
  double max_wall_seconds_;
  Clock::time_point start_;
  std::atomic<bool>* generation_;
  std::atomic<bool>* evaluation_;
  std::atomic<int> reason_{0};  // 0 none, 1 interrupted, 2 wall time
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::thread thread_;
};

// What a stop cancels (see the SearchRun class comment). The token and money
// budgets cancel no request: a reply the provider has begun is billed
// whether or not anyone waits for it, so it is waited for, counted and
// judged; the SpendingGate sends nothing new.
bool CancelsGeneration(TerminationReason reason) {
  switch (reason) {
    case TerminationReason::kCompleted:
    case TerminationReason::kBudgetRounds:
    case TerminationReason::kBudgetTokens:
    case TerminationReason::kBudgetCost:
      return false;
    default:
      return true;
  }
}
// The candidate budget leaves what was written to be judged.
bool CancelsEvaluation(TerminationReason reason) {
  return CancelsGeneration(reason) && reason != TerminationReason::kBudgetCandidates;
}

}  // namespace

struct SearchRun::Impl {
  Impl(const SearchContext& context, const SearchBudget& budget, std::string strategy,
       const Options& options)
      : context(context),
        budget(budget),
        options(options),
        start(Clock::now()),
        spending(budget.max_tokens, budget.max_cost_usd),
        watchdog(context.cancel, budget.max_wall_seconds, start, &generation_cancel,
                 &evaluation_cancel) {
    summary.strategy = std::move(strategy);
  }

  // Calls every observer (each sees every event); true when one said kStop.
  template <typename Call>
  bool Notify(Call call) {
    bool stop = false;
    for (SearchObserver* o : context.observers) stop |= call(*o) == ObserverAction::kStop;
    return stop;
  }

  // The budget that the summary and the elapsed time have reached, if any
  // (rounds are MayStartRound's business).
  std::optional<TerminationReason> BudgetReached() const {
    if (budget.max_candidates > 0 && summary.candidates >= budget.max_candidates) {
      return TerminationReason::kBudgetCandidates;
    }
    if (budget.max_tokens > 0 &&
        summary.input_tokens + summary.output_tokens >= budget.max_tokens) {
      return TerminationReason::kBudgetTokens;
    }
    if (budget.max_cost_usd > 0 && summary.cost_usd >= budget.max_cost_usd) {
      return TerminationReason::kBudgetCost;
    }
    if (budget.max_wall_seconds > 0 && internal::SecondsSince(start) >= budget.max_wall_seconds) {
      return TerminationReason::kBudgetWallTime;
    }
    if (budget.max_gpu_seconds > 0 && summary.gpu_seconds >= budget.max_gpu_seconds) {
      return TerminationReason::kBudgetGpuTime;
    }
    if (budget.target_speedup > 0 && summary.best && summary.best->evaluation.speedup &&
        summary.best->evaluation.speedup->ratio >= budget.target_speedup) {
      return TerminationReason::kTargetReached;
    }
    return std::nullopt;
  }

  const SearchContext& context;
  const SearchBudget budget;
  const Options options;
  const Clock::time_point start;
  SearchSummary summary;
  std::optional<TerminationReason> stop;
  std::atomic<bool> generation_cancel{false};
  std::atomic<bool> evaluation_cancel{false};
  int64_t reserved = 0;  // candidates taken out of max_candidates
  // Content hash → the first judged candidate with that content.
  std::map<std::string, HistoryEntry> judged;
  SpendingGate spending;
  Watchdog watchdog;  // last: its thread starts once the flags exist
};

SearchRun::SearchRun(const SearchContext& context, const SearchBudget& budget,
                     std::string strategy)
    : SearchRun(context, budget, std::move(strategy), Options()) {}

SearchRun::SearchRun(const SearchContext& context, const SearchBudget& budget,
                     std::string strategy, const Options& options)
    : impl_(std::make_unique<Impl>(context, budget, std::move(strategy), options)) {}

SearchRun::~SearchRun() = default;

const SearchContext& SearchRun::context() const { return impl_->context; }
const SearchBudget& SearchRun::budget() const { return impl_->budget; }
SearchSummary& SearchRun::summary() { return impl_->summary; }
const SearchHistory& SearchRun::history() const { return impl_->summary.history; }
double SearchRun::elapsed_seconds() const { return internal::SecondsSince(impl_->start); }

const std::atomic<bool>* SearchRun::generation_cancel() const { return &impl_->generation_cancel; }
const std::atomic<bool>* SearchRun::evaluation_cancel() const { return &impl_->evaluation_cancel; }
SpendingGate* SearchRun::spending() { return &impl_->spending; }

void SearchRun::Stop(TerminationReason reason) {
  if (!impl_->stop) {
    // The watchdog may have fired before the strategy noticed: its reason
    // came first.
    impl_->stop = impl_->watchdog.reason().value_or(reason);
  }
  if (CancelsGeneration(reason)) impl_->generation_cancel.store(true);
  if (CancelsEvaluation(reason)) impl_->evaluation_cancel.store(true);
}

void SearchRun::Fail(Status error) {
  if (!impl_->stop || *impl_->stop == TerminationReason::kCompleted) {
    impl_->summary.error = std::move(error);
    impl_->stop = TerminationReason::kFailed;
  }
  impl_->generation_cancel.store(true);
  impl_->evaluation_cancel.store(true);
}

void SearchRun::GeneratorFailed(const Status& error, const std::string& what) {
  if (error.code() == StatusCode::kCancelled && impl_->generation_cancel.load()) {
    // Only the watchdog sets the flag without a reason recorded yet.
    if (!impl_->stop) Stop(impl_->watchdog.reason().value_or(TerminationReason::kInterrupted));
    return;
  }
  Fail(error.WithContext(what));
}

std::optional<TerminationReason> SearchRun::stopped() const { return impl_->stop; }

bool SearchRun::CheckLimits() {
  if (auto why = impl_->watchdog.reason()) Stop(*why);
  if (impl_->context.cancel && impl_->context.cancel->load()) {
    Stop(TerminationReason::kInterrupted);
  }
  if (auto reached = impl_->BudgetReached()) Stop(*reached);
  switch (impl_->spending.refused()) {
    case SpendingGate::Limit::kTokens:
      Stop(TerminationReason::kBudgetTokens);
      break;
    case SpendingGate::Limit::kCost:
      Stop(TerminationReason::kBudgetCost);
      break;
    case SpendingGate::Limit::kNone:
      break;
  }
  return impl_->stop.has_value();
}

bool SearchRun::MayStartRound(int round) {
  if (CheckLimits()) return false;
  if (impl_->budget.max_rounds > 0 && round >= impl_->budget.max_rounds) {
    Stop(TerminationReason::kBudgetRounds);
    return false;
  }
  return true;
}

bool SearchRun::BeginRound(int round, const std::vector<std::string>& seed_ids) {
  if (impl_->Notify([&](SearchObserver& o) { return o.OnRoundStart(round, seed_ids); })) {
    Stop(TerminationReason::kStoppedByObserver);
    return false;
  }
  return true;
}

void SearchRun::EndRound(int round) {
  impl_->summary.rounds = std::max(impl_->summary.rounds, round + 1);
  if (impl_->Notify([&](SearchObserver& o) { return o.OnRoundEnd(round); })) {
    Stop(TerminationReason::kStoppedByObserver);
  }
}

int64_t SearchRun::CandidatesLeft() const {
  if (impl_->budget.max_candidates <= 0) return std::numeric_limits<int64_t>::max();
  return std::max<int64_t>(0, impl_->budget.max_candidates - impl_->reserved);
}

bool SearchRun::ReserveCandidate() {
  if (CandidatesLeft() <= 0) {
    Stop(TerminationReason::kBudgetCandidates);
    return false;
  }
  ++impl_->reserved;
  return true;
}

std::vector<const HistoryEntry*> SearchRun::Evaluate(std::vector<Candidate> batch) {
  struct Slot {
    HistoryEntry entry;
    bool duplicate = false;
    size_t judged_index = 0;  // into `to_judge`, when not answered from `judged`
    bool answered = false;
  };
  std::vector<Slot> slots;
  std::vector<Candidate> to_judge;
  std::map<std::string, size_t> in_batch;  // content hash → index in to_judge
  for (Candidate& candidate : batch) {
    if (!ReserveCandidate()) break;
    Slot slot;
    std::string hash = impl_->options.skip_duplicates ? candidate.ContentHash() : std::string();
    if (impl_->options.skip_duplicates) {
      if (const HistoryEntry* original = FindJudged(hash)) {
        slot.entry.evaluation = original->evaluation;
        slot.entry.evaluation.message = DuplicateMessage(
            original->candidate.id, RawMessage(original->evaluation.message));
        slot.duplicate = slot.answered = true;
      } else if (auto it = in_batch.find(hash); it != in_batch.end()) {
        slot.duplicate = true;
        slot.judged_index = it->second;
      } else {
        in_batch.emplace(hash, to_judge.size());
      }
    }
    if (!slot.duplicate) {
      slot.judged_index = to_judge.size();
      to_judge.push_back(candidate);
    }
    slot.entry.candidate = std::move(candidate);
    slots.push_back(std::move(slot));
  }
  std::vector<Evaluation> results;
  if (!to_judge.empty()) {
    auto start = Clock::now();
    results = impl_->context.evaluator->Evaluate(to_judge, &impl_->evaluation_cancel);
    AddGpuSeconds(internal::SecondsSince(start));
    results.resize(to_judge.size());  // an evaluator that broke its contract
    // A resumed run's evaluator may answer from a stored duplicate's record.
    for (Evaluation& e : results) e.message = RawMessage(e.message);
    CheckEvaluator();
  }
  SearchHistory& history = impl_->summary.history;
  size_t first = history.entries.size();
  for (Slot& slot : slots) {
    if (!slot.answered) {
      const Evaluation& verdict = results[slot.judged_index];
      slot.entry.evaluation = verdict;
      if (slot.duplicate) {
        slot.entry.evaluation.message =
            DuplicateMessage(to_judge[slot.judged_index].id, verdict.message);
      }
    }
    slot.entry.evaluation.candidate_id = slot.entry.candidate.id;
    history.entries.push_back(std::move(slot.entry));
    Record(history.entries.back(), slot.duplicate);
  }
  std::vector<const HistoryEntry*> out;
  for (size_t i = first; i < history.entries.size(); ++i) out.push_back(&history.entries[i]);
  return out;
}

bool SearchRun::Record(const HistoryEntry& entry, bool duplicate) {
  SearchSummary& summary = impl_->summary;
  const Evaluation& e = entry.evaluation;
  ++summary.by_status[std::string(ToString(e.status))];
  if (e.status == EvalStatus::kCancelled) return false;
  ++summary.candidates;
  bool new_best = false;
  if (e.ok()) {
    // Compiled-only kernels can be the best of a compile-only run, but they
    // were never run: they are not counted as correct.
    if (e.correct()) ++summary.correct;
    if (!summary.best || Faster(entry, *summary.best)) {
      summary.best = entry;
      new_best = true;
    }
  }
  RecordBuckets(entry);
  if (!duplicate) impl_->judged.emplace(entry.candidate.ContentHash(), entry);
  if (impl_->Notify(
          [&](SearchObserver& o) { return o.OnCandidateEvaluated(entry.candidate, e); })) {
    Stop(TerminationReason::kStoppedByObserver);
  }
  if (new_best &&
      impl_->Notify([&](SearchObserver& o) { return o.OnNewBest(entry.candidate, e); })) {
    Stop(TerminationReason::kStoppedByObserver);
  }
  CheckLimits();
  return new_best;
}

void SearchRun::RecordBuckets(const HistoryEntry& entry) {
  // A strategy of the caller's may run without a problem in its context.
  if (!impl_->context.problem || !impl_->context.problem->dispatch.enabled()) return;
  const Problem& problem = *impl_->context.problem;
  std::vector<std::optional<HistoryEntry>>& bests = impl_->summary.best_per_bucket;
  bests.resize(problem.dispatch.bucket_count());
  // A kernel wrong at a case of one bucket may still be the best of another:
  // each bucket is judged by its own cases (BucketEvaluation).
  for (size_t b = 0; b < bests.size(); ++b) {
    HistoryEntry view{entry.candidate, internal::BucketEvaluation(problem, entry.evaluation, b)};
    if (!view.evaluation.ok()) continue;
    if (!bests[b] || Faster(view, *bests[b])) bests[b] = std::move(view);
  }
}

void SearchRun::AddGpuSeconds(double seconds) { impl_->summary.gpu_seconds += seconds; }

void SearchRun::CheckEvaluator() {
  // A broken judge stops the search: its kCancelled verdicts are not the
  // candidates' doing, and more candidates would only cost more replies.
  if (Status health = impl_->context.evaluator->health(); !health.ok()) {
    Fail(health.WithContext("the evaluator"));
  }
}

const HistoryEntry* SearchRun::FindJudged(const std::string& content_hash) const {
  auto it = impl_->judged.find(content_hash);
  return it == impl_->judged.end() ? nullptr : &it->second;
}

void SearchRun::SetJudged(const std::string& content_hash, const HistoryEntry& entry) {
  impl_->judged.insert_or_assign(content_hash, entry);
}

void SearchRun::Revised(const HistoryEntry& entry) {
  if (impl_->Notify([&](SearchObserver& o) {
        return o.OnEvaluationRevised(entry.candidate, entry.evaluation);
      })) {
    Stop(TerminationReason::kStoppedByObserver);
  }
}

std::string SearchRun::DuplicateMessage(const std::string& original_id,
                                        const std::string& message) {
  return std::string(kSameKernel) + original_id + std::string(kNotJudgedAgain) + message;
}

std::string SearchRun::RawMessage(const std::string& message) {
  if (!message.starts_with(kSameKernel)) return message;
  size_t end = message.find(kNotJudgedAgain);
  return end == std::string::npos ? message : message.substr(end + kNotJudgedAgain.size());
}

void SearchRun::ProposeIdea(const Idea& idea) {
  ++impl_->summary.ideas;
  if (impl_->Notify([&](SearchObserver& o) { return o.OnIdea(idea); })) {
    Stop(TerminationReason::kStoppedByObserver);
  }
}

void SearchRun::AddUsage(const GeneratorUsage& usage) {
  impl_->summary.input_tokens += usage.input_tokens;
  impl_->summary.output_tokens += usage.output_tokens;
  impl_->summary.cost_usd += usage.cost_usd;
  impl_->spending.AtLeastSpent(GeneratorUsage{
      impl_->summary.input_tokens, impl_->summary.output_tokens, impl_->summary.cost_usd});
  CheckLimits();
}

void SearchRun::AddUsage(const IdeaResult& result) {
  AddUsage(GeneratorUsage{result.input_tokens, result.output_tokens, result.cost_usd});
}

void SearchRun::AddUsage(const BranchResult& result) {
  AddUsage(GeneratorUsage{result.input_tokens, result.output_tokens, result.cost_usd});
}

SearchSummary SearchRun::Finish() {
  TerminationReason reason = impl_->stop.value_or(TerminationReason::kCompleted);
  if (auto why = impl_->watchdog.reason(); why && reason == TerminationReason::kCompleted) {
    reason = *why;
  }
  impl_->summary.termination = reason;
  impl_->summary.wall_seconds = elapsed_seconds();
  return std::move(impl_->summary);
}

bool SearchRun::NaturalLess(std::string_view a, std::string_view b) {
  return CompareNatural(a, b) < 0;
}

bool SearchRun::Earlier(const Candidate& a, const Candidate& b) {
  if (a.provenance.round != b.provenance.round) return a.provenance.round < b.provenance.round;
  bool sa = a.id == "start", sb = b.id == "start";
  if (sa != sb) return sa;
  return CompareNatural(a.id, b.id) < 0;
}

bool SearchRun::Faster(const HistoryEntry& a, const HistoryEntry& b) {
  double ta = internal::MedianMs(a.evaluation), tb = internal::MedianMs(b.evaluation);
  if ((ta > 0) != (tb > 0)) return ta > 0;
  if (ta > 0 && ta != tb) return ta < tb;
  if (ta <= 0) {
    int64_t ra = internal::TotalRegisters(a.evaluation), rb = internal::TotalRegisters(b.evaluation);
    if (ra != rb) return ra < rb;
    int64_t la = internal::TotalLocalBytes(a.evaluation), lb = internal::TotalLocalBytes(b.evaluation);
    if (la != lb) return la < lb;
  }
  return Earlier(a.candidate, b.candidate);
}

bool SearchRun::Tied(const HistoryEntry& a, const HistoryEntry& b, double tie_fraction) {
  double ta = internal::MedianMs(a.evaluation), tb = internal::MedianMs(b.evaluation);
  if ((ta > 0) != (tb > 0)) return false;
  if (ta > 0) return std::abs(ta - tb) <= tie_fraction * std::min(ta, tb);
  return internal::TotalRegisters(a.evaluation) == internal::TotalRegisters(b.evaluation) &&
         internal::TotalLocalBytes(a.evaluation) == internal::TotalLocalBytes(b.evaluation);
}

bool SearchRun::NeedsRepair(EvalStatus status) {
  switch (status) {
    case EvalStatus::kCompileError:
    case EvalStatus::kInvalidPlan:
    case EvalStatus::kResourceLimit:
    case EvalStatus::kLaunchError:
    case EvalStatus::kWrongResult:
    case EvalStatus::kUnwrittenOutput:
    case EvalStatus::kInputModified:
    case EvalStatus::kOutOfBoundsWrite:
    case EvalStatus::kNondeterministic:
      return true;
    default:
      return false;
  }
}

uint64_t SearchRun::MixSeed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = seed;
  for (uint64_t v : {a, b, c}) {
    x += 0x9e3779b97f4a7c15ULL + v;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
  }
  return x;
}

std::string SearchRun::FailureReason(const Evaluation& evaluation) {
  std::string out(ToString(evaluation.status));
  std::string why;
  if (evaluation.status == EvalStatus::kCompileError && !evaluation.details.empty()) {
    why = internal::FirstErrorLine(evaluation.details);
  } else if (evaluation.mismatch) {
    const Mismatch& m = *evaluation.mismatch;
    char text[256];
    // The comparison that failed: the L2 error, or (within the L2 bound)
    // elements past the elementwise one.
    const bool l2_failed = m.l2_rel_error > m.allowed_l2_rel_error;
    std::snprintf(text, sizeof(text), "%s on %s: %lld of %lld elements off, L2 %.1e %s %.1e allowed",
                  m.tensor.c_str(), m.input_set.c_str(), static_cast<long long>(m.bad_count),
                  static_cast<long long>(m.elements), m.l2_rel_error, l2_failed ? ">" : "within",
                  m.allowed_l2_rel_error);
    why = text;
  } else {
    why = internal::FirstErrorLine(evaluation.message);
  }
  if (!why.empty()) out += " (" + why + ")";
  return out;
}

void SearchRun::SetIdeaOutcome(Idea* idea, const HistoryEntry* parent,
                               const std::vector<const HistoryEntry*>& branches,
                               int branches_asked, const std::vector<std::string>& notes) {
  const HistoryEntry* best = nullptr;
  int correct = 0, compiled = 0, judged = 0;
  std::map<std::string, std::pair<int, std::string>> failures;  // status → count, first reason
  for (const HistoryEntry* e : branches) {
    if (e->evaluation.status == EvalStatus::kCancelled) continue;
    ++judged;
    if (e->evaluation.ok()) {
      ++(e->evaluation.correct() ? correct : compiled);
      if (!best || Faster(*e, *best)) best = e;
    } else {
      auto& f = failures[std::string(ToString(e->evaluation.status))];
      if (f.first++ == 0) f.second = FailureReason(e->evaluation);
    }
  }
  if (judged == 0 && !branches.empty()) {
    // Written but not judged: a run that stopped to wait for a GPU, or was
    // interrupted, before its evaluator saw them.
    idea->best_speedup_over_parent = 0.0;
    idea->outcome = std::to_string(branches.size()) + " of " +
                    std::to_string(std::max<int>(branches_asked, static_cast<int>(branches.size()))) +
                    " branches written, none judged yet";
    if (!notes.empty()) idea->outcome += "; " + notes.front();
    return;
  }
  const bool compile_only =
      compiled > 0 || (parent && parent->evaluation.status == EvalStatus::kCompiled);
  std::string text;
  char buffer[320];
  idea->best_speedup_over_parent = 0.0;
  double parent_ms = parent ? internal::MedianMs(parent->evaluation) : 0.0;
  if (best && internal::MedianMs(best->evaluation) > 0) {
    double best_ms = internal::MedianMs(best->evaluation);
    if (parent_ms > 0) {
      idea->best_speedup_over_parent = parent_ms / best_ms;
      std::snprintf(buffer, sizeof(buffer),
                    "best branch %s %.2fx %s the parent (%.4f ms vs %.4f ms)",
                    best->candidate.id.c_str(),
                    parent_ms >= best_ms ? parent_ms / best_ms : best_ms / parent_ms,
                    parent_ms >= best_ms ? "faster than" : "slower than", best_ms, parent_ms);
    } else {
      std::snprintf(buffer, sizeof(buffer), "best branch %s %.4f ms", best->candidate.id.c_str(),
                    best_ms);
    }
    text = buffer;
    if (best->evaluation.speedup) {
      std::snprintf(buffer, sizeof(buffer), ", %.2fx vs %s", best->evaluation.speedup->ratio,
                    best->evaluation.speedup->baseline.c_str());
      text += buffer;
    }
    text += "; ";
  } else if (best) {
    int64_t regs = internal::TotalRegisters(best->evaluation);
    int64_t parent_regs = parent ? internal::TotalRegisters(parent->evaluation) : -1;
    if (regs != std::numeric_limits<int64_t>::max() && parent_regs > 0 &&
        parent_regs != std::numeric_limits<int64_t>::max()) {
      std::snprintf(buffer, sizeof(buffer), "best %s uses %lld registers vs the parent's %lld; ",
                    best->candidate.id.c_str(), static_cast<long long>(regs),
                    static_cast<long long>(parent_regs));
      text = buffer;
    }
  } else {
    text = compile_only ? "" : "no correct branch; ";
  }
  // A compile-only run never runs a kernel: its branches compile, or not,
  // and none is judged correct.
  std::snprintf(buffer, sizeof(buffer),
                compile_only ? "%d of %d branches compiled (compile-only: not run, not judged)"
                             : "%d of %d branches correct",
                compile_only ? compiled : correct, std::max(branches_asked, judged));
  text += buffer;
  for (const auto& [status, f] : failures) {
    text += "; " + std::to_string(f.first) + "× " + f.second;
  }
  if (judged < branches_asked && !notes.empty()) {
    text += "; " + std::to_string(branches_asked - std::min(branches_asked, judged)) +
            " not judged: " + notes.front();
  }
  idea->outcome = std::move(text);
}

}  // namespace ksearch
