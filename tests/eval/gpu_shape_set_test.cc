// The judge over shape sets and per-row scaled inputs (docs/evaluation.md,
// "Shape sets" and "Inputs scaled per row or column"). These tests need a GPU
// (ctest label `gpu`) and skip elsewhere; the problems are inline, so the
// binary runs anywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "ksearch/evaluator.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::JsonEscape;

// C[M][N] = A[M][K] · B[K][N], one thread per output. `acc` is the type of
// the sum; `tail_bug` adds the mistake of a kernel tuned at M = 4096: the
// last block row, taken only when M is not a multiple of 16, skips the last
// k (a tail path that a multiple of the tile never runs).
std::string GemmSource(const char* name, const char* acc, bool tail_bug, bool flush_small = false) {
  std::string s = R"j(
extern "C" __global__ void )j" + std::string(name) + R"j((const float* __restrict__ A, const float* __restrict__ B,
                                  float* __restrict__ C, int M, int N, int K) {
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  if (row >= M || col >= N) return;
  int k_end = K;
)j";
  if (tail_bug) s += "  if (M % 16 != 0 && blockIdx.y == gridDim.y - 1) k_end = K - 1;\n";
  s += "  " + std::string(acc) + " sum = 0;\n  for (int k = 0; k < k_end; ++k) {\n    float a = A[(long long)row * K + k];\n";
  // A format without subnormals at this scale: values below 1e-7 become 0.
  if (flush_small) s += "    if (fabsf(a) < 1e-7f) a = 0.0f;\n";
  s += "    sum += (" + std::string(acc) + ")a * (" + std::string(acc) +
       ")B[(long long)k * N + col];\n  }\n  C[(long long)row * N + col] = (float)sum;\n}\n";
  return s;
}

std::string GemmPlan(const char* kernel) {
  return R"j({"launches": [{"kernel": ")j" + std::string(kernel) +
         R"j(", "grid": ["ceil_div(N, 16)", "ceil_div(M, 16)", 1], "block": [16, 16, 1],
             "args": ["A", "B", "C", "M:i32", "N:i32", "K:i32"]}]})j";
}

// A small GEMM with the given shape cases and input sets (JSON fragments).
std::string GemmProblemJson(const std::string& shapes, const std::string& input_sets) {
  return R"j({"name": "small_gemm", "description": "C = A B",
    "dims": {"M": 4096, "N": 64, "K": 64},
    "tensors": [{"name": "A", "dtype": "f32", "shape": ["M", "K"], "role": "input"},
                {"name": "B", "dtype": "f32", "shape": ["K", "N"], "role": "input"},
                {"name": "C", "dtype": "f32", "shape": ["M", "N"], "role": "output"}],
    "flops": "2 * M * N * K", "bytes": "4 * (M * K + K * N + M * N)",)j" +
         (input_sets.empty() ? "" : "\"input_sets\": " + input_sets + ",") +
         (shapes.empty() ? "" : "\"shapes\": " + shapes + ",") + R"j(
    "reference": {"source_text": ")j" + JsonEscape(GemmSource("gemm_ref", "double", false)) +
         R"j(", "plan": )j" + GemmPlan("gemm_ref") + R"j(},
    "reference_fp32": {"source_text": ")j" + JsonEscape(GemmSource("gemm_fp32", "float", false)) +
         R"j(", "plan": )j" + GemmPlan("gemm_fp32") + R"j(}})j";
}

constexpr char kCases[] = R"j([
    {"name": "prefill", "dims": {"M": 4096}, "weight": 1},
    {"name": "decode", "dims": {"M": 16}, "weight": 3},
    {"name": "odd", "dims": {"M": 17}, "timed": false}])j";

EvaluatorOptions FastOptions() { return testing::FastGpuOptions(11); }

Evaluation JudgeOne(Evaluator& evaluator, const std::string& id, const std::string& source,
                    const char* kernel) {
  Candidate c;
  c.id = id;
  c.source = source;
  auto plan = LaunchPlan::FromJson(GemmPlan(kernel), id);
  EXPECT_TRUE(plan.ok()) << plan.status().ToString();
  c.plan = *plan;
  Evaluation e = evaluator.Evaluate(std::span<const Candidate>(&c, 1)).front();
  std::printf("[%s] %s", id.c_str(), e.Report().c_str());
  return e;
}

class GpuShapeSet : public ::testing::Test {
 protected:
  void SetUp() override {
    KSEARCH_REQUIRE_GPU();
    auto p = Problem::FromJson(GemmProblemJson(kCases, ""), "", "small_gemm.json");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    problem_ = *p;
    auto e = CreateLocalEvaluator(problem_, FastOptions());
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    evaluator_ = std::move(*e);
  }
  Problem problem_;
  std::unique_ptr<Evaluator> evaluator_;
};

TEST_F(GpuShapeSet, AKernelRightAtTheTunedShapeButWrongAtAnOddOneFails) {
  Evaluation e = JudgeOne(*evaluator_, "tail_bug", GemmSource("gemm_tail", "float", true), "gemm_tail");
  EXPECT_EQ(e.status, EvalStatus::kWrongResult) << e.Report();
  EXPECT_NE(e.message.find("at case 'odd' (M=17 N=64 K=64)"), std::string::npos) << e.message;
  ASSERT_EQ(e.cases.size(), 3u);
  // Right where it was tuned (4096 and 16 are multiples of its tile) ...
  EXPECT_EQ(e.cases[0].status, EvalStatus::kOk) << e.cases[0].message;
  EXPECT_EQ(e.cases[1].status, EvalStatus::kOk) << e.cases[1].message;
  // ... wrong at 17.
  EXPECT_EQ(e.cases[2].status, EvalStatus::kWrongResult);
  ASSERT_TRUE(e.mismatch);
  EXPECT_EQ(e.mismatch->tensor, "C");
  EXPECT_GE(e.mismatch->worst_index, 16 * 64);  // in the tail rows
  EXPECT_FALSE(e.timing) << "a wrong kernel has no objective";
  // The same kernel on the problem's one shape passes: only the set catches it.
  Problem one = problem_;
  one.shapes.clear();
  auto single = CreateLocalEvaluator(one, FastOptions());
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  Evaluation alone = JudgeOne(**single, "tail_bug_one_shape", GemmSource("gemm_tail", "float", true), "gemm_tail");
  EXPECT_EQ(alone.status, EvalStatus::kOk) << alone.Report();
  EXPECT_TRUE(alone.cases.empty());
}

TEST_F(GpuShapeSet, ReportsEachCaseAndTheWeightedObjective) {
  Evaluation e = JudgeOne(*evaluator_, "right", GemmSource("gemm_plain", "float", false), "gemm_plain");
  ASSERT_EQ(e.status, EvalStatus::kOk) << e.Report();
  ASSERT_EQ(e.cases.size(), 3u);
  double weighted = 0.0, weights = 0.0, lowest = 1e30, highest = 0.0;
  for (size_t c = 0; c < 2; ++c) {
    const CaseResult& r = e.cases[c];
    EXPECT_EQ(r.status, EvalStatus::kOk) << r.message;
    EXPECT_TRUE(r.timed);
    EXPECT_GT(r.median_ms, 0.0) << r.name;
    EXPECT_LE(r.ci_low_ms, r.median_ms) << r.name;
    EXPECT_GE(r.repetitions, 1) << r.name;
    EXPECT_GT(r.baseline_median_ms, 0.0) << r.name;  // the baseline ran at this case
    EXPECT_EQ(r.baseline, "reference_fp32") << r.name;
    EXPECT_GT(r.speedup, 0.0) << r.name;
    EXPECT_LE(r.speedup_ci_low, r.speedup) << r.name;
    EXPECT_GT(r.allowed_l2_rel_error, 0.0) << r.name;  // calibrated at this case
    EXPECT_GT(r.floor_ms, 0.0) << r.name;
    weighted += r.weight * r.median_ms;
    weights += r.weight;
    lowest = std::min(lowest, r.speedup);
    highest = std::max(highest, r.speedup);
  }
  EXPECT_EQ(e.cases[0].dims, (std::vector<std::pair<std::string, int64_t>>{{"M", 4096}, {"N", 64}, {"K", 64}}));
  EXPECT_EQ(e.cases[1].weight, 3.0);
  // The prefill case does 256 times the work of decode: its floor is higher.
  EXPECT_GT(e.cases[0].floor_ms, e.cases[1].floor_ms);
  const CaseResult& odd = e.cases[2];
  EXPECT_EQ(odd.status, EvalStatus::kOk) << odd.message;
  EXPECT_FALSE(odd.timed);
  EXPECT_EQ(odd.weight, 0.0);
  EXPECT_EQ(odd.median_ms, 0.0) << "a check-only case is never timed";
  EXPECT_EQ(odd.speedup, 0.0);
  // The objective is the weighted time; the speedup lies between the cases'.
  ASSERT_TRUE(e.timing);
  EXPECT_NEAR(e.timing->median_ms, weighted / weights, 1e-12 * weighted);
  ASSERT_TRUE(e.speedup);
  EXPECT_GE(e.speedup->ratio, lowest * (1 - 1e-12));
  EXPECT_LE(e.speedup->ratio, highest * (1 + 1e-12));
  EXPECT_NE(e.ToJson().find("\"cases\":[{\"name\":\"prefill\""), std::string::npos) << e.ToJson();
  EXPECT_NE(e.Report().find("case odd (M=17 N=64 K=64, check-only): ok"), std::string::npos) << e.Report();
}

// The peaks belong to the device: the first case measures them and every
// case's floor comes from those same figures (a case that measured again
// would have a floor off by its own measurement's noise).
TEST_F(GpuShapeSet, EveryCaseTakesItsFloorFromTheSamePeaks) {
  Evaluation e = JudgeOne(*evaluator_, "right", GemmSource("gemm_plain", "float", false), "gemm_plain");
  ASSERT_EQ(e.status, EvalStatus::kOk) << e.Report();
  const DeviceInfo& device = evaluator_->device();
  ASSERT_GT(device.peak_gflops, 0.0);
  ASSERT_GT(device.peak_bandwidth_gbps, 0.0);
  for (size_t c = 0; c < 2; ++c) {
    auto at = problem_.AtCase(c);
    ASSERT_TRUE(at.ok()) << at.status().ToString();
    double flops_ms = *at->Flops() / (device.peak_gflops * 1e9) * 1e3;
    double bytes_ms = *at->Bytes() / (device.peak_bandwidth_gbps * 1e9) * 1e3;
    double want = std::max(flops_ms, bytes_ms);
    EXPECT_NEAR(e.cases[c].floor_ms, want, 1e-9 * want) << e.cases[c].name;
  }
}

// Rows of A scaled by 10^uniform(-9, 0): a kernel that flushes values below
// 1e-7 to zero loses the small rows of C entirely. Their share of the L2
// norm is far below the allowed error, and each lost value is below an atol
// taken from the RMS of the whole output; an atol from each row's RMS
// catches it.
TEST(GpuScaledInputs, TheElementwiseRuleCatchesAKernelThatLosesSmallRows) {
  KSEARCH_REQUIRE_GPU();
  auto p = Problem::FromJson(
      GemmProblemJson("", R"j([{"name": "rows", "distribution": "normal(0, 1) * 10^uniform(-9, 0) per row",
                               "tensors": {"B": "normal(0, 1)"}}])j"),
      "", "small_gemm.json");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  auto evaluator = CreateLocalEvaluator(*p, FastOptions());
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  Evaluation plain = JudgeOne(**evaluator, "plain", GemmSource("gemm_plain", "float", false), "gemm_plain");
  EXPECT_EQ(plain.status, EvalStatus::kOk) << plain.Report();
  Evaluation lossy =
      JudgeOne(**evaluator, "flush", GemmSource("gemm_flush", "float", false, true), "gemm_flush");
  EXPECT_EQ(lossy.status, EvalStatus::kWrongResult) << lossy.Report();
  ASSERT_TRUE(lossy.mismatch);
  EXPECT_GT(lossy.mismatch->bad_count, 0);
  // The L2 rule alone would have let it through.
  EXPECT_LE(lossy.mismatch->l2_rel_error, lossy.mismatch->allowed_l2_rel_error) << lossy.Report();
  EXPECT_NE(lossy.message.find("scales its inputs per row"), std::string::npos) << lossy.message;
}

}  // namespace
}  // namespace ksearch
