#include "core/baseline_settings.h"

#include <algorithm>

namespace ksearch::internal {
namespace {

using Kind = BaselineSetting::Kind;

BaselineSetting TensorKey(std::string_view key, TensorRole role) {
  return {key, Kind::kTensor, true, {}, {}, role};
}
BaselineSetting SizeKey(std::string_view key, std::string_view fallback = {}) {
  return {key, Kind::kSize, fallback.empty(), fallback, {}, TensorRole::kInput};
}
// An optional size with no default: Size() is 0 when it is absent.
BaselineSetting OptionalSizeKey(std::string_view key) {
  return {key, Kind::kSize, false, {}, {}, TensorRole::kInput};
}
BaselineSetting ChoiceKey(std::string_view key, std::vector<std::string_view> choices) {
  std::string_view fallback = choices.front();
  return {key, Kind::kChoice, false, fallback, std::move(choices), TensorRole::kInput};
}

std::vector<BaselineSetting> GemmKeys() {
  return {TensorKey("a", TensorRole::kInput), TensorKey("b", TensorRole::kInput),
          TensorKey("c", TensorRole::kOutput), SizeKey("m"), SizeKey("n"), SizeKey("k")};
}

std::string Field(std::string_view key) { return "baseline.settings." + std::string(key); }

Status CheckCount(const Problem& p, const BaselineBinding& b, std::string_view key, int64_t want,
                  const std::string& formula) {
  const TensorSpec& t = p.tensors[static_cast<size_t>(b.Tensor(key))];
  KSEARCH_ASSIGN_OR_RETURN(int64_t got, p.Elements(t));
  if (got == want) return Status::Ok();
  return InvalidArgumentError(Field(key) + ": tensor '" + t.name + "' has " + std::to_string(got) +
                              " elements, but the baseline reads it as " + formula + " = " +
                              std::to_string(want));
}

Status CheckDType(const Problem& p, const BaselineBinding& b, std::string_view key,
                  std::initializer_list<DType> allowed) {
  const TensorSpec& t = p.tensors[static_cast<size_t>(b.Tensor(key))];
  if (std::find(allowed.begin(), allowed.end(), t.dtype) != allowed.end()) return Status::Ok();
  std::string names;
  for (DType d : allowed) names += (names.empty() ? "" : " or ") + std::string(ToString(d));
  return InvalidArgumentError(Field(key) + ": tensor '" + t.name + "' is " +
                              std::string(ToString(t.dtype)) + "; " + std::string(p.baseline.library) +
                              " needs " + names);
}

Status CheckGemm(const Problem& p, const BaselineBinding& b) {
  int64_t m = b.Size("m"), n = b.Size("n"), k = b.Size("k");
  for (int64_t v : {m, n, k}) {
    if (v > INT32_MAX) return InvalidArgumentError("baseline.settings: GEMM sizes must fit in 32 bits");
  }
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "a", m * k, "m × k"));
  // cublaslt_gemm's b_layout "nk": b is stored n×k (nn.Linear's weight) and used transposed.
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "b", k * n, b.Choice("b_layout") == "nk" ? "n × k" : "k × n"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "c", m * n, "m × n"));
  if (p.baseline.library == "cublas_sgemm") {
    for (std::string_view key : {"a", "b", "c"}) KSEARCH_RETURN_IF_ERROR(CheckDType(p, b, key, {DType::kF32}));
    return Status::Ok();
  }
  KSEARCH_RETURN_IF_ERROR(CheckDType(p, b, "a", {DType::kBF16, DType::kF16}));
  DType in = p.tensors[static_cast<size_t>(b.Tensor("a"))].dtype;
  KSEARCH_RETURN_IF_ERROR(CheckDType(p, b, "b", {in}));
  return CheckDType(p, b, "c", {in, DType::kF32});
}

Status CheckConv(const Problem& p, const BaselineBinding& b) {
  int64_t n = b.Size("batch"), c = b.Size("in_channels"), h = b.Size("height"), w = b.Size("width"),
          oc = b.Size("out_channels"), kh = b.Size("kernel_h"), kw = b.Size("kernel_w"),
          stride = b.Size("stride"), pad = b.Size("padding");
  for (int64_t v : {n, c, h, w, oc, kh, kw, stride, pad}) {
    if (v > INT32_MAX) return InvalidArgumentError("baseline.settings: convolution sizes must fit in 32 bits");
  }
  if (h + 2 * pad < kh || w + 2 * pad < kw) {
    return InvalidArgumentError("baseline.settings: the filter (" + std::to_string(kh) + "×" + std::to_string(kw) +
                                ") is larger than the padded input (" + std::to_string(h + 2 * pad) + "×" +
                                std::to_string(w + 2 * pad) + ")");
  }
  int64_t oh = (h + 2 * pad - kh) / stride + 1, ow = (w + 2 * pad - kw) / stride + 1;
  for (std::string_view key : {"x", "weight", "bias", "y"}) {
    KSEARCH_RETURN_IF_ERROR(CheckDType(p, b, key, {DType::kF32}));
  }
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "x", n * c * h * w, "batch × in_channels × height × width"));
  KSEARCH_RETURN_IF_ERROR(
      CheckCount(p, b, "weight", oc * c * kh * kw, "out_channels × in_channels × kernel_h × kernel_w"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "bias", oc, "out_channels"));
  if (b.Choice("pool") == "none") {
    if (b.Size("pool_kernel") || b.Size("pool_stride")) {
      return InvalidArgumentError("baseline.settings: pool_kernel and pool_stride need \"pool\": \"max\"");
    }
    return CheckCount(p, b, "y", n * oc * oh * ow,
                      "batch × out_channels × " + std::to_string(oh) + " × " + std::to_string(ow) +
                          " (the convolution's output)");
  }
  int64_t pk = b.Size("pool_kernel"), ps = b.Size("pool_stride");
  if (!pk || !ps) return InvalidArgumentError("baseline.settings: \"pool\": \"max\" needs pool_kernel and pool_stride");
  if (pk > oh || pk > ow) {
    return InvalidArgumentError("baseline.settings.pool_kernel: " + std::to_string(pk) +
                                " is larger than the convolution's output (" + std::to_string(oh) + "×" +
                                std::to_string(ow) + ")");
  }
  int64_t ph = (oh - pk) / ps + 1, pw = (ow - pk) / ps + 1;
  return CheckCount(p, b, "y", n * oc * ph * pw,
                    "batch × out_channels × " + std::to_string(ph) + " × " + std::to_string(pw) +
                        " (the pooled output)");
}

// Scaled dot-product attention: q [batch, seq_q, heads, head_dim], k and v
// [batch, seq_kv, heads, head_dim], o like q; one half type throughout.
std::vector<BaselineSetting> SdpaKeys() {
  return {TensorKey("q", TensorRole::kInput),  TensorKey("k", TensorRole::kInput), TensorKey("v", TensorRole::kInput),
          TensorKey("o", TensorRole::kOutput), SizeKey("batch"),                   SizeKey("heads"),
          SizeKey("seq_q"),                    SizeKey("seq_kv"),                  SizeKey("head_dim"),
          ChoiceKey("causal", {"bottom_right", "top_left", "none"})};
}

// The largest head size cuDNN's fused attention engines take for bf16/fp16
// (Hopper and later); it must also be a multiple of 8 (16-byte rows).
constexpr int64_t kSdpaMaxHeadDim = 256;

Status CheckSdpa(const Problem& p, const BaselineBinding& b) {
  int64_t batch = b.Size("batch"), heads = b.Size("heads"), sq = b.Size("seq_q"), skv = b.Size("seq_kv"),
          d = b.Size("head_dim");
  for (int64_t v : {batch, heads, sq, skv, d}) {
    if (v > INT32_MAX) return InvalidArgumentError("baseline.settings: attention sizes must fit in 32 bits");
  }
  if (d % 8 != 0 || d > kSdpaMaxHeadDim) {
    return InvalidArgumentError("baseline.settings.head_dim: " + std::to_string(d) +
                                "; cudnn_sdpa needs a multiple of 8 no larger than " +
                                std::to_string(kSdpaMaxHeadDim));
  }
  if (b.Choice("causal") == "bottom_right" && sq > skv) {
    return InvalidArgumentError("baseline.settings.causal: \"bottom_right\" with seq_q = " + std::to_string(sq) +
                                " > seq_kv = " + std::to_string(skv) +
                                " leaves the first queries no key to attend (cuDNN refuses it)");
  }
  KSEARCH_RETURN_IF_ERROR(CheckDType(p, b, "q", {DType::kBF16, DType::kF16}));
  DType half = p.tensors[static_cast<size_t>(b.Tensor("q"))].dtype;
  for (std::string_view key : {"k", "v", "o"}) KSEARCH_RETURN_IF_ERROR(CheckDType(p, b, key, {half}));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "q", batch * sq * heads * d, "batch × seq_q × heads × head_dim"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "k", batch * skv * heads * d, "batch × seq_kv × heads × head_dim"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "v", batch * skv * heads * d, "batch × seq_kv × heads × head_dim"));
  return CheckCount(p, b, "o", batch * sq * heads * d, "batch × seq_q × heads × head_dim");
}

// A cuBLASLt GEMM followed by one elementwise launch (baselines/gemm_sequence.h):
// a[m, k] and b[rows, k] (nn.Linear's weight) in bf16, the GEMM's output
// kept in the `intermediate` type. Every sequence names its own outputs.
std::vector<BaselineSetting> SequenceKeys(std::vector<BaselineSetting> own) {
  std::vector<BaselineSetting> keys = {TensorKey("a", TensorRole::kInput), TensorKey("b", TensorRole::kInput)};
  keys.insert(keys.end(), own.begin(), own.end());
  keys.push_back(ChoiceKey("intermediate", {"f32", "bf16"}));
  return keys;
}

Status CheckSizes32(const BaselineBinding& b, std::initializer_list<std::string_view> keys) {
  for (std::string_view key : keys) {
    if (b.Size(key) > INT32_MAX) return InvalidArgumentError(Field(key) + ": GEMM sizes must fit in 32 bits");
  }
  return Status::Ok();
}

Status CheckBf16(const Problem& p, const BaselineBinding& b, std::initializer_list<std::string_view> keys) {
  for (std::string_view key : keys) KSEARCH_RETURN_IF_ERROR(CheckDType(p, b, key, {DType::kBF16}));
  return Status::Ok();
}

// c[m, n] = silu(h[:, :n]) · h[:, n:] with h = a · bᵀ, b [2n, k] (gate rows first).
Status CheckSwigluSequence(const Problem& p, const BaselineBinding& b) {
  int64_t m = b.Size("m"), n = b.Size("n"), k = b.Size("k");
  KSEARCH_RETURN_IF_ERROR(CheckSizes32(b, {"m", "n", "k"}));
  if (2 * n > INT32_MAX) return InvalidArgumentError(Field("n") + ": 2 × n must fit in 32 bits");
  KSEARCH_RETURN_IF_ERROR(CheckBf16(p, b, {"a", "b", "c"}));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "a", m * k, "m × k"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "b", 2 * n * k, "2n × k (gate rows, then up rows)"));
  return CheckCount(p, b, "c", m * n, "m × n");
}

// c[m, n] = a · bᵀ + r, b [n, k].
Status CheckResidualSequence(const Problem& p, const BaselineBinding& b) {
  int64_t m = b.Size("m"), n = b.Size("n"), k = b.Size("k");
  KSEARCH_RETURN_IF_ERROR(CheckSizes32(b, {"m", "n", "k"}));
  KSEARCH_RETURN_IF_ERROR(CheckBf16(p, b, {"a", "b", "r", "c"}));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "a", m * k, "m × k"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "b", n * k, "n × k"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "r", m * n, "m × n"));
  return CheckCount(p, b, "c", m * n, "m × n");
}

// t = a · bᵀ, b [(heads + 2 kv_heads) · head_dim, k]; q, key rotated (rotate
// half, cos and sin [m, head_dim / 2] f32), value copied.
Status CheckRopeSequence(const Problem& p, const BaselineBinding& b) {
  int64_t m = b.Size("m"), k = b.Size("k"), heads = b.Size("heads"), kv = b.Size("kv_heads"),
          d = b.Size("head_dim");
  KSEARCH_RETURN_IF_ERROR(CheckSizes32(b, {"m", "k", "heads", "kv_heads", "head_dim"}));
  if (d % 2 != 0) {
    return InvalidArgumentError(Field("head_dim") + ": " + std::to_string(d) +
                                " is odd; rotate-half pairs element i with i + head_dim / 2");
  }
  const int64_t rows = (heads + 2 * kv) * d;
  if (rows > INT32_MAX) {
    return InvalidArgumentError("baseline.settings: (heads + 2 × kv_heads) × head_dim must fit in 32 bits");
  }
  KSEARCH_RETURN_IF_ERROR(CheckBf16(p, b, {"a", "b", "q", "key", "value"}));
  KSEARCH_RETURN_IF_ERROR(CheckDType(p, b, "cos", {DType::kF32}));
  KSEARCH_RETURN_IF_ERROR(CheckDType(p, b, "sin", {DType::kF32}));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "a", m * k, "m × k"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "b", rows * k, "(heads + 2 × kv_heads) × head_dim × k"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "cos", m * (d / 2), "m × head_dim / 2"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "sin", m * (d / 2), "m × head_dim / 2"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "q", m * heads * d, "m × heads × head_dim"));
  KSEARCH_RETURN_IF_ERROR(CheckCount(p, b, "key", m * kv * d, "m × kv_heads × head_dim"));
  return CheckCount(p, b, "value", m * kv * d, "m × kv_heads × head_dim");
}

}  // namespace

const std::vector<BaselineLibrary>& BaselineLibraries() {
  static const std::vector<BaselineLibrary> libraries = [] {
    std::vector<BaselineLibrary> l;
    l.push_back({"cublas_sgemm", "cuBLAS SGEMM (TF32 off): row-major c[m,n] = a[m,k] · b[k,n], f32", GemmKeys(),
                 CheckGemm});
    std::vector<BaselineSetting> lt_keys = GemmKeys();
    lt_keys.push_back(ChoiceKey("b_layout", {"kn", "nk"}));
    l.push_back({"cublaslt_gemm",
                 "cuBLASLt GEMM with fp32 accumulation: row-major c[m,n] = a[m,k] · b[k,n] (b stored k×n, "
                 "b_layout \"kn\", the default) or c[m,n] = a[m,k] · b[n,k]ᵀ (b stored n×k as nn.Linear's "
                 "weight, b_layout \"nk\"), a and b bf16 or f16, c the same type or f32",
                 std::move(lt_keys), CheckGemm});
    l.push_back({"cudnn_conv_fwd",
                 "cuDNN fp32 2-D convolution (NCHW, cross-correlation, FMA math) + bias, optionally fused "
                 "with ReLU, then optionally max pooling",
                 {TensorKey("x", TensorRole::kInput), TensorKey("weight", TensorRole::kInput),
                  TensorKey("bias", TensorRole::kInput), TensorKey("y", TensorRole::kOutput), SizeKey("batch"),
                  SizeKey("in_channels"), SizeKey("height"), SizeKey("width"), SizeKey("out_channels"),
                  SizeKey("kernel_h"), SizeKey("kernel_w"), SizeKey("stride", "1"), SizeKey("padding", "0"),
                  ChoiceKey("activation", {"none", "relu"}), ChoiceKey("pool", {"none", "max"}),
                  OptionalSizeKey("pool_kernel"), OptionalSizeKey("pool_stride")},
                 CheckConv});
    l.push_back({"cudnn_sdpa",
                 "cuDNN fused flash attention (graph API), bf16 or f16: o = softmax(q·kᵀ / sqrt(head_dim), "
                 "causal mask) · v, q/k/v/o laid out [batch, seq, heads, head_dim], fp32 softmax and accumulation",
                 SdpaKeys(), CheckSdpa});
    l.push_back({"cublaslt_gemm+swiglu",
                 "cuBLASLt GEMM h[m,2n] = a[m,k] · b[2n,k]ᵀ (b: gate rows, then up rows), then one elementwise "
                 "launch c[i][j] = silu(h[i][j]) · h[i][n + j]; h kept in the intermediate type; all bf16",
                 SequenceKeys({TensorKey("c", TensorRole::kOutput), SizeKey("m"), SizeKey("n"), SizeKey("k")}),
                 CheckSwigluSequence});
    l.push_back({"cublaslt_gemm+residual",
                 "cuBLASLt GEMM h[m,n] = a[m,k] · b[n,k]ᵀ, then one elementwise launch c = h + r; h kept in the "
                 "intermediate type; all bf16",
                 SequenceKeys({TensorKey("r", TensorRole::kInput), TensorKey("c", TensorRole::kOutput), SizeKey("m"),
                               SizeKey("n"), SizeKey("k")}),
                 CheckResidualSequence});
    l.push_back({"cublaslt_gemm+rope",
                 "cuBLASLt GEMM t = a[m,k] · b[(heads + 2 kv_heads) · head_dim, k]ᵀ, then one elementwise launch "
                 "writing q and key rotated (rotate half, cos and sin [m, head_dim / 2] f32) and value; t kept in "
                 "the intermediate type; a, b and the outputs bf16",
                 SequenceKeys({TensorKey("cos", TensorRole::kInput), TensorKey("sin", TensorRole::kInput),
                               TensorKey("q", TensorRole::kOutput), TensorKey("key", TensorRole::kOutput),
                               TensorKey("value", TensorRole::kOutput), SizeKey("m"), SizeKey("k"),
                               SizeKey("heads"), SizeKey("kv_heads"), SizeKey("head_dim")}),
                 CheckRopeSequence});
    return l;
  }();
  return libraries;
}

const BaselineLibrary* FindBaselineLibrary(std::string_view name) {
  for (const BaselineLibrary& l : BaselineLibraries()) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

std::string BaselineLibraryNames() {
  std::string names;
  for (const BaselineLibrary& l : BaselineLibraries()) names += (names.empty() ? "" : ", ") + std::string(l.name);
  return names;
}

int BaselineBinding::Tensor(std::string_view key) const {
  for (const auto& [k, v] : tensors_) {
    if (k == key) return v;
  }
  return -1;
}

int64_t BaselineBinding::Size(std::string_view key) const {
  for (const auto& [k, v] : sizes_) {
    if (k == key) return v;
  }
  return 0;
}

std::string BaselineBinding::Choice(std::string_view key) const {
  for (const auto& [k, v] : choices_) {
    if (k == key) return v;
  }
  return "";
}

StatusOr<BaselineBinding> BindBaseline(const Problem& p) {
  BaselineBinding binding;
  if (p.baseline.library.empty()) {
    if (!p.baseline.settings.empty()) {
      return InvalidArgumentError("baseline.settings: given without a baseline.library");
    }
    return binding;
  }
  const BaselineLibrary* library = FindBaselineLibrary(p.baseline.library);
  if (!library) {
    return InvalidArgumentError("baseline.library: unknown baseline library \"" + p.baseline.library +
                                "\" (known: " + BaselineLibraryNames() + ")");
  }
  for (const auto& [key, value] : p.baseline.settings) {
    bool known = std::any_of(library->settings.begin(), library->settings.end(),
                             [&k = key](const BaselineSetting& s) { return s.key == k; });
    if (!known) {
      std::string keys;
      for (const BaselineSetting& s : library->settings) keys += (keys.empty() ? "" : ", ") + std::string(s.key);
      return InvalidArgumentError(Field(key) + ": unknown setting for " + p.baseline.library + " (known: " + keys +
                                  ")");
    }
  }
  for (const BaselineSetting& s : library->settings) {
    const std::string* given = nullptr;
    for (const auto& [key, value] : p.baseline.settings) {
      if (key == s.key) given = &value;
    }
    if (!given && s.required) {
      std::string what = s.kind == Kind::kTensor ? "a tensor name" : "an integer or an expression over the dims";
      return InvalidArgumentError(Field(s.key) + ": missing; " + p.baseline.library + " needs it (" + what + ")");
    }
    std::string value = given ? *given : std::string(s.fallback);
    switch (s.kind) {
      case Kind::kTensor: {
        if (!given) break;
        int index = -1;
        for (size_t i = 0; i < p.tensors.size(); ++i) {
          if (p.tensors[i].name == value) index = static_cast<int>(i);
        }
        if (index < 0) {
          std::string names;
          for (const TensorSpec& t : p.tensors) names += (names.empty() ? "" : ", ") + t.name;
          return InvalidArgumentError(Field(s.key) + ": '" + value + "' is not a tensor of the problem (tensors: " +
                                      names + ")");
        }
        if (p.tensors[static_cast<size_t>(index)].role != s.role) {
          return InvalidArgumentError(Field(s.key) + ": tensor '" + value + "' is an " +
                                      std::string(ToString(p.tensors[static_cast<size_t>(index)].role)) +
                                      "; the baseline needs an " + std::string(ToString(s.role)));
        }
        binding.tensors_.emplace_back(s.key, index);
        break;
      }
      case Kind::kSize: {
        if (value.empty()) break;
        auto v = EvaluateExpression(value, p.dims);
        if (!v.ok()) return InvalidArgumentError(Field(s.key) + ": " + v.status().message());
        if (*v <= 0) {
          return InvalidArgumentError(Field(s.key) + ": '" + value + "' = " + std::to_string(*v) +
                                      " (must be positive)");
        }
        binding.sizes_.emplace_back(s.key, *v);
        break;
      }
      case Kind::kChoice: {
        if (std::find(s.choices.begin(), s.choices.end(), value) == s.choices.end()) {
          std::string words;
          for (std::string_view c : s.choices) words += (words.empty() ? "\"" : ", \"") + std::string(c) + "\"";
          return InvalidArgumentError(Field(s.key) + ": expected one of " + words + ", got \"" + value + "\"");
        }
        binding.choices_.emplace_back(s.key, value);
        break;
      }
    }
  }
  return binding;
}

Status CheckBaselineShapes(const Problem& p, const BaselineBinding& binding) {
  if (p.baseline.library.empty()) return Status::Ok();
  const BaselineLibrary* library = FindBaselineLibrary(p.baseline.library);
  if (!library) {
    return InvalidArgumentError("baseline.library: unknown baseline library \"" + p.baseline.library + "\"");
  }
  return library->check_shapes(p, binding);
}

}  // namespace ksearch::internal
