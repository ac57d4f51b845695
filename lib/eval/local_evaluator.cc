// The in-process evaluator: set-up, the order of the protocol's steps for one
// candidate, and what happens when a candidate (or the judge) breaks. The
// steps themselves are in the files named in local_evaluator.h.
#include "eval/local_evaluator.h"

#include <algorithm>
#include <cstring>
#include <thread>

#include "baselines/fastest.h"
#include "cuda/candidate_compile.h"
#include "cuda/cubin_info.h"
#include "eval/device_output.h"
#include "eval/judge.h"
#include "core/evaluation_json.h"
#include "core/plan_signature.h"
#include "eval/shape_set_evaluator.h"

namespace ksearch {
namespace internal {

LocalEvaluator::LocalEvaluator(Problem problem, EvaluatorOptions options)
    : problem_(std::move(problem)), options_(std::move(options)) {}

LocalEvaluator::~LocalEvaluator() {
  if (hung_) {
    // Unloading a module or freeing memory waits for the spinning kernel,
    // forever: leak every driver object instead (the process should end).
    TearDownDevice();
    static_cast<void>(ctx_.release());
  }
}

Status LocalEvaluator::health() const {
  if (!broken_) return Status::Ok();
  return UnavailableError(broken_reason_);
}

Status LocalEvaluator::Initialize() {
  KSEARCH_RETURN_IF_ERROR(problem_.Validate().WithContext("problem '" + problem_.name + "'"));
  CompilerOptions copts = CompilerOptionsFor(options_);
  // Said before any GPU work: candidates could not be compiled here.
  KSEARCH_RETURN_IF_ERROR(CheckUntrustedCompiles(copts));
  compiler_ = std::make_unique<Compiler>(copts);
  compile_pool_ = std::make_unique<ThreadPool>(DefaultThreads(0));
  KSEARCH_RETURN_IF_ERROR(JudgeSecrets::CheckAvailable());
  secrets_ = JudgeSecrets(options_.replay_input_seed);
  for (const TensorSpec& t : problem_.tensors) {
    KSEARCH_ASSIGN_OR_RETURN(int64_t n, problem_.Elements(t));
    elements_.push_back(n);
  }
  device_.nvrtc_version = Compiler::NvrtcVersion();
  if (options_.compile_only) {
    if (options_.arch.empty()) {
      return InvalidArgumentError("compile-only evaluation needs an explicit arch (e.g. sm_90)");
    }
    // "sm_90" and "sm_90a" name the same device: kernels are compiled for
    // its CompileArch() either way, as on the GPU itself.
    std::string arch = options_.arch;
    if (arch.size() > 5 && arch.back() == 'a') arch.pop_back();
    auto archs = Compiler::SupportedArchs();
    if (std::find(archs.begin(), archs.end(), arch) == archs.end()) {
      std::string list;
      for (const auto& a : archs) list += (list.empty() ? "" : ", ") + a;
      return InvalidArgumentError("arch '" + options_.arch + "' is not supported by NVRTC " +
                                  device_.nvrtc_version + " (supported: " + list + ")");
    }
    device_.name = "(compile-only)";
    internal::ParseArch(arch, &device_.cc_major, &device_.cc_minor);
    if (arch != options_.arch && device_.CompileArch() != options_.arch) {
      return InvalidArgumentError("arch '" + options_.arch + "': " + arch +
                                  " has no arch-specific feature set (use " + arch + ")");
    }
    return Status::Ok();
  }
  KSEARCH_ASSIGN_OR_RETURN(ctx_, CudaContext::Create(options_.device_ordinal));
  api_ = &ctx_->api();
  device_ = ctx_->info();
  if (!options_.arch.empty() && options_.arch != device_.Arch() &&
      options_.arch != device_.CompileArch()) {
    return InvalidArgumentError("arch '" + options_.arch + "' does not match the device (" +
                                device_.name + " is " + device_.Arch() + ")");
  }
  if (options_.capture_device_output) {
    output_ = std::make_unique<DeviceOutputCapture>(options_.max_device_output_bytes);
  }
  KSEARCH_RETURN_IF_ERROR(SetUpDevice());
  if (measured_peaks_) {
    UsePeaks(*measured_peaks_);
  } else {
    KSEARCH_RETURN_IF_ERROR(MeasurePeaks());
  }
  KSEARCH_RETURN_IF_ERROR(MeasureTolerances());
  return Status::Ok();
}

Status LocalEvaluator::SetUpDevice() {
  KSEARCH_RETURN_IF_ERROR(ctx_->MakeCurrent());
  // The device's printf buffer bounds what one launch can print. The driver
  // accepts a new size only until a kernel that prints has run in the
  // context (the primary context, shared by every evaluator of the
  // process): after that the size stays what it was, which is no error.
  size_t fifo = static_cast<size_t>(std::max<int64_t>(options_.device_printf_buffer_bytes, 4096));
  size_t current = 0;
  if (api_->cuCtxGetLimit(&current, CU_LIMIT_PRINTF_FIFO_SIZE) == CUDA_SUCCESS && current != fifo) {
    static_cast<void>(api_->cuCtxSetLimit(CU_LIMIT_PRINTF_FIFO_SIZE, fifo));
  }
  KSEARCH_ASSIGN_OR_RETURN(stream_, Stream::Create(*api_));
  KSEARCH_ASSIGN_OR_RETURN(start_event_, Event::Create(*api_));
  KSEARCH_ASSIGN_OR_RETURN(end_event_, Event::Create(*api_));
  CompileRequest judge{kJudgeKernelSource, {}, device_.CompileArch(), "ksearch_judge.cu"};
  judge.trusted = true;
  KSEARCH_ASSIGN_OR_RETURN(CompileResult compiled, compiler_->Compile(judge));
  if (!compiled.ok) return InternalError("ksearch's judge kernels do not compile:\n" + compiled.log);
  KSEARCH_ASSIGN_OR_RETURN(judge_module_, Module::Load(*api_, compiled.cubin));
  KSEARCH_ASSIGN_OR_RETURN(fill_fn_, judge_module_.Function("ks_fill"));
  KSEARCH_ASSIGN_OR_RETURN(compare_fn_, judge_module_.Function("ks_compare"));
  KSEARCH_ASSIGN_OR_RETURN(diff_fn_, judge_module_.Function("ks_diff_words"));
  KSEARCH_ASSIGN_OR_RETURN(read_fn_, judge_module_.Function("ks_read"));
  KSEARCH_ASSIGN_OR_RETURN(fma_fn_, judge_module_.Function("ks_fma_peak"));
  KSEARCH_ASSIGN_OR_RETURN(mma_fn_, judge_module_.Function("ks_mma_peak"));
  // Real code only where the judge kernels were compiled for sm_90a.
  if (device_.CompileArch() == "sm_90a") {
    KSEARCH_ASSIGN_OR_RETURN(wgmma_fn_, judge_module_.Function("ks_wgmma_peak"));
  }
  KSEARCH_ASSIGN_OR_RETURN(count_ne_fn_, judge_module_.Function("ks_count_ne"));
  KSEARCH_ASSIGN_OR_RETURN(group_atol_fn_, judge_module_.Function("ks_group_atol"));
  KSEARCH_ASSIGN_OR_RETURN(magnitude_fn_, judge_module_.Function("ks_magnitude_hist"));
  KSEARCH_ASSIGN_OR_RETURN(results_, DeviceBuffer::Allocate(*api_, 4096));
  KSEARCH_ASSIGN_OR_RETURN(magnitudes_, DeviceBuffer::Allocate(*api_, 2 * 8 * 256));
  KSEARCH_ASSIGN_OR_RETURN(flush_,
                           DeviceBuffer::Allocate(*api_, L2FlushBytes(device_.l2_bytes)));

  // Sizes rounded up to whole 32-bit words (and zeroed), so that word-wise
  // input comparison never reads uninitialized tail bytes.
  std::vector<int64_t> bytes;
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    bytes.push_back((elements_[t] * SizeOf(problem_.tensors[t].dtype) + 255) / 256 * 256);
  }
  // The vault: ref_ (every tensor), then ref32_ and scratch_ (outputs and
  // inout tensors, each its own copy; the twin reads ref_'s inputs).
  std::vector<int64_t> vault_sizes = bytes;
  std::vector<size_t> output_index;
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    if (!IsWritten(problem_.tensors[t].role)) continue;
    output_index.push_back(t);
    vault_sizes.push_back(bytes[t]);
    vault_sizes.push_back(bytes[t]);
  }
  KSEARCH_ASSIGN_OR_RETURN(vault_, TruthVault::Create(*api_, ctx_->device(), vault_sizes,
                                                      stream_.get()));
  ref_ = ref32_ = scratch_ = cand_ = base_ = TensorBuffers{};
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    ref_.ptr.push_back(vault_.ptr(t));
    ref_.bytes.push_back(bytes[t]);
  }
  ref32_ = ref_;
  scratch_ = ref_;
  for (size_t k = 0; k < output_index.size(); ++k) {
    size_t t = output_index[k];
    ref32_.ptr[t] = vault_.ptr(problem_.tensors.size() + 2 * k);
    scratch_.ptr[t] = vault_.ptr(problem_.tensors.size() + 2 * k + 1);
  }
  cand_owned_.clear();
  base_owned_.clear();
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    KSEARCH_ASSIGN_OR_RETURN(GuardedBuffer g, AllocateGuarded(bytes[t]));
    cand_.ptr.push_back(g.ptr);
    cand_.bytes.push_back(bytes[t]);
    cand_owned_.push_back(std::move(g));
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(*api_, bytes[t]));
    KSEARCH_CU(api_->cuMemsetD32Async(b.ptr(), 0, static_cast<size_t>(bytes[t] / 4), stream_.get()),
               "cuMemsetD32Async");
    base_.ptr.push_back(b.ptr());
    base_.bytes.push_back(bytes[t]);
    base_owned_.push_back(std::move(b));
  }
  KSEARCH_ASSIGN_OR_RETURN(reference_, PrepareTrusted(problem_.reference, "reference"));
  if (!problem_.reference_fp32.source.empty()) {
    KSEARCH_ASSIGN_OR_RETURN(reference_fp32_,
                             PrepareTrusted(problem_.reference_fp32, "reference_fp32"));
  }
  KSEARCH_CU(api_->cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
  return Status::Ok();
}

void LocalEvaluator::TearDownDevice() {
  // After a context reset every handle is dead: forget them without calling
  // the driver on them.
  auto abandon_plan = [](std::unique_ptr<PreparedPlan>& p) {
    if (!p) return;
    p->module.Abandon();
    for (auto& w : p->workspace) w.raw.Abandon();
    p.reset();
  };
  abandon_plan(reference_);
  abandon_plan(reference_fp32_);
  // Library handles belong to the dead context; leak them rather than call
  // the library on it.
  static_cast<void>(library_.release());
  vault_.Abandon();
  for (auto& b : cand_owned_) b.raw.Abandon();
  for (auto& b : base_owned_) b.Abandon();
  cand_owned_.clear();
  base_owned_.clear();
  results_.Abandon();
  magnitudes_.Abandon();
  group_atol_.Abandon();
  flush_.Abandon();
  judge_module_.Abandon();
  stream_.Abandon();
  start_event_.Abandon();
  end_event_.Abandon();
}

// ---------------------------------------------------------------------------
// Faults

void LocalEvaluator::Fail(Evaluation* e, const RunFailure& failure) {
  e->status = failure.status;
  e->message = failure.message;
  if (failure.context_lost) RecoverContext(e);
}

void LocalEvaluator::BreakJudge(Evaluation* e, const std::string& during, const Status& status) {
  broken_ = true;
  broken_reason_ = "the judge failed during " + during + " of candidate '" + e->candidate_id +
                   "': " + status.message();
  e->status = EvalStatus::kCancelled;
  e->message = "not judged: " + broken_reason_;
}

void LocalEvaluator::RecoverContext(Evaluation* e) {
  if (e->status == EvalStatus::kTimeout) {
    // A kernel may still be spinning; resetting under it can hang the caller.
    broken_ = true;
    hung_ = true;
    broken_reason_ = "a kernel of candidate '" + e->candidate_id +
                     "' hung and the in-process evaluator cannot stop it; use the isolated "
                     "worker pool for untrusted kernels";
    return;
  }
  TearDownDevice();
  Status reset = ctx_->Reset();
  if (reset.ok()) reset = SetUpDevice();
  if (!reset.ok()) {
    broken_ = true;
    // Sticky errors poison the whole process on current drivers: only a new
    // process gets a working context, which is what the worker pool does.
    broken_reason_ = "the CUDA context could not be rebuilt after candidate '" + e->candidate_id +
                     "' crashed it (" + reset.message() +
                     "); the in-process evaluator cannot continue: use the isolated worker pool "
                     "for untrusted kernels";
    e->details += (e->details.empty() ? "" : "\n") + broken_reason_;
  } else {
    ++context_resets_;
    e->details += (e->details.empty() ? "" : "\n") +
                  std::string("the CUDA context was reset and rebuilt after this crash");
  }
}

Status LocalEvaluator::RebuildDevice() {
  TearDownDevice();
  Status st = SetUpDevice();
  if (!st.ok()) {
    broken_ = true;
    broken_reason_ = "could not rebuild after a reset of the CUDA context: " + st.message();
  }
  return st;
}

Status LocalEvaluator::Park() {
  if (options_.compile_only || broken_ || vault_.sealed()) return Status::Ok();
  KSEARCH_RETURN_IF_ERROR(ctx_->MakeCurrent());
  KSEARCH_CU(api_->cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
  return vault_.Seal();
}

Status LocalEvaluator::Unpark() {
  if (options_.compile_only || broken_ || !vault_.sealed()) return Status::Ok();
  KSEARCH_RETURN_IF_ERROR(ctx_->MakeCurrent());
  return vault_.Unseal();
}

bool LocalEvaluator::OverBudget(const Evaluation& e) const {
  (void)e;
  return MsSince(candidate_start_) > options_.max_check_seconds * 1e3;
}

// ---------------------------------------------------------------------------
// One candidate

void LocalEvaluator::JudgeCompileOnly(const Candidate& candidate, const CompileResult& compiled,
                                      Evaluation* e) {
  auto resolved = ResolvePlan(problem_, candidate.plan);
  if (!resolved.ok()) {
    e->status = EvalStatus::kInvalidPlan;
    e->message = resolved.status().message();
    return;
  }
  // No driver to ask: the parameter lists come from the cubin itself.
  auto signatures = ReadKernelSignatures(compiled.cubin);
  std::vector<std::string> not_run;
  if (!signatures.ok()) {
    not_run.push_back("plan vs kernel signature (the cubin's parameter tables could not be read: " +
                      signatures.status().message() + ")");
  }
  // The entry points the compile reported (ptxas) and those the cubin's
  // parameter tables name: either list is complete when it could be read.
  std::vector<KernelResources> entry_points = compiled.resources;
  if (signatures.ok()) {
    for (const KernelSignature& k : *signatures) {
      auto same = [&](const KernelResources& r) { return r.kernel == k.name; };
      if (std::none_of(entry_points.begin(), entry_points.end(), same)) {
        entry_points.push_back(KernelResources{.kernel = k.name});
      }
    }
  }
  const bool entry_points_known = signatures.ok() || !compiled.resources.empty();
  for (size_t l = 0; l < resolved->launches.size(); ++l) {
    const std::string& kernel = resolved->launches[l].kernel;
    auto entry = std::find_if(entry_points.begin(), entry_points.end(),
                              [&](const KernelResources& r) { return r.kernel == kernel; });
    if (entry == entry_points.end()) {
      if (entry_points_known) {
        e->status = EvalStatus::kInvalidPlan;
        e->message = MissingKernel(l, kernel, candidate.id, entry_points);
        return;
      }
      not_run.push_back("whether the source defines '" + kernel + "' (neither the compile log nor the cubin could be read)");
    }
    if (signatures.ok()) {
      auto s = std::find_if(signatures->begin(), signatures->end(),
                            [&](const KernelSignature& k) { return k.name == kernel; });
      if (s == signatures->end()) {
        not_run.push_back("plan vs kernel signature of '" + kernel +
                          "' (the cubin has no parameter table for it)");
      } else if (std::string why = ArgumentMismatch(l, candidate.plan.launches[l],
                                                    resolved->launches[l], ParamSizes(*s));
                 !why.empty()) {
        e->status = EvalStatus::kInvalidPlan;
        e->message = std::move(why);
        return;
      } else if (why = ClusterMismatch(l, resolved->launches[l], s->cluster_dims,
                                       device_.cc_major * 10 + device_.cc_minor);
                 !why.empty()) {
        // The plan's cluster against the kernel's __cluster_dims__ and the
        // arch, as on the GPU.
        e->status = EvalStatus::kInvalidPlan;
        e->message = std::move(why);
        return;
      }
    }
    // No device to ask: the largest any current GPU allows per block.
    constexpr int64_t kMaxSharedPerBlock = 227 * 1024;
    int64_t dynamic = resolved->launches[l].shared_bytes;
    int64_t static_bytes = entry != entry_points.end() ? std::max<int64_t>(0, entry->static_shared_bytes) : 0;
    if (static_bytes + dynamic > kMaxSharedPerBlock) {
      e->status = EvalStatus::kResourceLimit;
      e->message = "launches[" + std::to_string(l) + "]: " + std::to_string(static_bytes) + " B of static and " +
                   std::to_string(dynamic) +
                   " B of dynamic shared memory are more than any current GPU allows per block (227 KiB)";
      return;
    }
  }
  e->status = EvalStatus::kCompiled;
  e->message = "compiled for " + options_.arch + "; plan checked against the problem" +
               (not_run.empty() ? " and the kernels' parameters" : "") + " (compile-only)";
  for (const char* check : {"device limits", "correctness", "timing", "re-check after timing"}) {
    not_run.push_back(check);
  }
  e->checks_not_run = std::move(not_run);
}

void LocalEvaluator::Judge(const Candidate& candidate, const CompileResult& compiled,
                           Evaluation* e) {
  if (FillCompileFailure(compiled, e)) return;
  e->resources = compiled.resources;
  if (options_.compile_only) return JudgeCompileOnly(candidate, compiled, e);
  candidate_start_ = EvalClock::now();
  library_widest_ = SetTolerance{};
  candidate_worst_ = candidate_worst_share_ = 0.0;
  RunFailure failure;
  std::unique_ptr<PreparedPlan> plan = Prepare(compiled, candidate.plan, e, &failure);
  if (!plan) {
    Fail(e, failure);
    return;
  }
  // If this candidate hangs, its module and workspace must not be released
  // (that waits for the kernel): leak them.
  struct AbandonIfHung {
    LocalEvaluator* self;
    PreparedPlan* plan;
    ~AbandonIfHung() {
      if (!self->hung_) return;
      plan->module.Abandon();
      for (GuardedBuffer& w : plan->workspace) w.raw.Abandon();
    }
  } abandon_if_hung{this, plan.get()};
  bool checked = CheckCorrectness(*plan, "check", e);
  e->check_ms = MsSince(candidate_start_);
  if (!checked) {
    if (e->status == EvalStatus::kCancelled && !broken_) {
      e->status = EvalStatus::kTimeout;
      e->message = "the checks needed more than " + std::to_string(options_.max_check_seconds) +
                   " s of GPU time (EvaluatorOptions::max_check_seconds)";
    }
    return;
  }
  if (check_only_) {
    e->status = EvalStatus::kOk;
    e->message = "correct (check-only: not timed)";
    return;
  }
  TimeCandidate(*plan, e);
  if (!e->timing || broken_ || (e->status != EvalStatus::kCancelled && e->status != EvalStatus::kOk)) {
    return;
  }
  auto start_recheck = EvalClock::now();
  candidate_start_ = start_recheck;
  bool rechecked = CheckCorrectness(*plan, "recheck", e);
  e->check_ms += MsSince(start_recheck);
  if (!rechecked) return;
  e->status = EvalStatus::kOk;
  char text[512];
  std::snprintf(text, sizeof(text), "correct; median %.4f ms", e->timing->median_ms);
  e->message = text;
  if (e->speedup) {
    std::snprintf(text, sizeof(text), ", %.3fx vs %s", e->speedup->ratio,
                  e->speedup->baseline.c_str());
    e->message += text;
  }
  if (problem_.tolerance.policy == TolerancePolicy::kRelaxed) {
    e->relaxed_tolerance = true;
    e->message += " [relaxed tolerance]";
  }
  if (problem_.tolerance.policy == TolerancePolicy::kLibrary) {
    e->message += " [library tolerance]";
    std::snprintf(text, sizeof(text),
                  "accuracy held to %s on the same inputs at every check (library policy): its L2 relative "
                  "error up to %.3g, inexact elements up to %.3g%%, worst element %.3g atol past the relative bound "
                  "(%.3g on the calibration inputs); the candidate's worst element %.3g atol, at most %.2f of its "
                  "check's bound",
                  baseline_name_.c_str(), library_widest_.library_l2,
                  100 * std::max(0.0, library_widest_.library_inexact_fraction), library_widest_.library_worst,
                  library_widest_.library_worst_calibrated, candidate_worst_, candidate_worst_share_);
    e->details += (e->details.empty() ? "" : "\n") + std::string(text);
  }
  double suspicious_ms = options_.suspicious_floor_fraction * floor_ms_;
  if (suspicious_ms > 0 && e->timing->median_ms < suspicious_ms) {
    e->status = EvalStatus::kSuspiciousSpeed;
    std::snprintf(text, sizeof(text),
                  "median %.4f ms is below the physical floor of this device (%.4f ms: the "
                  "declared work at the measured peak of %s); the kernel cannot be doing the work",
                  e->timing->median_ms, floor_ms_, floor_path_.c_str());
    e->message = text;
  }
}

std::vector<Evaluation> LocalEvaluator::Evaluate(std::span<const Candidate> candidates,
                                                 const std::atomic<bool>* cancel) {
  return EvaluateWith(candidates, {}, cancel);
}

std::vector<StatusOr<CompileResult>> LocalEvaluator::CompileAll(
    std::span<const Candidate> candidates, const std::atomic<bool>* cancel,
    std::vector<double>* compile_wall) {
  // Compiles run in parallel on the CPU; GPU checks and timing run one at a
  // time (one timing lane per GPU).
  std::vector<StatusOr<CompileResult>> results(candidates.size(), InternalError("not compiled"));
  compile_wall->assign(candidates.size(), 0.0);
  {
    TaskGroup compiles(*compile_pool_);
    CompileEach(*compiler_, compiles, candidates, device_.CompileArch(), cancel,
                [&](size_t i, StatusOr<CompileResult> compiled, double wall_ms) {
                  results[i] = std::move(compiled);
                  (*compile_wall)[i] = wall_ms;
                });
  }
  return results;
}

std::vector<Evaluation> LocalEvaluator::EvaluateWith(std::span<const Candidate> candidates,
                                                     std::span<const CompileResult> precompiled,
                                                     const std::atomic<bool>* cancel) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Evaluation> out(candidates.size());
  std::vector<StatusOr<CompileResult>> results(candidates.size(), InternalError("not compiled"));
  std::vector<double> compile_wall(candidates.size(), 0.0);
  if (precompiled.empty()) {
    results = CompileAll(candidates, cancel, &compile_wall);
  } else {
    // Compiled by the caller (a worker process receiving cubins): judge only.
    for (size_t i = 0; i < precompiled.size(); ++i) results[i] = precompiled[i];
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    Evaluation& e = out[i];
    auto start = EvalClock::now();
    e.candidate_id = c.id;
    e.content_hash = c.ContentHash();
    e.device = device_;
    e.relaxed_tolerance = problem_.tolerance.policy == TolerancePolicy::kRelaxed;
    if (cancel && cancel->load()) {
      e.status = EvalStatus::kCancelled;
      e.message = "the search stopped before this candidate was judged";
      continue;
    }
    if (!results[i].ok()) {
      FillCompileFailure(results[i], &e);
      continue;
    }
    const CompileResult& compiled = *results[i];
    e.compile_cached = compiled.cached;
    e.compile_ms = compiled.cached ? compile_wall[i] : compiled.compile_ms;
    if (broken_) {
      e.status = EvalStatus::kCancelled;
      e.message = "not judged: " + broken_reason_;
      continue;
    }
    if (!options_.compile_only) {
      if (Status st = ctx_->MakeCurrent(); !st.ok()) {
        BreakJudge(&e, "set-up", st);
        continue;
      }
    }
    if (output_ && !options_.compile_only) output_->Begin();
    Judge(c, compiled, &e);
    if (compiled.ok) NoteUnsandboxed(compiled, &e);
    if (output_ && !options_.compile_only) {
      // The driver writes what is left in the printf buffer at a
      // synchronization: make it happen while the capture is on.
      if (!hung_ && stream_.get()) static_cast<void>(api_->cuStreamSynchronize(stream_.get()));
      e.device_log = output_->End();
    }
    e.total_ms = MsSince(start) + e.compile_ms;
  }
  return out;
}

}  // namespace internal

bool CudaDriverAvailable(std::string* why) {
  auto driver = internal::Driver();
  if (!driver.ok()) {
    if (why) *why = driver.status().message();
    return false;
  }
  int count = 0;
  CUresult r = (*driver)->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    if (why) {
      *why = r != CUDA_SUCCESS ? internal::CudaErrorText(r) : "the CUDA driver reports no GPU";
    }
    return false;
  }
  return true;
}

StatusOr<std::unique_ptr<Evaluator>> CreateLocalEvaluator(const Problem& problem,
                                                          const EvaluatorOptions& options) {
  if (!problem.shapes.empty()) {
    auto shaped = std::make_unique<internal::ShapeSetEvaluator>(problem, options);
    KSEARCH_RETURN_IF_ERROR(shaped->Initialize());
    return std::unique_ptr<Evaluator>(std::move(shaped));
  }
  auto evaluator = std::make_unique<internal::LocalEvaluator>(problem, options);
  KSEARCH_RETURN_IF_ERROR(evaluator->Initialize());
  return std::unique_ptr<Evaluator>(std::move(evaluator));
}

// The worker processes' entry point (lib/eval/judge.h).
StatusOr<std::vector<Evaluation>> internal::EvaluatePrecompiled(
    Evaluator& evaluator, std::span<const Candidate> candidates,
    std::span<const CompileResult> compiled, const std::atomic<bool>* cancel) {
  auto* local = dynamic_cast<internal::LocalEvaluator*>(&evaluator);
  auto* shaped = dynamic_cast<internal::ShapeSetEvaluator*>(&evaluator);
  if (local == nullptr && shaped == nullptr) {
    return InvalidArgumentError(
        "EvaluatePrecompiled needs an evaluator made by CreateLocalEvaluator");
  }
  if (candidates.size() != compiled.size() || candidates.empty()) {
    return InvalidArgumentError("EvaluatePrecompiled: " + std::to_string(candidates.size()) +
                                " candidates but " + std::to_string(compiled.size()) +
                                " compiles");
  }
  if (shaped) return shaped->EvaluateWith(candidates, compiled, cancel);
  return local->EvaluateWith(candidates, compiled, cancel);
}

}  // namespace ksearch
