// The checks of a candidate's outputs: on every input set, the reference runs
// first on the vault's inputs; the candidate runs on its own copy with the
// vault sealed; then its inputs must be unchanged, its outputs (and inout
// tensors) must match the reference's, and a second run on the same inputs
// (inout tensors generated again) must agree with the first.
#include <cmath>
#include <cstdio>

#include "eval/local_evaluator.h"

namespace ksearch::internal {

Mismatch LocalEvaluator::DescribeMismatch(const TensorSpec& spec, size_t t, const InputSet& set,
                                          const std::string& phase, const Comparison& c, const SetTolerance& tol,
                                          CUdeviceptr want) {
  Mismatch m;
  m.tensor = spec.name;
  m.input_set = set.name;
  m.phase = phase;
  m.bad_count = static_cast<int64_t>(c.raw.bad);
  m.elements = elements_[t];
  m.worst_index = c.raw.worst ? static_cast<int64_t>(c.raw.worst & 0xffffffffull) : -1;
  m.max_rel_error = c.max_rel;
  m.l2_rel_error = c.l2;
  m.allowed_l2_rel_error = tol.allowed_l2;
  if (m.worst_index >= 0) {
    m.expected = ReadElement(want, spec.dtype, m.worst_index).value_or(NAN);
    m.got = ReadElement(cand_.ptr[t], spec.dtype, m.worst_index).value_or(NAN);
  }
  return m;
}

bool LocalEvaluator::Mismatched(const TensorSpec& spec, size_t t, const InputSet& set,
                                const std::string& phase, const Comparison& c,
                                const SetTolerance& tol, CUdeviceptr want, Evaluation* e) {
  bool l2_bad = !(c.l2 <= tol.allowed_l2);
  if (c.raw.bad == 0 && !l2_bad) {
    e->max_l2_rel_error = std::max(e->max_l2_rel_error, c.l2);
    e->allowed_l2_rel_error = std::max(e->allowed_l2_rel_error, tol.allowed_l2);
    return false;
  }
  e->mismatch = DescribeMismatch(spec, t, set, phase, c, tol, want);
  if (c.raw.unwritten > 0) {
    e->status = EvalStatus::kUnwrittenOutput;
    e->message = std::to_string(c.raw.unwritten) + " of " + std::to_string(elements_[t]) +
                 " elements of '" + spec.name + "' were never written (poison survived; input set '" +
                 set.name + "', " + phase + ")";
  } else {
    e->status = EvalStatus::kWrongResult;
    char text[320];
    std::snprintf(text, sizeof(text),
                  "'%s' differs from the reference on '%s' inputs (%s): %lld bad elements "
                  "(|got-want| > %.3g + %.3g*|want|), L2 relative error %.3g (allowed %.3g)",
                  spec.name.c_str(), set.name.c_str(), phase.c_str(),
                  static_cast<long long>(c.raw.bad), tol.elementwise_scale * tol.atol, tol.Rtol(spec.dtype), c.l2,
                  tol.allowed_l2);
    e->message = text;
    if (c.raw.nonfinite_got > 0) {
      e->message += ", " + std::to_string(c.raw.nonfinite_got) +
                    " of them NaN or Inf where the reference is finite";
    }
    if (tol.library_l2 >= 0) {
      std::snprintf(text, sizeof(text),
                    "; %s on the same inputs: L2 relative error %.3g, worst element %.3g atol past the relative "
                    "bound (%.3g at most on this set's calibration inputs)",
                    baseline_name_.c_str(), tol.library_l2, tol.library_worst, tol.library_worst_calibrated);
      e->message += text;
    }
  }
  return true;
}

StatusOr<bool> LocalEvaluator::TooInexact(const TensorSpec& spec, size_t t, const InputSet& set,
                                          const std::string& phase, const SetTolerance& tol, CUdeviceptr want,
                                          const GroupAtol& groups, Evaluation* e) {
  if (!(tol.allowed_inexact_fraction < 1.0) || (spec.dtype != DType::kF16 && spec.dtype != DType::kBF16)) {
    return false;
  }
  // rtol 0: every element more than atol from the correctly rounded answer,
  // one rounding step apart included. An honest fp32 accumulation lands on
  // the other side of a rounding boundary about as rarely as the twin; a
  // half-precision accumulation or a truncating conversion does it on a
  // large share of the elements while staying within a step or two of each.
  KSEARCH_ASSIGN_OR_RETURN(Comparison c,
                           Compare(cand_.ptr[t], want, elements_[t], spec.dtype, tol.atol, 0.0, nullptr, 0.0, groups));
  double fraction = static_cast<double>(c.raw.bad) / static_cast<double>(elements_[t]);
  if (fraction <= tol.allowed_inexact_fraction) return false;
  e->mismatch = DescribeMismatch(spec, t, set, phase, c, tol, want);
  e->status = EvalStatus::kWrongResult;
  // What the share is held to: the library on the same inputs (library
  // policy), or the fp32 twin.
  const bool library = tol.library_inexact_fraction >= 0;
  const std::string measure = library ? baseline_name_ + " on the same inputs" : "the fp32 twin";
  char text[400];
  std::snprintf(text, sizeof(text),
                "'%s' (%s) differs from the correctly rounded reference on '%s' inputs (%s) in %lld of %lld "
                "elements (%.3g%%; %s in %.3g%%, allowed %.3g%%): more rounding errors than %s",
                spec.name.c_str(), std::string(ToString(spec.dtype)).c_str(), set.name.c_str(), phase.c_str(),
                static_cast<long long>(c.raw.bad), static_cast<long long>(elements_[t]), 100 * fraction,
                measure.c_str(), 100 * (library ? tol.library_inexact_fraction : tol.twin_inexact_fraction),
                100 * tol.allowed_inexact_fraction,
                library ? "the library" : "an fp32 accumulation rounded once");
  e->message = text;
  return true;
}

bool LocalEvaluator::CheckOutputs(const InputSet& set, size_t set_index, uint64_t seed,
                                  const std::string& phase, Evaluation* e) {
  SetTolerance tol = tolerances_[set_index];
  auto judge_error = [&](const Status& s) {
    BreakJudge(e, phase, s);
    return false;
  };
  // The same seed gives the same bits: the vault gets the inputs the
  // candidate saw, as generated, and the reference's answer for them.
  if (Status st = RunReference(set, seed); !st.ok()) return judge_error(st);
  auto modified = InputsDiffer(cand_, ref_);
  if (!modified.ok()) return judge_error(modified.status());
  if (*modified) {
    e->status = EvalStatus::kInputModified;
    e->message = "the candidate wrote into an input tensor (input set '" + set.name + "', " +
                 phase + ")";
    return false;
  }
  if (problem_.tolerance.policy == TolerancePolicy::kLibrary) {
    // The library on the very inputs the candidate saw sets this check's
    // bound: a kernel cannot be sloppy where the library happens to be exact.
    auto widened = LibraryTolerance(set, tol);
    if (!widened.ok()) return judge_error(widened.status());
    tol = *widened;
    library_widest_.library_l2 = std::max(library_widest_.library_l2, tol.library_l2);
    library_widest_.library_inexact_fraction =
        std::max(library_widest_.library_inexact_fraction, tol.library_inexact_fraction);
    library_widest_.library_worst = std::max(library_widest_.library_worst, tol.library_worst);
    library_widest_.library_worst_calibrated =
        std::max(library_widest_.library_worst_calibrated, tol.library_worst_calibrated);
    library_widest_.elementwise_scale = std::max(library_widest_.elementwise_scale, tol.elementwise_scale);
  }
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    const TensorSpec& spec = problem_.tensors[t];
    if (!IsWritten(spec.role)) continue;
    auto groups = GroupTolerance(set, t, ref_.ptr[t]);
    if (!groups.ok()) return judge_error(groups.status());
    auto c = Compare(cand_.ptr[t], ref_.ptr[t], elements_[t], spec.dtype, tol.atol, tol.Rtol(spec.dtype),
                     nullptr, 0.0, *groups, tol.elementwise_scale);
    if (!c.ok()) return judge_error(c.status());
    if (problem_.tolerance.policy == TolerancePolicy::kLibrary) {
      candidate_worst_ = std::max(candidate_worst_, c->max_excess);
      candidate_worst_share_ = std::max(candidate_worst_share_, c->max_excess / tol.elementwise_scale);
    }
    auto allowed = AllowedL2(tol, t, ref_.ptr[t], c->l2);
    if (!allowed.ok()) return judge_error(allowed.status());
    SetTolerance tol_t = tol;
    tol_t.allowed_l2 = *allowed;
    if (Mismatched(spec, t, set, phase, *c, tol_t, ref_.ptr[t], e)) {
      if (groups->axis != 0 && e->status == EvalStatus::kWrongResult) {
        char text[160];
        std::snprintf(text, sizeof(text), "; '%s' scales its inputs per %s, so atol is at most %.3g x the RMS of each %s of the expected output",
                      set.name.c_str(), groups->axis == 1 ? "row" : "column",
                      problem_.tolerance.atol_rms_fraction, groups->axis == 1 ? "row" : "column");
        e->message += text;
      }
      return false;
    }
    auto inexact = TooInexact(spec, t, set, phase, tol_t, ref_.ptr[t], *groups, e);
    if (!inexact.ok()) return judge_error(inexact.status());
    if (*inexact) return false;
  }
  return true;
}

bool LocalEvaluator::CheckCorrectness(PreparedPlan& plan, const std::string& phase,
                                      Evaluation* e) {
  auto judge_error = [&](const Status& s) {
    BreakJudge(e, phase, s);
    return false;
  };
  int trials = phase == "check" ? std::max(1, options_.trials_per_input_set) : 1;
  for (size_t s = 0; s < problem_.input_sets.size(); ++s) {
    const InputSet& set = problem_.input_sets[s];
    const SetTolerance& tol = tolerances_[s];
    for (int trial = 0; trial < trials; ++trial) {
      if (OverBudget(*e)) return false;
      uint64_t seed = NextSeed();
      if (Status st = Generate(set, seed, cand_); !st.ok()) return judge_error(st);
      if (Status st = Poison(cand_, &plan); !st.ok()) return judge_error(st);
      RunFailure f = RunCandidate(plan, /*seal=*/true, /*timed=*/false, nullptr);
      if (!f.ok()) {
        Fail(e, f);
        return false;
      }
      if (!CheckOutputs(set, s, seed, phase, e)) return false;
      if (phase != "check") continue;
      // Determinism, on every set: the same inputs again (the candidate's
      // copy is regenerated from the seed), and the outputs must agree.
      if (OverBudget(*e)) return false;
      if (Status st = CopyOutputs(cand_, scratch_); !st.ok()) return judge_error(st);
      if (Status st = Generate(set, seed, cand_); !st.ok()) return judge_error(st);
      if (Status st = Poison(cand_, &plan); !st.ok()) return judge_error(st);
      f = RunCandidate(plan, /*seal=*/true, /*timed=*/false, nullptr);
      if (!f.ok()) {
        Fail(e, f);
        return false;
      }
      for (size_t t = 0; t < problem_.tensors.size(); ++t) {
        const TensorSpec& spec = problem_.tensors[t];
        if (!IsWritten(spec.role)) continue;
        auto c = Compare(cand_.ptr[t], scratch_.ptr[t], elements_[t], spec.dtype, tol.atol,
                         tol.Rtol(spec.dtype));
        if (!c.ok()) return judge_error(c.status());
        if (c->raw.bad > 0 || !(c->l2 <= tol.allowed_l2)) {
          e->status =
              c->raw.unwritten > 0 ? EvalStatus::kUnwrittenOutput : EvalStatus::kNondeterministic;
          char text[256];
          std::snprintf(text, sizeof(text),
                        "two runs on the same '%s' inputs disagree: %lld elements of '%s' differ "
                        "beyond tolerance (L2 relative difference %.3g)",
                        set.name.c_str(), static_cast<long long>(c->raw.bad), spec.name.c_str(),
                        c->l2);
          e->message = text;
          return false;
        }
      }
    }
  }
  return true;
}

}  // namespace ksearch::internal
