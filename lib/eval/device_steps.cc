// The primitive GPU steps of the judge: launches and the watchdog, inputs,
// poison, guards and the on-device comparison.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "eval/local_evaluator.h"

#include "eval/device_output.h"

namespace ksearch::internal {
namespace {

int JudgeDTypeOf(DType d) {
  switch (d) {
    case DType::kF32: return kJudgeF32;
    case DType::kF64: return kJudgeF64;
    case DType::kF16: return kJudgeF16;
    case DType::kBF16: return kJudgeBF16;
    case DType::kI32: return kJudgeI32;
    case DType::kI64: return kJudgeI64;
    case DType::kU8: return kJudgeU8;
  }
  return kJudgeF32;
}

// Offsets in results_: the comparison, the histogram, scratch words.
constexpr size_t kHistogramOffset = 512;
constexpr size_t kCountOffset = kHistogramOffset + 8 * kRelHistogramBins;
constexpr size_t kReadOffset = kCountOffset + 64;

}  // namespace

double MsSince(EvalClock::time_point start) {
  return std::chrono::duration<double, std::milli>(EvalClock::now() - start).count();
}

RunFailure LocalEvaluator::Classify(CUresult result, const char* call) {
  RunFailure f;
  if (result == CUDA_SUCCESS) return f;
  f.message = std::string(call) + ": " + CudaErrorText(result);
  if (IsStickyError(result)) {
    f.status = EvalStatus::kCrashed;
    f.context_lost = true;
  } else if (result == CUDA_ERROR_OUT_OF_MEMORY || result == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES) {
    f.status = EvalStatus::kResourceLimit;
  } else {
    f.status = EvalStatus::kLaunchError;
  }
  return f;
}

RunFailure LocalEvaluator::Wait(double limit_seconds) {
  auto deadline = EvalClock::now() + std::chrono::duration<double>(limit_seconds);
  int spins = 0;
  while (true) {
    CUresult r = api_->cuStreamQuery(stream_.get());
    if (r == CUDA_SUCCESS) return {};
    if (r != CUDA_ERROR_NOT_READY) return Classify(r, "kernel execution");
    if (EvalClock::now() > deadline) {
      RunFailure f;
      f.status = EvalStatus::kTimeout;
      f.context_lost = true;
      f.message = "the launch plan ran past the watchdog limit of " +
                  std::to_string(limit_seconds) + " s";
      return f;
    }
    if (++spins > 200) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

RunFailure LocalEvaluator::Launch(PreparedPlan& plan, const TensorBuffers& buffers) {
  std::vector<CUdeviceptr> workspace;
  for (const GuardedBuffer& w : plan.workspace) workspace.push_back(w.ptr);
  std::string kernel;
  CUresult r = plan.executor.Launch(plan.resolved, stream_.get(), buffers.ptr, workspace, &kernel);
  if (r != CUDA_SUCCESS) return Classify(r, ("cuLaunchKernel(" + kernel + ")").c_str());
  return {};
}

RunFailure LocalEvaluator::RunTrusted(PreparedPlan& plan, const TensorBuffers& buffers) {
  RunFailure f = Launch(plan, buffers);
  if (!f.ok()) return f;
  return Wait(watchdog_seconds_);
}

RunFailure LocalEvaluator::RunCandidate(PreparedPlan& plan, bool seal, bool timed, double* ms) {
  auto internal_failure = [](const Status& s) {
    RunFailure f;
    f.status = EvalStatus::kLaunchError;
    f.message = "judge: " + s.message();
    return f;
  };
  if (seal) {
    // Everything queued before (generation, poison) is done before the
    // truth is unmapped. Timed runs never wait here: an idle stream between
    // the L2 flush and the start event would put the host's launch latency
    // inside the measured interval (about 8 us per run).
    if (CUresult r = api_->cuStreamSynchronize(stream_.get()); r != CUDA_SUCCESS) {
      return Classify(r, "cuStreamSynchronize");
    }
    if (Status s = vault_.Seal(); !s.ok()) return internal_failure(s);
  }
  if (timed) {
    if (CUresult r = api_->cuEventRecord(start_event_.get(), stream_.get()); r != CUDA_SUCCESS) {
      return Classify(r, "cuEventRecord");
    }
  }
  RunFailure f = Launch(plan, cand_);
  if (f.ok() && timed) {
    if (CUresult r = api_->cuEventRecord(end_event_.get(), stream_.get()); r != CUDA_SUCCESS) {
      return Classify(r, "cuEventRecord");
    }
  }
  if (f.ok()) f = Wait(watchdog_seconds_);
  if (output_) output_->Poll();
  if (!f.ok()) return f;  // the vault stays sealed: the context is suspect
  auto guards = GuardViolations(plan);
  if (seal) {
    if (Status s = vault_.Unseal(); !s.ok()) return internal_failure(s);
  }
  if (!guards.ok()) return internal_failure(guards.status());
  if (*guards > 0) {
    f.status = EvalStatus::kOutOfBoundsWrite;
    f.message = "the candidate wrote outside its buffers: " + std::to_string(*guards) +
                " words of the guard regions around its tensors and workspace changed";
    return f;
  }
  if (timed && ms) {
    float elapsed = 0;
    CUresult r = api_->cuEventElapsedTime(&elapsed, start_event_.get(), end_event_.get());
    if (r != CUDA_SUCCESS) return Classify(r, "cuEventElapsedTime");
    *ms = static_cast<double>(elapsed);
  }
  return f;
}

Status LocalEvaluator::Generate(const InputSet& set, uint64_t seed, const TensorBuffers& family) {
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    const TensorSpec& spec = problem_.tensors[t];
    if (!IsGenerated(spec.role)) continue;
    const Distribution& d = set.For(spec.name);
    CUdeviceptr out = family.ptr[t];
    long long n = elements_[t];
    int dtype = JudgeDTypeOf(spec.dtype);
    int kind = d.kind == Distribution::Kind::kNormal ? 0 : 1;
    double a = d.a, b = d.b;
    unsigned long long s = seed ^ (0x5851f42d4c957f2dull * (t + 1));
    int scale_axis = d.scale_axis == Distribution::ScaleAxis::kRow      ? 1
                     : d.scale_axis == Distribution::ScaleAxis::kColumn ? 2
                                                                        : 0;
    double scale_lo = d.scale_low, scale_hi = d.scale_high;
    long long row_len = 1;
    if (scale_axis != 0) {
      KSEARCH_ASSIGN_OR_RETURN(row_len, EvaluateExpression(spec.shape.back(), problem_.dims));
    }
    void* args[] = {&out, &n, &dtype, &kind, &a, &b, &s, &scale_axis, &scale_lo, &scale_hi, &row_len};
    unsigned blocks =
        static_cast<unsigned>(std::min<long long>((n + 255) / 256, device_.multiprocessors * 32));
    KSEARCH_CU(api_->cuLaunchKernel(fill_fn_, blocks, 1, 1, 256, 1, 1, 0, stream_.get(), args,
                                    nullptr),
               "cuLaunchKernel(ks_fill)");
  }
  return Status::Ok();
}

Status LocalEvaluator::RunReference(const InputSet& set, uint64_t seed) {
  KSEARCH_RETURN_IF_ERROR(Generate(set, seed, ref_));
  KSEARCH_RETURN_IF_ERROR(CopyInouts(ref_, ref32_));
  RunFailure f = RunTrusted(*reference_, ref_);
  if (!f.ok()) return InternalError("the reference kernel failed: " + f.message);
  return Status::Ok();
}

Status LocalEvaluator::CopyTensors(const TensorBuffers& from, const TensorBuffers& to,
                                   bool (*pick)(TensorRole), const char* what) {
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    if (!pick(problem_.tensors[t].role) || from.ptr[t] == to.ptr[t]) continue;
    KSEARCH_CU(api_->cuMemcpyDtoDAsync(
                   to.ptr[t], from.ptr[t],
                   static_cast<size_t>(elements_[t] * SizeOf(problem_.tensors[t].dtype)),
                   stream_.get()),
               what);
  }
  return Status::Ok();
}

Status LocalEvaluator::CopyOutputs(const TensorBuffers& from, const TensorBuffers& to) {
  return CopyTensors(from, to, IsWritten, "cuMemcpyDtoDAsync(outputs)");
}

Status LocalEvaluator::CopyInouts(const TensorBuffers& from, const TensorBuffers& to) {
  return CopyTensors(
      from, to, [](TensorRole role) { return role == TensorRole::kInout; }, "cuMemcpyDtoDAsync(inout)");
}

Status LocalEvaluator::Poison(const TensorBuffers& buffers, PreparedPlan* plan) {
  auto poison = [&](CUdeviceptr p, DType dtype, int64_t n) -> Status {
    switch (dtype) {
      case DType::kF16:
        KSEARCH_CU(api_->cuMemsetD16Async(p, kPoison16, static_cast<size_t>(n), stream_.get()),
                   "cuMemsetD16Async");
        break;
      case DType::kBF16:
        KSEARCH_CU(api_->cuMemsetD16Async(p, kPoisonBf16, static_cast<size_t>(n), stream_.get()),
                   "cuMemsetD16Async");
        break;
      default:
        KSEARCH_CU(api_->cuMemsetD32Async(p, kPoison32,
                                          static_cast<size_t>((n * SizeOf(dtype) + 3) / 4),
                                          stream_.get()),
                   "cuMemsetD32Async");
    }
    return Status::Ok();
  };
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    if (problem_.tensors[t].role != TensorRole::kOutput) continue;  // not inout: it holds inputs
    KSEARCH_RETURN_IF_ERROR(poison(buffers.ptr[t], problem_.tensors[t].dtype, elements_[t]));
  }
  if (plan) {
    for (size_t w = 0; w < plan->workspace.size(); ++w) {
      KSEARCH_RETURN_IF_ERROR(poison(plan->workspace[w].ptr, plan->workspace_dtypes[w],
                                     plan->resolved.workspace_elements[w]));
    }
  }
  return Status::Ok();
}

Status LocalEvaluator::PoisonVault() {
  // Outputs and inout tensors (the reference's, the twin's, the determinism
  // copy) get poison; inputs get zeros, the state their tails (past the last
  // element) must keep for the word-wise input comparison, which skips inout
  // tensors.
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    bool output = IsWritten(problem_.tensors[t].role);
    for (const TensorBuffers* family : {&ref_, &ref32_, &scratch_}) {
      if (!output && family != &ref_) continue;  // the twin reads ref_'s inputs
      KSEARCH_CU(api_->cuMemsetD32Async(family->ptr[t], output ? kPoison32 : 0u,
                                        static_cast<size_t>(family->bytes[t] / 4), stream_.get()),
                 "cuMemsetD32Async(vault)");
    }
  }
  return Status::Ok();
}

Status LocalEvaluator::FlushL2() {
  if (!options_.flush_l2) return Status::Ok();
  KSEARCH_CU(api_->cuMemsetD32Async(flush_.ptr(), flush_value_++,
                                    static_cast<size_t>(flush_.bytes() / 4), stream_.get()),
             "cuMemsetD32Async(L2 flush)");
  return Status::Ok();
}

StatusOr<Comparison> LocalEvaluator::Compare(CUdeviceptr got, CUdeviceptr want, int64_t n,
                                             DType dtype, double atol, double rtol,
                                             std::vector<uint64_t>* histogram,
                                             double histogram_min_abs, const GroupAtol& groups,
                                             double scale) {
  KSEARCH_CU(api_->cuMemsetD8Async(results_.ptr(), 0, kCountOffset, stream_.get()),
             "cuMemsetD8Async");
  long long count = n;
  int code = JudgeDTypeOf(dtype);
  CUdeviceptr out = results_.ptr();
  CUdeviceptr hist = histogram ? results_.ptr() + kHistogramOffset : 0;
  double hist_min = histogram_min_abs;
  CUdeviceptr group_atol = groups.atol;
  long long row_len = groups.row_len;
  int group_axis = groups.axis;
  void* args[] = {&got, &want,     &count,      &code,    &atol,    &rtol,       &out,
                  &hist, &hist_min, &group_atol, &row_len, &group_axis, &scale};
  unsigned blocks =
      static_cast<unsigned>(std::min<long long>((n + 255) / 256, device_.multiprocessors * 16));
  KSEARCH_CU(api_->cuLaunchKernel(compare_fn_, blocks, 1, 1, 256, 1, 1, 0, stream_.get(), args,
                                  nullptr),
             "cuLaunchKernel(ks_compare)");
  Comparison c;
  KSEARCH_CU(api_->cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
  KSEARCH_CU(api_->cuMemcpyDtoH(&c.raw, results_.ptr(), sizeof(c.raw)), "cuMemcpyDtoH");
  if (histogram) {
    histogram->assign(kRelHistogramBins, 0);
    KSEARCH_CU(api_->cuMemcpyDtoH(histogram->data(), hist, 8 * kRelHistogramBins),
               "cuMemcpyDtoH");
  }
  // An expected output that is all zero is matched only by zeros: no
  // division by zero makes a wrong answer look exact.
  // A NaN or Inf where the answer is finite is infinitely wrong: the sums
  // leave such elements out, so without this an output with an overflow
  // and otherwise exact values would report an L2 error of 0.
  if (c.raw.nonfinite_got > 0) {
    c.l2 = INFINITY;
  } else if (c.raw.sum_sq_want > 0) {
    c.l2 = std::sqrt(c.raw.sum_sq_diff / c.raw.sum_sq_want);
  } else {
    c.l2 = c.raw.sum_sq_diff > 0 ? INFINITY : 0.0;
  }
  float max_rel = 0;
  uint32_t bits = static_cast<uint32_t>(c.raw.max_rel);
  std::memcpy(&max_rel, &bits, 4);
  c.max_rel = max_rel;
  float max_excess = 0;
  bits = static_cast<uint32_t>(c.raw.max_excess);
  std::memcpy(&max_excess, &bits, 4);
  c.max_excess = max_excess;
  return c;
}

StatusOr<GroupAtol> LocalEvaluator::GroupTolerance(const InputSet& set, size_t t, CUdeviceptr want) {
  Distribution::ScaleAxis axis = Distribution::ScaleAxis::kNone;
  for (const TensorSpec& spec : problem_.tensors) {
    if (!IsGenerated(spec.role)) continue;
    Distribution::ScaleAxis a = set.For(spec.name).scale_axis;
    if (a != Distribution::ScaleAxis::kNone) axis = a;
  }
  if (axis == Distribution::ScaleAxis::kNone) return GroupAtol{};
  const TensorSpec& spec = problem_.tensors[t];
  GroupAtol g;
  g.axis = axis == Distribution::ScaleAxis::kRow ? 1 : 2;
  KSEARCH_ASSIGN_OR_RETURN(int64_t row_len, EvaluateExpression(spec.shape.back(), problem_.dims));
  g.row_len = row_len;
  long long n = elements_[t];
  long long groups = g.axis == 1 ? n / g.row_len : g.row_len;
  if (group_atol_.bytes() < groups * 8) {
    group_atol_ = DeviceBuffer();
    KSEARCH_ASSIGN_OR_RETURN(group_atol_, DeviceBuffer::Allocate(*api_, groups * 8));
  }
  g.atol = group_atol_.ptr();
  int code = JudgeDTypeOf(spec.dtype);
  double fraction = problem_.tolerance.atol_rms_fraction;
  void* args[] = {&want, &n, &code, &g.row_len, &g.axis, &fraction, &g.atol};
  unsigned blocks = static_cast<unsigned>(
      std::min<long long>(g.axis == 1 ? groups : (groups + 255) / 256, device_.multiprocessors * 16));
  KSEARCH_CU(api_->cuLaunchKernel(group_atol_fn_, std::max(1u, blocks), 1, 1, 256, 1, 1, 0,
                                  stream_.get(), args, nullptr),
             "cuLaunchKernel(ks_group_atol)");
  return g;
}

StatusOr<double> LocalEvaluator::TopMassShare(CUdeviceptr want, int64_t n, DType dtype, int64_t k) {
  constexpr int kBins = 256;
  KSEARCH_CU(api_->cuMemsetD8Async(magnitudes_.ptr(), 0, 2 * 8 * kBins, stream_.get()), "cuMemsetD8Async");
  CUdeviceptr count = magnitudes_.ptr(), mass = magnitudes_.ptr() + 8 * kBins;
  long long elements = n;
  int code = JudgeDTypeOf(dtype);
  void* args[] = {&want, &elements, &code, &count, &mass};
  unsigned blocks = static_cast<unsigned>(std::min<long long>((n + 255) / 256, device_.multiprocessors * 8));
  KSEARCH_CU(api_->cuLaunchKernel(magnitude_fn_, std::max(1u, blocks), 1, 1, 256, 1, 1, 0, stream_.get(), args,
                                  nullptr),
             "cuLaunchKernel(ks_magnitude_hist)");
  KSEARCH_CU(api_->cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
  std::vector<uint64_t> counts(kBins);
  std::vector<double> masses(kBins);
  KSEARCH_CU(api_->cuMemcpyDtoH(counts.data(), count, 8 * kBins), "cuMemcpyDtoH");
  KSEARCH_CU(api_->cuMemcpyDtoH(masses.data(), mass, 8 * kBins), "cuMemcpyDtoH");
  double total = 0.0;
  for (double m : masses) total += m;
  if (!(total > 0.0)) return 0.0;
  // From the largest magnitudes down: whole bins while k lasts, then the
  // part of the next bin at most k elements at its upper edge can hold.
  double top = 0.0;
  uint64_t left = static_cast<uint64_t>(std::max<int64_t>(0, k));
  for (int b = kBins - 1; b >= 1 && left > 0; --b) {
    if (counts[b] <= left) {
      top += masses[b];
      left -= counts[b];
      continue;
    }
    const double edge = std::exp2((b - 127) / 4.0);
    top += b == kBins - 1 ? masses[b] : std::min(masses[b], static_cast<double>(left) * edge * edge);
    left = 0;
  }
  return std::min(1.0, top / total);
}

StatusOr<double> LocalEvaluator::AllowedL2(const SetTolerance& tol, size_t t, CUdeviceptr want, double l2) {
  const DType dtype = problem_.tensors[t].dtype;
  const double step = SetTolerance::HalfStep(dtype);
  if (l2 <= tol.allowed_l2 || step <= 0.0 || problem_.tolerance.policy == TolerancePolicy::kRelaxed) {
    return tol.allowed_l2;
  }
  // A half output's error against the correctly rounded value is 0 or one
  // rounding step (at most step·|want|) per element: the elementwise bound
  // and the share of inexact elements decide what may be off. The L2 error
  // that follows from them depends on which elements are: a few off among
  // the largest of a heavy-tailed output (a product of two projections, a
  // few hundred elements) weigh as much as many typical ones. So the floor
  // is the L2 error of one step on the largest kMinInexactFraction of the
  // elements, the worst the allowed share can give, not step·sqrt(share),
  // which assumed the elements off are typical ones.
  const int64_t n = elements_[t];
  const auto k = static_cast<int64_t>(std::ceil(SetTolerance::kMinInexactFraction * static_cast<double>(n)));
  KSEARCH_ASSIGN_OR_RETURN(double share, TopMassShare(want, n, dtype, k));
  return std::max(tol.allowed_l2, step * std::sqrt(share));
}

StatusOr<double> LocalEvaluator::ReadElement(CUdeviceptr p, DType dtype, int64_t index) {
  int code = JudgeDTypeOf(dtype);
  long long i = index;
  CUdeviceptr out = results_.ptr() + kReadOffset;
  void* args[] = {&p, &code, &i, &out};
  KSEARCH_CU(api_->cuLaunchKernel(read_fn_, 1, 1, 1, 1, 1, 1, 0, stream_.get(), args, nullptr),
             "cuLaunchKernel(ks_read)");
  KSEARCH_CU(api_->cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
  double value = 0;
  KSEARCH_CU(api_->cuMemcpyDtoH(&value, out, sizeof(value)), "cuMemcpyDtoH");
  return value;
}

StatusOr<bool> LocalEvaluator::InputsDiffer(const TensorBuffers& a, const TensorBuffers& b) {
  CUdeviceptr count_ptr = results_.ptr() + kCountOffset;
  KSEARCH_CU(api_->cuMemsetD8Async(count_ptr, 0, 8, stream_.get()), "cuMemsetD8Async");
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    // Inputs only: an inout tensor is the kernel's to overwrite (it is
    // compared with the reference's result instead).
    if (problem_.tensors[t].role != TensorRole::kInput) continue;
    CUdeviceptr pa = a.ptr[t], pb = b.ptr[t];
    long long words = std::min(a.bytes[t], b.bytes[t]) / 4;
    void* args[] = {&pa, &pb, &words, &count_ptr};
    unsigned blocks = static_cast<unsigned>(
        std::min<long long>((words + 255) / 256, device_.multiprocessors * 16));
    KSEARCH_CU(api_->cuLaunchKernel(diff_fn_, blocks, 1, 1, 256, 1, 1, 0, stream_.get(), args,
                                    nullptr),
               "cuLaunchKernel(ks_diff_words)");
  }
  KSEARCH_CU(api_->cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
  unsigned long long count = 0;
  KSEARCH_CU(api_->cuMemcpyDtoH(&count, count_ptr, 8), "cuMemcpyDtoH");
  return count != 0;
}

StatusOr<GuardedBuffer> LocalEvaluator::AllocateGuarded(int64_t bytes) {
  GuardedBuffer g;
  g.bytes = (std::max<int64_t>(bytes, 1) + 255) / 256 * 256;
  KSEARCH_ASSIGN_OR_RETURN(g.raw, DeviceBuffer::Allocate(*api_, g.bytes + 2 * kGuardBytes));
  g.ptr = g.raw.ptr() + kGuardBytes;
  KSEARCH_CU(api_->cuMemsetD32Async(g.ptr, 0, static_cast<size_t>(g.bytes / 4), stream_.get()),
             "cuMemsetD32Async");
  KSEARCH_RETURN_IF_ERROR(FillGuards(g));
  return g;
}

Status LocalEvaluator::FillGuards(const GuardedBuffer& buffer) {
  for (CUdeviceptr p : {buffer.raw.ptr(), buffer.ptr + buffer.bytes}) {
    KSEARCH_CU(api_->cuMemsetD32Async(p, kGuard32, kGuardBytes / 4, stream_.get()),
               "cuMemsetD32Async(guard)");
  }
  return Status::Ok();
}

StatusOr<uint64_t> LocalEvaluator::GuardViolations(const PreparedPlan& plan) {
  CUdeviceptr count_ptr = results_.ptr() + kCountOffset + 8;
  KSEARCH_CU(api_->cuMemsetD8Async(count_ptr, 0, 8, stream_.get()), "cuMemsetD8Async");
  auto check = [&](const GuardedBuffer& b) -> Status {
    for (CUdeviceptr p : {b.raw.ptr(), b.ptr + b.bytes}) {
      long long words = kGuardBytes / 4;
      unsigned pattern = kGuard32;
      void* args[] = {&p, &words, &pattern, &count_ptr};
      KSEARCH_CU(api_->cuLaunchKernel(count_ne_fn_, 64, 1, 1, 256, 1, 1, 0, stream_.get(), args,
                                      nullptr),
                 "cuLaunchKernel(ks_count_ne)");
    }
    return Status::Ok();
  };
  for (const GuardedBuffer& b : cand_owned_) KSEARCH_RETURN_IF_ERROR(check(b));
  for (const GuardedBuffer& b : plan.workspace) KSEARCH_RETURN_IF_ERROR(check(b));
  KSEARCH_CU(api_->cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
  unsigned long long count = 0;
  KSEARCH_CU(api_->cuMemcpyDtoH(&count, count_ptr, 8), "cuMemcpyDtoH");
  if (count > 0) {
    // Restore them so that the next candidate starts clean.
    for (const GuardedBuffer& b : cand_owned_) KSEARCH_RETURN_IF_ERROR(FillGuards(b));
  }
  return count;
}

}  // namespace ksearch::internal
