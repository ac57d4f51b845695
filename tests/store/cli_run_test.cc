// `ksearch run` records in the database, `ksearch resume` continues a run that
// was SIGKILLed and ends with what an uninterrupted run has, and `ksearch
// mock-llm` serves a search. All without a GPU (--compile-only).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include "cli_test_util.h"
#include "ksearch/store.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::Join;
using testing::Shell;
using testing::Spawn;
using testing::TempDir;

const std::string kCli = KSEARCH_CLI_PATH;

// The candidates recorded for run 1 of `db`, by id with status (-1 when the
// database or run is not there yet).
std::map<std::string, std::string> Recorded(const std::string& db) {
  std::map<std::string, std::string> out;
  Store::Options options;
  options.read_only = true;
  auto store = Store::Open(db, options);
  if (!store.ok()) return out;
  auto history = (*store)->LoadRunHistory(1, false);
  if (!history.ok()) return out;
  for (const HistoryEntry& e : history->entries) {
    out[e.candidate.id + " " + e.candidate.ContentHash()] = std::string(ToString(e.evaluation.status));
  }
  return out;
}

// A branch search with the problem-scripted mock model, judged up to
// compilation: enough candidates that a kill lands in the middle.
std::vector<std::string> SearchArgs(const std::string& db) {
  return {kCli, "run", "softmax", "--dims", "rows=64,cols=1024", "--strategy", "branch",
          "--llm", "mock", "--compile-only", "--arch", "sm_90", "--rounds", "3", "--seeds", "2",
          "--ideas", "3", "--branches", "2", "--cache-dir", "off", "--db", db};
}

// A compile-only run ends with exit 5: kernels compiled, none was run.
constexpr int kCompiledOnly = 5;

TEST(CliRun, RecordsTheRunAndListShowsIt) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  std::string out;
  ASSERT_EQ(Shell(kCli + " run softmax --dims rows=64,cols=1024 --compile-only --arch sm_90"
                  " --rounds 2 --batch 3 --db " + db, &out), kCompiledOnly) << out;
  EXPECT_NE(out.find("recording run 1 in " + db), std::string::npos) << out;
  EXPECT_NE(out.find("run 1 recorded in"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(kCli + " list --db " + db + " --json", &out), 0) << out;
  EXPECT_NE(out.find("\"status\":\"completed\""), std::string::npos) << out;
  EXPECT_GE(Recorded(db).size(), 3u) << "the start kernel and two rounds of up to three";
  // A completed run is not resumed by accident.
  out.clear();
  EXPECT_EQ(Shell(kCli + " resume 1 --db " + db, &out), 2) << out;
  EXPECT_NE(out.find("already completed"), std::string::npos) << out;
}

// A problem with dispatch buckets: the JSON summary holds each bucket's best
// (its name, the candidate and the bucket's own cases), the table the
// kernel cache stores; a problem without buckets has no such field.
TEST(CliRun, TheJsonSummaryHoldsEachDispatchBucketsBest) {
  std::string out;
  ASSERT_EQ(Shell(kCli + " run linear --dims M=64,N=64,K=64 --strategy tune --rounds 1 --batch 1"
                  " --compile-only --arch sm_90 --cache-dir off --no-db --json", &out),
            kCompiledOnly)
      << out;
  EXPECT_NE(out.find("\"best_per_bucket\":[{\"bucket\":\"M<=16\",\"candidate_id\":\"c0\""), std::string::npos)
      << out;
  EXPECT_NE(out.find("{\"bucket\":\"M>16\",\"candidate_id\":\"c0\""), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(kCli + " run softmax --dims rows=64,cols=1024 --strategy tune --rounds 1 --batch 1"
                  " --compile-only --arch sm_90 --cache-dir off --no-db --json", &out),
            kCompiledOnly)
      << out;
  EXPECT_EQ(out.find("best_per_bucket"), std::string::npos) << out;
}

TEST(CliRun, NoDbWritesNothingAndBadInputIsNamed) {
  TempDir dir;
  std::string out;
  ASSERT_EQ(Shell("cd " + dir.path() + " && " + kCli +
                      " run softmax --dims rows=64,cols=1024 --compile-only --arch sm_90"
                      " --rounds 1 --batch 2 --no-db",
                  &out), kCompiledOnly) << out;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/ksearch.db"));
  out.clear();
  EXPECT_EQ(Shell(kCli + " resume 7 --db " + dir.path() + "/none.db", &out), 2) << out;
  EXPECT_NE(out.find("no such database"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(Shell(kCli + " run softmax --gpus 0,x --compile-only --arch sm_90 --no-db", &out), 2);
  EXPECT_NE(out.find("--gpus: x is not a number"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(Shell(kCli + " run softmax --queue redis://127.0.0.1:9 --no-db", &out), 2) << out;
  EXPECT_NE(out.find("--queue needs --arch"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(Shell(kCli + " run softmax --queue redis://127.0.0.1:9 --arch sm_90 --compile-only"
                  " --no-db", &out), 2) << out;
  EXPECT_NE(out.find("drop --in-process, --compile-only and --gpus"), std::string::npos) << out;
  out.clear();
  dir.Write("junk.db", "this is not a database");
  EXPECT_EQ(Shell(kCli + " run softmax --compile-only --arch sm_90 --db " + dir.path() + "/junk.db",
                  &out), 2) << out;
  EXPECT_NE(out.find("not an SQLite database"), std::string::npos) << out;
}

// SIGKILL at a few moments; each time `ksearch resume` finishes the run with
// exactly the candidates of an uninterrupted run.
TEST(CliRun, ResumeAfterSigkillEndsWithTheUninterruptedRun) {
  TempDir dir;
  const std::string whole = dir.path() + "/whole.db";
  std::string out;
  ASSERT_EQ(Shell(Join(SearchArgs(whole)), &out), kCompiledOnly) << out;
  const auto expected = Recorded(whole);
  ASSERT_GT(expected.size(), 10u);

  int killed_mid_run = 0;
  for (int trial = 0; trial < 3; ++trial) {
    const std::string db = dir.path() + "/killed" + std::to_string(trial) + ".db";
    pid_t pid = Spawn(SearchArgs(db), dir.path() + "/log" + std::to_string(trial));
    ASSERT_GT(pid, 0);
    // Kill once a growing share of the candidates is recorded.
    const size_t at = 1 + expected.size() * static_cast<size_t>(trial + 1) / 5;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (Recorded(db).size() < at && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    const auto before = Recorded(db);
    if (before.size() < expected.size()) ++killed_mid_run;
    // Nothing recorded is lost or changed by the resume.
    out.clear();
    ASSERT_EQ(Shell(kCli + " resume 1 --db " + db, &out), kCompiledOnly) << out;
    EXPECT_NE(out.find("resuming run 1"), std::string::npos) << out;
    const auto after = Recorded(db);
    for (const auto& [id, state] : before) {
      ASSERT_TRUE(after.count(id)) << id;
      EXPECT_EQ(after.at(id), state) << id;
    }
    EXPECT_EQ(after, expected) << "trial " << trial;
  }
  EXPECT_GT(killed_mid_run, 0) << "no kill landed before the run ended; the test proved nothing";
}

// `ksearch mock-llm` serves a branch search run against it over HTTP.
// A compile-only run never runs a kernel: the idea outcomes that show and
// the report print count compiled branches, never correct ones.
TEST(CliRun, CompileOnlyOutcomesSayCompiledInShowAndTheReport) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  std::vector<std::string> args = SearchArgs(db);
  args[std::find(args.begin(), args.end(), "--rounds") - args.begin() + 1] = "2";
  std::string out;
  ASSERT_EQ(Shell(Join(args), &out), kCompiledOnly) << out;
  std::string shown;
  ASSERT_EQ(Shell(kCli + " show 1 --db " + db, &shown), 0) << shown;
  EXPECT_NE(shown.find("branches compiled (compile-only: not run, not judged)"), std::string::npos) << shown;
  EXPECT_EQ(shown.find("branches correct"), std::string::npos) << shown;
  const std::string html = dir.path() + "/report.html";
  ASSERT_EQ(Shell(kCli + " report 1 --db " + db + " --html " + html, &out), 0) << out;
  std::ifstream in(html);
  const std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("branches compiled (compile-only: not run, not judged)"), std::string::npos);
  EXPECT_EQ(page.find("branches correct"), std::string::npos);
}

TEST(CliRun, MockLlmServesASearch) {
  TempDir dir;
  const std::string log = dir.path() + "/mock.log";
  pid_t pid = Spawn({kCli, "mock-llm", "--problem", "softmax", "--rounds", "2", "--branches", "2"},
                    log);
  ASSERT_GT(pid, 0);
  std::string url;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::regex pattern("OPENAI_BASE_URL=(\\S+)");
  while (url.empty() && std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    if (std::regex_search(text, m, pattern)) url = m[1];
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(url.empty()) << "mock-llm printed no URL";
  std::string out;
  int code = Shell("OPENAI_API_KEY=test " + kCli +
                       " run softmax --dims rows=64,cols=1024 --strategy branch --llm openai:mock"
                       " --base-url " + url + " --compile-only --arch sm_90 --rounds 2 --seeds 1"
                       " --ideas 2 --branches 2 --no-db --json",
                   &out);
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_EQ(code, kCompiledOnly) << out;
  EXPECT_NE(out.find("\"candidates\":"), std::string::npos) << out;
  EXPECT_EQ(out.find("idea request failed"), std::string::npos) << out;
  ASSERT_TRUE(WIFEXITED(status)) << "mock-llm did not stop cleanly on SIGTERM";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::smatch m;
  ASSERT_TRUE(std::regex_search(text, m, std::regex("served (\\d+) requests"))) << text;
  EXPECT_GE(std::stoi(m[1]), 3) << "ideas for round 0 and at least two branches";
}

}  // namespace
}  // namespace ksearch
