// On a GPU: each built-in problem's starting kernel and template defaults pass
// the strict check at full size.
#include <gtest/gtest.h>

#include "ksearch/evaluator.h"
#include "ksearch/problem.h"
#include "test_util.h"

namespace ksearch {
namespace {

class BuiltinProblemOnGpu : public ::testing::TestWithParam<const char*> {};

TEST_P(BuiltinProblemOnGpu, StartingKernelAndTemplatesPassStrictCheck) {
  KSEARCH_REQUIRE_GPU();
  auto p = LoadProblem(GetParam());
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EvaluatorOptions options;
  options.max_timing_seconds = 0.5;
  options.seed = 11;
  auto evaluator = CreateLocalEvaluator(*p, options);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  std::vector<Candidate> kernels = {p->start.ToCandidate("start", "t")};
  for (const TemplateSpec& t : p->templates) kernels.push_back(t.kernel.ToCandidate("template:" + t.name, "t"));
  auto ref = (*evaluator)->reference_timing();
  auto base = (*evaluator)->baseline_timing();
  std::printf("%s: reference %.4f ms, baseline %.4f ms\n", GetParam(), ref ? ref->median_ms : -1.0,
              base ? base->median_ms : -1.0);
  for (const Evaluation& e : (*evaluator)->Evaluate(kernels)) {
    std::printf("%s %s", GetParam(), e.Report().c_str());
    EXPECT_EQ(e.status, EvalStatus::kOk) << GetParam() << " " << e.Report();
    // The vendor library (cuBLAS/cuDNN on the GPU host) is the baseline and
    // passed the strict check itself; its speedup ratio is sane.
    if (!p->baseline.library.empty() && e.speedup) {
      EXPECT_EQ(e.speedup->baseline, p->baseline.library) << e.speedup->baseline;
      EXPECT_GT(e.speedup->ratio, 0.01);
      EXPECT_LT(e.speedup->ratio, 100.0);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, BuiltinProblemOnGpu,
                         ::testing::Values("softmax", "layernorm", "matmul", "conv2d", "conv2d_relu_maxpool",
                                           "add_rmsnorm", "swiglu"));

}  // namespace
}  // namespace ksearch
