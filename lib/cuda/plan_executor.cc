#include "cuda/plan_executor.h"

#include <cstring>

#include "core/plan_signature.h"

namespace ksearch::internal {
namespace {

std::string Where(size_t index, const ResolvedLaunch& launch) {
  return "launches[" + std::to_string(index) + "] (" + launch.kernel + ")";
}

}  // namespace

#define KS_NAMED(e) {e, #e}

TensorMapEnum<CUtensorMapDataType> TensorMapType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return KS_NAMED(CU_TENSOR_MAP_DATA_TYPE_FLOAT32);
    case DType::kF64: return KS_NAMED(CU_TENSOR_MAP_DATA_TYPE_FLOAT64);
    case DType::kF16: return KS_NAMED(CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
    case DType::kBF16: return KS_NAMED(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
    case DType::kI32: return KS_NAMED(CU_TENSOR_MAP_DATA_TYPE_INT32);
    case DType::kI64: return KS_NAMED(CU_TENSOR_MAP_DATA_TYPE_INT64);
    case DType::kU8: return KS_NAMED(CU_TENSOR_MAP_DATA_TYPE_UINT8);
  }
  return KS_NAMED(CU_TENSOR_MAP_DATA_TYPE_UINT8);
}

TensorMapEnum<CUtensorMapSwizzle> TensorMapSwizzle(ResolvedTensorMap::Swizzle swizzle) {
  switch (swizzle) {
    case ResolvedTensorMap::Swizzle::kNone: return KS_NAMED(CU_TENSOR_MAP_SWIZZLE_NONE);
    case ResolvedTensorMap::Swizzle::k32B: return KS_NAMED(CU_TENSOR_MAP_SWIZZLE_32B);
    case ResolvedTensorMap::Swizzle::k64B: return KS_NAMED(CU_TENSOR_MAP_SWIZZLE_64B);
    case ResolvedTensorMap::Swizzle::k128B: return KS_NAMED(CU_TENSOR_MAP_SWIZZLE_128B);
  }
  return KS_NAMED(CU_TENSOR_MAP_SWIZZLE_NONE);
}

TensorMapEnum<CUtensorMapL2promotion> TensorMapL2(ResolvedTensorMap::L2Promotion promotion) {
  switch (promotion) {
    case ResolvedTensorMap::L2Promotion::kNone: return KS_NAMED(CU_TENSOR_MAP_L2_PROMOTION_NONE);
    case ResolvedTensorMap::L2Promotion::k64B: return KS_NAMED(CU_TENSOR_MAP_L2_PROMOTION_L2_64B);
    case ResolvedTensorMap::L2Promotion::k128B: return KS_NAMED(CU_TENSOR_MAP_L2_PROMOTION_L2_128B);
    case ResolvedTensorMap::L2Promotion::k256B: return KS_NAMED(CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
  }
  return KS_NAMED(CU_TENSOR_MAP_L2_PROMOTION_NONE);
}

TensorMapEnum<CUtensorMapFloatOOBfill> TensorMapOobFill(ResolvedTensorMap::OobFill fill) {
  switch (fill) {
    case ResolvedTensorMap::OobFill::kZero: return KS_NAMED(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    case ResolvedTensorMap::OobFill::kNan: return KS_NAMED(CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA);
  }
  return KS_NAMED(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

#undef KS_NAMED

CUresult EncodeTensorMap(const DriverApi& api, const ResolvedTensorMap& map, CUdeviceptr address,
                         void* out) {
  static_assert(sizeof(CUtensorMap) == kTensorMapBytes && alignof(CUtensorMap) == kTensorMapAlignment);
  if (map.rank < 1 || map.rank > 5) return CUDA_ERROR_INVALID_VALUE;
  cuuint64_t dims[5] = {};
  cuuint64_t strides[4] = {};
  cuuint32_t box[5] = {};
  cuuint32_t element_strides[5] = {};
  for (int d = 0; d < map.rank; ++d) {
    dims[d] = map.dims[d];
    box[d] = map.box[d];
    element_strides[d] = 1;
    if (d > 0) strides[d - 1] = map.strides[d - 1];
  }
  return api.cuTensorMapEncodeTiled(
      static_cast<CUtensorMap*>(out), TensorMapType(map.dtype).value, static_cast<cuuint32_t>(map.rank),
      reinterpret_cast<void*>(static_cast<uintptr_t>(address)), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, TensorMapSwizzle(map.swizzle).value, TensorMapL2(map.l2_promotion).value,
      TensorMapOobFill(map.oob_fill).value);
}

StatusOr<PlanExecutor> PlanExecutor::Bind(const DriverApi& api, const Module& module,
                                          const LaunchPlan& plan, const ResolvedPlan& resolved) {
  PlanExecutor executor;
  executor.api_ = &api;
  for (size_t l = 0; l < resolved.launches.size(); ++l) {
    const ResolvedLaunch& launch = resolved.launches[l];
    auto function = module.Function(launch.kernel);
    if (!function.ok()) {
      return Status(function.status().code(), Where(l, launch) + ": " + function.status().message());
    }
    BoundKernel k;
    k.function = *function;
    std::vector<int64_t> sizes;
    for (size_t index = 0;; ++index) {
      size_t offset = 0, size = 0;
      if (api.cuFuncGetParamInfo(k.function, index, &offset, &size) != CUDA_SUCCESS) break;
      sizes.push_back(static_cast<int64_t>(size));
    }
    if (l < plan.launches.size()) {
      if (std::string why = ArgumentMismatch(l, plan.launches[l], launch, sizes); !why.empty()) {
        return InvalidArgumentError(why);
      }
    }
    auto attribute = [&](CUfunction_attribute which) {
      int value = 0;
      api.cuFuncGetAttribute(&value, which, k.function);
      return value;
    };
    k.registers = attribute(CU_FUNC_ATTRIBUTE_NUM_REGS);
    k.static_shared_bytes = attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    k.local_bytes = attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
    k.max_threads_per_block = attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    k.binary_version = attribute(CU_FUNC_ATTRIBUTE_BINARY_VERSION);
    k.cluster_dims = {static_cast<uint32_t>(attribute(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH)),
                      static_cast<uint32_t>(attribute(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT)),
                      static_cast<uint32_t>(attribute(CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH))};
    if (k.cluster_dims[0] == 0 || k.cluster_dims[1] == 0 || k.cluster_dims[2] == 0) k.cluster_dims = {};
    executor.kernels_.push_back(k);
  }
  return executor;
}

Status PlanExecutor::Fit(const ResolvedPlan& resolved, int64_t optin_shared_bytes) {
  if (resolved.launches.size() != kernels_.size()) {
    return InternalError("PlanExecutor::Fit: the plan has " + std::to_string(resolved.launches.size()) +
                         " launches, the executor was bound to " + std::to_string(kernels_.size()));
  }
  for (size_t l = 0; l < resolved.launches.size(); ++l) {
    const ResolvedLaunch& launch = resolved.launches[l];
    BoundKernel& k = kernels_[l];
    if (launch.Threads() > k.max_threads_per_block) {
      return ResourceExhaustedError(Where(l, launch) + ": " + std::to_string(launch.Threads()) +
                                    " threads per block, but with " + std::to_string(k.registers) +
                                    " registers per thread the kernel allows at most " +
                                    std::to_string(k.max_threads_per_block));
    }
    if (k.static_shared_bytes + launch.shared_bytes > optin_shared_bytes) {
      return ResourceExhaustedError(Where(l, launch) + ": " + std::to_string(k.static_shared_bytes) +
                                    " B static + " + std::to_string(launch.shared_bytes) +
                                    " B dynamic shared memory exceeds the device limit of " +
                                    std::to_string(optin_shared_bytes) + " B per block");
    }
    if (launch.shared_bytes > k.dynamic_shared_allowed) {
      CUresult r = api_->cuFuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                            static_cast<int>(launch.shared_bytes));
      if (r != CUDA_SUCCESS) {
        return ResourceExhaustedError(Where(l, launch) + ": cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, " +
                                      std::to_string(launch.shared_bytes) + "): " + CudaErrorText(r));
      }
      k.dynamic_shared_allowed = launch.shared_bytes;
    }
    KSEARCH_RETURN_IF_ERROR(FitCluster(l, launch, k));
  }
  return Status::Ok();
}

Status PlanExecutor::FitCluster(size_t index, const ResolvedLaunch& launch, BoundKernel& k) {
  const bool declared = k.cluster_dims[0] > 0;
  if (!launch.HasCluster() && !declared) return Status::Ok();
  if (std::string why = ClusterMismatch(index, launch, k.cluster_dims, k.binary_version); !why.empty()) {
    return InvalidArgumentError(why);
  }
  if (launch.HasCluster() && launch.ClusterSize() > kPortableClusterSize && !k.non_portable_cluster_allowed) {
    CUresult r = api_->cuFuncSetAttribute(k.function, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
    if (r != CUDA_SUCCESS) {
      return ResourceExhaustedError(Where(index, launch) + ": clusters of " + std::to_string(launch.ClusterSize()) +
                                    " blocks need the non-portable size, which the GPU refuses: " + CudaErrorText(r));
    }
    k.non_portable_cluster_allowed = true;
  }
  // The kernel's own __cluster_dims__ apply when the plan gives none (or
  // the same): the query then takes no cluster attribute.
  CUlaunchAttribute attribute{};
  CUlaunchConfig config = LaunchConfig(launch, nullptr, !declared, &attribute);
  int clusters = 0;
  CUresult r = api_->cuOccupancyMaxActiveClusters(&clusters, k.function, &config);
  const std::array<uint32_t, 3>& dims = declared ? k.cluster_dims : launch.cluster;
  const std::string what = "a cluster of " + std::to_string(int64_t{dims[0]} * dims[1] * dims[2]) + " blocks of " +
                           std::to_string(launch.Threads()) + " threads with " +
                           std::to_string(k.static_shared_bytes + launch.shared_bytes) + " B of shared memory each";
  if (r != CUDA_SUCCESS) {
    return ResourceExhaustedError(Where(index, launch) + ": " + what +
                                  " cannot run on this GPU (cuOccupancyMaxActiveClusters: " + CudaErrorText(r) + ")");
  }
  if (clusters == 0) {
    return ResourceExhaustedError(Where(index, launch) + ": " + what +
                                  " does not fit on this GPU (cuOccupancyMaxActiveClusters = 0)");
  }
  return Status::Ok();
}

CUlaunchConfig PlanExecutor::LaunchConfig(const ResolvedLaunch& launch, CUstream stream, bool with_cluster,
                                          CUlaunchAttribute* attribute) {
  CUlaunchConfig config{};
  config.gridDimX = launch.grid[0];
  config.gridDimY = launch.grid[1];
  config.gridDimZ = launch.grid[2];
  config.blockDimX = launch.block[0];
  config.blockDimY = launch.block[1];
  config.blockDimZ = launch.block[2];
  config.sharedMemBytes = static_cast<unsigned>(launch.shared_bytes);
  config.hStream = stream;
  if (with_cluster && launch.HasCluster()) {
    attribute->id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attribute->value.clusterDim.x = launch.cluster[0];
    attribute->value.clusterDim.y = launch.cluster[1];
    attribute->value.clusterDim.z = launch.cluster[2];
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  return config;
}

CUresult PlanExecutor::EncodeCached(const ResolvedTensorMap& map, CUdeviceptr address, void* out) const {
  std::lock_guard<std::mutex> lock(maps_->mutex);
  for (const EncodedMap& e : maps_->entries) {
    if (e.address == address && e.map == map) {
      std::memcpy(out, e.bytes.bytes, sizeof(e.bytes.bytes));
      return CUDA_SUCCESS;
    }
  }
  EncodedMap e;
  e.address = address;
  e.map = map;
  CUresult r = EncodeTensorMap(*api_, map, address, e.bytes.bytes);
  if (r != CUDA_SUCCESS) return r;
  std::memcpy(out, e.bytes.bytes, sizeof(e.bytes.bytes));
  if (maps_->entries.size() < MapCache::kMaxEntries) {
    maps_->entries.push_back(e);
  } else {
    maps_->entries[maps_->next] = e;
    maps_->next = (maps_->next + 1) % MapCache::kMaxEntries;
  }
  return CUDA_SUCCESS;
}

CUresult PlanExecutor::Launch(const ResolvedPlan& resolved, CUstream stream,
                              std::span<const CUdeviceptr> tensors, std::span<const CUdeviceptr> workspace,
                              std::string* failed_kernel) const {
  std::vector<ArgumentSlot> storage;
  std::vector<void*> args;
  for (size_t l = 0; l < resolved.launches.size() && l < kernels_.size(); ++l) {
    const ResolvedLaunch& launch = resolved.launches[l];
    CUresult encoded = CUDA_SUCCESS;
    int refused = MarshalArguments(
        launch, [&](size_t t) -> uint64_t { return t < tensors.size() ? tensors[t] : 0; },
        [&](size_t w) -> uint64_t { return w < workspace.size() ? workspace[w] : 0; },
        [&](const ResolvedArg& arg, uint64_t address, void* slot) {
          encoded = EncodeCached(arg.tensor_map, address, slot);
          return encoded == CUDA_SUCCESS;
        },
        &storage, &args);
    if (refused >= 0) {
      if (failed_kernel) {
        *failed_kernel = launch.kernel + ": cuTensorMapEncodeTiled for argument " + std::to_string(refused);
      }
      return encoded;
    }
    CUresult r = CUDA_SUCCESS;
    if (launch.HasCluster() && kernels_[l].cluster_dims[0] == 0) {
      CUlaunchAttribute attribute{};
      CUlaunchConfig config = LaunchConfig(launch, stream, true, &attribute);
      r = api_->cuLaunchKernelEx(&config, kernels_[l].function, args.data(), nullptr);
    } else {
      r = api_->cuLaunchKernel(kernels_[l].function, launch.grid[0], launch.grid[1], launch.grid[2], launch.block[0],
                               launch.block[1], launch.block[2], static_cast<unsigned>(launch.shared_bytes), stream,
                               args.data(), nullptr);
    }
    if (r != CUDA_SUCCESS) {
      if (failed_kernel) *failed_kernel = launch.kernel;
      return r;
    }
  }
  return CUDA_SUCCESS;
}

}  // namespace ksearch::internal
