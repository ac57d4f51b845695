// The half-precision policy (docs/evaluation.md "Half precision") against
// kernels that cut its corners: each must be wrong_result, and the honest
// kernel — half inputs, fp32 accumulation, one rounding — must pass. The
// problems are test data (tests/eval/data, below $KSEARCH_TEST_SOURCE_DIR
// where the binary runs away from the source tree): a bf16 GEMM with the
// cuBLASLt baseline and an fp16 row mean whose shifted input set overflows
// fp16. GPU tests (label `gpu`); they skip without a driver.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <regex>

#include "ksearch/evaluator.h"
#include "test_util.h"

namespace ksearch {
namespace {

Problem LoadHalfProblem(const std::string& name) {
  auto p = Problem::Load(testing::SourcePath("tests/eval/data/" + name));
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : Problem();
}

EvaluatorOptions Options() {
  EvaluatorOptions o;
  o.compile_cache_dir = "off";
  o.max_timing_seconds = 0.3;
  o.warmup_ms = 5;
  o.watchdog_floor_seconds = 1.0;
  o.replay_input_seed = 13;
  return o;
}

std::string Edit(const std::string& source, const std::string& pattern, const std::string& replacement) {
  std::string out = std::regex_replace(source, std::regex(pattern), replacement);
  EXPECT_NE(out, source) << "pattern did not match: " << pattern;
  return out;
}

class GpuHalf : public ::testing::Test {
 protected:
  void Open(Problem problem) {
    problem_ = std::move(problem);
    auto e = CreateLocalEvaluator(problem_, Options());
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    evaluator_ = std::move(*e);
  }
  // `kernel` with the source replaced (and the plan, when given).
  Evaluation Judge(const std::string& id, const KernelSpec& kernel, const std::string& source = "") {
    Candidate c = kernel.ToCandidate(id, "test");
    if (!source.empty()) c.source = source;
    Evaluation e = evaluator_->Evaluate(std::span<const Candidate>(&c, 1)).front();
    std::printf("[%s] %s", id.c_str(), e.Report().c_str());
    return e;
  }
  void ExpectRejected(const Evaluation& e) {
    EXPECT_EQ(e.status, EvalStatus::kWrongResult) << e.Report();
    EXPECT_TRUE(e.mismatch.has_value()) << e.Report();
  }
  void ExpectHonestPass() {
    Evaluation start = Judge("honest_start", problem_.start);
    EXPECT_EQ(start.status, EvalStatus::kOk) << start.Report();
    Evaluation twin = Judge("honest_twin", problem_.reference_fp32);
    EXPECT_EQ(twin.status, EvalStatus::kOk) << twin.Report();
  }
  Problem problem_;
  std::unique_ptr<Evaluator> evaluator_;
};

// bf16 GEMM, K = 2048: an accumulator held in bf16 rounds 2048 times.
TEST_F(GpuHalf, Bf16AccumulationOfALongSumIsWrong) {
  KSEARCH_REQUIRE_GPU();
  ASSERT_NO_FATAL_FAILURE(Open(LoadHalfProblem("gemm_bf16")));
  std::string source = Edit(problem_.reference_fp32.source, R"(float acc = 0\.0f;)",
                            "__nv_bfloat16 acc = __float2bfloat16(0.0f);");
  source = Edit(source, R"(acc = fmaf\((.*), acc\);)", "acc = __float2bfloat16(fmaf($1, __bfloat162float(acc)));");
  source = Edit(source, R"(__float2bfloat16_rn\(acc\))", "acc");
  ExpectRejected(Judge("bf16_accumulation", problem_.reference_fp32, source));
  ExpectHonestPass();
}

// The fp32 sum is right, but the last step truncates it to bf16 (keeping
// the upper 16 bits) instead of rounding: every element stays within one
// step of the reference, about half of them on the wrong side, and the L2
// error shows it.
TEST_F(GpuHalf, ASkippedFinalRoundingIsWrong) {
  KSEARCH_REQUIRE_GPU();
  ASSERT_NO_FATAL_FAILURE(Open(LoadHalfProblem("gemm_bf16")));
  std::string source = Edit(problem_.reference_fp32.source, R"(__float2bfloat16_rn\(acc\))",
                            "__ushort_as_bfloat16((unsigned short)(__float_as_uint(acc) >> 16))");
  Evaluation e = Judge("truncated_not_rounded", problem_.reference_fp32, source);
  ExpectRejected(e);
  ASSERT_TRUE(e.mismatch);
  EXPECT_GT(e.mismatch->l2_rel_error, e.mismatch->allowed_l2_rel_error) << e.Report();
  ExpectHonestPass();
}

// The same shortcut taken only where the output is small (|c| < 8, about a
// seventh of the elements on the normal set, where the output's RMS is
// about 45): those elements weigh little in the L2 error, and each is within
// one step, so only the count of elements off the correctly rounded value
// catches it.
TEST_F(GpuHalf, ASkippedRoundingOnSmallOutputsIsCaughtByTheCount) {
  KSEARCH_REQUIRE_GPU();
  ASSERT_NO_FATAL_FAILURE(Open(LoadHalfProblem("gemm_bf16")));
  std::string source = Edit(problem_.reference_fp32.source, R"(__float2bfloat16_rn\(acc\))",
                            "(fabsf(acc) < 8.0f ? __ushort_as_bfloat16((unsigned short)(__float_as_uint(acc) >> 16))"
                            " : __float2bfloat16_rn(acc))");
  Evaluation e = Judge("truncated_small_outputs", problem_.reference_fp32, source);
  ExpectRejected(e);
  ASSERT_TRUE(e.mismatch);
  EXPECT_LT(e.mismatch->l2_rel_error, e.mismatch->allowed_l2_rel_error) << "the L2 bound alone would catch it";
  EXPECT_GT(e.mismatch->bad_count, e.mismatch->elements / 100) << e.Report();
  EXPECT_NE(e.message.find("correctly rounded reference"), std::string::npos) << e.message;
  ExpectHonestPass();
}

// The built-in linear allows an elementwise atol ten times the default
// (1e-4 of the output's RMS, set from cuBLAS's own error at long k). The
// same shortcut on small outputs must still fail there: at K = 4096 the RMS
// is about 64, so atol is about 6.4e-3, below one bf16 step of any |y| >= 1,
// and the outputs in [1, 8) that truncate instead of rounding are counted.
TEST_F(GpuHalf, LinearsLooserAtolStillCatchesASkippedRoundingOnSmallOutputs) {
  KSEARCH_REQUIRE_GPU();
  auto builtin = LoadProblem("linear");
  ASSERT_TRUE(builtin.ok()) << builtin.status().ToString();
  ASSERT_EQ(builtin->tolerance.atol_rms_fraction, 1e-4);
  builtin->shapes.clear();
  builtin->dispatch = {};
  auto small = builtin->WithDims({{"M", 64}, {"N", 512}, {"K", 4096}});
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  ASSERT_NO_FATAL_FAILURE(Open(*small));
  std::string source = Edit(problem_.reference_fp32.source, R"(__float2bfloat16_rn\(acc\[i\]\[j\]\))",
                            "(fabsf(acc[i][j]) < 8.0f"
                            " ? __ushort_as_bfloat16((unsigned short)(__float_as_uint(acc[i][j]) >> 16))"
                            " : __float2bfloat16_rn(acc[i][j]))");
  Evaluation e = Judge("linear_truncated_small_outputs", problem_.reference_fp32, source);
  ExpectRejected(e);
  ASSERT_TRUE(e.mismatch);
  EXPECT_GT(e.mismatch->bad_count, e.mismatch->elements / 100) << e.Report();
  ExpectHonestPass();
}

// The honest bf16 kernels pass, and cuBLASLt (fp32 accumulation) passes the
// same judge and is the baseline they are timed against.
TEST_F(GpuHalf, HonestBf16GemmPassesAgainstTheCublasLtBaseline) {
  KSEARCH_REQUIRE_GPU();
  ASSERT_NO_FATAL_FAILURE(Open(LoadHalfProblem("gemm_bf16")));
  Evaluation e = Judge("start", problem_.start);
  ASSERT_EQ(e.status, EvalStatus::kOk) << e.Report();
  ASSERT_TRUE(e.speedup);
  if (e.speedup->baseline.find("unavailable") != std::string::npos) {
    GTEST_SKIP() << "no cuBLASLt on this machine: " << e.speedup->baseline;
  }
  EXPECT_EQ(e.speedup->baseline, "cublaslt_gemm");
  EXPECT_NE(e.device.baseline_library.find("cuBLASLt"), std::string::npos) << e.device.baseline_library;
}

// The same GEMM in fp16 (dtypes and intrinsics swapped): the honest kernel
// passes, cuBLASLt's fp16 GEMM is the baseline, and fp16 accumulation fails.
TEST_F(GpuHalf, Fp16GemmHonestPassesAndHalfAccumulationFails) {
  KSEARCH_REQUIRE_GPU();
  Problem p = LoadHalfProblem("gemm_bf16");
  p.name = "gemm_f16";
  for (TensorSpec& t : p.tensors) t.dtype = DType::kF16;
  p.arithmetic_paths = {"fp32_fma", "fp16_mma"};
  auto to_f16 = [](std::string s) {
    for (auto [from, to] : {std::pair{"cuda_bf16.h", "cuda_fp16.h"}, {"__nv_bfloat16", "__half"},
                            {"__bfloat162float", "__half2float"}, {"__float2bfloat16_rn", "__float2half_rn"},
                            {"__double2bfloat16", "__double2half"}}) {
      s = std::regex_replace(s, std::regex(from), to);
    }
    return s;
  };
  for (KernelSpec* k : {&p.reference, &p.reference_fp32, &p.start}) k->source = to_f16(k->source);
  ASSERT_TRUE(p.Validate().ok()) << p.Validate().ToString();
  ASSERT_NO_FATAL_FAILURE(Open(p));
  Evaluation e = Judge("start", problem_.start);
  ASSERT_EQ(e.status, EvalStatus::kOk) << e.Report();
  ASSERT_TRUE(e.speedup);
  if (e.speedup->baseline.find("unavailable") == std::string::npos) {
    EXPECT_EQ(e.speedup->baseline, "cublaslt_gemm");
  }
  std::string source = Edit(problem_.reference_fp32.source, R"(float acc = 0\.0f;)", "__half acc = __float2half(0.0f);");
  source = Edit(source, R"(acc = fmaf\((.*), acc\);)", "acc = __hfma(A[(long long)row * K + k], B[(long long)k * N + col], acc);");
  source = Edit(source, R"(__float2half_rn\(acc\))", "acc");
  ExpectRejected(Judge("fp16_accumulation", problem_.reference_fp32, source));
}

// fp16 row mean: partial sums and the tree held in fp16.
std::string Fp16AccumulatingRowMean(const std::string& twin) {
  std::string source = Edit(twin, R"(__shared__ float red\[256\];)", "__shared__ __half red[256];");
  source = Edit(source, R"(float s = 0\.0f;)", "__half s = __float2half(0.0f);");
  source = Edit(source, R"(s \+= __half2float\(xr\[c\]\);)", "s = __hadd(s, xr[c]);");
  source = Edit(source, R"(red\[threadIdx\.x\] \+= red\[threadIdx\.x \+ k\];)",
                "red[threadIdx.x] = __hadd(red[threadIdx.x], red[threadIdx.x + k]);");
  return Edit(source, R"(__float2half_rn\(red\[0\] / cols\))", "__float2half_rn(__half2float(red[0]) / cols)");
}

TEST_F(GpuHalf, Fp16AccumulationIsWrongAndFp32AccumulationPasses) {
  KSEARCH_REQUIRE_GPU();
  ASSERT_NO_FATAL_FAILURE(Open(LoadHalfProblem("rowmean_f16")));
  ExpectRejected(Judge("fp16_accumulation", problem_.reference_fp32,
                       Fp16AccumulatingRowMean(problem_.reference_fp32.source)));
  ExpectHonestPass();
}

// On the shifted set (normal(24, 8), 4096 columns) a row's sum is about
// 98000, past fp16's 65504: the fp16 accumulator overflows to Inf although
// the mean itself (about 24) is well inside fp16's range. Judged on that
// set alone, the kernel fails on the overflow, not on its rounding.
TEST_F(GpuHalf, AnFp16AccumulationThatOverflowsFailsTheShiftedSet) {
  KSEARCH_REQUIRE_GPU();
  Problem p = LoadHalfProblem("rowmean_f16");
  ASSERT_EQ(p.input_sets.size(), 3u);
  ASSERT_EQ(p.input_sets[2].name, "shifted");
  p.input_sets = {p.input_sets[2]};
  ASSERT_NO_FATAL_FAILURE(Open(p));
  Evaluation e = Judge("fp16_overflow", problem_.reference_fp32, Fp16AccumulatingRowMean(problem_.reference_fp32.source));
  ExpectRejected(e);
  ASSERT_TRUE(e.mismatch);
  EXPECT_EQ(e.mismatch->input_set, "shifted");
  EXPECT_TRUE(std::isinf(e.mismatch->got)) << "got " << e.mismatch->got << ": " << e.Report();
  EXPECT_FALSE(std::isinf(e.mismatch->expected));
  // The overflowed elements make the L2 error infinite, and the message
  // says why (the finite elements alone may be close to the answer).
  EXPECT_TRUE(std::isinf(e.mismatch->l2_rel_error)) << e.Report();
  EXPECT_NE(e.message.find("NaN or Inf where the reference is finite"), std::string::npos) << e.message;
  ExpectHonestPass();
}

// Figures only (no assertion on time): cuBLASLt's bf16 GEMM at 4096³, as
// the baseline of an honest kernel judged at that size.
TEST_F(GpuHalf, ReportsTheCublasLtBf16TimeAt4096Cubed) {
  KSEARCH_REQUIRE_GPU();
  Problem p = LoadHalfProblem("gemm_bf16");
  auto big = p.WithDims({{"M", 4096}, {"N", 4096}, {"K", 4096}});
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  big->input_sets.resize(1);
  ASSERT_NO_FATAL_FAILURE(Open(*big));
  Evaluation e = Judge("start_4096", problem_.start);
  ASSERT_EQ(e.status, EvalStatus::kOk) << e.Report();
  ASSERT_TRUE(e.speedup && e.baseline_timing);
  if (e.speedup->baseline.find("unavailable") != std::string::npos) GTEST_SKIP() << e.speedup->baseline;
  EXPECT_EQ(e.speedup->baseline, "cublaslt_gemm");
  std::printf("FIGURE cublaslt_gemm bf16 4096^3: median %.4f ms (n %d, %s), %.1f TFLOP/s\n",
              e.baseline_timing->median_ms, e.baseline_timing->repetitions, e.device.baseline_library.c_str(),
              2.0 * 4096.0 * 4096.0 * 4096.0 / (e.baseline_timing->median_ms * 1e-3) / 1e12);
}

}  // namespace
}  // namespace ksearch
