// Vendor-library baselines (what PyTorch itself calls), loaded with dlopen so
// that ksearch neither links nor requires them: cuBLAS SGEMM with TF32 off for
// matmul; cuDNN fp32 forward convolution (FMA math, no TF32) for conv2d, plus
// ReLU and max pooling for conv2d_relu_maxpool.
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
  // "cublas_sgemm", …
  virtual std::string name() const = 0;
  // "cuBLAS 13.0.0" or "cuDNN 9.14.0", for reports.
  virtual std::string version() const = 0;
};

// Creates the baseline the problem names (problem.baseline.library), for the
// device whose primary context is current. Errors: kNotFound when the library
// cannot be loaded (the message names it), kInvalidArgument when the problem's
// tensors or dims do not have the shape the baseline expects, kUnimplemented
// for an unknown name. The caller then falls back to the reference kernel.
StatusOr<std::unique_ptr<LibraryBaseline>> CreateLibraryBaseline(const Problem& problem);

}  // namespace ksearch::internal

#endif  // KSEARCH_BASELINES_LIBRARY_BASELINE_H_
