// Inout tensors (docs/evaluation.md "Inout tensors") against kernels that
// get in-place work wrong: one that leaves the tensor as it found it, one
// that applies the op twice, one that writes an input as well, and one whose
// work depends on the data it finds (it skips values that look already
// transformed). The problem is test data (tests/eval/data/inplace_bf16,
// below $KSEARCH_TEST_SOURCE_DIR where the binary runs away from the source
// tree): y = y * s + b in place, with b far from y's values. GPU tests
// (label `gpu`); they skip without a driver.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ksearch/evaluator.h"
#include "test_util.h"

namespace ksearch {
namespace {

Problem LoadInplaceProblem() {
  auto p = Problem::Load(testing::SourcePath("tests/eval/data/inplace_bf16"));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : Problem();
}

// The start kernel's signature with `body` run for each element v = yr[c]
// (write the result with `yr[c] = ...`).
std::string Kernel(const std::string& body) {
  return R"(#include <cuda_bf16.h>
extern "C" __global__ void __launch_bounds__(256)
scale_shift(__nv_bfloat16* __restrict__ y, float* s, const float* __restrict__ b, int rows, int cols) {
  for (int r = blockIdx.x * ROWS_PER_BLOCK; r < min(rows, (int)(blockIdx.x + 1) * ROWS_PER_BLOCK); ++r) {
    __nv_bfloat16* yr = y + (long long)r * cols;
    for (int c = threadIdx.x; c < cols; c += 256) {
      float v = __bfloat162float(yr[c]);
      )" + body + R"(
    }
  }
})";
}

class GpuInout : public ::testing::Test {
 protected:
  void SetUp() override {
    KSEARCH_REQUIRE_GPU();
    problem_ = LoadInplaceProblem();
    ASSERT_FALSE(problem_.name.empty());
    EvaluatorOptions o;
    o.compile_cache_dir = "off";
    o.max_timing_seconds = 0.3;
    o.warmup_ms = 5;
    o.watchdog_floor_seconds = 1.0;
    o.replay_input_seed = 29;
    // Every timed run is checked: a run that found a stale buffer anywhere
    // in timing would fail, not only the last.
    o.timing_spot_check_probability = 1.0;
    auto e = CreateLocalEvaluator(problem_, o);
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    evaluator_ = std::move(*e);
  }
  Evaluation Judge(const std::string& id, const std::string& source) {
    Candidate c = problem_.start.ToCandidate(id, "test");
    if (!source.empty()) c.source = source;
    Evaluation e = evaluator_->Evaluate(std::span<const Candidate>(&c, 1)).front();
    std::printf("[%s] %s", id.c_str(), e.Report().c_str());
    return e;
  }
  Problem problem_;
  std::unique_ptr<Evaluator> evaluator_;
};

TEST_F(GpuInout, AnHonestInPlaceKernelPassesAndIsTimed) {
  Evaluation start = Judge("start", "");
  EXPECT_EQ(start.status, EvalStatus::kOk) << start.Report();
  EXPECT_TRUE(start.timing.has_value());
  Evaluation same = Judge("written_here", Kernel("yr[c] = __float2bfloat16_rn(fmaf(v, s[c], b[c]));"));
  EXPECT_EQ(same.status, EvalStatus::kOk) << same.Report();
  Candidate twin = problem_.reference_fp32.ToCandidate("twin", "test");
  Evaluation t = evaluator_->Evaluate(std::span<const Candidate>(&twin, 1)).front();
  EXPECT_EQ(t.status, EvalStatus::kOk) << t.Report();
}

// Its output equals its input, not the reference's result.
TEST_F(GpuInout, AKernelThatLeavesTheTensorAloneFails) {
  Evaluation e = Judge("untouched", Kernel("(void)v;"));
  EXPECT_EQ(e.status, EvalStatus::kWrongResult) << e.Report();
  ASSERT_TRUE(e.mismatch.has_value());
  EXPECT_EQ(e.mismatch->tensor, "y");
  EXPECT_EQ(e.mismatch->phase, "check");
}

// Checked after one application on freshly generated values: two are wrong.
TEST_F(GpuInout, AKernelThatAppliesTheOpTwiceFails) {
  Evaluation e = Judge("twice", Kernel(
      "v = __bfloat162float(__float2bfloat16_rn(fmaf(v, s[c], b[c])));\n"
      "      yr[c] = __float2bfloat16_rn(fmaf(v, s[c], b[c]));"));
  EXPECT_EQ(e.status, EvalStatus::kWrongResult) << e.Report();
}

// The inputs-unchanged guard still covers the other tensors.
TEST_F(GpuInout, WritingAnInputBesidesTheInoutTensorIsCaught) {
  Evaluation e = Judge("writes_s", Kernel(
      "yr[c] = __float2bfloat16_rn(fmaf(v, s[c], b[c]));\n"
      "      if (r == rows - 1) s[c] = s[c] * 0.5f + 0.5f * s[c] + 1e-3f;"));
  EXPECT_EQ(e.status, EvalStatus::kInputModified) << e.Report();
}

// Fresh values lie within a few units of 0; transformed ones near b (40..60).
// A kernel that leaves values it takes for transformed alone is correct only
// if every run, checked and timed, finds freshly generated data: the judge
// regenerates the inout tensor before each run. Without that it would find
// its own result (skip it, and fail the check), or, were the check made
// against its own earlier output, be timed doing no work.
TEST_F(GpuInout, EveryRunFindsFreshValuesInTheInoutTensor) {
  Evaluation e = Judge("skips_transformed", Kernel(
      "if (fabsf(v) > 20.0f) continue;\n"
      "      yr[c] = __float2bfloat16_rn(fmaf(v, s[c], b[c]));"));
  EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report();
  ASSERT_TRUE(e.timing.has_value());
  EXPECT_GE(e.timing->repetitions, 3);
  EXPECT_NE(e.details.find("timed runs had their outputs checked"), std::string::npos) << e.details;
}

}  // namespace
}  // namespace ksearch
