#include "baselines/library_baseline.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <cstring>

#include "baselines/cublaslt_matmul.h"
#include "baselines/cudnn_sdpa.h"
#include "baselines/dynamic_library.h"
#include "baselines/fastest.h"
#include "baselines/gemm_sequence.h"
#include "core/baseline_settings.h"
#include "cuda/driver.h"
#include "cuda/objects.h"

namespace ksearch::internal {
namespace {

// ---------------------------------------------------------------------------
// cuBLAS SGEMM, row-major C[M,N] = A[M,K] · B[K,N].

class CublasSgemm final : public LibraryBaseline {
 public:
  static StatusOr<std::unique_ptr<LibraryBaseline>> Create(const Problem& p) {
    auto b = std::unique_ptr<CublasSgemm>(new CublasSgemm());
    KSEARCH_ASSIGN_OR_RETURN(BaselineBinding bind, BindBaseline(p));
    KSEARCH_RETURN_IF_ERROR(CheckBaselineShapes(p, bind));
    b->m_ = static_cast<int>(bind.Size("m"));
    b->n_ = static_cast<int>(bind.Size("n"));
    b->k_ = static_cast<int>(bind.Size("k"));
    b->a_ = bind.Tensor("a");
    b->b_ = bind.Tensor("b");
    b->c_ = bind.Tensor("c");
    KSEARCH_ASSIGN_OR_RETURN(b->library_, Open("libcublas.so.13"));
    KSEARCH_RETURN_IF_ERROR(Resolve(b->library_, "libcublas", "cublasCreate_v2", &b->create_));
    KSEARCH_RETURN_IF_ERROR(Resolve(b->library_, "libcublas", "cublasDestroy_v2", &b->destroy_));
    KSEARCH_RETURN_IF_ERROR(Resolve(b->library_, "libcublas", "cublasSetStream_v2", &b->set_stream_));
    KSEARCH_RETURN_IF_ERROR(Resolve(b->library_, "libcublas", "cublasSetMathMode", &b->set_math_));
    KSEARCH_RETURN_IF_ERROR(Resolve(b->library_, "libcublas", "cublasSgemm_v2", &b->sgemm_));
    KSEARCH_RETURN_IF_ERROR(Resolve(b->library_, "libcublas", "cublasGetVersion_v2", &b->get_version_));
    if (b->create_(&b->handle_) != CUBLAS_STATUS_SUCCESS) return InternalError("cublasCreate failed");
    // PyTorch with TF32 off: default math, which never uses TF32 for SGEMM
    // unless asked (NVIDIA_TF32_OVERRIDE is not honoured in our favour either).
    if (b->set_math_(b->handle_, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS) {
      return InternalError("cublasSetMathMode failed");
    }
    int v = 0;
    b->get_version_(b->handle_, &v);
    b->version_ = "cuBLAS " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
                  std::to_string(v % 100);
    return std::unique_ptr<LibraryBaseline>(std::move(b));
  }
  ~CublasSgemm() override {
    if (handle_) destroy_(handle_);
  }
  Status Run(CUstream stream, const std::vector<CUdeviceptr>& t) override {
    set_stream_(handle_, reinterpret_cast<cudaStream_t>(stream));
    const float alpha = 1.0f, beta = 0.0f;
    // Row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ.
    cublasStatus_t s = sgemm_(handle_, CUBLAS_OP_N, CUBLAS_OP_N, n_, m_, k_, &alpha,
                              reinterpret_cast<const float*>(t[static_cast<size_t>(b_)]), n_,
                              reinterpret_cast<const float*>(t[static_cast<size_t>(a_)]), k_, &beta,
                              reinterpret_cast<float*>(t[static_cast<size_t>(c_)]), n_);
    if (s != CUBLAS_STATUS_SUCCESS) return InternalError("cublasSgemm: status " + std::to_string(s));
    return Status::Ok();
  }
  std::string name() const override { return "cublas_sgemm"; }
  std::string version() const override { return version_; }

 private:
  CublasSgemm() = default;
  void* library_ = nullptr;
  cublasHandle_t handle_ = nullptr;
  decltype(&cublasCreate_v2) create_ = nullptr;
  decltype(&cublasDestroy_v2) destroy_ = nullptr;
  decltype(&cublasSetStream_v2) set_stream_ = nullptr;
  decltype(&cublasSetMathMode) set_math_ = nullptr;
  decltype(&cublasSgemm_v2) sgemm_ = nullptr;
  decltype(&cublasGetVersion_v2) get_version_ = nullptr;
  int m_ = 0, n_ = 0, k_ = 0, a_ = -1, b_ = -1, c_ = -1;
  std::string version_;
};

// ---------------------------------------------------------------------------
// cuBLASLt GEMM, row-major c[m,n] = a[m,k] · b[k,n] (or · b[n,k]ᵀ with
// b_layout "nk", the nn.Linear layout), a and b bf16 or f16, fp32
// accumulation, c rounded once to its dtype (cublaslt_matmul.h).

class CublasLtGemm final : public LibraryBaseline {
 public:
  static StatusOr<std::unique_ptr<LibraryBaseline>> Create(const Problem& p) {
    auto b = std::unique_ptr<CublasLtGemm>(new CublasLtGemm());
    KSEARCH_ASSIGN_OR_RETURN(BaselineBinding bind, BindBaseline(p));
    KSEARCH_RETURN_IF_ERROR(CheckBaselineShapes(p, bind));
    b->a_ = bind.Tensor("a");
    b->b_ = bind.Tensor("b");
    b->c_ = bind.Tensor("c");
    MatmulShape shape{bind.Size("m"), bind.Size("n"), bind.Size("k"), p.tensors[static_cast<size_t>(b->a_)].dtype,
                      p.tensors[static_cast<size_t>(b->c_)].dtype, bind.Choice("b_layout") == "nk"};
    KSEARCH_ASSIGN_OR_RETURN(b->matmul_, CublasLtMatmul::Create(shape));
    return std::unique_ptr<LibraryBaseline>(std::move(b));
  }

  Status Run(CUstream stream, const std::vector<CUdeviceptr>& t) override {
    return matmul_->Run(stream, t[static_cast<size_t>(a_)], t[static_cast<size_t>(b_)], t[static_cast<size_t>(c_)]);
  }
  std::string name() const override { return "cublaslt_gemm"; }
  std::string version() const override { return matmul_->version(); }
  std::vector<Candidate> candidates() const override {
    std::vector<Candidate> out;
    for (const CublasLtMatmul::Timed& t : matmul_->timed()) out.push_back({t.index, t.median_ms});
    return out;
  }
  int chosen() const override { return matmul_->chosen(); }
  Status RunCandidate(int id, CUstream stream, const std::vector<CUdeviceptr>& t) override {
    return matmul_->RunCandidate(id, stream, t[static_cast<size_t>(a_)], t[static_cast<size_t>(b_)],
                                 t[static_cast<size_t>(c_)]);
  }

 private:
  CublasLtGemm() = default;
  std::unique_ptr<CublasLtMatmul> matmul_;
  int a_ = -1, b_ = -1, c_ = -1;
};

// ---------------------------------------------------------------------------
// cuDNN fp32 convolution forward + bias, NCHW, FMA math (no TF32); with
// "activation": "relu" the fused cudnnConvolutionBiasActivationForward, and
// with "pool": "max" a max pooling after it.

#define KSEARCH_CUDNN_FUNCTIONS(X)                                                        \
  X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream) X(cudnnGetVersion) X(cudnnGetErrorString) \
  X(cudnnCreateTensorDescriptor) X(cudnnSetTensor4dDescriptor) X(cudnnDestroyTensorDescriptor) \
  X(cudnnCreateFilterDescriptor) X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor) \
  X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor)                   \
  X(cudnnSetConvolutionMathType) X(cudnnDestroyConvolutionDescriptor)                      \
  X(cudnnFindConvolutionForwardAlgorithmEx) X(cudnnGetConvolutionForwardWorkspaceSize)     \
  X(cudnnConvolutionForward) X(cudnnConvolutionBiasActivationForward) X(cudnnAddTensor) X(cudnnCreateActivationDescriptor)          \
  X(cudnnSetActivationDescriptor) X(cudnnDestroyActivationDescriptor)                         \
  X(cudnnCreatePoolingDescriptor) X(cudnnSetPooling2dDescriptor) X(cudnnDestroyPoolingDescriptor) \
  X(cudnnPoolingForward)

class CudnnConv final : public LibraryBaseline {
 public:
  static StatusOr<std::unique_ptr<LibraryBaseline>> Create(const Problem& p) {
    auto b = std::unique_ptr<CudnnConv>(new CudnnConv());
    KSEARCH_ASSIGN_OR_RETURN(BaselineBinding bind, BindBaseline(p));
    KSEARCH_RETURN_IF_ERROR(CheckBaselineShapes(p, bind));
    b->relu_ = bind.Choice("activation") == "relu";
    b->pooled_ = bind.Choice("pool") == "max";
    b->x_ = bind.Tensor("x");
    b->w_ = bind.Tensor("weight");
    b->bias_ = bind.Tensor("bias");
    b->y_ = bind.Tensor("y");
    auto size = [&](const char* key) { return static_cast<int>(bind.Size(key)); };
    int n = size("batch"), c = size("in_channels"), h = size("height"), w = size("width"), oc = size("out_channels"),
        kh = size("kernel_h"), kw = size("kernel_w"), stride = size("stride"), pad = size("padding");
    KSEARCH_ASSIGN_OR_RETURN(b->library_, Open("libcudnn.so.9"));
#define KSEARCH_RESOLVE_CUDNN(fn) KSEARCH_RETURN_IF_ERROR(Resolve(b->library_, "libcudnn", #fn, &b->fn##_));
    KSEARCH_CUDNN_FUNCTIONS(KSEARCH_RESOLVE_CUDNN)
#undef KSEARCH_RESOLVE_CUDNN
    KSEARCH_RETURN_IF_ERROR(b->Check(b->cudnnCreate_(&b->handle_), "cudnnCreate"));
    size_t v = b->cudnnGetVersion_();
    b->version_ = "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
                  std::to_string(v % 100);
    KSEARCH_RETURN_IF_ERROR(b->Check(b->cudnnCreateTensorDescriptor_(&b->x_desc_), "cudnnCreateTensorDescriptor"));
    KSEARCH_RETURN_IF_ERROR(b->Check(b->cudnnCreateTensorDescriptor_(&b->conv_desc_out_), "cudnnCreateTensorDescriptor"));
    KSEARCH_RETURN_IF_ERROR(b->Check(b->cudnnCreateTensorDescriptor_(&b->bias_desc_), "cudnnCreateTensorDescriptor"));
    KSEARCH_RETURN_IF_ERROR(b->Check(b->cudnnCreateTensorDescriptor_(&b->y_desc_), "cudnnCreateTensorDescriptor"));
    KSEARCH_RETURN_IF_ERROR(b->Check(b->cudnnCreateFilterDescriptor_(&b->w_desc_), "cudnnCreateFilterDescriptor"));
    KSEARCH_RETURN_IF_ERROR(b->Check(b->cudnnCreateConvolutionDescriptor_(&b->conv_), "cudnnCreateConvolutionDescriptor"));
    KSEARCH_RETURN_IF_ERROR(b->Check(
        b->cudnnSetTensor4dDescriptor_(b->x_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, c, h, w),
        "cudnnSetTensor4dDescriptor(x)"));
    KSEARCH_RETURN_IF_ERROR(b->Check(
        b->cudnnSetFilter4dDescriptor_(b->w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, oc, c, kh, kw),
        "cudnnSetFilter4dDescriptor"));
    KSEARCH_RETURN_IF_ERROR(b->Check(
        b->cudnnSetConvolution2dDescriptor_(b->conv_, pad, pad, stride, stride, 1, 1, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT),
        "cudnnSetConvolution2dDescriptor"));
    // FMA math: no TF32 tensor cores, as PyTorch does with allow_tf32 off.
    KSEARCH_RETURN_IF_ERROR(b->Check(b->cudnnSetConvolutionMathType_(b->conv_, CUDNN_FMA_MATH),
                                     "cudnnSetConvolutionMathType"));
    int oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
    KSEARCH_RETURN_IF_ERROR(b->Check(
        b->cudnnSetTensor4dDescriptor_(b->conv_desc_out_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, oc, oh, ow),
        "cudnnSetTensor4dDescriptor(conv out)"));
    KSEARCH_RETURN_IF_ERROR(b->Check(
        b->cudnnSetTensor4dDescriptor_(b->bias_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, oc, 1, 1),
        "cudnnSetTensor4dDescriptor(bias)"));
    KSEARCH_ASSIGN_OR_RETURN(const DriverApi* api, Driver());
    b->api_ = api;
    int64_t conv_out_elements = int64_t{n} * oc * oh * ow;
    if (b->relu_) {
      KSEARCH_RETURN_IF_ERROR(b->Check(b->cudnnCreateActivationDescriptor_(&b->activation_),
                                       "cudnnCreateActivationDescriptor"));
      KSEARCH_RETURN_IF_ERROR(b->Check(
          b->cudnnSetActivationDescriptor_(b->activation_, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0),
          "cudnnSetActivationDescriptor"));
    }
    if (b->pooled_) {
      int pool = size("pool_kernel"), pool_stride = size("pool_stride");
      int ph = (oh - pool) / pool_stride + 1, pw = (ow - pool) / pool_stride + 1;
      KSEARCH_RETURN_IF_ERROR(b->Check(
          b->cudnnSetTensor4dDescriptor_(b->y_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, oc, ph, pw),
          "cudnnSetTensor4dDescriptor(y)"));
      KSEARCH_RETURN_IF_ERROR(b->Check(b->cudnnCreatePoolingDescriptor_(&b->pool_), "cudnnCreatePoolingDescriptor"));
      KSEARCH_RETURN_IF_ERROR(b->Check(
          b->cudnnSetPooling2dDescriptor_(b->pool_, CUDNN_POOLING_MAX, CUDNN_NOT_PROPAGATE_NAN, pool, pool, 0, 0,
                                          pool_stride, pool_stride),
          "cudnnSetPooling2dDescriptor"));
    }
    // The fused call reads a "z" operand (weighted by alpha2 = 0): it gets
    // this buffer, which no candidate can reach and which holds zeros or
    // the baseline's own last result, never poison. It also holds the
    // convolution's output when pooling follows.
    if (b->relu_ || b->pooled_) {
      KSEARCH_ASSIGN_OR_RETURN(b->conv_out_, DeviceBuffer::Allocate(*api, conv_out_elements * 4));
      KSEARCH_CU(api->cuMemsetD8Async(b->conv_out_.ptr(), 0, static_cast<size_t>(conv_out_elements * 4), nullptr),
                 "cuMemsetD8Async");
    }
    // The fp32 algorithms cuDNN finds for this shape, then the fastest of
    // them timed as Run() runs them, on scratch tensors holding normal(0, 1)
    // values, each run as the judge times one (fastest.h). cuDNN's own search times each algorithm
    // once, one after the other, on whatever the buffers hold: the first
    // would often win on a GPU still clocked high from idling.
    size_t free_bytes = 0, total = 0;
    api->cuMemGetInfo(&free_bytes, &total);
    size_t limit = std::min<size_t>(free_bytes / 4, size_t{4} << 30);
    const int64_t x_elements = int64_t{n} * c * h * w, w_elements = int64_t{oc} * c * kh * kw;
    int64_t y_elements = conv_out_elements;
    if (b->pooled_) {
      int pool = size("pool_kernel"), pool_stride = size("pool_stride");
      y_elements = int64_t{n} * oc * ((oh - pool) / pool_stride + 1) * ((ow - pool) / pool_stride + 1);
    }
    KSEARCH_ASSIGN_OR_RETURN(Stream stream, Stream::Create(*api));
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer x, DeviceBuffer::Allocate(*api, x_elements * 4));
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer wt, DeviceBuffer::Allocate(*api, w_elements * 4));
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer bias, DeviceBuffer::Allocate(*api, int64_t{oc} * 4));
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer out, DeviceBuffer::Allocate(*api, std::max(conv_out_elements, y_elements) * 4));
    KSEARCH_RETURN_IF_ERROR(FillNormal(*api, x.ptr(), static_cast<uint64_t>(x_elements), DType::kF32, stream.get()));
    KSEARCH_RETURN_IF_ERROR(FillNormal(*api, wt.ptr(), static_cast<uint64_t>(w_elements), DType::kF32, stream.get()));
    KSEARCH_RETURN_IF_ERROR(FillNormal(*api, bias.ptr(), static_cast<uint64_t>(oc), DType::kF32, stream.get()));
    KSEARCH_CU(api->cuStreamSynchronize(stream.get()), "cuStreamSynchronize");
    std::vector<Algorithm> found_fp32;
    {
      KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer search_space, DeviceBuffer::Allocate(*api, static_cast<int64_t>(limit)));
      cudnnConvolutionFwdAlgoPerf_t perf[16];
      int found = 0;
      KSEARCH_RETURN_IF_ERROR(b->Check(
          b->cudnnFindConvolutionForwardAlgorithmEx_(b->handle_, b->x_desc_, reinterpret_cast<void*>(x.ptr()),
                                                     b->w_desc_, reinterpret_cast<void*>(wt.ptr()), b->conv_,
                                                     b->conv_desc_out_, reinterpret_cast<void*>(out.ptr()), 16,
                                                     &found, perf, reinterpret_cast<void*>(search_space.ptr()), limit),
          "cudnnFindConvolutionForwardAlgorithmEx"));
      for (int i = 0; i < found; ++i) {
        if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
        // Only algorithms that really ran in fp32 FMA math.
        if (perf[i].mathType != CUDNN_FMA_MATH && perf[i].mathType != CUDNN_DEFAULT_MATH) continue;
        found_fp32.push_back({perf[i].algo, perf[i].memory, 0});
      }
    }
    if (found_fp32.empty()) return InternalError("cudnnFindConvolutionForwardAlgorithmEx found no fp32 algorithm");
    for (const Algorithm& a : found_fp32) b->workspace_bytes_ = std::max(b->workspace_bytes_, a.workspace);
    KSEARCH_ASSIGN_OR_RETURN(b->workspace_, DeviceBuffer::Allocate(*api, static_cast<int64_t>(b->workspace_bytes_)));
    std::vector<CUdeviceptr> tensors(p.tensors.size(), 0);
    tensors[static_cast<size_t>(b->x_)] = x.ptr();
    tensors[static_cast<size_t>(b->w_)] = wt.ptr();
    tensors[static_cast<size_t>(b->bias_)] = bias.ptr();
    tensors[static_cast<size_t>(b->y_)] = out.ptr();
    KSEARCH_ASSIGN_OR_RETURN(Event start, Event::Create(*api));
    KSEARCH_ASSIGN_OR_RETURN(Event end, Event::Create(*api));
    CudnnConv* conv = b.get();
    auto run = [&](size_t j, CUstream s) { return conv->RunWith(found_fp32[j].algo, s, tensors); };
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer flush, AllocateL2Flush(*api));
    StatusOr<Choice> choice =
        ChooseFastest(found_fp32.size(), EventTurns(*api, stream.get(), start.get(), end.get(), &flush, run));
    if (!choice.ok()) return InternalError("cudnn_conv_fwd: the fp32 algorithms: " + choice.status().message());
    for (size_t j = 0; j < choice->ran.size(); ++j) {
      b->timed_.push_back(found_fp32[choice->ran[j]]);
      b->timed_.back().median_ms = choice->median_ms[j];
    }
    b->algo_ = found_fp32[choice->best].algo;
    // The workspace the chosen algorithm needs, no more (the largest of all
    // may be gigabytes that candidates then cannot have).
    if (found_fp32[choice->best].workspace < b->workspace_bytes_) {
      b->workspace_bytes_ = found_fp32[choice->best].workspace;
      b->workspace_ = DeviceBuffer();
      KSEARCH_ASSIGN_OR_RETURN(b->workspace_, DeviceBuffer::Allocate(*api, static_cast<int64_t>(b->workspace_bytes_)));
    }
    b->version_ += ", algo " + std::to_string(static_cast<int>(b->algo_)) + " (the fastest of " +
                   std::to_string(choice->ran.size()) + " fp32 algorithms timed)";
    return std::unique_ptr<LibraryBaseline>(std::move(b));
  }

  ~CudnnConv() override {
    if (activation_) cudnnDestroyActivationDescriptor_(activation_);
    if (pool_) cudnnDestroyPoolingDescriptor_(pool_);
    if (conv_) cudnnDestroyConvolutionDescriptor_(conv_);
    if (w_desc_) cudnnDestroyFilterDescriptor_(w_desc_);
    for (cudnnTensorDescriptor_t d : {x_desc_, conv_desc_out_, bias_desc_, y_desc_}) {
      if (d) cudnnDestroyTensorDescriptor_(d);
    }
    if (handle_) cudnnDestroy_(handle_);
  }

  Status Run(CUstream stream, const std::vector<CUdeviceptr>& t) override { return RunWith(algo_, stream, t); }
  std::vector<Candidate> candidates() const override {
    std::vector<Candidate> out;
    for (const Algorithm& a : timed_) out.push_back({static_cast<int>(a.algo), a.median_ms});
    return out;
  }
  int chosen() const override { return static_cast<int>(algo_); }
  Status RunCandidate(int id, CUstream stream, const std::vector<CUdeviceptr>& t) override {
    for (const Algorithm& a : timed_) {
      if (static_cast<int>(a.algo) != id) continue;
      if (a.workspace > workspace_bytes_) {  // the workspace grows for it (after the queued work)
        KSEARCH_CU(api_->cuStreamSynchronize(stream), "cuStreamSynchronize");
        workspace_ = DeviceBuffer();
        KSEARCH_ASSIGN_OR_RETURN(workspace_, DeviceBuffer::Allocate(*api_, static_cast<int64_t>(a.workspace)));
        workspace_bytes_ = a.workspace;
      }
      return RunWith(a.algo, stream, t);
    }
    return LibraryBaseline::RunCandidate(id, stream, t);
  }
  std::string name() const override { return "cudnn_conv_fwd"; }
  std::string version() const override { return version_; }

 private:
  struct Algorithm {
    cudnnConvolutionFwdAlgo_t algo;
    size_t workspace;
    float median_ms;  // a run when timed
  };

  Status RunWith(cudnnConvolutionFwdAlgo_t algo, CUstream stream, const std::vector<CUdeviceptr>& t) {
    KSEARCH_RETURN_IF_ERROR(Check(cudnnSetStream_(handle_, reinterpret_cast<cudaStream_t>(stream)), "cudnnSetStream"));
    const float one = 1.0f, zero = 0.0f;
    auto at = [&](int i) { return reinterpret_cast<void*>(t[static_cast<size_t>(i)]); };
    void* workspace = reinterpret_cast<void*>(workspace_.ptr());
    void* scratch = reinterpret_cast<void*>(conv_out_.ptr());
    void* conv_out = pooled_ ? scratch : at(y_);
    if (relu_) {
      KSEARCH_RETURN_IF_ERROR(Check(
          cudnnConvolutionBiasActivationForward_(handle_, &one, x_desc_, at(x_), w_desc_, at(w_), conv_, algo,
                                                 workspace, workspace_bytes_, &zero, conv_desc_out_, scratch,
                                                 bias_desc_, at(bias_), activation_, conv_desc_out_, conv_out),
          "cudnnConvolutionBiasActivationForward"));
    } else {
      KSEARCH_RETURN_IF_ERROR(Check(cudnnConvolutionForward_(handle_, &one, x_desc_, at(x_), w_desc_, at(w_), conv_,
                                                             algo, workspace, workspace_bytes_, &zero,
                                                             conv_desc_out_, conv_out),
                                    "cudnnConvolutionForward"));
      KSEARCH_RETURN_IF_ERROR(
          Check(cudnnAddTensor_(handle_, &one, bias_desc_, at(bias_), &one, conv_desc_out_, conv_out), "cudnnAddTensor"));
    }
    if (pooled_) {
      KSEARCH_RETURN_IF_ERROR(Check(
          cudnnPoolingForward_(handle_, pool_, &one, conv_desc_out_, conv_out, &zero, y_desc_, at(y_)),
          "cudnnPoolingForward"));
    }
    return Status::Ok();
  }

  CudnnConv() = default;
  Status Check(cudnnStatus_t s, const char* call) const {
    if (s == CUDNN_STATUS_SUCCESS) return Status::Ok();
    const char* text = cudnnGetErrorString_ ? cudnnGetErrorString_(s) : "unknown";
    return InternalError(std::string(call) + ": " + text);
  }

#define KSEARCH_DECLARE_CUDNN(fn) decltype(&::fn) fn##_ = nullptr;
  KSEARCH_CUDNN_FUNCTIONS(KSEARCH_DECLARE_CUDNN)
#undef KSEARCH_DECLARE_CUDNN
  void* library_ = nullptr;
  const DriverApi* api_ = nullptr;
  cudnnHandle_t handle_ = nullptr;
  cudnnTensorDescriptor_t x_desc_ = nullptr, conv_desc_out_ = nullptr, bias_desc_ = nullptr, y_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_ = nullptr;
  cudnnActivationDescriptor_t activation_ = nullptr;
  cudnnPoolingDescriptor_t pool_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  std::vector<Algorithm> timed_;  // the fp32 algorithms that ran when timed
  size_t workspace_bytes_ = 0;    // the chosen one's (the most of all while choosing)
  DeviceBuffer workspace_, conv_out_;
  bool relu_ = false, pooled_ = false;
  int x_ = -1, w_ = -1, bias_ = -1, y_ = -1;
  std::string version_;
};

}  // namespace

Status LibraryBaseline::RunCandidate(int id, CUstream, const std::vector<CUdeviceptr>&) {
  return InvalidArgumentError(name() + ": candidate " + std::to_string(id) + " was not timed");
}

StatusOr<std::unique_ptr<LibraryBaseline>> CreateLibraryBaseline(const Problem& problem) {
  const std::string& name = problem.baseline.library;
  if (name == "cublas_sgemm") return CublasSgemm::Create(problem);
  if (name == "cublaslt_gemm") return CublasLtGemm::Create(problem);
  if (name == "cudnn_conv_fwd") return CudnnConv::Create(problem);
  if (name == "cudnn_sdpa") return CreateCudnnSdpa(problem);
  if (IsGemmSequence(name)) return CreateGemmSequence(problem);
  return UnimplementedError("unknown baseline library '" + name + "'");
}

}  // namespace ksearch::internal
