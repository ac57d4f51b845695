#include "core/shape_cases.h"

#include <algorithm>
#include <cstdio>

namespace ksearch::internal {

void CombineTimedCases(const std::vector<CaseResult>& cases, const std::vector<size_t>& which,
                       Evaluation* e) {
  double weights = 0.0, candidate = 0.0, baseline = 0.0, ratio = 0.0, low = 0.0, high = 0.0;
  double floor = 0.0;
  TimingStats timing, base;
  timing.repetitions = base.repetitions = -1;
  Speedup speedup;
  speedup.pairs = -1;
  bool all_speedups = true;
  for (size_t i : which) {
    const CaseResult& c = cases[i];
    if (!c.timed || c.median_ms <= 0) continue;
    const double w = c.weight;
    weights += w;
    timing.median_ms += w * c.median_ms;
    timing.min_ms += w * c.min_ms;
    timing.p10_ms += w * c.p10_ms;
    timing.p90_ms += w * c.p90_ms;
    timing.ci_low_ms += w * c.ci_low_ms;
    timing.ci_high_ms += w * c.ci_high_ms;
    floor += w * c.floor_ms;
    auto fewest = [](int have, int more) { return have < 0 ? more : std::min(have, more); };
    timing.repetitions = fewest(timing.repetitions, c.repetitions);
    if (c.speedup <= 0) {
      all_speedups = false;
      continue;
    }
    baseline += w * c.baseline_median_ms;
    base.repetitions = fewest(base.repetitions, c.repetitions);
    // Each case's paired ratio, weighted by the candidate's share of the
    // weighted time: the ratio of the weighted times.
    const double share = w * c.median_ms;
    candidate += share;
    ratio += share * c.speedup;
    low += share * c.speedup_ci_low;
    high += share * c.speedup_ci_high;
    speedup.baseline = c.baseline;
    speedup.pairs = fewest(speedup.pairs, c.repetitions);
  }
  if (weights <= 0) return;
  for (double* v : {&timing.median_ms, &timing.min_ms, &timing.p10_ms, &timing.p90_ms,
                    &timing.ci_low_ms, &timing.ci_high_ms}) {
    *v /= weights;
  }
  e->timing = timing;
  e->floor_ms = floor / weights;
  e->roofline_fraction = timing.median_ms > 0 ? e->floor_ms / timing.median_ms : 0.0;
  if (!all_speedups || candidate <= 0) return;
  base.median_ms = baseline / weights;
  e->baseline_timing = base;
  speedup.ratio = ratio / candidate;
  speedup.ci_low = low / candidate;
  speedup.ci_high = high / candidate;
  e->speedup = speedup;
}

size_t BucketOfCase(const Problem& problem, size_t index) {
  if (!problem.dispatch.enabled()) return 0;
  for (const auto& [name, value] : problem.CaseDims(index)) {
    if (name == problem.dispatch.dim) return problem.dispatch.BucketOf(value);
  }
  return 0;
}

Evaluation BucketEvaluation(const Problem& problem, const Evaluation& e, size_t bucket) {
  Evaluation out = e;
  out.cases.clear();
  out.timing.reset();
  out.baseline_timing.reset();
  out.speedup.reset();
  out.floor_ms = out.roofline_fraction = 0.0;
  const std::string name = problem.dispatch.BucketName(bucket);
  if (e.cases.size() != problem.shapes.size()) {
    if (e.ok()) {
      out.status = EvalStatus::kInvalidPlan;
      out.message = "bucket " + name + ": the evaluation has " + std::to_string(e.cases.size()) +
                    " shape cases, the problem " + std::to_string(problem.shapes.size());
    }
    return out;
  }
  std::vector<size_t> members;
  for (size_t i = 0; i < problem.shapes.size(); ++i) {
    if (BucketOfCase(problem, i) == bucket) members.push_back(i);
  }
  for (size_t i : members) out.cases.push_back(e.cases[i]);
  for (size_t i : members) {
    const CaseResult& c = e.cases[i];
    if (c.status == EvalStatus::kOk || c.status == EvalStatus::kCompiled) continue;
    out.status = c.status;
    out.message = "bucket " + name + ": at case '" + c.name + "': " + c.message;
    return out;
  }
  out.status = members.empty() ? EvalStatus::kCancelled : e.cases[members[0]].status;
  out.mismatch.reset();
  CombineTimedCases(e.cases, members, &out);
  char text[200];
  std::snprintf(text, sizeof(text), "bucket %s: correct at its %zu shape cases; weighted median %.4f ms",
                name.c_str(), members.size(), out.timing ? out.timing->median_ms : 0.0);
  out.message = text;
  if (out.speedup) {
    std::snprintf(text, sizeof(text), ", %.3fx vs %s", out.speedup->ratio, out.speedup->baseline.c_str());
    out.message += text;
  }
  return out;
}

}  // namespace ksearch::internal
