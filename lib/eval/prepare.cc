// Loading a launch plan: resolve its expressions, load the module, check the
// arguments against each kernel's signature and the device's limits, and
// allocate its workspace between guard regions.
#include <algorithm>

#include "eval/local_evaluator.h"
#include "core/plan_signature.h"

namespace ksearch::internal {

StatusOr<std::unique_ptr<PreparedPlan>> LocalEvaluator::PrepareTrusted(const KernelSpec& kernel,
                                                                       const std::string& what) {
  CompileRequest request{kernel.source, ParamDefines(kernel.plan), device_.CompileArch(), what + ".cu"};
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
  auto executor = PlanExecutor::Bind(*api_, prepared->module, plan, prepared->resolved);
  if (!executor.ok()) {
    failure->status = EvalStatus::kInvalidPlan;
    failure->message = executor.status().message();
    if (executor.status().code() == StatusCode::kNotFound) {
      for (size_t l = 0; l < prepared->resolved.launches.size(); ++l) {
        const std::string& kernel = prepared->resolved.launches[l].kernel;
        if (!prepared->module.Function(kernel).ok()) {
          failure->message = MissingKernel(l, kernel, e->candidate_id, compiled.resources);
          break;
        }
      }
    }
    return nullptr;
  }
  prepared->executor = std::move(*executor);
  for (size_t l = 0; l < prepared->resolved.launches.size(); ++l) {
    const ResolvedLaunch& launch = prepared->resolved.launches[l];
    const BoundKernel& k = prepared->executor.kernels()[l];
    KernelResources* res = nullptr;
    for (KernelResources& r : e->resources) {
      if (r.kernel == launch.kernel) res = &r;
    }
    if (!res) {
      e->resources.push_back(KernelResources{});
      res = &e->resources.back();
      res->kernel = launch.kernel;
    }
    res->registers = k.registers;
    res->static_shared_bytes = k.static_shared_bytes;
    res->local_bytes = k.local_bytes;
    res->max_threads_per_block = k.max_threads_per_block;
    res->max_dynamic_shared_bytes = std::max(res->max_dynamic_shared_bytes, launch.shared_bytes);
  }
  Status fits = prepared->executor.Fit(
      prepared->resolved, ctx_->Attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
  if (!fits.ok()) {
    // A cluster the kernel contradicts is the plan's fault; the rest is the
    // device's limits.
    failure->status = fits.code() == StatusCode::kInvalidArgument ? EvalStatus::kInvalidPlan
                                                                  : EvalStatus::kResourceLimit;
    failure->message = fits.message();
    return nullptr;
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
