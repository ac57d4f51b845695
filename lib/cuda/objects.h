// RAII wrappers for the driver objects ksearch uses: one class per object.
// Each wrapper is move-only; its destructor releases the object and never
// throws (errors at release are ignored: after a sticky error the context is
// being torn down anyway).
//
// Every call needs the owning context to be current on the calling thread:
// CudaContext::MakeCurrent() does that.
#ifndef KSEARCH_CUDA_OBJECTS_H_
#define KSEARCH_CUDA_OBJECTS_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include "cuda/driver.h"
#include "ksearch/evaluation.h"
#include "ksearch/status.h"

namespace ksearch::internal {

// The primary context of one device, retained for the object's lifetime.
class CudaContext {
 public:
  // Errors: kFailedPrecondition (no driver, no such device).
  static StatusOr<std::unique_ptr<CudaContext>> Create(int ordinal);
  ~CudaContext();
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  Status MakeCurrent() const;
  // Resets the primary context (after a sticky error) and retains a new one.
  // Every module, buffer, stream and event of the old context is invalid.
  Status Reset();

  const DriverApi& api() const { return *api_; }
  CUdevice device() const { return device_; }
  int Attribute(CUdevice_attribute attribute) const;
  // Name, compute capability, SMs, L2, memory, driver and NVRTC versions.
  const DeviceInfo& info() const { return info_; }
  DeviceInfo& mutable_info() { return info_; }

 private:
  CudaContext() = default;
  const DriverApi* api_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  DeviceInfo info_;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // Errors: kResourceExhausted when the device is out of memory.
  static StatusOr<DeviceBuffer> Allocate(const DriverApi& api, int64_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept { *this = std::move(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;

  CUdeviceptr ptr() const { return ptr_; }
  int64_t bytes() const { return bytes_; }
  // Forgets the allocation without freeing it (its context is gone).
  void Abandon() { ptr_ = 0; }

 private:
  const DriverApi* api_ = nullptr;
  CUdeviceptr ptr_ = 0;
  int64_t bytes_ = 0;
};

class Stream {
 public:
  Stream() = default;
  static StatusOr<Stream> Create(const DriverApi& api);
  ~Stream();
  Stream(Stream&& other) noexcept { *this = std::move(other); }
  Stream& operator=(Stream&& other) noexcept;
  CUstream get() const { return stream_; }
  void Abandon() { stream_ = nullptr; }

 private:
  const DriverApi* api_ = nullptr;
  CUstream stream_ = nullptr;
};

class Event {
 public:
  Event() = default;
  static StatusOr<Event> Create(const DriverApi& api);
  ~Event();
  Event(Event&& other) noexcept { *this = std::move(other); }
  Event& operator=(Event&& other) noexcept;
  CUevent get() const { return event_; }
  void Abandon() { event_ = nullptr; }

 private:
  const DriverApi* api_ = nullptr;
  CUevent event_ = nullptr;
};

class Module {
 public:
  Module() = default;
  // Errors: the driver's reason, naming cuModuleLoadData.
  static StatusOr<Module> Load(const DriverApi& api, const std::string& cubin);
  ~Module();
  Module(Module&& other) noexcept { *this = std::move(other); }
  Module& operator=(Module&& other) noexcept;
  // Errors: kNotFound naming the kernel (and hinting at extern "C").
  StatusOr<CUfunction> Function(const std::string& name) const;
  void Abandon() { module_ = nullptr; }

 private:
  const DriverApi* api_ = nullptr;
  CUmodule module_ = nullptr;
};

}  // namespace ksearch::internal

#endif  // KSEARCH_CUDA_OBJECTS_H_
