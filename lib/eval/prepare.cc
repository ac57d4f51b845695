// Loading a launch plan: resolve its expressions, load the module, check the
// arguments against each kernel's signature and the device's limits, and
// allocate its workspace between guard regions.
#include <algorithm>

#include "eval/local_evaluator.h"
#include "eval/signature_check.h"

namespace ksearch::internal {

StatusOr<std::unique_ptr<PreparedPlan>> LocalEvaluator::PrepareTrusted(const KernelSpec& kernel,
                                                                       const std::string& what) {
  CompileRequest request{kernel.source, ParamDefines(kernel.plan), device_.Arch(), what + ".cu"};
  request.trusted = true;  // the problem's own kernel, not a candidate
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

std::unique_ptr<PreparedPlan> LocalEvaluator::Prepare(const CompileResult& compiled,
                                                      const LaunchPlan& plan, Evaluation* e,
                                                      RunFailure* failure) {
  auto prepared = std::make_unique<PreparedPlan>();
  auto resolved = ResolvePlan(problem_, plan);
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
    const ResolvedLaunch& launch = prepared->resolved.launches[l];
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
    std::vector<int64_t> sizes;
    for (size_t index = 0;; ++index) {
      size_t offset = 0, size = 0;
      CUresult r = api_->cuFuncGetParamInfo(f, index, &offset, &size);
      if (r != CUDA_SUCCESS) break;
      sizes.push_back(static_cast<int64_t>(size));
    }
    if (std::string why = ArgumentMismatch(l, plan.launches[l], launch, sizes); !why.empty()) {
      failure->status = EvalStatus::kInvalidPlan;
      failure->message = std::move(why);
      return nullptr;
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
      failure->message = where + ": " + std::to_string(res->static_shared_bytes) +
                         " B static + " + std::to_string(launch.shared_bytes) +
                         " B dynamic shared memory exceeds the device limit of " +
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
      failure->message = "workspace '" + plan.workspace[w].name + "' asks for " +
                         std::to_string(bytes) + " bytes; the device has " +
                         std::to_string(free_bytes) + " free";
      return nullptr;
    }
    auto buffer = AllocateGuarded(bytes);
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

}  // namespace ksearch::internal
