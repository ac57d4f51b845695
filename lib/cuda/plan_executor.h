// PlanExecutor: a resolved launch plan bound to the kernels of a loaded
// module, checked against their signatures and limits, and launched in order.
//
// The one place where a plan meets the driver, shared by the judge
// (lib/eval/prepare.cc, device_steps.cc) and KernelRunner
// (lib/store/kernel_runner.cc): a kernel launches in an application exactly
// as it was judged — the same argument check, the same limits, the same
// marshalling, the same launch order.
//
//   auto executor = PlanExecutor::Bind(api, module, plan, resolved);
//   KSEARCH_RETURN_IF_ERROR(executor->Fit(resolved, optin_shared_bytes));
//   CUresult r = executor->Launch(resolved, stream, tensor_ptrs, workspace_ptrs, &failed);
//
// Thread safety: Launch is const and safe from several threads at once; Fit
// changes a kernel attribute and must not run concurrently with itself.
#ifndef KSEARCH_CUDA_PLAN_EXECUTOR_H_
#define KSEARCH_CUDA_PLAN_EXECUTOR_H_

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "core/plan_resolve.h"
#include "cuda/driver.h"
#include "cuda/objects.h"
#include "ksearch/candidate.h"
#include "ksearch/status.h"

namespace ksearch::internal {

// What the driver says about one launch's kernel.
struct BoundKernel {
  CUfunction function = nullptr;
  int registers = 0;
  int64_t static_shared_bytes = 0;
  int64_t local_bytes = 0;
  int max_threads_per_block = 0;
  // The dynamic shared memory the kernel may use; raised by Fit past the
  // 48 KiB every kernel starts with.
  int64_t dynamic_shared_allowed = 48 * 1024;
  // The __cluster_dims__ the kernel was compiled with (all zero: none), and
  // the compute capability its binary is for (90 for sm_90).
  std::array<uint32_t, 3> cluster_dims{};
  int binary_version = 0;
  // Whether Fit allowed clusters above the portable size.
  bool non_portable_cluster_allowed = false;
};

// A map setting as the driver takes it and as C++ spells it, from one table,
// so that the exported header (lib/store/export.cc) encodes what the judge
// encodes.
template <typename E>
struct TensorMapEnum {
  E value;
  const char* name;  // "CU_TENSOR_MAP_SWIZZLE_128B"
};
TensorMapEnum<CUtensorMapDataType> TensorMapType(DType dtype);
TensorMapEnum<CUtensorMapSwizzle> TensorMapSwizzle(ResolvedTensorMap::Swizzle swizzle);
TensorMapEnum<CUtensorMapL2promotion> TensorMapL2(ResolvedTensorMap::L2Promotion promotion);
TensorMapEnum<CUtensorMapFloatOOBfill> TensorMapOobFill(ResolvedTensorMap::OobFill fill);

// Encodes `map` over the tensor at `address` into the 128 bytes at `out`
// (64-byte aligned) with cuTensorMapEncodeTiled: element strides 1, no
// interleave. The driver's result: CUDA_ERROR_INVALID_VALUE for an address
// that is not 16-byte aligned (ResolvePlan checked everything else).
CUresult EncodeTensorMap(const DriverApi& api, const ResolvedTensorMap& map, CUdeviceptr address,
                         void* out);

class PlanExecutor {
 public:
  PlanExecutor() = default;

  // Looks up every launch's kernel in `module` and checks the launch's
  // arguments against the kernel's parameters (ArgumentMismatch). `plan` is
  // the plan `resolved` came from (for argument text in errors). Errors:
  // kNotFound when a kernel is not in the module ("launches[1] (name): …");
  // kInvalidArgument for a signature mismatch.
  static StatusOr<PlanExecutor> Bind(const DriverApi& api, const Module& module,
                                     const LaunchPlan& plan, const ResolvedPlan& resolved);

  // Checks `resolved` (this plan at any dims) against every kernel's limits:
  // threads per block (which registers bound) and static + dynamic shared
  // memory within `optin_shared_bytes`; raises a kernel's dynamic shared
  // memory attribute when a launch needs more than it allows. A launch with
  // a cluster (the plan's or the kernel's __cluster_dims__) is checked
  // against the kernel (ClusterMismatch: kInvalidArgument), allowed past the
  // portable size when the plan opts in, and must fit on the device: at
  // least one such cluster resident at once (cuOccupancyMaxActiveClusters).
  // Errors: kInvalidArgument for a cluster the kernel contradicts;
  // kResourceExhausted naming the launch and both numbers, or a cluster
  // that does not fit; the driver's error for an attribute, as
  // kResourceExhausted.
  Status Fit(const ResolvedPlan& resolved, int64_t optin_shared_bytes);

  // Launches every launch of `resolved` on `stream`, in order (a launch with
  // a cluster the kernel does not declare through cuLaunchKernelEx with
  // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION), with tensor
  // and workspace arguments taken from `tensors` (indexed like
  // Problem::tensors) and `workspace` (like the plan's workspace). A tensor
  // map is encoded over the address in `tensors` and the extent ResolvePlan
  // computed, so it never reaches past its tensor and always follows the
  // buffers of this call; encodings are kept (by address and map) so that a
  // launch over buffers seen before, such as each timed run of the judge,
  // spends no host time on the driver between its events. Returns the first failing
  // launch's result and names its kernel in `failed_kernel` (with
  // ": cuTensorMapEncodeTiled for argument N" when the driver refused a
  // map). `resolved` must have passed Fit.
  CUresult Launch(const ResolvedPlan& resolved, CUstream stream, std::span<const CUdeviceptr> tensors,
                  std::span<const CUdeviceptr> workspace, std::string* failed_kernel) const;

  const std::vector<BoundKernel>& kernels() const { return kernels_; }

 private:
  // Tensor maps encoded before: the driver's bytes for one map over one
  // address. Shared by copies of the executor (an encoding depends on
  // nothing else).
  struct EncodedMap {
    CUdeviceptr address = 0;
    ResolvedTensorMap map;
    ArgumentSlot bytes;
  };
  struct MapCache {
    std::mutex mutex;
    std::vector<EncodedMap> entries;  // at most kMaxEntries, replaced in turn
    size_t next = 0;
    static constexpr size_t kMaxEntries = 64;
  };
  // Fit's cluster part for launches[index] and its kernel.
  Status FitCluster(size_t index, const ResolvedLaunch& launch, BoundKernel& k);
  // The launch's configuration for cuLaunchKernelEx and the occupancy
  // query; with `with_cluster`, its cluster in `attribute`, which must
  // outlive the configuration.
  static CUlaunchConfig LaunchConfig(const ResolvedLaunch& launch, CUstream stream, bool with_cluster,
                                     CUlaunchAttribute* attribute);
  // Writes the map over `address` into `out`, from the cache or the driver.
  CUresult EncodeCached(const ResolvedTensorMap& map, CUdeviceptr address, void* out) const;

  const DriverApi* api_ = nullptr;
  std::vector<BoundKernel> kernels_;  // one per launch
  std::shared_ptr<MapCache> maps_ = std::make_shared<MapCache>();
};

}  // namespace ksearch::internal

#endif  // KSEARCH_CUDA_PLAN_EXECUTOR_H_
