// The judge's truth, out of every candidate's reach.
//
// The vault holds what the verdict rests on: the reference's inputs and
// outputs, the fp32 twin's outputs and the copy a determinism check compares
// with. It is one physical allocation mapped into the context's address
// space only while the judge uses it. Sealed, its addresses are unmapped: no
// kernel can read or write them, whatever pointer arithmetic it does (an
// access faults and the candidate is `crashed`). The evaluator seals the
// vault before every launch of a candidate and unseals it after the stream
// is idle, so a candidate can neither copy the reference's answer nor
// change the reference's inputs.
//
// Thread safety: distinct objects are independent; one object is used from
// one thread at a time, with its context current.
#ifndef KSEARCH_EVAL_VAULT_H_
#define KSEARCH_EVAL_VAULT_H_

#include <cuda.h>

#include <cstdint>
#include <vector>

#include "cuda/driver.h"
#include "ksearch/status.h"

namespace ksearch::internal {

class TruthVault {
 public:
  TruthVault() = default;
  // Reserves one range holding a buffer of each size (each aligned to 256
  // bytes), zeroed, mapped read-write for `device`. Errors: the driver's,
  // naming the call (kResourceExhausted when the device is out of memory).
  static StatusOr<TruthVault> Create(const DriverApi& api, CUdevice device,
                                     const std::vector<int64_t>& sizes, CUstream stream);
  ~TruthVault();
  TruthVault(TruthVault&& other) noexcept { *this = std::move(other); }
  TruthVault& operator=(TruthVault&& other) noexcept;

  // Buffer i's address (valid while unsealed).
  CUdeviceptr ptr(size_t i) const { return base_ + offsets_[i]; }
  // Unmaps the range. The stream that last used the vault must be idle.
  [[nodiscard]] Status Seal();
  // Maps the same physical memory at the same addresses again, read-write.
  [[nodiscard]] Status Unseal();
  bool sealed() const { return sealed_; }
  // Forgets every driver object without releasing it (its context is dead).
  void Abandon();

 private:
  void Release();
  const DriverApi* api_ = nullptr;
  CUdevice device_ = 0;
  CUmemGenericAllocationHandle handle_ = 0;
  CUdeviceptr base_ = 0;
  size_t size_ = 0;
  std::vector<int64_t> offsets_;
  bool sealed_ = false;
};

}  // namespace ksearch::internal

#endif  // KSEARCH_EVAL_VAULT_H_
