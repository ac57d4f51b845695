// The HTML report (self-contained; rendered by headless Chromium with the
// chart and the tree laid out) and the CLI commands that read a database.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <regex>

#include "cli_test_util.h"
#include "core/file_util.h"
#include "ksearch/run_report.h"
#include "ksearch/run_session.h"
#include "ksearch/store.h"
#include "store_test_util.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::FakeEvaluator;
using testing::FakePaidLlm;
using testing::RowSoftmaxProblem;
using testing::Shell;
using testing::TempDir;
using testing::ToyLlmSearch;

// A finished LLM search of three rounds, recorded in `db`.
int64_t RecordASearch(const std::string& db) {
  Store::Options options;
  options.sync_every_commit = false;
  auto store = Store::Open(db, options);
  if (!store.ok()) std::abort();
  Problem problem = RowSoftmaxProblem(64, 256);
  RunSettings settings;
  settings.strategy = "toy";
  settings.device = testing::FakeDevice();
  auto session = BeginRun(**store, problem, settings);
  if (!session.ok()) std::abort();
  FakeEvaluator inner(problem);
  auto evaluator = (*session)->WrapEvaluator(inner);
  FakePaidLlm live;
  auto llm = (*session)->WrapLlmClient(live);
  ToyLlmSearch search(**llm, 3, 2, 3);
  SearchContext context;
  context.problem = &problem;
  context.evaluator = evaluator->get();
  context.observers.push_back((*session)->observer());
  if (!(*session)->Finish(search.Run(context)).ok()) std::abort();
  return (*session)->run_id();
}

RunHistory LoadOrDie(const std::string& db, int64_t run) {
  auto store = Store::Open(db);
  if (!store.ok()) std::abort();
  auto history = (*store)->LoadRunHistory(run);
  if (!history.ok()) std::abort();
  return *history;
}

TEST(Report, IsOneSelfContainedPageWithEverySection) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  int64_t run = RecordASearch(db);
  RunHistory history = LoadOrDie(db, run);
  std::string html = RunReportHtml(history);
  EXPECT_NE(html.find("<svg id=\"speedup-chart\""), std::string::npos);
  EXPECT_NE(html.find("<polyline class=\"best-so-far\""), std::string::npos);
  // Time per round too: the fastest kernel of each round in ms, and how
  // long the round took.
  const size_t time_chart = html.find("<svg id=\"time-chart\"");
  ASSERT_NE(time_chart, std::string::npos);
  const std::string time_svg =
      html.substr(time_chart, html.find("</svg>", time_chart) - time_chart);
  EXPECT_NE(time_svg.find("<polyline class=\"best-so-far\""), std::string::npos) << time_svg;
  EXPECT_TRUE(std::regex_search(
      time_svg,
      std::regex(R"(<title>round 0: [0-9.e+-]+ ms \(the round took [0-9.]+ s\)</title>)")))
      << time_svg;
  EXPECT_NE(html.find("<ul id=\"idea-tree\""), std::string::npos);
  EXPECT_NE(html.find("class=\"idea\""), std::string::npos);
  EXPECT_NE(html.find("id=\"status-counts\""), std::string::npos);
  EXPECT_NE(html.find("id=\"llm-totals\""), std::string::npos);
  EXPECT_NE(html.find("toy-model"), std::string::npos);
  const HistoryEntry* best = history.Best();
  ASSERT_NE(best, nullptr);
  EXPECT_NE(html.find(">" + best->candidate.id + "</b>"), std::string::npos);
  // Nothing is fetched: no external script, style, image or font.
  EXPECT_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=)")));
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST(Report, EscapesWhatTheModelWrote) {
  RunHistory history;
  history.run.id = 1;
  history.run.problem_name = "p<script>";
  Idea idea;
  idea.id = "i0";
  idea.text = "use <script>alert(1)</script> & friends";
  history.ideas.push_back(idea);
  std::string html = RunReportHtml(history);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;alert(1)&lt;/script&gt; &amp; friends"), std::string::npos);
  EXPECT_NE(html.find("no timed correct kernel yet"), std::string::npos);
}

TEST(Report, RendersInHeadlessChromiumWithTheChartAndTheTreeLaidOut) {
  const char* chromium = "/usr/bin/chromium";
  if (::access(chromium, X_OK) != 0) {
    GTEST_SKIP() << "needs Debian's chromium package (" << chromium << " is missing)";
  }
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  int64_t run = RecordASearch(db);
  const std::string page = dir.Write("report.html", RunReportHtml(LoadOrDie(db, run)));
  std::string dom;
  int status = Shell(std::string("timeout 120 ") + chromium +
                         " --headless --no-sandbox --disable-gpu --disable-background-networking"
                         " --no-first-run --user-data-dir=" + dir.path() + "/profile --dump-dom file://" + page,
                     &dom);
  ASSERT_EQ(status, 0) << dom.substr(0, 4000);
  std::smatch m;
  ASSERT_TRUE(std::regex_search(dom, m, std::regex(R"re(data-rendered="(\w+)")re"))) << dom.substr(0, 4000);
  EXPECT_EQ(m[1], "yes");
  ASSERT_TRUE(std::regex_search(dom, m, std::regex(R"re(data-chart-width="(\d+)")re")));
  EXPECT_GT(std::stoi(m[1]), 100);
  ASSERT_TRUE(std::regex_search(dom, m, std::regex(R"re(data-tree-items="(\d+)")re")));
  EXPECT_GE(std::stoi(m[1]), 3 * 2 * 3);  // every candidate, plus the ideas
  ASSERT_TRUE(std::regex_search(dom, m, std::regex(R"re(data-tree-height="(\d+)")re")));
  EXPECT_GT(std::stoi(m[1]), 50);
  EXPECT_NE(dom.find("<polyline class=\"best-so-far\""), std::string::npos);
}

#ifdef KSEARCH_CLI_PATH
TEST(StoreCli, ListShowBestExportAndReportReadTheDatabase) {
  TempDir dir;
  const std::string db = dir.path() + "/k.db";
  int64_t run = RecordASearch(db);
  const std::string cli = std::string(KSEARCH_CLI_PATH) + " ";
  const std::string r = std::to_string(run);
  std::string out;
  ASSERT_EQ(Shell(cli + "list --db " + db, &out), 0) << out;
  EXPECT_NE(out.find("row_softmax"), std::string::npos) << out;
  EXPECT_NE(out.find("completed"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(cli + "list --json --db " + db, &out), 0) << out;
  EXPECT_EQ(out.front(), '[');
  EXPECT_NE(out.find("\"strategy\":\"toy\""), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(cli + "show " + r + " --db " + db, &out), 0) << out;
  EXPECT_NE(out.find("best kernel"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(cli + "show " + r + " --json --db " + db, &out), 0) << out;
  EXPECT_NE(out.find("\"by_status\""), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(cli + "best row_softmax --db " + db, &out), 0) << out;
  EXPECT_NE(out.find("best kernel for row_softmax"), std::string::npos) << out;
  out.clear();
  ASSERT_EQ(Shell(cli + "report " + r + " --html " + dir.path() + "/r.html --db " + db, &out), 0) << out;
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/r.html"));
  out.clear();
  ASSERT_EQ(Shell(cli + "export " + r + " --out " + dir.path() + "/exp --db " + db, &out), 0) << out;
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/exp/row_softmax.h"));
  // Errors: one line, documented exit codes.
  out.clear();
  EXPECT_EQ(Shell(cli + "show 999 --db " + db, &out), 2) << out;
  EXPECT_NE(out.find("run 999"), std::string::npos) << out;
  out.clear();
  EXPECT_EQ(Shell(cli + "list --db " + dir.path() + "/missing.db", &out), 2) << out;
  dir.Write("text.db", std::string(2000, 'x'));
  out.clear();
  EXPECT_EQ(Shell(cli + "list --db " + dir.path() + "/text.db", &out), 2) << out;
  EXPECT_NE(out.find("not an SQLite database"), std::string::npos) << out;
}
#endif

}  // namespace
}  // namespace ksearch
