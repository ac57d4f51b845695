// Export round trip: a run's kernel is written out (source, plan, cubin,
// header, evaluation), each file reads back as what was judged, and the
// generated header compiles in a small program that gets the same cubin back.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "cli_test_util.h"
#include "core/file_util.h"
#include "cuda/compiler.h"
#include "ksearch/kernel_cache.h"
#include "ksearch/store.h"
#include "store/records.h"
#include "store_test_util.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::FakeDevice;
using testing::RowSoftmaxProblem;
using testing::Shell;
using testing::TempDir;

std::string Read(const std::string& path) {
  auto text = internal::ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

std::string CudaInclude() {
  std::string dirs = KSEARCH_TEST_CUDA_INCLUDE;
  return dirs.substr(0, dirs.find(';'));
}

std::string CompileCommand(const std::string& dir) {
  return std::string(KSEARCH_TEST_CXX) + " -std=c++17 -Wall -Wextra -Werror -I" + CudaInclude() + " -I" + dir;
}

struct ExportedRun {
  std::unique_ptr<Store> store;
  int64_t run_id = 0;
  HistoryEntry best;
};

ExportedRun MakeRun(const std::string& db, Problem problem = RowSoftmaxProblem(64, 256)) {
  ExportedRun out;
  Store::Options options;
  options.sync_every_commit = false;
  auto store = Store::Open(db, options);
  if (!store.ok()) std::abort();
  out.store = std::move(*store);
  NewRun spec;
  spec.problem = &problem;
  spec.strategy = "tune";
  spec.device = FakeDevice();
  out.run_id = out.store->CreateRun(spec)->id;
  for (int i = 0; i < 3; ++i) {
    Candidate c = problem.start.ToCandidate("c" + std::to_string(i), "start");
    c.source += "// variant " + std::to_string(i) + "\n";
    Evaluation e;
    e.status = i == 1 ? EvalStatus::kWrongResult : EvalStatus::kOk;
    TimingStats t;
    t.median_ms = 1.0 - 0.25 * i;
    e.timing = t;
    e.device = FakeDevice();
    EXPECT_TRUE(out.store->RecordEvaluation(out.run_id, c, e).ok());
    if (i == 2) out.best = {c, e};
  }
  return out;
}

TEST(Export, WritesTheBestKernelAndEachFileReadsBack) {
  TempDir dir;
  ExportedRun run = MakeRun(dir.path() + "/k.db");
  ExportOptions options;
  options.directory = dir.path() + "/out";
  auto exported = ExportRunKernel(*run.store, run.run_id, options);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(exported->candidate_id, "c2");
  EXPECT_EQ(Read(exported->source_path), run.best.candidate.source);
  auto plan = LaunchPlan::FromJson(Read(exported->plan_path), exported->plan_path);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(*plan, run.best.candidate.plan);
  std::string cubin = Read(exported->cubin_path);
  EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF"));
  auto evaluation = internal::EvaluationFromJson(Read(exported->evaluation_path), "evaluation");
  ASSERT_TRUE(evaluation.ok());
  EXPECT_EQ(evaluation->candidate_id, "c2");

  // The header compiles, its Launch included, and embeds the same cubin.
  std::string header_dir = dir.path() + "/out";
  dir.Write("use.cc",
            "#include \"row_softmax.h\"\n"
            "CUresult Run(CUstream stream, const float* x, float* y) {\n"
            "  ksearch_kernels::row_softmax::Tensors tensors;\n"
            "  tensors.x = x;\n  tensors.y = y;\n"
            "  ksearch_kernels::row_softmax::Dims dims;\n  dims.rows = 32;\n"
            "  return ksearch_kernels::row_softmax::Launch(stream, tensors, dims);\n}\n");
  std::string output;
  ASSERT_EQ(Shell(CompileCommand(header_dir) + " -c " + dir.path() + "/use.cc -o " + dir.path() + "/use.o", &output), 0)
      << output;
  dir.Write("dump.cc",
            "#include <cstdio>\n#include \"row_softmax.h\"\n"
            "int main() {\n"
            "  namespace k = ksearch_kernels::row_softmax;\n"
            "  std::fwrite(k::kCubin, 1, sizeof(k::kCubin), stdout);\n"
            "  return k::WorkspaceBytes() == 0 && k::Dims{}.rows == 64 ? 0 : 1;\n}\n");
  output.clear();
  ASSERT_EQ(Shell(CompileCommand(header_dir) + " " + dir.path() + "/dump.cc -o " + dir.path() + "/dump", &output), 0)
      << output;
  output.clear();
  ASSERT_EQ(Shell(dir.path() + "/dump > " + dir.path() + "/dumped.cubin", &output), 0) << output;
  EXPECT_EQ(Read(dir.path() + "/dumped.cubin"), cubin);
}

// An inout tensor is the engine's buffer, overwritten in place: a non-const
// pointer in the header's Tensors, and the comment says so.
TEST(Export, TheHeaderGivesAnInoutTensorAWritablePointer) {
  TempDir dir;
  Problem problem = RowSoftmaxProblem(64, 256);
  problem.tensors[1].role = TensorRole::kInout;
  ExportedRun run = MakeRun(dir.path() + "/k.db", problem);
  ExportOptions options;
  options.directory = dir.path() + "/out";
  auto exported = ExportRunKernel(*run.store, run.run_id, options);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  std::string header = Read(exported->header_path);
  EXPECT_NE(header.find("  const float* x = nullptr;  // input f32"), std::string::npos) << header;
  EXPECT_NE(header.find("  float* y = nullptr;  // inout f32"), std::string::npos) << header;
}

TEST(Export, ExportsAChosenCandidateAndNamesWhatIsMissing) {
  TempDir dir;
  ExportedRun run = MakeRun(dir.path() + "/k.db");
  ExportOptions options;
  options.directory = dir.path() + "/out";
  options.candidate_id = "c0";
  auto exported = ExportRunKernel(*run.store, run.run_id, options);
  ASSERT_TRUE(exported.ok()) << exported.status().ToString();
  EXPECT_EQ(exported->candidate_id, "c0");
  options.candidate_id = "c9";
  EXPECT_EQ(ExportRunKernel(*run.store, run.run_id, options).status().code(), StatusCode::kNotFound);
  options.candidate_id = "c1";  // judged wrong_result
  EXPECT_EQ(ExportRunKernel(*run.store, run.run_id, options).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExportRunKernel(*run.store, 77, ExportOptions()).status().code(), StatusCode::kNotFound);
}

// A plan with everything the header must translate: params, a workspace, two
// launches, ceil_div/min/max, and i32, i64 and f32 scalars.
TEST(Export, TheHeaderTranslatesEveryPartOfAPlan) {
  TempDir dir;
  Problem problem = RowSoftmaxProblem(64, 256);
  auto plan = LaunchPlan::FromJson(R"json({
    "params": {"BLOCK": 128, "SPLIT": 4},
    "workspace": [{"name": "partial", "dtype": "f32", "elements": "rows * 32"},
                  {"name": "counts", "dtype": "i32", "elements": "ceil_div(rows, SPLIT) + 1"}],
    "launches": [{"kernel": "first", "grid": ["ceil_div(rows, SPLIT)", "min(32, cols)", 1],
                  "block": ["BLOCK", 1, 1], "shared_bytes": "max(BLOCK * 4, 64)",
                  "args": ["x", "partial", "counts", "cols:i32", "rows * cols:i64", "0.5:f32"]},
                 {"kernel": "second", "grid": ["rows", 1, 1], "block": [256, 1, 1],
                  "args": ["partial", "y", "cols:i32"]}]})json", "plan");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  CachedKernel kernel;
  kernel.key = KernelCacheKey::For(problem, FakeDevice());
  kernel.plan = *plan;
  kernel.arch = "sm_90";
  kernel.cubin = std::string("\x7f" "ELF", 4) + std::string(100, '\0');
  auto header = GenerateKernelHeader(problem, kernel, "engine::ops");
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  dir.Write("ops.h", *header);
  dir.Write("main.cc",
            "#include \"ops.h\"\n"
            "CUresult Use(CUstream s, const float* x, float* y, void* w) {\n"
            "  engine::ops::Tensors t;\n  t.x = x;\n  t.y = y;\n"
            "  return engine::ops::Launch(s, t, engine::ops::Dims{}, w);\n}\n"
            "int main() {\n"
            "  // partial: 64*32 floats = 8192 B; counts: (16 + 1) ints = 68 B, rounded to 256.\n"
            "  return engine::ops::WorkspaceBytes() == 8192 + 256 ? 0 : 1;\n}\n");
  std::string output;
  ASSERT_EQ(Shell(CompileCommand(dir.path()) + " -c " + dir.path() + "/main.cc -o " + dir.path() + "/main.o", &output),
            0)
      << output << "\n--- header ---\n"
      << *header;
  // Linking needs the driver only for Launch; check WorkspaceBytes by running
  // a copy without it.
  dir.Write("sizes.cc",
            "#include \"ops.h\"\n"
            "int main() {\n"
            "  engine::ops::Dims d;\n  d.rows = 100;\n"
            "  // partial 100*32*4 = 12800 (a multiple of 256); counts (25 + 1)*4 = 104 -> 256.\n"
            "  return engine::ops::WorkspaceBytes() == 8192 + 256 && engine::ops::WorkspaceBytes(d) == 12800 + 256 ? 0 : 1;\n}\n");
  output.clear();
  ASSERT_EQ(Shell(CompileCommand(dir.path()) + " " + dir.path() + "/sizes.cc -o " + dir.path() + "/sizes && " +
                      dir.path() + "/sizes",
                  &output),
            0)
      << output;
  // A plan that does not fit the problem is refused.
  kernel.plan.launches[0].args[0] = "nope";
  EXPECT_EQ(GenerateKernelHeader(problem, kernel).status().code(), StatusCode::kInvalidArgument);
}

// A tensor-map argument becomes a CUtensorMap the header encodes over the
// caller's tensor at the caller's dims, as the judge's executor does.
TEST(Export, TheHeaderEncodesTensorMaps) {
  TempDir dir;
  Problem problem = RowSoftmaxProblem(64, 256);
  auto plan = LaunchPlan::FromJson(R"json({"params": {"BR": 32},
    "launches": [{"kernel": "tma", "grid": ["ceil_div(rows, BR)", 1, 1], "block": [128, 1, 1],
                  "args": [{"tensor_map": "x", "box": [64, "min(BR, rows)"], "swizzle": "none",
                            "l2_promotion": "256B"},
                           {"tensor_map": "y", "dims": ["rows * cols"], "box": [256], "oob_fill": "nan"},
                           "cols:i32"]}]})json",
                                   "plan");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  CachedKernel kernel;
  kernel.key = KernelCacheKey::For(problem, FakeDevice());
  kernel.plan = *plan;
  kernel.arch = "sm_90a";
  kernel.cubin = std::string("\x7f" "ELF", 4) + std::string(100, '\0');
  auto header = GenerateKernelHeader(problem, kernel, "engine::tma");
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  const std::string& h = *header;
  EXPECT_NE(h.find("CUtensorMap a0;  // tensor map over x"), std::string::npos) << h;
  EXPECT_NE(h.find("const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("const cuuint32_t box[2] = {static_cast<cuuint32_t>(int64_t(64)), static_cast<cuuint32_t>(ks_min(BR, rows))};"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<void*>(static_cast<const void*>(ks_tensors.x))"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B"), std::string::npos) << h;
  EXPECT_NE(h.find("const cuuint64_t dims[1] = {static_cast<cuuint64_t>(rows * cols)};"), std::string::npos) << h;
  EXPECT_NE(h.find("CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA"), std::string::npos) << h;
  EXPECT_NE(h.find("void* args[] = {&a0, &a1, &a2};"), std::string::npos) << h;
  dir.Write("tma.h", h);
  dir.Write("main.cc",
            "#include \"tma.h\"\n"
            "CUresult Use(CUstream s, const float* x, float* y) {\n"
            "  engine::tma::Tensors t;\n  t.x = x;\n  t.y = y;\n"
            "  return engine::tma::Launch(s, t);\n}\n");
  std::string output;
  ASSERT_EQ(Shell(CompileCommand(dir.path()) + " -c " + dir.path() + "/main.cc -o " + dir.path() + "/main.o", &output),
            0)
      << output << "\n--- header ---\n"
      << h;
}

// A launch with a cluster goes through cuLaunchKernelEx with the cluster
// attribute, as the judge's executor launches it; a kernel compiled with
// __cluster_dims__ launches with its own, through cuLaunchKernel.
TEST(Export, TheHeaderLaunchesClusters) {
  TempDir dir;
  Problem problem = RowSoftmaxProblem(64, 256);
  auto plan = LaunchPlan::FromJson(R"json({"params": {"CL": 4},
    "launches": [{"kernel": "split", "grid": ["rows * CL", 1, 1], "block": [128, 1, 1],
                  "cluster": ["CL", 1, 1], "args": ["x", "y", "cols:i32"]},
                 {"kernel": "wide", "grid": ["rows", 1, 1], "block": [64, 1, 1],
                  "cluster": [16], "non_portable_cluster_size": true, "args": ["y"]},
                 {"kernel": "declared", "grid": ["rows", 1, 1], "block": [64, 1, 1],
                  "cluster": [2], "args": ["y"]}]})json",
                                   "plan");
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  internal::CompilerOptions compiler_options;
  compiler_options.cache_dir = "";
  internal::Compiler compiler(compiler_options);
  auto compiled = compiler.Compile(
      {"extern \"C\" __global__ void split(const float* x, float* y, int n) { y[0] = x[0] + n; }\n"
       "extern \"C\" __global__ void wide(float* y) { y[0] = 1.f; }\n"
       "extern \"C\" __global__ void __cluster_dims__(2, 1, 1) declared(float* y) { y[1] = 2.f; }\n",
       {},
       "sm_90",
       "clusters.cu"});
  ASSERT_TRUE(compiled.ok()) << compiled.status().ToString();
  ASSERT_TRUE(compiled->ok) << compiled->log;
  CachedKernel kernel;
  kernel.key = KernelCacheKey::For(problem, FakeDevice());
  kernel.plan = *plan;
  kernel.arch = "sm_90";
  kernel.cubin = compiled->cubin;
  auto header = GenerateKernelHeader(problem, kernel, "engine::clusters");
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  const std::string& h = *header;
  auto launch_text = [&](int l) {
    size_t from = h.find("launches[" + std::to_string(l) + "]");
    size_t to = h.find("launches[" + std::to_string(l + 1) + "]");
    return h.substr(from, to == std::string::npos ? std::string::npos : to - from);
  };
  const std::string split = launch_text(0), wide = launch_text(1), declared = launch_text(2);
  EXPECT_NE(split.find("cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;"), std::string::npos) << split;
  EXPECT_NE(split.find("cluster.value.clusterDim.x = static_cast<unsigned>(CL);"), std::string::npos) << split;
  EXPECT_NE(split.find("ks_result = cuLaunchKernelEx(&config, ks_module.functions[0], args, nullptr);"),
            std::string::npos)
      << split;
  EXPECT_EQ(split.find("NON_PORTABLE"), std::string::npos) << split;
  EXPECT_NE(wide.find("cuFuncSetAttribute(ks_module.functions[1], CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)"),
            std::string::npos)
      << wide;
  EXPECT_NE(wide.find("cluster.value.clusterDim.x = static_cast<unsigned>(int64_t(16));"), std::string::npos) << wide;
  EXPECT_EQ(declared.find("cuLaunchKernelEx"), std::string::npos) << declared;
  EXPECT_NE(declared.find("cuLaunchKernel(ks_module.functions[2]"), std::string::npos) << declared;
  dir.Write("clusters.h", h);
  dir.Write("main.cc",
            "#include \"clusters.h\"\n"
            "CUresult Use(CUstream s, const float* x, float* y) {\n"
            "  engine::clusters::Tensors t;\n  t.x = x;\n  t.y = y;\n"
            "  return engine::clusters::Launch(s, t);\n}\n");
  std::string output;
  ASSERT_EQ(Shell(CompileCommand(dir.path()) + " -c " + dir.path() + "/main.cc -o " + dir.path() + "/main.o", &output),
            0)
      << output << "\n--- header ---\n"
      << h;
}

}  // namespace
}  // namespace ksearch
