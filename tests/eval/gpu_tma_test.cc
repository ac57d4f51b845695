// Tensor-map plan arguments on a GPU: a kernel that fetches 32 x 32 tiles of
// x with cp.async.bulk.tensor through the map the judge encodes passes the
// strict check, including the boxes that hang past the tensor's last row and
// column (data/tma_tile, 100 x 72: TMA must fill those parts with zeros or
// the row sums are wrong). A map with NaN fill (wrong_result), a map over an
// output the kernel reads before writing (unwritten_output: the poison is
// copied) and a pointer kernel given a map (invalid_plan) are caught.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ksearch/evaluator.h"
#include "test_util.h"

namespace ksearch {
namespace {

std::string TmaProblemDir() { return testing::SourcePath("tests/eval/data/tma_tile"); }

class GpuTensorMap : public ::testing::Test {
 protected:
  void SetUp() override {
    KSEARCH_REQUIRE_GPU();
    auto p = Problem::Load(TmaProblemDir());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    problem_ = *p;
    auto e = CreateLocalEvaluator(problem_, testing::FastGpuOptions(21));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    evaluator_ = std::move(*e);
  }

  // The starting kernel with its first argument (the map over x) replaced.
  Evaluation Judge(const std::string& id, const std::string& first_arg, const std::string& source = "") {
    Candidate c = problem_.start.ToCandidate(id, "test");
    if (!source.empty()) c.source = source;
    if (!first_arg.empty()) {
      auto plan = LaunchPlan::FromJson(
          R"j({"params": {"BR": 32, "BC": 32}, "launches": [{"kernel": "tile_copy_tma",
              "grid": ["ceil_div(rows, BR)", 1, 1], "block": ["4 * BR", 1, 1],
              "args": [)j" + first_arg + R"(, "y", "s", "rows:i32", "cols:i32"]}]})",
          id);
      EXPECT_TRUE(plan.ok()) << plan.status().ToString();
      if (plan.ok()) c.plan = *plan;
    }
    Evaluation e = evaluator_->Evaluate(std::span<const Candidate>(&c, 1)).front();
    std::printf("[%s] %s", id.c_str(), e.Report().c_str());
    return e;
  }

  void ExpectNextPasses() {
    Evaluation e = Judge("after", "");
    EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report() << e.details;
  }

  Problem problem_;
  std::unique_ptr<Evaluator> evaluator_;
};

TEST_F(GpuTensorMap, TmaTilesPassTheStrictCheckWithBoxesPastTheEdge) {
  Evaluation e = Judge("tma", "");
  EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report() << e.details;
  EXPECT_TRUE(e.timing.has_value()) << e.Report();
  // The same map written as a view of x ([cols, rows] innermost first is
  // x's own shape) with L2 promotion runs alike.
  e = Judge("tma_view", R"({"tensor_map": "x", "dims": ["cols", "rows"], "box": ["BC", "BR"],
                            "l2_promotion": "128B"})");
  EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report() << e.details;
}

// With NaN fill the parts of the edge boxes past the tensor read as NaN and
// the row sums of the last column tile go NaN: proof that those elements
// are read, and that the default fill (zero) is what made them right.
TEST_F(GpuTensorMap, NanFillPastTheEdgeIsWrong) {
  Evaluation e = Judge("nan_fill", R"({"tensor_map": "x", "box": ["BC", "BR"], "oob_fill": "nan"})");
  EXPECT_EQ(e.status, EvalStatus::kWrongResult) << e.Report();
  ExpectNextPasses();
}

// A map over the output, read before the kernel wrote it: the kernel copies
// the poison the judge filled y with, which the judge sees as poison that
// survived (on the H200, 2026-12-01: all 7200 elements of y).
TEST_F(GpuTensorMap, AMapOverAnUnwrittenOutputReadsPoison) {
  Evaluation e = Judge("reads_output", R"({"tensor_map": "y", "box": ["BC", "BR"]})");
  EXPECT_EQ(e.status, EvalStatus::kUnwrittenOutput) << e.Report();
  ExpectNextPasses();
}

// A kernel that takes a pointer where the plan passes a map is refused by
// the driver's parameter table before any launch.
TEST_F(GpuTensorMap, APointerParameterGivenAMapIsAnInvalidPlan) {
  std::string source = problem_.start.source;
  const std::string param = "const __grid_constant__ TensorMap x_map";
  ASSERT_NE(source.find(param), std::string::npos);
  source.replace(source.find(param), param.size(), "const float* x_map");
  Evaluation e = Judge("pointer_param", R"({"tensor_map": "x", "box": ["BC", "BR"]})", source);
  EXPECT_EQ(e.status, EvalStatus::kInvalidPlan) << e.Report();
  EXPECT_NE((e.message + e.details).find("the plan passes a tensor map (128 bytes by value)"), std::string::npos)
      << e.message << e.details;
  ExpectNextPasses();
}

}  // namespace
}  // namespace ksearch
