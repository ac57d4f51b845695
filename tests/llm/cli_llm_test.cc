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

#include "ksearch/mock_llm_server.h"
#include "llm/loopback_port.h"
#include "search/search_test_util.h"
#include "store/cli_test_util.h"

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

// Starts a branch search whose model request hangs at `hung` (until the
// test stops it), its output to `log`, with `extra` flags.
pid_t SpawnHungRun(const LoopbackPort& hung, const std::string& log, const std::vector<std::string>& extra) {
  ::setenv("OPENAI_API_KEY", "sk-test", 1);
  std::vector<std::string> args = {kCli, "run", "softmax", "--dims", "rows=64,cols=1024", "--strategy", "branch",
                                   "--llm", "openai:gpt-4o", "--base-url", hung.url() + "/v1", "--compile-only",
                                   "--arch", "sm_90", "--cache-dir", "off", "--no-db", "--rounds", "2", "--seeds",
                                   "1", "--ideas", "2", "--branches", "2", "--llm-timeout", "600", "--llm-attempts",
                                   "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return Spawn(args, log);
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
  pid_t pid = SpawnHungRun(hung, log, {"--progress-every", "0.05"});
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

// Without --progress-every a log still hears from a model that is thinking:
// a progress line every 30 seconds by default, counting the request in
// flight. (No time is asserted: the request hangs until SIGTERM, so the
// line comes; the deadline only bounds a broken build.)
TEST(CliLlm, ALogShowsProgressWhileARequestIsOutstandingByDefault) {
  LoopbackPort hung(LoopbackPort::Kind::kHung);
  ASSERT_NE(hung.port(), 0);
  char dir[] = "/tmp/ksearch-progress-default-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string log = std::string(dir) + "/log";
  pid_t pid = SpawnHungRun(hung, log, {});
  ASSERT_GT(pid, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(150);
  std::string text;
  while (std::chrono::steady_clock::now() < deadline) {
    text = ReadFile(log);
    if (text.find("| LLM 1 in flight") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ::kill(pid, SIGTERM);
  const int code = Wait(pid);
  text = ReadFile(log);
  // Off a terminal nothing else prints the line during round 0: the round's
  // own line comes at its end.
  EXPECT_NE(text.find("round 1 of 2 | evaluated 1"), std::string::npos) << text;
  EXPECT_NE(text.find("| LLM 1 in flight"), std::string::npos) << text;
  EXPECT_EQ(code, 143) << text;
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

// `ksearch run softmax` with the branch strategy on `model` at `base_url`,
// compile-only and unrecorded, with `extra` flags (rounds and k/n/b too).
std::string BranchRun(const std::string& base_url, const std::string& model, const std::string& extra) {
  return "OPENAI_API_KEY=sk-test " + kCli + " run softmax --dims rows=64,cols=1024 --strategy branch --llm " +
         model + " --base-url " + base_url + " --compile-only --arch sm_90 --cache-dir off --no-db " + extra;
}

// A mock server on loopback that bills what it writes, scripted for the
// softmax problem: ideas for idea prompts, the test's row softmax for the
// rest. Replies take a while, so that requests overlap.
std::unique_ptr<MockLlmServer> BillingServer(double latency_ms = 20) {
  MockLlmServer::Options options;
  options.latency_ms = latency_ms;
  auto mock = MockLlmServer::Start(options);
  EXPECT_TRUE(mock.ok()) << mock.status().ToString();
  if (!mock.ok()) return nullptr;
  EXPECT_TRUE((*mock)->AddRule(MockRule{"# Round", "", MockReply{testing::IdeasReply(3)}}).ok());
  (*mock)->SetDefaultReply(MockReply{testing::KernelReply("k")});
  return std::move(*mock);
}

// "billed: N requests (F failed), tokens in A, out B; …" → {A, B}.
std::pair<int64_t, int64_t> BilledTokens(const std::string& out, const std::string& label = "billed: ") {
  const std::regex line(label + R"(\d+ requests \(\d+ failed\), tokens in (\d+), out (\d+);)");
  std::smatch m;
  if (!std::regex_search(out, m, line)) return {-1, -1};
  return {std::stoll(m[1].str()), std::stoll(m[2].str())};
}

// The printed total is what the server billed, within the budget: no
// request is sent that could overspend it, none is cancelled for it, and
// every reply that came back was counted.
TEST(CliLlm, ATokenBudgetIsNeverOverspentAndThePrintedTotalIsWhatTheServerBilled) {
  auto mock = BillingServer();
  ASSERT_NE(mock, nullptr);
  std::string out;
  int code = Shell(BranchRun(mock->openai_base_url(), "openai:gpt-4o",
                            "--rounds 0 --seeds 1 --ideas 3 --branches 3 --budget-tokens 30000 "
                            "--max-output-tokens 1500"),
                   &out);
  EXPECT_EQ(code, 5) << out;  // compile-only: kernels compiled, none run
  EXPECT_NE(out.find("branch: token budget reached"), std::string::npos) << out;
  const MockLlmServer::Counters billed = mock->counters();
  const auto [in, printed_out] = BilledTokens(out);
  EXPECT_EQ(in, billed.billed_input_tokens) << out;
  EXPECT_EQ(printed_out, billed.billed_output_tokens) << out;
  EXPECT_LE(billed.billed_input_tokens + billed.billed_output_tokens, 30000) << out;
  EXPECT_EQ(out.find("cancelled"), std::string::npos) << out;
  EXPECT_NE(out.find("not sent: it could use"), std::string::npos) << out;
}

// Flags refused at start leave nothing in the store: no run to list, none
// to resume.
TEST(CliLlm, FlagsRefusedAtStartRecordNothing) {
  LoopbackPort dead(LoopbackPort::Kind::kDead);
  char dir[] = "/tmp/ksearch-refused-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string db = std::string(dir) + "/k.db";
  auto run = [&](const std::string& extra, std::string* out) {
    std::string command = RunCommand(dead.url() + "/v1", extra);
    command.replace(command.find(" --no-db"), 8, " --db " + db);
    return Shell(command, out);
  };
  const std::pair<std::string, std::string> cases[] = {
      {"--budget-usd 3", "--budget-usd: no --prices table given for model gpt-4o"},
      {"--thinking-budget 20000", "--thinking-budget 20000 must be below --max-output-tokens (16384)"},
      {"--thinking-budget 500", "--thinking-budget 500: Anthropic's extended thinking takes at least 1024 tokens"},
  };
  for (const auto& [extra, expected] : cases) {
    std::string out;
    EXPECT_EQ(run(extra, &out), 2) << extra << "\n" << out;
    EXPECT_NE(out.find(expected), std::string::npos) << out;
    EXPECT_EQ(out.find("recording run"), std::string::npos) << out;
  }
  std::string listed;
  Shell(kCli + " list --db " + db, &listed);
  EXPECT_EQ(listed.find("softmax"), std::string::npos) << listed;
  std::remove(db.c_str());
  std::remove((db + "-wal").c_str());
  std::remove((db + "-shm").c_str());
  ::rmdir(dir);
}

// What a model will not do with a flag is said once, not dropped silently;
// and a price table without the model's price warns that costs show as $0.
TEST(CliLlm, SettingsTheModelDoesNotTakeAreSaidOnce) {
  auto mock = BillingServer(0);
  ASSERT_NE(mock, nullptr);
  char dir[] = "/tmp/ksearch-notes-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string prices = std::string(dir) + "/prices.json";
  {
    std::FILE* f = std::fopen(prices.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(R"({"models": {"claude-*": {"input_usd_per_million_tokens": 3, "output_usd_per_million_tokens": 15}}})", f);
    std::fclose(f);
  }
  std::string out;
  const std::string flags = "--rounds 1 --seeds 1 --ideas 1 --branches 1 --reasoning-effort high --thinking-budget 2000";
  Shell(BranchRun(mock->openai_base_url(), "openai:gpt-4o", flags + " --prices " + prices), &out);
  auto count = [&](const std::string& piece) {
    size_t n = 0;
    for (size_t at = out.find(piece); at != std::string::npos; at = out.find(piece, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("note: --reasoning-effort is for OpenAI reasoning models (o1, o3, o4, gpt-5…); openai:gpt-4o "
                  "takes none, so it is not sent"),
            1u)
      << out;
  EXPECT_EQ(count("note: --thinking-budget is for Anthropic's extended thinking; openai:gpt-4o takes none"), 1u)
      << out;
  EXPECT_EQ(count("warning: the price table " + prices + " has no price for model gpt-4o: its costs show as $0.0000"),
            1u)
      << out;
  // A reasoning model takes the effort but not the thinking budget.
  out.clear();
  Shell(BranchRun(mock->openai_base_url(), "openai:gpt-5", flags), &out);
  EXPECT_EQ(count("--reasoning-effort is for"), 0u) << out;
  EXPECT_EQ(count("note: --thinking-budget is for Anthropic's extended thinking; openai:gpt-5 takes none, so it is "
                  "not sent (OpenAI reasoning models: --reasoning-effort)"),
            1u)
      << out;
  std::remove(prices.c_str());
  ::rmdir(dir);
}

// An outage after round 0 (every request 500 after its retries) ends the run
// `failed` (exit 4), not `completed` for lack of work, and the run resumes
// without --reopen once the provider is back; the resumed session prints
// what it was billed and what the run was, labelled.
TEST(CliLlm, AnOutageAfterRoundZeroFailsTheRunWhichResumesOnceTheProviderIsBack) {
  auto mock = BillingServer(0);
  ASSERT_NE(mock, nullptr);
  mock->ClearScript();
  MockReply down;
  down.fault = MockFault::kHttpError;
  down.http_status = 500;
  ASSERT_TRUE(mock->AddRule(MockRule{"# Round 0:", "", MockReply{testing::IdeasReply(2)}}).ok());
  ASSERT_TRUE(mock->AddRule(MockRule{"", "# Round [1-9]", down}).ok());
  char dir[] = "/tmp/ksearch-outage-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string db = std::string(dir) + "/k.db";
  std::string command = BranchRun(mock->openai_base_url(), "openai:gpt-4o",
                                  "--rounds 3 --seeds 1 --ideas 2 --branches 2 --llm-attempts 2");
  command.replace(command.find(" --no-db"), 8, " --db " + db);
  std::string out;
  EXPECT_EQ(Shell(command, &out), 4) << out;
  EXPECT_NE(out.find("branch: failed"), std::string::npos) << out;
  EXPECT_NE(out.find("round 1: no request reached the model: ideas r1.s0"), std::string::npos) << out;
  EXPECT_EQ(out.find("nothing left to try"), std::string::npos) << out;
  EXPECT_NE(out.find("continue with 'ksearch resume 1'"), std::string::npos) << out;

  // The provider is back: the run resumes as it is, and goes on.
  mock->ClearScript();
  ASSERT_TRUE(mock->AddRule(MockRule{"# Round", "", MockReply{testing::IdeasReply(2)}}).ok());
  const int64_t billed_before = mock->counters().billed_input_tokens;
  out.clear();
  EXPECT_EQ(Shell("OPENAI_API_KEY=sk-test " + kCli + " resume 1 --db " + db + " --progress-every 5", &out), 5)
      << out;
  EXPECT_NE(out.find("branch: round budget reached after 3 rounds"), std::string::npos) << out;
  const auto [session_in, session_out] = BilledTokens(out, "billed this session: ");
  const auto [run_in, run_out] = BilledTokens(out, R"(billed over the run \(2 sessions\): )");
  EXPECT_EQ(session_in, mock->counters().billed_input_tokens - billed_before) << out;
  EXPECT_GT(run_in, session_in) << out;
  EXPECT_GT(run_out, session_out) << out;
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((db + suffix).c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace ksearch
