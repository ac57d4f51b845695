// The worker pool against real faults on a GPU (ctest label `gpu`; skipped
// without a driver): a __trap(), an illegal address, an infinite loop, a
// worker SIGKILLed in the middle of a batch, the worker binary gone. Each
// batch must come back complete with the right statuses, and the next
// evaluation on that GPU must pass. The test process itself never creates a
// CUDA context: everything runs in the workers.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <thread>

#include "ksearch/worker_pool.h"
#include "test_util.h"
#include "worker_test_util.h"

namespace ksearch {
namespace {

using testing::RowSoftmaxProblem;
using testing::RowSoftmaxSource;
using testing::TempDir;
using testing::TestWorkerBinary;

constexpr char kTrap[] =
    R"(extern "C" __global__ void row_softmax(const float* x, float* y, int cols) {
  if (blockIdx.x == 7) __trap();
  y[(long long)blockIdx.x * cols + threadIdx.x] = x[0];
})";

constexpr char kIllegalAddress[] =
    R"(extern "C" __global__ void row_softmax(const float* x, float* y, int cols) {
  y[(long long)blockIdx.x * cols + threadIdx.x + (1ll << 40)] = x[0];
})";

// Reads through a volatile pointer each iteration, so the compiler cannot
// prove the loop ends; inputs are never NaN, so it does not.
constexpr char kInfiniteLoop[] =
    R"(extern "C" __global__ void row_softmax(const float* x, float* y, int cols) {
  const volatile float* v = x;
  while (v[0] == v[0]) {}
  y[0] = 0;
})";

WorkerPoolOptions GpuOptions() {
  WorkerPoolOptions o;
  o.worker_binary = TestWorkerBinary();
  o.gpus = {0};
  o.evaluator.max_timing_seconds = 0.3;
  o.evaluator.warmup_ms = 5;
  o.evaluator.watchdog_floor_seconds = 1.0;
  o.evaluator.replay_input_seed = 7;
  o.compile_threads = 1;  // candidates reach the GPU in batch order
  return o;
}

class GpuPool : public ::testing::Test {
 protected:
  void SetUp() override {
    KSEARCH_REQUIRE_GPU();
    Create(GpuOptions());
  }

  void Create(const WorkerPoolOptions& options) {
    auto pool = CreateWorkerPoolEvaluator(problem_, options);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(*pool);
  }

  Candidate Make(const std::string& id, const std::string& source) const {
    Candidate c = problem_.start.ToCandidate(id, "test");
    c.source = source;
    return c;
  }
  Candidate Good(const std::string& id) const { return Make(id, RowSoftmaxSource("float")); }

  std::vector<Evaluation> Run(const std::vector<Candidate>& batch) {
    std::vector<Evaluation> out = pool_->Evaluate(batch);
    EXPECT_EQ(out.size(), batch.size());
    for (size_t i = 0; i < std::min(out.size(), batch.size()); ++i) {
      EXPECT_EQ(out[i].candidate_id, batch[i].id);
      EXPECT_EQ(out[i].content_hash, batch[i].ContentHash());
      std::printf("[%s] %s", batch[i].id.c_str(), out[i].Report().c_str());
    }
    std::fflush(stdout);
    return out;
  }

  // A worker that reported its candidate and then left may be replaced just
  // after the batch returns (when that candidate came last).
  WorkerPoolStats StatsOnceExits(int64_t exits) {
    for (int i = 0; i < 2000 && pool_->stats().worker_exits < exits; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return pool_->stats();
  }

  void ExpectNextPasses() {
    auto after = Run({Good("after")});
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0].status, EvalStatus::kOk) << after[0].Report();
    EXPECT_EQ(after[0].device.ordinal, 0);
  }

  // A batch good / bad / good: the bad one gets `status` with `text` in its
  // message, its worker is replaced, the others pass.
  void ExpectFault(const char* source, EvalStatus status, const std::string& text) {
    int before = pool_->worker_pids().at(0);
    auto out = Run({Good("before"), Make("bad", source), Good("behind")});
    EXPECT_EQ(out[0].status, EvalStatus::kOk) << out[0].Report();
    EXPECT_EQ(out[1].status, status) << out[1].Report();
    EXPECT_NE(out[1].message.find(text), std::string::npos) << out[1].message;
    EXPECT_EQ(out[2].status, EvalStatus::kOk) << out[2].Report();
    EXPECT_EQ(StatsOnceExits(1).worker_exits, 1);
    EXPECT_NE(pool_->worker_pids().at(0), before);
    ExpectNextPasses();
  }

  Problem problem_ = RowSoftmaxProblem(512, 4096);
  std::unique_ptr<WorkerPoolEvaluator> pool_;
};

TEST_F(GpuPool, CorrectKernelPassesWithSaneFigures) {
  auto out = Run({Good("correct")});
  ASSERT_EQ(out[0].status, EvalStatus::kOk) << out[0].Report();
  ASSERT_TRUE(out[0].timing.has_value());
  EXPECT_GT(out[0].timing->median_ms, 0.0);
  ASSERT_TRUE(out[0].speedup.has_value());
  EXPECT_GT(out[0].speedup->ratio, 0.5);  // the same kernel as the baseline
  EXPECT_LT(out[0].speedup->ratio, 2.0);
  EXPECT_FALSE(out[0].device.name.empty());
  ASSERT_TRUE(pool_->reference_timing().has_value());
  EXPECT_EQ(pool_->stats().worker_exits, 0);
}

TEST_F(GpuPool, TrapIsCrashedWithTheCudaErrorAndTheNextPasses) {
  ExpectFault(kTrap, EvalStatus::kCrashed, "CUDA_ERROR");
}

TEST_F(GpuPool, IllegalAddressIsCrashedWithTheCudaErrorAndTheNextPasses) {
  ExpectFault(kIllegalAddress, EvalStatus::kCrashed, "CUDA_ERROR_ILLEGAL_ADDRESS");
}

TEST_F(GpuPool, InfiniteLoopTimesOutAndTheNextPasses) {
  ExpectFault(kInfiniteLoop, EvalStatus::kTimeout, "watchdog");
}

TEST_F(GpuPool, AWorkerSigkilledMidBatchIsReplacedAndNothingIsLost) {
  std::vector<Candidate> batch;
  // A candidate takes ~30 ms here; 20 of them leave ~0.5 s of batch after
  // the kill, which lands as soon as two are judged.
  for (int i = 0; i < 20; ++i) batch.push_back(Good("c" + std::to_string(i)));
  int victim = pool_->worker_pids().at(0);
  std::thread killer([&] {
    while (pool_->stats().judged < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ::kill(victim, SIGKILL);
  });
  auto out = Run(batch);
  killer.join();
  for (const Evaluation& e : out) EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report();
  // The replacement is accounted asynchronously: allow it a moment.
  for (int i = 0; i < 200 && pool_->stats().worker_exits < 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  WorkerPoolStats s = pool_->stats();
  EXPECT_EQ(s.worker_exits, 1);
  EXPECT_EQ(s.candidates, 20);
  EXPECT_NE(pool_->worker_pids().at(0), victim);
  ExpectNextPasses();
}

TEST_F(GpuPool, TheWorkerBinaryGoneCancelsWhatIsLeftAndTheNextCallRecovers) {
  TempDir dir;
  std::string link = dir.path() + "/ksearch-worker";
  ASSERT_EQ(::symlink(TestWorkerBinary().c_str(), link.c_str()), 0);
  WorkerPoolOptions options = GpuOptions();
  options.worker_binary = link;
  Create(options);
  ASSERT_EQ(::unlink(link.c_str()), 0);
  auto out = Run({Good("first"), Make("trap", kTrap), Good("stranded")});
  EXPECT_EQ(out[0].status, EvalStatus::kOk) << out[0].Report();
  EXPECT_EQ(out[1].status, EvalStatus::kCrashed) << out[1].Report();
  EXPECT_EQ(out[2].status, EvalStatus::kCancelled) << out[2].Report();
  EXPECT_NE(out[2].message.find("worker binary missing"), std::string::npos) << out[2].message;
  ASSERT_EQ(::symlink(TestWorkerBinary().c_str(), link.c_str()), 0);
  ExpectNextPasses();
}

TEST(GpuPoolStart, AMissingWorkerBinaryIsACleanError) {
  KSEARCH_REQUIRE_GPU();
  WorkerPoolOptions options = GpuOptions();
  options.worker_binary = "/nonexistent/ksearch-worker";
  auto pool = CreateWorkerPoolEvaluator(RowSoftmaxProblem(512, 4096), options);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), StatusCode::kNotFound);
  EXPECT_NE(pool.status().message().find("worker binary missing"), std::string::npos);
}

TEST(GpuPoolStart, AnAbsentGpuIsACleanError) {
  KSEARCH_REQUIRE_GPU();
  WorkerPoolOptions options = GpuOptions();
  options.gpus = {64};
  auto pool = CreateWorkerPoolEvaluator(RowSoftmaxProblem(512, 4096), options);
  ASSERT_FALSE(pool.ok());
  std::printf("%s\n", pool.status().ToString().c_str());
  EXPECT_NE(pool.status().message().find("GPU 64"), std::string::npos) << pool.status().ToString();
}

TEST(GpuPoolStart, UsesEveryVisibleGpuByDefault) {
  KSEARCH_REQUIRE_GPU();
  WorkerPoolOptions options = GpuOptions();
  options.gpus.clear();
  Problem problem = RowSoftmaxProblem(512, 4096);
  auto pool = CreateWorkerPoolEvaluator(problem, options);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  std::vector<int> gpus = (*pool)->gpus();
  ASSERT_FALSE(gpus.empty());
  std::printf("workers on %zu GPU(s)\n", gpus.size());
  std::vector<Candidate> batch;
  for (size_t i = 0; i < 4 * gpus.size(); ++i) {
    Candidate c = problem.start.ToCandidate("c" + std::to_string(i), "test");
    c.source = RowSoftmaxSource("float");
    batch.push_back(c);
  }
  std::vector<Evaluation> out = (*pool)->Evaluate(batch);
  std::set<int> used;
  for (const Evaluation& e : out) {
    EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report();
    used.insert(e.device.ordinal);
  }
  EXPECT_EQ(used.size(), gpus.size());
}

}  // namespace
}  // namespace ksearch
