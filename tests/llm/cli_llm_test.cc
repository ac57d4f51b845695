// `ksearch run` against providers that fail as real ones do, as a user runs
// it: a dead server (connection refused) and a hung one (accepts, never
// answers) end the search `failed` with exit 4 and the reason, within the
// --llm-timeout / --llm-attempts given; a money budget without a price for
// the model is refused at start. No GPU (--compile-only).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "store/cli_test_util.h"
#include "llm/loopback_port.h"

namespace ksearch {
namespace {

using testing::LoopbackPort;
using testing::ReadFile;
using testing::Shell;
using testing::Spawn;
using testing::Wait;

const std::string kCli = KSEARCH_CLI_PATH;

std::string RunCommand(const std::string& base_url, const std::string& extra) {
  return "OPENAI_API_KEY=sk-test " + kCli +
         " run softmax --dims rows=64,cols=1024 --strategy branch --llm openai:gpt-4o"
         " --base-url " + base_url + " --compile-only --arch sm_90 --cache-dir off --no-db"
         " --rounds 2 --seeds 1 --ideas 2 --branches 2 " + extra;
}

TEST(CliLlm, ADeadServerEndsTheRunFailedWithTheReason) {
  LoopbackPort dead(LoopbackPort::Kind::kDead);
  ASSERT_NE(dead.port(), 0);
  std::string out;
  int code = Shell(RunCommand(dead.url() + "/v1", "--llm-attempts 2"), &out);
  EXPECT_EQ(code, 4) << out;
  EXPECT_NE(out.find("branch: failed"), std::string::npos) << out;
  EXPECT_NE(out.find("error: UNAVAILABLE"), std::string::npos) << out;
  EXPECT_NE(out.find("ideas r0.s0"), std::string::npos) << out;
  EXPECT_EQ(out.find("sk-test"), std::string::npos) << out;
}

TEST(CliLlm, AHungServerEndsTheRunFailedAfterTwoTimeouts) {
  LoopbackPort hung(LoopbackPort::Kind::kHung);
  ASSERT_NE(hung.port(), 0);
  std::string out;
  int code = Shell(RunCommand(hung.url() + "/v1", "--llm-timeout 0.3 --llm-attempts 5"), &out);
  EXPECT_EQ(code, 4) << out;
  EXPECT_NE(out.find("error: DEADLINE_EXCEEDED"), std::string::npos) << out;
  EXPECT_NE(out.find("no reply within 0.3 s"), std::string::npos) << out;
  // Two time-outs at most, not five: the attempts are counted in the line.
  EXPECT_NE(out.find("after 2 attempts"), std::string::npos) << out;
}

// While the model thinks, a log shows it: with --progress-every, a run whose
// only request hangs prints progress lines that count the request in flight
// and whose elapsed time moves. The request stays in flight until the test
// has read two such lines and stops the run (SIGTERM: graceful, exit 143).
TEST(CliLlm, ProgressLinesShowTheRequestInFlightWhileTheModelThinks) {
  LoopbackPort hung(LoopbackPort::Kind::kHung);
  ASSERT_NE(hung.port(), 0);
  char dir[] = "/tmp/ksearch-progress-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/log";
  ::setenv("OPENAI_API_KEY", "sk-test", 1);
  pid_t pid = Spawn({kCli, "run", "softmax", "--dims", "rows=64,cols=1024", "--strategy", "branch",
                     "--llm", "openai:gpt-4o", "--base-url", hung.url() + "/v1", "--compile-only",
                     "--arch", "sm_90", "--cache-dir", "off", "--no-db", "--rounds", "2", "--seeds", "1",
                     "--ideas", "2", "--branches", "2", "--llm-timeout", "600", "--llm-attempts", "1",
                     "--progress-every", "0.05"},
                    log);
  ASSERT_GT(pid, 0);
  const std::regex line(R"(\| LLM 1 in flight, 0 queued, 0 waiting to retry [^\n]*\| ([0-9.]+) s\n)");
  std::vector<double> elapsed;
  // Not a timing assertion: the request is in flight until SIGTERM, so the
  // lines come; the deadline only bounds a broken build.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  std::string text;
  while (std::chrono::steady_clock::now() < deadline) {
    text = ReadFile(log);
    elapsed.clear();
    for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator(); ++it) {
      elapsed.push_back(std::stod((*it)[1].str()));
    }
    if (elapsed.size() >= 2 && elapsed.back() > elapsed.front()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid, SIGTERM);
  const int code = Wait(pid);
  text = ReadFile(log);
  ASSERT_GE(elapsed.size(), 2u) << text;
  EXPECT_GT(elapsed.back(), elapsed.front()) << text;
  EXPECT_EQ(code, 143) << text;
  EXPECT_EQ(text.find("sk-test"), std::string::npos) << text;
  std::remove(log.c_str());
  ::rmdir(dir);
}

// --branch-llm gets a client of its own: ideas from the built-in mock, code
// from a provider that is down, which fails the run at the first branch call.
TEST(CliLlm, BranchLlmIsASeparateModel) {
  LoopbackPort dead(LoopbackPort::Kind::kDead);
  std::string out;
  int code = Shell("OPENAI_API_KEY=sk-test " + kCli +
                       " run softmax --dims rows=64,cols=1024 --strategy branch --llm mock"
                       " --branch-llm openai:gpt-4o-mini --base-url " + dead.url() +
                       "/v1 --compile-only --arch sm_90 --cache-dir off --no-db --rounds 2"
                       " --seeds 1 --ideas 2 --branches 2 --llm-attempts 1",
                   &out);
  EXPECT_EQ(code, 4) << out;
  EXPECT_NE(out.find("error: UNAVAILABLE: branches r0.s0.i"), std::string::npos) << out;
  EXPECT_NE(out.find("ideas 2"), std::string::npos) << out;  // the ideas came
}

TEST(CliLlm, AMoneyBudgetNeedsAPriceForTheModel) {
  LoopbackPort dead(LoopbackPort::Kind::kDead);
  std::string out;
  EXPECT_EQ(Shell(RunCommand(dead.url() + "/v1", "--budget-usd 3"), &out), 2) << out;
  EXPECT_NE(out.find("--budget-usd: no --prices table given for model gpt-4o"),
            std::string::npos)
      << out;
  out.clear();
  EXPECT_EQ(Shell(RunCommand(dead.url() + "/v1", "--thinking-budget 20000"), &out), 2) << out;
  EXPECT_NE(out.find("must be below --max-output-tokens"), std::string::npos) << out;
}

}  // namespace
}  // namespace ksearch
