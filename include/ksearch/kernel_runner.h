// KernelRunner: launches a cached kernel (kernel_cache.h) inside an
// application — what an inference engine calls at run time, on its own stream
// with its own device pointers.
//
//   auto kernel = cache->Lookup(key);                       // at start
//   auto runner = ksearch::KernelRunner::Load(*kernel, problem);
//   …
//   ksearch::TensorPointer tensors[] = {{"x", x_ptr}, {"y", y_ptr}};
//   ksearch::DimValue dims[] = {{"rows", batch_rows}};       // optional overrides
//   Status s = (*runner)->Launch(stream, tensors, dims);     // asynchronous
//
// The runner uses the device's primary context — the one the CUDA runtime
// uses — and makes it current on the calling thread before its driver calls,
// so a stream created with cudaStreamCreate (or cuStreamCreate in the primary
// context) works as is. Launch only enqueues: it never synchronizes, never
// allocates (unless the plan needs a workspace and the caller gives none) and
// reports launch errors of its own calls only; faults inside the kernel show
// up on the caller's stream, as with any launch. An `inout` tensor (RoPE's q
// and k) is the caller's own buffer, overwritten in place: each launch
// transforms what it holds then.
//
// The kernel was judged at the problem's shape cases (its dims when it
// declares none). Dims given to Launch replace the problem's in the plan's
// grid, block, shared-memory and scalar expressions, and must be dims the
// search checked the kernel at: those of one of its cases, where the
// dispatch dim of a problem with buckets may take any value inside the
// bucket. Other dims are refused with kFailedPrecondition naming the dim and
// its value, unless Options::allow_unchecked_dims is set.
//
// Dispatch by shape: for a problem with dispatch buckets (Problem::dispatch),
// LoadTable takes the table KernelCache::LookupTable returns (one kernel per
// bucket) and each Launch runs the kernel of the bucket its dims fall in —
// the autotuning cache an engine would otherwise keep by hand:
//
//   auto table = cache->LookupTable(key);                   // at start
//   auto runner = ksearch::KernelRunner::LoadTable(*table, problem, {});
//   ksearch::DimValue dims[] = {{"M", tokens}};
//   Status s = (*runner)->Launch(stream, tensors, dims);    // M <= 16: the decode kernel
//
// A launch whose bucket has no kernel in the table is refused the same way.
//
// No CUDA type appears here: streams and pointers are `void*` (a CUstream /
// cudaStream_t, a CUdeviceptr / device pointer).
//
// Thread safety: Launch may be called from several threads at once (on
// different streams) provided each passes its own workspace when the plan
// needs one; the internal workspace is for one stream at a time.
#ifndef KSEARCH_KERNEL_RUNNER_H_
#define KSEARCH_KERNEL_RUNNER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>
#include <string_view>

#include "ksearch/kernel_cache.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch {

namespace internal {
class KernelRunnerImpl;
class DispatchTable;
}  // namespace internal

// A device pointer for one of the problem's tensors, by name.
struct TensorPointer {
  std::string_view name;
  void* device_ptr = nullptr;
};

// A value for one of the problem's dims, by name.
struct DimValue {
  std::string_view name;
  int64_t value = 0;
};

class KernelRunner {
 public:
  struct Options {
    // CUDA device ordinal to load the module on.
    int device_ordinal = 0;
    // Refuse a kernel whose cache key is not this device's (name, compute
    // capability, driver, NVRTC) or whose problem fingerprint is not the
    // given problem's. Off only for experiments.
    bool require_matching_key = true;
    // Resolved plans kept per distinct dims (least recently used dropped).
    int max_cached_shapes = 64;
    // Launch at dims the search never checked the kernel at (other values
    // than its shape cases', a bucket with no kernel in the table: then the
    // nearest bucket's kernel runs). Off: such a launch is refused with
    // kFailedPrecondition. Only for callers that check the results
    // themselves.
    bool allow_unchecked_dims = false;
  };

  // Loads the cubin into the device's primary context and checks the plan
  // against the kernels (argument count and sizes, threads per block, shared
  // memory). Errors: kFailedPrecondition (no driver or GPU; key mismatch,
  // naming the part that differs), kInvalidArgument (the plan does not fit the
  // problem or the kernels), the driver's error naming the call
  // (cuModuleLoadData …).
  [[nodiscard]] static StatusOr<std::unique_ptr<KernelRunner>> Load(const CachedKernel& kernel,
                                                                    const Problem& problem,
                                                                    const Options& options);
  [[nodiscard]] static StatusOr<std::unique_ptr<KernelRunner>> Load(const CachedKernel& kernel,
                                                                    const Problem& problem);
  // A dispatch table: one cached kernel per bucket of problem.dispatch
  // (CachedKernel::key.bucket), each loaded as Load does. Errors: as Load,
  // for each entry; kInvalidArgument (an empty table, a problem without
  // buckets, a bucket out of range or given twice).
  [[nodiscard]] static StatusOr<std::unique_ptr<KernelRunner>> LoadTable(
      std::span<const CachedKernel> table, const Problem& problem, const Options& options);
  ~KernelRunner();
  KernelRunner(const KernelRunner&) = delete;
  KernelRunner& operator=(const KernelRunner&) = delete;

  // Bytes of workspace a launch at `dims` needs (0 for plans without one);
  // each buffer starts at a 256-byte boundary. Errors: as Launch's plan errors.
  [[nodiscard]] StatusOr<int64_t> WorkspaceBytes(std::span<const DimValue> dims = {}) const;

  // Enqueues the plan's launches on `stream` (nullptr: the legacy default
  // stream). Every tensor of the problem needs a pointer. `workspace` must hold
  // WorkspaceBytes(dims) bytes when the plan has a workspace; when null, the
  // runner allocates one (once, growing as needed: cuMemAlloc synchronizes the
  // device, so pass your own in steady state). Errors: kInvalidArgument (a
  // missing or unknown tensor, an unknown dim, a plan that does not resolve at
  // these dims or exceeds a kernel's limits, a workspace that is too small),
  // the driver's error naming cuLaunchKernel.
  [[nodiscard]] Status Launch(void* stream, std::span<const TensorPointer> tensors,
                              std::span<const DimValue> dims = {}, void* workspace = nullptr,
                              int64_t workspace_bytes = 0);

  // The kernel a launch at `dims` runs. Errors: as Launch's for dims
  // (kInvalidArgument, kFailedPrecondition).
  [[nodiscard]] StatusOr<const CachedKernel*> KernelFor(std::span<const DimValue> dims = {}) const;

  // The (first) kernel loaded.
  const CachedKernel& kernel() const;

 private:
  KernelRunner(std::vector<std::unique_ptr<internal::KernelRunnerImpl>> impls,
               std::unique_ptr<internal::DispatchTable> table, bool allow_unchecked_dims);
  StatusOr<internal::KernelRunnerImpl*> Select(std::span<const DimValue> dims) const;
  std::vector<std::unique_ptr<internal::KernelRunnerImpl>> impls_;  // one per entry
  std::unique_ptr<internal::DispatchTable> table_;
  bool allow_unchecked_dims_ = false;
};

}  // namespace ksearch

#endif  // KSEARCH_KERNEL_RUNNER_H_
