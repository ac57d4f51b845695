#include "cuda/objects.h"

#include "cuda/compiler.h"

namespace ksearch::internal {

StatusOr<std::unique_ptr<CudaContext>> CudaContext::Create(int ordinal) {
  KSEARCH_ASSIGN_OR_RETURN(const DriverApi* api, Driver());
  int count = 0;
  KSEARCH_CU(api->cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (count == 0) return FailedPreconditionError("the CUDA driver reports no GPU");
  if (ordinal < 0 || ordinal >= count) {
    return FailedPreconditionError("no GPU with ordinal " + std::to_string(ordinal) + " (" +
                                   std::to_string(count) + " visible)");
  }
  std::unique_ptr<CudaContext> ctx(new CudaContext());
  ctx->api_ = api;
  KSEARCH_CU(api->cuDeviceGet(&ctx->device_, ordinal), "cuDeviceGet");
  KSEARCH_CU(api->cuDevicePrimaryCtxRetain(&ctx->context_, ctx->device_),
             "cuDevicePrimaryCtxRetain");
  KSEARCH_RETURN_IF_ERROR(ctx->MakeCurrent());
  DeviceInfo& info = ctx->info_;
  char name[256] = {};
  KSEARCH_CU(api->cuDeviceGetName(name, sizeof(name), ctx->device_), "cuDeviceGetName");
  info.name = name;
  info.ordinal = ordinal;
  info.cc_major = ctx->Attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.cc_minor = ctx->Attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.multiprocessors = ctx->Attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.l2_bytes = ctx->Attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  info.sm_clock_mhz = ctx->Attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000;
  info.memory_clock_mhz = ctx->Attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) / 1000;
  size_t total = 0;
  KSEARCH_CU(api->cuDeviceTotalMem(&total, ctx->device_), "cuDeviceTotalMem");
  info.global_memory_bytes = static_cast<int64_t>(total);
  KSEARCH_CU(api->cuDriverGetVersion(&info.driver_version), "cuDriverGetVersion");
  info.nvrtc_version = Compiler::NvrtcVersion();
  return ctx;
}

CudaContext::~CudaContext() {
  if (context_) api_->cuDevicePrimaryCtxRelease(device_);
}

Status CudaContext::MakeCurrent() const {
  KSEARCH_CU(api_->cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  return Status::Ok();
}

Status CudaContext::Reset() {
  api_->cuDevicePrimaryCtxRelease(device_);
  context_ = nullptr;
  KSEARCH_CU(api_->cuDevicePrimaryCtxReset(device_), "cuDevicePrimaryCtxReset");
  KSEARCH_CU(api_->cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
  return MakeCurrent();
}

int CudaContext::Attribute(CUdevice_attribute attribute) const {
  int value = 0;
  if (api_->cuDeviceGetAttribute(&value, attribute, device_) != CUDA_SUCCESS) return 0;
  return value;
}

StatusOr<DeviceBuffer> DeviceBuffer::Allocate(const DriverApi& api, int64_t bytes) {
  DeviceBuffer buffer;
  buffer.api_ = &api;
  buffer.bytes_ = bytes;
  // A zero-byte request still gets a real (tiny) allocation so that pointers
  // handed to kernels are valid and distinct.
  KSEARCH_CU(api.cuMemAlloc(&buffer.ptr_, static_cast<size_t>(bytes > 0 ? bytes : 256)),
             "cuMemAlloc");
  return buffer;
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) api_->cuMemFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (ptr_) api_->cuMemFree(ptr_);
    api_ = other.api_;
    ptr_ = std::exchange(other.ptr_, 0);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

StatusOr<Stream> Stream::Create(const DriverApi& api) {
  Stream s;
  s.api_ = &api;
  KSEARCH_CU(api.cuStreamCreate(&s.stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  return s;
}

Stream::~Stream() {
  if (stream_) api_->cuStreamDestroy(stream_);
}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_) api_->cuStreamDestroy(stream_);
    api_ = other.api_;
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

StatusOr<Event> Event::Create(const DriverApi& api) {
  Event e;
  e.api_ = &api;
  KSEARCH_CU(api.cuEventCreate(&e.event_, CU_EVENT_DEFAULT), "cuEventCreate");
  return e;
}

Event::~Event() {
  if (event_) api_->cuEventDestroy(event_);
}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_) api_->cuEventDestroy(event_);
    api_ = other.api_;
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

StatusOr<Module> Module::Load(const DriverApi& api, const std::string& cubin) {
  Module m;
  m.api_ = &api;
  KSEARCH_CU(api.cuModuleLoadData(&m.module_, cubin.data()), "cuModuleLoadData");
  return m;
}

Module::~Module() {
  if (module_) api_->cuModuleUnload(module_);
}

Module& Module::operator=(Module&& other) noexcept {
  if (this != &other) {
    if (module_) api_->cuModuleUnload(module_);
    api_ = other.api_;
    module_ = std::exchange(other.module_, nullptr);
  }
  return *this;
}

StatusOr<CUfunction> Module::Function(const std::string& name) const {
  CUfunction function = nullptr;
  CUresult result = api_->cuModuleGetFunction(&function, module_, name.c_str());
  if (result == CUDA_ERROR_NOT_FOUND) {
    return NotFoundError("kernel '" + name +
                         "' is not in the compiled module (is it declared extern \"C\" __global__?)");
  }
  KSEARCH_CU(result, "cuModuleGetFunction");
  return function;
}

}  // namespace ksearch::internal
