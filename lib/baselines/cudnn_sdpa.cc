#include "baselines/cudnn_sdpa.h"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "baselines/dynamic_library.h"
#include "baselines/fastest.h"
#include "core/baseline_settings.h"
#include "cuda/driver.h"
#include "cuda/objects.h"

namespace ksearch::internal {
namespace {

#define KSEARCH_CUDNN_GRAPH_FUNCTIONS(X)                                                          \
  X(cudnnCreate)                                                                                  \
  X(cudnnDestroy) X(cudnnSetStream) X(cudnnGetVersion) X(cudnnGetErrorString)                     \
      X(cudnnGetLastErrorString) X(cudnnBackendCreateDescriptor) X(cudnnBackendDestroyDescriptor) \
          X(cudnnBackendSetAttribute) X(cudnnBackendGetAttribute) X(cudnnBackendFinalize)         \
              X(cudnnBackendExecute)

using Desc = cudnnBackendDescriptor_t;
using Dims = std::array<int64_t, 4>;

// The tensors the variant pack binds; virtual tensors number from kVirtual.
enum : int64_t { kQ = 1, kK, kV, kO, kScale, kNegInf, kSeqKv, kSeqQ, kVirtual = 100 };

// Variant packs kept, one per set of tensor pointers the judge runs on (its
// checking and timing buffers), so that Run only executes.
constexpr size_t kCachedPacks = 8;

class CudnnSdpa final : public LibraryBaseline {
 public:
  static StatusOr<std::unique_ptr<LibraryBaseline>> Create(const Problem& p) {
    auto b = std::unique_ptr<CudnnSdpa>(new CudnnSdpa());
    KSEARCH_ASSIGN_OR_RETURN(BaselineBinding bind, BindBaseline(p));
    KSEARCH_RETURN_IF_ERROR(CheckBaselineShapes(p, bind));
    b->q_ = bind.Tensor("q");
    b->k_ = bind.Tensor("k");
    b->v_ = bind.Tensor("v");
    b->o_ = bind.Tensor("o");
    b->batch_ = bind.Size("batch");
    b->heads_ = bind.Size("heads");
    b->seq_q_ = bind.Size("seq_q");
    b->seq_kv_ = bind.Size("seq_kv");
    b->head_dim_ = bind.Size("head_dim");
    b->causal_ = bind.Choice("causal");
    DType half = p.tensors[static_cast<size_t>(b->q_)].dtype;
    b->io_type_ = half == DType::kBF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_HALF;
    b->configuration_ = "batch " + std::to_string(b->batch_) + ", heads " +
                        std::to_string(b->heads_) + ", seq_q " + std::to_string(b->seq_q_) +
                        ", seq_kv " + std::to_string(b->seq_kv_) + ", head_dim " +
                        std::to_string(b->head_dim_) + ", " + std::string(ToString(half)) +
                        ", causal " + b->causal_;
    KSEARCH_ASSIGN_OR_RETURN(b->library_, Open("libcudnn.so.9"));
#define KSEARCH_RESOLVE_CUDNN(fn) \
  KSEARCH_RETURN_IF_ERROR(Resolve(b->library_, "libcudnn", #fn, &b->fn##_));
    KSEARCH_CUDNN_GRAPH_FUNCTIONS(KSEARCH_RESOLVE_CUDNN)
#undef KSEARCH_RESOLVE_CUDNN
    KSEARCH_RETURN_IF_ERROR(b->Check(b->cudnnCreate_(&b->handle_), "cudnnCreate"));
    b->cudnn_version_ = static_cast<int64_t>(b->cudnnGetVersion_());
    int64_t v = b->cudnn_version_;
    b->version_ = "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
                  std::to_string(v % 100);
    KSEARCH_RETURN_IF_ERROR(b->BuildGraph());
    KSEARCH_RETURN_IF_ERROR(b->ChoosePlan());
    return std::unique_ptr<LibraryBaseline>(std::move(b));
  }

  ~CudnnSdpa() override {
    for (auto& [pointers, pack] : packs_) cudnnBackendDestroyDescriptor_(pack);
    for (auto d = owned_.rbegin(); d != owned_.rend(); ++d) cudnnBackendDestroyDescriptor_(*d);
    if (handle_) cudnnDestroy_(handle_);
  }

  Status Run(CUstream stream, const std::vector<CUdeviceptr>& t) override {
    return Execute(plan_, stream, t);
  }
  std::string name() const override { return "cudnn_sdpa"; }
  std::string version() const override { return version_; }
  std::vector<Candidate> candidates() const override {
    std::vector<Candidate> out;
    if (plans_.size() > 1) {
      for (const Plan& p : plans_) out.push_back({p.configuration, p.median_ms});
    }
    return out;
  }
  int chosen() const override { return plans_.size() > 1 ? chosen_ : -1; }
  Status RunCandidate(int id, CUstream stream, const std::vector<CUdeviceptr>& t) override {
    for (const Plan& p : plans_) {
      if (p.configuration == id && plans_.size() > 1) return Execute(p.plan, stream, t);
    }
    return LibraryBaseline::RunCandidate(id, stream, t);
  }

 private:
  CudnnSdpa() = default;

  Status Execute(Desc plan, CUstream stream, const std::vector<CUdeviceptr>& t) {
    KSEARCH_RETURN_IF_ERROR(
        Check(cudnnSetStream_(handle_, reinterpret_cast<cudaStream_t>(stream)), "cudnnSetStream"));
    std::array<CUdeviceptr, 4> pointers = {t[static_cast<size_t>(q_)], t[static_cast<size_t>(k_)],
                                           t[static_cast<size_t>(v_)], t[static_cast<size_t>(o_)]};
    KSEARCH_ASSIGN_OR_RETURN(Desc pack, VariantPack(pointers));
    return Check(cudnnBackendExecute_(handle_, plan, pack), "cudnnBackendExecute");
  }

  std::string Reason(cudnnStatus_t s) const {
    std::string text = cudnnGetErrorString_ ? cudnnGetErrorString_(s) : "unknown";
    if (cudnnGetLastErrorString_) {
      char last[512] = {};
      cudnnGetLastErrorString_(last, sizeof(last));
      if (last[0]) text += " (" + std::string(last) + ")";
    }
    return text;
  }
  Status Check(cudnnStatus_t s, const std::string& call) const {
    if (s == CUDNN_STATUS_SUCCESS) return Status::Ok();
    return InternalError("cudnn_sdpa: " + call + ": " + Reason(s));
  }

  // A descriptor that lives as long as the baseline.
  StatusOr<Desc> Make(cudnnBackendDescriptorType_t type, const char* what) {
    Desc d = nullptr;
    KSEARCH_RETURN_IF_ERROR(
        Check(cudnnBackendCreateDescriptor_(type, &d), std::string("create ") + what));
    owned_.push_back(d);
    return d;
  }
  Status Set(Desc d, cudnnBackendAttributeName_t attribute, cudnnBackendAttributeType_t type,
             int64_t count, const void* value, const char* what) {
    return Check(cudnnBackendSetAttribute_(d, attribute, type, count, value),
                 std::string("set ") + what + " (attribute " +
                     std::to_string(static_cast<int>(attribute)) + ")");
  }
  Status SetDesc(Desc d, cudnnBackendAttributeName_t attribute, Desc value, const char* what) {
    return Set(d, attribute, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value, what);
  }
  Status Finalize(Desc d, const char* what) {
    return Check(cudnnBackendFinalize_(d), std::string("finalize ") + what);
  }

  StatusOr<Desc> Tensor(int64_t uid, cudnnDataType_t type, Dims dims, Dims strides, bool is_virtual,
                        bool by_value = false) {
    KSEARCH_ASSIGN_OR_RETURN(Desc t, Make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "tensor"));
    int64_t alignment = 16;
    KSEARCH_RETURN_IF_ERROR(
        Set(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type, "tensor type"));
    KSEARCH_RETURN_IF_ERROR(
        Set(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data(), "tensor dims"));
    KSEARCH_RETURN_IF_ERROR(
        Set(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data(), "tensor strides"));
    KSEARCH_RETURN_IF_ERROR(
        Set(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, "tensor uid"));
    KSEARCH_RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1,
                                &alignment, "tensor alignment"));
    KSEARCH_RETURN_IF_ERROR(
        Set(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual, "tensor virtual"));
    if (by_value) {
      KSEARCH_RETURN_IF_ERROR(Set(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1,
                                  &by_value, "tensor by value"));
    }
    KSEARCH_RETURN_IF_ERROR(Finalize(t, "tensor"));
    return t;
  }
  StatusOr<Desc> Virtual(cudnnDataType_t type, Dims dims, Dims strides) {
    return Tensor(next_virtual_++, type, dims, strides, true);
  }
  // A host scalar passed by value: [1, 1, 1, 1].
  StatusOr<Desc> Scalar(int64_t uid, cudnnDataType_t type) {
    return Tensor(uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  }

  // y = mode(x[, b][, t]) in `math`; `axis` for CUDNN_POINTWISE_GEN_INDEX.
  Status Pointwise(cudnnPointwiseMode_t mode, cudnnDataType_t math, Desc x, Desc b, Desc t, Desc y,
                   int64_t axis = -1) {
    KSEARCH_ASSIGN_OR_RETURN(Desc pw, Make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "pointwise"));
    KSEARCH_RETURN_IF_ERROR(
        Set(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, "pointwise mode"));
    KSEARCH_RETURN_IF_ERROR(Set(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &math,
                                "pointwise precision"));
    if (axis >= 0) {
      KSEARCH_RETURN_IF_ERROR(
          Set(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis, "pointwise axis"));
    }
    KSEARCH_RETURN_IF_ERROR(Finalize(pw, "pointwise"));
    std::vector<std::pair<cudnnBackendAttributeName_t, Desc>> ports = {
        {CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw},
        {CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x}};
    if (b) ports.push_back({CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b});
    if (t) ports.push_back({CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t});
    ports.push_back({CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y});
    return Operation(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "pointwise operation", ports);
  }

  // An operation of the graph: its descriptor attributes set, finalized, kept.
  Status Operation(cudnnBackendDescriptorType_t type, const char* what,
                   const std::vector<std::pair<cudnnBackendAttributeName_t, Desc>>& ports) {
    KSEARCH_ASSIGN_OR_RETURN(Desc op, Make(type, what));
    for (const auto& [attribute, desc] : ports)
      KSEARCH_RETURN_IF_ERROR(SetDesc(op, attribute, desc, what));
    KSEARCH_RETURN_IF_ERROR(Finalize(op, what));
    ops_.push_back(op);
    return Status::Ok();
  }

  // y = the reduction of x over the dims where y has extent 1, in fp32.
  Status Reduction(cudnnReduceTensorOp_t reduce, Desc x, Desc y) {
    KSEARCH_ASSIGN_OR_RETURN(Desc r, Make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "reduction"));
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    KSEARCH_RETURN_IF_ERROR(Set(r, CUDNN_ATTR_REDUCTION_OPERATOR,
                                CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce,
                                "reduction operator"));
    KSEARCH_RETURN_IF_ERROR(
        Set(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "reduction type"));
    KSEARCH_RETURN_IF_ERROR(Finalize(r, "reduction"));
    return Operation(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "reduction operation",
                     {{CUDNN_ATTR_OPERATION_REDUCTION_DESC, r},
                      {CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x},
                      {CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y}});
  }

  // c = a · b over the last two dims, batched over the first two, fp32 accumulation.
  Status Matmul(Desc a, Desc b, Desc c) {
    KSEARCH_ASSIGN_OR_RETURN(Desc m, Make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "matmul"));
    cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    KSEARCH_RETURN_IF_ERROR(
        Set(m, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32, "matmul type"));
    KSEARCH_RETURN_IF_ERROR(Finalize(m, "matmul"));
    return Operation(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "matmul operation",
                     {{CUDNN_ATTR_OPERATION_MATMUL_DESC, m},
                      {CUDNN_ATTR_OPERATION_MATMUL_ADESC, a},
                      {CUDNN_ATTR_OPERATION_MATMUL_BDESC, b},
                      {CUDNN_ATTR_OPERATION_MATMUL_CDESC, c}});
  }

  Status Unsupported(const std::string& why) const {
    return UnimplementedError("cudnn_sdpa: " + version_ + " cannot run this attention (" +
                              configuration_ + "): " + why);
  }

  // The operation graph, in the logical layout [batch, heads, seq, head_dim]
  // with the strides of the problem's [batch, seq, heads, head_dim] memory.
  Status BuildGraph() {
    const int64_t b = batch_, h = heads_, sq = seq_q_, skv = seq_kv_, d = head_dim_;
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32,
                          boolean = CUDNN_DATA_BOOLEAN;
    KSEARCH_ASSIGN_OR_RETURN(Desc q,
                             Tensor(kQ, io_type_, {b, h, sq, d}, {sq * h * d, d, h * d, 1}, false));
    // Kᵀ [b, h, d, skv]: the same memory as k, its last two strides swapped.
    KSEARCH_ASSIGN_OR_RETURN(
        Desc kt, Tensor(kK, io_type_, {b, h, d, skv}, {skv * h * d, d, 1, h * d}, false));
    KSEARCH_ASSIGN_OR_RETURN(
        Desc v, Tensor(kV, io_type_, {b, h, skv, d}, {skv * h * d, d, h * d, 1}, false));
    KSEARCH_ASSIGN_OR_RETURN(Desc o,
                             Tensor(kO, io_type_, {b, h, sq, d}, {sq * h * d, d, h * d, 1}, false));
    const Dims scores = {b, h, sq, skv}, score_strides = {h * sq * skv, sq * skv, skv, 1};
    const Dims rows = {b, h, sq, 1}, row_strides = {h * sq, sq, 1, 1};

    KSEARCH_ASSIGN_OR_RETURN(Desc s, Virtual(f32, scores, score_strides));
    KSEARCH_RETURN_IF_ERROR(Matmul(q, kt, s));
    scale_ = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    KSEARCH_ASSIGN_OR_RETURN(Desc scale, Scalar(kScale, f32));
    KSEARCH_ASSIGN_OR_RETURN(Desc scaled, Virtual(f32, scores, score_strides));
    KSEARCH_RETURN_IF_ERROR(Pointwise(CUDNN_POINTWISE_MUL, f32, s, scale, nullptr, scaled));
    by_value_ = {{kScale, &scale_}};

    Desc logits = scaled;
    // One query under the bottom-right mask sees every key: the mask is the
    // identity there, and cuDNN 9.14 on the H200 ran the masked graph at
    // 0.084 ms where the unmasked one took 0.031 ms (B1 H32, 4096 keys,
    // 2026-12-02). The baseline is the library at its best on the same math.
    const bool every_key_visible = causal_ == "bottom_right" && sq == 1;
    if (every_key_visible) version_ += ", one query under the bottom-right mask: no mask";
    if (causal_ != "none" && !every_key_visible) {
      // Keep key j for query i where i + shift >= j: shift 0 aligns the
      // diagonal top-left; seq_kv - seq_q aligns it bottom-right (the last
      // query sees every key). With seq_q = seq_kv the two are one mask.
      const bool shifted = causal_ == "bottom_right" && sq != skv;
      if (shifted && cudnn_version_ < 90600) {
        return Unsupported(
            "a bottom-right causal mask with seq_q != seq_kv needs cuDNN 9.6 or later");
      }
      KSEARCH_ASSIGN_OR_RETURN(Desc row, Virtual(i32, scores, score_strides));
      KSEARCH_RETURN_IF_ERROR(
          Pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, scaled, nullptr, nullptr, row, 2));
      KSEARCH_ASSIGN_OR_RETURN(Desc col, Virtual(i32, scores, score_strides));
      KSEARCH_RETURN_IF_ERROR(
          Pointwise(CUDNN_POINTWISE_GEN_INDEX, f32, scaled, nullptr, nullptr, col, 3));
      if (shifted) {
        seq_kv_value_ = static_cast<int32_t>(skv);
        seq_q_value_ = static_cast<int32_t>(sq);
        KSEARCH_ASSIGN_OR_RETURN(Desc seq_kv, Scalar(kSeqKv, i32));
        KSEARCH_ASSIGN_OR_RETURN(Desc seq_q, Scalar(kSeqQ, i32));
        KSEARCH_ASSIGN_OR_RETURN(Desc plus_kv, Virtual(i32, scores, score_strides));
        KSEARCH_RETURN_IF_ERROR(Pointwise(CUDNN_POINTWISE_ADD, i32, row, seq_kv, nullptr, plus_kv));
        KSEARCH_ASSIGN_OR_RETURN(Desc minus_q, Virtual(i32, scores, score_strides));
        KSEARCH_RETURN_IF_ERROR(
            Pointwise(CUDNN_POINTWISE_SUB, i32, plus_kv, seq_q, nullptr, minus_q));
        row = minus_q;
        by_value_.push_back({kSeqKv, &seq_kv_value_});
        by_value_.push_back({kSeqQ, &seq_q_value_});
      }
      KSEARCH_ASSIGN_OR_RETURN(Desc keep, Virtual(boolean, scores, score_strides));
      KSEARCH_RETURN_IF_ERROR(Pointwise(CUDNN_POINTWISE_CMP_GE, boolean, row, col, nullptr, keep));
      // cuDNN before 9.10 wants the lowest float rather than −inf.
      neg_inf_ = cudnn_version_ < 91000 ? std::numeric_limits<float>::lowest()
                                        : -std::numeric_limits<float>::infinity();
      KSEARCH_ASSIGN_OR_RETURN(Desc neg_inf, Scalar(kNegInf, f32));
      KSEARCH_ASSIGN_OR_RETURN(Desc masked, Virtual(f32, scores, score_strides));
      // masked = keep ? scaled : −inf
      KSEARCH_RETURN_IF_ERROR(
          Pointwise(CUDNN_POINTWISE_BINARY_SELECT, f32, scaled, neg_inf, keep, masked));
      by_value_.push_back({kNegInf, &neg_inf_});
      logits = masked;
    }

    // Softmax over the keys: max, subtract, exp, sum, divide. The
    // statistics (max + log sum) are the engine's pattern; they stay virtual.
    KSEARCH_ASSIGN_OR_RETURN(Desc row_max, Virtual(f32, rows, row_strides));
    KSEARCH_RETURN_IF_ERROR(Reduction(CUDNN_REDUCE_TENSOR_MAX, logits, row_max));
    KSEARCH_ASSIGN_OR_RETURN(Desc centred, Virtual(f32, scores, score_strides));
    KSEARCH_RETURN_IF_ERROR(Pointwise(CUDNN_POINTWISE_SUB, f32, logits, row_max, nullptr, centred));
    KSEARCH_ASSIGN_OR_RETURN(Desc exps, Virtual(f32, scores, score_strides));
    KSEARCH_RETURN_IF_ERROR(Pointwise(CUDNN_POINTWISE_EXP, f32, centred, nullptr, nullptr, exps));
    KSEARCH_ASSIGN_OR_RETURN(Desc sum, Virtual(f32, rows, row_strides));
    KSEARCH_RETURN_IF_ERROR(Reduction(CUDNN_REDUCE_TENSOR_ADD, exps, sum));
    KSEARCH_ASSIGN_OR_RETURN(Desc log_sum, Virtual(f32, rows, row_strides));
    KSEARCH_RETURN_IF_ERROR(Pointwise(CUDNN_POINTWISE_LOG, f32, sum, nullptr, nullptr, log_sum));
    KSEARCH_ASSIGN_OR_RETURN(Desc stats, Virtual(f32, rows, row_strides));
    KSEARCH_RETURN_IF_ERROR(Pointwise(CUDNN_POINTWISE_ADD, f32, row_max, log_sum, nullptr, stats));
    // P in the input type: the second product's operand, as the engine needs.
    KSEARCH_ASSIGN_OR_RETURN(Desc probabilities, Virtual(io_type_, scores, score_strides));
    KSEARCH_RETURN_IF_ERROR(Pointwise(CUDNN_POINTWISE_DIV, f32, exps, sum, nullptr, probabilities));
    KSEARCH_RETURN_IF_ERROR(Matmul(probabilities, v, o));

    KSEARCH_ASSIGN_OR_RETURN(graph_,
                             Make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "operation graph"));
    KSEARCH_RETURN_IF_ERROR(Set(graph_, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                &handle_, "graph handle"));
    KSEARCH_RETURN_IF_ERROR(Set(graph_, CUDNN_ATTR_OPERATIONGRAPH_OPS,
                                CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops_.size()),
                                ops_.data(), "graph operations"));
    cudnnStatus_t finalized = cudnnBackendFinalize_(graph_);
    if (finalized != CUDNN_STATUS_SUCCESS)
      return Unsupported("the operation graph: " + Reason(finalized));
    return Status::Ok();
  }

  // Heuristics mode A's configurations whose execution plans finalize, timed
  // on scratch tensors holding normal(0, 1) values, each run as the judge
  // times one; the fastest is kept (fastest.h). One that builds is kept
  // untimed.
  Status ChoosePlan() {
    KSEARCH_ASSIGN_OR_RETURN(Desc heuristics,
                             Make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "engine heuristics"));
    cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    KSEARCH_RETURN_IF_ERROR(
        SetDesc(heuristics, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph_, "heuristics graph"));
    KSEARCH_RETURN_IF_ERROR(Set(heuristics, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1,
                                &mode, "heuristics mode"));
    cudnnStatus_t finalized = cudnnBackendFinalize_(heuristics);
    if (finalized != CUDNN_STATUS_SUCCESS)
      return Unsupported("engine heuristics: " + Reason(finalized));
    int64_t count = 0;
    KSEARCH_RETURN_IF_ERROR(
        Check(cudnnBackendGetAttribute_(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
              "count the heuristics' results"));
    if (count <= 0) return Unsupported("heuristics mode A offers no engine configuration");
    std::vector<Desc> configs;
    for (int64_t i = 0; i < count; ++i) {
      KSEARCH_ASSIGN_OR_RETURN(Desc c,
                               Make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "engine configuration"));
      configs.push_back(c);
    }
    int64_t got = 0;
    KSEARCH_RETURN_IF_ERROR(
        Check(cudnnBackendGetAttribute_(heuristics, CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                        CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, configs.data()),
              "read the heuristics' results"));
    std::string reasons;
    int64_t workspace = 0;
    for (int64_t i = 0; i < got; ++i) {
      KSEARCH_ASSIGN_OR_RETURN(Desc plan,
                               Make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "execution plan"));
      KSEARCH_RETURN_IF_ERROR(Set(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1,
                                  &handle_, "plan handle"));
      KSEARCH_RETURN_IF_ERROR(SetDesc(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG,
                                      configs[static_cast<size_t>(i)], "plan configuration"));
      cudnnStatus_t built = cudnnBackendFinalize_(plan);
      if (built != CUDNN_STATUS_SUCCESS) {
        reasons += (reasons.empty() ? "" : "; ") +
                   ("configuration " + std::to_string(i) + ": " + Reason(built));
        continue;
      }
      int64_t n = 0, plan_workspace = 0, engine_index = -1;
      KSEARCH_RETURN_IF_ERROR(
          Check(cudnnBackendGetAttribute_(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                          CUDNN_TYPE_INT64, 1, &n, &plan_workspace),
                "read the plan's workspace size"));
      KSEARCH_ASSIGN_OR_RETURN(Desc engine, Make(CUDNN_BACKEND_ENGINE_DESCRIPTOR, "engine"));
      if (cudnnBackendGetAttribute_(configs[static_cast<size_t>(i)], CUDNN_ATTR_ENGINECFG_ENGINE,
                                    CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                    &engine) == CUDNN_STATUS_SUCCESS) {
        cudnnBackendGetAttribute_(engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n,
                                  &engine_index);
      }
      workspace = std::max(workspace, plan_workspace);
      plans_.push_back({static_cast<int>(i), engine_index, plan, 0});
    }
    if (plans_.empty()) {
      return Unsupported("none of the " + std::to_string(got) +
                         " engine configurations of heuristics mode A builds: " + reasons);
    }
    KSEARCH_ASSIGN_OR_RETURN(const DriverApi* api, Driver());
    // One workspace, the largest any plan needs, so that every variant pack
    // serves every plan.
    if (workspace > 0) {
      KSEARCH_ASSIGN_OR_RETURN(workspace_, DeviceBuffer::Allocate(*api, workspace));
    }
    size_t best = 0;
    if (plans_.size() > 1) {
      KSEARCH_ASSIGN_OR_RETURN(best, TimePlans(*api));
    }
    plan_ = plans_[best].plan;
    chosen_ = plans_[best].configuration;
    version_ += ", engine " + std::to_string(plans_[best].engine) +
                " (heuristics mode A, configuration " + std::to_string(chosen_ + 1) + " of " +
                std::to_string(got) + ", " +
                (plans_.size() > 1 ? "the fastest of " + std::to_string(plans_.size()) + " timed"
                                   : std::string("the only one that builds")) +
                ", workspace " + std::to_string(workspace) + " bytes)";
    return Status::Ok();
  }

  // Times plans_ on scratch q, k, v, o; returns the fastest one's index and
  // drops the plans that failed to run.
  StatusOr<size_t> TimePlans(const DriverApi& api) {
    const int64_t q_elements = batch_ * seq_q_ * heads_ * head_dim_,
                  kv_elements = batch_ * seq_kv_ * heads_ * head_dim_;
    const DType type = io_type_ == CUDNN_DATA_BFLOAT16 ? DType::kBF16 : DType::kF16;
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer q, DeviceBuffer::Allocate(api, q_elements * 2));
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer k, DeviceBuffer::Allocate(api, kv_elements * 2));
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer v, DeviceBuffer::Allocate(api, kv_elements * 2));
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer o, DeviceBuffer::Allocate(api, q_elements * 2));
    KSEARCH_ASSIGN_OR_RETURN(Stream stream, Stream::Create(api));
    KSEARCH_ASSIGN_OR_RETURN(Event start, Event::Create(api));
    KSEARCH_ASSIGN_OR_RETURN(Event end, Event::Create(api));
    for (const DeviceBuffer* b : {&q, &k, &v}) {
      KSEARCH_RETURN_IF_ERROR(FillNormal(api, b->ptr(),
                                         static_cast<uint64_t>(b == &q ? q_elements : kv_elements),
                                         type, stream.get()));
    }
    KSEARCH_RETURN_IF_ERROR(Check(
        cudnnSetStream_(handle_, reinterpret_cast<cudaStream_t>(stream.get())), "cudnnSetStream"));
    KSEARCH_ASSIGN_OR_RETURN(Desc pack, VariantPack({q.ptr(), k.ptr(), v.ptr(), o.ptr()}));
    auto run = [&](size_t j, CUstream) {
      return Check(cudnnBackendExecute_(handle_, plans_[j].plan, pack), "cudnnBackendExecute");
    };
    KSEARCH_ASSIGN_OR_RETURN(DeviceBuffer flush, AllocateL2Flush(api));
    StatusOr<Choice> choice = ChooseFastest(
        plans_.size(), EventTurns(api, stream.get(), start.get(), end.get(), &flush, run));
    // The scratch tensors' pack must not outlive them.
    for (auto& [pointers, cached] : packs_) cudnnBackendDestroyDescriptor_(cached);
    packs_.clear();
    if (!choice.ok())
      return InternalError("cudnn_sdpa: the engine configurations: " + choice.status().message());
    std::vector<Plan> ran;
    size_t best = 0;
    for (size_t j = 0; j < choice->ran.size(); ++j) {
      if (choice->ran[j] == choice->best) best = ran.size();
      ran.push_back(plans_[choice->ran[j]]);
      ran.back().median_ms = choice->median_ms[j];
    }
    plans_ = std::move(ran);
    return best;
  }

  // The finalized variant pack for these tensors, built once per set of pointers.
  StatusOr<Desc> VariantPack(const std::array<CUdeviceptr, 4>& pointers) {
    for (const auto& [known, pack] : packs_) {
      if (known == pointers) return pack;
    }
    if (packs_.size() == kCachedPacks) {
      cudnnBackendDestroyDescriptor_(packs_.front().second);
      packs_.erase(packs_.begin());
    }
    std::vector<int64_t> uids = {kQ, kK, kV, kO};
    std::vector<void*> data;
    for (CUdeviceptr p : pointers) data.push_back(reinterpret_cast<void*>(p));
    for (const auto& [uid, value] : by_value_) {
      uids.push_back(uid);
      data.push_back(value);
    }
    Desc pack = nullptr;
    KSEARCH_RETURN_IF_ERROR(
        Check(cudnnBackendCreateDescriptor_(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &pack),
              "create variant pack"));
    void* workspace = reinterpret_cast<void*>(workspace_.ptr());
    Status built = Set(pack, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64,
                       static_cast<int64_t>(uids.size()), uids.data(), "variant pack ids");
    if (built.ok()) {
      built = Set(pack, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR,
                  static_cast<int64_t>(data.size()), data.data(), "variant pack pointers");
    }
    if (built.ok()) {
      built = Set(pack, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace,
                  "variant pack workspace");
    }
    if (built.ok()) built = Finalize(pack, "variant pack");
    if (!built.ok()) {
      cudnnBackendDestroyDescriptor_(pack);
      return built;
    }
    packs_.emplace_back(pointers, pack);
    return pack;
  }

#define KSEARCH_DECLARE_CUDNN(fn) decltype(&::fn) fn##_ = nullptr;
  KSEARCH_CUDNN_GRAPH_FUNCTIONS(KSEARCH_DECLARE_CUDNN)
#undef KSEARCH_DECLARE_CUDNN
  void* library_ = nullptr;
  cudnnHandle_t handle_ = nullptr;
  int64_t cudnn_version_ = 0;
  std::vector<Desc> owned_;  // every descriptor but the variant packs; destroyed last first
  std::vector<Desc> ops_;
  Desc graph_ = nullptr, plan_ = nullptr;
  // The plans that built (after the choice, those that ran), and the chosen
  // one's position in the heuristics' list.
  struct Plan {
    int configuration;  // in heuristics mode A's list
    int64_t engine;     // cuDNN's global engine index
    Desc plan;
    float median_ms;  // a run when timed (0 when it was the only one)
  };
  std::vector<Plan> plans_;
  int chosen_ = -1;
  DeviceBuffer workspace_;
  std::vector<std::pair<std::array<CUdeviceptr, 4>, Desc>> packs_;
  // The by-value scalars: their uids and the host values the packs point at.
  std::vector<std::pair<int64_t, void*>> by_value_;
  float scale_ = 1.0f, neg_inf_ = 0.0f;
  int32_t seq_kv_value_ = 0, seq_q_value_ = 0;
  cudnnDataType_t io_type_ = CUDNN_DATA_BFLOAT16;
  int q_ = -1, k_ = -1, v_ = -1, o_ = -1;
  int64_t next_virtual_ = kVirtual;
  int64_t batch_ = 0, heads_ = 0, seq_q_ = 0, seq_kv_ = 0, head_dim_ = 0;
  std::string causal_, configuration_, version_;
};

}  // namespace

StatusOr<std::unique_ptr<LibraryBaseline>> CreateCudnnSdpa(const Problem& problem) {
  return CudnnSdpa::Create(problem);
}

}  // namespace ksearch::internal
