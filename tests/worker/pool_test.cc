// The orchestrator against the fake worker (`ksearch-worker --fake`), which
// needs no GPU: each candidate's source scripts what its worker does (report
// a status, crash, hang, die, break the protocol). Whatever happens, every
// batch must come back complete, each evaluation attributed to its own
// candidate, and the next evaluation must pass.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "ksearch/worker_pool.h"
#include "test_util.h"
#include "worker/pool_testing.h"
#include "worker_test_util.h"

namespace ksearch {
namespace {

using testing::RowSoftmaxProblem;
using testing::TempDir;
using testing::TestWorkerBinary;

// Distinct valid CUDA for every script, so that each candidate is a
// different compile and a different content hash.
std::string Script(const std::string& directives) {
  return "// fake: " + directives +
         "\nextern \"C\" __global__ void row_softmax(const float* x, float* y, int cols) {\n"
         "  y[blockIdx.x * cols + threadIdx.x] = x[0];\n}\n";
}

// The fake worker's arguments (a test hook: worker/pool_testing.h).
std::vector<std::string> FakeWorker(int devices = 1) {
  return {"--fake", "--fake-devices=" + std::to_string(devices)};
}

// CreateWorkerPoolEvaluator with workers started with `arguments`.
StatusOr<std::unique_ptr<WorkerPoolEvaluator>> CreatePool(
    const Problem& problem, const WorkerPoolOptions& options,
    std::vector<std::string> arguments = FakeWorker()) {
  return internal::CreateWorkerPoolEvaluator(problem, options, std::move(arguments));
}

WorkerPoolOptions FakeOptions() {
  WorkerPoolOptions o;
  o.worker_binary = TestWorkerBinary();
  o.gpus = {0};
  o.evaluation_timeout_seconds = 1.0;
  o.worker_start_timeout_seconds = 10.0;
  // One shared cache: the fake scripts compile once per machine, not per run.
  o.evaluator.compile_cache_dir =
      (std::filesystem::temp_directory_path() / "ksearch_worker_test_cache").string();
  o.evaluator.watchdog_floor_seconds = 0.5;
  return o;
}

class FakePool : public ::testing::Test {
 protected:
  void Create(WorkerPoolOptions options = FakeOptions(),
              std::vector<std::string> arguments = FakeWorker()) {
    auto pool = CreatePool(problem_, options, std::move(arguments));
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool_ = std::move(*pool);
  }

  Candidate Make(const std::string& id, const std::string& directives) const {
    Candidate c = problem_.start.ToCandidate(id, "test");
    c.source = Script(directives + " " + id);
    return c;
  }

  // Evaluates and checks that each evaluation belongs to its candidate.
  std::vector<Evaluation> Run(const std::vector<Candidate>& batch,
                              const std::atomic<bool>* cancel = nullptr) {
    std::vector<Evaluation> out = pool_->Evaluate(batch, cancel);
    EXPECT_EQ(out.size(), batch.size());
    for (size_t i = 0; i < std::min(out.size(), batch.size()); ++i) {
      EXPECT_EQ(out[i].candidate_id, batch[i].id);
      EXPECT_EQ(out[i].content_hash, batch[i].ContentHash()) << batch[i].id;
    }
    return out;
  }

  // A worker that reported its candidate and then left may be replaced just
  // after the batch returns (when that candidate came last).
  WorkerPoolStats StatsOnceExits(int64_t exits) {
    for (int i = 0; i < 400 && pool_->stats().worker_exits < exits; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return pool_->stats();
  }

  void ExpectNextPasses() {
    auto after = Run({Make("after", "ok")});
    ASSERT_EQ(after.size(), 1u);
    EXPECT_EQ(after[0].status, EvalStatus::kOk) << after[0].Report() << after[0].message;
  }

  Problem problem_ = RowSoftmaxProblem(8, 64);
  std::unique_ptr<WorkerPoolEvaluator> pool_;
};

TEST_F(FakePool, JudgesABatchWithCubinsShippedFromTheOrchestrator) {
  Create();
  EXPECT_EQ(pool_->device().name, "fake GPU");
  ASSERT_TRUE(pool_->reference_timing().has_value());
  std::vector<Candidate> batch = {Make("a", "ok"), Make("b", "status=wrong_result"),
                                  Make("c", "ok")};
  auto out = Run(batch);
  // The fake reports launch_error for a candidate that arrives without a cubin.
  EXPECT_EQ(out[0].status, EvalStatus::kOk) << out[0].Report();
  EXPECT_EQ(out[1].status, EvalStatus::kWrongResult);
  EXPECT_EQ(out[2].status, EvalStatus::kOk);
  EXPECT_GT(out[0].compile_ms, 0.0);
  WorkerPoolStats s = pool_->stats();
  EXPECT_EQ(s.candidates, 3);
  EXPECT_EQ(s.judged, 3);
  EXPECT_EQ(s.compiles, 3);
  EXPECT_EQ(s.worker_exits, 0);
}

TEST_F(FakePool, ReportsCompileErrorsWithoutAWorker) {
  Create();
  Candidate bad = Make("bad", "ok");
  bad.source += "this is not CUDA;\n";
  auto out = Run({bad, Make("good", "ok")});
  EXPECT_EQ(out[0].status, EvalStatus::kCompileError);
  EXPECT_FALSE(out[0].details.empty());
  EXPECT_EQ(out[1].status, EvalStatus::kOk);
  EXPECT_EQ(pool_->stats().judged, 1);
}

TEST_F(FakePool, EveryFaultGetsItsStatusAndNothingIsLostOrMisattributed) {
  Create();
  int pid = pool_->worker_pids().at(0);
  std::vector<Candidate> batch = {
      Make("ok1", "ok"), Make("crash", "crash"),     Make("ok2", "ok"), Make("timeout", "timeout"),
      Make("ok3", "ok"), Make("abort", "abort"),     Make("ok4", "ok"), Make("segv", "segv"),
      Make("ok5", "ok"), Make("exit", "exit=7"),     Make("ok6", "ok"), Make("hang", "hang"),
      Make("ok7", "ok"), Make("garbage", "garbage"), Make("ok8", "ok"), Make("liar", "wrong_id"),
      Make("ok9", "ok"), Make("refuse", "refuse"),   Make("ok10", "ok")};
  auto out = Run(batch);
  std::map<std::string, const Evaluation*> by_id;
  for (const Evaluation& e : out) by_id[e.candidate_id] = &e;
  for (const Candidate& c : batch) {
    if (c.id.rfind("ok", 0) == 0) {
      EXPECT_EQ(by_id[c.id]->status, EvalStatus::kOk) << by_id[c.id]->Report();
    }
  }
  auto expect = [&](const std::string& id, EvalStatus status, const std::string& text) {
    const Evaluation& e = *by_id[id];
    EXPECT_EQ(e.status, status) << e.Report();
    EXPECT_NE((e.message + e.details).find(text), std::string::npos) << id << ": " << e.Report();
  };
  expect("crash", EvalStatus::kCrashed, "CUDA_ERROR_ILLEGAL_ADDRESS");
  expect("timeout", EvalStatus::kTimeout, "watchdog");
  expect("abort", EvalStatus::kCrashed, "SIGABRT");
  expect("segv", EvalStatus::kCrashed, "SIGSEGV");
  expect("exit", EvalStatus::kCrashed, "exited with code 7");
  expect("hang", EvalStatus::kTimeout, "per-evaluation watchdog");
  expect("garbage", EvalStatus::kCrashed, "not a ksearch worker frame");
  expect("liar", EvalStatus::kCrashed, "answered for candidate");
  expect("refuse", EvalStatus::kCrashed, "stopped working");
  // crash, timeout: one worker each; abort, segv, exit, garbage, liar,
  // refuse: two each (judged again once); hang: one.
  WorkerPoolStats s = StatsOnceExits(2 + 6 * 2 + 1);
  EXPECT_EQ(s.candidates, static_cast<int64_t>(batch.size()));
  EXPECT_EQ(s.watchdog_kills, 1);
  EXPECT_EQ(s.worker_exits, 2 + 6 * 2 + 1);

  EXPECT_NE(pool_->worker_pids().at(0), pid);
  ExpectNextPasses();
}

TEST_F(FakePool, AWorkerKilledFromOutsideIsReplacedAndItsCandidateJudgedAgain) {
  Create();
  std::vector<Candidate> batch;
  for (int i = 0; i < 6; ++i) batch.push_back(Make("slow" + std::to_string(i), "sleep_ms=150"));
  std::thread killer([&] {
    // Kill it in the middle of the second candidate.
    while (pool_->stats().judged < 1) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    int pid = pool_->worker_pids().at(0);
    if (pid > 0) ::kill(pid, SIGKILL);
  });
  auto out = Run(batch);
  killer.join();
  int again = 0;
  for (const Evaluation& e : out) {
    EXPECT_EQ(e.status, EvalStatus::kOk) << e.Report();
    if (e.details.find("judged again") != std::string::npos) {
      ++again;
      EXPECT_NE(e.details.find("SIGKILL"), std::string::npos) << e.details;
    }
  }
  EXPECT_EQ(again, 1);
  WorkerPoolStats s = pool_->stats();
  EXPECT_EQ(s.worker_exits, 1);
  EXPECT_GE(s.requeued, 1);
  EXPECT_EQ(s.judged, 6);
  ExpectNextPasses();
}

TEST_F(FakePool, ACandidateWhoseWorkerDiesOnceIsJudgedAgain) {
  Create();
  TempDir dir;
  auto out = Run({Make("flaky", "die_once=" + dir.path() + "/marker"), Make("next", "ok")});
  EXPECT_EQ(out[0].status, EvalStatus::kOk) << out[0].Report();
  EXPECT_NE(out[0].details.find("judged again"), std::string::npos);
  EXPECT_EQ(out[1].status, EvalStatus::kOk);
}

TEST_F(FakePool, SpreadsABatchOverTwoGpusAndSurvivesCrashesOnBoth) {
  WorkerPoolOptions options = FakeOptions();
  options.gpus.clear();  // every visible GPU: the fake driver reports two
  // Nothing here hangs: the 1 s watchdog of FakeOptions is not under test,
  // and a worker descheduled for a second on a loaded two-core machine (it
  // failed once so while a device call's results were unpacked) would read
  // as a timeout instead of ok or crashed.
  options.evaluation_timeout_seconds = 60.0;
  Create(options, FakeWorker(2));
  EXPECT_EQ(pool_->gpus(), (std::vector<int>{0, 1}));
  // The correct candidates take 100 ms each: while one GPU's worker is being
  // replaced after a crash (a process start, slower on a loaded machine),
  // the other cannot drain the whole batch alone, so both GPUs judge some.
  std::vector<Candidate> batch;
  for (int i = 0; i < 24; ++i) {
    std::string id = "c" + std::to_string(i);
    batch.push_back(Make(id, i % 6 == 3 ? "crash" : (i % 8 == 5 ? "segv" : "sleep_ms=100")));
  }
  auto out = Run(batch);
  std::set<int> ordinals;
  for (size_t i = 0; i < batch.size(); ++i) {
    EvalStatus want = i % 6 == 3 || i % 8 == 5 ? EvalStatus::kCrashed : EvalStatus::kOk;
    EXPECT_EQ(out[i].status, want) << out[i].Report();
    if (out[i].status == EvalStatus::kOk) ordinals.insert(out[i].device.ordinal);
  }
  EXPECT_EQ(ordinals, (std::set<int>{0, 1}));
  ExpectNextPasses();
}

// Shutting down writes a frame to each worker and reaps it; a worker that is
// already dead is reaped at once, while that frame's write is still in
// flight. The queue it was taken from is cleared then, which must leave the
// write alone (it once popped a frame that was gone: a double free).
TEST(FakePoolShutdown, SurvivesWorkersThatDieAroundShutdown) {
  Problem problem = RowSoftmaxProblem(8, 64);
  for (int trial = 0; trial < 20; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    WorkerPoolOptions options = FakeOptions();
    options.gpus.clear();
    auto pool = CreatePool(problem, options, FakeWorker(2));
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    for (int pid : (*pool)->worker_pids()) {
      if (pid > 0 && (trial % 2 == 0 || pid == (*pool)->worker_pids().front())) ::kill(pid, SIGKILL);
    }
    pool->reset();
  }
}

TEST_F(FakePool, CancelsWhatIsNotYetSentAndFinishesTheRest) {
  WorkerPoolOptions options = FakeOptions();
  options.prefetch_per_worker = 0;
  // The held candidate waits until the others are compiled and cancelled,
  // however long that takes on a loaded machine: not the watchdog's case.
  options.evaluation_timeout_seconds = 600.0;
  Create(options);
  // Every candidate waits for a file: the one worker holds one of them (the
  // first compiled) while the others queue, whatever the machine's speed.
  TempDir dir;
  const std::string release = dir.path() + "/release";
  std::vector<Candidate> batch;
  for (int i = 0; i < 8; ++i) batch.push_back(Make("s" + std::to_string(i), "wait_file=" + release));
  std::atomic<bool> cancel{false};
  std::thread stopper([&] {
    while (pool_->stats().compiles < 8) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    cancel = true;
    // Once the pool has cancelled the seven it had not sent, the one being
    // judged may finish.
    while (pool_->stats().candidates < 7) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    std::ofstream(release).put('x');
  });
  auto out = Run(batch, &cancel);
  stopper.join();
  int ok = 0, cancelled = 0;
  for (const Evaluation& e : out) {
    ok += e.status == EvalStatus::kOk;
    cancelled += e.status == EvalStatus::kCancelled;
  }
  EXPECT_EQ(ok, 1);
  EXPECT_EQ(cancelled, 7);
  for (const Evaluation& e : out) {
    if (e.status != EvalStatus::kOk && e.status != EvalStatus::kCancelled) ADD_FAILURE() << e.Report();
  }
  ExpectNextPasses();
}

TEST(FakePoolStart, AMissingWorkerBinaryIsACleanError) {
  WorkerPoolOptions options = FakeOptions();
  options.worker_binary = "/nonexistent/ksearch-worker";
  auto pool = CreatePool(RowSoftmaxProblem(8, 64), options);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), StatusCode::kNotFound);
  EXPECT_NE(pool.status().message().find("worker binary missing"), std::string::npos)
      << pool.status().message();

  ::setenv("KSEARCH_WORKER", "/nonexistent/also-missing", 1);
  auto found = FindWorkerBinary();
  ::unsetenv("KSEARCH_WORKER");
  EXPECT_EQ(found.status().code(), StatusCode::kNotFound);
  EXPECT_NE(found.status().message().find("KSEARCH_WORKER"), std::string::npos);
}

TEST(FakePoolStart, ReportsWhyAWorkerCouldNotStart) {
  struct Case {
    std::vector<std::string> arguments;
    std::vector<int> gpus;
    StatusCode code;
    std::string text;
  };
  std::vector<Case> cases = {
      {{"--fake-start=fail"}, {0}, StatusCode::kFailedPrecondition, "start-up failed as scripted"},
      {{"--fake-protocol-version=2"},
       {0},
       StatusCode::kFailedPrecondition,
       "protocol version mismatch"},
      {{"--fake-start=hang"}, {0}, StatusCode::kDeadlineExceeded, "did not become ready"},
      {{"--fake-start=crash"}, {0}, StatusCode::kUnavailable, "SIGABRT"},
      {{}, {3}, StatusCode::kFailedPrecondition, "CUDA device 3 not found"},
  };
  for (const Case& c : cases) {
    WorkerPoolOptions options = FakeOptions();
    std::vector<std::string> arguments = FakeWorker();
    arguments.insert(arguments.end(), c.arguments.begin(), c.arguments.end());
    options.gpus = c.gpus;
    options.worker_start_timeout_seconds = 0.5;
    auto pool = CreatePool(RowSoftmaxProblem(8, 64), options, arguments);
    ASSERT_FALSE(pool.ok()) << c.text;
    EXPECT_EQ(pool.status().code(), c.code) << pool.status().ToString();
    EXPECT_NE(pool.status().message().find(c.text), std::string::npos) << pool.status().ToString();
  }
}

TEST(FakePoolStart, RejectsBadOptions) {
  WorkerPoolOptions options = FakeOptions();
  options.gpus = {0, 0};
  EXPECT_EQ(CreatePool(RowSoftmaxProblem(8, 64), options).status().code(),
            StatusCode::kInvalidArgument);
  options = FakeOptions();
  options.evaluator.compile_only = true;
  EXPECT_EQ(CreatePool(RowSoftmaxProblem(8, 64), options).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(RealWorkerStart, WithoutADriverTheWorkerSaysSoCleanly) {
  std::string why;
  if (CudaDriverAvailable(&why))
    GTEST_SKIP() << "a GPU is present: the GPU tests cover the real worker";
  WorkerPoolOptions options = FakeOptions();
  auto pool = CreatePool(RowSoftmaxProblem(8, 64), options, {});  // the real judge
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), StatusCode::kFailedPrecondition) << pool.status().ToString();
  EXPECT_NE(pool.status().message().find("no CUDA driver"), std::string::npos)
      << pool.status().ToString();
}

TEST_F(FakePool, ABinaryRemovedMidRunCancelsWhatIsLeftAndTheNextCallRecovers) {
  TempDir dir;
  std::string link = dir.path() + "/ksearch-worker";
  ASSERT_EQ(::symlink(TestWorkerBinary().c_str(), link.c_str()), 0);
  WorkerPoolOptions options = FakeOptions();
  options.worker_binary = link;
  options.compile_threads = 1;  // candidates reach the worker in batch order
  Create(options);
  ASSERT_EQ(::unlink(link.c_str()), 0);
  auto out = Run({Make("first", "ok"), Make("crash", "crash"), Make("stranded", "ok")});
  EXPECT_EQ(out[0].status, EvalStatus::kOk);
  EXPECT_EQ(out[1].status, EvalStatus::kCrashed);
  EXPECT_EQ(out[2].status, EvalStatus::kCancelled);
  EXPECT_NE(out[2].message.find("worker binary missing"), std::string::npos) << out[2].message;
  ASSERT_EQ(::symlink(TestWorkerBinary().c_str(), link.c_str()), 0);
  ExpectNextPasses();
}

}  // namespace
}  // namespace ksearch
