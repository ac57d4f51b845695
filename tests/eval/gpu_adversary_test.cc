// Kernels written to fool the judge, one per way a judge has been fooled
// (docs/evaluation.md "What the judge guarantees"): each must get its status,
// and an honest kernel after it must still pass. GPU tests (label `gpu`);
// those that end their process on purpose are in the *Fatal suites, which
// the GPU runner starts one process each.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <regex>

#include "eval/vault.h"
#include "cuda/objects.h"
#include "ksearch/evaluator.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::RowSoftmaxProblem;
using testing::RowSoftmaxSource;

EvaluatorOptions Options() {
  EvaluatorOptions o;
  o.compile_cache_dir = "off";
  o.max_timing_seconds = 0.5;
  o.warmup_ms = 5;
  o.watchdog_floor_seconds = 1.0;
  o.replay_input_seed = 11;
  return o;
}

Evaluation JudgeOne(Evaluator& evaluator, const Problem& problem, const std::string& id,
                    const std::string& source, const std::string& plan_json = "") {
  Candidate c = problem.start.ToCandidate(id, "test");
  c.source = source;
  if (!plan_json.empty()) {
    auto plan = LaunchPlan::FromJson(plan_json, id);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    c.plan = *plan;
  }
  Evaluation e = evaluator.Evaluate(std::span<const Candidate>(&c, 1)).front();
  std::printf("[%s] %s", id.c_str(), e.Report().c_str());
  return e;
}

std::string Replace(std::string source, const std::string& pattern,
                    const std::string& replacement) {
  std::string out = std::regex_replace(source, std::regex(pattern), replacement);
  EXPECT_NE(out, source) << "pattern did not match: " << pattern;
  return out;
}

// The row softmax, slowed by a spin of `spin_ns` per block: a kernel whose
// honest path is expensive, so that a skipped path would show in its time.
std::string Padded(long long spin_ns, const std::string& before_work = "") {
  std::string source = RowSoftmaxSource("float");
  return Replace(source, R"(\{\n  __shared__ float red\[256\];)",
                 "{\n  __shared__ float red[256];\n" + before_work +
                     "  { long long t0 = clock64(); while (clock64() - t0 < " +
                     std::to_string(spin_ns) + "LL * 2) {} }\n");
}

class GpuAdversary : public ::testing::Test {
 protected:
  void SetUp() override {
    KSEARCH_REQUIRE_GPU();
    problem_ = RowSoftmaxProblem(512, 4096);
    auto e = CreateLocalEvaluator(problem_, Options());
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    evaluator_ = std::move(*e);
  }
  Evaluation Judge(const std::string& id, const std::string& source) {
    return JudgeOne(*evaluator_, problem_, id, source);
  }
  void ExpectNextPasses() {
    Evaluation e = Judge("honest", RowSoftmaxSource("float"));
    EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report();
  }
  Problem problem_;
  std::unique_ptr<Evaluator> evaluator_;
};

// Class 1: skip the work when the inputs are those of the last launch. Each
// block keeps a fingerprint of its row and the row's answer; on a match it
// copies the answer instead of running its (padded) honest path. Timed runs
// must see new inputs every time, so its time is the honest path's.
TEST_F(GpuAdversary, SkipWhenUnchangedIsTimedOnItsHonestPath) {
  const std::string cache = R"(
__device__ float ks_cache_y[512 * 4096];
__device__ unsigned long long ks_cache_key[512];
)";
  const std::string skip = R"(
  __shared__ int ks_hit;
  if (threadIdx.x == 0) {
    unsigned long long key = 1469598103934665603ull;
    for (int i = 0; i < 64; ++i) key = (key ^ __float_as_uint(x[(long long)blockIdx.x * cols + i])) * 1099511628211ull;
    ks_hit = ks_cache_key[blockIdx.x] == key;
    ks_cache_key[blockIdx.x] = key;
  }
  __syncthreads();
  if (ks_hit) {
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
      y[(long long)blockIdx.x * cols + c] = ks_cache_y[(long long)blockIdx.x * cols + c];
    return;
  }
)";
  std::string honest = Padded(200000);
  std::string cheat = cache + Padded(200000, skip);
  cheat = Replace(cheat, R"(yr\[c\] = \(float\)\((.*)\);)",
                  "{ float v = (float)($1); yr[c] = v; ks_cache_y[(long long)blockIdx.x * cols + c] = v; }");
  Evaluation h = Judge("padded_honest", honest);
  Evaluation c = Judge("skip_when_unchanged", cheat);
  ASSERT_EQ(h.status, EvalStatus::kOk) << h.Report();
  ASSERT_EQ(c.status, EvalStatus::kOk) << c.Report();
  ASSERT_TRUE(h.timing && c.timing);
  // The skip path copies in a few microseconds; the honest path spins
  // 200 us per block. Timed on fresh inputs, both take the honest path.
  EXPECT_GT(c.timing->median_ms, 0.8 * h.timing->median_ms)
      << "the skip path was timed: " << c.timing->median_ms << " ms vs " << h.timing->median_ms;
  ExpectNextPasses();
}

// Class 1 again: work only when checked. A kernel cannot know which timed
// runs are checked; one that computes only on its first launches and then
// writes garbage is caught in timing.
TEST_F(GpuAdversary, WorkingOnlyWhenCheckedIsCaughtWhileTiming) {
  std::string source = "__device__ unsigned int ks_launches;\n" +
                       Replace(RowSoftmaxSource("float"), R"(\{\n  __shared__ float red\[256\];)",
                               R"({
  __shared__ float red[256];
  __shared__ unsigned int launch;
  if (threadIdx.x == 0) launch = atomicAdd(&ks_launches, blockIdx.x == 0 ? 1u : 0u);
  __syncthreads();
  if (launch >= 8) {
    for (int c = threadIdx.x; c < cols; c += blockDim.x) y[(long long)blockIdx.x * cols + c] = 1.0f / cols;
    return;
  })");
  Evaluation e = Judge("lazy_after_checks", source);
  EXPECT_EQ(e.status, EvalStatus::kWrongResult) << e.Report();
  ASSERT_TRUE(e.mismatch);
  EXPECT_EQ(e.mismatch->phase, "timing");
  ExpectNextPasses();
}

// Writes just past its output and just before its input: the guard regions
// catch both, and nothing else is touched.
TEST_F(GpuAdversary, WritesOutsideItsBuffersAreOutOfBounds) {
  std::string past = Replace(RowSoftmaxSource("float"), R"(sum = red\[0\];)",
                             "sum = red[0];\n  if (blockIdx.x == 0 && threadIdx.x == 0) "
                             "y[(long long)gridDim.x * cols + 5] = 1.0f;");
  Evaluation a = Judge("write_past_output", past);
  EXPECT_EQ(a.status, EvalStatus::kOutOfBoundsWrite) << a.Report();
  ExpectNextPasses();
  std::string before = Replace(RowSoftmaxSource("float"), R"(sum = red\[0\];)",
                               "sum = red[0];\n  if (blockIdx.x == 0 && threadIdx.x == 0) "
                               "((float*)x)[-3] = 1.0f;");
  Evaluation b = Judge("write_before_input", before);
  EXPECT_EQ(b.status, EvalStatus::kOutOfBoundsWrite) << b.Report();
  ExpectNextPasses();
}

// A kernel wrong by 1% on small outputs of a problem whose outputs cross
// zero (a matrix product): the error is far below the L2 bound, and the
// fp32 twin's worst relative error (inflated by outputs near zero) would
// have let it through; the elementwise bound from a quantile catches it.
TEST(GpuAdversaryTolerance, SmallOutputsOffByOnePercentAreWrongThoughTheL2ErrorIsTiny) {
  KSEARCH_REQUIRE_GPU();
  auto matmul = [](const char* acc) {
    return std::string(R"(extern "C" __global__ void mm(const float* A, const float* B, float* C, int n) {
  int row = blockIdx.y * 16 + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;
  if (row >= n || col >= n) return;
  )") + acc + R"( s = 0;
  for (int k = 0; k < n; ++k) s += ()" + acc + R"()A[row * n + k] * ()" + acc + R"()B[k * n + col];
  C[row * n + col] = (float)s;
}
)";
  };
  using testing::JsonEscape;
  const std::string plan = R"J({"launches": [{"kernel": "mm", "grid": ["ceil_div(n, 16)", "ceil_div(n, 16)", 1],
      "block": [16, 16, 1], "args": ["A", "B", "C", "n:i32"]}]})J";
  std::string json = R"({"name": "small_matmul", "dims": {"n": 512},
    "tensors": [{"name": "A", "dtype": "f32", "shape": ["n", "n"], "role": "input"},
                {"name": "B", "dtype": "f32", "shape": ["n", "n"], "role": "input"},
                {"name": "C", "dtype": "f32", "shape": ["n", "n"], "role": "output"}],
    "flops": "2 * n * n * n", "bytes": "12 * n * n",
    "reference": {"source_text": ")" + JsonEscape(matmul("double")) + R"(", "plan": )" + plan + R"(},
    "reference_fp32": {"source_text": ")" + JsonEscape(matmul("float")) + R"(", "plan": )" + plan + R"(},
    "start": {"source_text": ")" + JsonEscape(matmul("float")) + R"(", "plan": )" + plan + R"(}})";
  auto problem = Problem::FromJson(json, "", "small_matmul.json");
  ASSERT_TRUE(problem.ok()) << problem.status().ToString();
  auto evaluator = CreateLocalEvaluator(*problem, Options());
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  std::string off = Replace(matmul("float"), R"(C\[row \* n \+ col\] = \(float\)s;)",
                            "C[row * n + col] = (float)(fabsf(s) > 0.03f && fabsf(s) < 0.15f ? s * 1.01f : s);");
  Evaluation e = JudgeOne(**evaluator, *problem, "one_percent_on_small_outputs", off);
  EXPECT_EQ(e.status, EvalStatus::kWrongResult) << e.Report();
  ASSERT_TRUE(e.mismatch);
  EXPECT_GT(e.mismatch->bad_count, 0);
  EXPECT_LT(e.mismatch->l2_rel_error, e.mismatch->allowed_l2_rel_error)
      << "the L2 bound alone would have let it pass";
  Evaluation honest = JudgeOne(**evaluator, *problem, "honest", matmul("float"));
  EXPECT_EQ(honest.status, EvalStatus::kOk) << honest.Report();
}

// Class 4: the floor of the fastest arithmetic path the problem allows. The
// same honest kernel is judged against a problem that declares twice the
// work it can do at the measured FMA peak: below the FMA floor it is
// suspicious; with tensor-core paths allowed, that floor is far lower and
// it passes.
TEST(GpuAdversaryFloor, TheFloorIsThatOfTheFastestAllowedPath) {
  KSEARCH_REQUIRE_GPU();
  Problem base = RowSoftmaxProblem(2048, 8192);
  auto first = CreateLocalEvaluator(base, Options());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  Evaluation e = JudgeOne(**first, base, "measure", RowSoftmaxSource("float"));
  ASSERT_EQ(e.status, EvalStatus::kOk) << e.Report();
  double gflops = (*first)->device().peak_gflops;
  // Flops that take twice the measured median at the FMA peak.
  double flops = 2.0 * e.timing->median_ms * 1e-3 * gflops * 1e9;
  Problem fma = base;
  fma.flops = std::to_string(static_cast<long long>(flops));
  fma.bytes = "8";
  auto judge_fma = CreateLocalEvaluator(fma, Options());
  ASSERT_TRUE(judge_fma.ok()) << judge_fma.status().ToString();
  Evaluation a = JudgeOne(**judge_fma, fma, "below_fma_floor", RowSoftmaxSource("float"));
  EXPECT_EQ(a.status, EvalStatus::kSuspiciousSpeed) << a.Report();
  Problem mma = fma;
  mma.arithmetic_paths = {"fp32_fma", "fp16_mma"};
  auto judge_mma = CreateLocalEvaluator(mma, Options());
  ASSERT_TRUE(judge_mma.ok()) << judge_mma.status().ToString();
  const DeviceInfo& device = (*judge_mma)->device();
  const bool hopper = device.cc_major == 9 && device.cc_minor == 0;
  ASSERT_EQ(device.peak_mma_gflops.size(), hopper ? 2u : 1u);
  EXPECT_EQ(device.peak_mma_gflops[0].first, "fp16_mma");
  EXPECT_GT(device.peak_mma_gflops[0].second, 4 * gflops)
      << "fp16 mma.sync should be several times the fp32 FMA rate";
  if (hopper) {
    // The warpgroup MMA that sm_90a candidates may use is faster still, and
    // the floor is the faster one's (a wgmma kernel is not "suspicious").
    EXPECT_EQ(device.peak_mma_gflops[1].first, "fp16_mma (wgmma)");
    EXPECT_GT(device.peak_mma_gflops[1].second, device.peak_mma_gflops[0].second)
        << "wgmma measured below mma.sync: the peak kernel is wrong";
    std::printf("[ figures  ] fp32 FMA %.0f, fp16 mma.sync %.0f, fp16 wgmma %.0f GFLOP/s\n", gflops,
                device.peak_mma_gflops[0].second, device.peak_mma_gflops[1].second);
  }
  Evaluation b = JudgeOne(**judge_mma, mma, "above_mma_floor", RowSoftmaxSource("float"));
  EXPECT_EQ(b.status, EvalStatus::kOk) << b.Report();
}

// Class 6: NaN is no wildcard. A reference that yields NaN makes a problem
// unjudgeable (rejected at start), and NaN from a candidate never matches.
TEST(GpuAdversaryNan, AReferenceThatYieldsNanIsRejectedAndNanNeverMatches) {
  KSEARCH_REQUIRE_GPU();
  std::string json = testing::RowSoftmaxProblemJson(64, 1024);
  // log of a normal input: NaN for every negative element.
  json = std::regex_replace(json, std::regex(R"(yr\[c\] = \((double|float)\)\(exp)"), "yr[c] = ($1)(log(xr[c]) + exp");
  auto nan_problem = Problem::FromJson(json, "", "nan.json");
  ASSERT_TRUE(nan_problem.ok()) << nan_problem.status().ToString();
  auto rejected = CreateLocalEvaluator(*nan_problem, Options());
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.status().message().find("NaN"), std::string::npos) << rejected.status().ToString();

  Problem problem = RowSoftmaxProblem(512, 4096);
  auto evaluator = CreateLocalEvaluator(problem, Options());
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  std::string nan_source = Replace(RowSoftmaxSource("float"), R"(yr\[c\] = \(float\)\(.*\);)",
                                   "yr[c] = c == 7 ? __int_as_float(0x7fc00000) : (float)(exp((float)xr[c] - m) / sum);");
  Evaluation e = JudgeOne(**evaluator, problem, "nan", nan_source);
  EXPECT_EQ(e.status, EvalStatus::kWrongResult) << e.Report();
  EXPECT_EQ(JudgeOne(**evaluator, problem, "honest", RowSoftmaxSource("float")).status, EvalStatus::kOk);
}

// Determinism is checked on every input set: a kernel that leaves an
// element unwritten on every second launch, but only on the shifted set,
// is caught there.
TEST_F(GpuAdversary, NondeterminismOnALaterInputSetIsCaught) {
  std::string source = "__device__ unsigned int ks_shifted_calls;\n" +
                       Replace(RowSoftmaxSource("float"), R"(\{\n  __shared__ float red\[256\];)",
                               R"({
  __shared__ float red[256];
  __shared__ unsigned int call;
  if (threadIdx.x == 0) call = x[0] > 50.0f ? atomicAdd(&ks_shifted_calls, blockIdx.x == 0 ? 1u : 0u) : 0u;
  __syncthreads();)");
  source = Replace(source, R"(yr\[c\] = \(float\)\((.*)\);)",
                   "if (!(blockIdx.x == 0 && c == 0 && (call & 1))) yr[c] = (float)($1);");
  Evaluation e = Judge("flaky_on_shifted", source);
  EXPECT_TRUE(e.status == EvalStatus::kUnwrittenOutput || e.status == EvalStatus::kNondeterministic)
      << e.Report();
  ExpectNextPasses();
}

// Device printf is the candidate's, bounded: a megabyte per launch (16,384
// lines) ends up as a bounded log on the evaluation. The driver formats
// those lines on the host at each synchronization, 31-99 ms a launch on the
// H200 (2026-12-02) with single launches past a second, so this judge gets a
// watchdog and a timing cap that such a kernel fits in: the suite's 1 s and
// 0.5 s (ten timed runs at the least) failed this test 11 times in 12, on
// time, not on the log it is about.
TEST_F(GpuAdversary, PrintingMegabytesGivesABoundedLog) {
  EvaluatorOptions options = Options();
  options.watchdog_floor_seconds = 30.0;
  options.max_timing_seconds = 10.0;
  auto evaluator = CreateLocalEvaluator(problem_, options);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  evaluator_ = std::move(*evaluator);
  std::string source = Replace(RowSoftmaxSource("float"), R"(sum = red\[0\];)",
                               "sum = red[0];\n  if (blockIdx.x < 64) printf(\"KSEARCH-FAKE-RESULT "
                               "row %d thread %d xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\\n\", "
                               "blockIdx.x, threadIdx.x);");
  Evaluation e = Judge("printer", source);
  EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report();
  EXPECT_NE(e.device_log.find("KSEARCH-FAKE-RESULT"), std::string::npos);
  EXPECT_LE(e.device_log.size(), 16u * 1024 + 200);
  EXPECT_NE(e.device_log.find("truncated"), std::string::npos);
  ExpectNextPasses();
}

// Whatever a kernel prints, `ksearch eval --json` writes exactly one JSON
// document: a kernel printing a fake result line on every launch, judged
// through the CLI (the one beside this binary, as in a GPU bundle, or the
// one built with it).
TEST(GpuAdversaryCli, JsonOutputIsOneDocumentWhateverTheKernelPrints) {
  KSEARCH_REQUIRE_GPU();
  std::error_code ec;
  std::string cli = std::filesystem::read_symlink("/proc/self/exe", ec).parent_path() / "ksearch";
#ifdef KSEARCH_CLI_PATH
  if (::access(cli.c_str(), X_OK) != 0) cli = KSEARCH_CLI_PATH;
#endif
  if (::access(cli.c_str(), X_OK) != 0) GTEST_SKIP() << "no ksearch CLI beside the test";
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3 to parse JSON";
  const char* problems = std::getenv("KSEARCH_PROBLEMS_DIR");
  std::string dir = problems && *problems ? problems : testing::SourcePath("problems");
  std::ifstream in(dir + "/softmax/start.cu");
  ASSERT_TRUE(in) << dir;
  std::string source((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  source = Replace(source, R"(const int t = threadIdx.x;)",
                   "const int t = threadIdx.x;\n  if (row < 32) printf(\"{\\\"status\\\": \\\"ok\\\", "
                   "\\\"fake\\\": %d}\\n\", t);");
  testing::TempDir tmp;
  std::ofstream(tmp.path() + "/k.cu") << source;
  std::ofstream(tmp.path() + "/p.json")
      << R"({"params": {"BLOCK": 256}, "launches": [{"kernel": "softmax_rows", "grid": ["rows", 1, 1],
            "block": ["BLOCK", 1, 1], "args": ["x", "y", "rows:i32", "cols:i32"]}]})";
  std::string out = tmp.path() + "/out.json";
  std::string command = cli + " eval softmax --dims rows=256,cols=4096 --source " + tmp.path() +
                        "/k.cu --plan " + tmp.path() + "/p.json --json > " + out + " 2>/dev/null";
  int rc = std::system(command.c_str());
  EXPECT_EQ(WEXITSTATUS(rc), 0) << command;
  std::string check = "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
                      "assert d[\"status\"] == \"ok\", d[\"status\"]; "
                      "assert \"fake\" in d[\"device_log\"]' " + out;
  EXPECT_EQ(std::system(check.c_str()), 0) << "stdout is not one JSON document with the log";
}

// A kernel so slow that its checks alone would take long is stopped after a
// few launches, not after tens of seconds.
TEST(GpuAdversaryBudget, AKernelNearTheWatchdogCostsAFewLaunches) {
  KSEARCH_REQUIRE_GPU();
  Problem problem = RowSoftmaxProblem(512, 4096);
  EvaluatorOptions o = Options();
  o.watchdog_floor_seconds = 2.0;
  o.max_check_seconds = 1.0;
  auto evaluator = CreateLocalEvaluator(problem, o);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  Evaluation e = JudgeOne(**evaluator, problem, "slow", Padded(400'000'000));
  EXPECT_EQ(e.status, EvalStatus::kTimeout) << e.Report();
  EXPECT_NE(e.message.find("max_check_seconds"), std::string::npos) << e.message;
  EXPECT_EQ(JudgeOne(**evaluator, problem, "honest", RowSoftmaxSource("float")).status, EvalStatus::kOk);
}

// Classes 2 and 3: the truth is out of reach. A sealed vault's memory cannot
// be read or written by any kernel: the access faults.
TEST(GpuAdversaryFatal, ASealedVaultCannotBeRead) {
  KSEARCH_REQUIRE_GPU();
  auto ctx = internal::CudaContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  ASSERT_TRUE((*ctx)->MakeCurrent().ok());
  const internal::DriverApi& api = (*ctx)->api();
  auto stream = internal::Stream::Create(api);
  ASSERT_TRUE(stream.ok());
  auto vault = internal::TruthVault::Create(api, (*ctx)->device(), {1 << 20}, stream->get());
  ASSERT_TRUE(vault.ok()) << vault.status().ToString();
  ASSERT_TRUE(api.cuMemsetD32Async(vault->ptr(0), 0x3f800000u, (1 << 20) / 4, stream->get()) ==
              CUDA_SUCCESS);
  ASSERT_EQ(api.cuStreamSynchronize(stream->get()), CUDA_SUCCESS);
  ASSERT_TRUE(vault->Seal().ok());
  ASSERT_TRUE(vault->Unseal().ok());  // and back: the contents survive
  float one = 0;
  ASSERT_EQ(api.cuMemcpyDtoH(&one, vault->ptr(0), 4), CUDA_SUCCESS);
  EXPECT_EQ(one, 1.0f);
  ASSERT_TRUE(vault->Seal().ok());
  // A copy from the sealed range fails like a kernel's load would.
  CUresult r = api.cuMemcpyDtoH(&one, vault->ptr(0), 4);
  EXPECT_NE(r, CUDA_SUCCESS) << "a sealed vault was readable";
}

// Classes 2 and 3 as an adversary tries them: the reference's buffers were
// once found at a fixed distance from the candidate's own. Whatever it reads
// there now is not the answer (or faults): never ok.
TEST(GpuAdversaryFatal, FindingTheReferenceByPointerArithmeticFails) {
  KSEARCH_REQUIRE_GPU();
  Problem problem = RowSoftmaxProblem(512, 4096);
  auto evaluator = CreateLocalEvaluator(problem, Options());
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  std::string thief = R"(extern "C" __global__ void row_softmax(const float* x, float* y, int cols) {
  long long n = (long long)gridDim.x * cols;
  long long row = (long long)blockIdx.x * cols;
  for (int k = -6; k <= 6; ++k) {
    if (k == 0) continue;
    const float* other = y + k * n;
    float s = 0;
    for (int c = 0; c < cols; ++c) s += other[row + c];
    if (s > 0.999f && s < 1.001f) {
      for (int c = threadIdx.x; c < cols; c += blockDim.x) y[row + c] = other[row + c];
      return;
    }
  }
}
)";
  Evaluation e = JudgeOne(**evaluator, problem, "thief", thief);
  EXPECT_NE(e.status, EvalStatus::kOk) << e.Report();
  EXPECT_TRUE(e.status == EvalStatus::kCrashed || e.status == EvalStatus::kWrongResult ||
              e.status == EvalStatus::kUnwrittenOutput || e.status == EvalStatus::kOutOfBoundsWrite)
      << e.Report();
}

}  // namespace
}  // namespace ksearch
