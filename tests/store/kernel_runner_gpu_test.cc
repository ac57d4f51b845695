// KernelRunner on a GPU: a cached kernel launched on the caller's stream with
// the caller's pointers computes the right answer, at the tuned dims and at
// others; keys that do not match are refused; and the exported header runs.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <random>

#include "cuda/objects.h"
#include "ksearch/kernel_cache.h"
#include "ksearch/kernel_runner.h"
#include "ksearch/store.h"
#include "test_util.h"

namespace ksearch {
namespace {

using internal::CudaContext;
using internal::DeviceBuffer;
using internal::Stream;
using testing::RowSoftmaxProblem;
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
  // Another batch size: the plan's grid follows the dims.
  CheckLaunch(**runner, 200, {{"rows", 200}});
  EXPECT_EQ(*(*runner)->WorkspaceBytes(), 0);
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
  dir_.Write("main.cc", R"(#include <cmath>
#include <cstdio>
#include <vector>
#include "row_softmax.h"
int main() {
  namespace k = ksearch_kernels::row_softmax;
  if (cuInit(0) != CUDA_SUCCESS) return 2;
  CUdevice dev; CUcontext ctx;
  cuDeviceGet(&dev, 0);
  cuDevicePrimaryCtxRetain(&ctx, dev);
  cuCtxSetCurrent(ctx);
  const int rows = 64, cols = 256;
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
  std::string include = KSEARCH_TEST_CUDA_INCLUDE;
  include = include.substr(0, include.find(';'));
  std::string command = std::string(KSEARCH_TEST_CXX) + " -std=c++17 -I" + include + " -I" + dir_.path() + " " +
                        dir_.path() + "/main.cc -o " + dir_.path() + "/main -L" + KSEARCH_TEST_CUDA_LIB +
                        "/stubs -lcuda && " + dir_.path() + "/main 2>&1";
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

}  // namespace
}  // namespace ksearch
