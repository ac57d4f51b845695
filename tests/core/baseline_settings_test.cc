// baseline.settings: how a problem binds a vendor baseline to its own tensors
// and dims (docs/problems.md "The baseline"), and the errors a wrong binding
// gets when the problem is loaded, without a GPU.
#include <gtest/gtest.h>

#include "core/baseline_settings.h"
#include "ksearch/problem.h"
#include "test_util.h"

namespace ksearch {
namespace {

using internal::BindBaseline;
using testing::TempDir;

// A GEMM problem whose tensors and dims are not named A/B/C or M/N/K: the
// binding comes from the settings alone.
std::string GemmJson(const std::string& dtype, const std::string& baseline) {
  const std::string plan = R"({"launches": [{"kernel": "k", "grid": [1, 1, 1], "block": [32, 1, 1],
      "args": ["act", "wt", "out", "tokens:i32"]}]})";
  return R"({"name": "gemm", "dims": {"tokens": 64, "hidden": 128, "ff": 32},
    "tensors": [{"name": "act", "dtype": ")" + dtype + R"(", "shape": ["tokens", "hidden"], "role": "input"},
                {"name": "wt", "dtype": ")" + dtype + R"(", "shape": ["hidden", "ff"], "role": "input"},
                {"name": "out", "dtype": ")" + dtype + R"(", "shape": ["tokens", "ff"], "role": "output"}],
    "flops": "2 * tokens * hidden * ff", "bytes": 1, "tolerance": {"policy": "relaxed"},
    "reference": {"source_text": "extern \"C\" __global__ void k() {}", "plan": )" + plan + R"(},
    "baseline": )" + baseline + "}";
}

const char kLtBinding[] = R"({"library": "cublaslt_gemm",
    "settings": {"a": "act", "b": "wt", "c": "out", "m": "tokens", "n": "ff", "k": "hidden"}})";

StatusOr<Problem> Parse(const std::string& json) { return Problem::FromJson(json, "", "p.json"); }

std::string ErrorOf(const std::string& json) {
  auto p = Parse(json);
  EXPECT_FALSE(p.ok()) << "loaded: " << json;
  return p.ok() ? "" : p.status().message();
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(BaselineSettings, BindTensorsAndDimsByTheNamesTheProblemGives) {
  auto p = Parse(GemmJson("bf16", kLtBinding));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto b = BindBaseline(*p);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->Tensor("a"), 0);
  EXPECT_EQ(b->Tensor("b"), 1);
  EXPECT_EQ(b->Tensor("c"), 2);
  EXPECT_EQ(b->Size("m"), 64);
  EXPECT_EQ(b->Size("n"), 32);
  EXPECT_EQ(b->Size("k"), 128);
}

TEST(BaselineSettings, SizesAreExpressionsAndFollowNewDims) {
  auto p = Parse(GemmJson("f16", Replace(kLtBinding, R"("k": "hidden")", R"("k": "2 * ff * 2")")));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(BindBaseline(*p)->Size("k"), 128);
  auto smaller = p->WithDims({{"tokens", 7}});
  ASSERT_TRUE(smaller.ok()) << smaller.status().ToString();
  EXPECT_EQ(BindBaseline(*smaller)->Size("m"), 7);
  // A dim the binding reads in two places must stay consistent with the shapes.
  auto broken = p->WithDims({{"ff", 16}});
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("baseline.settings.a: tensor 'act' has 8192 elements"), std::string::npos)
      << broken.status().message();
}

// A library writes its output without reading it and never writes its
// inputs: an inout tensor binds to neither.
TEST(BaselineSettings, InoutTensorsBindToNoInputOrOutputKey) {
  const std::pair<const char*, const char*> cases[] = {
      {R"(["tokens", "ff"], "role": "output")", "baseline.settings.c: tensor 'out' is an inout; the baseline needs an output"},
      {R"(["tokens", "hidden"], "role": "input")", "baseline.settings.a: tensor 'act' is an inout; the baseline needs an input"}};
  for (const auto& [tensor, expected] : cases) {
    std::string role = tensor;
    role.replace(role.find("\"role\": ") + 8, std::string::npos, "\"inout\"");
    std::string message = ErrorOf(Replace(GemmJson("bf16", kLtBinding), tensor, role));
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  }
}

TEST(BaselineSettings, RoundTripAndEnterTheFingerprint) {
  auto p = Parse(GemmJson("bf16", kLtBinding));
  ASSERT_TRUE(p.ok());
  auto q = Problem::FromJson(p->ToJson(), "", "again");
  ASSERT_TRUE(q.ok()) << q.status().ToString();
  EXPECT_EQ(q->baseline, p->baseline);
  EXPECT_EQ(q->Fingerprint(), p->Fingerprint());
  auto r = Parse(GemmJson("bf16", R"({"library": "cublaslt_gemm",
      "settings": {"a": "act", "b": "wt", "c": "out", "m": "tokens", "n": "ff", "k": "4 * ff"}})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->Fingerprint(), p->Fingerprint()) << "the fingerprint covers the baseline's settings";
}

TEST(BaselineSettings, ErrorsNameTheSettingAndTheValue) {
  struct Case {
    std::string dtype;
    std::string baseline;
    std::string expected;
  } cases[] = {
      {"bf16", R"({"library": "cublas_hgemm"})",
       "baseline.library: unknown baseline library \"cublas_hgemm\" (known: cublas_sgemm, cublaslt_gemm, "
       "cudnn_conv_fwd, cudnn_sdpa, cublaslt_gemm+swiglu, cublaslt_gemm+residual, cublaslt_gemm+rope)"},
      {"bf16", Replace(kLtBinding, R"("k": "hidden")", R"("kk": "hidden")"),
       "baseline.settings.kk: unknown setting for cublaslt_gemm (known: a, b, c, m, n, k"},
      {"bf16", Replace(kLtBinding, R"(, "k": "hidden")", ""),
       "baseline.settings.k: missing; cublaslt_gemm needs it (an integer or an expression over the dims)"},
      {"bf16", Replace(kLtBinding, R"("a": "act")", R"("a": "A")"),
       "baseline.settings.a: 'A' is not a tensor of the problem (tensors: act, wt, out)"},
      {"bf16", Replace(kLtBinding, R"("c": "out")", R"("c": "wt")"),
       "baseline.settings.c: tensor 'wt' is an input; the baseline needs an output"},
      {"bf16", Replace(kLtBinding, R"("m": "tokens")", R"("m": "tokenz")"),
       "baseline.settings.m: expression 'tokenz': unknown name 'tokenz'"},
      {"bf16", Replace(kLtBinding, R"("m": "tokens")", R"("m": "tokens - 64")"),
       "baseline.settings.m: 'tokens - 64' = 0 (must be positive)"},
      {"bf16", Replace(kLtBinding, R"("m": "tokens")", R"("m": 32)"),
       "baseline.settings.a: tensor 'act' has 8192 elements, but the baseline reads it as m × k = 4096"},
      {"bf16", Replace(kLtBinding, R"("m": "tokens")", R"("m": ["tokens"])"),
       "baseline.settings.m: expected a tensor name, an integer, an expression over the dims or a word"},
      {"f32", kLtBinding, "baseline.settings.a: tensor 'act' is f32; cublaslt_gemm needs bf16 or f16"},
      {"bf16", Replace(kLtBinding, "cublaslt_gemm", "cublas_sgemm"),
       "baseline.settings.a: tensor 'act' is bf16; cublas_sgemm needs f32"},
      {"bf16", R"({"library": "", "settings": {"a": "act"}})", "baseline.settings: given without a baseline.library"},
  };
  for (const Case& c : cases) {
    std::string message = ErrorOf(GemmJson(c.dtype, c.baseline));
    EXPECT_NE(message.find(c.expected), std::string::npos) << "got: " << message << "\nexpected: " << c.expected;
    EXPECT_NE(message.find("p.json"), std::string::npos) << "no file named: " << message;
  }
}

TEST(BaselineSettings, HalfGemmNeedsMatchingInputTypes) {
  std::string json = Replace(GemmJson("bf16", kLtBinding), R"("name": "wt", "dtype": "bf16")",
                             R"("name": "wt", "dtype": "f16")");
  EXPECT_NE(ErrorOf(json).find("baseline.settings.b: tensor 'wt' is f16; cublaslt_gemm needs bf16"),
            std::string::npos)
      << ErrorOf(json);
  std::string f32_out = Replace(GemmJson("bf16", kLtBinding), R"("name": "out", "dtype": "bf16")",
                                R"("name": "out", "dtype": "f32")");
  EXPECT_TRUE(Parse(f32_out).ok()) << Parse(f32_out).status().ToString();
}

// b_layout says how cublaslt_gemm reads b: "kn" (the default, b[k][n]) or
// "nk" (b[n][k], nn.Linear's weight, c = a·bᵀ). Any other word, or the key on
// a library that has no such setting, is refused naming the field.
TEST(BaselineSettings, CublasLtBLayoutIsAChoiceWithKnAsDefault) {
  auto plain = Parse(GemmJson("bf16", kLtBinding));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(BindBaseline(*plain)->Choice("b_layout"), "kn");
  auto nk = Parse(GemmJson("bf16", Replace(kLtBinding, R"("k": "hidden")", R"("k": "hidden", "b_layout": "nk")")));
  ASSERT_TRUE(nk.ok()) << nk.status().ToString();
  EXPECT_EQ(BindBaseline(*nk)->Choice("b_layout"), "nk");
  EXPECT_NE(nk->Fingerprint(), plain->Fingerprint()) << "the layout changes what the baseline computes";
  auto again = Problem::FromJson(nk->ToJson(), "", "again");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(BindBaseline(*again)->Choice("b_layout"), "nk");

  std::string bad = ErrorOf(GemmJson("bf16", Replace(kLtBinding, R"("k": "hidden")", R"("k": "hidden", "b_layout": "nt")")));
  EXPECT_NE(bad.find(R"(baseline.settings.b_layout: expected one of "kn", "nk", got "nt")"), std::string::npos) << bad;
  EXPECT_NE(bad.find("p.json"), std::string::npos) << bad;
  std::string sgemm = ErrorOf(GemmJson(
      "f32", Replace(Replace(kLtBinding, "cublaslt_gemm", "cublas_sgemm"), R"("k": "hidden")",
                     R"("k": "hidden", "b_layout": "nk")")));
  EXPECT_NE(sgemm.find("baseline.settings.b_layout: unknown setting for cublas_sgemm"), std::string::npos) << sgemm;
}

TEST(BaselineSettings, CublasLtBLayoutNamesTheTransposedCountOfB) {
  // a matches (m × k = 64 × 128) but b is 128 × 16 = 2048 elements, not n × k = 32 × 128.
  std::string json = Replace(GemmJson("bf16", Replace(kLtBinding, R"("k": "hidden")", R"("k": "hidden", "b_layout": "nk")")),
                             R"("shape": ["hidden", "ff"])", R"("shape": ["hidden", 16])");
  std::string message = ErrorOf(json);
  EXPECT_NE(message.find("baseline.settings.b: tensor 'wt' has 2048 elements, but the baseline reads it as n × k = 4096"),
            std::string::npos)
      << message;
}

// The built-in problems bind their baselines through settings only.
TEST(BaselineSettings, BuiltinProblemsBindTheirBaselines) {
  struct Want {
    const char* problem;
    const char* library;
  } wants[] = {{"matmul", "cublas_sgemm"}, {"conv2d", "cudnn_conv_fwd"}, {"conv2d_relu_maxpool", "cudnn_conv_fwd"}};
  for (const Want& w : wants) {
    auto p = LoadProblem(w.problem);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->baseline.library, w.library);
    auto b = BindBaseline(*p);
    ASSERT_TRUE(b.ok()) << w.problem << ": " << b.status().ToString();
    ASSERT_TRUE(internal::CheckBaselineShapes(*p, *b).ok());
  }
  auto fused = LoadProblem("conv2d_relu_maxpool");
  auto b = BindBaseline(*fused);
  EXPECT_EQ(b->Choice("activation"), "relu");
  EXPECT_EQ(b->Choice("pool"), "max");
  EXPECT_EQ(b->Size("pool_kernel"), 3);
  EXPECT_EQ(b->Size("stride"), 4);
  auto plain = LoadProblem("conv2d");
  EXPECT_EQ(BindBaseline(*plain)->Choice("activation"), "none");
}

TEST(BaselineSettings, ConvolutionShapesAreChecked) {
  auto p = LoadProblem("conv2d_relu_maxpool");
  ASSERT_TRUE(p.ok());
  auto set = [&](const std::string& key, const std::string& value) {
    Problem q = *p;
    bool found = false;
    for (auto& [k, v] : q.baseline.settings) {
      if (k == key) v = value, found = true;
    }
    if (!found) q.baseline.settings.emplace_back(key, value);
    Status s = q.Validate();
    EXPECT_FALSE(s.ok()) << key << "=" << value;
    return s.message();
  };
  EXPECT_NE(set("padding", "10").find("baseline.settings.y: tensor 'y' has 6998400 elements, but the baseline reads "
                                     "it as batch × out_channels × 29 × 29 (the pooled output)"),
            std::string::npos)
      << set("padding", "10");
  EXPECT_NE(set("pool", "min").find("baseline.settings.pool: expected one of \"none\", \"max\", got \"min\""),
            std::string::npos);
  EXPECT_NE(set("pool", "none").find("pool_kernel and pool_stride need \"pool\": \"max\""), std::string::npos);
  EXPECT_NE(set("pool_kernel", "60").find("baseline.settings.pool_kernel: 60 is larger than the convolution's output"),
            std::string::npos);
  EXPECT_NE(set("kernel_h", "300").find("is larger than the padded input"), std::string::npos);
  EXPECT_NE(set("bias", "weight").find("baseline.settings.bias: tensor 'weight' has 34848 elements"),
            std::string::npos);
}

// ---------------------------------------------------------------------------
// cudnn_sdpa

// An attention problem whose tensors and dims are not named like the
// settings: q [batch, tokens, heads, dim], k and v [batch, ctx, heads, dim].
std::string AttentionJson(const std::string& baseline, const std::string& dims = R"("n": 2, "tokens": 64,
    "ctx": 128, "heads": 4, "dim": 64)", const std::string& q_dtype = "bf16", const std::string& k_dtype = "bf16") {
  const std::string plan = R"({"launches": [{"kernel": "k", "grid": [1, 1, 1], "block": [32, 1, 1],
      "args": ["query", "key", "value", "out"]}]})";
  return R"({"name": "attn", "dims": {)" + dims + R"(},
    "tensors": [{"name": "query", "dtype": ")" + q_dtype + R"(", "shape": ["n", "tokens", "heads", "dim"], "role": "input"},
                {"name": "key", "dtype": ")" + k_dtype + R"(", "shape": ["n", "ctx", "heads", "dim"], "role": "input"},
                {"name": "value", "dtype": ")" + q_dtype + R"(", "shape": ["n", "ctx", "heads", "dim"], "role": "input"},
                {"name": "out", "dtype": ")" + q_dtype + R"(", "shape": ["n", "tokens", "heads", "dim"], "role": "output"}],
    "flops": "4 * n * heads * tokens * ctx * dim", "bytes": 1, "tolerance": {"policy": "relaxed"},
    "reference": {"source_text": "extern \"C\" __global__ void k() {}", "plan": )" + plan + R"(},
    "baseline": )" + baseline + "}";
}

const char kSdpaBinding[] = R"({"library": "cudnn_sdpa",
    "settings": {"q": "query", "k": "key", "v": "value", "o": "out", "batch": "n", "heads": "heads",
                 "seq_q": "tokens", "seq_kv": "ctx", "head_dim": "dim"}})";

TEST(SdpaSettings, BindTensorsAndSizesByTheNamesTheProblemGives) {
  auto p = Parse(AttentionJson(kSdpaBinding));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto b = BindBaseline(*p);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->Tensor("q"), 0);
  EXPECT_EQ(b->Tensor("k"), 1);
  EXPECT_EQ(b->Tensor("v"), 2);
  EXPECT_EQ(b->Tensor("o"), 3);
  EXPECT_EQ(b->Size("batch"), 2);
  EXPECT_EQ(b->Size("heads"), 4);
  EXPECT_EQ(b->Size("seq_q"), 64);
  EXPECT_EQ(b->Size("seq_kv"), 128);
  EXPECT_EQ(b->Size("head_dim"), 64);
  EXPECT_EQ(b->Choice("causal"), "bottom_right") << "the default mask is the problem contract's";
  EXPECT_TRUE(internal::CheckBaselineShapes(*p, *b).ok());
  // The other masks, and fp16 throughout.
  for (const char* causal : {"top_left", "none"}) {
    auto q = Parse(AttentionJson(Replace(kSdpaBinding, R"("head_dim": "dim")",
                                         std::string(R"("head_dim": "dim", "causal": ")") + causal + "\"")));
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_EQ(BindBaseline(*q)->Choice("causal"), causal);
  }
  auto f16 = Parse(AttentionJson(kSdpaBinding, R"("n": 2, "tokens": 64, "ctx": 128, "heads": 4, "dim": 64)", "f16", "f16"));
  EXPECT_TRUE(f16.ok()) << f16.status().ToString();
  // A shrunk problem keeps a consistent binding.
  auto smaller = p->WithDims({{"tokens", 1}, {"ctx", 7}});
  ASSERT_TRUE(smaller.ok()) << smaller.status().ToString();
  EXPECT_EQ(BindBaseline(*smaller)->Size("seq_kv"), 7);
}

TEST(SdpaSettings, ErrorsNameTheSettingAndTheValue) {
  const std::string dims = R"("n": 2, "tokens": 64, "ctx": 128, "heads": 4, "dim": 64)";
  struct Case {
    std::string json;
    std::string expected;
  } cases[] = {
      {AttentionJson(Replace(kSdpaBinding, R"(, "heads": "heads")", "")),
       "baseline.settings.heads: missing; cudnn_sdpa needs it (an integer or an expression over the dims)"},
      {AttentionJson(Replace(kSdpaBinding, R"("head_dim": "dim")", R"("head_dim": "dim", "scale": "dim")")),
       "baseline.settings.scale: unknown setting for cudnn_sdpa (known: q, k, v, o, batch, heads, seq_q, seq_kv, "
       "head_dim, causal)"},
      {AttentionJson(Replace(kSdpaBinding, R"("o": "out")", R"("o": "value")")),
       "baseline.settings.o: tensor 'value' is an input; the baseline needs an output"},
      {AttentionJson(Replace(kSdpaBinding, R"("head_dim": "dim")", R"("head_dim": "dim", "causal": "diagonal")")),
       "baseline.settings.causal: expected one of \"bottom_right\", \"top_left\", \"none\", got \"diagonal\""},
      // Sizes that contradict the tensors: each tensor is named with both counts.
      {AttentionJson(Replace(kSdpaBinding, R"("seq_kv": "ctx")", R"("seq_kv": "tokens")")),
       "baseline.settings.k: tensor 'key' has 65536 elements, but the baseline reads it as batch × seq_kv × heads × "
       "head_dim = 32768"},
      {AttentionJson(Replace(kSdpaBinding, R"("batch": "n")", R"("batch": 1)")),
       "baseline.settings.q: tensor 'query' has 32768 elements, but the baseline reads it as batch × seq_q × heads × "
       "head_dim = 16384"},
      {AttentionJson(Replace(kSdpaBinding, R"("v": "value")", R"("v": "query")")),
       "baseline.settings.v: tensor 'query' has 32768 elements, but the baseline reads it as batch × seq_kv × heads "
       "× head_dim = 65536"},
      {AttentionJson(kSdpaBinding, R"("n": 2, "tokens": 64, "ctx": 128, "heads": 4, "dim": 60)"),
       "baseline.settings.head_dim: 60; cudnn_sdpa needs a multiple of 8 no larger than 256"},
      {AttentionJson(kSdpaBinding, R"("n": 1, "tokens": 4, "ctx": 8, "heads": 1, "dim": 512)"),
       "baseline.settings.head_dim: 512; cudnn_sdpa needs a multiple of 8 no larger than 256"},
      {AttentionJson(kSdpaBinding, R"("n": 2, "tokens": 256, "ctx": 128, "heads": 4, "dim": 64)"),
       "baseline.settings.causal: \"bottom_right\" with seq_q = 256 > seq_kv = 128 leaves the first queries no key "
       "to attend"},
      {AttentionJson(kSdpaBinding, dims, "f32", "f32"), "baseline.settings.q: tensor 'query' is f32; cudnn_sdpa needs bf16 or f16"},
      {AttentionJson(kSdpaBinding, dims, "bf16", "f16"), "baseline.settings.k: tensor 'key' is f16; cudnn_sdpa needs bf16"},
      {AttentionJson(kSdpaBinding, dims, "f16", "bf16"), "baseline.settings.k: tensor 'key' is bf16; cudnn_sdpa needs f16"},
  };
  for (const Case& c : cases) {
    std::string message = ErrorOf(c.json);
    EXPECT_NE(message.find(c.expected), std::string::npos) << "got: " << message << "\nexpected: " << c.expected;
    EXPECT_NE(message.find("p.json"), std::string::npos) << "no file named: " << message;
  }
  // seq_q > seq_kv is fine where no mask is aligned bottom-right.
  for (const char* causal : {"top_left", "none"}) {
    auto p = Parse(AttentionJson(Replace(kSdpaBinding, R"("head_dim": "dim")",
                                         std::string(R"("head_dim": "dim", "causal": ")") + causal + "\""),
                                 R"("n": 2, "tokens": 256, "ctx": 128, "heads": 4, "dim": 64)"));
    EXPECT_TRUE(p.ok()) << causal << ": " << p.status().ToString();
  }
}

// The GPU tests' problem binds its baseline, and so does every shape they judge it at.
TEST(SdpaSettings, TheTestProblemBindsItsBaseline) {
  auto p = Problem::Load(testing::SourcePath("tests/eval/data/attention_small"));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->baseline.library, "cudnn_sdpa");
  for (const auto& dims : std::vector<std::vector<std::pair<std::string, int64_t>>>{
           {}, {{"SQ", 128}}, {{"B", 4}, {"H", 32}, {"SQ", 2048}, {"SKV", 2048}, {"D", 128}},
           {{"B", 1}, {"H", 32}, {"SQ", 8192}, {"SKV", 8192}, {"D", 128}}}) {
    auto q = p->WithDims(dims);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    auto b = BindBaseline(*q);
    ASSERT_TRUE(b.ok()) << b.status().ToString();
    EXPECT_TRUE(internal::CheckBaselineShapes(*q, *b).ok());
    EXPECT_EQ(b->Choice("causal"), "bottom_right");
  }
  auto wrong = p->WithDims({{"SQ", 512}});
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("seq_q = 512 > seq_kv = 256"), std::string::npos) << wrong.status().message();
}

// ---------------------------------------------------------------------------
// GEMM sequences: a cuBLASLt GEMM and one elementwise launch, bound like any
// baseline through settings.

// A fused SwiGLU projection whose tensors and dims have names of their own:
// act [tokens, hidden], wt [2 ff, hidden] (gate rows, then up rows), out
// [tokens, ff].
std::string SwigluJson(const std::string& baseline, const std::string& wt_rows = "2 * ff") {
  const std::string plan = R"({"launches": [{"kernel": "k", "grid": [1, 1, 1], "block": [32, 1, 1],
      "args": ["act", "wt", "out", "tokens:i32"]}]})";
  return R"({"name": "swiglu_gemm", "dims": {"tokens": 16, "hidden": 64, "ff": 32},
    "tensors": [{"name": "act", "dtype": "bf16", "shape": ["tokens", "hidden"], "role": "input"},
                {"name": "wt", "dtype": "bf16", "shape": [")" + wt_rows + R"(", "hidden"], "role": "input"},
                {"name": "out", "dtype": "bf16", "shape": ["tokens", "ff"], "role": "output"}],
    "flops": 1, "bytes": 1, "tolerance": {"policy": "relaxed"},
    "reference": {"source_text": "extern \"C\" __global__ void k() {}", "plan": )" + plan + R"(},
    "baseline": )" + baseline + "}";
}

const char kSwigluBinding[] = R"({"library": "cublaslt_gemm+swiglu",
    "settings": {"a": "act", "b": "wt", "c": "out", "m": "tokens", "n": "ff", "k": "hidden"}})";

TEST(GemmSequenceSettings, BindTheProblemsTensorsWithAnF32IntermediateByDefault) {
  auto p = Parse(SwigluJson(kSwigluBinding));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto b = BindBaseline(*p);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->Tensor("a"), 0);
  EXPECT_EQ(b->Tensor("b"), 1);
  EXPECT_EQ(b->Tensor("c"), 2);
  EXPECT_EQ(b->Size("n"), 32);
  EXPECT_EQ(b->Choice("intermediate"), "f32");
  auto bf16 = Parse(SwigluJson(Replace(kSwigluBinding, R"("k": "hidden")", R"("k": "hidden", "intermediate": "bf16")")));
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  EXPECT_EQ(BindBaseline(*bf16)->Choice("intermediate"), "bf16");
  EXPECT_NE(bf16->Fingerprint(), p->Fingerprint()) << "the intermediate type changes what the baseline computes";
}

TEST(GemmSequenceSettings, ErrorsNameTheSettingTheCountAndTheValue) {
  const std::pair<std::string, std::string> cases[] = {
      // The merged weight must hold the gate and the up rows.
      {SwigluJson(kSwigluBinding, "ff"),
       "baseline.settings.b: tensor 'wt' has 2048 elements, but the baseline reads it as 2n × k (gate rows, then up "
       "rows) = 4096"},
      {SwigluJson(Replace(kSwigluBinding, R"("k": "hidden")", R"("k": "hidden", "intermediate": "f16")")),
       R"(baseline.settings.intermediate: expected one of "f32", "bf16", got "f16")"},
      {SwigluJson(Replace(kSwigluBinding, R"("c": "out", )", "")),
       "baseline.settings.c: missing; cublaslt_gemm+swiglu needs it (a tensor name)"},
      {SwigluJson(Replace(kSwigluBinding, R"("c": "out")", R"("c": "out", "r": "act")")),
       "baseline.settings.r: unknown setting for cublaslt_gemm+swiglu (known: a, b, c, m, n, k, intermediate)"},
      {SwigluJson(Replace(kSwigluBinding, "cublaslt_gemm+swiglu", "cublaslt_gemm+residual")),
       "baseline.settings.r: missing; cublaslt_gemm+residual needs it (a tensor name)"},
  };
  for (const auto& [json, expected] : cases) {
    std::string message = ErrorOf(json);
    EXPECT_NE(message.find(expected), std::string::npos) << "got: " << message << "\nexpected: " << expected;
    EXPECT_NE(message.find("p.json"), std::string::npos) << "no file named: " << message;
  }
}

TEST(GemmSequenceSettings, ARopeSequenceChecksItsHeadsAndTables) {
  auto p = LoadProblem("linear_qkv_rope");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto b = BindBaseline(*p);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->Tensor("key"), 5);
  EXPECT_EQ(b->Size("kv_heads"), 8);
  auto set = [&](const std::string& key, const std::string& value) {
    Problem q = *p;
    for (auto& [k, v] : q.baseline.settings) {
      if (k == key) v = value;
    }
    Status s = q.Validate();
    EXPECT_FALSE(s.ok()) << key << "=" << value;
    return s.message();
  };
  EXPECT_NE(set("head_dim", "127").find("baseline.settings.head_dim: 127 is odd"), std::string::npos)
      << set("head_dim", "127");
  EXPECT_NE(set("kv_heads", "heads").find("baseline.settings.b: tensor 'W' has 25165824 elements, but the baseline "
                                          "reads it as (heads + 2 × kv_heads) × head_dim × k = 50331648"),
            std::string::npos)
      << set("kv_heads", "heads");
  EXPECT_NE(set("cos", "X").find("baseline.settings.cos: tensor 'X' is bf16; cublaslt_gemm+rope needs f32"),
            std::string::npos)
      << set("cos", "X");
  EXPECT_NE(set("value", "q").find("baseline.settings.value: tensor 'q' has 33554432 elements, but the baseline "
                                   "reads it as m × kv_heads × head_dim = 8388608"),
            std::string::npos)
      << set("value", "q");
}

// The fused built-in problems are judged against their unfused sequences,
// at every shape case.
TEST(GemmSequenceSettings, FusedBuiltinProblemsBindTheirSequences) {
  const std::pair<const char*, const char*> wants[] = {{"linear_swiglu", "cublaslt_gemm+swiglu"},
                                                       {"linear_residual", "cublaslt_gemm+residual"},
                                                       {"linear_qkv_rope", "cublaslt_gemm+rope"}};
  for (const auto& [name, library] : wants) {
    auto p = LoadProblem(name);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->baseline.library, library);
    for (size_t c = 0; c < p->shapes.size(); ++c) {
      auto at = p->AtCase(c);
      ASSERT_TRUE(at.ok()) << name << ": " << at.status().ToString();
      auto b = BindBaseline(*at);
      ASSERT_TRUE(b.ok()) << name << ": " << b.status().ToString();
      EXPECT_TRUE(internal::CheckBaselineShapes(*at, *b).ok()) << name << " case " << p->shapes[c].name;
      EXPECT_EQ(b->Choice("intermediate"), "f32") << name;
    }
  }
}

}  // namespace
}  // namespace ksearch
