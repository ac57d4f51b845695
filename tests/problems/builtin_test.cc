// Every built-in problem loads, has a stable fingerprint and its kernels
// compile for sm_90 (no GPU needed).
#include <gtest/gtest.h>

#include <string_view>

#include "ksearch/evaluator.h"
#include "ksearch/problem.h"

namespace ksearch {
namespace {

const char* kBuiltins[] = {"matmul", "conv2d", "softmax", "layernorm", "conv2d_relu_maxpool",
                            "add_rmsnorm", "swiglu", "linear", "linear_swiglu", "linear_residual", "linear_qkv_rope",
                            "rmsnorm_bf16",
                            "attention", "attention_engine", "rope"};

TEST(BuiltinProblems, AllAreListed) {
  auto names = BuiltinProblemNames();
  for (const char* n : kBuiltins) {
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

class BuiltinProblem : public ::testing::TestWithParam<const char*> {};

TEST_P(BuiltinProblem, LoadsWithAStableFingerprint) {
  auto p = LoadProblem(GetParam());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto again = LoadProblem(GetParam());
  EXPECT_EQ(p->Fingerprint(), again->Fingerprint());
  auto round_trip = Problem::FromJson(p->ToJson(), "", "json");
  ASSERT_TRUE(round_trip.ok()) << round_trip.status().ToString();
  EXPECT_EQ(round_trip->Fingerprint(), p->Fingerprint());
  EXPECT_FALSE(p->description.empty());
  EXPECT_GT(*p->Flops(), 0.0);
  EXPECT_GT(*p->Bytes(), 0.0);
  // attention_engine is held to its library's accuracy (cuDNN rounds P to
  // bf16), every other built-in to plain fp32's.
  EXPECT_EQ(p->tolerance.policy, std::string_view(GetParam()) == "attention_engine" ? TolerancePolicy::kLibrary
                                                                                     : TolerancePolicy::kStrict);
}

TEST_P(BuiltinProblem, KernelsCompileForSm90) {
  auto p = LoadProblem(GetParam());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EvaluatorOptions options;
  options.compile_only = true;
  options.arch = "sm_90";
  auto evaluator = CreateLocalEvaluator(*p, options);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  std::vector<Candidate> kernels = {p->reference.ToCandidate("reference", "t"),
                                    p->reference_fp32.ToCandidate("reference_fp32", "t"),
                                    p->start.ToCandidate("start", "t")};
  for (const TemplateSpec& t : p->templates) kernels.push_back(t.kernel.ToCandidate("template:" + t.name, "t"));
  for (const Evaluation& e : (*evaluator)->Evaluate(kernels)) {
    EXPECT_EQ(e.status, EvalStatus::kCompiled) << GetParam() << " " << e.Report();
    // The plans were checked against the parameters read from the cubins.
    EXPECT_NE(e.message.find("kernels' parameters"), std::string::npos) << GetParam() << " " << e.Report();
  }
}

INSTANTIATE_TEST_SUITE_P(All, BuiltinProblem, ::testing::ValuesIn(kBuiltins));

}  // namespace
}  // namespace ksearch
