// Timed runs that do the work. Before every run of the candidate (outside
// its events) the inputs are generated anew from a fresh secret seed, the
// outputs and workspace are poisoned and L2 is flushed, so no run can find its
// answer left over from an earlier one, skip work it has seen before, or
// prepare for inputs it could predict. An inout tensor is generated like an
// input: every run transforms fresh values, never an earlier run's result
// (which a kernel could recognise). The baseline runs interleaved on its own
// buffers, with its own fresh inputs.
//
// Budgets an adversary might spend on purpose (docs/evaluation.md, "Timing"):
//   - the warm-up has its own wall-time bound and is not charged to the
//     timing cap, so a kernel that is slow while warming up does not shrink
//     its timed sample;
//   - a candidate is judged on at least min_repetitions timed runs: one whose
//     runs do not fit in max_timing_seconds is kTimeout, never a smaller
//     sample;
//   - after each run a secret draw decides whether its outputs are checked
//     (TimingCheckProbability: every one of the first timing_checked_runs, then
//     fewer), and the last run always is: a kernel cannot tell a checked run
//     from an unchecked one, so a run it shortcuts is caught with that
//     probability, whatever it knows about the stop rule. The checks and the
//     baseline's runs are not charged to the cap (their cost is the
//     reference's and the library's, not the kernel's).
#include <algorithm>
#include <cstdio>

#include "eval/local_evaluator.h"
#include "eval/stats.h"

namespace ksearch::internal {
namespace {

std::string Seconds(double s) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g s", s);
  return text;
}

}  // namespace

void LocalEvaluator::TimeCandidate(PreparedPlan& plan, Evaluation* e) {
  auto start = EvalClock::now();
  auto judge_error = [&](const Status& s) { BreakJudge(e, "timing", s); };
  const size_t sets = problem_.input_sets.size();
  size_t run = 0;  // rotates the input sets
  size_t last_set = 0;
  uint64_t last_seed = 0;
  // One run of the candidate on fresh inputs.
  auto candidate_run = [&](double* ms) -> bool {
    size_t s = run++ % sets;
    const InputSet& set = problem_.input_sets[s];
    uint64_t seed = NextSeed();
    last_set = s;
    last_seed = seed;
    if (Status st = Generate(set, seed, cand_); !st.ok()) {
      judge_error(st);
      return false;
    }
    if (Status st = Poison(cand_, &plan); !st.ok()) {
      judge_error(st);
      return false;
    }
    if (Status st = FlushL2(); !st.ok()) {
      judge_error(st);
      return false;
    }
    RunFailure f = RunCandidate(plan, /*seal=*/false, /*timed=*/true, ms);
    if (!f.ok()) {
      Fail(e, f);
      return false;
    }
    return true;
  };
  // The outputs of the run just made, against the reference on its inputs;
  // the vault holds poison again afterwards.
  auto check_last_run = [&]() -> bool {
    if (!CheckOutputs(problem_.input_sets[last_set], last_set, last_seed, "timing", e)) return false;
    if (Status st = PoisonVault(); !st.ok()) {
      judge_error(st);
      return false;
    }
    return true;
  };
  if (Status st = PoisonVault(); !st.ok()) return judge_error(st);

  // Warm-up: module load and first-launch costs stay out of the figures.
  auto warm_deadline = start + std::chrono::duration<double>(options_.max_warmup_seconds);
  double warm = 0.0;
  int warm_runs = 0;
  while (warm < options_.warmup_ms || warm_runs < 1) {
    double ms = 0.0;
    if (!candidate_run(&ms)) return;
    warm += ms;
    ++warm_runs;
    if (warm_runs >= 1000 || EvalClock::now() > warm_deadline) break;
  }

  std::vector<double> cand_ms, base_ms;
  const bool with_baseline = options_.time_baseline;
  const double cap_ms = options_.max_timing_seconds * 1e3;
  auto timed_start = EvalClock::now();
  double uncharged_ms = 0.0;  // checks and baseline runs: the judge's time, not the kernel's
  int spot_checks = 0;
  bool last_checked = false;
  bool over_cap = false;
  while (static_cast<int>(cand_ms.size()) < options_.max_repetitions) {
    double ms = 0.0;
    if (!candidate_run(&ms)) return;
    cand_ms.push_back(ms);
    last_checked = secrets_.Chance(TimingCheckProbability(options_.timing_spot_check_probability,
                                                          options_.timing_checked_runs, cand_ms.size()));
    if (last_checked) {
      auto check_start = EvalClock::now();
      if (!check_last_run()) return;
      uncharged_ms += MsSince(check_start);
      ++spot_checks;
    }
    if (with_baseline) {
      auto baseline_start = EvalClock::now();
      RunFailure f;
      auto b = TimeBaselineOnce(problem_.input_sets[(run - 1) % sets], &f);
      if (!b.ok()) return judge_error(b.status());
      if (!f.ok()) return judge_error(InternalError("baseline: " + f.message));
      base_ms.push_back(*b);
      uncharged_ms += MsSince(baseline_start);
    }
    if (MsSince(timed_start) - uncharged_ms > cap_ms) {
      over_cap = true;
      break;
    }
    if (static_cast<int>(cand_ms.size()) >= options_.min_repetitions && cand_ms.size() % 5 == 0) {
      bool precise = MedianIsPrecise(Summarize(cand_ms), options_.target_ci_fraction);
      if (precise && with_baseline) {
        precise = MedianIsPrecise(Summarize(base_ms), options_.target_ci_fraction);
      }
      if (precise) break;
    }
  }
  // The last timed run is always checked: its outputs are still there.
  if (!last_checked) {
    if (!check_last_run()) return;
    ++spot_checks;
  }
  if (over_cap && static_cast<int>(cand_ms.size()) < options_.min_repetitions) {
    // Judged on fewer runs, the median would be the kernel's choice.
    TimingStats partial = Summarize(cand_ms);
    char text[400];
    std::snprintf(text, sizeof(text),
                  "only %zu of the %d timed runs a figure needs (EvaluatorOptions::min_repetitions) fit in the "
                  "timing cap of %s (median run %.4g ms, %d warm-up runs before)",
                  cand_ms.size(), options_.min_repetitions, Seconds(options_.max_timing_seconds).c_str(),
                  partial.median_ms, warm_runs);
    e->status = EvalStatus::kTimeout;
    e->message = text;
    e->timing_ms = MsSince(start);
    return;
  }
  e->timing = Summarize(cand_ms);
  if (with_baseline) {
    e->baseline_timing = Summarize(base_ms);
    Speedup s = PairedSpeedup(cand_ms, base_ms);
    s.baseline = baseline_name_;
    e->speedup = s;
  }
  e->details += (e->details.empty() ? "" : "\n") + std::to_string(spot_checks) + " of " +
                std::to_string(cand_ms.size()) + " timed runs had their outputs checked";
  e->floor_ms = floor_ms_;
  e->roofline_fraction = e->timing->median_ms > 0 ? floor_ms_ / e->timing->median_ms : 0.0;
  e->timing_ms = MsSince(start);
}

}  // namespace ksearch::internal
