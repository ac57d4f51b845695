// KernelRunner: a cached kernel launched on the caller's stream.
#include "ksearch/kernel_runner.h"

#include <cstring>
#include <list>
#include <map>
#include <mutex>

#include "core/plan_resolve.h"
#include "cuda/driver.h"
#include "cuda/objects.h"
#include "cuda/plan_executor.h"
#include "store/dispatch_table.h"

namespace ksearch {
namespace internal {
namespace {

constexpr int64_t kWorkspaceAlignment = 256;

int64_t AlignUp(int64_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

}  // namespace

class KernelRunnerImpl {
 public:
  struct Shape {
    ResolvedPlan plan;
    std::vector<int64_t> workspace_offsets;
    int64_t workspace_bytes = 0;
  };

  ~KernelRunnerImpl() {
    // Module unload and cuMemFree act on the current context.
    if (ctx) ctx->MakeCurrent().IgnoreError();
  }

  Status Initialize();
  StatusOr<std::shared_ptr<const Shape>> Resolve(std::span<const DimValue> dims);
  Status Launch(void* stream, std::span<const TensorPointer> tensors, std::span<const DimValue> dims,
                void* workspace, int64_t workspace_bytes);

  CachedKernel kernel;
  Problem problem;
  KernelRunner::Options options;
  std::vector<std::pair<std::string, int64_t>> first_checked;  // dims of its first checked case
  std::unique_ptr<CudaContext> ctx;  // destroyed last: owns the primary-context reference
  Module module;
  int64_t optin_shared_bytes = 0;

  std::mutex mutex;  // guards the members below
  PlanExecutor executor;  // Fit raises kernel attributes
  std::list<std::pair<std::vector<int64_t>, std::shared_ptr<const Shape>>> shapes;  // most recent first
  DeviceBuffer own_workspace;
};

Status KernelRunnerImpl::Initialize() {
  KSEARCH_ASSIGN_OR_RETURN(ctx, CudaContext::Create(options.device_ordinal));
  const DeviceInfo& device = ctx->info();
  if (options.require_matching_key) {
    // The bucket is the entry's place in its table, not a property of this
    // machine: everything else must match.
    KernelCacheKey here = KernelCacheKey::For(problem, device);
    here.bucket = kernel.key.bucket;
    const KernelCacheKey& have = kernel.key;
    if (here.problem_fingerprint != have.problem_fingerprint) {
      return FailedPreconditionError(
          "the cached kernel was tuned for problem fingerprint " + have.problem_fingerprint.substr(0, 12) +
          "…, but '" + problem.name + "' is " + here.problem_fingerprint.substr(0, 12) +
          "… (other dims, tensors or tolerance): tune this problem");
    }
    if (here != have) {
      return FailedPreconditionError("the cached kernel is for " + have.ToString() + ", but this is " +
                                     here.ToString() + ": tune again on this machine");
    }
  }
  KSEARCH_ASSIGN_OR_RETURN(ResolvedPlan plan, ResolvePlan(problem, kernel.plan));
  KSEARCH_ASSIGN_OR_RETURN(module, Module::Load(ctx->api(), kernel.cubin));
  optin_shared_bytes = ctx->Attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  KSEARCH_ASSIGN_OR_RETURN(executor, PlanExecutor::Bind(ctx->api(), module, kernel.plan, plan));
  // Validates a checked shape against the kernels' limits now, not at the
  // first launch.
  std::vector<DimValue> checked;
  for (const auto& [name, value] : first_checked) checked.push_back(DimValue{name, value});
  KSEARCH_ASSIGN_OR_RETURN(auto shape, Resolve(checked));
  (void)shape;
  return Status::Ok();
}

StatusOr<std::shared_ptr<const KernelRunnerImpl::Shape>> KernelRunnerImpl::Resolve(
    std::span<const DimValue> dims) {
  std::vector<int64_t> values;
  for (const auto& [name, value] : problem.dims) values.push_back(value);
  std::vector<std::pair<std::string, int64_t>> overrides;
  for (const DimValue& d : dims) {
    size_t i = 0;
    while (i < problem.dims.size() && problem.dims[i].first != d.name) ++i;
    if (i == problem.dims.size()) {
      return InvalidArgumentError("KernelRunner: '" + std::string(d.name) + "' is not a dim of problem '" +
                                  problem.name + "'");
    }
    values[i] = d.value;
    overrides.emplace_back(std::string(d.name), d.value);
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto it = shapes.begin(); it != shapes.end(); ++it) {
      if (it->first == values) {
        shapes.splice(shapes.begin(), shapes, it);
        return shapes.front().second;
      }
    }
  }
  auto shape = std::make_shared<Shape>();
  if (overrides.empty()) {
    KSEARCH_ASSIGN_OR_RETURN(shape->plan, ResolvePlan(problem, kernel.plan));
  } else {
    KSEARCH_ASSIGN_OR_RETURN(Problem resized, problem.WithDims(overrides));
    KSEARCH_ASSIGN_OR_RETURN(shape->plan, ResolvePlan(resized, kernel.plan));
  }
  for (size_t w = 0; w < kernel.plan.workspace.size(); ++w) {
    shape->workspace_offsets.push_back(shape->workspace_bytes);
    shape->workspace_bytes += AlignUp(shape->plan.workspace_elements[w] * SizeOf(kernel.plan.workspace[w].dtype));
  }
  std::lock_guard<std::mutex> lock(mutex);
  if (Status fits = executor.Fit(shape->plan, optin_shared_bytes); !fits.ok()) {
    return InvalidArgumentError(fits.message());
  }
  shapes.emplace_front(values, shape);
  while (static_cast<int>(shapes.size()) > std::max(1, options.max_cached_shapes)) shapes.pop_back();
  return std::shared_ptr<const Shape>(shape);
}

Status KernelRunnerImpl::Launch(void* stream, std::span<const TensorPointer> tensors,
                                std::span<const DimValue> dims, void* workspace, int64_t workspace_bytes) {
  std::vector<CUdeviceptr> pointers(problem.tensors.size(), 0);
  std::vector<bool> given(problem.tensors.size(), false);
  for (const TensorPointer& t : tensors) {
    size_t i = 0;
    while (i < problem.tensors.size() && problem.tensors[i].name != t.name) ++i;
    if (i == problem.tensors.size()) {
      return InvalidArgumentError("KernelRunner: '" + std::string(t.name) +
                                  "' is not a tensor of problem '" + problem.name + "'");
    }
    pointers[i] = reinterpret_cast<CUdeviceptr>(t.device_ptr);
    given[i] = true;
  }
  for (size_t i = 0; i < given.size(); ++i) {
    if (!given[i]) {
      return InvalidArgumentError("KernelRunner: no device pointer for tensor '" + problem.tensors[i].name + "'");
    }
  }
  KSEARCH_ASSIGN_OR_RETURN(std::shared_ptr<const Shape> shape, Resolve(dims));
  // The judge's buffers are 256-byte aligned; an application's may not be,
  // and TMA needs 16 bytes. Said here, by name, rather than as the driver's
  // CUDA_ERROR_INVALID_VALUE.
  for (const ResolvedLaunch& launch : shape->plan.launches) {
    for (const ResolvedArg& arg : launch.args) {
      if (arg.kind == ResolvedArg::Kind::kTensorMap && pointers[static_cast<size_t>(arg.index)] % 16 != 0) {
        return InvalidArgumentError("KernelRunner: tensor '" + problem.tensors[static_cast<size_t>(arg.index)].name +
                                    "' is not 16-byte aligned, and kernel '" + launch.kernel +
                                    "' reads it through a tensor map (TMA needs 16-byte aligned addresses)");
      }
    }
  }
  const DriverApi& api = ctx->api();
  KSEARCH_RETURN_IF_ERROR(ctx->MakeCurrent());
  CUdeviceptr workspace_base = reinterpret_cast<CUdeviceptr>(workspace);
  if (shape->workspace_bytes > 0) {
    if (workspace) {
      if (workspace_bytes > 0 && workspace_bytes < shape->workspace_bytes) {
        return InvalidArgumentError("KernelRunner: the workspace holds " + std::to_string(workspace_bytes) +
                                    " bytes; this launch needs " + std::to_string(shape->workspace_bytes));
      }
    } else {
      std::lock_guard<std::mutex> lock(mutex);
      if (own_workspace.bytes() < shape->workspace_bytes) {
        own_workspace = DeviceBuffer();
        KSEARCH_ASSIGN_OR_RETURN(own_workspace, DeviceBuffer::Allocate(api, shape->workspace_bytes));
      }
      workspace_base = own_workspace.ptr();
    }
  }
  std::vector<CUdeviceptr> workspace_pointers;
  for (int64_t offset : shape->workspace_offsets) {
    workspace_pointers.push_back(workspace_base + static_cast<CUdeviceptr>(offset));
  }
  std::string failed;
  CUresult r = executor.Launch(shape->plan, static_cast<CUstream>(stream), pointers, workspace_pointers,
                               &failed);
  KSEARCH_CU(r, ("cuLaunchKernel(" + failed + ")").c_str());
  return Status::Ok();
}

}  // namespace internal

KernelRunner::KernelRunner(std::vector<std::unique_ptr<internal::KernelRunnerImpl>> impls,
                           std::unique_ptr<internal::DispatchTable> table, bool allow_unchecked_dims)
    : impls_(std::move(impls)), table_(std::move(table)), allow_unchecked_dims_(allow_unchecked_dims) {}
KernelRunner::~KernelRunner() = default;

StatusOr<std::unique_ptr<KernelRunner>> KernelRunner::Load(const CachedKernel& kernel, const Problem& problem) {
  return Load(kernel, problem, Options());
}

StatusOr<std::unique_ptr<KernelRunner>> KernelRunner::Load(const CachedKernel& kernel, const Problem& problem,
                                                           const Options& options) {
  return LoadTable(std::span<const CachedKernel>(&kernel, 1), problem, options);
}

StatusOr<std::unique_ptr<KernelRunner>> KernelRunner::LoadTable(std::span<const CachedKernel> table,
                                                                const Problem& problem, const Options& options) {
  std::vector<int> buckets;
  for (const CachedKernel& k : table) buckets.push_back(k.key.bucket);
  KSEARCH_ASSIGN_OR_RETURN(internal::DispatchTable dispatch, internal::DispatchTable::Create(problem, buckets));
  std::vector<std::unique_ptr<internal::KernelRunnerImpl>> impls;
  for (size_t i = 0; i < table.size(); ++i) {
    auto impl = std::make_unique<internal::KernelRunnerImpl>();
    impl->kernel = table[i];
    impl->problem = problem;
    impl->options = options;
    impl->first_checked = dispatch.checked(i).front();
    Status loaded = impl->Initialize();
    if (!loaded.ok()) {
      return table.size() == 1 ? loaded : loaded.WithContext("entry " + std::to_string(i) + " (bucket " +
                                                             problem.dispatch.BucketName(table[i].key.bucket) + ")");
    }
    impls.push_back(std::move(impl));
  }
  return std::unique_ptr<KernelRunner>(
      new KernelRunner(std::move(impls), std::make_unique<internal::DispatchTable>(std::move(dispatch)),
                       options.allow_unchecked_dims));
}

StatusOr<internal::KernelRunnerImpl*> KernelRunner::Select(std::span<const DimValue> dims) const {
  KSEARCH_ASSIGN_OR_RETURN(size_t entry, table_->Select(dims, allow_unchecked_dims_));
  return impls_[entry].get();
}

StatusOr<int64_t> KernelRunner::WorkspaceBytes(std::span<const DimValue> dims) const {
  KSEARCH_ASSIGN_OR_RETURN(internal::KernelRunnerImpl * impl, Select(dims));
  KSEARCH_ASSIGN_OR_RETURN(auto shape, impl->Resolve(dims));
  return shape->workspace_bytes;
}

Status KernelRunner::Launch(void* stream, std::span<const TensorPointer> tensors, std::span<const DimValue> dims,
                            void* workspace, int64_t workspace_bytes) {
  KSEARCH_ASSIGN_OR_RETURN(internal::KernelRunnerImpl * impl, Select(dims));
  return impl->Launch(stream, tensors, dims, workspace, workspace_bytes);
}

StatusOr<const CachedKernel*> KernelRunner::KernelFor(std::span<const DimValue> dims) const {
  KSEARCH_ASSIGN_OR_RETURN(internal::KernelRunnerImpl * impl, Select(dims));
  return &impl->kernel;
}

const CachedKernel& KernelRunner::kernel() const { return impls_.front()->kernel; }

}  // namespace ksearch
