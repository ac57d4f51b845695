#include "cuda/driver.h"

#include <dlfcn.h>

#include <mutex>

namespace ksearch::internal {
namespace {

using GetProcAddressFn = CUresult (*)(const char*, void**, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult*);

// Filled once by LoadDriver (under Driver()'s once_flag) and read-only after;
// CudaErrorText reads it directly so that it works while cuInit is reported.
DriverApi g_api;

StatusOr<const DriverApi*> LoadDriver() {
  void* library = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* reason = ::dlerror();
    return FailedPreconditionError(std::string("no CUDA driver found (") +
                                   (reason ? reason : "libcuda.so.1 could not be loaded") + ")");
  }
  auto get_proc = reinterpret_cast<GetProcAddressFn>(::dlsym(library, "cuGetProcAddress_v2"));
  if (!get_proc) {
    return FailedPreconditionError(
        "the CUDA driver is too old: libcuda.so.1 has no cuGetProcAddress_v2 (driver 12.0 or newer "
        "is required)");
  }
  DriverApi& api = g_api;
  std::string missing;
  auto resolve = [&](const char* name) -> void* {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (get_proc(name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS || !fn) {
      missing += (missing.empty() ? "" : ", ") + std::string(name);
      return nullptr;
    }
    return fn;
  };
#define KSEARCH_RESOLVE_DRIVER_FN(name) api.name = reinterpret_cast<decltype(api.name)>(resolve(#name));
  KSEARCH_CUDA_DRIVER_FUNCTIONS(KSEARCH_RESOLVE_DRIVER_FN)
#undef KSEARCH_RESOLVE_DRIVER_FN
  api.cuCtxGetDevice_v2 = reinterpret_cast<decltype(api.cuCtxGetDevice_v2)>(resolve("cuCtxGetDevice"));
  if (!missing.empty()) {
    return FailedPreconditionError("the CUDA driver lacks entry points this build needs (" +
                                   missing + "); a driver for CUDA " +
                                   std::to_string(CUDA_VERSION / 1000) + " or newer is required");
  }
  CUresult init = api.cuInit(0);
  if (init != CUDA_SUCCESS) {
    return FailedPreconditionError("CUDA driver present but cuInit failed: " + CudaErrorText(init));
  }
  return &api;
}

}  // namespace

StatusOr<const DriverApi*> Driver() {
  static std::once_flag once;
  static StatusOr<const DriverApi*> result = Status(StatusCode::kInternal, "unset");
  std::call_once(once, [] { result = LoadDriver(); });
  return result;
}

std::string CudaErrorText(CUresult result) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (g_api.cuGetErrorName) g_api.cuGetErrorName(result, &name);
  if (g_api.cuGetErrorString) g_api.cuGetErrorString(result, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(static_cast<int>(result));
  if (text) out += std::string(": ") + text;
  return out;
}

bool IsStickyError(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:
      return true;
    default:
      return false;
  }
}

Status CudaStatus(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) return Status::Ok();
  std::string message = std::string(call) + ": " + CudaErrorText(result);
  if (result == CUDA_ERROR_OUT_OF_MEMORY) return ResourceExhaustedError(message);
  if (IsStickyError(result)) return UnavailableError(message);
  return InternalError(message);
}

}  // namespace ksearch::internal
