// `ksearch run` against providers that fail as real ones do, as a user runs
// it: a dead server (connection refused) and a hung one (accepts, never
// answers) end the search `failed` with exit 4 and the reason, within the
// --llm-timeout / --llm-attempts given; a money budget without a price for
// the model is refused at start. No GPU (--compile-only).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "store/cli_test_util.h"
#include "llm/loopback_port.h"

namespace ksearch {
namespace {

using testing::LoopbackPort;
using testing::Shell;

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
