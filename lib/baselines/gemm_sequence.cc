#include "baselines/gemm_sequence.h"

#include <algorithm>
#include <vector>

#include "baselines/cublaslt_matmul.h"
#include "core/baseline_settings.h"
#include "cuda/compiler.h"
#include "cuda/driver.h"
#include "cuda/objects.h"

namespace ksearch::internal {
namespace {

// The elementwise launches, one per sequence and intermediate type (f32: T =
// float, bf16: T = __nv_bfloat16), each walking rows on grid.y and four
// consecutive elements a thread on grid.x (one where a row's length is not
// a multiple of four). fp32 arithmetic; each output rounded once.
constexpr char kElementwiseSource[] = R"(
#include <cuda_bf16.h>

__device__ __forceinline__ float Load1(const float* p) { return *p; }
__device__ __forceinline__ float Load1(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void Load4(const float* p, float (&v)[4]) {
  const float4 x = *reinterpret_cast<const float4*>(p);
  v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;
}
__device__ __forceinline__ void Load4(const __nv_bfloat16* p, float (&v)[4]) {
  const uint2 x = *reinterpret_cast<const uint2*>(p);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&x.y));
  v[0] = lo.x; v[1] = lo.y; v[2] = hi.x; v[3] = hi.y;
}
__device__ __forceinline__ void Store4(__nv_bfloat16* p, const float (&v)[4]) {
  __nv_bfloat162 lo = __floats2bfloat162_rn(v[0], v[1]), hi = __floats2bfloat162_rn(v[2], v[3]);
  uint2 x;
  x.x = *reinterpret_cast<const unsigned*>(&lo);
  x.y = *reinterpret_cast<const unsigned*>(&hi);
  *reinterpret_cast<uint2*>(p) = x;
}
__device__ __forceinline__ float Silu(float g) { return g / (1.0f + expf(-g)); }

// Calls f(column) for the columns [0, n) of a row, in groups of four (f4)
// where n % 4 == 0, else one by one (f1).
template <typename F4, typename F1>
__device__ __forceinline__ void ForColumns(int n, F4 f4, F1 f1) {
  const int step = gridDim.x * blockDim.x, first = blockIdx.x * blockDim.x + threadIdx.x;
  if (n % 4 == 0) {
    for (int q = first; q < n / 4; q += step) f4(4 * q);
  } else {
    for (int j = first; j < n; j += step) f1(j);
  }
}

// c[i][j] = silu(h[i][j]) * h[i][n + j]; h is m x 2n.
template <typename T>
__device__ void Swiglu(const T* __restrict__ h, __nv_bfloat16* __restrict__ c, int m, int n) {
  for (int i = blockIdx.y; i < m; i += gridDim.y) {
    const T* gate = h + 2ll * n * i;
    const T* up = gate + n;
    __nv_bfloat16* out = c + (long long)n * i;
    ForColumns(n, [&](int j) {
      float g[4], u[4];
      Load4(gate + j, g);
      Load4(up + j, u);
      for (int e = 0; e < 4; ++e) g[e] = Silu(g[e]) * u[e];
      Store4(out + j, g);
    }, [&](int j) { out[j] = __float2bfloat16_rn(Silu(Load1(gate + j)) * Load1(up + j)); });
  }
}

// c = h + r; all m x n.
template <typename T>
__device__ void Residual(const T* __restrict__ h, const __nv_bfloat16* __restrict__ r, __nv_bfloat16* __restrict__ c,
                         int m, int n) {
  for (int i = blockIdx.y; i < m; i += gridDim.y) {
    const long long row = (long long)n * i;
    ForColumns(n, [&](int j) {
      float a[4], b[4];
      Load4(h + row + j, a);
      Load4(r + row + j, b);
      for (int e = 0; e < 4; ++e) a[e] += b[e];
      Store4(c + row + j, a);
    }, [&](int j) { c[row + j] = __float2bfloat16_rn(Load1(h + row + j) + Load1(r + row + j)); });
  }
}

// t is m x (heads + 2 kv_heads) * d: q's heads, then key's, then value's.
// Rotate half on q and key (x1 = x[i], x2 = x[i + d/2]: x1 c - x2 s, x2 c + x1 s
// with c, s = cos, sin[row][i]); value copied. A row's work is its
// (heads + kv_heads) * d/2 rotated pairs, then its kv_heads * d copies.
template <typename T>
__device__ void Rope(const T* __restrict__ t, const float* __restrict__ cos_t, const float* __restrict__ sin_t,
                     __nv_bfloat16* __restrict__ q, __nv_bfloat16* __restrict__ key,
                     __nv_bfloat16* __restrict__ value, int m, int heads, int kv_heads, int d) {
  const int half = d / 2, pairs = (heads + kv_heads) * half, copies = kv_heads * d;
  const bool by4 = half % 4 == 0;
  for (int i = blockIdx.y; i < m; i += gridDim.y) {
    const T* row = t + (long long)(heads + 2 * kv_heads) * d * i;
    const float* c_row = cos_t + (long long)half * i;
    const float* s_row = sin_t + (long long)half * i;
    // Pair p: head p / half (q's first), element p % half.
    auto rotate = [&](int p, int count) {
      const int head = p / half, e = p % half;
      const T* x = row + head * d + e;
      __nv_bfloat16* out = head < heads ? q + ((long long)heads * i + head) * d + e
                                        : key + ((long long)kv_heads * i + head - heads) * d + e;
      float x1[4], x2[4], c[4], s[4], o1[4], o2[4];
      if (count == 4) {
        Load4(x, x1); Load4(x + half, x2); Load4(c_row + e, c); Load4(s_row + e, s);
        for (int r = 0; r < 4; ++r) {
          o1[r] = x1[r] * c[r] - x2[r] * s[r];
          o2[r] = x2[r] * c[r] + x1[r] * s[r];
        }
        Store4(out, o1);
        Store4(out + half, o2);
      } else {
        const float a = Load1(x), b = Load1(x + half), cc = c_row[e], ss = s_row[e];
        out[0] = __float2bfloat16_rn(a * cc - b * ss);
        out[half] = __float2bfloat16_rn(b * cc + a * ss);
      }
    };
    const T* v_in = row + (heads + kv_heads) * d;
    __nv_bfloat16* v_out = value + (long long)copies * i;
    const int work = (by4 ? pairs / 4 : pairs) + (by4 ? copies / 4 : copies);
    for (int w = blockIdx.x * blockDim.x + threadIdx.x; w < work; w += gridDim.x * blockDim.x) {
      const int rotated = by4 ? pairs / 4 : pairs;
      if (w < rotated) {
        rotate(by4 ? 4 * w : w, by4 ? 4 : 1);
      } else if (by4) {
        float v[4];
        const int j = 4 * (w - rotated);
        Load4(v_in + j, v);
        Store4(v_out + j, v);
      } else {
        const int j = w - rotated;
        v_out[j] = __float2bfloat16_rn(Load1(v_in + j));
      }
    }
  }
}

#define KS_SEQUENCE_ENTRIES(SUFFIX, T)                                                                          \
  extern "C" __global__ void ks_swiglu_##SUFFIX(const T* h, __nv_bfloat16* c, int m, int n) {                  \
    Swiglu(h, c, m, n);                                                                                         \
  }                                                                                                             \
  extern "C" __global__ void ks_residual_##SUFFIX(const T* h, const __nv_bfloat16* r, __nv_bfloat16* c, int m, \
                                                  int n) {                                                      \
    Residual(h, r, c, m, n);                                                                                    \
  }                                                                                                             \
  extern "C" __global__ void ks_rope_##SUFFIX(const T* t, const float* cos_t, const float* sin_t,              \
                                              __nv_bfloat16* q, __nv_bfloat16* key, __nv_bfloat16* value,       \
                                              int m, int heads, int kv_heads, int d) {                          \
    Rope(t, cos_t, sin_t, q, key, value, m, heads, kv_heads, d);                                                \
  }
KS_SEQUENCE_ENTRIES(f32, float)
KS_SEQUENCE_ENTRIES(bf16, __nv_bfloat16)
)";

enum class Op { kSwiglu, kResidual, kRope };

struct SequenceName {
  std::string_view library;
  Op op;
  std::string_view kernel;  // the elementwise entry point, without the type suffix
};
constexpr SequenceName kSequences[] = {{"cublaslt_gemm+swiglu", Op::kSwiglu, "ks_swiglu"},
                                       {"cublaslt_gemm+residual", Op::kResidual, "ks_residual"},
                                       {"cublaslt_gemm+rope", Op::kRope, "ks_rope"}};

const SequenceName* FindSequence(std::string_view library) {
  for (const SequenceName& s : kSequences) {
    if (s.library == library) return &s;
  }
  return nullptr;
}

// "sm_90" for the device of the current context.
StatusOr<std::string> CurrentArch(const DriverApi& api) {
  CUdevice device = 0;
  KSEARCH_CU(api.cuCtxGetDevice_v2(&device, nullptr), "cuCtxGetDevice");
  int major = 0, minor = 0;
  KSEARCH_CU(api.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
             "cuDeviceGetAttribute");
  KSEARCH_CU(api.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
             "cuDeviceGetAttribute");
  return "sm_" + std::to_string(major) + std::to_string(minor);
}

class GemmSequence final : public LibraryBaseline {
 public:
  static StatusOr<std::unique_ptr<LibraryBaseline>> Create(const Problem& p,
                                                           const SequenceName& sequence) {
    auto s = std::unique_ptr<GemmSequence>(new GemmSequence(sequence));
    KSEARCH_ASSIGN_OR_RETURN(BaselineBinding bind, BindBaseline(p));
    KSEARCH_RETURN_IF_ERROR(CheckBaselineShapes(p, bind));
    s->Bind(bind);
    const bool f32 = bind.Choice("intermediate") == "f32";
    MatmulShape shape{
        s->m_, s->gemm_n_, bind.Size("k"), DType::kBF16, f32 ? DType::kF32 : DType::kBF16, true};
    KSEARCH_ASSIGN_OR_RETURN(s->matmul_, CublasLtMatmul::Create(shape));
    KSEARCH_ASSIGN_OR_RETURN(s->api_, Driver());
    KSEARCH_ASSIGN_OR_RETURN(s->projection_,
                             DeviceBuffer::Allocate(*s->api_, s->m_ * s->gemm_n_ * (f32 ? 4 : 2)));
    KSEARCH_RETURN_IF_ERROR(
        s->LoadElementwise(std::string(sequence.kernel) + (f32 ? "_f32" : "_bf16")));
    return std::unique_ptr<LibraryBaseline>(std::move(s));
  }

  Status Run(CUstream stream, const std::vector<CUdeviceptr>& t) override {
    CUdeviceptr h = projection_.ptr();
    KSEARCH_RETURN_IF_ERROR(
        matmul_->Run(stream, t[static_cast<size_t>(a_)], t[static_cast<size_t>(b_)], h));
    std::vector<CUdeviceptr> pointers;
    for (int index : outputs_and_inputs_) pointers.push_back(t[static_cast<size_t>(index)]);
    int m = static_cast<int>(m_), n = static_cast<int>(n_);
    std::vector<void*> args = {&h};
    for (CUdeviceptr& p : pointers) args.push_back(&p);
    args.push_back(&m);
    if (sequence_.op == Op::kRope) {
      for (int& size : rope_sizes_) args.push_back(&size);
    } else {
      args.push_back(&n);
    }
    // 256 threads, each four elements of a row; rows on grid.y.
    const int64_t per_row = sequence_.op == Op::kRope ? rope_work_ : n_;
    const unsigned blocks_x =
        static_cast<unsigned>(std::clamp<int64_t>((per_row + 1023) / 1024, 1, 1024));
    const unsigned blocks_y = static_cast<unsigned>(std::min<int64_t>(m_, 65535));
    KSEARCH_CU(api_->cuLaunchKernel(function_, blocks_x, blocks_y, 1, 256, 1, 1, 0, stream,
                                    args.data(), nullptr),
               "cuLaunchKernel(gemm sequence's elementwise kernel)");
    return Status::Ok();
  }
  std::string name() const override { return std::string(sequence_.library); }
  std::string version() const override { return matmul_->version() + ", then " + kernel_name_; }

 private:
  explicit GemmSequence(const SequenceName& sequence) : sequence_(sequence) {}

  // The tensors the elementwise kernel takes after the projection, in its
  // parameter order, and the GEMM's size.
  void Bind(const BaselineBinding& bind) {
    a_ = bind.Tensor("a");
    b_ = bind.Tensor("b");
    m_ = bind.Size("m");
    switch (sequence_.op) {
      case Op::kSwiglu:
        n_ = bind.Size("n");
        gemm_n_ = 2 * n_;
        outputs_and_inputs_ = {bind.Tensor("c")};
        break;
      case Op::kResidual:
        n_ = bind.Size("n");
        gemm_n_ = n_;
        outputs_and_inputs_ = {bind.Tensor("r"), bind.Tensor("c")};
        break;
      case Op::kRope: {
        const int64_t heads = bind.Size("heads"), kv = bind.Size("kv_heads"),
                      d = bind.Size("head_dim");
        gemm_n_ = (heads + 2 * kv) * d;
        outputs_and_inputs_ = {bind.Tensor("cos"), bind.Tensor("sin"), bind.Tensor("q"),
                               bind.Tensor("key"), bind.Tensor("value")};
        rope_sizes_ = {static_cast<int>(heads), static_cast<int>(kv), static_cast<int>(d)};
        rope_work_ = (heads + kv) * d / 2 + kv * d;
        break;
      }
    }
  }

  Status LoadElementwise(const std::string& kernel) {
    KSEARCH_ASSIGN_OR_RETURN(std::string arch, CurrentArch(*api_));
    CompileResult compiled = CompileGemmSequenceKernels(arch);
    if (!compiled.ok)
      return InternalError("the GEMM sequence's elementwise kernels do not compile:\n" +
                           compiled.log);
    KSEARCH_ASSIGN_OR_RETURN(module_, Module::Load(*api_, compiled.cubin));
    KSEARCH_ASSIGN_OR_RETURN(function_, module_.Function(kernel));
    kernel_name_ = kernel + " (NVRTC " + Compiler::NvrtcVersion() + ")";
    return Status::Ok();
  }

  const SequenceName& sequence_;
  const DriverApi* api_ = nullptr;
  std::unique_ptr<CublasLtMatmul> matmul_;
  DeviceBuffer projection_;
  Module module_;
  CUfunction function_ = nullptr;
  std::string kernel_name_;
  int a_ = -1, b_ = -1;
  int64_t m_ = 0, n_ = 0, gemm_n_ = 0, rope_work_ = 0;
  std::vector<int> outputs_and_inputs_;
  std::vector<int> rope_sizes_;
};

}  // namespace

bool IsGemmSequence(std::string_view library) { return FindSequence(library) != nullptr; }

CompileResult CompileGemmSequenceKernels(const std::string& arch) {
  CompileRequest request{kElementwiseSource, {}, arch, "ksearch_gemm_sequence.cu"};
  request.trusted = true;
  return CompileWithNvrtc(request, 64 * 1024);
}

StatusOr<std::unique_ptr<LibraryBaseline>> CreateGemmSequence(const Problem& problem) {
  const SequenceName* sequence = FindSequence(problem.baseline.library);
  if (!sequence)
    return UnimplementedError("'" + problem.baseline.library + "' is not a GEMM sequence");
  return GemmSequence::Create(problem, *sequence);
}

}  // namespace ksearch::internal
