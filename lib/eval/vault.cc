#include "eval/vault.h"

#include <algorithm>
#include <utility>

namespace ksearch::internal {
namespace {

CUmemAllocationProp DeviceProp(CUdevice device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = static_cast<int>(device);
  return prop;
}

}  // namespace

StatusOr<TruthVault> TruthVault::Create(const DriverApi& api, CUdevice device,
                                        const std::vector<int64_t>& sizes, CUstream stream) {
  TruthVault vault;
  vault.api_ = &api;
  vault.device_ = device;
  int64_t total = 0;
  for (int64_t size : sizes) {
    vault.offsets_.push_back(total);
    total += (std::max<int64_t>(size, 1) + 255) / 256 * 256;
  }
  CUmemAllocationProp prop = DeviceProp(device);
  size_t granularity = 0;
  KSEARCH_CU(api.cuMemGetAllocationGranularity(&granularity, &prop,
                                               CU_MEM_ALLOC_GRANULARITY_MINIMUM),
             "cuMemGetAllocationGranularity");
  granularity = std::max<size_t>(granularity, 1);
  vault.size_ = (static_cast<size_t>(total) + granularity - 1) / granularity * granularity;
  KSEARCH_CU(api.cuMemCreate(&vault.handle_, vault.size_, &prop, 0), "cuMemCreate");
  CUresult r = api.cuMemAddressReserve(&vault.base_, vault.size_, 0, 0, 0);
  if (r != CUDA_SUCCESS) {
    api.cuMemRelease(vault.handle_);
    vault.handle_ = 0;
    return CudaStatus(r, "cuMemAddressReserve");
  }
  vault.sealed_ = true;  // reserved, not yet mapped
  KSEARCH_RETURN_IF_ERROR(vault.Unseal());
  KSEARCH_CU(api.cuMemsetD8Async(vault.base_, 0, vault.size_, stream), "cuMemsetD8Async(vault)");
  KSEARCH_CU(api.cuStreamSynchronize(stream), "cuStreamSynchronize");
  return vault;
}

TruthVault& TruthVault::operator=(TruthVault&& other) noexcept {
  if (this != &other) {
    Release();
    api_ = other.api_;
    device_ = other.device_;
    handle_ = std::exchange(other.handle_, 0);
    base_ = std::exchange(other.base_, 0);
    size_ = std::exchange(other.size_, 0);
    offsets_ = std::move(other.offsets_);
    sealed_ = other.sealed_;
  }
  return *this;
}

TruthVault::~TruthVault() { Release(); }

void TruthVault::Release() {
  if (!api_ || base_ == 0) return;
  if (!sealed_) api_->cuMemUnmap(base_, size_);
  api_->cuMemAddressFree(base_, size_);
  if (handle_) api_->cuMemRelease(handle_);
  base_ = 0;
  handle_ = 0;
}

void TruthVault::Abandon() {
  base_ = 0;
  handle_ = 0;
}

Status TruthVault::Seal() {
  if (sealed_) return Status::Ok();
  KSEARCH_CU(api_->cuMemUnmap(base_, size_), "cuMemUnmap(vault)");
  sealed_ = true;
  return Status::Ok();
}

Status TruthVault::Unseal() {
  if (!sealed_) return Status::Ok();
  KSEARCH_CU(api_->cuMemMap(base_, size_, 0, handle_, 0), "cuMemMap(vault)");
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = static_cast<int>(device_);
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUresult r = api_->cuMemSetAccess(base_, size_, &access, 1);
  if (r != CUDA_SUCCESS) {
    api_->cuMemUnmap(base_, size_);
    return CudaStatus(r, "cuMemSetAccess(vault)");
  }
  sealed_ = false;
  return Status::Ok();
}

}  // namespace ksearch::internal
