#include "baselines/cublaslt_matmul.h"

#include <cublasLt.h>

#include <algorithm>
#include <vector>

#include "baselines/dynamic_library.h"
#include "baselines/fastest.h"
#include "cuda/driver.h"
#include "cuda/objects.h"

namespace ksearch::internal {

#define KSEARCH_CUBLASLT_FUNCTIONS(X)                                                              \
  X(cublasLtCreate)                                                                                \
  X(cublasLtDestroy) X(cublasLtGetVersion) X(cublasLtMatmulDescCreate)                             \
      X(cublasLtMatmulDescDestroy) X(cublasLtMatmulDescSetAttribute) X(cublasLtMatrixLayoutCreate) \
          X(cublasLtMatrixLayoutDestroy) X(cublasLtMatmulPreferenceCreate)                         \
              X(cublasLtMatmulPreferenceDestroy) X(cublasLtMatmulPreferenceSetAttribute)           \
                  X(cublasLtMatmulAlgoGetHeuristic) X(cublasLtMatmul)

struct CublasLtMatmul::Impl {
  // cuBLAS's advice for Hopper: 32 MiB of workspace lets every kernel run.
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  // Heuristic candidates timed (fastest.h).
  static constexpr int kCandidates = 8;

  ~Impl() {
    if (out) cublasLtMatrixLayoutDestroy_(out);
    if (second) cublasLtMatrixLayoutDestroy_(second);
    if (first) cublasLtMatrixLayoutDestroy_(first);
    if (desc) cublasLtMatmulDescDestroy_(desc);
    if (handle) cublasLtDestroy_(handle);
  }

  Status Check(cublasStatus_t s, const char* call) const {
    if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
    return InternalError(std::string(call) + ": cuBLAS status " +
                         std::to_string(static_cast<int>(s)));
  }

  Status Setup(const MatmulShape& shape, std::string* version) {
    const uint64_t m = static_cast<uint64_t>(shape.m), n = static_cast<uint64_t>(shape.n),
                   k = static_cast<uint64_t>(shape.k);
    cudaDataType_t in_type = shape.input == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
    cudaDataType_t out_type = shape.output == DType::kF32 ? CUDA_R_32F : in_type;
    first_type_is_bf16 = shape.input == DType::kBF16;
    output_bytes = shape.output == DType::kF32 ? 4 : 2;
    KSEARCH_ASSIGN_OR_RETURN(library, Open("libcublasLt.so.13"));
#define KSEARCH_RESOLVE_CUBLASLT(fn) \
  KSEARCH_RETURN_IF_ERROR(Resolve(library, "libcublasLt", #fn, &fn##_));
    KSEARCH_CUBLASLT_FUNCTIONS(KSEARCH_RESOLVE_CUBLASLT)
#undef KSEARCH_RESOLVE_CUBLASLT
    KSEARCH_RETURN_IF_ERROR(Check(cublasLtCreate_(&handle), "cublasLtCreate"));
    size_t v = cublasLtGetVersion_();
    *version = "cuBLASLt " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
               std::to_string(v % 100);
    KSEARCH_RETURN_IF_ERROR(Check(cublasLtMatmulDescCreate_(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
                                  "cublasLtMatmulDescCreate"));
    // Row-major c = a·b is column-major cᵀ (n×m) = bᵀ (n×k) · aᵀ (k×m): the
    // library's first operand is b. Stored k×n row-major, b is the
    // column-major n×k matrix bᵀ itself; stored n×k row-major (c = a·bᵀ), it
    // is a column-major k×n matrix that the library transposes (TRANSA).
    cublasOperation_t first_op = shape.b_nk ? CUBLAS_OP_T : CUBLAS_OP_N, second_op = CUBLAS_OP_N;
    KSEARCH_RETURN_IF_ERROR(Check(cublasLtMatmulDescSetAttribute_(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                                                  &first_op, sizeof(first_op)),
                                  "cublasLtMatmulDescSetAttribute(TRANSA)"));
    KSEARCH_RETURN_IF_ERROR(Check(cublasLtMatmulDescSetAttribute_(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                                                  &second_op, sizeof(second_op)),
                                  "cublasLtMatmulDescSetAttribute(TRANSB)"));
    KSEARCH_RETURN_IF_ERROR(Check(
        shape.b_nk ? cublasLtMatrixLayoutCreate_(&first, in_type, k, n, static_cast<int64_t>(k))
                   : cublasLtMatrixLayoutCreate_(&first, in_type, n, k, static_cast<int64_t>(n)),
        "cublasLtMatrixLayoutCreate(b)"));
    KSEARCH_RETURN_IF_ERROR(
        Check(cublasLtMatrixLayoutCreate_(&second, in_type, k, m, static_cast<int64_t>(k)),
              "cublasLtMatrixLayoutCreate(a)"));
    KSEARCH_RETURN_IF_ERROR(
        Check(cublasLtMatrixLayoutCreate_(&out, out_type, n, m, static_cast<int64_t>(n)),
              "cublasLtMatrixLayoutCreate(c)"));
    cublasLtMatmulPreference_t preference = nullptr;
    KSEARCH_RETURN_IF_ERROR(
        Check(cublasLtMatmulPreferenceCreate_(&preference), "cublasLtMatmulPreferenceCreate"));
    uint64_t workspace_bytes = kWorkspaceBytes;
    Status set = Check(
        cublasLtMatmulPreferenceSetAttribute_(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &workspace_bytes, sizeof(workspace_bytes)),
        "cublasLtMatmulPreferenceSetAttribute");
    cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
    int found = 0;
    if (set.ok()) {
      set = Check(cublasLtMatmulAlgoGetHeuristic_(handle, desc, first, second, out, out, preference,
                                                  kCandidates, results, &found),
                  "cublasLtMatmulAlgoGetHeuristic");
    }
    cublasLtMatmulPreferenceDestroy_(preference);
    KSEARCH_RETURN_IF_ERROR(set);
    if (found == 0)
      return InternalError("cublasLtMatmulAlgoGetHeuristic found no algorithm for this GEMM");
    KSEARCH_ASSIGN_OR_RETURN(api, Driver());
    KSEARCH_ASSIGN_OR_RETURN(workspace,
                             DeviceBuffer::Allocate(*api, static_cast<int64_t>(kWorkspaceBytes)));
    return ChooseAlgorithm(results, found, m, n, k, version);
  }

  Status Matmul(const cublasLtMatmulAlgo_t& with, CUstream stream, CUdeviceptr a, CUdeviceptr b,
                CUdeviceptr c) {
    const float alpha = 1.0f, beta = 0.0f;
    auto ptr = [](CUdeviceptr p) { return reinterpret_cast<void*>(p); };
    return Check(cublasLtMatmul_(handle, desc, &alpha, ptr(b), first, ptr(a), second, &beta, ptr(c),
                                 out, ptr(c), out, &with, ptr(workspace.ptr()), kWorkspaceBytes,
                                 reinterpret_cast<cudaStream_t>(stream)),
                 "cublasLtMatmul");
  }

  // Times the candidates that run on scratch operands holding normal(0, 1)
  // values, each run as the judge times one, and keeps the fastest
  // (fastest.h: a warm-up, then rotated rounds, the GPU resting after each
  // turn; on the H200 algorithms 6% slower won when they were timed one
  // after the other on operands of 1.0, and 7% slower under sustained load).
  Status ChooseAlgorithm(const cublasLtMatmulHeuristicResult_t* results, int found, uint64_t m,
                         uint64_t n, uint64_t k, std::string* version) {
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer a,
                             DeviceBuffer::Allocate(*api, static_cast<int64_t>(m * k * 2)));
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer b,
                             DeviceBuffer::Allocate(*api, static_cast<int64_t>(k * n * 2)));
    KSEARCH_ASSIGN_OR_RETURN(
        DeviceBuffer c, DeviceBuffer::Allocate(*api, static_cast<int64_t>(m * n * output_bytes)));
    KSEARCH_ASSIGN_OR_RETURN(Stream stream, Stream::Create(*api));
    KSEARCH_ASSIGN_OR_RETURN(Event start, Event::Create(*api));
    KSEARCH_ASSIGN_OR_RETURN(Event end, Event::Create(*api));
    const DType type = first_type_is_bf16 ? DType::kBF16 : DType::kF16;
    KSEARCH_RETURN_IF_ERROR(FillNormal(*api, a.ptr(), m * k, type, stream.get()));
    KSEARCH_RETURN_IF_ERROR(FillNormal(*api, b.ptr(), k * n, type, stream.get()));
    std::vector<Candidate> usable;
    for (int i = 0; i < found; ++i) {
      if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= kWorkspaceBytes)
        usable.push_back({i, results[i].algo, 0});
    }
    auto run = [&](size_t j, CUstream s) {
      return Matmul(usable[j].algo, s, a.ptr(), b.ptr(), c.ptr());
    };
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer flush, AllocateL2Flush(*api));
    StatusOr<Choice> choice = ChooseFastest(
        usable.size(), EventTurns(*api, stream.get(), start.get(), end.get(), &flush, run));
    if (!choice.ok())
      return InternalError("cublasLtMatmul: the heuristic's algorithms: " +
                           choice.status().message());
    timed.clear();
    for (size_t j = 0; j < choice->ran.size(); ++j) {
      Candidate candidate = usable[choice->ran[j]];
      candidate.median_ms = choice->median_ms[j];
      timed.push_back(candidate);
    }
    algo = usable[choice->best].algo;
    chosen = usable[choice->best].index;
    *version += ", heuristic candidate " + std::to_string(chosen) + " of " + std::to_string(found) +
                " timed";
    return Status::Ok();
  }

#define KSEARCH_DECLARE_CUBLASLT(fn) decltype(&::fn) fn##_ = nullptr;
  KSEARCH_CUBLASLT_FUNCTIONS(KSEARCH_DECLARE_CUBLASLT)
#undef KSEARCH_DECLARE_CUBLASLT
  void* library = nullptr;
  const DriverApi* api = nullptr;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;
  cublasLtMatmulAlgo_t algo = {};
  int chosen = -1;
  struct Candidate {
    int index;  // in the heuristic's list
    cublasLtMatmulAlgo_t algo;
    float median_ms;  // a run, over the rounds
  };
  std::vector<Candidate> timed;
  bool first_type_is_bf16 = true;
  int64_t output_bytes = 2;
  DeviceBuffer workspace;
};

CublasLtMatmul::CublasLtMatmul(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CublasLtMatmul::~CublasLtMatmul() = default;

StatusOr<std::unique_ptr<CublasLtMatmul>> CublasLtMatmul::Create(const MatmulShape& shape) {
  auto matmul = std::unique_ptr<CublasLtMatmul>(new CublasLtMatmul(std::make_unique<Impl>()));
  KSEARCH_RETURN_IF_ERROR(matmul->impl_->Setup(shape, &matmul->version_));
  return matmul;
}

Status CublasLtMatmul::Run(CUstream stream, CUdeviceptr a, CUdeviceptr b, CUdeviceptr c) {
  return impl_->Matmul(impl_->algo, stream, a, b, c);
}

std::vector<CublasLtMatmul::Timed> CublasLtMatmul::timed() const {
  std::vector<Timed> out;
  for (const Impl::Candidate& c : impl_->timed) out.push_back({c.index, c.median_ms});
  return out;
}

int CublasLtMatmul::chosen() const { return impl_->chosen; }

Status CublasLtMatmul::RunCandidate(int index, CUstream stream, CUdeviceptr a, CUdeviceptr b,
                                    CUdeviceptr c) {
  for (const Impl::Candidate& candidate : impl_->timed)
    if (candidate.index == index) return impl_->Matmul(candidate.algo, stream, a, b, c);
  return InvalidArgumentError("heuristic candidate " + std::to_string(index) + " was not timed");
}

}  // namespace ksearch::internal
