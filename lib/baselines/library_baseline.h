// Vendor-library baselines (what PyTorch itself calls), loaded with dlopen so
// that ksearch neither links nor requires them: cuBLAS SGEMM with TF32 off;
// cuBLASLt bf16/fp16 GEMM with fp32 accumulation; cuDNN fp32 forward
// convolution (FMA math, no TF32) + bias, fused with ReLU, then max pooling,
// as the problem's settings ask; cuDNN's fused attention (cudnn_sdpa.h). Each binds to the problem's tensors and dims
// through problem.baseline.settings (core/baseline_settings.h), never by name.
//
// Thread safety: one object per evaluator, used from its thread only.
#ifndef KSEARCH_BASELINES_LIBRARY_BASELINE_H_
#define KSEARCH_BASELINES_LIBRARY_BASELINE_H_

#include <cuda.h>

#include <memory>
#include <string>
#include <vector>

#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch::internal {

class LibraryBaseline {
 public:
  virtual ~LibraryBaseline() = default;
  // Enqueues the op on `stream`. `tensors` are device pointers indexed like
  // Problem::tensors. Errors name the library call.
  virtual Status Run(CUstream stream, const std::vector<CUdeviceptr>& tensors) = 0;
  // The library's name as the problem gives it ("cublas_sgemm", …).
  virtual std::string name() const = 0;
  // "cuBLAS 13.0.0" or "cuDNN 9.14.0", for reports.
  virtual std::string version() const = 0;

  // The library's own candidates (its algorithms or engine configurations)
  // that the baseline timed to choose the one Run() uses (fastest.h): each
  // one's id and its median ms a run when chosen. Empty for a baseline that
  // runs the library's default. For tests that check the choice.
  struct Candidate {
    int id;
    float median_ms;
  };
  virtual std::vector<Candidate> candidates() const { return {}; }
  // The id of the candidate Run() uses; -1 when candidates() is empty.
  virtual int chosen() const { return -1; }
  // Enqueues the op with candidate `id` instead of the chosen one. Errors:
  // kInvalidArgument for an id not in candidates().
  virtual Status RunCandidate(int id, CUstream stream, const std::vector<CUdeviceptr>& tensors);
};

// Creates the baseline the problem names (problem.baseline.library), for the
// device whose primary context is current. Errors: kNotFound when the library
// cannot be loaded (the message names it), kInvalidArgument when the settings
// do not bind (BindBaseline, CheckBaselineShapes), kInternal when a library
// call fails (named), kUnimplemented for an unknown name. The caller then
// falls back to the fp32 twin.
StatusOr<std::unique_ptr<LibraryBaseline>> CreateLibraryBaseline(const Problem& problem);

}  // namespace ksearch::internal

#endif  // KSEARCH_BASELINES_LIBRARY_BASELINE_H_
