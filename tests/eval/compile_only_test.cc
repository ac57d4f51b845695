// The evaluator without a GPU: compile, resource report, plan checks; the
// evaluation says which checks did not run.
#include <gtest/gtest.h>

#include <algorithm>

#include "cuda/compiler.h"
#include "eval/judge.h"
#include "eval/judge_kernels.h"
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

// Kernels are compiled for the device's arch-specific feature set
// (sm_90a on Hopper), so that wgmma and setmaxnreg assemble: a kernel that
// uses them compiles for --arch sm_90 and for sm_90a alike, and an "a" the
// arch does not have is refused.
TEST(CompileOnlyEvaluator, CompilesForTheArchSpecificFeatureSet) {
  Problem problem = testing::RowSoftmaxProblem();
  Candidate c = problem.start.ToCandidate("fenced", "user");
  const std::string marker = "extern \"C\" __global__ void row_softmax(";
  const size_t at = c.source.find(marker);
  ASSERT_NE(at, std::string::npos);
  c.source.insert(c.source.find('{', at) + 1, "\n  asm volatile(\"wgmma.fence.sync.aligned;\");\n");
  for (const char* arch : {"sm_90", "sm_90a"}) {
    EvaluatorOptions options;
    options.compile_only = true;
    options.arch = arch;
    options.compile_cache_dir = "off";
    auto evaluator = CreateLocalEvaluator(problem, options);
    ASSERT_TRUE(evaluator.ok()) << arch << ": " << evaluator.status().ToString();
    Evaluation e = EvaluateOne(**evaluator, c);
    EXPECT_EQ(e.status, EvalStatus::kCompiled) << arch << ": " << e.Report() << e.details;
    EXPECT_EQ(e.device.Arch(), "sm_90");
    EXPECT_EQ(e.device.CompileArch(), "sm_90a");
  }
  EvaluatorOptions options;
  options.compile_only = true;
  options.compile_cache_dir = "off";
  options.arch = "sm_80";  // no wgmma on Ampere: the same kernel does not assemble
  auto ampere = CreateLocalEvaluator(problem, options);
  ASSERT_TRUE(ampere.ok()) << ampere.status().ToString();
  EXPECT_EQ(EvaluateOne(**ampere, c).status, EvalStatus::kCompileError);
  options.arch = "sm_89a";
  auto refused = CreateLocalEvaluator(problem, options);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("arch 'sm_89a'"), std::string::npos) << refused.status().message();
}

// ksearch's own device code compiles for every arch a judge may run on, as
// each device's CompileArch(); on Hopper the wgmma peak kernel is real code
// that keeps its accumulators in registers (no local memory).
TEST(JudgeKernels, CompileForEveryJudgedArch) {
  internal::Compiler compiler(internal::CompilerOptions{});
  for (auto [major, minor] : {std::pair{8, 0}, {8, 6}, {8, 9}, {9, 0}, {10, 0}, {12, 0}}) {
    DeviceInfo device;
    device.cc_major = major;
    device.cc_minor = minor;
    internal::CompileRequest request{internal::kJudgeKernelSource, {}, device.CompileArch(), "judge.cu"};
    request.trusted = true;
    auto compiled = compiler.Compile(request);
    ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
    ASSERT_TRUE(compiled->ok) << device.CompileArch() << ":\n" << compiled->log;
    auto wgmma = std::find_if(compiled->resources.begin(), compiled->resources.end(),
                              [](const KernelResources& r) { return r.kernel == "ks_wgmma_peak"; });
    ASSERT_NE(wgmma, compiled->resources.end()) << device.CompileArch();
    if (major == 9) {
      EXPECT_GE(wgmma->registers, 64) << "the 64 accumulators of m64n128 are registers";
      EXPECT_EQ(wgmma->local_bytes, 0);
      EXPECT_EQ(wgmma->spill_store_bytes, 0);
    }
  }
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

// A source without the plan's kernel is an invalid plan even when it has no
// kernel at all (an empty file, comments only): nothing could be launched.
TEST(CompileOnlyEvaluator, ASourceWithoutTheKernelIsAnInvalidPlan) {
  Problem problem = testing::RowSoftmaxProblem();
  auto evaluator = CompileOnly(problem);
  for (const char* source : {"", "// nothing here\n/* at all */\n", "__device__ float helper(float x) { return x; }\n"}) {
    Candidate c = problem.start.ToCandidate("empty", "user");
    c.source = source;
    Evaluation e = EvaluateOne(*evaluator, c);
    EXPECT_EQ(e.status, EvalStatus::kInvalidPlan) << "source: '" << source << "'\n" << e.Report();
    EXPECT_NE(e.message.find("kernel 'row_softmax' is not an entry point"), std::string::npos) << e.message;
    EXPECT_NE(e.message.find("it has no extern \"C\" __global__ function"), std::string::npos) << e.message;
  }
}

// Static and dynamic shared memory add up against the largest block any
// device allows, as they do on the GPU.
TEST(CompileOnlyEvaluator, CountsStaticSharedMemoryAgainstTheLimit) {
  Problem problem = testing::RowSoftmaxProblem();
  auto evaluator = CompileOnly(problem);
  Candidate c = problem.start.ToCandidate("static_smem", "user");
  // 40 KiB of static shared memory: allowed alone, and with 190 KiB more
  // dynamic (allowed alone too) it passes 227 KiB.
  const std::string marker = "extern \"C\" __global__ void row_softmax(";
  size_t at = c.source.find(marker);
  ASSERT_NE(at, std::string::npos);
  c.source.insert(c.source.find('{', at) + 1,
                  "\n  __shared__ float ks_big[10240];\n  ks_big[threadIdx.x] = 0.0f;\n  if (cols < 0) y[0] = ks_big[cols & 255];\n");
  Evaluation fits = EvaluateOne(*evaluator, c);
  EXPECT_EQ(fits.status, EvalStatus::kCompiled) << fits.Report();
  ASSERT_EQ(fits.resources.size(), 1u);
  EXPECT_GE(fits.resources[0].static_shared_bytes, 40960);
  c.id = "static_plus_dynamic";
  c.plan.launches[0].shared_bytes = std::to_string(190 * 1024);
  Evaluation over = EvaluateOne(*evaluator, c);
  EXPECT_EQ(over.status, EvalStatus::kResourceLimit) << over.Report();
  EXPECT_NE(over.message.find("B of static and 194560 B of dynamic shared memory"), std::string::npos)
      << over.message;
}

TEST(CompileOnlyEvaluator, ChecksTheStartingKernelsParameters) {
  Problem problem = testing::RowSoftmaxProblem();
  auto evaluator = CompileOnly(problem);
  Evaluation e = EvaluateOne(*evaluator, problem.start.ToCandidate("start", "start"));
  EXPECT_EQ(e.status, EvalStatus::kCompiled) << e.Report();
  EXPECT_NE(e.message.find("kernels' parameters"), std::string::npos) << e.message;
  for (const std::string& check : e.checks_not_run) {
    EXPECT_EQ(check.find("signature"), std::string::npos) << check;
  }
}

TEST(CompileOnlyEvaluator, RejectsArgumentsThatDoNotMatchTheKernelsParameters) {
  Problem problem = testing::RowSoftmaxProblem();
  auto evaluator = CompileOnly(problem);
  // row_softmax(const float* x, float* y, int cols)
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const Case cases[] = {
      {{"x", "y"}, "launches[0] (row_softmax): the plan passes 2 arguments but the kernel takes 3"},
      {{"x", "y", "cols:i32", "cols:i32"}, "the plan passes 4 arguments but the kernel takes 3"},
      {{"x", "cols:i32", "cols:i32"},
       "launches[0] (row_softmax): argument 1 (\"cols:i32\") is 8 bytes in the kernel but the plan "
       "passes 4"},
      {{"x", "y", "cols:i64"}, "argument 2 (\"cols:i64\") is 4 bytes in the kernel but the plan passes 8"},
  };
  for (const Case& want : cases) {
    Candidate c = problem.start.ToCandidate("edited", "user");
    c.plan.launches[0].args = want.args;
    Evaluation e = EvaluateOne(*evaluator, c);
    EXPECT_EQ(e.status, EvalStatus::kInvalidPlan) << e.Report();
    EXPECT_NE(e.message.find(want.message), std::string::npos) << e.message;
  }
}

// A plan's cluster is checked without a GPU as far as the plan goes: it
// compiles and passes, and one that does not divide the grid or passes the
// portable size is an invalid_plan naming the field and value.
TEST(CompileOnlyEvaluator, ChecksAPlansClusterAgainstTheGrid) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  auto evaluator = CompileOnly(problem);
  auto judge = [&](const std::string& id, const std::string& cluster) {
    Candidate c = problem.start.ToCandidate(id, "user");
    auto plan = LaunchPlan::FromJson(
        R"({"launches": [{"kernel": "row_softmax", "grid": ["rows", 1, 1], "block": [256, 1, 1], "cluster": )" +
            cluster + R"(, "args": ["x", "y", "cols:i32"]}]})",
        id);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    if (plan.ok()) c.plan = *plan;
    return EvaluateOne(*evaluator, c);
  };
  Evaluation e = judge("pairs", "[2, 1, 1]");
  EXPECT_EQ(e.status, EvalStatus::kCompiled) << e.Report();
  e = judge("thirds", "[3, 1, 1]");
  EXPECT_EQ(e.status, EvalStatus::kInvalidPlan) << e.Report();
  EXPECT_NE(e.message.find("launches[0].cluster[0]: '3' = 3 does not divide grid[0] = 64"), std::string::npos)
      << e.message;
  e = judge("sixteen", "[16, 1, 1]");
  EXPECT_EQ(e.status, EvalStatus::kInvalidPlan) << e.Report();
  EXPECT_NE(e.message.find("above the portable limit of 8"), std::string::npos) << e.message;
}

// The kernel's own __cluster_dims__ come from the cubin: a plan that
// contradicts them is an invalid_plan without a GPU, as on one.
TEST(CompileOnlyEvaluator, ChecksAPlansClusterAgainstTheKernelsClusterDims) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  auto evaluator = CompileOnly(problem);
  Candidate c = problem.start.ToCandidate("declared", "user");
  const std::string marker = "extern \"C\" __global__ void row_softmax(";
  ASSERT_NE(c.source.find(marker), std::string::npos);
  c.source.replace(c.source.find(marker), marker.size(),
                   "extern \"C\" __global__ void __cluster_dims__(2, 1, 1) row_softmax(");
  Evaluation own = EvaluateOne(*evaluator, c);
  EXPECT_EQ(own.status, EvalStatus::kCompiled) << own.Report();
  auto plan = LaunchPlan::FromJson(
      R"({"launches": [{"kernel": "row_softmax", "grid": ["rows", 1, 1], "block": [256, 1, 1],
          "cluster": [4, 1, 1], "args": ["x", "y", "cols:i32"]}]})",
      "contradicts");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  c.id = "contradicts";
  c.plan = *plan;
  Evaluation e = EvaluateOne(*evaluator, c);
  EXPECT_EQ(e.status, EvalStatus::kInvalidPlan) << e.Report();
  EXPECT_NE(e.message.find("declares __cluster_dims__(2, 1, 1)"), std::string::npos) << e.message;
}

TEST(CompileOnlyEvaluator, SaysSoWhenTheCubinsParametersCannotBeRead) {
  Problem problem = testing::RowSoftmaxProblem();
  auto evaluator = CompileOnly(problem);
  Candidate c = problem.start.ToCandidate("unreadable", "user");
  internal::CompileResult compiled;
  compiled.ok = true;
  compiled.cubin = "\177ELF, but too short for a cubin";
  auto e = internal::EvaluatePrecompiled(*evaluator, std::span<const Candidate>(&c, 1),
                                         std::span<const internal::CompileResult>(&compiled, 1));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->front().status, EvalStatus::kCompiled) << e->front().Report();
  ASSERT_FALSE(e->front().checks_not_run.empty());
  EXPECT_NE(e->front().checks_not_run[0].find("plan vs kernel signature (the cubin's parameter tables "
                                              "could not be read: not an ELF file"),
            std::string::npos)
      << e->front().checks_not_run[0];
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

// A problem with shape cases is judged at each: a plan that resolves at the
// problem's dims but not at a case's is invalid there, and says where.
TEST(CompileOnlyEvaluator, ChecksThePlanAtEveryShapeCase) {
  Problem problem = testing::RowSoftmaxProblem();
  problem.shapes = {ShapeCase{"big", {{"rows", 512}}, 1.0, true},
                    ShapeCase{"decode", {{"rows", 8}}, 1.0, false}};
  ASSERT_TRUE(problem.Validate().ok()) << problem.Validate().ToString();
  auto evaluator = CompileOnly(problem);
  ASSERT_TRUE(evaluator);
  Evaluation good = EvaluateOne(*evaluator, problem.start.ToCandidate("start", "start"));
  EXPECT_EQ(good.status, EvalStatus::kCompiled) << good.Report();
  ASSERT_EQ(good.cases.size(), 2u);
  EXPECT_EQ(good.cases[1].status, EvalStatus::kCompiled);
  EXPECT_EQ(good.cases[1].dims, (std::vector<std::pair<std::string, int64_t>>{{"rows", 8}, {"cols", 4096}}));
  Candidate sixteen = problem.start.ToCandidate("sixteen_rows_a_block", "user");
  sixteen.plan.launches[0].grid[0] = "rows / 16";
  Evaluation bad = EvaluateOne(*evaluator, sixteen);
  EXPECT_EQ(bad.status, EvalStatus::kInvalidPlan) << bad.Report();
  EXPECT_NE(bad.message.find("at case 'decode' (rows=8 cols=4096): launches[0].grid[0]"), std::string::npos)
      << bad.message;
  EXPECT_EQ(bad.cases[0].status, EvalStatus::kCompiled);
  EXPECT_EQ(bad.cases[1].status, EvalStatus::kInvalidPlan);
}

// A tensor-map argument (the plan's {"tensor_map": ...}) against the compiled
// kernel, without a GPU: the 128-byte CUtensorMap parameter takes a map and
// nothing else, a map is refused for a pointer, and the map's own values are
// checked against the tensor before any launch.
TEST(CompileOnlyEvaluator, ChecksTensorMapArgumentsAgainstTheKernel) {
  auto problem = Problem::Load(testing::SourcePath("tests/eval/data/tma_tile"));
  ASSERT_TRUE(problem.ok()) << problem.status().ToString();
  auto evaluator = CompileOnly(*problem);
  ASSERT_TRUE(evaluator);
  Candidate start = problem->start.ToCandidate("tma", "start");
  Evaluation e = EvaluateOne(*evaluator, start);
  EXPECT_EQ(e.status, EvalStatus::kCompiled) << e.Report() << e.details;

  auto judge = [&](const std::string& id, const std::string& source, const std::string& args) {
    Candidate c = start;
    c.id = id;
    c.source = source;
    auto plan = LaunchPlan::FromJson(R"j({"params": {"BR": 32, "BC": 32}, "launches": [{"kernel": "tile_copy_tma",
        "grid": ["ceil_div(rows, BR)", 1, 1], "block": ["4 * BR", 1, 1], "args": [)j" + args + "]}]}",
                                     id);
    EXPECT_TRUE(plan.ok()) << plan.status().ToString();
    if (plan.ok()) c.plan = *plan;
    return EvaluateOne(*evaluator, c);
  };
  const std::string rest = R"(, "y", "s", "rows:i32", "cols:i32")";
  // A pointer for the CUtensorMap parameter.
  e = judge("pointer", start.source, R"("x")" + rest);
  EXPECT_EQ(e.status, EvalStatus::kInvalidPlan);
  EXPECT_NE((e.message + e.details).find("argument 0 (\"x\") is 128 bytes in the kernel but the plan passes 8 (a pointer)"),
            std::string::npos)
      << e.message << e.details;
  // A map for a pointer parameter.
  std::string pointer_kernel = start.source;
  const std::string param = "const __grid_constant__ TensorMap x_map";
  ASSERT_NE(pointer_kernel.find(param), std::string::npos);
  pointer_kernel.replace(pointer_kernel.find(param), param.size(), "const float* x_map");
  e = judge("map_for_pointer", pointer_kernel, R"({"tensor_map": "x", "box": ["BC", "BR"]})" + rest);
  EXPECT_EQ(e.status, EvalStatus::kInvalidPlan);
  EXPECT_NE((e.message + e.details).find("is 8 bytes in the kernel but the plan passes a tensor map (128 bytes by value)"),
            std::string::npos)
      << e.message << e.details;
  // A box past TMA's 256 elements, named by its field.
  e = judge("big_box", start.source, R"({"tensor_map": "x", "box": ["BC", "BR * 16"]})" + rest);
  EXPECT_EQ(e.status, EvalStatus::kInvalidPlan);
  EXPECT_NE((e.message + e.details).find("launches[0].args[0].box[1]: 'BR * 16' = 512 (must be 1..256)"),
            std::string::npos)
      << e.message << e.details;
}

}  // namespace
}  // namespace ksearch
