#include "search/search_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace ksearch::internal {

double MedianMs(const Evaluation& evaluation) {
  return evaluation.timing ? evaluation.timing->median_ms : 0.0;
}

int64_t TotalRegisters(const Evaluation& evaluation) {
  if (evaluation.resources.empty()) return std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (const KernelResources& r : evaluation.resources) {
    if (r.registers < 0) return std::numeric_limits<int64_t>::max();
    total += r.registers;
  }
  return total;
}

int64_t TotalLocalBytes(const Evaluation& evaluation) {
  if (evaluation.resources.empty()) return std::numeric_limits<int64_t>::max();
  int64_t total = 0;
  for (const KernelResources& r : evaluation.resources) {
    if (r.local_bytes < 0) return std::numeric_limits<int64_t>::max();
    total += r.local_bytes;
  }
  return total;
}

namespace {

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

}  // namespace

bool NaturalLess(std::string_view a, std::string_view b) { return CompareNatural(a, b) < 0; }

bool Earlier(const Candidate& a, const Candidate& b) {
  if (a.provenance.round != b.provenance.round) return a.provenance.round < b.provenance.round;
  bool sa = a.id == "start", sb = b.id == "start";
  if (sa != sb) return sa;
  return CompareNatural(a.id, b.id) < 0;
}

bool Faster(const HistoryEntry& a, const HistoryEntry& b) {
  double ta = MedianMs(a.evaluation), tb = MedianMs(b.evaluation);
  if ((ta > 0) != (tb > 0)) return ta > 0;
  if (ta > 0 && ta != tb) return ta < tb;
  if (ta <= 0) {
    int64_t ra = TotalRegisters(a.evaluation), rb = TotalRegisters(b.evaluation);
    if (ra != rb) return ra < rb;
    int64_t la = TotalLocalBytes(a.evaluation), lb = TotalLocalBytes(b.evaluation);
    if (la != lb) return la < lb;
  }
  return Earlier(a.candidate, b.candidate);
}

bool Tied(const HistoryEntry& a, const HistoryEntry& b, double tie_fraction) {
  double ta = MedianMs(a.evaluation), tb = MedianMs(b.evaluation);
  if ((ta > 0) != (tb > 0)) return false;
  if (ta > 0) return std::abs(ta - tb) <= tie_fraction * std::min(ta, tb);
  return TotalRegisters(a.evaluation) == TotalRegisters(b.evaluation) &&
         TotalLocalBytes(a.evaluation) == TotalLocalBytes(b.evaluation);
}

bool NeedsRepair(EvalStatus status) {
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

uint64_t MixSeed(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = seed;
  for (uint64_t v : {a, b, c}) {
    x += 0x9e3779b97f4a7c15ULL + v;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
  }
  return x;
}

std::string FirstErrorLine(std::string_view text, size_t max_bytes) {
  std::string_view first;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.front())))
      line.remove_prefix(1);
    while (!line.empty() && std::isspace(static_cast<unsigned char>(line.back())))
      line.remove_suffix(1);
    if (!line.empty()) {
      if (first.empty()) first = line;
      if (line.find("error") != std::string_view::npos) {
        first = line;
        break;
      }
    }
    pos = end + 1;
  }
  std::string out(first.substr(0, max_bytes));
  if (first.size() > max_bytes) out += "…";
  return out;
}

std::string FailureReason(const Evaluation& evaluation) {
  std::string out(ToString(evaluation.status));
  std::string why;
  if (evaluation.status == EvalStatus::kCompileError && !evaluation.details.empty()) {
    why = FirstErrorLine(evaluation.details);
  } else if (evaluation.mismatch) {
    const Mismatch& m = *evaluation.mismatch;
    char text[256];
    std::snprintf(text, sizeof(text), "%s on %s: %lld of %lld elements off, L2 %.1e > %.1e allowed",
                  m.tensor.c_str(), m.input_set.c_str(), static_cast<long long>(m.bad_count),
                  static_cast<long long>(m.elements), m.l2_rel_error, m.allowed_l2_rel_error);
    why = text;
  } else {
    why = FirstErrorLine(evaluation.message);
  }
  if (!why.empty()) out += " (" + why + ")";
  return out;
}

void SetIdeaOutcome(Idea* idea, const HistoryEntry* parent,
                    const std::vector<const HistoryEntry*>& branches, int branches_asked,
                    const std::vector<std::string>& notes) {
  const HistoryEntry* best = nullptr;
  int correct = 0, judged = 0;
  std::map<std::string, std::pair<int, std::string>> failures;  // status → count, first reason
  for (const HistoryEntry* e : branches) {
    if (e->evaluation.status == EvalStatus::kCancelled) continue;
    ++judged;
    if (e->evaluation.ok()) {
      ++correct;
      if (!best || Faster(*e, *best)) best = e;
    } else {
      auto& f = failures[std::string(ToString(e->evaluation.status))];
      if (f.first++ == 0) f.second = FailureReason(e->evaluation);
    }
  }
  std::string text;
  char buffer[320];
  idea->best_speedup_over_parent = 0.0;
  double parent_ms = parent ? MedianMs(parent->evaluation) : 0.0;
  if (best && MedianMs(best->evaluation) > 0) {
    double best_ms = MedianMs(best->evaluation);
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
    int64_t regs = TotalRegisters(best->evaluation);
    int64_t parent_regs = parent ? TotalRegisters(parent->evaluation) : -1;
    text = "correct branches untimed (compile-only)";
    if (regs != std::numeric_limits<int64_t>::max() && parent_regs > 0 &&
        parent_regs != std::numeric_limits<int64_t>::max()) {
      std::snprintf(buffer, sizeof(buffer), "; best %s uses %lld registers vs the parent's %lld",
                    best->candidate.id.c_str(), static_cast<long long>(regs),
                    static_cast<long long>(parent_regs));
      text += buffer;
    }
    text += "; ";
  } else {
    text = "no correct branch; ";
  }
  std::snprintf(buffer, sizeof(buffer), "%d of %d branches correct", correct,
                std::max(branches_asked, judged));
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

bool Observers::RoundStart(int round, const std::vector<std::string>& seed_ids) {
  bool stop = false;
  for (SearchObserver* o : list_) stop |= o->OnRoundStart(round, seed_ids) == ObserverAction::kStop;
  return stop;
}

bool Observers::IdeaProposed(const Idea& idea) {
  bool stop = false;
  for (SearchObserver* o : list_) stop |= o->OnIdea(idea) == ObserverAction::kStop;
  return stop;
}

bool Observers::Evaluated(const Candidate& candidate, const Evaluation& evaluation) {
  bool stop = false;
  for (SearchObserver* o : list_) {
    stop |= o->OnCandidateEvaluated(candidate, evaluation) == ObserverAction::kStop;
  }
  return stop;
}

bool Observers::Revised(const Candidate& candidate, const Evaluation& evaluation) {
  bool stop = false;
  for (SearchObserver* o : list_) {
    stop |= o->OnEvaluationRevised(candidate, evaluation) == ObserverAction::kStop;
  }
  return stop;
}

bool Observers::NewBest(const Candidate& candidate, const Evaluation& evaluation) {
  bool stop = false;
  for (SearchObserver* o : list_) {
    stop |= o->OnNewBest(candidate, evaluation) == ObserverAction::kStop;
  }
  return stop;
}

bool Observers::RoundEnd(int round) {
  bool stop = false;
  for (SearchObserver* o : list_) stop |= o->OnRoundEnd(round) == ObserverAction::kStop;
  return stop;
}

bool CountResult(SearchSummary* summary, const HistoryEntry& entry) {
  const Evaluation& e = entry.evaluation;
  ++summary->by_status[std::string(ToString(e.status))];
  if (e.status == EvalStatus::kCancelled) return false;
  ++summary->candidates;
  if (!e.ok()) return false;
  // Compiled-only kernels can be the best of a compile-only run, but they
  // were never run: they are not counted as correct.
  if (e.correct()) ++summary->correct;
  if (summary->best && !Faster(entry, *summary->best)) return false;
  summary->best = entry;
  return true;
}

std::optional<TerminationReason> BudgetReached(const SearchBudget& budget,
                                               const SearchSummary& summary,
                                               double elapsed_seconds) {
  if (budget.max_candidates > 0 && summary.candidates >= budget.max_candidates) {
    return TerminationReason::kBudgetCandidates;
  }
  if (budget.max_tokens > 0 && summary.input_tokens + summary.output_tokens >= budget.max_tokens) {
    return TerminationReason::kBudgetTokens;
  }
  if (budget.max_cost_usd > 0 && summary.cost_usd >= budget.max_cost_usd) {
    return TerminationReason::kBudgetCost;
  }
  if (budget.max_wall_seconds > 0 && elapsed_seconds >= budget.max_wall_seconds) {
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

Watchdog::Watchdog(const std::atomic<bool>* user_cancel, double max_wall_seconds,
                   Clock::time_point start, std::atomic<bool>* flag)
    : user_cancel_(user_cancel), max_wall_seconds_(max_wall_seconds), start_(start), flag_(flag) {
  thread_ = std::thread([this] { Loop(); });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::optional<TerminationReason> Watchdog::reason() const {
  switch (reason_.load()) {
    case 1:
      return TerminationReason::kInterrupted;
    case 2:
      return TerminationReason::kBudgetWallTime;
    default:
      return std::nullopt;
  }
}

void Watchdog::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  // 10 ms: a stop is noticed well within what a person perceives as "at once".
  while (!wake_.wait_for(lock, std::chrono::milliseconds(10), [this] { return done_; })) {
    int why = 0;
    if (user_cancel_ && user_cancel_->load()) {
      why = 1;
    } else if (max_wall_seconds_ > 0 && SecondsSince(start_) >= max_wall_seconds_) {
      why = 2;
    }
    if (why != 0) {
      int expected = 0;
      reason_.compare_exchange_strong(expected, why);
      flag_->store(true);
      return;
    }
  }
}

WorkerPool::WorkerPool(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::Submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
}

void WorkerPool::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [this] { return done_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void Mailbox::Post(std::function<void()> closure) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(closure));
  }
  wake_.notify_one();
}

int Mailbox::RunFor(std::chrono::milliseconds timeout) {
  std::deque<std::function<void()>> batch;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    wake_.wait_for(lock, timeout, [this] { return !queue_.empty(); });
    batch.swap(queue_);
  }
  for (auto& closure : batch) closure();
  return static_cast<int>(batch.size());
}

}  // namespace ksearch::internal
