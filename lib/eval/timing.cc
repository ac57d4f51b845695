// Timed runs that do the work. Before every run of the candidate (outside
// its events) the inputs are generated anew from a fresh seed, the outputs
// and workspace are poisoned and L2 is flushed, so no run can find its
// answer left over from an earlier one or skip work it has seen before. An
// inout tensor is generated like an input: every run transforms fresh
// values, never an earlier run's result (which a kernel could recognise). Runs
// are checked at random (timing_spot_check_probability; the candidate cannot
// know which) and the last one always; a failure there is wrong_result /
// unwritten_output with phase "timing". The baseline runs interleaved on its own buffers, with its own
// fresh inputs. Warm-up, runs and spot checks stop at max_timing_seconds.
#include <algorithm>
#include <cstdio>

#include "eval/local_evaluator.h"
#include "eval/stats.h"

namespace ksearch::internal {

void LocalEvaluator::TimeCandidate(PreparedPlan& plan, Evaluation* e) {
  auto start = EvalClock::now();
  auto deadline = start + std::chrono::duration<double>(options_.max_timing_seconds);
  auto judge_error = [&](const Status& s) { BreakJudge(e, "timing", s); };
  const size_t sets = problem_.input_sets.size();
  size_t run = 0;  // rotates the input sets
  size_t last_set = 0;
  uint64_t last_seed = 0;
  // One run of the candidate on fresh inputs; spot-checked when `check`.
  auto candidate_run = [&](bool check, double* ms) -> bool {
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
    if (!check) return true;
    if (!CheckOutputs(set, s, seed, "timing", e)) return false;
    if (Status st = PoisonVault(); !st.ok()) {
      judge_error(st);
      return false;
    }
    return true;
  };
  if (Status st = PoisonVault(); !st.ok()) return judge_error(st);

  // Warm-up: module load and first-launch costs stay out of the figures.
  double warm = 0.0;
  for (int runs = 0; warm < options_.warmup_ms || runs < 1; ++runs) {
    double ms = 0.0;
    if (!candidate_run(false, &ms)) return;
    warm += ms;
    if (runs >= 1000 || EvalClock::now() > deadline) break;
  }
  std::vector<double> cand_ms, base_ms;
  const bool with_baseline = options_.time_baseline;
  std::bernoulli_distribution spot(std::clamp(options_.timing_spot_check_probability, 0.0, 1.0));
  int spot_checks = 0;
  bool last_checked = false;
  while (static_cast<int>(cand_ms.size()) < options_.max_repetitions) {
    last_checked = spot(rng_);
    spot_checks += last_checked;
    double ms = 0.0;
    if (!candidate_run(last_checked, &ms)) return;
    cand_ms.push_back(ms);
    if (with_baseline) {
      RunFailure f;
      auto b = TimeBaselineOnce(problem_.input_sets[(run - 1) % sets], &f);
      if (!b.ok()) return judge_error(b.status());
      if (!f.ok()) return judge_error(InternalError("baseline: " + f.message));
      base_ms.push_back(*b);
    }
    if (EvalClock::now() > deadline) break;
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
    if (!CheckOutputs(problem_.input_sets[last_set], last_set, last_seed, "timing", e)) return;
    ++spot_checks;
  }
  if (Status st = PoisonVault(); !st.ok()) return judge_error(st);
  e->timing = Summarize(cand_ms);
  if (with_baseline) {
    e->baseline_timing = Summarize(base_ms);
    Speedup s = PairedSpeedup(cand_ms, base_ms);
    s.baseline = baseline_name_;
    e->speedup = s;
  }
  if (static_cast<int>(cand_ms.size()) < options_.min_repetitions) {
    e->details += (e->details.empty() ? "" : "\n") + std::string("timing stopped at the cap of ") +
                  std::to_string(options_.max_timing_seconds) + " s after " +
                  std::to_string(cand_ms.size()) + " runs (min_repetitions " +
                  std::to_string(options_.min_repetitions) + ")";
  }
  e->details += (e->details.empty() ? "" : "\n") + std::to_string(spot_checks) + " of " +
                std::to_string(cand_ms.size()) + " timed runs had their outputs checked";
  e->floor_ms = floor_ms_;
  e->roofline_fraction = e->timing->median_ms > 0 ? floor_ms_ / e->timing->median_ms : 0.0;
  e->timing_ms = MsSince(start);
}

}  // namespace ksearch::internal
