// `ksearch run --llm exchange:DIR`, `ksearch answer` and `ksearch resume` as
// a user of an air-gapped GPU host runs them: the search stops (exit 9) once
// its requests have waited --exchange-wait seconds, `ksearch answer` answers
// them from `ksearch mock-llm` over HTTP, and each resume takes up the
// replies; a resume on a machine without a GPU goes as far as the model's
// steps take it and stops where candidates must be judged (exit 10).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "cli_test_util.h"
#include "ksearch/evaluator.h"
#include "ksearch/exchange_llm_client.h"
#include "ksearch/run_session.h"
#include "ksearch/store.h"
#include "test_util.h"

namespace ksearch {
namespace {

namespace fs = std::filesystem;
using testing::ReadFile;
using testing::Shell;
using testing::Spawn;
using testing::TempDir;

const std::string kCli = KSEARCH_CLI_PATH;
constexpr int kCompiledOnly = 5;
constexpr int kAwaitingReplies = 9;
constexpr int kAwaitingGpu = 10;

// `ksearch mock-llm` scripted from softmax, for the life of the object.
class MockLlm {
 public:
  explicit MockLlm(const std::string& dir) {
    const std::string log = dir + "/mock.log";
    pid_ = Spawn({kCli, "mock-llm", "--problem", "softmax", "--rounds", "2", "--branches", "2"}, log);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::regex pattern("OPENAI_BASE_URL=(\\S+)");
    while (url_.empty() && std::chrono::steady_clock::now() < deadline) {
      std::smatch m;
      std::string text = ReadFile(log);
      if (std::regex_search(text, m, pattern)) url_ = m[1];
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~MockLlm() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  const std::string& url() const { return url_; }

 private:
  pid_t pid_ = -1;
  std::string url_;
};

std::set<std::string> Names(const std::string& folder) {
  std::set<std::string> out;
  auto files = ListExchangeFolder(folder);
  if (files.ok()) {
    for (const ExchangeFile& f : *files) out.insert(f.name);
  }
  return out;
}

int Pending(const std::string& folder) {
  int n = 0;
  auto files = ListExchangeFolder(folder);
  if (files.ok()) {
    for (const ExchangeFile& f : *files) n += f.reply_path.empty() ? 1 : 0;
  }
  return n;
}

TEST(CliExchange, ARunStopsToWaitForRepliesAndResumesWithThem) {
  TempDir dir;
  MockLlm mock(dir.path());
  ASSERT_FALSE(mock.url().empty()) << "mock-llm printed no URL";
  const std::string db = dir.path() + "/k.db", folder = dir.path() + "/xchg";
  const std::string answer =
      "OPENAI_API_KEY=test " + kCli + " answer " + folder + " --llm openai:mock --base-url " +
      mock.url();
  std::string out;
  ASSERT_EQ(Shell(kCli + " run softmax --dims rows=64,cols=1024 --strategy branch --llm exchange:" +
                      folder + " --compile-only --arch sm_90 --rounds 2 --seeds 1 --ideas 2"
                      " --branches 2 --cache-dir off --exchange-wait 1 --progress-every 0.3 --db " + db,
                  &out),
            kAwaitingReplies)
      << out;
  EXPECT_NE(out.find("1 request awaiting replies in " + folder), std::string::npos) << out;
  EXPECT_EQ(out.find("0 requests awaiting"), std::string::npos) << "said while nothing was pending:\n" << out;
  EXPECT_NE(out.find("stopped: 1 request has waited 1 s or more for replies in " + folder),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("'ksearch answer " + folder), std::string::npos) << out;
  EXPECT_NE(out.find("'ksearch resume 1'"), std::string::npos) << out;
  const std::set<std::string> first = Names(folder);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_TRUE(first.begin()->starts_with("ideas-r0.s0-")) << *first.begin();

  // Resumed with nothing answered: the same request, nothing new.
  out.clear();
  ASSERT_EQ(Shell(kCli + " resume 1 --db " + db, &out), kAwaitingReplies) << out;
  EXPECT_EQ(Names(folder), first);

  out.clear();
  ASSERT_EQ(Shell(answer, &out), 0) << out;
  EXPECT_NE(out.find("answered " + *first.begin() + " (ideas r0.s0)"), std::string::npos) << out;
  EXPECT_NE(out.find("answered 1, refused 0, failed 0"), std::string::npos) << out;
  EXPECT_EQ(Pending(folder), 0);

  // The ideas become four implementation requests.
  out.clear();
  ASSERT_EQ(Shell(kCli + " resume 1 --db " + db, &out), kAwaitingReplies) << out;
  EXPECT_EQ(Names(folder).size(), 5u);
  EXPECT_EQ(Pending(folder), 4);

  // The rest with `ksearch answer --watch` beside the search, to the end.
  const std::string watch_log = dir.path() + "/watch.log";
  pid_t watcher = Spawn({"/usr/bin/env", "OPENAI_API_KEY=test", kCli, "answer", folder, "--llm",
                         "openai:mock", "--base-url", mock.url(), "--watch", "--poll-seconds",
                         "0.1"},
                        watch_log);
  out.clear();
  const int code = Shell(kCli + " resume 1 --db " + db + " --exchange-wait 0", &out);
  ::kill(watcher, SIGTERM);
  const int watched = testing::Wait(watcher);
  ASSERT_EQ(code, kCompiledOnly) << out;
  EXPECT_EQ(Names(folder).size(), 10u) << "1 + 4 requests in each of two rounds";
  EXPECT_EQ(Pending(folder), 0);
  EXPECT_EQ(watched, 0) << ReadFile(watch_log);
}

TEST(CliExchange, AnswerNamesWhatItCannotUse) {
  TempDir dir;
  std::string out;
  EXPECT_EQ(Shell(kCli + " answer " + dir.path() + "/none --llm mock --problem softmax", &out), 2)
      << out;
  EXPECT_NE(out.find(dir.path() + "/none/requests"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(Shell(kCli + " answer " + dir.path() + " --llm exchange:" + dir.path(), &out), 2)
      << out;
  EXPECT_NE(out.find("answering needs a model"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(Shell(kCli + " answer " + dir.path() + " --llm mock", &out), 2) << out;
  EXPECT_NE(out.find("--mock-script"), std::string::npos) << out;
}

// A run begun on a GPU host (made here with the library: the start judged
// on an H200, the run stopped) resumed on this machine, which has none.
TEST(CliExchange, AResumeWithoutAGpuAdvancesTheModelsStepsAndStopsToJudge) {
  std::string why;
  if (CudaDriverAvailable(&why)) GTEST_SKIP() << "needs a machine without a GPU";
  TempDir dir;
  const std::string db = dir.path() + "/k.db", folder = dir.path() + "/xchg";
  {
    auto store = Store::Open(db);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto problem = LoadProblem("softmax");
    ASSERT_TRUE(problem.ok());
    auto small = problem->WithDims({{"rows", 64}, {"cols", 1024}});
    ASSERT_TRUE(small.ok());
    DeviceInfo h200;
    h200.name = "NVIDIA H200";
    h200.cc_major = 9;
    h200.multiprocessors = 132;
    RunSettings settings;
    settings.strategy = "branch";
    settings.device = h200;
    settings.options_json = ArgvToOptionsJson(
        {"softmax", "--dims", "rows=64,cols=1024", "--strategy", "branch", "--llm",
         "exchange:" + folder, "--rounds", "2", "--seeds", "1", "--ideas", "2", "--branches", "1",
         "--cache-dir", "off", "--exchange-wait", "1"});
    auto session = BeginRun(**store, *small, settings);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    Candidate start = small->start.ToCandidate("start", "start");
    Evaluation judged;
    judged.status = EvalStatus::kOk;
    judged.message = "correct";
    judged.timing = TimingStats{0.01, 0.01, 0.01, 0.01, 0.01, 0.01, 10};
    judged.device = h200;
    ASSERT_TRUE((*store)->RecordEvaluation((*session)->run_id(), start, judged).ok());
    SearchSummary stopped;
    stopped.termination = TerminationReason::kInterrupted;
    ASSERT_TRUE((*session)->Finish(stopped).ok());
  }
  const std::string answer = kCli + " answer " + folder + " --llm mock --problem softmax";
  std::string out;
  ASSERT_EQ(Shell(kCli + " resume 1 --db " + db, &out), kAwaitingReplies) << out;
  EXPECT_NE(out.find("no GPU here"), std::string::npos) << out;
  ASSERT_EQ(Names(folder).size(), 1u);
  // Written as on the GPU host: the device the run was measured on.
  auto files = ListExchangeFolder(folder);
  ASSERT_TRUE(files.ok());
  const std::string request = ReadFile(files->front().request_path);
  EXPECT_NE(request.find("NVIDIA H200 (sm_90)"), std::string::npos) << request.substr(0, 2000);
  EXPECT_NE(request.find("132 SMs"), std::string::npos);

  // Answered by hand, as plain text: the assistant's text alone (ideas the
  // scripted mock implements as kernels other than the start).
  std::ofstream(folder + "/replies/" + files->front().name + ".txt")
      << "```json\n[{\"category\": \"memory_access\", \"idea\": \"Try the kernel of mock variant "
         "1.\"},\n {\"category\": \"compute\", \"idea\": \"Try the kernel of mock variant 2.\"}]\n"
         "```\n";
  out.clear();
  ASSERT_EQ(Shell(kCli + " resume 1 --db " + db, &out), kAwaitingReplies) << out;
  EXPECT_EQ(Pending(folder), 2) << "two ideas, one implementation each";
  EXPECT_NE(out.find("usage unknown: 1 reply came as plain text"), std::string::npos) << out;
  ASSERT_EQ(Shell(answer, &out), 0) << out;

  const std::set<std::string> before = Names(folder);
  out.clear();
  ASSERT_EQ(Shell(kCli + " resume 1 --db " + db, &out), kAwaitingGpu) << out;
  EXPECT_NE(out.find("stopped: candidates must be judged"), std::string::npos) << out;
  EXPECT_NE(out.find("'ksearch resume 1'"), std::string::npos) << out;
  EXPECT_EQ(Names(folder), before) << "no request of round 1 before round 0 is judged";
  // Waiting for the GPU, the ideas' branches are written and not judged, not
  // "0 of 1 branches correct".
  out.clear();
  ASSERT_EQ(Shell(kCli + " show 1 --db " + db, &out), 0) << out;
  EXPECT_NE(out.find("1 of 1 branches written, none judged yet"), std::string::npos) << out;
  EXPECT_EQ(out.find("branches correct"), std::string::npos) << out;
  // The replies are in the run: the GPU host will not wait for them again.
  Store::Options read_only;
  read_only.read_only = true;
  auto store = Store::Open(db, read_only);
  ASSERT_TRUE(store.ok());
  auto exchanges = (*store)->LoadExchanges(1);
  ASSERT_TRUE(exchanges.ok());
  int answered = 0;
  for (const LlmExchange& x : *exchanges) answered += x.response.ok() ? 1 : 0;
  EXPECT_EQ(answered, 3);
}

}  // namespace
}  // namespace ksearch
