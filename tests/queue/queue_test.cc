// The Redis queue on the CPU: a private redis-server per test, fake workers
// as separate processes (tests/queue/fake_queue_worker.cc), the orchestrator
// in this process. No assertion depends on how fast anything runs: waits are
// for states (a job held, a result stored), with generous deadlines.
#include "ksearch/queue.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "ksearch/tls_credentials.h"
#include "queue/redis.h"
#include "test_util.h"
#include "queue_test_util.h"

namespace ksearch {
namespace {

using internal::queue::Keys;
using internal::queue::Reply;
using testing::FakeWorker;
using testing::RedisServer;
using testing::TempDir;

// Polls `done` every 20 ms for up to `seconds`; true when it held.
template <typename F>
bool WaitFor(F done, double seconds = 60) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

class QueueTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why = redis_.Start();
    if (!why.empty()) GTEST_SKIP() << why;
    auto problem = LoadProblem("softmax");
    ASSERT_TRUE(problem.ok()) << problem.status().ToString();
    problem_ = *problem;
    temp_ = std::filesystem::temp_directory_path() /
            ("ksearch-queue-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(temp_);
    client_ = redis_.Client();
    ASSERT_NE(client_, nullptr);
  }
  void TearDown() override {
    workers_.clear();  // SIGTERM each, before the server goes
    std::error_code ec;
    std::filesystem::remove_all(temp_, ec);
  }

  // Starts a fake worker; `extra` are further arguments.
  FakeWorker& AddWorker(const std::string& name, std::vector<std::string> extra = {},
                        const std::string& arch = "sm_90") {
    std::vector<std::string> args = {"--url", redis_.url(),    "--arch",       arch,     "--name",
                                     name,    "--device-name", "fake " + arch, "--poll", "0.1"};
    args.insert(args.end(), extra.begin(), extra.end());
    workers_.emplace_back(KSEARCH_TEST_FAKE_QUEUE_WORKER, args);
    EXPECT_TRUE(workers_.back().Start());
    return workers_.back();
  }

  Candidate Fake(const std::string& id, const std::string& directives) {
    Candidate c = problem_.start.ToCandidate(id, "test");
    c.source = "// fake: " + directives + "\n" + c.source;
    return c;
  }

  QueueEvaluatorOptions Options(const std::string& run) {
    QueueEvaluatorOptions options;
    options.queue = redis_.Options();
    options.run_id = run;
    options.arch = "sm_90";
    options.compile_locally = false;
    // A broken queue must fail the test, not hang it: threads that wait on
    // Evaluate() are joined when an assertion returns early.
    options.result_timeout_seconds = 120;
    return options;
  }

  std::unique_ptr<QueueEvaluator> Orchestrator(const QueueEvaluatorOptions& options) {
    auto created = CreateQueueEvaluator(problem_, options);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    return created.ok() ? std::move(*created) : nullptr;
  }

  int64_t Integer(const std::vector<std::string>& command) {
    auto reply = client_->Command(command);
    return reply.ok() ? reply->integer : -1;
  }

  std::string Path(const std::string& name) { return (temp_ / name).string(); }
  static void Touch(const std::string& path) { std::ofstream(path) << "x"; }

  RedisServer redis_;
  Problem problem_;
  std::filesystem::path temp_;
  std::unique_ptr<internal::queue::Redis> client_;
  std::vector<FakeWorker> workers_;
  Keys keys_{"ksearch"};
};

TEST(RedisUrlTest, ParsesAndExplains) {
  auto url = ParseRedisUrl("redis://gpu-head:6380/2");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->host, "gpu-head");
  EXPECT_EQ(url->port, 6380);
  EXPECT_EQ(url->db, 2);
  EXPECT_FALSE(url->tls);
  url = ParseRedisUrl("rediss://[::1]");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->port, 6379);
  EXPECT_TRUE(url->tls);

  struct Bad {
    const char* url;
    const char* names;
  };
  for (Bad bad : {Bad{"http://h:1", "scheme 'http'"}, Bad{"h:6379", "no scheme"},
                  Bad{"redis://:6379", "no host"}, Bad{"redis://h:x1", "not a URL"}, Bad{"redis://h:/1", "port ''"},
                  Bad{"redis://h:70000", "port '70000'"}, Bad{"redis://h:1/db", "database 'db'"},
                  Bad{"redis://user:pw@h", "KSEARCH_REDIS_PASSWORD"}}) {
    auto parsed = ParseRedisUrl(bad.url);
    ASSERT_FALSE(parsed.ok()) << bad.url;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(bad.url), std::string::npos)
        << parsed.status().message();
    EXPECT_NE(parsed.status().message().find(bad.names), std::string::npos)
        << parsed.status().message();
  }
}

TEST(RedisUrlTest, AnUnreachableHostAndAMissingArchSaySo) {
  auto problem = LoadProblem("softmax");
  ASSERT_TRUE(problem.ok());
  QueueEvaluatorOptions options;
  options.arch = "sm_90";
  options.queue.url = "redis://127.0.0.1:" + std::to_string(testing::FreeLoopbackPort());
  options.queue.connect_timeout_seconds = 1;
  auto evaluator = CreateQueueEvaluator(*problem, options);
  ASSERT_FALSE(evaluator.ok());
  EXPECT_EQ(evaluator.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(evaluator.status().message().find(options.queue.url), std::string::npos)
      << evaluator.status().message();
  options.arch = "";
  EXPECT_EQ(CreateQueueEvaluator(*problem, options).status().code(), StatusCode::kInvalidArgument);
}

// rediss:// against a redis-server serving TLS only, with a certificate made
// for the test: with its CA trusted (KSEARCH_REDIS_CA_FILE) commands go
// through; without, the certificate is refused at once, saying so.
TEST(RedisTls, ConnectsWithATrustedCertificateAndRefusesAnUntrustedOne) {
  std::string binary = RedisServer::Binary();
  if (binary.empty()) GTEST_SKIP() << "redis-server is not installed";
  auto credentials = GenerateSelfSignedCertificate({"127.0.0.1"});
  ASSERT_TRUE(credentials.ok()) << credentials.status().ToString();
  TempDir dir;
  dir.Write("cert.pem", credentials->certificate_pem);
  dir.Write("key.pem", credentials->private_key_pem);
  const int port = testing::FreeLoopbackPort();
  pid_t server = testing::Spawn(
      {binary, "--port", "0", "--tls-port", std::to_string(port), "--bind", "127.0.0.1",
       "--tls-cert-file", dir.path() + "/cert.pem", "--tls-key-file", dir.path() + "/key.pem",
       "--tls-ca-cert-file", dir.path() + "/cert.pem", "--tls-auth-clients", "no", "--save", "",
       "--appendonly", "no", "--dir", dir.path(), "--logfile", dir.path() + "/redis.log"},
      /*quiet=*/true);
  ASSERT_GT(server, 0);
  QueueOptions options;
  options.url = "rediss://127.0.0.1:" + std::to_string(port);
  options.connect_timeout_seconds = 2;
  options.reconnect_timeout_seconds = 10;
  ::setenv("KSEARCH_REDIS_CA_FILE", (dir.path() + "/cert.pem").c_str(), 1);
  std::unique_ptr<internal::queue::Redis> redis;
  for (int i = 0; i < 100 && !redis; ++i) {  // until the server listens
    auto connected = internal::queue::Redis::Connect(options);
    if (connected.ok()) redis = std::move(*connected);
    else std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(redis) << "no TLS connection to " << options.url;
  ASSERT_TRUE(redis->Command({"SET", "k", "over tls"}).ok());
  auto got = redis->Command({"GET", "k"});
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->str, "over tls");

  // Another CA: the server's certificate is not trusted.
  auto other = GenerateSelfSignedCertificate({"127.0.0.1"});
  ASSERT_TRUE(other.ok());
  dir.Write("other.pem", other->certificate_pem);
  ::setenv("KSEARCH_REDIS_CA_FILE", (dir.path() + "/other.pem").c_str(), 1);
  auto refused = internal::queue::Redis::Connect(options);
  ::unsetenv("KSEARCH_REDIS_CA_FILE");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("TLS handshake"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("certificate verify failed"), std::string::npos)
      << refused.status().message();
  testing::KillAndWait(server, SIGKILL);
}

TEST_F(QueueTest, WrongPasswordIsUnauthenticated) {
  ASSERT_TRUE(client_->Command({"CONFIG", "SET", "requirepass", "s3cret"}).ok());
  ::setenv("KSEARCH_REDIS_PASSWORD", "wrong", 1);
  auto evaluator = CreateQueueEvaluator(problem_, Options("auth"));
  EXPECT_EQ(evaluator.status().code(), StatusCode::kUnauthenticated)
      << evaluator.status().ToString();
  EXPECT_EQ(evaluator.status().message().find("wrong"), std::string::npos)
      << "the password must not appear in messages";
  ::setenv("KSEARCH_REDIS_PASSWORD", "s3cret", 1);
  auto good = CreateQueueEvaluator(problem_, Options("auth"));
  EXPECT_TRUE(good.ok()) << good.status().ToString();
  ::unsetenv("KSEARCH_REDIS_PASSWORD");
}

TEST_F(QueueTest, JobsSpreadAcrossWorkers) {
  for (int w = 0; w < 3; ++w) AddWorker("w" + std::to_string(w));
  // Each of the first three jobs waits until all three are held at once, so
  // every worker must have taken one; the rest go wherever.
  std::string hold = Path("release");
  std::vector<Candidate> candidates;
  for (int i = 0; i < 3; ++i)
    candidates.push_back(Fake("held" + std::to_string(i), "hold_until=" + hold));
  for (int i = 0; i < 9; ++i) candidates.push_back(Fake("c" + std::to_string(i), "sleep_ms=5"));
  auto orchestrator = Orchestrator(Options("spread"));
  ASSERT_NE(orchestrator, nullptr);
  std::jthread release([&] {
    auto client = redis_.Client();
    WaitFor([&] {
      auto p = client->Command({"XPENDING", keys_.Jobs("sm_90", ""), "workers"});
      return p.ok() && p->elements.size() == 4 && p->elements[3].elements.size() == 3;
    });
    Touch(hold);
  });
  std::vector<Evaluation> results = orchestrator->Evaluate(candidates);
  release.join();
  ASSERT_EQ(results.size(), candidates.size());
  std::set<std::string> names;
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].status, EvalStatus::kOk) << results[i].message;
    EXPECT_EQ(results[i].candidate_id, candidates[i].id);
    EXPECT_EQ(results[i].device.name, "fake sm_90");
    if (i < 3) names.insert(orchestrator->WorkerOf(candidates[i].id));
  }
  EXPECT_EQ(names, (std::set<std::string>{"w0", "w1", "w2"}));
  EXPECT_EQ(orchestrator->stats().enqueued, 12);
  EXPECT_EQ(Integer({"HLEN", keys_.Results("spread")}), 12);
  EXPECT_EQ(Integer({"XLEN", keys_.Jobs("sm_90", "")}), 0) << "finished jobs are deleted";
}

TEST_F(QueueTest, KilledWorkerJobIsReclaimedAndFinishedElsewhere) {
  std::vector<std::string> fast = {"--visibility", "1"};
  std::string marker = Path("died");
  std::vector<Candidate> candidates = {Fake("victim", "die_once=" + marker)};
  auto options = Options("kill");
  options.queue.visibility_timeout_seconds = 1;
  auto orchestrator = Orchestrator(options);
  ASSERT_NE(orchestrator, nullptr);
  FakeWorker& first = AddWorker("first", fast);
  pid_t first_pid = first.pid();
  std::vector<Evaluation> results;
  std::jthread run([&] { results = orchestrator->Evaluate(candidates); });
  // The first worker takes the job and SIGKILLs itself; only then does a
  // second worker exist to reclaim it.
  ASSERT_TRUE(WaitFor([&] { return std::filesystem::exists(marker) && first.Ended(); }));
  AddWorker("second", fast);
  run.join();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, EvalStatus::kOk) << results[0].message;
  EXPECT_EQ(orchestrator->WorkerOf("victim"), "second");
  EXPECT_NE(first_pid, 0);
}

TEST_F(QueueTest, JobThatKillsEveryWorkerIsMarkedFailedAfterMaxAttempts) {
  std::vector<std::string> args = {"--visibility", "0.5", "--max-attempts", "2"};
  auto options = Options("poison");
  options.queue.visibility_timeout_seconds = 0.5;
  options.queue.max_attempts = 2;
  options.result_timeout_seconds = 30;  // ends the test if retries never stop
  auto orchestrator = Orchestrator(options);
  ASSERT_NE(orchestrator, nullptr);
  std::vector<Candidate> candidates = {Fake("poison", "die"), Fake("fine", "sleep_ms=1")};
  std::vector<Evaluation> results;
  std::atomic<bool> done{false};
  std::jthread run([&] {
    results = orchestrator->Evaluate(candidates);
    done = true;
  });
  // A supervisor, as systemd would be: a worker that died is started again.
  int starts = 0;
  AddWorker("worker-" + std::to_string(starts++), args);
  while (!done) {
    if (workers_.back().Ended() && starts < 20)
      AddWorker("worker-" + std::to_string(starts++), args);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  run.join();
  ASSERT_EQ(results.size(), 2u);
  EXPECT_EQ(results[0].status, EvalStatus::kCrashed);
  EXPECT_NE(results[0].message.find("gave up"), std::string::npos) << results[0].message;
  EXPECT_NE(results[0].message.find("2 deliveries"), std::string::npos) << results[0].message;
  EXPECT_EQ(results[1].status, EvalStatus::kOk) << results[1].message;
  EXPECT_EQ(orchestrator->stats().failed, 1);
  EXPECT_EQ(starts, 3) << "two deliveries killed two workers; the third gave up";
}

TEST_F(QueueTest, LateResultOfSlowWorkerIsDropped) {
  // The slow worker sends no heartbeat, so it looks dead after 0.5 s; the
  // job goes to the other worker, then both finish.
  std::string hold = Path("release");
  auto options = Options("dup");
  options.queue.visibility_timeout_seconds = 0.5;
  auto orchestrator = Orchestrator(options);
  ASSERT_NE(orchestrator, nullptr);
  AddWorker("slow", {"--visibility", "0.5", "--no-heartbeat"});
  ASSERT_TRUE(WaitFor([&] {
    auto info = client_->Command({"XINFO", "CONSUMERS", keys_.Jobs("sm_90", ""), "workers"});
    return info.ok() && !info->elements.empty();
  }));
  std::vector<Evaluation> results;
  std::jthread run([&] {
    results = orchestrator->Evaluate(std::vector<Candidate>{Fake("slow", "hold_until=" + hold)});
  });
  // Held by the slow worker first; the fast one joins only then.
  ASSERT_TRUE(WaitFor([&] {
    auto p = client_->Command({"XPENDING", keys_.Jobs("sm_90", ""), "workers"});
    return p.ok() && p->elements.size() == 4 && p->elements[0].integer == 1;
  }));
  AddWorker("fast", {"--visibility", "0.5"});
  // The fast worker reclaims it (delivery 2) and waits on the same file.
  ASSERT_TRUE(WaitFor([&] {
    auto p = client_->Command({"XPENDING", keys_.Jobs("sm_90", ""), "workers", "-", "+", "1"});
    return p.ok() && !p->elements.empty() && p->elements[0].elements[1].str == "fast";
  }));
  Touch(hold);
  run.join();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, EvalStatus::kOk);
  ASSERT_TRUE(WaitFor([&] {
    auto dups = client_->Command({"GET", keys_.Duplicates("dup")});
    return dups.ok() && dups->str == "1";
  }));
  EXPECT_EQ(Integer({"HLEN", keys_.Results("dup")}), 1);
  EXPECT_EQ(Integer({"XLEN", keys_.Done("dup")}), 1) << "one announcement, not two";
}

TEST_F(QueueTest, HeartbeatKeepsLongJobWithItsWorker) {
  auto options = Options("heartbeat");
  options.queue.visibility_timeout_seconds = 1.5;
  auto orchestrator = Orchestrator(options);
  ASSERT_NE(orchestrator, nullptr);
  AddWorker("a", {"--visibility", "1.5"});
  AddWorker("b", {"--visibility", "1.5"});
  // 4.5 s of judging, three visibility timeouts: without the heartbeat the
  // other worker would take it over.
  // Watched while it runs: a takeover shows as a second delivery.
  std::atomic<bool> finished{false};
  int64_t most_deliveries = 0;
  std::jthread watch([&] {
    auto client = redis_.Client();
    while (!finished) {
      auto p = client->Command({"XPENDING", keys_.Jobs("sm_90", ""), "workers", "-", "+", "10"});
      if (p.ok()) {
        for (const Reply& entry : p->elements)
          most_deliveries = std::max<int64_t>(most_deliveries, entry.elements.at(3).integer);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  std::vector<Evaluation> results =
      orchestrator->Evaluate(std::vector<Candidate>{Fake("long", "sleep_ms=4500")});
  finished = true;
  watch.join();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, EvalStatus::kOk);
  EXPECT_EQ(most_deliveries, 1) << "the job was taken over from a live worker";
}

TEST_F(QueueTest, WorkersTakeOnlyJobsOfTheirArchAndModel) {
  AddWorker("ampere", {}, "sm_80");
  AddWorker("hopper", {"--device-model", "NVIDIA H200"}, "sm_90");
  auto options = Options("arch");
  auto orchestrator = Orchestrator(options);
  ASSERT_NE(orchestrator, nullptr);
  std::vector<Candidate> candidates;
  for (int i = 0; i < 6; ++i) candidates.push_back(Fake("c" + std::to_string(i), "sleep_ms=1"));
  for (const Evaluation& e : orchestrator->Evaluate(candidates)) {
    EXPECT_EQ(e.status, EvalStatus::kOk);
    EXPECT_EQ(e.device.Arch(), "sm_90");
    EXPECT_EQ(orchestrator->WorkerOf(e.candidate_id), "hopper");
  }
  // Jobs that ask for a model go to workers of that model only.
  options.run_id = "model";
  options.device_model = "NVIDIA H200";
  auto by_model = Orchestrator(options);
  ASSERT_NE(by_model, nullptr);
  for (const Evaluation& e : by_model->Evaluate(candidates)) {
    EXPECT_EQ(e.status, EvalStatus::kOk);
    EXPECT_EQ(by_model->WorkerOf(e.candidate_id), "hopper");
  }
  // Nobody runs sm_75: the jobs wait, and the orchestrator's limit ends it.
  options.run_id = "nobody";
  options.device_model = "";
  options.arch = "sm_75";
  options.result_timeout_seconds = 1;
  auto orphan = Orchestrator(options);
  ASSERT_NE(orphan, nullptr);
  auto waited = orphan->Evaluate(std::vector<Candidate>{Fake("x", "sleep_ms=1")});
  EXPECT_EQ(waited[0].status, EvalStatus::kTimeout) << waited[0].message;
  EXPECT_EQ(Integer({"XLEN", keys_.Jobs("sm_75", "")}), 1) << "the job stays queued";
}

TEST_F(QueueTest, RestartedOrchestratorResumesWithoutLossOrDuplicates) {
  AddWorker("w");
  std::vector<Candidate> candidates;
  std::string gate = Path("gate");
  for (int i = 0; i < 10; ++i)
    candidates.push_back(
        Fake("c" + std::to_string(i), i < 3 ? "sleep_ms=1" : "hold_until=" + gate));
  auto options = Options("restart");
  {
    auto first = Orchestrator(options);
    ASSERT_NE(first, nullptr);
    std::atomic<bool> cancel{false};
    std::vector<Evaluation> partial;
    std::jthread run([&] { partial = first->Evaluate(candidates, &cancel); });
    // Stop it (as a crash would) once three results are in and the rest wait.
    ASSERT_TRUE(WaitFor([&] { return Integer({"HLEN", keys_.Results("restart")}) == 3; }));
    cancel = true;
    run.join();
    int cancelled = 0;
    for (const Evaluation& e : partial) cancelled += e.status == EvalStatus::kCancelled;
    EXPECT_GE(cancelled, 7);
    EXPECT_EQ(first->stats().enqueued, 10);
  }
  auto second = Orchestrator(options);
  ASSERT_NE(second, nullptr);
  Touch(gate);
  std::vector<Evaluation> results = second->Evaluate(candidates);
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(results[i].status, EvalStatus::kOk)
        << results[i].candidate_id << ": " << results[i].message;
    EXPECT_EQ(results[i].candidate_id, candidates[i].id);
  }
  QueueEvaluatorStats stats = second->stats();
  EXPECT_EQ(stats.enqueued, 0) << "nothing is enqueued twice";
  EXPECT_EQ(stats.resumed + stats.already_queued, 10);
  EXPECT_GE(stats.resumed, 3);
  EXPECT_EQ(Integer({"HLEN", keys_.Results("restart")}), 10);
  EXPECT_EQ(Integer({"SCARD", keys_.Queued("restart")}), 10);
  EXPECT_EQ(Integer({"XLEN", keys_.Done("restart")}), 10);
  auto dups = client_->Command({"GET", keys_.Duplicates("restart")});
  EXPECT_TRUE(dups.ok() && dups->nil());
  // A third run of the same candidates judges nothing again.
  auto third = Orchestrator(options);
  ASSERT_NE(third, nullptr);
  for (const Evaluation& e : third->Evaluate(candidates)) EXPECT_EQ(e.status, EvalStatus::kOk);
  EXPECT_EQ(third->stats().resumed, 10);
}

TEST_F(QueueTest, RedisRestartedMidRunLosesNothing) {
  // One job per read: a worker publishes a batch's results together, so with
  // larger batches a quick job read in the same batch as a held one (which
  // depends on how far the orchestrator had enqueued when the worker read)
  // would wait for the gate, and the four quick results would never come.
  AddWorker("w", {"--batch", "1"});
  std::vector<Candidate> candidates;
  std::string gate = Path("gate");
  for (int i = 0; i < 12; ++i)
    candidates.push_back(
        Fake("c" + std::to_string(i), i < 4 ? "sleep_ms=1" : "sleep_ms=20 hold_until=" + gate));
  auto orchestrator = Orchestrator(Options("aof"));
  ASSERT_NE(orchestrator, nullptr);
  std::vector<Evaluation> results;
  std::jthread run([&] { results = orchestrator->Evaluate(candidates); });
  ASSERT_TRUE(WaitFor([&] { return Integer({"HLEN", keys_.Results("aof")}) == 4; }));
  ASSERT_TRUE(WaitFor([&] { return Integer({"XLEN", keys_.Jobs("sm_90", "")}) == 8; }));
  // Killed outright, while the worker holds jobs and the orchestrator waits.
  redis_.Kill(SIGKILL);
  Touch(gate);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(redis_.Start(), "");
  run.join();
  ASSERT_EQ(results.size(), candidates.size());
  for (const Evaluation& e : results)
    EXPECT_EQ(e.status, EvalStatus::kOk) << e.candidate_id << ": " << e.message;
  client_ = redis_.Client();
  ASSERT_NE(client_, nullptr);
  EXPECT_EQ(Integer({"HLEN", keys_.Results("aof")}), 12);
  EXPECT_EQ(Integer({"SCARD", keys_.Queued("aof")}), 12);
}

TEST_F(QueueTest, CompileErrorsAreJudgedLocallyAndNeverEnqueued) {
  AddWorker("w");
  auto options = Options("compile");
  options.compile_locally = true;
  options.evaluator.compile_cache_dir = "off";
  options.compile_threads = 2;
  auto orchestrator = Orchestrator(options);
  ASSERT_NE(orchestrator, nullptr);
  Candidate broken = Fake("broken", "sleep_ms=1");
  broken.source += "\nthis is not CUDA;\n";
  // Compiled here for the workers' feature set (sm_90a for arch sm_90), as
  // their own judges compile: a Hopper-only instruction assembles.
  Candidate hopper = Fake("hopper", "sleep_ms=1");
  hopper.source += "\nextern \"C\" __global__ void uses_wgmma() { asm volatile(\"wgmma.fence.sync.aligned;\"); }\n";
  std::vector<Evaluation> results =
      orchestrator->Evaluate(std::vector<Candidate>{Fake("good", "sleep_ms=1"), broken, hopper});
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].status, EvalStatus::kOk) << results[0].message;
  EXPECT_EQ(results[1].status, EvalStatus::kCompileError) << results[1].message;
  EXPECT_FALSE(results[1].details.empty());
  EXPECT_EQ(results[2].status, EvalStatus::kOk) << results[2].message << results[2].details;
  EXPECT_EQ(orchestrator->stats().enqueued, 2);
  EXPECT_EQ(orchestrator->stats().compile_failures, 1);
}

}  // namespace
}  // namespace ksearch
