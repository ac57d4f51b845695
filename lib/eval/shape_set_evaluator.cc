#include "eval/shape_set_evaluator.h"

#include "core/shape_cases.h"

#include <algorithm>
#include <cstdio>

namespace ksearch::internal {
namespace {

std::string DimsText(const std::vector<std::pair<std::string, int64_t>>& dims) {
  std::string out;
  for (const auto& [name, value] : dims) out += (out.empty() ? "" : " ") + name + "=" + std::to_string(value);
  return out;
}

// A failure that leaves the judge's state in doubt: the candidate is judged
// no further, even where buckets would have it judged at every case.
bool EndsJudging(EvalStatus status) {
  return status == EvalStatus::kCrashed || status == EvalStatus::kTimeout ||
         status == EvalStatus::kCancelled || status == EvalStatus::kCompileError;
}

}  // namespace

ShapeSetEvaluator::ShapeSetEvaluator(Problem problem, EvaluatorOptions options)
    : problem_(std::move(problem)), options_(std::move(options)) {}

Status ShapeSetEvaluator::Initialize() {
  KSEARCH_RETURN_IF_ERROR(problem_.Validate().WithContext("problem '" + problem_.name + "'"));
  cases_ = problem_.Cases();
  for (size_t c = 0; c < cases_.size(); ++c) {
    if (cases_[c].timed) {
      first_timed_ = c;
      break;
    }
  }
  for (size_t c = 0; c < cases_.size(); ++c) {
    std::string where = "shape case '" + cases_[c].name + "' (" + DimsText(problem_.CaseDims(c)) + ")";
    KSEARCH_ASSIGN_OR_RETURN(Problem at, problem_.AtCase(c));
    EvaluatorOptions options = options_;
    if (!cases_[c].timed) options.time_baseline = false;
    auto evaluator = std::make_unique<LocalEvaluator>(std::move(at), options);
    evaluator->set_check_only(!cases_[c].timed);
    // The peaks belong to the device: measured once, by the first case.
    if (!evaluators_.empty()) evaluator->set_measured_peaks(evaluators_.front()->device());
    KSEARCH_RETURN_IF_ERROR(evaluator->Initialize().WithContext(where));
    // Its calibration is done: out of reach of the next case's kernels.
    KSEARCH_RETURN_IF_ERROR(evaluator->Park().WithContext(where));
    evaluators_.push_back(std::move(evaluator));
  }
  return Status::Ok();
}

const DeviceInfo& ShapeSetEvaluator::device() const { return evaluators_[first_timed_]->device(); }

std::optional<TimingStats> ShapeSetEvaluator::reference_timing() const {
  return evaluators_[first_timed_]->reference_timing();
}

std::optional<TimingStats> ShapeSetEvaluator::baseline_timing() const {
  return evaluators_[first_timed_]->baseline_timing();
}

Status ShapeSetEvaluator::health() const {
  for (size_t c = 0; c < evaluators_.size(); ++c) {
    Status h = evaluators_[c]->health();
    if (!h.ok()) return h.WithContext("shape case '" + cases_[c].name + "'");
  }
  return Status::Ok();
}

Status ShapeSetEvaluator::Activate(size_t active) {
  for (size_t c = 0; c < evaluators_.size(); ++c) {
    if (c != active) KSEARCH_RETURN_IF_ERROR(evaluators_[c]->Park());
  }
  return evaluators_[active]->Unpark();
}

std::vector<Evaluation> ShapeSetEvaluator::Evaluate(std::span<const Candidate> candidates,
                                                    const std::atomic<bool>* cancel) {
  return EvaluateWith(candidates, {}, cancel);
}

std::vector<Evaluation> ShapeSetEvaluator::EvaluateWith(std::span<const Candidate> candidates,
                                                        std::span<const CompileResult> precompiled,
                                                        const std::atomic<bool>* cancel) {
  std::lock_guard<std::mutex> lock(mutex_);
  const size_t n = candidates.size();
  std::vector<Evaluation> out(n);
  // A case whose judge broke (a hung kernel may still run on the device)
  // must not be followed by another case's GPU work.
  if (Status h = health(); !h.ok()) {
    for (size_t i = 0; i < n; ++i) {
      out[i].candidate_id = candidates[i].id;
      out[i].content_hash = candidates[i].ContentHash();
      out[i].status = EvalStatus::kCancelled;
      out[i].message = "not judged: " + h.message();
    }
    return out;
  }
  // One compile serves every case: dims are launch arguments, not defines.
  std::vector<double> wall(n, 0.0);
  std::vector<StatusOr<CompileResult>> compiled;
  if (precompiled.empty()) {
    compiled = evaluators_[0]->CompileAll(candidates, cancel, &wall);
  } else {
    compiled.assign(precompiled.begin(), precompiled.end());
  }
  std::vector<std::vector<Evaluation>> at(n, std::vector<Evaluation>(cases_.size()));
  std::vector<std::vector<bool>> judged(n, std::vector<bool>(cases_.size(), false));
  std::vector<bool> stopped(n, false);
  for (size_t i = 0; i < n; ++i) {
    if (compiled[i].ok()) continue;
    // NVRTC could not be used at all: case 0 reports it like any evaluator.
    stopped[i] = true;
    out[i] = evaluators_[0]->EvaluateWith(candidates.subspan(i, 1), {}, cancel)[0];
  }
  for (size_t c = 0; c < cases_.size(); ++c) {
    std::vector<size_t> pending;
    for (size_t i = 0; i < n; ++i) {
      if (!stopped[i]) pending.push_back(i);
    }
    if (pending.empty()) break;
    if (Status st = Activate(c); !st.ok()) {
      for (size_t i : pending) {
        at[i][c].status = EvalStatus::kCancelled;
        at[i][c].message = "not judged: the judge failed sealing the other cases' vaults: " + st.message();
        judged[i][c] = true;
        stopped[i] = true;
      }
      break;
    }
    std::vector<Candidate> subset;
    std::vector<CompileResult> subset_compiled;
    for (size_t i : pending) {
      subset.push_back(candidates[i]);
      subset_compiled.push_back(*compiled[i]);
    }
    int resets = evaluators_[c]->context_resets();
    std::vector<Evaluation> results = evaluators_[c]->EvaluateWith(subset, subset_compiled, cancel);
    if (evaluators_[c]->context_resets() != resets) {
      // A crash reset the primary context under every other case.
      for (size_t other = 0; other < evaluators_.size(); ++other) {
        if (other == c) continue;
        static_cast<void>(evaluators_[other]->RebuildDevice());
      }
    }
    const bool broken = !evaluators_[c]->health().ok();
    for (size_t k = 0; k < pending.size(); ++k) {
      size_t i = pending[k];
      at[i][c] = std::move(results[k]);
      judged[i][c] = true;
      EvalStatus s = at[i][c].status;
      if (broken || (s != EvalStatus::kOk && s != EvalStatus::kCompiled &&
                     (!problem_.dispatch.enabled() || EndsJudging(s)))) {
        stopped[i] = true;
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    std::vector<const Evaluation*> per_case(cases_.size(), nullptr);
    bool any = false;
    for (size_t c = 0; c < cases_.size(); ++c) {
      if (judged[i][c]) {
        per_case[c] = &at[i][c];
        any = true;
      }
    }
    if (!any) continue;  // filled above (NVRTC could not be used)
    out[i] = Combine(per_case);
    if (precompiled.empty() && compiled[i].ok()) {
      out[i].compile_cached = compiled[i]->cached;
      out[i].compile_ms = compiled[i]->cached ? wall[i] : compiled[i]->compile_ms;
      out[i].total_ms += out[i].compile_ms;
    }
  }
  return out;
}

Evaluation ShapeSetEvaluator::Combine(const std::vector<const Evaluation*>& at_case) const {
  Evaluation e;
  const Evaluation* first = nullptr;
  const Evaluation* failed = nullptr;
  size_t failed_case = 0;
  for (size_t c = 0; c < cases_.size(); ++c) {
    const Evaluation* r = at_case[c];
    if (!r) continue;
    if (!first) first = r;
    if (!failed && !r->ok()) {
      failed = r;
      failed_case = c;
    }
  }
  e.candidate_id = first->candidate_id;
  e.content_hash = first->content_hash;
  e.device = device();
  e.resources = first->resources;
  e.relaxed_tolerance = first->relaxed_tolerance;
  for (size_t c = 0; c < cases_.size(); ++c) {
    const ShapeCase& sc = cases_[c];
    CaseResult r;
    r.name = sc.name;
    r.dims = problem_.CaseDims(c);
    r.timed = sc.timed;
    r.weight = sc.timed ? sc.weight : 0.0;
    const Evaluation* x = at_case[c];
    if (!x) {
      r.status = EvalStatus::kCancelled;
      r.message = failed ? "not judged at this case: the kernel failed at case '" +
                               cases_[failed_case].name + "' first"
                         : "not judged at this case";
      e.cases.push_back(std::move(r));
      continue;
    }
    r.status = x->status;
    r.message = x->message;
    r.max_l2_rel_error = x->max_l2_rel_error;
    r.allowed_l2_rel_error = x->allowed_l2_rel_error;
    r.floor_ms = x->floor_ms;
    if (x->timing) {
      r.median_ms = x->timing->median_ms;
      r.min_ms = x->timing->min_ms;
      r.p10_ms = x->timing->p10_ms;
      r.p90_ms = x->timing->p90_ms;
      r.ci_low_ms = x->timing->ci_low_ms;
      r.ci_high_ms = x->timing->ci_high_ms;
      r.repetitions = x->timing->repetitions;
    }
    if (x->baseline_timing) r.baseline_median_ms = x->baseline_timing->median_ms;
    if (x->speedup) {
      r.baseline = x->speedup->baseline;
      r.speedup = x->speedup->ratio;
      r.speedup_ci_low = x->speedup->ci_low;
      r.speedup_ci_high = x->speedup->ci_high;
    }
    e.check_ms += x->check_ms;
    e.timing_ms += x->timing_ms;
    e.total_ms += x->total_ms;
    e.max_l2_rel_error = std::max(e.max_l2_rel_error, x->max_l2_rel_error);
    e.allowed_l2_rel_error = std::max(e.allowed_l2_rel_error, x->allowed_l2_rel_error);
    if (!x->device_log.empty()) e.device_log += "[case " + sc.name + "]\n" + x->device_log;
    if (!x->details.empty()) e.details += (e.details.empty() ? "" : "\n") + ("[case " + sc.name + "] ") + x->details;
    for (const std::string& check : x->checks_not_run) {
      if (std::find(e.checks_not_run.begin(), e.checks_not_run.end(), check) == e.checks_not_run.end()) {
        e.checks_not_run.push_back(check);
      }
    }
    e.cases.push_back(std::move(r));
  }
  if (failed) {
    e.status = failed->status;
    e.message = "at case '" + cases_[failed_case].name + "' (" + DimsText(problem_.CaseDims(failed_case)) +
                "): " + failed->message;
    e.mismatch = failed->mismatch;
    return e;
  }
  for (size_t c = 0; c < cases_.size(); ++c) {
    if (at_case[c]) continue;
    // Right where it was judged, but not judged everywhere (the judge broke).
    Status h = health();
    e.status = EvalStatus::kCancelled;
    e.message = "not judged at case '" + cases_[c].name + "'" + (h.ok() ? "" : ": " + h.message());
    return e;
  }
  e.status = first->status;  // kOk, or kCompiled for a compile-only judge
  if (e.status == EvalStatus::kCompiled) {
    e.message = first->message + " at " + std::to_string(cases_.size()) + " shape cases";
    return e;
  }
  std::vector<size_t> all(cases_.size());
  for (size_t c = 0; c < all.size(); ++c) all[c] = c;
  CombineTimedCases(e.cases, all, &e);
  char text[240];
  std::snprintf(text, sizeof(text), "correct at %zu shape cases; weighted median %.4f ms",
                cases_.size(), e.timing ? e.timing->median_ms : 0.0);
  e.message = text;
  if (e.speedup) {
    std::snprintf(text, sizeof(text), ", %.3fx vs %s", e.speedup->ratio, e.speedup->baseline.c_str());
    e.message += text;
  }
  if (e.relaxed_tolerance) e.message += " [relaxed tolerance]";
  return e;
}

}  // namespace ksearch::internal
