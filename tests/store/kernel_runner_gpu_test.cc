// KernelRunner on a GPU: a cached kernel launched on the caller's stream with
// the caller's pointers computes the right answer, at the tuned dims and (when
// the caller opts out of the check) at others; keys that do not match are
// refused; a bucketed tune's dispatch table runs each bucket's kernel; and the
// exported header runs.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "cuda/objects.h"
#include "ksearch/kernel_cache.h"
#include "ksearch/kernel_runner.h"
#include "ksearch/ksearch.h"
#include "ksearch/store.h"
#include "test_util.h"

namespace ksearch {
namespace {

using internal::CudaContext;
using internal::DeviceBuffer;
using internal::Stream;
using testing::RowSoftmaxProblem;
using testing::SourcePath;
using testing::TempDir;

std::vector<float> Softmax(const std::vector<float>& x, int rows, int cols) {
  std::vector<float> y(x.size());
  for (int r = 0; r < rows; ++r) {
    double m = -1e30, sum = 0;
    for (int c = 0; c < cols; ++c) m = std::max(m, static_cast<double>(x[r * cols + c]));
    for (int c = 0; c < cols; ++c) sum += std::exp(x[r * cols + c] - m);
    for (int c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>(std::exp(x[r * cols + c] - m) / sum);
  }
  return y;
}

// The start of a program that uses the exported header `name`.h: includes,
// main() and the primary context made current; `k` names the header's
// namespace.
std::string ProgramHead(const std::string& name) {
  return "#include <cmath>\n#include <cstdio>\n#include <vector>\n#include \"" + name +
         ".h\"\nint main() {\n  namespace k = ksearch_kernels::" + name +
         ";\n  if (cuInit(0) != CUDA_SUCCESS) return 2;\n  CUdevice dev; CUcontext ctx;\n"
         "  cuDeviceGet(&dev, 0);\n  cuDevicePrimaryCtxRetain(&ctx, dev);\n  cuCtxSetCurrent(ctx);\n";
}

// Compiles `dir`/main.cc against the real driver (the exported header
// beside it), runs it and expects it to exit 0 and print "ok".
void ExpectProgramSaysOk(const TempDir& dir) {
  std::string include = KSEARCH_TEST_CUDA_INCLUDE;
  include = include.substr(0, include.find(';'));
  std::string command = std::string(KSEARCH_TEST_CXX) + " -std=c++17 -I" + include + " -I" + dir.path() + " " +
                        dir.path() + "/main.cc -o " + dir.path() + "/main -L" + KSEARCH_TEST_CUDA_LIB +
                        "/stubs -lcuda && " + dir.path() + "/main 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  int status = ::pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << ": " << output;
  EXPECT_NE(output.find("ok"), std::string::npos) << output;
}

class KernelRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KSEARCH_REQUIRE_GPU();
    auto ctx = CudaContext::Create(0);
    ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
    ctx_ = std::move(*ctx);
    auto store = Store::Open(dir_.path() + "/k.db");
    ASSERT_TRUE(store.ok());
    store_ = std::move(*store);
    cache_ = std::make_unique<KernelCache>(*store_);
    HistoryEntry judged;
    judged.candidate = problem_.start.ToCandidate("c1", "start");
    judged.evaluation.status = EvalStatus::kOk;
    TimingStats t;
    t.median_ms = 0.01;
    judged.evaluation.timing = t;
    ASSERT_TRUE(cache_->PutBest(problem_, ctx_->info(), judged).ok());
  }

  // Runs the cached kernel on rows × cols inputs and compares with the CPU.
  void CheckLaunch(KernelRunner& runner, int rows, std::vector<DimValue> dims) {
    const int cols = 256;
    const internal::DriverApi& api = ctx_->api();
    ASSERT_TRUE(ctx_->MakeCurrent().ok());
    std::vector<float> x(static_cast<size_t>(rows) * cols);
    std::mt19937 rng(rows);
    std::normal_distribution<float> normal(0.0f, 2.0f);
    for (float& v : x) v = normal(rng);
    auto dx = DeviceBuffer::Allocate(api, static_cast<int64_t>(x.size() * 4));
    auto dy = DeviceBuffer::Allocate(api, static_cast<int64_t>(x.size() * 4));
    auto stream = Stream::Create(api);
    ASSERT_TRUE(dx.ok() && dy.ok() && stream.ok());
    ASSERT_EQ(api.cuMemcpyHtoD(dx->ptr(), x.data(), x.size() * 4), CUDA_SUCCESS);
    TensorPointer tensors[] = {{"x", reinterpret_cast<void*>(dx->ptr())}, {"y", reinterpret_cast<void*>(dy->ptr())}};
    Status launched = runner.Launch(stream->get(), tensors, dims);
    ASSERT_TRUE(launched.ok()) << launched.ToString();
    ASSERT_EQ(api.cuStreamSynchronize(stream->get()), CUDA_SUCCESS);
    std::vector<float> y(x.size());
    ASSERT_EQ(api.cuMemcpyDtoH(y.data(), dy->ptr(), y.size() * 4), CUDA_SUCCESS);
    std::vector<float> expected = Softmax(x, rows, cols);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], expected[i], 1e-5f) << "at " << i;
  }

  TempDir dir_;
  Problem problem_ = RowSoftmaxProblem(64, 256);
  std::unique_ptr<CudaContext> ctx_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<KernelCache> cache_;
};

TEST_F(KernelRunnerTest, LaunchesTheCachedKernelOnTheCallersStream) {
  auto key = KernelCacheKey::ForDevice(problem_, 0);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  auto kernel = cache_->Lookup(*key);
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  auto runner = KernelRunner::Load(*kernel, problem_);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();
  CheckLaunch(**runner, 64, {});
  EXPECT_EQ(*(*runner)->WorkspaceBytes(), 0);
  // Another batch size was never checked by the search: refused ...
  TensorPointer none[] = {{"x", nullptr}, {"y", nullptr}};
  DimValue other[] = {{"rows", 200}};
  Status refused = (*runner)->Launch(nullptr, none, other);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("dim rows = 200 was not checked"), std::string::npos) << refused.ToString();
  // ... unless the caller opts out; the plan's grid follows the dims.
  KernelRunner::Options unchecked;
  unchecked.allow_unchecked_dims = true;
  auto loose = KernelRunner::Load(*kernel, problem_, unchecked);
  ASSERT_TRUE(loose.ok()) << loose.status().ToString();
  CheckLaunch(**loose, 200, {{"rows", 200}});
}

TEST_F(KernelRunnerTest, RefusesMissingTensorsAndUnknownNames) {
  auto kernel = cache_->Lookup(KernelCacheKey::For(problem_, ctx_->info()));
  ASSERT_TRUE(kernel.ok());
  auto runner = KernelRunner::Load(*kernel, problem_);
  ASSERT_TRUE(runner.ok());
  TensorPointer only_x[] = {{"x", nullptr}};
  EXPECT_EQ((*runner)->Launch(nullptr, only_x).code(), StatusCode::kInvalidArgument);
  TensorPointer wrong[] = {{"x", nullptr}, {"y", nullptr}, {"z", nullptr}};
  EXPECT_EQ((*runner)->Launch(nullptr, wrong).code(), StatusCode::kInvalidArgument);
  TensorPointer both[] = {{"x", nullptr}, {"y", nullptr}};
  DimValue bad_dim[] = {{"depth", 3}};
  EXPECT_EQ((*runner)->Launch(nullptr, both, bad_dim).code(), StatusCode::kInvalidArgument);
}

TEST_F(KernelRunnerTest, RefusesAKernelCachedForAnotherDriverOrProblem) {
  auto kernel = cache_->Lookup(KernelCacheKey::For(problem_, ctx_->info()));
  ASSERT_TRUE(kernel.ok());
  CachedKernel other = *kernel;
  other.key.driver_version += 10;
  auto runner = KernelRunner::Load(other, problem_);
  EXPECT_EQ(runner.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(runner.status().message().find("driver"), std::string::npos) << runner.status().message();
  runner = KernelRunner::Load(*kernel, RowSoftmaxProblem(128, 256));
  EXPECT_EQ(runner.status().code(), StatusCode::kFailedPrecondition);
  KernelRunner::Options loose;
  loose.require_matching_key = false;
  EXPECT_TRUE(KernelRunner::Load(other, problem_, loose).ok());
}

// KernelRunner checks a plan against its kernels with the judge's own rule
// (one PlanExecutor): a plan whose arguments do not match the kernel is
// refused at Load with the judge's message, never launched.
TEST_F(KernelRunnerTest, RefusesAPlanThatDoesNotMatchItsKernelAsTheJudgeDoes) {
  auto kernel = cache_->Lookup(KernelCacheKey::For(problem_, ctx_->info()));
  ASSERT_TRUE(kernel.ok());
  CachedKernel dropped = *kernel;
  ASSERT_FALSE(dropped.plan.launches.empty());
  auto& args = dropped.plan.launches[0].args;
  ASSERT_GE(args.size(), 2u);
  const size_t takes = args.size();
  args.pop_back();
  KernelRunner::Options loose;
  loose.require_matching_key = false;
  auto runner = KernelRunner::Load(dropped, problem_, loose);
  ASSERT_EQ(runner.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(runner.status().message().find("the plan passes " + std::to_string(takes - 1) +
                                           " arguments but the kernel takes " + std::to_string(takes)),
            std::string::npos)
      << runner.status().message();
  CachedKernel renamed = *kernel;
  renamed.plan.launches[0].kernel = "no_such_kernel";
  runner = KernelRunner::Load(renamed, problem_, loose);
  EXPECT_FALSE(runner.ok());
  EXPECT_NE(runner.status().message().find("launches[0] (no_such_kernel)"), std::string::npos)
      << runner.status().message();
}

// The header `ksearch export` writes, compiled into a program that links the
// real driver and checks the kernel's output.
TEST_F(KernelRunnerTest, TheExportedHeaderLaunchesTheKernel) {
  auto kernel = cache_->Lookup(KernelCacheKey::For(problem_, ctx_->info()));
  ASSERT_TRUE(kernel.ok());
  auto header = GenerateKernelHeader(problem_, *kernel);
  ASSERT_TRUE(header.ok());
  dir_.Write("row_softmax.h", *header);
  dir_.Write("main.cc", ProgramHead("row_softmax") + R"(  const int rows = 64, cols = 256;
  std::vector<float> x(rows * cols), y(rows * cols);
  for (int i = 0; i < rows * cols; ++i) x[i] = std::sin(i * 0.37f) * 3;
  CUdeviceptr dx, dy;
  cuMemAlloc(&dx, x.size() * 4);
  cuMemAlloc(&dy, y.size() * 4);
  cuMemcpyHtoD(dx, x.data(), x.size() * 4);
  k::Tensors t;
  t.x = reinterpret_cast<const float*>(dx);
  t.y = reinterpret_cast<float*>(dy);
  if (k::Launch(nullptr, t) != CUDA_SUCCESS) return 3;
  if (cuCtxSynchronize() != CUDA_SUCCESS) return 4;
  cuMemcpyDtoH(y.data(), dy, y.size() * 4);
  for (int r = 0; r < rows; ++r) {
    double m = -1e30, s = 0;
    for (int c = 0; c < cols; ++c) m = std::fmax(m, x[r * cols + c]);
    for (int c = 0; c < cols; ++c) s += std::exp(x[r * cols + c] - m);
    for (int c = 0; c < cols; ++c) {
      if (std::fabs(y[r * cols + c] - std::exp(x[r * cols + c] - m) / s) > 1e-5) return 5;
    }
  }
  std::puts("ok");
  return 0;
}
)");
  ExpectProgramSaysOk(dir_);
}

// The TMA kernel of tests/eval/data/tma_tile (a tensor-map argument over x,
// 32 x 32 boxes past the edge of a 100 x 72 tensor) through KernelRunner:
// the runner encodes the map over the caller's pointer and the answer is the
// judge's; a pointer TMA cannot take is refused by name; the exported header
// encodes the same map and computes the same answer.
TEST(KernelRunnerTensorMap, LaunchesATmaPlanOverTheCallersBuffers) {
  KSEARCH_REQUIRE_GPU();
  auto problem = Problem::Load(SourcePath("tests/eval/data/tma_tile"));
  ASSERT_TRUE(problem.ok()) << problem.status().ToString();
  auto ctx = CudaContext::Create(0);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  TempDir dir;
  auto store = Store::Open(dir.path() + "/k.db");
  ASSERT_TRUE(store.ok());
  KernelCache cache(**store);
  HistoryEntry judged;
  judged.candidate = problem->start.ToCandidate("tma", "start");
  judged.evaluation.status = EvalStatus::kOk;
  TimingStats t;
  t.median_ms = 0.01;
  judged.evaluation.timing = t;
  ASSERT_TRUE(cache.PutBest(*problem, (*ctx)->info(), judged).ok());
  auto kernel = cache.Lookup(KernelCacheKey::For(*problem, (*ctx)->info()));
  ASSERT_TRUE(kernel.ok()) << kernel.status().ToString();
  auto runner = KernelRunner::Load(*kernel, *problem);
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();

  const int rows = 100, cols = 72;
  const internal::DriverApi& api = (*ctx)->api();
  ASSERT_TRUE((*ctx)->MakeCurrent().ok());
  std::vector<float> x(rows * cols);
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(1.0f, 2.0f);
  for (float& v : x) v = normal(rng);
  // One spare float in front, for a misaligned x below.
  auto dx = DeviceBuffer::Allocate(api, static_cast<int64_t>((x.size() + 4) * 4));
  auto dy = DeviceBuffer::Allocate(api, static_cast<int64_t>(x.size() * 4));
  auto ds = DeviceBuffer::Allocate(api, rows * 4);
  auto stream = Stream::Create(api);
  ASSERT_TRUE(dx.ok() && dy.ok() && ds.ok() && stream.ok());
  ASSERT_EQ(api.cuMemcpyHtoD(dx->ptr(), x.data(), x.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemsetD32Async(dy->ptr(), 0x7fc00000u, x.size(), stream->get()), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemsetD32Async(ds->ptr(), 0x7fc00000u, rows, stream->get()), CUDA_SUCCESS);
  TensorPointer tensors[] = {{"x", reinterpret_cast<void*>(dx->ptr())},
                             {"y", reinterpret_cast<void*>(dy->ptr())},
                             {"s", reinterpret_cast<void*>(ds->ptr())}};
  Status launched = (*runner)->Launch(stream->get(), tensors);
  ASSERT_TRUE(launched.ok()) << launched.ToString();
  ASSERT_EQ(api.cuStreamSynchronize(stream->get()), CUDA_SUCCESS);
  std::vector<float> y(x.size()), sums(rows);
  ASSERT_EQ(api.cuMemcpyDtoH(y.data(), dy->ptr(), y.size() * 4), CUDA_SUCCESS);
  ASSERT_EQ(api.cuMemcpyDtoH(sums.data(), ds->ptr(), sums.size() * 4), CUDA_SUCCESS);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], x[i]) << "y at " << i;
  for (int r = 0; r < rows; ++r) {
    double expected = 0;
    for (int c = 0; c < cols; ++c) expected += x[r * cols + c];
    ASSERT_NEAR(sums[r], expected, 1e-4 * (1 + std::fabs(expected))) << "s at row " << r;
  }

  TensorPointer misaligned[] = {{"x", reinterpret_cast<void*>(dx->ptr() + 4)},
                                {"y", reinterpret_cast<void*>(dy->ptr())},
                                {"s", reinterpret_cast<void*>(ds->ptr())}};
  Status refused = (*runner)->Launch(stream->get(), misaligned);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("tensor 'x' is not 16-byte aligned, and kernel 'tile_copy_tma' reads it "
                                   "through a tensor map"),
            std::string::npos)
      << refused.ToString();

  // The exported header, compiled and run against the driver.
  auto header = GenerateKernelHeader(*problem, *kernel);
  ASSERT_TRUE(header.ok()) << header.status().ToString();
  dir.Write("tma_tile.h", *header);
  dir.Write("main.cc", ProgramHead("tma_tile") + R"(  const int rows = 100, cols = 72;
  std::vector<float> x(rows * cols), y(rows * cols), s(rows);
  for (int i = 0; i < rows * cols; ++i) x[i] = std::sin(i * 0.37f) * 3 + 1;
  CUdeviceptr dx, dy, ds;
  cuMemAlloc(&dx, x.size() * 4);
  cuMemAlloc(&dy, y.size() * 4);
  cuMemAlloc(&ds, s.size() * 4);
  cuMemcpyHtoD(dx, x.data(), x.size() * 4);
  k::Tensors t;
  t.x = reinterpret_cast<const float*>(dx);
  t.y = reinterpret_cast<float*>(dy);
  t.s = reinterpret_cast<float*>(ds);
  if (CUresult r = k::Launch(nullptr, t); r != CUDA_SUCCESS) { std::printf("launch %d\n", (int)r); return 3; }
  if (cuCtxSynchronize() != CUDA_SUCCESS) return 4;
  cuMemcpyDtoH(y.data(), dy, y.size() * 4);
  cuMemcpyDtoH(s.data(), ds, s.size() * 4);
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int c = 0; c < cols; ++c) {
      if (y[r * cols + c] != x[r * cols + c]) return 5;
      sum += x[r * cols + c];
    }
    if (std::fabs(s[r] - sum) > 1e-4 * (1 + std::fabs(sum))) return 6;
  }
  std::puts("ok");
  return 0;
}
)");
  ExpectProgramSaysOk(dir);
}

// C[M][N] = A[M][K] · B[K][N] with BY rows of 16 threads per block: the
// template a bucketed tune walks. `acc` is the type of the sum.
std::string TiledGemm(const char* name, const char* acc) {
  return "#ifndef BY\n#define BY 16\n#endif\nextern \"C\" __global__ void " + std::string(name) +
         "(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, "
         "int K) {\n  int row = blockIdx.y * BY + threadIdx.y, col = blockIdx.x * 16 + threadIdx.x;\n"
         "  if (row >= M || col >= N) return;\n  " + acc + " sum = 0;\n"
         "  for (int k = 0; k < K; ++k) sum += (" + acc + ")A[(long long)row * K + k] * (" + acc +
         ")B[(long long)k * N + col];\n  C[(long long)row * N + col] = (float)sum;\n}\n";
}

LaunchPlan TiledPlan(const char* kernel, int64_t by) {
  LaunchPlan plan;
  plan.params = {{"BY", by}};
  LaunchSpec l;
  l.kernel = kernel;
  l.grid = {"ceil_div(N, 16)", "ceil_div(M, BY)", "1"};
  l.block = {"16", "BY", "1"};
  l.args = {"A", "B", "C", "M:i32", "N:i32", "K:i32"};
  plan.launches = {l};
  return plan;
}

// A small GEMM judged at M = 8 (weight 3), 17 (check-only) and 1024, with
// dispatch buckets M <= 16 and M > 16, and a template over BY.
Problem BucketedGemm() {
  Problem p;
  p.name = "bucketed_gemm";
  p.description = "C = A B";
  p.dims = {{"M", 1024}, {"N", 64}, {"K", 64}};
  p.tensors = {TensorSpec{"A", DType::kF32, {"M", "K"}, TensorRole::kInput},
               TensorSpec{"B", DType::kF32, {"K", "N"}, TensorRole::kInput},
               TensorSpec{"C", DType::kF32, {"M", "N"}, TensorRole::kOutput}};
  p.input_sets = DefaultInputSets();
  p.input_sets[2] = InputSet{"offset", Distribution::Normal(1, 1), {}};
  p.flops = "2 * M * N * K";
  p.bytes = "4 * (M * K + K * N + M * N)";
  p.reference = KernelSpec{"", TiledGemm("gemm_ref", "double"), TiledPlan("gemm_ref", 16)};
  p.reference_fp32 = KernelSpec{"", TiledGemm("gemm_fp32", "float"), TiledPlan("gemm_fp32", 16)};
  p.start = p.reference_fp32;
  TemplateSpec t;
  t.name = "tiled";
  t.kernel = KernelSpec{"", "// template\n" + TiledGemm("gemm_tiled", "float"), TiledPlan("gemm_tiled", 16)};
  t.space = {{"BY", {1, 2, 4, 8, 16}}};
  p.templates = {t};
  p.shapes = {ShapeCase{"decode", {{"M", 8}}, 3.0, true}, ShapeCase{"odd", {{"M", 17}}, 1.0, false},
              ShapeCase{"prefill", {{"M", 1024}}, 1.0, true}};
  p.dispatch = DispatchSpec{"M", {16}};
  return p;
}

// A bucketed tune stores a table; the runner launches each bucket's kernel
// and refuses what was not checked.
TEST(KernelRunnerDispatch, RunsTheKernelOfEachBucketFromATunedTable) {
  KSEARCH_REQUIRE_GPU();
  Problem problem = BucketedGemm();
  ASSERT_TRUE(problem.Validate().ok()) << problem.Validate().ToString();
  EvaluatorOptions eval = testing::FastGpuOptions(5);
  auto evaluator = CreateLocalEvaluator(problem, eval);
  ASSERT_TRUE(evaluator.ok()) << evaluator.status().ToString();
  SearchOptions options;
  options.budget.max_rounds = 2;
  ParameterTuneOptions tune;
  tune.method = TuneMethod::kRandom;
  tune.batch_size = 3;
  SearchContext context;
  context.problem = &problem;
  context.evaluator = evaluator->get();
  auto summary = MakeParameterTuneSearch(options, tune)->Run(context);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  std::printf("%s\n", summary->FullReport().c_str());
  ASSERT_EQ(summary->best_per_bucket.size(), 2u);
  ASSERT_TRUE(summary->best_per_bucket[0] && summary->best_per_bucket[1]) << summary->FullReport();
  TempDir dir;
  auto store = Store::Open(dir.path() + "/k.db");
  ASSERT_TRUE(store.ok());
  KernelCache cache(**store);
  auto stored = cache.PutTable(problem, (*evaluator)->device(), summary->best_per_bucket);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(*stored, 2);
  auto key = KernelCacheKey::ForDevice(problem, 0);
  ASSERT_TRUE(key.ok()) << key.status().ToString();
  auto table = cache.LookupTable(*key);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_EQ(table->size(), 2u);
  // Each entry's figures are its bucket's: decode's time for bucket 0; odd
  // (M = 17) and prefill for bucket 1.
  ASSERT_EQ((*table)[0].evaluation.cases.size(), 1u);
  EXPECT_EQ((*table)[0].evaluation.cases[0].name, "decode");
  EXPECT_DOUBLE_EQ((*table)[0].median_ms(), (*table)[0].evaluation.cases[0].median_ms);
  ASSERT_EQ((*table)[1].evaluation.cases.size(), 2u);
  EXPECT_EQ((*table)[1].evaluation.cases[0].name, "odd");
  auto runner = KernelRunner::LoadTable(*table, problem, KernelRunner::Options());
  ASSERT_TRUE(runner.ok()) << runner.status().ToString();

  auto ctx = CudaContext::Create(0);
  ASSERT_TRUE(ctx.ok());
  const internal::DriverApi& api = (*ctx)->api();
  ASSERT_TRUE((*ctx)->MakeCurrent().ok());
  const int N = 64, K = 64;
  for (int M : {8, 5, 17, 300, 1024}) {
    SCOPED_TRACE("M = " + std::to_string(M));
    DimValue dims[] = {{"M", M}};
    auto chosen = (*runner)->KernelFor(dims);
    ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();
    EXPECT_EQ((*chosen)->key.bucket, M <= 16 ? 0 : 1);
    std::vector<float> a(static_cast<size_t>(M) * K), b(static_cast<size_t>(K) * N), c(static_cast<size_t>(M) * N);
    for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.1f * static_cast<float>(i));
    for (size_t i = 0; i < b.size(); ++i) b[i] = std::cos(0.3f * static_cast<float>(i));
    auto da = DeviceBuffer::Allocate(api, static_cast<int64_t>(a.size() * 4));
    auto db = DeviceBuffer::Allocate(api, static_cast<int64_t>(b.size() * 4));
    auto dc = DeviceBuffer::Allocate(api, static_cast<int64_t>(c.size() * 4));
    auto stream = Stream::Create(api);
    ASSERT_TRUE(da.ok() && db.ok() && dc.ok() && stream.ok());
    ASSERT_EQ(api.cuMemcpyHtoD(da->ptr(), a.data(), a.size() * 4), CUDA_SUCCESS);
    ASSERT_EQ(api.cuMemcpyHtoD(db->ptr(), b.data(), b.size() * 4), CUDA_SUCCESS);
    ASSERT_EQ(api.cuMemsetD32Async(dc->ptr(), 0x7fbadbad, c.size(), stream->get()), CUDA_SUCCESS);
    TensorPointer tensors[] = {{"A", reinterpret_cast<void*>(da->ptr())},
                               {"B", reinterpret_cast<void*>(db->ptr())},
                               {"C", reinterpret_cast<void*>(dc->ptr())}};
    Status launched = (*runner)->Launch(stream->get(), tensors, dims);
    ASSERT_TRUE(launched.ok()) << launched.ToString();
    ASSERT_EQ(api.cuStreamSynchronize(stream->get()), CUDA_SUCCESS);
    ASSERT_EQ(api.cuMemcpyDtoH(c.data(), dc->ptr(), c.size() * 4), CUDA_SUCCESS);
    for (int r = 0; r < M; ++r) {
      for (int col = 0; col < N; ++col) {
        double want = 0;
        for (int k = 0; k < K; ++k) want += static_cast<double>(a[r * K + k]) * b[k * N + col];
        ASSERT_NEAR(c[r * N + col], want, 1e-4 * (1 + std::fabs(want))) << "at row " << r << ", column " << col;
      }
    }
  }
  // N was only checked at 64.
  DimValue wide[] = {{"M", 8}, {"N", 128}};
  TensorPointer none[] = {{"A", nullptr}, {"B", nullptr}, {"C", nullptr}};
  Status refused = (*runner)->Launch(nullptr, none, wide);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("dim N = 128 was not checked"), std::string::npos) << refused.ToString();
}

}  // namespace
}  // namespace ksearch
