// ParameterTuneSearch: offline tuning of a problem's templates by random
// sampling, simulated annealing or successive halving. Every point proposed
// satisfies its template's constraints and resolves to a valid plan.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "core/plan_resolve.h"
#include "ksearch/strategies.h"
#include "search/search_util.h"

namespace ksearch {
namespace {

using Point = std::vector<int64_t>;  // one value per param of the template's space

struct Space {
  const TemplateSpec* spec = nullptr;
  int index = 0;
  std::vector<Point> enumerated;  // not yet proposed; empty when sampled
  bool sampled = false;
};

struct Proposal {
  const Space* space = nullptr;
  Point point;
  // Successive halving re-judges a candidate: the id it had.
  std::string reuse_id;
};

// Lower is better: log(median ms) when timed; when compile-only, log of the
// registers (the same fallback as Faster); +inf for a failed point.
double Energy(const Evaluation& e) {
  if (!e.ok()) return std::numeric_limits<double>::infinity();
  if (double ms = internal::MedianMs(e); ms > 0) return std::log(ms);
  int64_t regs = internal::TotalRegisters(e);
  if (regs == std::numeric_limits<int64_t>::max()) return 0.0;
  return std::log(static_cast<double>(std::max<int64_t>(regs, 1)));
}

class ParameterTuneSearch final : public Searcher {
 public:
  ParameterTuneSearch(SearchOptions options, ParameterTuneOptions tune)
      : options_(std::move(options)), tune_(tune) {}

  std::string name() const override { return "tune"; }
  StatusOr<SearchSummary> Run(SearchContext& context) override;

 private:
  bool Valid(const Space& space, const Point& point) const;
  Candidate Make(const Space& space, const Point& point, int round) const;
  std::string Key(const Space& space, const Point& point) const;
  // Marks the point proposed; false when it was proposed before or is invalid.
  bool Take(const Space& space, const Point& point);
  std::optional<Proposal> RandomPoint();
  std::vector<Point> Neighbours(const Space& space, const Point& point, bool pairs);

  std::vector<Proposal> RandomBatch(int count);
  std::vector<Proposal> AnnealingBatch(int count);
  std::vector<Proposal> HalvingBatch(int count);
  void AfterBatch(const std::vector<Proposal>& batch,
                  const std::vector<const HistoryEntry*>& results, int round);

  SearchOptions options_;
  ParameterTuneOptions tune_;
  // Per run.
  const Problem* problem_ = nullptr;
  std::mt19937_64 rng_;
  std::vector<Space> spaces_;
  std::set<std::string> seen_;
  std::optional<Proposal> best_point_;
  double best_energy_ = std::numeric_limits<double>::infinity();
  // Annealing.
  std::optional<Proposal> current_;
  double current_energy_ = std::numeric_limits<double>::infinity();
  double temperature_ = 0.0;
  // Successive halving: the bracket's survivors and their energies so far.
  struct Contender {
    Proposal proposal;
    std::string id;
    std::vector<double> energies;
  };
  std::vector<Contender> bracket_;
};

std::string ParameterTuneSearch::Key(const Space& space, const Point& point) const {
  std::string key = std::to_string(space.index);
  for (int64_t v : point) key += ":" + std::to_string(v);
  return key;
}

bool ParameterTuneSearch::Valid(const Space& space, const Point& point) const {
  LaunchPlan plan = space.spec->kernel.plan;
  for (size_t i = 0; i < point.size(); ++i) plan.SetParam(space.spec->space[i].first, point[i]);
  auto values = internal::PlanValues(*problem_, plan);
  for (const std::string& c : space.spec->constraints) {
    auto ok = EvaluateCondition(c, values);
    if (!ok.ok() || !*ok) return false;
  }
  return internal::ResolvePlan(*problem_, plan).ok();
}

Candidate ParameterTuneSearch::Make(const Space& space, const Point& point, int round) const {
  Candidate c = space.spec->kernel.ToCandidate("", "template");
  for (size_t i = 0; i < point.size(); ++i) c.plan.SetParam(space.spec->space[i].first, point[i]);
  c.provenance.round = round;
  c.provenance.generator = "template:" + space.spec->name;
  return c;
}

bool ParameterTuneSearch::Take(const Space& space, const Point& point) {
  std::string key = Key(space, point);
  if (seen_.count(key)) return false;
  seen_.insert(key);  // an invalid point is never worth a second look either
  return Valid(space, point);
}

std::optional<Proposal> ParameterTuneSearch::RandomPoint() {
  // Enumerated spaces run dry; sampled ones are tried a bounded number of times.
  for (int attempts = 0; attempts < 4000 && !spaces_.empty(); ++attempts) {
    Space& space = spaces_[rng_() % spaces_.size()];
    Point p;
    if (!space.sampled) {
      if (space.enumerated.empty()) {
        bool any = std::any_of(spaces_.begin(), spaces_.end(),
                               [](const Space& s) { return s.sampled || !s.enumerated.empty(); });
        if (!any) return std::nullopt;
        continue;
      }
      size_t pick = rng_() % space.enumerated.size();
      p = space.enumerated[pick];
      space.enumerated[pick] = space.enumerated.back();
      space.enumerated.pop_back();
    } else {
      for (const auto& [name, values] : space.spec->space) {
        p.push_back(values[rng_() % values.size()]);
      }
    }
    if (Take(space, p)) return Proposal{&space, p, ""};
  }
  return std::nullopt;
}

std::vector<Point> ParameterTuneSearch::Neighbours(const Space& space, const Point& point,
                                                   bool pairs) {
  std::vector<Point> out;
  auto step = [&](const Point& from, size_t d, int dir) -> std::optional<Point> {
    const auto& values = space.spec->space[d].second;
    auto it = std::find(values.begin(), values.end(), from[d]);
    if (it == values.end()) return std::nullopt;
    long pos = (it - values.begin()) + dir;
    if (pos < 0 || pos >= static_cast<long>(values.size())) return std::nullopt;
    Point p = from;
    p[d] = values[static_cast<size_t>(pos)];
    return p;
  };
  size_t dims = space.spec->space.size();
  for (size_t d = 0; d < dims; ++d) {
    for (int dir : {-1, 1}) {
      auto p = step(point, d, dir);
      if (!p) continue;
      out.push_back(*p);
      if (!pairs) continue;
      for (size_t e = d + 1; e < dims; ++e) {
        for (int dir2 : {-1, 1}) {
          if (auto q = step(*p, e, dir2)) out.push_back(*q);
        }
      }
    }
  }
  std::shuffle(out.begin(), out.end(), rng_);
  return out;
}

std::vector<Proposal> ParameterTuneSearch::RandomBatch(int count) {
  std::vector<Proposal> out;
  int local = best_point_ ? static_cast<int>(count * tune_.local_fraction) : 0;
  if (best_point_) {
    for (const Point& p : Neighbours(*best_point_->space, best_point_->point, false)) {
      if (static_cast<int>(out.size()) >= local) break;
      if (Take(*best_point_->space, p)) out.push_back({best_point_->space, p, ""});
    }
  }
  while (static_cast<int>(out.size()) < count) {
    auto p = RandomPoint();
    if (!p) break;
    out.push_back(*p);
  }
  return out;
}

std::vector<Proposal> ParameterTuneSearch::AnnealingBatch(int count) {
  std::vector<Proposal> out;
  if (current_) {
    // Single moves first; pairs of moves only when those are used up.
    for (bool pairs : {false, true}) {
      for (const Point& p : Neighbours(*current_->space, current_->point, pairs)) {
        if (static_cast<int>(out.size()) >= count) break;
        if (Take(*current_->space, p)) out.push_back({current_->space, p, ""});
      }
      if (!out.empty()) break;
    }
  }
  if (out.empty()) {
    // A restart: the neighbourhood is exhausted (or there is no current point).
    current_.reset();
    current_energy_ = std::numeric_limits<double>::infinity();
    while (static_cast<int>(out.size()) < count) {
      auto p = RandomPoint();
      if (!p) break;
      out.push_back(*p);
    }
  }
  return out;
}

std::vector<Proposal> ParameterTuneSearch::HalvingBatch(int count) {
  // A failed point is not worth measuring again.
  std::erase_if(bracket_, [](const Contender& c) {
    return std::any_of(c.energies.begin(), c.energies.end(),
                       [](double e) { return std::isinf(e); });
  });
  if (bracket_.size() > 1) {
    // Next rung: the better half, by mean energy so far, is judged again.
    auto mean = [](const Contender& c) {
      double sum = 0;
      for (double e : c.energies) sum += e;
      return sum / static_cast<double>(c.energies.size());
    };
    std::sort(bracket_.begin(), bracket_.end(), [&](const Contender& a, const Contender& b) {
      double ma = mean(a), mb = mean(b);
      if (ma != mb) return ma < mb;
      return a.id < b.id;
    });
    bracket_.resize((bracket_.size() + 1) / 2);
    if (bracket_.size() > 1) {
      std::vector<Proposal> out;
      for (const Contender& c : bracket_) {
        if (static_cast<int>(out.size()) >= count) break;
        Proposal p = c.proposal;
        p.reuse_id = c.id;
        out.push_back(std::move(p));
      }
      return out;
    }
  }
  bracket_.clear();
  std::vector<Proposal> out;
  while (static_cast<int>(out.size()) < count) {
    auto p = RandomPoint();
    if (!p) break;
    out.push_back(*p);
  }
  return out;
}

void ParameterTuneSearch::AfterBatch(const std::vector<Proposal>& batch,
                                     const std::vector<const HistoryEntry*>& results, int round) {
  for (size_t i = 0; i < batch.size(); ++i) {
    double energy = Energy(results[i]->evaluation);
    if (energy < best_energy_) {
      best_energy_ = energy;
      best_point_ = batch[i];
    }
  }
  switch (tune_.method) {
    case TuneMethod::kRandom:
      break;
    case TuneMethod::kAnnealing: {
      // The batch's best is the proposal; Metropolis decides whether to move.
      size_t pick = 0;
      for (size_t i = 1; i < batch.size(); ++i) {
        if (Energy(results[i]->evaluation) < Energy(results[pick]->evaluation)) pick = i;
      }
      if (batch.empty()) break;
      double energy = Energy(results[pick]->evaluation);
      if (std::isinf(energy)) break;
      std::uniform_real_distribution<double> uniform(0.0, 1.0);
      double t = std::max(temperature_, 1e-12);
      if (!current_ || energy <= current_energy_ ||
          uniform(rng_) < std::exp(-(energy - current_energy_) / t)) {
        current_ = batch[pick];
        current_energy_ = energy;
      }
      temperature_ *= tune_.cooling_rate;
      break;
    }
    case TuneMethod::kSuccessiveHalving: {
      bool fresh = batch.empty() || batch.front().reuse_id.empty();
      if (fresh) bracket_.clear();
      for (size_t i = 0; i < batch.size(); ++i) {
        double energy = Energy(results[i]->evaluation);
        if (fresh) {
          bracket_.push_back({batch[i], results[i]->candidate.id, {energy}});
        } else {
          for (Contender& c : bracket_) {
            if (c.id == batch[i].reuse_id) c.energies.push_back(energy);
          }
        }
      }
      break;
    }
  }
  (void)round;
}

StatusOr<SearchSummary> ParameterTuneSearch::Run(SearchContext& context) {
  if (!context.problem || !context.evaluator) {
    return InvalidArgumentError(
        "ParameterTuneSearch needs a problem and an evaluator in the context");
  }
  const Problem& problem = *context.problem;
  problem_ = &problem;
  rng_.seed(options_.seed);
  spaces_.clear();
  seen_.clear();
  best_point_.reset();
  best_energy_ = std::numeric_limits<double>::infinity();
  current_.reset();
  current_energy_ = std::numeric_limits<double>::infinity();
  temperature_ = tune_.initial_temperature;
  bracket_.clear();
  // Successive halving judges a candidate again on purpose.
  SearchRun::Options run_options;
  run_options.skip_duplicates = false;
  SearchRun run(context, options_.budget, name(), run_options);
  SearchSummary& summary = run.summary();
  spaces_.reserve(problem.templates.size());
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

  int64_t next_id = 0;
  for (int round = 0; run.MayStartRound(round); ++round) {
    int count = static_cast<int>(
        std::min<int64_t>(std::max(1, tune_.batch_size), run.CandidatesLeft()));
    std::vector<Candidate> batch;
    std::vector<Proposal> proposals;
    if (round == 0) {
      batch.push_back(problem.start.ToCandidate("", "start"));
      for (const Space& space : spaces_) {
        Point p;
        for (const auto& [param, values] : space.spec->space) {
          p.push_back(space.spec->kernel.plan.Param(param, values.front()));
        }
        if (static_cast<int>(batch.size()) < count && Take(space, p)) {
          proposals.push_back({&space, p, ""});
          batch.push_back(Make(space, p, round));
        }
      }
      // Annealing starts from the default point of the first template.
      if (!proposals.empty()) current_ = proposals.front();
    } else {
      switch (tune_.method) {
        case TuneMethod::kRandom:
          proposals = RandomBatch(count);
          break;
        case TuneMethod::kAnnealing:
          proposals = AnnealingBatch(count);
          break;
        case TuneMethod::kSuccessiveHalving:
          proposals = HalvingBatch(count);
          break;
      }
      for (const Proposal& p : proposals) {
        Candidate c = Make(*p.space, p.point, round);
        if (!p.reuse_id.empty()) c.id = p.reuse_id;
        batch.push_back(std::move(c));
      }
    }
    if (batch.empty()) {
      run.Stop(TerminationReason::kCompleted);
      break;
    }
    for (Candidate& c : batch) {
      if (c.id.empty()) c.id = "c" + std::to_string(next_id++);
    }
    std::vector<std::string> seed_ids;
    if (summary.best) seed_ids.push_back(summary.best->candidate.id);
    if (!run.BeginRound(round, seed_ids)) break;
    const size_t judged = batch.size();
    std::vector<const HistoryEntry*> results = run.Evaluate(std::move(batch));
    summary.rounds = round + 1;
    if (round == 0 && !results.empty()) summary.start = *results.front();
    // Round 0 begins with the starting kernel; the rest are the proposals.
    std::vector<const HistoryEntry*> point_results(
        results.begin() + (round == 0 && !results.empty() ? 1 : 0), results.end());
    if (results.size() == judged) AfterBatch(proposals, point_results, round);
    if (run.stopped() == TerminationReason::kFailed) break;
    run.EndRound(round);
  }
  return run.Finish();
}

}  // namespace

std::string_view ToString(TuneMethod method) {
  switch (method) {
    case TuneMethod::kRandom:
      return "random";
    case TuneMethod::kAnnealing:
      return "annealing";
    case TuneMethod::kSuccessiveHalving:
      return "halving";
  }
  return "unknown";
}

StatusOr<TuneMethod> ParseTuneMethod(std::string_view name) {
  if (name == "random") return TuneMethod::kRandom;
  if (name == "annealing" || name == "anneal") return TuneMethod::kAnnealing;
  if (name == "halving" || name == "successive_halving") return TuneMethod::kSuccessiveHalving;
  return InvalidArgumentError("unknown tuning method '" + std::string(name) +
                              "' (expected random, annealing or halving)");
}

std::unique_ptr<Searcher> MakeParameterTuneSearch(const SearchOptions& options,
                                                  const ParameterTuneOptions& tune) {
  return std::make_unique<ParameterTuneSearch>(options, tune);
}

}  // namespace ksearch
