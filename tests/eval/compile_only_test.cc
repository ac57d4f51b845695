// The evaluator without a GPU: compile, resource report, plan checks; the
// evaluation says which checks did not run.
#include <gtest/gtest.h>

#include "ksearch/evaluator.h"
#include "test_util.h"

namespace ksearch {
namespace {

std::unique_ptr<Evaluator> CompileOnly(const Problem& problem) {
  EvaluatorOptions options;
  options.compile_only = true;
  options.arch = "sm_90";
  options.compile_cache_dir = "off";
  auto e = CreateLocalEvaluator(problem, options);
  EXPECT_TRUE(e.ok()) << e.status().ToString();
  return e.ok() ? std::move(*e) : nullptr;
}

Evaluation EvaluateOne(Evaluator& evaluator, const Candidate& c) {
  return evaluator.Evaluate(std::span<const Candidate>(&c, 1)).front();
}

TEST(CompileOnlyEvaluator, AcceptsTheStartingKernelAndListsSkippedChecks) {
  Problem problem = testing::RowSoftmaxProblem();
  auto evaluator = CompileOnly(problem);
  Evaluation e = EvaluateOne(*evaluator, problem.start.ToCandidate("start", "start"));
  EXPECT_EQ(e.status, EvalStatus::kCompiled) << e.Report();
  EXPECT_FALSE(e.checks_not_run.empty());
  EXPECT_NE(e.Report().find("not run: correctness"), std::string::npos) << e.Report();
  ASSERT_EQ(e.resources.size(), 1u);
  EXPECT_EQ(e.resources[0].kernel, "row_softmax");
  EXPECT_GT(e.resources[0].registers, 0);
  EXPECT_EQ(e.device.Arch(), "sm_90");
}

TEST(CompileOnlyEvaluator, ReportsCompileErrorsWithTheLog) {
  Problem problem = testing::RowSoftmaxProblem();
  auto evaluator = CompileOnly(problem);
  Candidate c = problem.start.ToCandidate("broken", "user");
  c.source += "\nthis is not CUDA;\n";
  Evaluation e = EvaluateOne(*evaluator, c);
  EXPECT_EQ(e.status, EvalStatus::kCompileError);
  EXPECT_NE(e.details.find("broken.cu"), std::string::npos) << e.details;
}

TEST(CompileOnlyEvaluator, RejectsPlansNamingMissingKernelsOrTensors) {
  Problem problem = testing::RowSoftmaxProblem();
  auto evaluator = CompileOnly(problem);
  Candidate c = problem.start.ToCandidate("wrong_name", "user");
  c.plan.launches[0].kernel = "softmax_rows";
  Evaluation e = EvaluateOne(*evaluator, c);
  EXPECT_EQ(e.status, EvalStatus::kInvalidPlan);
  EXPECT_NE(e.message.find("softmax_rows"), std::string::npos) << e.message;
  c = problem.start.ToCandidate("wrong_arg", "user");
  c.plan.launches[0].args[0] = "input";
  e = EvaluateOne(*evaluator, c);
  EXPECT_EQ(e.status, EvalStatus::kInvalidPlan);
  EXPECT_NE(e.message.find("'input' is not a tensor"), std::string::npos) << e.message;
}

TEST(CompileOnlyEvaluator, NeedsAnArchAndRejectsUnknownOnes) {
  Problem problem = testing::RowSoftmaxProblem();
  EvaluatorOptions options;
  options.compile_only = true;
  EXPECT_EQ(CreateLocalEvaluator(problem, options).status().code(), StatusCode::kInvalidArgument);
  options.arch = "sm_1";
  auto e = CreateLocalEvaluator(problem, options);
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("sm_90"), std::string::npos) << e.status().message();
}

TEST(CompileOnlyEvaluator, JudgesABatchInOrderAndHonorsCancel) {
  Problem problem = testing::RowSoftmaxProblem();
  auto evaluator = CompileOnly(problem);
  std::vector<Candidate> batch;
  for (int i = 0; i < 6; ++i) {
    Candidate c = problem.start.ToCandidate("c" + std::to_string(i), "user");
    if (i % 2) c.source += "\n#error odd\n";
    batch.push_back(c);
  }
  auto results = evaluator->Evaluate(batch);
  ASSERT_EQ(results.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(results[static_cast<size_t>(i)].candidate_id, "c" + std::to_string(i));
    EXPECT_EQ(results[static_cast<size_t>(i)].status, i % 2 ? EvalStatus::kCompileError : EvalStatus::kCompiled);
  }
  std::atomic<bool> cancel{true};
  results = evaluator->Evaluate(batch, &cancel);
  for (const Evaluation& e : results) EXPECT_EQ(e.status, EvalStatus::kCancelled);
}

TEST(Evaluator, WithoutADriverFailsWithOneLine) {
  std::string why;
  if (CudaDriverAvailable(&why)) GTEST_SKIP() << "a CUDA driver is present";
  auto e = CreateLocalEvaluator(testing::RowSoftmaxProblem(), EvaluatorOptions{});
  EXPECT_EQ(e.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(e.status().message().find("no CUDA driver found"), std::string::npos) << e.status().message();
}

}  // namespace
}  // namespace ksearch
