// The CUDA driver API, loaded at run time from libcuda.so.1.
//
// ksearch never links libcuda: binaries must start on machines without a GPU
// and say so in one line. Entry points are resolved through cuGetProcAddress
// for the CUDA version these headers describe, so versioned symbols (the _v2
// family) resolve to the ABI of that version. Where a version changed a
// function's signature under the same name (CUDA 13: cuCtxSynchronize
// resolves to cuCtxSynchronize_v2, which takes a context), the header's
// unversioned declaration is not that ABI: keep such functions out of the
// table (the judge synchronizes its own stream instead).
//
// Thread safety: Driver() is initialized once (thread-safe); the table is
// immutable afterwards and may be used from any thread.
#ifndef KSEARCH_CUDA_DRIVER_H_
#define KSEARCH_CUDA_DRIVER_H_

#include <cuda.h>

#include <string>

#include "ksearch/status.h"

namespace ksearch::internal {

#define KSEARCH_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuInit)                              \
  X(cuDriverGetVersion)                  \
  X(cuGetErrorName)                      \
  X(cuGetErrorString)                    \
  X(cuDeviceGet)                         \
  X(cuDeviceGetCount)                    \
  X(cuDeviceGetName)                     \
  X(cuDeviceGetAttribute)                \
  X(cuDeviceTotalMem)                    \
  X(cuDevicePrimaryCtxRetain)            \
  X(cuDevicePrimaryCtxRelease)           \
  X(cuDevicePrimaryCtxReset)             \
  X(cuCtxSetCurrent)                     \
  X(cuCtxSetLimit)                       \
  X(cuCtxGetLimit)                       \
  X(cuModuleLoadData)                    \
  X(cuModuleUnload)                      \
  X(cuModuleGetFunction)                 \
  X(cuFuncGetAttribute)                  \
  X(cuFuncSetAttribute)                  \
  X(cuFuncGetParamInfo)                  \
  X(cuLaunchKernel)                      \
  X(cuMemAlloc)                          \
  X(cuMemFree)                           \
  X(cuMemGetInfo)                        \
  X(cuMemGetAllocationGranularity)       \
  X(cuMemCreate)                         \
  X(cuMemRelease)                        \
  X(cuMemAddressReserve)                 \
  X(cuMemAddressFree)                    \
  X(cuMemMap)                            \
  X(cuMemUnmap)                          \
  X(cuMemSetAccess)                      \
  X(cuMemcpyHtoD)                        \
  X(cuMemcpyDtoH)                        \
  X(cuMemcpyDtoDAsync)                   \
  X(cuMemsetD8Async)                     \
  X(cuMemsetD16Async)                    \
  X(cuMemsetD32Async)                    \
  X(cuStreamCreate)                      \
  X(cuStreamDestroy)                     \
  X(cuStreamSynchronize)                 \
  X(cuStreamQuery)                       \
  X(cuEventCreate)                       \
  X(cuEventDestroy)                      \
  X(cuEventRecord)                       \
  X(cuEventSynchronize)                  \
  X(cuEventQuery)                        \
  X(cuEventElapsedTime)                  \
  X(cuTensorMapEncodeTiled)

struct DriverApi {
#define KSEARCH_DECLARE_DRIVER_FN(name) decltype(&::name) name = nullptr;
  KSEARCH_CUDA_DRIVER_FUNCTIONS(KSEARCH_DECLARE_DRIVER_FN)
#undef KSEARCH_DECLARE_DRIVER_FN
  // "cuCtxGetDevice" as CUDA 13 resolves it: the ABI the header declares as
  // cuCtxGetDevice_v2 (device, context; a null context is the current one).
  decltype(&::cuCtxGetDevice_v2) cuCtxGetDevice_v2 = nullptr;
};

// Loads libcuda.so.1 and calls cuInit(0) once. Errors: kFailedPrecondition
// "no CUDA driver found (…dlerror…)" or "CUDA driver present but cuInit failed:
// CUDA_ERROR_NO_DEVICE …".
StatusOr<const DriverApi*> Driver();

// "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered".
std::string CudaErrorText(CUresult result);

// Converts a driver result into a Status naming the call: kOk for
// CUDA_SUCCESS; kResourceExhausted for out-of-memory; kUnavailable for a
// sticky (context-killing) error; kInternal otherwise.
Status CudaStatus(CUresult result, const char* call);

// True for errors after which the context is unusable (illegal address,
// trap/assert, launch failure, …): the process must rebuild its context.
bool IsStickyError(CUresult result);

}  // namespace ksearch::internal

#define KSEARCH_CU(call_expr, name)                                            \
  do {                                                                         \
    CUresult ksearch_cu_result_ = (call_expr);                                 \
    if (ksearch_cu_result_ != CUDA_SUCCESS)                                    \
      return ::ksearch::internal::CudaStatus(ksearch_cu_result_, name);        \
  } while (0)

#endif  // KSEARCH_CUDA_DRIVER_H_
