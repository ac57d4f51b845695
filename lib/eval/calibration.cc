// What the evaluator measures before it judges anything: the device's peaks
// and the problem's floor, the tolerance of each input set, whether the
// problem can be judged at all, the library baseline and the reference's
// time (which sets the watchdog).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "eval/local_evaluator.h"
#include "eval/stats.h"

namespace ksearch::internal {
namespace {

// The smallest value v such that at least `quantile` of the counted
// relative errors are below v (the upper edge of the bin where the
// cumulative count reaches it). 0 when nothing was counted.
double HistogramQuantile(const std::vector<uint64_t>& histogram, double quantile) {
  uint64_t total = 0;
  for (uint64_t c : histogram) total += c;
  if (total == 0) return 0.0;
  uint64_t cumulative = 0;
  for (size_t b = 0; b < histogram.size(); ++b) {
    cumulative += histogram[b];
    if (static_cast<double>(cumulative) >= quantile * static_cast<double>(total)) {
      return b == 0 ? 0.0 : std::exp2((static_cast<double>(b) - 223.0) / 4.0);
    }
  }
  return std::exp2((static_cast<double>(histogram.size()) - 223.0) / 4.0);
}

// The quantile of the fp32 twin's relative errors that sets the elementwise
// rtol: high enough that plain fp32 passes with its multiple, robust to the
// few elements near zero whose relative error rounding inflates.
constexpr double kElementwiseQuantile = 0.999;

// kLibrary: a library whose L2 relative error exceeds this (the relaxed
// convention's bound) measures nothing a kernel should be held to.
constexpr double kLibraryMaxL2 = 1e-2;

// kLibrary: fresh inputs per set on which the library's worst element is
// measured at calibration (SetTolerance::library_worst_calibrated).
constexpr int kLibraryCalibrationSeeds = 8;

struct MmaPath {
  const char* name;
  int kind;              // ks_mma_peak's and ks_wgmma_peak's
  double flops_per_mma;  // one mma.sync m16n8 by one warp
  double flops_per_wgmma;  // one wgmma m64n128 by one warpgroup
};
constexpr MmaPath kMmaPaths[] = {{"tf32_mma", 0, 2048.0, 131072.0},
                                 {"fp16_mma", 1, 4096.0, 262144.0},
                                 {"bf16_mma", 2, 4096.0, 262144.0}};

}  // namespace

Status LocalEvaluator::MeasurePeaks() {
  // Bandwidth: a device-to-device copy of 1 GiB (or less on small devices),
  // counting bytes read plus written, best of five.
  size_t free_bytes = 0, total = 0;
  KSEARCH_CU(api_->cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
  int64_t bytes = std::min<int64_t>(int64_t{1} << 30, static_cast<int64_t>(free_bytes) / 8);
  bytes = bytes / 256 * 256;
  KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer a, DeviceBuffer::Allocate(*api_, bytes));
  KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(*api_, bytes));
  KSEARCH_CU(api_->cuMemsetD32Async(a.ptr(), 1, static_cast<size_t>(bytes / 4), stream_.get()),
             "cuMemsetD32Async");
  auto best_of = [&](int runs, auto&& enqueue) -> StatusOr<double> {
    double best_ms = 1e30;
    for (int i = 0; i < runs; ++i) {
      KSEARCH_CU(api_->cuEventRecord(start_event_.get(), stream_.get()), "cuEventRecord");
      KSEARCH_RETURN_IF_ERROR(enqueue());
      KSEARCH_CU(api_->cuEventRecord(end_event_.get(), stream_.get()), "cuEventRecord");
      KSEARCH_CU(api_->cuEventSynchronize(end_event_.get()), "cuEventSynchronize");
      float ms = 0;
      KSEARCH_CU(api_->cuEventElapsedTime(&ms, start_event_.get(), end_event_.get()),
                 "cuEventElapsedTime");
      if (i > 0) best_ms = std::min(best_ms, static_cast<double>(ms));
    }
    return best_ms;
  };
  KSEARCH_ASSIGN_OR_RETURN(double copy_ms, best_of(6, [&]() -> Status {
    KSEARCH_CU(api_->cuMemcpyDtoDAsync(b.ptr(), a.ptr(), static_cast<size_t>(bytes), stream_.get()),
               "cuMemcpyDtoDAsync");
    return Status::Ok();
  }));
  device_.peak_bandwidth_gbps = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3) / 1e9;

  // FMA rate: enough blocks to fill every SM several times.
  CUdeviceptr out = results_.ptr();
  {
    int blocks = device_.multiprocessors * 8, threads = 256, iterations = 2048;
    float seed = 1.0f;
    void* args[] = {&out, &iterations, &seed};
    KSEARCH_ASSIGN_OR_RETURN(double ms, best_of(4, [&]() -> Status {
      KSEARCH_CU(api_->cuLaunchKernel(fma_fn_, blocks, 1, 1, threads, 1, 1, 0, stream_.get(), args,
                                      nullptr),
                 "cuLaunchKernel(ks_fma_peak)");
      return Status::Ok();
    }));
    double flops = 2.0 * 8 * 16 * static_cast<double>(iterations) * blocks * threads;
    device_.peak_gflops = flops / (ms * 1e-3) / 1e9;
  }

  // The tensor-core paths the problem allows.
  for (const MmaPath& path : kMmaPaths) {
    if (std::find(problem_.arithmetic_paths.begin(), problem_.arithmetic_paths.end(),
                  path.name) == problem_.arithmetic_paths.end()) {
      continue;
    }
    if (device_.cc_major < 8) continue;  // no such tensor-core path
    int blocks = device_.multiprocessors * 8, threads = 128, iterations = 1024, kind = path.kind;
    void* args[] = {&out, &iterations, &kind};
    KSEARCH_ASSIGN_OR_RETURN(double ms, best_of(4, [&]() -> Status {
      KSEARCH_CU(api_->cuLaunchKernel(mma_fn_, blocks, 1, 1, threads, 1, 1, 0, stream_.get(), args,
                                      nullptr),
                 "cuLaunchKernel(ks_mma_peak)");
      return Status::Ok();
    }));
    double flops = path.flops_per_mma * 8 * iterations * blocks * (threads / 32);
    double gflops = flops / (ms * 1e-3) / 1e9;
    device_.peak_mma_gflops.emplace_back(path.name, gflops);
    // Hopper's warpgroup MMA runs faster than mma.sync: the floor is that of
    // the faster instruction (candidates compile for sm_90a and may use it).
    if (wgmma_fn_) {
      int wg_blocks = device_.multiprocessors * 2, wg_threads = 256, wg_iterations = 512;
      void* wg_args[] = {&out, &wg_iterations, &kind};
      KSEARCH_ASSIGN_OR_RETURN(double wg_ms, best_of(4, [&]() -> Status {
        KSEARCH_CU(api_->cuLaunchKernel(wgmma_fn_, wg_blocks, 1, 1, wg_threads, 1, 1, 0, stream_.get(),
                                        wg_args, nullptr),
                   "cuLaunchKernel(ks_wgmma_peak)");
        return Status::Ok();
      }));
      double wg_flops = path.flops_per_wgmma * 4 * wg_iterations * wg_blocks * (wg_threads / 128);
      double wg_gflops = wg_flops / (wg_ms * 1e-3) / 1e9;
      const std::string name = std::string(path.name) + " (wgmma)";
      device_.peak_mma_gflops.emplace_back(name, wg_gflops);
    }
  }
  SetFloor();
  return Status::Ok();
}

void LocalEvaluator::UsePeaks(const DeviceInfo& measured) {
  device_.peak_bandwidth_gbps = measured.peak_bandwidth_gbps;
  device_.peak_gflops = measured.peak_gflops;
  device_.peak_mma_gflops = measured.peak_mma_gflops;
  SetFloor();
}

void LocalEvaluator::SetFloor() {
  // The arithmetic floor is that of the fastest path the problem allows
  // (MeasurePeaks measures only those); Hopper's warpgroup MMA runs faster
  // than mma.sync, so there it is the faster instruction's.
  double best_gflops = device_.peak_gflops;
  floor_path_ = "fp32_fma";
  for (const auto& [name, gflops] : device_.peak_mma_gflops) {
    if (gflops > best_gflops) {
      best_gflops = gflops;
      floor_path_ = name;
    }
  }
  auto problem_flops = problem_.Flops();
  auto problem_bytes = problem_.Bytes();
  double flops_ms = problem_flops.ok() ? *problem_flops / (best_gflops * 1e9) * 1e3 : 0.0;
  double bytes_ms =
      problem_bytes.ok() ? *problem_bytes / (device_.peak_bandwidth_gbps * 1e9) * 1e3 : 0.0;
  floor_ms_ = std::max(flops_ms, bytes_ms);
  if (bytes_ms >= flops_ms) floor_path_ = "memory bandwidth";
}

StatusOr<SetTolerance> LocalEvaluator::CalibrateSet(const InputSet& set) {
  SetTolerance tol;
  KSEARCH_RETURN_IF_ERROR(RunReference(set, NextSeed()));
  if (problem_.tolerance.policy == TolerancePolicy::kRelaxed) {
    tol.atol = problem_.tolerance.atol;
    tol.rtol = problem_.tolerance.rtol;
    tol.half_quantile = problem_.tolerance.rtol;
    tol.allowed_l2 = 1e300;
    return tol;
  }
  RunFailure f = RunTrusted(*reference_fp32_, ref32_);
  if (!f.ok()) return InternalError("the fp32 reference kernel failed: " + f.message);
  double worst_l2 = 0.0, worst_quantile = 0.0, half_quantile = 0.0, rms_min = 1e300;
  double half_step = 0.0, twin_inexact = 0.0, atol_floor = 0.0;
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    const TensorSpec& spec = problem_.tensors[t];
    if (!IsWritten(spec.role)) continue;
    KSEARCH_ASSIGN_OR_RETURN(
        Comparison first, Compare(ref32_.ptr[t], ref_.ptr[t], elements_[t], spec.dtype, 0.0, 0.0));
    double rms = std::sqrt(first.raw.sum_sq_want / static_cast<double>(elements_[t]));
    double atol = problem_.tolerance.atol_rms_fraction * rms;
    // fp16's subnormals are 2^-24 apart: below that no rounding is finer.
    if (spec.dtype == DType::kF16) atol_floor = 0x1p-24;
    atol = std::max(atol, atol_floor);
    std::vector<uint64_t> histogram;
    KSEARCH_ASSIGN_OR_RETURN(Comparison second,
                             Compare(ref32_.ptr[t], ref_.ptr[t], elements_[t], spec.dtype, atol,
                                     0.0, &histogram, atol));
    worst_l2 = std::max(worst_l2, second.l2);
    double quantile = HistogramQuantile(histogram, kElementwiseQuantile);
    if (spec.dtype == DType::kF16 || spec.dtype == DType::kBF16) {
      // second.raw.bad: elements of the twin more than atol from the
      // reference (rtol was 0), i.e. rounded to the other neighbour.
      half_quantile = std::max(half_quantile, quantile);
      half_step = std::max(half_step, SetTolerance::HalfStep(spec.dtype));
      twin_inexact = std::max(twin_inexact, static_cast<double>(second.raw.bad) / static_cast<double>(elements_[t]));
    } else {
      worst_quantile = std::max(worst_quantile, quantile);
    }
    rms_min = std::min(rms_min, rms);
  }
  tol.fp32_l2 = worst_l2;
  // A half-precision output is rounded to a grid one step (half_step, in
  // relative terms at most) wide: an honest kernel and the twin land on the
  // other side of a boundary from the reference in a few elements, which
  // gives an L2 error of about half_step × sqrt(fraction). The floor allows
  // such flips in 1% of the elements even where the twin has none.
  tol.allowed_l2 = std::max({problem_.tolerance.strict_floor, problem_.tolerance.strict_multiple * worst_l2,
                             half_step * std::sqrt(SetTolerance::kMinInexactFraction)});
  // Elementwise: the twin's relative error at a high quantile over elements
  // that are not near zero, times the same multiple (outputs near zero are
  // governed by atol, which comes from the output's RMS). Half-precision
  // outputs: one rounding step, or the twin's quantile where that is larger
  // (SetTolerance::Rtol), and a bound on how many elements may be off at all.
  tol.rtol = std::max(1e-6, problem_.tolerance.strict_multiple * worst_quantile);
  tol.atol = std::max(problem_.tolerance.atol_rms_fraction * rms_min, atol_floor);
  tol.half_quantile = half_quantile;
  if (half_step > 0) {
    tol.twin_inexact_fraction = twin_inexact;
    tol.allowed_inexact_fraction =
        SetTolerance::AllowedInexactFraction(problem_.tolerance.strict_multiple, twin_inexact);
  }
  return tol;
}

Status LocalEvaluator::CheckProblemIsSound(const InputSet& set, const SetTolerance& tol) {
  // ref_ holds this set's inputs and the reference's outputs.
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    const TensorSpec& spec = problem_.tensors[t];
    if (!IsWritten(spec.role)) continue;
    // A NaN or Inf in the truth would make every answer there unjudgeable.
    KSEARCH_ASSIGN_OR_RETURN(Comparison self, Compare(ref_.ptr[t], ref_.ptr[t], elements_[t],
                                                      spec.dtype, tol.atol, tol.Rtol(spec.dtype)));
    if (self.raw.nonfinite_want > 0) {
      return InvalidArgumentError("problem '" + problem_.name + "': on input set '" + set.name +
                                  "' the reference output '" + spec.name + "' holds " +
                                  std::to_string(self.raw.nonfinite_want) +
                                  " NaN or Inf values; fix the reference or the inputs");
    }
    // A zero kernel must fail: reject problems whose outputs it would match.
    int64_t bytes = elements_[t] * SizeOf(spec.dtype);
    KSEARCH_CU(api_->cuMemsetD8Async(scratch_.ptr[t], 0, static_cast<size_t>(bytes), stream_.get()),
               "cuMemsetD8Async");
    KSEARCH_ASSIGN_OR_RETURN(Comparison zero, Compare(scratch_.ptr[t], ref_.ptr[t], elements_[t],
                                                      spec.dtype, tol.atol, tol.Rtol(spec.dtype)));
    if (zero.raw.sum_sq_want == 0.0 || (zero.raw.bad == 0 && zero.l2 <= tol.allowed_l2)) {
      return InvalidArgumentError("problem '" + problem_.name + "': on input set '" + set.name +
                                  "' the reference output '" + spec.name +
                                  "' is (nearly) all zeros, so a kernel writing zeros would pass");
    }
  }
  // Outputs must depend on the inputs: a second seed must change them.
  KSEARCH_RETURN_IF_ERROR(CopyOutputs(ref_, scratch_));
  KSEARCH_RETURN_IF_ERROR(RunReference(set, NextSeed()));
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    const TensorSpec& spec = problem_.tensors[t];
    if (!IsWritten(spec.role)) continue;
    if (spec.role == TensorRole::kInout) {
      // A kernel that leaves an inout tensor alone must fail: ref32_ holds
      // the generated values RunReference copied before the reference ran.
      KSEARCH_ASSIGN_OR_RETURN(Comparison same, Compare(ref32_.ptr[t], ref_.ptr[t], elements_[t],
                                                        spec.dtype, tol.atol, tol.Rtol(spec.dtype)));
      if (same.raw.bad == 0 && same.l2 <= tol.allowed_l2) {
        return InvalidArgumentError("problem '" + problem_.name + "': on input set '" + set.name +
                                    "' the reference leaves the inout tensor '" + spec.name +
                                    "' (nearly) as generated, so a kernel that does nothing would pass");
      }
    }
    KSEARCH_ASSIGN_OR_RETURN(Comparison across, Compare(scratch_.ptr[t], ref_.ptr[t], elements_[t],
                                                        spec.dtype, tol.atol, tol.Rtol(spec.dtype)));
    if (across.raw.bad == 0 && across.l2 <= tol.allowed_l2) {
      return InvalidArgumentError("problem '" + problem_.name + "': the reference output '" +
                                  spec.name + "' barely changes between seeds on input set '" +
                                  set.name + "', so a kernel that ignores its inputs would pass");
    }
  }
  return Status::Ok();
}

Status LocalEvaluator::MeasureTolerances() {
  for (const InputSet& set : problem_.input_sets) {
    KSEARCH_ASSIGN_OR_RETURN(SetTolerance tol, CalibrateSet(set));
    KSEARCH_RETURN_IF_ERROR(CheckProblemIsSound(set, tol));
    tolerances_.push_back(tol);
  }
  baseline_name_ = reference_fp32_ ? "reference_fp32" : "reference";
  if (!problem_.baseline.library.empty()) {
    // The library is checked on the inputs ref_ holds now (the last set's).
    const InputSet& last = problem_.input_sets.back();
    KSEARCH_RETURN_IF_ERROR(RunReference(last, NextSeed()));
    KSEARCH_RETURN_IF_ERROR(SetUpLibraryBaseline(tolerances_.back()));
    if (problem_.tolerance.policy == TolerancePolicy::kLibrary) KSEARCH_RETURN_IF_ERROR(CalibrateLibraryWorst());
  }
  return TimeReferenceAndBaseline();
}

Status LocalEvaluator::CalibrateLibraryWorst() {
  // The worst element of one check is the largest excess among the few
  // elements the library rounds more than one step off: which elements
  // those are, and how large they are, changes from one input to the next,
  // so twice one check's worst rejected an honest kernel about once in a
  // few dozen checks. The library's worst over several fresh inputs of the
  // same distribution is what it does on that distribution, a stable
  // bound; a check's own worst still widens it where it is larger.
  for (size_t s = 0; s < problem_.input_sets.size(); ++s) {
    const InputSet& set = problem_.input_sets[s];
    double worst = 0.0;
    for (int k = 0; k < kLibraryCalibrationSeeds; ++k) {
      KSEARCH_RETURN_IF_ERROR(RunReference(set, NextSeed()));
      KSEARCH_ASSIGN_OR_RETURN(SetTolerance measured, LibraryTolerance(set, tolerances_[s]));
      worst = std::max(worst, measured.library_worst);
    }
    tolerances_[s].library_worst_calibrated = worst;
  }
  return Status::Ok();
}

Status LocalEvaluator::SetUpLibraryBaseline(const SetTolerance& tol) {
  const std::string& name = problem_.baseline.library;
  // Under kLibrary the library is the measure of accuracy: without it the
  // problem cannot be judged at all.
  const bool measure = problem_.tolerance.policy == TolerancePolicy::kLibrary;
  auto unusable = [&](const std::string& why) {
    if (measure) {
      return FailedPreconditionError("problem '" + problem_.name + "' judges accuracy against its library (" +
                                     name + "), which " + why + ": it cannot be judged here");
    }
    baseline_name_ += " (" + name + " " + why + ")";
    return Status::Ok();
  };
  auto library = CreateLibraryBaseline(problem_);
  if (!library.ok()) return unusable("is unavailable: " + library.status().message());
  // The library must itself pass the judge on the current inputs.
  Status ran = (*library)->Run(stream_.get(), ref32_.ptr);
  RunFailure waited = ran.ok() ? Wait(watchdog_seconds_ * 10) : RunFailure{};
  if (!ran.ok() || !waited.ok()) return unusable("failed: " + (ran.ok() ? waited.message : ran.message()));
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    const TensorSpec& spec = problem_.tensors[t];
    if (!IsWritten(spec.role)) continue;
    auto r = Compare(ref32_.ptr[t], ref_.ptr[t], elements_[t], spec.dtype, tol.atol, tol.Rtol(spec.dtype));
    double l2 = r.ok() ? r->l2 : 1.0;
    char text[200];
    if (measure) {
      // A library this far off would let anything pass: no tolerance.
      if (!r.ok() || !(l2 <= kLibraryMaxL2)) {
        std::snprintf(text, sizeof(text), "is not a usable measure (its L2 relative error on '%s' is %.3g, above %.3g)",
                      spec.name.c_str(), l2, kLibraryMaxL2);
        return unusable(text);
      }
      continue;
    }
    KSEARCH_ASSIGN_OR_RETURN(double allowed_l2, AllowedL2(tol, t, ref_.ptr[t], l2));
    bool too_inexact = false;
    if (r.ok() && tol.allowed_inexact_fraction < 1.0 && (spec.dtype == DType::kF16 || spec.dtype == DType::kBF16)) {
      auto exact = Compare(ref32_.ptr[t], ref_.ptr[t], elements_[t], spec.dtype, tol.atol, 0.0);
      too_inexact = !exact.ok() || static_cast<double>(exact->raw.bad) >
                                       tol.allowed_inexact_fraction * static_cast<double>(elements_[t]);
    }
    if (!r.ok() || r->raw.bad > 0 || !(l2 <= allowed_l2) || too_inexact) {
      std::snprintf(text, sizeof(text), "fails the strict check: L2 relative error %.3g, allowed %.3g", l2,
                    allowed_l2);
      return unusable(text);
    }
  }
  library_ = std::move(*library);
  baseline_name_ = library_->name();
  device_.baseline_library = library_->version();
  return Status::Ok();
}

StatusOr<SetTolerance> LocalEvaluator::LibraryTolerance(const InputSet& set, const SetTolerance& strict) {
  SetTolerance tol = strict;
  tol.library_l2 = tol.library_inexact_fraction = tol.library_worst = 0.0;
  // Poisoned first: an element the library leaves unwritten is seen.
  KSEARCH_RETURN_IF_ERROR(Poison(ref32_, nullptr));
  KSEARCH_RETURN_IF_ERROR(library_->Run(stream_.get(), ref32_.ptr));
  RunFailure waited = Wait(watchdog_seconds_ * 10);
  if (!waited.ok()) return InternalError("the library " + library_->name() + " failed: " + waited.message);
  const Tolerance& policy = problem_.tolerance;
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    const TensorSpec& spec = problem_.tensors[t];
    if (!IsWritten(spec.role)) continue;
    KSEARCH_ASSIGN_OR_RETURN(GroupAtol groups, GroupTolerance(set, t, ref_.ptr[t]));
    KSEARCH_ASSIGN_OR_RETURN(Comparison c, Compare(ref32_.ptr[t], ref_.ptr[t], elements_[t], spec.dtype,
                                                   strict.atol, strict.Rtol(spec.dtype), nullptr, 0.0, groups));
    // A NaN, an Inf or a large error of the library on these inputs would
    // widen the tolerance without bound: the strict one stands instead.
    if (c.raw.nonfinite_got > 0 || c.raw.unwritten > 0 || !(c.l2 <= kLibraryMaxL2)) {
      SetTolerance fallback = strict;
      fallback.library_l2 = c.l2;
      return fallback;
    }
    // The worst element in atols beyond the strict relative part (one
    // rounding step of a half output): what the library's accumulation adds,
    // not its output rounding. Measured over every element, it is a scale of
    // the library's error, not a ratio with a near-zero denominator, so an
    // honest kernel with the library's error distribution stays within the
    // margin of it (docs/evaluation.md).
    tol.library_l2 = std::max(tol.library_l2, c.l2);
    tol.library_worst = std::max(tol.library_worst, c.max_excess);
    if (SetTolerance::HalfStep(spec.dtype) > 0) {
      KSEARCH_ASSIGN_OR_RETURN(Comparison exact, Compare(ref32_.ptr[t], ref_.ptr[t], elements_[t], spec.dtype,
                                                         strict.atol, 0.0, nullptr, 0.0, groups));
      tol.library_inexact_fraction = std::max(
          tol.library_inexact_fraction, static_cast<double>(exact.raw.bad) / static_cast<double>(elements_[t]));
    }
  }
  tol.allowed_l2 = std::max(strict.allowed_l2, policy.library_margin * tol.library_l2);
  if (strict.allowed_inexact_fraction < 1.0) {
    tol.allowed_inexact_fraction =
        std::min(1.0, std::max(strict.allowed_inexact_fraction, policy.library_margin * tol.library_inexact_fraction));
  }
  tol.elementwise_scale =
      std::max(1.0, policy.library_worst_margin * std::max(tol.library_worst, strict.library_worst_calibrated));
  return tol;
}

StatusOr<double> LocalEvaluator::TimeBaselineOnce(const InputSet& set, RunFailure* failure) {
  KSEARCH_RETURN_IF_ERROR(Generate(set, NextSeed(), base_));
  KSEARCH_RETURN_IF_ERROR(FlushL2());
  KSEARCH_CU(api_->cuEventRecord(start_event_.get(), stream_.get()), "cuEventRecord");
  if (library_) {
    KSEARCH_RETURN_IF_ERROR(library_->Run(stream_.get(), base_.ptr));
  } else {
    PreparedPlan* plan = reference_fp32_ ? reference_fp32_.get() : reference_.get();
    *failure = Launch(*plan, base_);
    if (!failure->ok()) return 0.0;
  }
  KSEARCH_CU(api_->cuEventRecord(end_event_.get(), stream_.get()), "cuEventRecord");
  *failure = Wait(watchdog_seconds_);
  if (!failure->ok()) return 0.0;
  float ms = 0;
  KSEARCH_CU(api_->cuEventElapsedTime(&ms, start_event_.get(), end_event_.get()),
             "cuEventElapsedTime");
  return static_cast<double>(ms);
}

Status LocalEvaluator::TimeReferenceAndBaseline() {
  // The watchdog comes from the reference's time: time it (and the baseline)
  // a few times on fresh inputs.
  std::vector<double> ref_ms, base_ms;
  const InputSet& set = problem_.input_sets.front();
  for (int i = 0; i < 5; ++i) {
    KSEARCH_RETURN_IF_ERROR(Generate(set, NextSeed(), ref_));
    KSEARCH_RETURN_IF_ERROR(FlushL2());
    KSEARCH_CU(api_->cuEventRecord(start_event_.get(), stream_.get()), "cuEventRecord");
    RunFailure f = Launch(*reference_, ref_);
    if (!f.ok()) return InternalError("the reference kernel failed: " + f.message);
    KSEARCH_CU(api_->cuEventRecord(end_event_.get(), stream_.get()), "cuEventRecord");
    f = Wait(watchdog_seconds_);
    if (!f.ok()) return InternalError("the reference kernel failed: " + f.message);
    float ms = 0;
    KSEARCH_CU(api_->cuEventElapsedTime(&ms, start_event_.get(), end_event_.get()),
               "cuEventElapsedTime");
    ref_ms.push_back(ms);
    KSEARCH_ASSIGN_OR_RETURN(double b, TimeBaselineOnce(set, &f));
    if (!f.ok()) return InternalError("the baseline failed: " + f.message);
    base_ms.push_back(b);
  }
  reference_timing_ = Summarize(ref_ms);
  baseline_timing_ = Summarize(base_ms);
  watchdog_seconds_ = std::max(options_.watchdog_floor_seconds, options_.watchdog_reference_multiple *
                                                                    reference_timing_->median_ms / 1e3);
  return Status::Ok();
}

}  // namespace ksearch::internal
