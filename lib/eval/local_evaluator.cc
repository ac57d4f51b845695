// The in-process evaluator: the protocol of shared/EVALUATION.md on one GPU.
//
// Buffers are split in two families that never mix: the reference side
// (inputs as generated, reference outputs, fp32-reference outputs) and the
// candidate side (a copy of the inputs, candidate outputs, a scratch copy for
// the determinism check). A candidate therefore never receives memory that
// held a reference output, and every buffer lives as long as the evaluator,
// so freed reference memory cannot resurface as candidate workspace.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "baselines/library_baseline.h"
#include "core/hash.h"
#include "core/plan_resolve.h"
#include "cuda/compiler.h"
#include "cuda/driver.h"
#include "cuda/objects.h"
#include "eval/judge.h"
#include "eval/judge_kernels.h"
#include "eval/stats.h"
#include "ksearch/evaluator.h"

namespace ksearch {
namespace {

using internal::CompareResults;
using internal::CompileRequest;
using internal::CompileResult;
using internal::Compiler;
using internal::CudaContext;
using internal::DeviceBuffer;
using internal::DriverApi;
using internal::Event;
using internal::Module;
using internal::ResolvedArg;
using internal::ResolvedPlan;
using internal::Stream;
using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Why a plan's kernel is missing, naming the candidate (for `ksearch eval`,
// the source file) and the entry points its source does have.
std::string MissingKernel(size_t launch, const std::string& kernel, const std::string& candidate,
                          const std::vector<KernelResources>& found) {
  std::vector<std::string> sorted;
  for (const KernelResources& r : found) sorted.push_back(r.kernel);
  std::sort(sorted.begin(), sorted.end());
  std::string names;
  for (const std::string& name : sorted) names += (names.empty() ? "" : ", ") + name;
  return "launches[" + std::to_string(launch) + "]: kernel '" + kernel + "' is not an entry point of " +
         (candidate.empty() ? std::string("the source") : "'" + candidate + "'") + " (" +
         (names.empty() ? std::string("it has no extern \"C\" __global__ function")
                        : "its entry points: " + names) +
         "; is the kernel declared extern \"C\" __global__?)";
}

int JudgeDType(DType d) {
  switch (d) {
    case DType::kF32: return internal::kJudgeF32;
    case DType::kF64: return internal::kJudgeF64;
    case DType::kF16: return internal::kJudgeF16;
    case DType::kBF16: return internal::kJudgeBF16;
    case DType::kI32: return internal::kJudgeI32;
    case DType::kI64: return internal::kJudgeI64;
    case DType::kU8: return internal::kJudgeU8;
  }
  return internal::kJudgeF32;
}

std::string DefaultCacheDir() {
  if (const char* env = std::getenv("KSEARCH_CACHE_DIR"); env && *env) return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/ksearch";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/ksearch";
  return "";
}

// Why a run of a plan failed, already classified for the Evaluation.
struct RunFailure {
  EvalStatus status = EvalStatus::kOk;
  std::string message;
  bool context_lost = false;
};

// A compiled, loaded and validated launch plan.
struct PreparedPlan {
  Module module;
  ResolvedPlan resolved;
  std::vector<CUfunction> functions;
  std::vector<DeviceBuffer> workspace;
  std::vector<DType> workspace_dtypes;
};

// Device-side buffers for one family (reference or candidate). `ptr` is what
// kernels receive; a family may borrow another's inputs (the fp32 reference
// reads the reference's inputs), in which case `owned` holds no buffer there.
struct TensorBuffers {
  std::vector<DeviceBuffer> owned;  // indexed like Problem::tensors
  std::vector<CUdeviceptr> ptr;
  std::vector<int64_t> bytes;
};

// Tolerance measured on one input set (strict policy) or fixed (relaxed).
struct SetTolerance {
  double atol = 0.0;
  double rtol = 0.0;
  double allowed_l2 = 0.0;
  double fp32_l2 = 0.0;
};

class LocalEvaluator final : public Evaluator {
 public:
  LocalEvaluator(Problem problem, EvaluatorOptions options)
      : problem_(std::move(problem)), options_(std::move(options)) {}
  ~LocalEvaluator() override {
    if (hung_) {
      // Unloading a module or freeing memory waits for the spinning kernel,
      // forever: leak every driver object instead (the process should end).
      TearDownDevice();
      static_cast<void>(ctx_.release());
    }
  }

  Status Initialize();

  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel) override;
  // Evaluate, with precompiled[i] used instead of compiling candidates[i] when
  // `precompiled` is not null (lib/eval/judge.h).
  std::vector<Evaluation> EvaluateWith(std::span<const Candidate> candidates,
                                       std::span<const CompileResult> precompiled,
                                       const std::atomic<bool>* cancel);
  const Problem& problem() const override { return problem_; }
  const DeviceInfo& device() const override { return device_; }
  std::optional<TimingStats> reference_timing() const override { return reference_timing_; }
  std::optional<TimingStats> baseline_timing() const override { return baseline_timing_; }

 private:
  // GPU resources; rebuilt after a sticky error.
  Status SetUpDevice();
  void TearDownDevice();
  StatusOr<std::unique_ptr<PreparedPlan>> PrepareTrusted(const KernelSpec& kernel,
                                                         const std::string& what);
  // Loads, validates against the kernels and the device, allocates workspace.
  // On failure fills `failure` and returns null.
  std::unique_ptr<PreparedPlan> Prepare(const CompileResult& compiled, const LaunchPlan& plan,
                                        Evaluation* evaluation, RunFailure* failure);
  Status MeasurePeaks();
  Status MeasureTolerances();

  // Launches a plan on the stream with the given tensor buffers.
  RunFailure Launch(PreparedPlan& plan, const TensorBuffers& buffers);
  // Waits for the stream with the watchdog.
  RunFailure Wait(double limit_seconds);
  RunFailure RunAndWait(PreparedPlan& plan, const TensorBuffers& buffers);
  RunFailure Classify(CUresult result, const char* call);
  Status Generate(const InputSet& set, uint64_t seed);
  Status CopyInputsToCandidate();
  Status Poison(const TensorBuffers& buffers, PreparedPlan* plan);
  StatusOr<CompareResults> Compare(CUdeviceptr got, CUdeviceptr want, int64_t n, DType dtype,
                                   double atol, double rtol);
  StatusOr<double> ReadElement(CUdeviceptr p, DType dtype, int64_t index);
  StatusOr<bool> InputsModified();
  StatusOr<double> TimeOnce(PreparedPlan& plan, const TensorBuffers& buffers, RunFailure* failure);
  // Times one run of the baseline: the library when there is one, else the
  // fp32 reference kernel (else the reference).
  StatusOr<double> TimeBaselineOnce(RunFailure* failure);
  // Loads the problem's library baseline and checks it against the reference
  // on the inputs currently in ref_; on any failure the reference kernel
  // stays the baseline and the figure's baseline name says why.
  void SetUpLibraryBaseline(const SetTolerance& tol);

  // The checks of one candidate.
  void Judge(const Candidate& candidate, const CompileResult& compiled, Evaluation* e);
  bool CheckCorrectness(PreparedPlan& plan, const std::string& phase, Evaluation* e,
                        bool check_determinism);
  void TimeCandidate(PreparedPlan& plan, Evaluation* e);
  void Fail(Evaluation* e, const RunFailure& failure);
  void RecoverContext(Evaluation* e);

  // A fresh input seed for every generation: inputs never repeat across
  // candidates, checks or re-checks.
  uint64_t NextSeed() {
    uint64_t z = seed_ + 0x9e3779b97f4a7c15ull * ++seed_counter_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }

  Problem problem_;
  EvaluatorOptions options_;
  DeviceInfo device_;
  std::unique_ptr<Compiler> compiler_;
  std::mutex mutex_;  // one Evaluate at a time: one timing lane per GPU
  uint64_t seed_ = 0;
  uint64_t seed_counter_ = 0;
  std::mt19937_64 order_rng_;

  // GPU side.
  std::unique_ptr<CudaContext> ctx_;
  const DriverApi* api_ = nullptr;
  Stream stream_;
  Event start_event_, end_event_;
  Module judge_module_;
  CUfunction fill_fn_ = nullptr, compare_fn_ = nullptr, diff_fn_ = nullptr, read_fn_ = nullptr,
             fma_fn_ = nullptr;
  DeviceBuffer results_;  // CompareResults + scratch words
  DeviceBuffer flush_;
  TensorBuffers ref_, ref32_, cand_, scratch_;
  std::unique_ptr<PreparedPlan> reference_, reference_fp32_;
  std::unique_ptr<internal::LibraryBaseline> library_;
  std::vector<int64_t> elements_;  // per tensor
  std::vector<SetTolerance> tolerances_;
  std::optional<TimingStats> reference_timing_, baseline_timing_;
  std::string baseline_name_;
  double watchdog_seconds_ = 2.0;
  double floor_ms_ = 0.0, suspicious_ms_ = 0.0;
  bool broken_ = false;
  bool hung_ = false;  // a kernel may still be running: never wait on the device again
  std::string broken_reason_;
  unsigned flush_value_ = 1;
};

// ---------------------------------------------------------------------------
// Set-up

Status LocalEvaluator::Initialize() {
  KSEARCH_RETURN_IF_ERROR(problem_.Validate().WithContext("problem '" + problem_.name + "'"));
  internal::CompilerOptions copts;
  copts.cache_dir = options_.compile_cache_dir == "off"
                        ? ""
                        : (options_.compile_cache_dir.empty() ? DefaultCacheDir()
                                                              : options_.compile_cache_dir);
  if (!copts.cache_dir.empty()) copts.cache_dir += "/cubin";
  copts.max_log_bytes = options_.max_log_bytes;
  copts.timeout_seconds = options_.compile_timeout_seconds;
  compiler_ = std::make_unique<Compiler>(copts);
  seed_ = options_.seed ? options_.seed
                        : static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  order_rng_.seed(seed_);
  for (const TensorSpec& t : problem_.tensors) {
    KSEARCH_ASSIGN_OR_RETURN(int64_t n, problem_.Elements(t));
    elements_.push_back(n);
  }
  device_.nvrtc_version = Compiler::NvrtcVersion();
  if (options_.compile_only) {
    if (options_.arch.empty()) {
      return InvalidArgumentError("compile-only evaluation needs an explicit arch (e.g. sm_90)");
    }
    auto archs = Compiler::SupportedArchs();
    if (std::find(archs.begin(), archs.end(), options_.arch) == archs.end()) {
      std::string list;
      for (const auto& a : archs) list += (list.empty() ? "" : ", ") + a;
      return InvalidArgumentError("arch '" + options_.arch + "' is not supported by NVRTC " +
                                  device_.nvrtc_version + " (supported: " + list + ")");
    }
    device_.name = "(compile-only)";
    device_.cc_major = std::atoi(options_.arch.c_str() + 3) / 10;
    device_.cc_minor = std::atoi(options_.arch.c_str() + 3) % 10;
    return Status::Ok();
  }
  KSEARCH_ASSIGN_OR_RETURN(ctx_, CudaContext::Create(options_.device_ordinal));
  api_ = &ctx_->api();
  device_ = ctx_->info();
  if (!options_.arch.empty()) {
    if (options_.arch != device_.Arch()) {
      return InvalidArgumentError("arch '" + options_.arch + "' does not match the device (" +
                                  device_.name + " is " + device_.Arch() + ")");
    }
  }
  KSEARCH_RETURN_IF_ERROR(SetUpDevice());
  KSEARCH_RETURN_IF_ERROR(MeasurePeaks());
  KSEARCH_RETURN_IF_ERROR(MeasureTolerances());
  return Status::Ok();
}

StatusOr<std::unique_ptr<PreparedPlan>> LocalEvaluator::PrepareTrusted(const KernelSpec& kernel,
                                                                       const std::string& what) {
  CompileRequest request{kernel.source, internal::ParamDefines(kernel.plan), device_.Arch(),
                         what + ".cu"};
  KSEARCH_ASSIGN_OR_RETURN(CompileResult compiled, compiler_->Compile(request));
  if (!compiled.ok) {
    return InternalError("the problem's " + what + " kernel does not compile:\n" + compiled.log);
  }
  Evaluation scratch;
  RunFailure failure;
  auto prepared = Prepare(compiled, kernel.plan, &scratch, &failure);
  if (!prepared) return InternalError("the problem's " + what + " kernel: " + failure.message);
  return prepared;
}

Status LocalEvaluator::SetUpDevice() {
  KSEARCH_RETURN_IF_ERROR(ctx_->MakeCurrent());
  KSEARCH_ASSIGN_OR_RETURN(stream_, Stream::Create(*api_));
  KSEARCH_ASSIGN_OR_RETURN(start_event_, Event::Create(*api_));
  KSEARCH_ASSIGN_OR_RETURN(end_event_, Event::Create(*api_));
  CompileRequest judge{internal::kJudgeKernelSource, {}, device_.Arch(), "ksearch_judge.cu"};
  KSEARCH_ASSIGN_OR_RETURN(CompileResult compiled, compiler_->Compile(judge));
  if (!compiled.ok) return InternalError("ksearch's judge kernels do not compile:\n" + compiled.log);
  KSEARCH_ASSIGN_OR_RETURN(judge_module_, Module::Load(*api_, compiled.cubin));
  KSEARCH_ASSIGN_OR_RETURN(fill_fn_, judge_module_.Function("ks_fill"));
  KSEARCH_ASSIGN_OR_RETURN(compare_fn_, judge_module_.Function("ks_compare"));
  KSEARCH_ASSIGN_OR_RETURN(diff_fn_, judge_module_.Function("ks_diff_words"));
  KSEARCH_ASSIGN_OR_RETURN(read_fn_, judge_module_.Function("ks_read"));
  KSEARCH_ASSIGN_OR_RETURN(fma_fn_, judge_module_.Function("ks_fma_peak"));
  KSEARCH_ASSIGN_OR_RETURN(results_, DeviceBuffer::Allocate(*api_, 4096));
  int64_t l2 = std::max<int64_t>(device_.l2_bytes, 8 << 20);
  KSEARCH_ASSIGN_OR_RETURN(flush_, DeviceBuffer::Allocate(*api_, 2 * l2));
  for (TensorBuffers* family : {&ref_, &cand_, &ref32_, &scratch_}) {
    family->owned.clear();
    family->ptr.clear();
    family->bytes.clear();
    for (size_t t = 0; t < problem_.tensors.size(); ++t) {
      const TensorSpec& spec = problem_.tensors[t];
      // Rounded up to whole 32-bit words and zeroed, so that word-wise input
      // comparison never reads uninitialized tail bytes.
      int64_t bytes = (elements_[t] * SizeOf(spec.dtype) + 255) / 256 * 256;
      bool own = family == &ref_ || family == &cand_ || spec.role == TensorRole::kOutput;
      family->bytes.push_back(bytes);
      if (!own) {
        family->owned.emplace_back();
        family->ptr.push_back(ref_.ptr[t]);
        continue;
      }
      KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer buffer, DeviceBuffer::Allocate(*api_, bytes));
      KSEARCH_CU(api_->cuMemsetD32Async(buffer.ptr(), 0, static_cast<size_t>(bytes / 4), stream_.get()),
                 "cuMemsetD32Async");
      family->ptr.push_back(buffer.ptr());
      family->owned.push_back(std::move(buffer));
    }
  }
  KSEARCH_ASSIGN_OR_RETURN(reference_, PrepareTrusted(problem_.reference, "reference"));
  if (!problem_.reference_fp32.source.empty()) {
    KSEARCH_ASSIGN_OR_RETURN(reference_fp32_, PrepareTrusted(problem_.reference_fp32, "reference_fp32"));
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
    for (auto& w : p->workspace) w.Abandon();
    p.reset();
  };
  abandon_plan(reference_);
  abandon_plan(reference_fp32_);
  // Library handles belong to the dead context; leak them rather than call
  // the library on it.
  static_cast<void>(library_.release());
  for (TensorBuffers* family : {&ref_, &ref32_, &cand_, &scratch_}) {
    for (auto& b : family->owned) b.Abandon();
    family->owned.clear();
    family->ptr.clear();
  }
  results_.Abandon();
  flush_.Abandon();
  judge_module_.Abandon();
  stream_.Abandon();
  start_event_.Abandon();
  end_event_.Abandon();
}

Status LocalEvaluator::MeasurePeaks() {
  // Bandwidth: a device-to-device copy of 1 GiB (or less on small devices),
  // counting bytes read plus written, best of five.
  size_t free_bytes = 0, total = 0;
  KSEARCH_CU(api_->cuMemGetInfo(&free_bytes, &total), "cuMemGetInfo");
  int64_t bytes = std::min<int64_t>(int64_t{1} << 30, static_cast<int64_t>(free_bytes) / 8);
  bytes = bytes / 256 * 256;
  KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer a, DeviceBuffer::Allocate(*api_, bytes));
  KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer b, DeviceBuffer::Allocate(*api_, bytes));
  KSEARCH_CU(api_->cuMemsetD32Async(a.ptr(), 1, static_cast<size_t>(bytes / 4), stream_.get()), "cuMemsetD32Async");
  double best_ms = 1e30;
  for (int i = 0; i < 6; ++i) {
    KSEARCH_CU(api_->cuEventRecord(start_event_.get(), stream_.get()), "cuEventRecord");
    KSEARCH_CU(api_->cuMemcpyDtoDAsync(b.ptr(), a.ptr(), static_cast<size_t>(bytes), stream_.get()), "cuMemcpyDtoDAsync");
    KSEARCH_CU(api_->cuEventRecord(end_event_.get(), stream_.get()), "cuEventRecord");
    KSEARCH_CU(api_->cuEventSynchronize(end_event_.get()), "cuEventSynchronize");
    float ms = 0;
    KSEARCH_CU(api_->cuEventElapsedTime(&ms, start_event_.get(), end_event_.get()), "cuEventElapsedTime");
    if (i > 0) best_ms = std::min(best_ms, static_cast<double>(ms));
  }
  device_.peak_bandwidth_gbps = 2.0 * static_cast<double>(bytes) / (best_ms * 1e-3) / 1e9;
  // FMA rate: enough blocks to fill every SM several times.
  int blocks = device_.multiprocessors * 8, threads = 256, iterations = 2048;
  float seed = 1.0f;
  CUdeviceptr out = results_.ptr();
  void* args[] = {&out, &iterations, &seed};
  best_ms = 1e30;
  for (int i = 0; i < 4; ++i) {
    KSEARCH_CU(api_->cuEventRecord(start_event_.get(), stream_.get()), "cuEventRecord");
    KSEARCH_CU(api_->cuLaunchKernel(fma_fn_, blocks, 1, 1, threads, 1, 1, 0, stream_.get(), args, nullptr), "cuLaunchKernel(ks_fma_peak)");
    KSEARCH_CU(api_->cuEventRecord(end_event_.get(), stream_.get()), "cuEventRecord");
    KSEARCH_CU(api_->cuEventSynchronize(end_event_.get()), "cuEventSynchronize");
    float ms = 0;
    KSEARCH_CU(api_->cuEventElapsedTime(&ms, start_event_.get(), end_event_.get()), "cuEventElapsedTime");
    if (i > 0) best_ms = std::min(best_ms, static_cast<double>(ms));
  }
  double flops = 2.0 * 8 * 16 * static_cast<double>(iterations) * blocks * threads;
  device_.peak_gflops = flops / (best_ms * 1e-3) / 1e9;
  auto problem_flops = problem_.Flops();
  auto problem_bytes = problem_.Bytes();
  double flops_ms = problem_flops.ok() ? *problem_flops / (device_.peak_gflops * 1e9) * 1e3 : 0.0;
  double bytes_ms = problem_bytes.ok() ? *problem_bytes / (device_.peak_bandwidth_gbps * 1e9) * 1e3 : 0.0;
  floor_ms_ = std::max(flops_ms, bytes_ms);
  // The bandwidth floor is physical. The FMA floor is not: split-precision
  // tensor-core schemes (3xTF32) legitimately beat plain-FMA fp32 by up to
  // ~2.5x on Hopper, so only a time under a third of it is suspicious.
  suspicious_ms_ = options_.suspicious_floor_fraction * std::max(bytes_ms, flops_ms / 3.0);
  return Status::Ok();
}

Status LocalEvaluator::MeasureTolerances() {
  TensorBuffers zeros_target = std::move(scratch_);
  // (scratch_ is only borrowed here; it is moved back at the end.)
  for (size_t s = 0; s < problem_.input_sets.size(); ++s) {
    const InputSet& set = problem_.input_sets[s];
    SetTolerance tol;
    KSEARCH_RETURN_IF_ERROR(Generate(set, NextSeed()));
    RunFailure f = RunAndWait(*reference_, ref_);
    if (f.status != EvalStatus::kOk) return InternalError("the reference kernel failed: " + f.message);
    if (problem_.tolerance.policy == TolerancePolicy::kRelaxed) {
      tol.atol = problem_.tolerance.atol;
      tol.rtol = problem_.tolerance.rtol;
      tol.allowed_l2 = 1e300;
    } else {
      f = RunAndWait(*reference_fp32_, ref32_);
      if (f.status != EvalStatus::kOk) {
        return InternalError("the fp32 reference kernel failed: " + f.message);
      }
      double worst_l2 = 0.0, worst_rel = 0.0, rms_min = 1e300;
      std::vector<double> rms(problem_.tensors.size(), 0.0);
      for (size_t t = 0; t < problem_.tensors.size(); ++t) {
        const TensorSpec& spec = problem_.tensors[t];
        if (spec.role != TensorRole::kOutput) continue;
        KSEARCH_ASSIGN_OR_RETURN(CompareResults first,
                                 Compare(ref32_.ptr[t], ref_.ptr[t],
                                         elements_[t], spec.dtype, 0.0, 0.0));
        rms[t] = std::sqrt(first.sum_sq_want / static_cast<double>(elements_[t]));
        double atol = problem_.tolerance.atol_rms_fraction * rms[t];
        KSEARCH_ASSIGN_OR_RETURN(CompareResults second,
                                 Compare(ref32_.ptr[t], ref_.ptr[t],
                                         elements_[t], spec.dtype, atol, 0.0));
        double l2 = second.sum_sq_want > 0 ? std::sqrt(second.sum_sq_diff / second.sum_sq_want) : 0.0;
        float max_rel = 0;
        uint32_t bits = static_cast<uint32_t>(second.max_rel);
        std::memcpy(&max_rel, &bits, 4);
        worst_l2 = std::max(worst_l2, l2);
        worst_rel = std::max(worst_rel, static_cast<double>(max_rel));
        rms_min = std::min(rms_min, rms[t]);
      }
      tol.fp32_l2 = worst_l2;
      tol.allowed_l2 = std::max(problem_.tolerance.strict_floor,
                                problem_.tolerance.strict_multiple * worst_l2);
      // Elementwise: plain fp32's own worst relative deviation, times the
      // same multiple; atol from the output's RMS.
      tol.rtol = std::max(1e-6, problem_.tolerance.strict_multiple * worst_rel);
      tol.atol = problem_.tolerance.atol_rms_fraction * rms_min;
    }
    // A zero kernel must fail: reject problems whose outputs it would match.
    for (size_t t = 0; t < problem_.tensors.size(); ++t) {
      const TensorSpec& spec = problem_.tensors[t];
      if (spec.role != TensorRole::kOutput) continue;
      int64_t bytes = elements_[t] * SizeOf(spec.dtype);
      KSEARCH_CU(api_->cuMemsetD8Async(zeros_target.ptr[t], 0, static_cast<size_t>(bytes), stream_.get()),
                 "cuMemsetD8Async");
      KSEARCH_ASSIGN_OR_RETURN(CompareResults zero,
                               Compare(zeros_target.ptr[t], ref_.ptr[t],
                                       elements_[t], spec.dtype, tol.atol, tol.rtol));
      double l2 = zero.sum_sq_want > 0 ? std::sqrt(zero.sum_sq_diff / zero.sum_sq_want) : 0.0;
      if (zero.sum_sq_want == 0.0 || (zero.bad == 0 && l2 <= tol.allowed_l2)) {
        scratch_ = std::move(zeros_target);
        return InvalidArgumentError("problem '" + problem_.name + "': on input set '" + set.name +
                                    "' the reference output '" + spec.name +
                                    "' is (nearly) all zeros, so a kernel writing zeros would pass");
      }
    }
    // Outputs must depend on the inputs: a second seed must change them.
    KSEARCH_RETURN_IF_ERROR(Generate(set, NextSeed()));
    for (size_t t = 0; t < problem_.tensors.size(); ++t) {
      if (problem_.tensors[t].role != TensorRole::kOutput) continue;
      KSEARCH_CU(api_->cuMemcpyDtoDAsync(zeros_target.ptr[t], ref_.ptr[t],
                                         static_cast<size_t>(elements_[t] * SizeOf(problem_.tensors[t].dtype)),
                                         stream_.get()),
                 "cuMemcpyDtoDAsync");
    }
    f = RunAndWait(*reference_, ref_);
    if (f.status != EvalStatus::kOk) return InternalError("the reference kernel failed: " + f.message);
    for (size_t t = 0; t < problem_.tensors.size(); ++t) {
      const TensorSpec& spec = problem_.tensors[t];
      if (spec.role != TensorRole::kOutput) continue;
      KSEARCH_ASSIGN_OR_RETURN(CompareResults across,
                               Compare(zeros_target.ptr[t], ref_.ptr[t],
                                       elements_[t], spec.dtype, tol.atol, tol.rtol));
      double l2 = across.sum_sq_want > 0 ? std::sqrt(across.sum_sq_diff / across.sum_sq_want) : 0.0;
      if (across.bad == 0 && l2 <= tol.allowed_l2) {
        scratch_ = std::move(zeros_target);
        return InvalidArgumentError("problem '" + problem_.name + "': the reference output '" +
                                    spec.name + "' barely changes between seeds on input set '" +
                                    set.name + "', so a kernel that ignores its inputs would pass");
      }
    }
    tolerances_.push_back(tol);
  }
  scratch_ = std::move(zeros_target);
  baseline_name_ = reference_fp32_ ? "reference_fp32" : "reference";
  if (!problem_.baseline.library.empty()) SetUpLibraryBaseline(tolerances_.back());

  // Time the reference and the baseline once: the watchdog comes from them.
  std::vector<double> ref_ms, base_ms;
  for (int i = 0; i < 5; ++i) {
    RunFailure f;
    KSEARCH_ASSIGN_OR_RETURN(double r, TimeOnce(*reference_, ref_, &f));
    if (f.status != EvalStatus::kOk) return InternalError("the reference kernel failed: " + f.message);
    KSEARCH_ASSIGN_OR_RETURN(double b, TimeBaselineOnce(&f));
    if (f.status != EvalStatus::kOk) return InternalError("the baseline failed: " + f.message);
    ref_ms.push_back(r);
    base_ms.push_back(b);
  }
  reference_timing_ = internal::Summarize(ref_ms);
  baseline_timing_ = internal::Summarize(base_ms);
  watchdog_seconds_ = std::max(options_.watchdog_floor_seconds,
                               options_.watchdog_reference_multiple * reference_timing_->median_ms / 1e3);
  return Status::Ok();
}

void LocalEvaluator::SetUpLibraryBaseline(const SetTolerance& tol) {
  const std::string& name = problem_.baseline.library;
  auto library = internal::CreateLibraryBaseline(problem_);
  if (!library.ok()) {
    baseline_name_ += " (" + name + " unavailable: " + library.status().message() + ")";
    return;
  }
  // The library must itself pass the judge on the current inputs.
  Status ran = (*library)->Run(stream_.get(), ref32_.ptr);
  RunFailure waited = ran.ok() ? Wait(watchdog_seconds_ * 10) : RunFailure{};
  if (!ran.ok() || waited.status != EvalStatus::kOk) {
    baseline_name_ += " (" + name + " failed: " + (ran.ok() ? waited.message : ran.message()) + ")";
    return;
  }
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    const TensorSpec& spec = problem_.tensors[t];
    if (spec.role != TensorRole::kOutput) continue;
    auto r = Compare(ref32_.ptr[t], ref_.ptr[t], elements_[t], spec.dtype, tol.atol, tol.rtol);
    double l2 = r.ok() && r->sum_sq_want > 0 ? std::sqrt(r->sum_sq_diff / r->sum_sq_want) : 1.0;
    if (!r.ok() || r->bad > 0 || !(l2 <= tol.allowed_l2)) {
      char text[200];
      std::snprintf(text, sizeof(text), " (%s fails the strict check: L2 relative error %.3g, allowed %.3g)",
                    name.c_str(), l2, tol.allowed_l2);
      baseline_name_ += text;
      return;
    }
  }
  library_ = std::move(*library);
  baseline_name_ = library_->name();
  device_.baseline_library = library_->version();
}

// ---------------------------------------------------------------------------
// Primitive GPU steps

RunFailure LocalEvaluator::Classify(CUresult result, const char* call) {
  RunFailure f;
  if (result == CUDA_SUCCESS) return f;
  f.message = std::string(call) + ": " + internal::CudaErrorText(result);
  if (internal::IsStickyError(result)) {
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
  auto deadline = Clock::now() + std::chrono::duration<double>(limit_seconds);
  int spins = 0;
  while (true) {
    CUresult r = api_->cuStreamQuery(stream_.get());
    if (r == CUDA_SUCCESS) return {};
    if (r != CUDA_ERROR_NOT_READY) return Classify(r, "kernel execution");
    if (Clock::now() > deadline) {
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
  for (size_t l = 0; l < plan.resolved.launches.size(); ++l) {
    const internal::ResolvedLaunch& launch = plan.resolved.launches[l];
    std::vector<uint64_t> storage(launch.args.size());
    std::vector<void*> args(launch.args.size());
    for (size_t a = 0; a < launch.args.size(); ++a) {
      const ResolvedArg& arg = launch.args[a];
      uint64_t& slot = storage[a];
      switch (arg.kind) {
        case ResolvedArg::Kind::kTensor: slot = buffers.ptr[static_cast<size_t>(arg.index)]; break;
        case ResolvedArg::Kind::kWorkspace: slot = plan.workspace[static_cast<size_t>(arg.index)].ptr(); break;
        case ResolvedArg::Kind::kI32: {
          int32_t v = static_cast<int32_t>(arg.int_value);
          std::memcpy(&slot, &v, 4);
          break;
        }
        case ResolvedArg::Kind::kI64: {
          int64_t v = arg.int_value;
          std::memcpy(&slot, &v, 8);
          break;
        }
        case ResolvedArg::Kind::kF32: std::memcpy(&slot, &arg.float_value, 4); break;
      }
      args[a] = &slot;
    }
    CUresult r = api_->cuLaunchKernel(plan.functions[l], launch.grid[0], launch.grid[1], launch.grid[2],
                                      launch.block[0], launch.block[1], launch.block[2],
                                      static_cast<unsigned>(launch.shared_bytes), stream_.get(),
                                      args.data(), nullptr);
    if (r != CUDA_SUCCESS) {
      RunFailure f = Classify(r, ("cuLaunchKernel(" + launch.kernel + ")").c_str());
      return f;
    }
  }
  return {};
}

RunFailure LocalEvaluator::RunAndWait(PreparedPlan& plan, const TensorBuffers& buffers) {
  RunFailure f = Launch(plan, buffers);
  if (f.status != EvalStatus::kOk) return f;
  return Wait(watchdog_seconds_);
}

Status LocalEvaluator::Generate(const InputSet& set, uint64_t seed) {
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    const TensorSpec& spec = problem_.tensors[t];
    if (spec.role != TensorRole::kInput) continue;
    const Distribution& d = set.For(spec.name);
    CUdeviceptr out = ref_.ptr[t];
    long long n = elements_[t];
    int dtype = JudgeDType(spec.dtype);
    int kind = d.kind == Distribution::Kind::kNormal ? 0 : 1;
    double a = d.a, b = d.b;
    unsigned long long s = seed ^ (0x5851f42d4c957f2dull * (t + 1));
    void* args[] = {&out, &n, &dtype, &kind, &a, &b, &s};
    unsigned blocks = static_cast<unsigned>(std::min<long long>((n + 255) / 256, device_.multiprocessors * 32));
    KSEARCH_CU(api_->cuLaunchKernel(fill_fn_, blocks, 1, 1, 256, 1, 1, 0, stream_.get(), args, nullptr),
               "cuLaunchKernel(ks_fill)");
  }
  return CopyInputsToCandidate();
}

Status LocalEvaluator::CopyInputsToCandidate() {
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    if (problem_.tensors[t].role != TensorRole::kInput) continue;
    KSEARCH_CU(api_->cuMemcpyDtoDAsync(cand_.ptr[t], ref_.ptr[t],
                                       static_cast<size_t>(cand_.bytes[t]), stream_.get()),
               "cuMemcpyDtoDAsync");
  }
  return Status::Ok();
}

Status LocalEvaluator::Poison(const TensorBuffers& buffers, PreparedPlan* plan) {
  auto poison = [&](CUdeviceptr p, DType dtype, int64_t n) -> Status {
    switch (dtype) {
      case DType::kF16:
        KSEARCH_CU(api_->cuMemsetD16Async(p, internal::kPoison16, static_cast<size_t>(n), stream_.get()), "cuMemsetD16Async");
        break;
      case DType::kBF16:
        KSEARCH_CU(api_->cuMemsetD16Async(p, internal::kPoisonBf16, static_cast<size_t>(n), stream_.get()), "cuMemsetD16Async");
        break;
      default:
        KSEARCH_CU(api_->cuMemsetD32Async(p, internal::kPoison32,
                                          static_cast<size_t>((n * SizeOf(dtype) + 3) / 4), stream_.get()),
                   "cuMemsetD32Async");
    }
    return Status::Ok();
  };
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    if (problem_.tensors[t].role != TensorRole::kOutput) continue;
    KSEARCH_RETURN_IF_ERROR(poison(buffers.ptr[t], problem_.tensors[t].dtype, elements_[t]));
  }
  if (plan) {
    for (size_t w = 0; w < plan->workspace.size(); ++w) {
      KSEARCH_RETURN_IF_ERROR(poison(plan->workspace[w].ptr(), plan->workspace_dtypes[w],
                                     plan->resolved.workspace_elements[w]));
    }
  }
  return Status::Ok();
}

StatusOr<CompareResults> LocalEvaluator::Compare(CUdeviceptr got, CUdeviceptr want, int64_t n,
                                                 DType dtype, double atol, double rtol) {
  KSEARCH_CU(api_->cuMemsetD8Async(results_.ptr(), 0, sizeof(CompareResults), stream_.get()), "cuMemsetD8Async");
  long long count = n;
  int code = JudgeDType(dtype);
  CUdeviceptr out = results_.ptr();
  void* args[] = {&got, &want, &count, &code, &atol, &rtol, &out};
  unsigned blocks = static_cast<unsigned>(std::min<long long>((n + 255) / 256, device_.multiprocessors * 16));
  KSEARCH_CU(api_->cuLaunchKernel(compare_fn_, blocks, 1, 1, 256, 1, 1, 0, stream_.get(), args, nullptr),
             "cuLaunchKernel(ks_compare)");
  CompareResults results{};
  KSEARCH_CU(api_->cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
  KSEARCH_CU(api_->cuMemcpyDtoH(&results, results_.ptr(), sizeof(results)), "cuMemcpyDtoH");
  return results;
}

StatusOr<double> LocalEvaluator::ReadElement(CUdeviceptr p, DType dtype, int64_t index) {
  int code = JudgeDType(dtype);
  long long i = index;
  CUdeviceptr out = results_.ptr() + 2048;
  void* args[] = {&p, &code, &i, &out};
  KSEARCH_CU(api_->cuLaunchKernel(read_fn_, 1, 1, 1, 1, 1, 1, 0, stream_.get(), args, nullptr),
             "cuLaunchKernel(ks_read)");
  KSEARCH_CU(api_->cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
  double value = 0;
  KSEARCH_CU(api_->cuMemcpyDtoH(&value, out, sizeof(value)), "cuMemcpyDtoH");
  return value;
}

StatusOr<bool> LocalEvaluator::InputsModified() {
  CUdeviceptr count_ptr = results_.ptr() + 1024;
  KSEARCH_CU(api_->cuMemsetD8Async(count_ptr, 0, 8, stream_.get()), "cuMemsetD8Async");
  for (size_t t = 0; t < problem_.tensors.size(); ++t) {
    if (problem_.tensors[t].role != TensorRole::kInput) continue;
    CUdeviceptr a = cand_.ptr[t], b = ref_.ptr[t];
    long long words = cand_.bytes[t] / 4;
    void* args[] = {&a, &b, &words, &count_ptr};
    unsigned blocks = static_cast<unsigned>(std::min<long long>((words + 255) / 256, device_.multiprocessors * 16));
    KSEARCH_CU(api_->cuLaunchKernel(diff_fn_, blocks, 1, 1, 256, 1, 1, 0, stream_.get(), args, nullptr),
               "cuLaunchKernel(ks_diff_words)");
  }
  KSEARCH_CU(api_->cuStreamSynchronize(stream_.get()), "cuStreamSynchronize");
  unsigned long long count = 0;
  KSEARCH_CU(api_->cuMemcpyDtoH(&count, count_ptr, 8), "cuMemcpyDtoH");
  return count != 0;
}

StatusOr<double> LocalEvaluator::TimeOnce(PreparedPlan& plan, const TensorBuffers& buffers,
                                          RunFailure* failure) {
  if (options_.flush_l2) {
    KSEARCH_CU(api_->cuMemsetD32Async(flush_.ptr(), flush_value_++, static_cast<size_t>(flush_.bytes() / 4), stream_.get()),
               "cuMemsetD32Async(L2 flush)");
  }
  KSEARCH_CU(api_->cuEventRecord(start_event_.get(), stream_.get()), "cuEventRecord");
  *failure = Launch(plan, buffers);
  if (failure->status != EvalStatus::kOk) return 0.0;
  KSEARCH_CU(api_->cuEventRecord(end_event_.get(), stream_.get()), "cuEventRecord");
  *failure = Wait(watchdog_seconds_);
  if (failure->status != EvalStatus::kOk) return 0.0;
  float ms = 0;
  KSEARCH_CU(api_->cuEventElapsedTime(&ms, start_event_.get(), end_event_.get()), "cuEventElapsedTime");
  return static_cast<double>(ms);
}

StatusOr<double> LocalEvaluator::TimeBaselineOnce(RunFailure* failure) {
  if (!library_) {
    PreparedPlan* plan = reference_fp32_ ? reference_fp32_.get() : reference_.get();
    return TimeOnce(*plan, reference_fp32_ ? ref32_ : ref_, failure);
  }
  if (options_.flush_l2) {
    KSEARCH_CU(api_->cuMemsetD32Async(flush_.ptr(), flush_value_++, static_cast<size_t>(flush_.bytes() / 4), stream_.get()),
               "cuMemsetD32Async(L2 flush)");
  }
  KSEARCH_CU(api_->cuEventRecord(start_event_.get(), stream_.get()), "cuEventRecord");
  KSEARCH_RETURN_IF_ERROR(library_->Run(stream_.get(), ref32_.ptr));
  KSEARCH_CU(api_->cuEventRecord(end_event_.get(), stream_.get()), "cuEventRecord");
  *failure = Wait(watchdog_seconds_);
  if (failure->status != EvalStatus::kOk) return 0.0;
  float ms = 0;
  KSEARCH_CU(api_->cuEventElapsedTime(&ms, start_event_.get(), end_event_.get()), "cuEventElapsedTime");
  return static_cast<double>(ms);
}

// ---------------------------------------------------------------------------
// Candidates

std::unique_ptr<PreparedPlan> LocalEvaluator::Prepare(const CompileResult& compiled,
                                                      const LaunchPlan& plan, Evaluation* e,
                                                      RunFailure* failure) {
  auto prepared = std::make_unique<PreparedPlan>();
  auto resolved = internal::ResolvePlan(problem_, plan);
  if (!resolved.ok()) {
    failure->status = EvalStatus::kInvalidPlan;
    failure->message = resolved.status().message();
    return nullptr;
  }
  prepared->resolved = std::move(*resolved);
  auto module = Module::Load(*api_, compiled.cubin);
  if (!module.ok()) {
    failure->status = EvalStatus::kLaunchError;
    failure->message = module.status().message();
    return nullptr;
  }
  prepared->module = std::move(*module);
  int64_t optin = ctx_->Attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  for (size_t l = 0; l < prepared->resolved.launches.size(); ++l) {
    const internal::ResolvedLaunch& launch = prepared->resolved.launches[l];
    std::string where = "launches[" + std::to_string(l) + "] (" + launch.kernel + ")";
    auto function = prepared->module.Function(launch.kernel);
    if (!function.ok()) {
      failure->status = EvalStatus::kInvalidPlan;
      failure->message = function.status().code() == StatusCode::kNotFound
                             ? MissingKernel(l, launch.kernel, e->candidate_id, compiled.resources)
                             : where + ": " + function.status().message();
      return nullptr;
    }
    CUfunction f = *function;
    prepared->functions.push_back(f);
    // Arguments against the kernel's signature.
    std::vector<size_t> sizes;
    for (size_t index = 0;; ++index) {
      size_t offset = 0, size = 0;
      CUresult r = api_->cuFuncGetParamInfo(f, index, &offset, &size);
      if (r != CUDA_SUCCESS) break;
      sizes.push_back(size);
    }
    if (sizes.size() != launch.args.size()) {
      failure->status = EvalStatus::kInvalidPlan;
      failure->message = where + ": the plan passes " + std::to_string(launch.args.size()) +
                         " arguments but the kernel takes " + std::to_string(sizes.size());
      return nullptr;
    }
    for (size_t a = 0; a < sizes.size(); ++a) {
      if (static_cast<int64_t>(sizes[a]) != launch.args[a].Size()) {
        failure->status = EvalStatus::kInvalidPlan;
        failure->message = where + ": argument " + std::to_string(a) + " is " +
                           std::to_string(sizes[a]) + " bytes in the kernel but the plan passes " +
                           std::to_string(launch.args[a].Size()) + " (pointers are 8 bytes; scalars i32/f32 4, i64 8)";
        return nullptr;
      }
    }
    KernelResources* res = nullptr;
    for (KernelResources& r : e->resources) {
      if (r.kernel == launch.kernel) res = &r;
    }
    if (!res) {
      e->resources.push_back(KernelResources{});
      res = &e->resources.back();
      res->kernel = launch.kernel;
    }
    auto attribute = [&](CUfunction_attribute which) {
      int v = 0;
      api_->cuFuncGetAttribute(&v, which, f);
      return v;
    };
    res->registers = attribute(CU_FUNC_ATTRIBUTE_NUM_REGS);
    res->static_shared_bytes = attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    res->local_bytes = attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    res->max_threads_per_block = attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    res->max_dynamic_shared_bytes = std::max(res->max_dynamic_shared_bytes, launch.shared_bytes);
    if (launch.Threads() > res->max_threads_per_block) {
      failure->status = EvalStatus::kResourceLimit;
      failure->message = where + ": " + std::to_string(launch.Threads()) +
                         " threads per block, but with " + std::to_string(res->registers) +
                         " registers per thread the kernel allows at most " +
                         std::to_string(res->max_threads_per_block);
      return nullptr;
    }
    if (res->static_shared_bytes + launch.shared_bytes > optin) {
      failure->status = EvalStatus::kResourceLimit;
      failure->message = where + ": " + std::to_string(res->static_shared_bytes) + " B static + " +
                         std::to_string(launch.shared_bytes) + " B dynamic shared memory exceeds the device limit of " +
                         std::to_string(optin) + " B per block";
      return nullptr;
    }
    if (launch.shared_bytes > 48 * 1024) {
      CUresult r = api_->cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            static_cast<int>(launch.shared_bytes));
      if (r != CUDA_SUCCESS) {
        *failure = Classify(r, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
        failure->status = EvalStatus::kResourceLimit;
        return nullptr;
      }
    }
  }
  for (size_t w = 0; w < plan.workspace.size(); ++w) {
    int64_t bytes = prepared->resolved.workspace_elements[w] * SizeOf(plan.workspace[w].dtype);
    size_t free_bytes = 0, total = 0;
    api_->cuMemGetInfo(&free_bytes, &total);
    if (bytes > static_cast<int64_t>(free_bytes) - (int64_t{256} << 20)) {
      failure->status = EvalStatus::kResourceLimit;
      failure->message = "workspace '" + plan.workspace[w].name + "' asks for " + std::to_string(bytes) +
                         " bytes; the device has " + std::to_string(free_bytes) + " free";
      return nullptr;
    }
    auto buffer = DeviceBuffer::Allocate(*api_, bytes);
    if (!buffer.ok()) {
      failure->status = EvalStatus::kResourceLimit;
      failure->message = "workspace '" + plan.workspace[w].name + "': " + buffer.status().message();
      return nullptr;
    }
    prepared->workspace.push_back(std::move(*buffer));
    prepared->workspace_dtypes.push_back(plan.workspace[w].dtype);
  }
  return prepared;
}

void LocalEvaluator::Fail(Evaluation* e, const RunFailure& failure) {
  e->status = failure.status;
  e->message = failure.message;
  if (failure.context_lost) RecoverContext(e);
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
                     "); the in-process evaluator cannot continue: use the isolated worker pool for "
                     "untrusted kernels";
    e->details += (e->details.empty() ? "" : "\n") + broken_reason_;
  } else {
    e->details += (e->details.empty() ? "" : "\n") +
                  std::string("the CUDA context was reset and rebuilt after this crash");
  }
}

bool LocalEvaluator::CheckCorrectness(PreparedPlan& plan, const std::string& phase, Evaluation* e,
                                      bool check_determinism) {
  auto internal_error = [&](const Status& s) {
    e->status = EvalStatus::kLaunchError;
    e->message = "evaluator error during " + phase + ": " + s.message();
    return false;
  };
  int trials = phase == "check" ? std::max(1, options_.trials_per_input_set) : 1;
  for (size_t s = 0; s < problem_.input_sets.size(); ++s) {
    const InputSet& set = problem_.input_sets[s];
    const SetTolerance& tol = tolerances_[s];
    for (int trial = 0; trial < trials; ++trial) {
      if (Status st = Generate(set, NextSeed()); !st.ok()) return internal_error(st);
      if (Status st = Poison(cand_, &plan); !st.ok()) return internal_error(st);
      // Shuffled order: a candidate cannot rely on running right after (or
      // before) the reference.
      bool reference_first = (order_rng_() & 1) != 0;
      RunFailure f;
      if (reference_first) {
        f = RunAndWait(*reference_, ref_);
        if (f.status != EvalStatus::kOk) return internal_error(InternalError("reference: " + f.message));
      }
      f = RunAndWait(plan, cand_);
      if (f.status != EvalStatus::kOk) {
        Fail(e, f);
        return false;
      }
      if (!reference_first) {
        f = RunAndWait(*reference_, ref_);
        if (f.status != EvalStatus::kOk) return internal_error(InternalError("reference: " + f.message));
      }
      auto modified = InputsModified();
      if (!modified.ok()) return internal_error(modified.status());
      if (*modified) {
        e->status = EvalStatus::kInputModified;
        e->message = "the candidate wrote into an input tensor (input set '" + set.name + "', " + phase + ")";
        return false;
      }
      for (size_t t = 0; t < problem_.tensors.size(); ++t) {
        const TensorSpec& spec = problem_.tensors[t];
        if (spec.role != TensorRole::kOutput) continue;
        auto r = Compare(cand_.ptr[t], ref_.ptr[t], elements_[t], spec.dtype,
                         tol.atol, tol.rtol);
        if (!r.ok()) return internal_error(r.status());
        double l2 = r->sum_sq_want > 0 ? std::sqrt(r->sum_sq_diff / r->sum_sq_want) : 0.0;
        bool l2_bad = !(l2 <= tol.allowed_l2);
        if (r->bad > 0 || l2_bad) {
          Mismatch m;
          m.tensor = spec.name;
          m.input_set = set.name;
          m.phase = phase;
          m.bad_count = static_cast<int64_t>(r->bad);
          m.elements = elements_[t];
          m.worst_index = r->worst ? static_cast<int64_t>(r->worst & 0xffffffffull) : -1;
          uint32_t bits = static_cast<uint32_t>(r->max_rel);
          float max_rel = 0;
          std::memcpy(&max_rel, &bits, 4);
          m.max_rel_error = max_rel;
          m.l2_rel_error = l2;
          m.allowed_l2_rel_error = tol.allowed_l2;
          if (m.worst_index >= 0) {
            m.expected = ReadElement(ref_.ptr[t], spec.dtype, m.worst_index).value_or(NAN);
            m.got = ReadElement(cand_.ptr[t], spec.dtype, m.worst_index).value_or(NAN);
          }
          e->mismatch = m;
          if (r->unwritten > 0) {
            e->status = EvalStatus::kUnwrittenOutput;
            e->message = std::to_string(r->unwritten) + " of " + std::to_string(elements_[t]) +
                         " elements of '" + spec.name + "' were never written (poison survived; input set '" +
                         set.name + "', " + phase + ")";
          } else {
            e->status = EvalStatus::kWrongResult;
            char text[256];
            std::snprintf(text, sizeof(text),
                          "'%s' differs from the reference on '%s' inputs (%s): %lld bad elements, "
                          "L2 relative error %.3g (allowed %.3g)",
                          spec.name.c_str(), set.name.c_str(), phase.c_str(),
                          static_cast<long long>(r->bad), l2, tol.allowed_l2);
            e->message = text;
          }
          return false;
        }
        e->max_l2_rel_error = std::max(e->max_l2_rel_error, l2);
        e->allowed_l2_rel_error = std::max(e->allowed_l2_rel_error, tol.allowed_l2);
      }
      if (check_determinism && s == 0 && trial == 0) {
        // Same inputs again: the outputs must agree with the first run.
        for (size_t t = 0; t < problem_.tensors.size(); ++t) {
          if (problem_.tensors[t].role != TensorRole::kOutput) continue;
          if (api_->cuMemcpyDtoDAsync(scratch_.ptr[t], cand_.ptr[t],
                                      static_cast<size_t>(elements_[t] * SizeOf(problem_.tensors[t].dtype)),
                                      stream_.get()) != CUDA_SUCCESS) {
            return internal_error(InternalError("cuMemcpyDtoDAsync failed"));
          }
        }
        if (Status st = Poison(cand_, &plan); !st.ok()) return internal_error(st);
        f = RunAndWait(plan, cand_);
        if (f.status != EvalStatus::kOk) {
          Fail(e, f);
          return false;
        }
        for (size_t t = 0; t < problem_.tensors.size(); ++t) {
          const TensorSpec& spec = problem_.tensors[t];
          if (spec.role != TensorRole::kOutput) continue;
          auto r = Compare(cand_.ptr[t], scratch_.ptr[t], elements_[t],
                           spec.dtype, tol.atol, tol.rtol);
          if (!r.ok()) return internal_error(r.status());
          double l2 = r->sum_sq_want > 0 ? std::sqrt(r->sum_sq_diff / r->sum_sq_want) : 0.0;
          if (r->bad > 0 || !(l2 <= tol.allowed_l2)) {
            e->status = r->unwritten > 0 ? EvalStatus::kUnwrittenOutput : EvalStatus::kNondeterministic;
            char text[256];
            std::snprintf(text, sizeof(text),
                          "two runs on the same '%s' inputs disagree: %lld elements of '%s' differ "
                          "beyond tolerance (L2 relative difference %.3g)",
                          set.name.c_str(), static_cast<long long>(r->bad), spec.name.c_str(), l2);
            e->message = text;
            return false;
          }
        }
      }
    }
  }
  return true;
}

void LocalEvaluator::TimeCandidate(PreparedPlan& plan, Evaluation* e) {
  auto start = Clock::now();
  auto timing_error = [&](const Status& s) {
    e->status = EvalStatus::kLaunchError;
    e->message = "evaluator error while timing: " + s.message();
  };
  // Warm-up: module load and first-launch costs stay out of the figures.
  double warm = 0.0;
  int warm_runs = 0;
  while (warm < options_.warmup_ms || warm_runs < 2) {
    RunFailure f;
    auto ms = TimeOnce(plan, cand_, &f);
    if (!ms.ok()) return timing_error(ms.status());
    if (f.status != EvalStatus::kOk) return Fail(e, f);
    warm += *ms;
    if (++warm_runs > 1000) break;
  }
  std::vector<double> cand_ms, base_ms;
  bool with_baseline = options_.time_baseline;
  auto deadline = start + std::chrono::duration<double>(options_.max_timing_seconds);
  while (static_cast<int>(cand_ms.size()) < options_.max_repetitions) {
    RunFailure f;
    auto a = TimeOnce(plan, cand_, &f);
    if (!a.ok()) return timing_error(a.status());
    if (f.status != EvalStatus::kOk) return Fail(e, f);
    cand_ms.push_back(*a);
    if (with_baseline) {
      auto b = TimeBaselineOnce(&f);
      if (!b.ok()) return timing_error(b.status());
      if (f.status != EvalStatus::kOk) return timing_error(InternalError("baseline: " + f.message));
      base_ms.push_back(*b);
    }
    if (static_cast<int>(cand_ms.size()) >= options_.min_repetitions) {
      if (Clock::now() > deadline) break;
      if (cand_ms.size() % 5 == 0) {
        bool precise = internal::MedianIsPrecise(internal::Summarize(cand_ms), options_.target_ci_fraction);
        if (precise && with_baseline) {
          precise = internal::MedianIsPrecise(internal::Summarize(base_ms), options_.target_ci_fraction);
        }
        if (precise) break;
      }
    }
  }
  e->timing = internal::Summarize(cand_ms);
  if (with_baseline) {
    e->baseline_timing = internal::Summarize(base_ms);
    Speedup s = internal::PairedSpeedup(cand_ms, base_ms);
    s.baseline = baseline_name_;
    e->speedup = s;
  }
  e->floor_ms = floor_ms_;
  e->roofline_fraction = e->timing->median_ms > 0 ? floor_ms_ / e->timing->median_ms : 0.0;
  e->timing_ms = MsSince(start);
}

void LocalEvaluator::Judge(const Candidate& candidate, const CompileResult& compiled, Evaluation* e) {
  e->resources = compiled.resources;
  if (!compiled.ok) {
    e->status = compiled.timed_out ? EvalStatus::kTimeout : EvalStatus::kCompileError;
    e->message = compiled.timed_out ? "NVRTC did not finish within the compile time limit"
                                    : "NVRTC rejected the source";
    e->details = compiled.log;
    return;
  }
  if (options_.compile_only) {
    auto resolved = internal::ResolvePlan(problem_, candidate.plan);
    if (!resolved.ok()) {
      e->status = EvalStatus::kInvalidPlan;
      e->message = resolved.status().message();
      return;
    }
    for (size_t l = 0; l < resolved->launches.size(); ++l) {
      const std::string& kernel = resolved->launches[l].kernel;
      bool found = std::any_of(compiled.resources.begin(), compiled.resources.end(),
                               [&](const KernelResources& r) { return r.kernel == kernel; });
      if (!found && !compiled.resources.empty()) {
        e->status = EvalStatus::kInvalidPlan;
        e->message = MissingKernel(l, kernel, candidate.id, compiled.resources);
        return;
      }
      if (resolved->launches[l].shared_bytes > 227 * 1024) {
        e->status = EvalStatus::kResourceLimit;
        e->message = "launches[" + std::to_string(l) + "]: " +
                     std::to_string(resolved->launches[l].shared_bytes) +
                     " B of dynamic shared memory is more than any current GPU allows per block (227 KiB)";
        return;
      }
    }
    e->status = EvalStatus::kCompiled;
    e->message = "compiled for " + options_.arch + "; plan checked against the problem (compile-only)";
    e->checks_not_run = {"plan vs kernel signature (needs the driver)", "device limits",
                         "correctness", "timing", "re-check after timing"};
    return;
  }
  RunFailure failure;
  auto start_check = Clock::now();
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
      for (DeviceBuffer& w : plan->workspace) w.Abandon();
    }
  } abandon_if_hung{this, plan.get()};
  if (!CheckCorrectness(*plan, "check", e, /*check_determinism=*/true)) {
    e->check_ms = MsSince(start_check);
    return;
  }
  e->check_ms = MsSince(start_check);
  TimeCandidate(*plan, e);
  if (e->status != EvalStatus::kCancelled && e->status != EvalStatus::kOk) return;
  auto start_recheck = Clock::now();
  if (!CheckCorrectness(*plan, "recheck", e, /*check_determinism=*/false)) {
    e->check_ms += MsSince(start_recheck);
    return;
  }
  e->check_ms += MsSince(start_recheck);
  e->status = EvalStatus::kOk;
  char text[200];
  std::snprintf(text, sizeof(text), "correct; median %.4f ms", e->timing->median_ms);
  e->message = text;
  if (e->speedup) {
    std::snprintf(text, sizeof(text), ", %.3fx vs %s", e->speedup->ratio, e->speedup->baseline.c_str());
    e->message += text;
  }
  if (problem_.tolerance.policy == TolerancePolicy::kRelaxed) {
    e->relaxed_tolerance = true;
    e->message += " [relaxed tolerance]";
  }
  if (suspicious_ms_ > 0 && e->timing->median_ms < suspicious_ms_) {
    e->status = EvalStatus::kSuspiciousSpeed;
    std::snprintf(text, sizeof(text),
                  "median %.4f ms is below the physical floor of this device (%.4f ms from the "
                  "declared bytes and flops); the kernel cannot be doing the work",
                  e->timing->median_ms, suspicious_ms_ / options_.suspicious_floor_fraction);
    e->message = text;
  }
}

std::vector<Evaluation> LocalEvaluator::Evaluate(std::span<const Candidate> candidates,
                                                 const std::atomic<bool>* cancel) {
  return EvaluateWith(candidates, {}, cancel);
}

std::vector<Evaluation> LocalEvaluator::EvaluateWith(std::span<const Candidate> candidates,
                                                     std::span<const CompileResult> precompiled,
                                                     const std::atomic<bool>* cancel) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Evaluation> out(candidates.size());
  // Compiles run in parallel on the CPU; GPU checks and timing run one at a
  // time (one timing lane per GPU).
  unsigned workers = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 16));
  std::vector<StatusOr<CompileResult>> results(candidates.size(), InternalError("not compiled"));
  std::vector<double> compile_wall(candidates.size(), 0.0);
  // Compiled by the caller (a worker process receiving cubins): judge only.
  for (size_t i = 0; i < precompiled.size(); ++i) results[i] = precompiled[i];
  {
    std::atomic<size_t> next{0};
    std::vector<std::thread> pool;
    size_t to_compile = precompiled.empty() ? candidates.size() : 0;
    for (unsigned w = 0; w < std::min<size_t>(workers, to_compile); ++w) {
      pool.emplace_back([&] {
        for (size_t i = next++; i < candidates.size(); i = next++) {
          if (cancel && cancel->load()) continue;
          const Candidate& c = candidates[i];
          std::vector<std::string> opts = c.compile_options;
          for (std::string& d : internal::ParamDefines(c.plan)) opts.push_back(std::move(d));
          auto start = Clock::now();
          results[i] = compiler_->Compile(CompileRequest{c.source, opts, options_.compile_only ? options_.arch : device_.Arch(),
                                                         (c.id.empty() ? std::string("candidate") : c.id) + ".cu"});
          compile_wall[i] = MsSince(start);
        }
      });
    }
    for (std::thread& t : pool) t.join();
  }
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    Evaluation& e = out[i];
    auto start = Clock::now();
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
      e.status = EvalStatus::kCompileError;
      e.message = "NVRTC could not be used: " + results[i].status().message();
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
        e.status = EvalStatus::kLaunchError;
        e.message = st.message();
        continue;
      }
    }
    Judge(c, compiled, &e);
    e.total_ms = MsSince(start) + e.compile_ms;
    if (!options_.compile_only) {
      e.device.sm_clock_mhz = device_.sm_clock_mhz;
    }
  }
  return out;
}

}  // namespace

bool CudaDriverAvailable(std::string* why) {
  auto driver = internal::Driver();
  if (!driver.ok()) {
    if (why) *why = driver.status().message();
    return false;
  }
  int count = 0;
  CUresult r = (*driver)->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS || count == 0) {
    if (why) *why = r != CUDA_SUCCESS ? internal::CudaErrorText(r) : "the CUDA driver reports no GPU";
    return false;
  }
  return true;
}

StatusOr<std::unique_ptr<Evaluator>> CreateLocalEvaluator(const Problem& problem,
                                                          const EvaluatorOptions& options) {
  auto evaluator = std::make_unique<LocalEvaluator>(problem, options);
  KSEARCH_RETURN_IF_ERROR(evaluator->Initialize());
  return std::unique_ptr<Evaluator>(std::move(evaluator));
}

// The worker processes' entry point (lib/eval/judge.h).
StatusOr<std::vector<Evaluation>> internal::EvaluatePrecompiled(
    Evaluator& evaluator, std::span<const Candidate> candidates,
    std::span<const CompileResult> compiled, const std::atomic<bool>* cancel) {
  auto* local = dynamic_cast<LocalEvaluator*>(&evaluator);
  if (local == nullptr) {
    return InvalidArgumentError("EvaluatePrecompiled needs an evaluator made by CreateLocalEvaluator");
  }
  if (candidates.size() != compiled.size() || candidates.empty()) {
    return InvalidArgumentError("EvaluatePrecompiled: " + std::to_string(candidates.size()) +
                                " candidates but " + std::to_string(compiled.size()) + " compiles");
  }
  return local->EvaluateWith(candidates, compiled, cancel);
}

}  // namespace ksearch
