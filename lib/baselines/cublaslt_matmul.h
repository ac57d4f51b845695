// One cuBLASLt matmul of fixed shape and types, the algorithm chosen once by
// timing the heuristic's candidates on random-like operands: the GEMM core of the `cublaslt_gemm`
// baseline and of the GEMM sequences (gemm_sequence.h). Row-major c[m,n] = a[m,k] · b[k,n] (b
// stored k×n) or a[m,k] · b[n,k]ᵀ (b stored n×k, nn.Linear's weight), a and b bf16 or f16, fp32
// accumulation (CUBLAS_COMPUTE_32F), c rounded once to its type.
//
// Thread safety: one object per evaluator, used from its thread only.
#ifndef KSEARCH_BASELINES_CUBLASLT_MATMUL_H_
#define KSEARCH_BASELINES_CUBLASLT_MATMUL_H_

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch::internal {

struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  DType input = DType::kBF16;   // a and b: kBF16 or kF16
  DType output = DType::kBF16;  // c: the input type or kF32
  bool b_nk = false;            // b stored n×k (c = a·bᵀ)
};

class CublasLtMatmul {
 public:
  // Loads libcublasLt, builds the descriptors and times the heuristic's top
  // candidates on scratch operands, keeping the fastest. The device's
  // primary context must be current. Errors: kNotFound when the library
  // cannot be loaded, kInternal naming the failing call ("call: cuBLAS
  // status N").
  static StatusOr<std::unique_ptr<CublasLtMatmul>> Create(const MatmulShape& shape);
  ~CublasLtMatmul();
  CublasLtMatmul(const CublasLtMatmul&) = delete;
  CublasLtMatmul& operator=(const CublasLtMatmul&) = delete;

  // Enqueues c = a · b (or a · bᵀ) on `stream`.
  Status Run(CUstream stream, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c);
  // "cuBLASLt 13.1.0, heuristic candidate 0 of 8 timed".
  const std::string& version() const { return version_; }

  // The candidates that ran when the algorithm was chosen: each one's index
  // in the heuristic's list and its median time a run over the rounds.
  struct Timed {
    int index;
    float median_ms;
  };
  std::vector<Timed> timed() const;
  // The index of the one Run() uses.
  int chosen() const;
  // Enqueues the product with candidate `index` (one of timed()); for tests
  // that check the choice. Errors: kInvalidArgument for any other index.
  Status RunCandidate(int index, CUstream stream, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c);

 private:
  struct Impl;
  explicit CublasLtMatmul(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::string version_;
};

}  // namespace ksearch::internal

#endif  // KSEARCH_BASELINES_CUBLASLT_MATMUL_H_
