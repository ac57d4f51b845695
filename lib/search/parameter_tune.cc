#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <functional>
#include <set>

#include "core/plan_resolve.h"
#include "ksearch/strategies.h"

namespace ksearch {
namespace {

using Clock = std::chrono::steady_clock;
using Point = std::vector<int64_t>;  // one value per param of the template's space

struct Space {
  const TemplateSpec* spec = nullptr;
  int index = 0;
  std::vector<Point> enumerated;  // empty when sampled
  bool sampled = false;
};

class ParameterTuneSearch final : public Searcher {
 public:
  ParameterTuneSearch(SearchOptions options, ParameterTuneOptions tune)
      : options_(options), tune_(tune), rng_(options.seed) {}

  std::string name() const override { return "tune"; }
  StatusOr<SearchSummary> Run(SearchContext& context) override;

 private:
  bool Valid(const Problem& problem, const Space& space, const Point& point) const;
  Candidate Make(const Space& space, const Point& point, int round) const;
  std::vector<std::pair<const Space*, Point>> NextBatch(const Problem& problem, int count);
  std::string Key(const Space& space, const Point& point) const;

  SearchOptions options_;
  ParameterTuneOptions tune_;
  std::mt19937_64 rng_;
  std::vector<Space> spaces_;
  std::set<std::string> seen_;
  std::optional<std::pair<const Space*, Point>> best_point_;
  int64_t next_id_ = 0;
};

std::string ParameterTuneSearch::Key(const Space& space, const Point& point) const {
  std::string key = std::to_string(space.index);
  for (int64_t v : point) key += ":" + std::to_string(v);
  return key;
}

bool ParameterTuneSearch::Valid(const Problem& problem, const Space& space, const Point& point) const {
  LaunchPlan plan = space.spec->kernel.plan;
  for (size_t i = 0; i < point.size(); ++i) plan.SetParam(space.spec->space[i].first, point[i]);
  auto values = internal::PlanValues(problem, plan);
  for (const std::string& c : space.spec->constraints) {
    auto ok = EvaluateCondition(c, values);
    if (!ok.ok() || !*ok) return false;
  }
  return internal::ResolvePlan(problem, plan).ok();
}

Candidate ParameterTuneSearch::Make(const Space& space, const Point& point, int round) const {
  Candidate c = space.spec->kernel.ToCandidate("", "template");
  for (size_t i = 0; i < point.size(); ++i) c.plan.SetParam(space.spec->space[i].first, point[i]);
  c.provenance.round = round;
  c.provenance.generator = "template:" + space.spec->name;
  return c;
}

std::vector<std::pair<const Space*, Point>> ParameterTuneSearch::NextBatch(const Problem& problem,
                                                                           int count) {
  std::vector<std::pair<const Space*, Point>> out;
  auto take = [&](const Space& space, const Point& p) {
    std::string key = Key(space, p);
    if (seen_.count(key) || !Valid(problem, space, p)) return false;
    seen_.insert(key);
    out.emplace_back(&space, p);
    return true;
  };
  int local = best_point_ ? static_cast<int>(count * tune_.local_fraction) : 0;
  // Local moves: one parameter of the best point, one step along its list.
  if (best_point_) {
    const Space& space = *best_point_->first;
    std::vector<Point> neighbours;
    for (size_t d = 0; d < space.spec->space.size(); ++d) {
      const auto& values = space.spec->space[d].second;
      auto it = std::find(values.begin(), values.end(), best_point_->second[d]);
      if (it == values.end()) continue;
      for (int step : {-1, 1}) {
        long pos = (it - values.begin()) + step;
        if (pos < 0 || pos >= static_cast<long>(values.size())) continue;
        Point p = best_point_->second;
        p[d] = values[static_cast<size_t>(pos)];
        neighbours.push_back(p);
      }
    }
    std::shuffle(neighbours.begin(), neighbours.end(), rng_);
    for (const Point& p : neighbours) {
      if (static_cast<int>(out.size()) >= local) break;
      take(space, p);
    }
  }
  // Random points from the rest of every space.
  for (int attempts = 0; static_cast<int>(out.size()) < count && attempts < count * 200; ++attempts) {
    if (spaces_.empty()) break;
    Space& space = spaces_[rng_() % spaces_.size()];
    if (!space.sampled) {
      if (space.enumerated.empty()) continue;
      size_t pick = rng_() % space.enumerated.size();
      Point p = space.enumerated[pick];
      space.enumerated[pick] = space.enumerated.back();
      space.enumerated.pop_back();
      take(space, p);
    } else {
      Point p;
      for (const auto& [name, values] : space.spec->space) p.push_back(values[rng_() % values.size()]);
      take(space, p);
    }
  }
  return out;
}

StatusOr<SearchSummary> ParameterTuneSearch::Run(SearchContext& context) {
  if (!context.problem || !context.evaluator) {
    return InvalidArgumentError("ParameterTuneSearch needs a problem and an evaluator in the context");
  }
  const Problem& problem = *context.problem;
  auto start = Clock::now();
  SearchSummary summary;
  summary.strategy = name();
  spaces_.clear();
  seen_.clear();
  for (size_t t = 0; t < problem.templates.size(); ++t) {
    Space space;
    space.spec = &problem.templates[t];
    space.index = static_cast<int>(t);
    int64_t total = 1;
    for (const auto& [param, values] : space.spec->space) {
      total = std::min<int64_t>(total * static_cast<int64_t>(values.size()), INT64_C(1) << 40);
    }
    if (total <= tune_.max_enumerated_points) {
      Point p(space.spec->space.size());
      std::function<void(size_t)> walk = [&](size_t d) {
        if (d == p.size()) {
          space.enumerated.push_back(p);
          return;
        }
        for (int64_t v : space.spec->space[d].second) {
          p[d] = v;
          walk(d + 1);
        }
      };
      walk(0);
    } else {
      space.sampled = true;
    }
    spaces_.push_back(std::move(space));
  }

  auto notify = [&](auto&& call) {
    bool stop = false;
    for (SearchObserver* o : context.observers) {
      if (call(o) == ObserverAction::kStop) stop = true;
    }
    return stop;
  };
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  const SearchBudget& budget = options_.budget;
  SearchHistory history;
  bool stop = false;
  for (int round = 0; !stop; ++round) {
    if (budget.max_rounds > 0 && round >= budget.max_rounds) {
      summary.termination = TerminationReason::kBudgetRounds;
      break;
    }
    if (context.cancel && context.cancel->load()) {
      summary.termination = TerminationReason::kInterrupted;
      break;
    }
    std::vector<Candidate> batch;
    std::vector<std::pair<const Space*, Point>> points;
    int count = tune_.batch_size;
    if (budget.max_candidates > 0) {
      count = static_cast<int>(std::min<int64_t>(count, budget.max_candidates - summary.candidates));
    }
    if (round == 0) {
      Candidate c = problem.start.ToCandidate("", "start");
      batch.push_back(std::move(c));
      for (const Space& space : spaces_) {
        Point p;
        for (const auto& [param, values] : space.spec->space) {
          p.push_back(space.spec->kernel.plan.Param(param, values.front()));
        }
        if (static_cast<int>(batch.size()) < std::max(count, 1) && !seen_.count(Key(space, p)) &&
            Valid(problem, space, p)) {
          seen_.insert(Key(space, p));
          points.emplace_back(&space, p);
          batch.push_back(Make(space, p, round));
        }
      }
    } else {
      points = NextBatch(problem, count);
      for (const auto& [space, p] : points) batch.push_back(Make(*space, p, round));
    }
    if (batch.empty()) {
      summary.termination = budget.max_candidates > 0 && summary.candidates >= budget.max_candidates
                                ? TerminationReason::kBudgetCandidates
                                : TerminationReason::kCompleted;
      break;
    }
    for (Candidate& c : batch) c.id = "c" + std::to_string(next_id_++);
    std::vector<std::string> seed_ids;
    if (summary.best) seed_ids.push_back(summary.best->candidate.id);
    if (notify([&](SearchObserver* o) { return o->OnRoundStart(round, seed_ids); })) {
      summary.termination = TerminationReason::kStoppedByObserver;
      break;
    }
    auto gpu_start = Clock::now();
    std::vector<Evaluation> results = context.evaluator->Evaluate(batch, context.cancel);
    summary.gpu_seconds += std::chrono::duration<double>(Clock::now() - gpu_start).count();
    summary.rounds = round + 1;
    for (size_t i = 0; i < batch.size(); ++i) {
      const Evaluation& e = results[i];
      ++summary.candidates;
      ++summary.by_status[std::string(ToString(e.status))];
      history.entries.push_back(HistoryEntry{batch[i], e});
      if (notify([&](SearchObserver* o) { return o->OnCandidateEvaluated(batch[i], e); })) stop = true;
      if (round == 0 && i == 0) summary.start = history.entries.back();
      if (!e.ok()) continue;
      ++summary.correct;
      bool better = !summary.best ||
                    (e.timing && (!summary.best->evaluation.timing ||
                                  e.timing->median_ms < summary.best->evaluation.timing->median_ms));
      if (better) {
        summary.best = history.entries.back();
        size_t point_index = round == 0 ? i - 1 : i;
        if (!(round == 0 && i == 0) && point_index < points.size()) best_point_ = points[point_index];
        if (notify([&](SearchObserver* o) { return o->OnNewBest(batch[i], e); })) stop = true;
      }
    }
    if (notify([&](SearchObserver* o) { return o->OnRoundEnd(round); })) stop = true;
    if (stop) {
      summary.termination = TerminationReason::kStoppedByObserver;
      break;
    }
    if (context.cancel && context.cancel->load()) {
      summary.termination = TerminationReason::kInterrupted;
      break;
    }
    if (budget.max_candidates > 0 && summary.candidates >= budget.max_candidates) {
      summary.termination = TerminationReason::kBudgetCandidates;
      break;
    }
    if (budget.max_wall_seconds > 0 && elapsed() >= budget.max_wall_seconds) {
      summary.termination = TerminationReason::kBudgetWallTime;
      break;
    }
    if (budget.max_gpu_seconds > 0 && summary.gpu_seconds >= budget.max_gpu_seconds) {
      summary.termination = TerminationReason::kBudgetGpuTime;
      break;
    }
    if (budget.target_speedup > 0 && summary.best && summary.best->evaluation.speedup &&
        summary.best->evaluation.speedup->ratio >= budget.target_speedup) {
      summary.termination = TerminationReason::kTargetReached;
      break;
    }
  }
  summary.wall_seconds = elapsed();
  return summary;
}

}  // namespace

std::unique_ptr<Searcher> MakeParameterTuneSearch(const SearchOptions& options,
                                                  const ParameterTuneOptions& tune) {
  return std::make_unique<ParameterTuneSearch>(options, tune);
}

}  // namespace ksearch
