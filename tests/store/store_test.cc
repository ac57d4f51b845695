// The store's records: what goes in comes back, recording is idempotent, and
// a reader in another process sees consistent data while a search writes.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <boost/json.hpp>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <set>
#include <thread>

#include "ksearch/run_session.h"
#include "ksearch/store.h"
#include "core/file_util.h"
#include "store/records.h"
#include "store_test_util.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::FakeDevice;
using testing::FakeVerdict;
using testing::RowSoftmaxProblem;
using testing::SourcePath;
using testing::TempDir;

Candidate MakeCandidate(const Problem& problem, int index, std::string idea_id = "") {
  Candidate c = problem.start.ToCandidate("c" + std::to_string(index), "llm:m");
  c.source += "\n// variant " + std::to_string(index) + "\n";
  c.compile_options = {"--use_fast_math"};
  c.provenance.parent_id = index > 0 ? "c0" : "";
  c.provenance.idea_id = std::move(idea_id);
  c.provenance.round = index / 4;
  return c;
}

Evaluation OkEvaluation(const Candidate& c, double median_ms) {
  Evaluation e = FakeVerdict(c, FakeDevice());
  e.status = EvalStatus::kOk;
  e.mismatch.reset();
  TimingStats t;
  t.median_ms = median_ms;
  t.repetitions = 10;
  e.timing = t;
  Speedup s;
  s.baseline = "reference_fp32";
  s.ratio = 1.0 / median_ms;
  e.speedup = s;
  return e;
}

LlmExchange Exchange(const std::string& text, uint64_t id, bool ok = true) {
  LlmExchange x;
  x.provider = "openai";
  x.request.model = "m";
  x.request.messages.push_back({ChatMessage::Role::kUser, text});
  x.request.tag = "tag " + text;
  x.request_hash = RequestHash(x.request);
  x.request_id = id;
  x.started_unix_ms = 1700000000000;
  if (ok) {
    ChatResponse r;
    r.content = "reply to " + text;
    r.input_tokens = 10;
    r.output_tokens = 20;
    r.cost_usd = 0.5;
    r.model = "m-1";
    x.response = r;
  } else {
    x.response = ResourceExhaustedError("openai: HTTP 429");
  }
  return x;
}

std::unique_ptr<Store> OpenOrDie(const std::string& path, Store::Options options = {}) {
  options.sync_every_commit = false;
  auto store = Store::Open(path, options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  if (!store.ok()) std::abort();
  return std::move(*store);
}

RunInfo NewRunOrDie(Store& store, const Problem& problem, std::string strategy = "branch") {
  NewRun spec;
  spec.problem = &problem;
  spec.strategy = std::move(strategy);
  spec.options_json = R"({"rounds":3,"model":"m"})";
  spec.seed = 7;
  spec.device = FakeDevice();
  auto run = store.CreateRun(spec);
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  return *run;
}

TEST(Store, CreatesAVersionedDatabaseInWalMode) {
  TempDir dir;
  const std::string path = dir.path() + "/k.db";
  { auto store = OpenOrDie(path); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  auto query = [&](const char* sql) {
    sqlite3_stmt* stmt = nullptr;
    sqlite3_prepare_v2(db, sql, -1, &stmt, nullptr);
    sqlite3_step(stmt);
    std::string text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    sqlite3_finalize(stmt);
    return text;
  };
  EXPECT_EQ(query("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(query("PRAGMA user_version"), std::to_string(Store::SchemaVersion()));
  EXPECT_EQ(query("PRAGMA application_id"), std::to_string(0x6B736462));
  sqlite3_close(db);
}

TEST(Store, DefaultPathIsKsearchDbUnlessTheEnvironmentSaysOtherwise) {
  ::unsetenv("KSEARCH_DB");
  EXPECT_EQ(Store::DefaultPath(), "ksearch.db");
  ::setenv("KSEARCH_DB", "/tmp/elsewhere.db", 1);
  EXPECT_EQ(Store::DefaultPath(), "/tmp/elsewhere.db");
  ::unsetenv("KSEARCH_DB");
}

TEST(Store, GivesBackEverythingARunRecorded) {
  TempDir dir;
  Problem problem = RowSoftmaxProblem(64, 256);
  auto store = OpenOrDie(dir.path() + "/k.db");
  RunInfo run = NewRunOrDie(*store, problem);
  EXPECT_GT(run.id, 0);
  EXPECT_EQ(run.status, RunStatus::kRunning);
  EXPECT_EQ(run.problem_fingerprint, problem.Fingerprint());

  ASSERT_TRUE(store->RecordRoundStart(run.id, 0, {"start"}).ok());
  Idea idea;
  idea.id = "i0";
  idea.parent_id = "c0";
  idea.category = IdeaCategory::kAsynchrony;
  idea.text = "double-buffer the row through shared memory";
  idea.generator = "llm:m";
  idea.outcome = "best branch 1.31x faster than parent";
  idea.best_speedup_over_parent = 1.31;
  ASSERT_TRUE(store->RecordIdea(run.id, idea).ok());
  std::vector<HistoryEntry> written;
  for (int i = 0; i < 5; ++i) {
    Candidate c = MakeCandidate(problem, i, i > 0 ? "i0" : "");
    Evaluation e = i == 3 ? FakeVerdict(c, FakeDevice()) : OkEvaluation(c, 1.0 - 0.1 * i);
    if (i == 3) {
      e.status = EvalStatus::kWrongResult;
      e.timing.reset();
      e.speedup.reset();
    }
    ASSERT_TRUE(store->RecordEvaluation(run.id, c, e).ok());
    written.push_back({c, e});
  }
  ASSERT_TRUE(store->RecordRoundEnd(run.id, 0).ok());
  ASSERT_TRUE(store->RecordExchange(run.id, 1, Exchange("a", 1)).ok());
  ASSERT_TRUE(store->RecordExchange(run.id, 1, Exchange("b", 2, false)).ok());

  auto history = store->LoadRunHistory(run.id);
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  ASSERT_EQ(history->entries.size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    const HistoryEntry& got = history->entries[i];
    EXPECT_EQ(got.candidate.id, written[i].candidate.id);
    EXPECT_EQ(got.candidate.ContentHash(), written[i].candidate.ContentHash());
    EXPECT_EQ(got.candidate.plan, written[i].candidate.plan);
    EXPECT_EQ(got.candidate.compile_options, written[i].candidate.compile_options);
    EXPECT_EQ(got.candidate.provenance.parent_id, written[i].candidate.provenance.parent_id);
    EXPECT_EQ(got.candidate.provenance.idea_id, written[i].candidate.provenance.idea_id);
    Evaluation expected = written[i].evaluation;
    expected.content_hash = written[i].candidate.ContentHash();
    EXPECT_EQ(got.evaluation.ToJson(), expected.ToJson());
  }
  ASSERT_EQ(history->ideas.size(), 1u);
  EXPECT_EQ(history->ideas[0].text, idea.text);
  EXPECT_EQ(history->ideas[0].category, IdeaCategory::kAsynchrony);
  EXPECT_EQ(history->ideas[0].outcome, idea.outcome);
  ASSERT_EQ(history->rounds.size(), 1u);
  EXPECT_EQ(history->rounds[0].seed_ids, std::vector<std::string>{"start"});
  EXPECT_GT(history->rounds[0].ended_unix_ms, 0);
  ASSERT_EQ(history->exchanges.size(), 2u);
  EXPECT_EQ(history->exchanges[0].response->content, "reply to a");
  EXPECT_FALSE(history->exchanges[1].response.ok());
  EXPECT_EQ(history->Best()->candidate.id, "c4");

  auto found = store->FindRun(run.id);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->candidates, 5);
  EXPECT_EQ(found->correct, 4);
  EXPECT_EQ(found->best_candidate_id, "c4");
  ASSERT_TRUE(found->best_median_ms.has_value());
  EXPECT_DOUBLE_EQ(*found->best_median_ms, 0.6);
  EXPECT_EQ(found->llm_exchanges, 2);
  EXPECT_EQ(found->input_tokens, 10);
  EXPECT_DOUBLE_EQ(found->cost_usd, 0.5);
  EXPECT_EQ(found->options_json, R"({"rounds":3,"model":"m"})");
  EXPECT_EQ(found->seed, 7u);
  EXPECT_EQ(found->device_name, "Fake GPU");
  EXPECT_EQ(found->device_arch, "sm_90");

  ASSERT_TRUE(store->FinishRun(run.id, RunEnd{RunStatus::kCompleted, "round budget reached", ""}).ok());
  found = store->FindRun(run.id);
  EXPECT_EQ(found->status, RunStatus::kCompleted);
  EXPECT_GT(found->ended_unix_ms, 0);
  EXPECT_NE(history->SummaryJson().find("\"best\":{\"candidate\":{\"id\":\"c4\""), std::string::npos);
}

TEST(Store, RecordingTheSameThingTwiceChangesNothing) {
  TempDir dir;
  Problem problem = RowSoftmaxProblem(64, 256);
  auto store = OpenOrDie(dir.path() + "/k.db");
  RunInfo run = NewRunOrDie(*store, problem);
  Candidate a = MakeCandidate(problem, 1), b = MakeCandidate(problem, 2);
  ASSERT_TRUE(store->RecordEvaluation(run.id, a, OkEvaluation(a, 1.0)).ok());
  ASSERT_TRUE(store->RecordEvaluation(run.id, b, OkEvaluation(b, 2.0)).ok());
  // A resume re-reports a's evaluation: it keeps its place in the order.
  ASSERT_TRUE(store->RecordEvaluation(run.id, a, OkEvaluation(a, 1.0)).ok());
  auto history = store->LoadRunHistory(run.id);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->entries.size(), 2u);
  EXPECT_EQ(history->entries[0].candidate.id, "c1");
  EXPECT_EQ(history->entries[1].candidate.id, "c2");
}

TEST(Store, KeepsAFinishedEvaluationWhenAResumeReusesItsIdForAnotherKernel) {
  TempDir dir;
  Problem problem = RowSoftmaxProblem(64, 256);
  auto store = OpenOrDie(dir.path() + "/k.db");
  RunInfo run = NewRunOrDie(*store, problem);
  Candidate first = MakeCandidate(problem, 1);
  Candidate second = MakeCandidate(problem, 2);
  second.id = first.id;
  ASSERT_TRUE(store->RecordEvaluation(run.id, first, OkEvaluation(first, 1.0)).ok());
  ASSERT_TRUE(store->RecordEvaluation(run.id, second, OkEvaluation(second, 2.0)).ok());
  auto history = store->LoadRunHistory(run.id);
  ASSERT_TRUE(history.ok());
  ASSERT_EQ(history->entries.size(), 2u);
  std::set<std::string> hashes;
  for (const HistoryEntry& e : history->entries) hashes.insert(e.candidate.ContentHash());
  EXPECT_TRUE(hashes.count(first.ContentHash()));
  EXPECT_TRUE(hashes.count(second.ContentHash()));
}

TEST(Store, NamesAnUnknownRun) {
  TempDir dir;
  auto store = OpenOrDie(dir.path() + "/k.db");
  auto run = store->FindRun(42);
  EXPECT_EQ(run.status().code(), StatusCode::kNotFound);
  EXPECT_NE(run.status().message().find("run 42"), std::string::npos);
  Problem problem = RowSoftmaxProblem(64, 256);
  Candidate c = MakeCandidate(problem, 1);
  EXPECT_EQ(store->RecordEvaluation(42, c, OkEvaluation(c, 1.0)).code(), StatusCode::kNotFound);
}

TEST(Store, ListsRunsNewestFirstAndFindsTheBestKernelOfAProblem) {
  TempDir dir;
  Problem small = RowSoftmaxProblem(64, 256), large = RowSoftmaxProblem(128, 256);
  auto store = OpenOrDie(dir.path() + "/k.db");
  RunInfo r1 = NewRunOrDie(*store, small), r2 = NewRunOrDie(*store, large), r3 = NewRunOrDie(*store, small);
  Candidate a = MakeCandidate(small, 1), b = MakeCandidate(small, 2);
  ASSERT_TRUE(store->RecordEvaluation(r1.id, a, OkEvaluation(a, 2.0)).ok());
  ASSERT_TRUE(store->RecordEvaluation(r3.id, b, OkEvaluation(b, 1.5)).ok());
  auto runs = store->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 3u);
  EXPECT_EQ((*runs)[0].id, r3.id);
  RunFilter filter;
  filter.problem_fingerprint = small.Fingerprint();
  runs = store->ListRuns(filter);
  ASSERT_EQ(runs->size(), 2u);
  auto best = store->BestForProblem(small.Fingerprint());
  ASSERT_TRUE(best.ok());
  ASSERT_EQ(best->size(), 2u);
  EXPECT_EQ(best->front().run.id, r3.id);
  EXPECT_EQ(best->front().best.candidate.id, "c2");
  EXPECT_TRUE(store->BestForProblem(large.Fingerprint())->empty());
  (void)r2;
}

TEST(Store, KeepsACommandLineAsRunOptions) {
  std::vector<std::string> argv = {"softmax", "--rounds", "6", "--llm", "openai:gpt \"4o\""};
  auto back = ArgvFromOptionsJson(ArgvToOptionsJson(argv));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, argv);
  EXPECT_EQ(ArgvFromOptionsJson("{\"rounds\": 6}").status().code(), StatusCode::kInvalidArgument);
}

TEST(EvaluationJson, RoundTripsEveryField) {
  Problem problem = RowSoftmaxProblem(64, 256);
  Candidate c = MakeCandidate(problem, 1);
  Evaluation e = FakeVerdict(c, FakeDevice());
  e.status = EvalStatus::kWrongResult;
  e.details = "line 1\nline \"2\"";
  e.checks_not_run = {"timing (compile-only)"};
  e.relaxed_tolerance = true;
  Mismatch m;
  m.tensor = "y";
  m.input_set = "shifted";
  m.phase = "recheck";
  m.bad_count = 3;
  m.elements = 99;
  m.worst_index = 7;
  m.expected = 1.5;
  m.got = std::numeric_limits<double>::quiet_NaN();  // a NaN output: written as "nan"
  e.mismatch = m;
  TimingStats t;
  t.median_ms = 0.125;
  t.repetitions = 17;
  e.timing = t;
  e.baseline_timing = t;
  Speedup s;
  s.baseline = "cublas_sgemm";
  s.ratio = 1.75;
  e.speedup = s;
  KernelResources r;
  r.kernel = "k";
  r.registers = 40;
  r.spill_store_bytes = 8;
  e.resources = {r, r};
  e.device.l2_bytes = 50 << 20;
  e.device.cc_major = 10;
  e.device.cc_minor = 0;
  e.floor_ms = 0.01;
  e.compile_cached = true;
  e.total_ms = 12.5;
  auto parsed = internal::EvaluationFromJson(e.ToJson(), "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->ToJson(), e.ToJson());
  EXPECT_EQ(parsed->device.cc_major, 10);
  EXPECT_TRUE(std::isnan(parsed->mismatch->got));
}

// tests/store/data/main-7416fce.db: `ksearch run softmax --compile-only
// --arch sm_90 --rounds 2 --batch 3`, written by main at 7416fce, before the
// one evaluation codec (NaN as null, the device as its arch only) and before
// schema 4.
TEST(Store, OpensAndShowsADatabaseWrittenBeforeTheOneCodec) {
  TempDir dir;
  const std::string path = dir.path() + "/old.db";
  auto fixture = internal::ReadFile(SourcePath("tests/store/data/main-7416fce.db"),
                                    1 << 24);
  ASSERT_TRUE(fixture.ok()) << fixture.status().ToString();
  ASSERT_TRUE(internal::WriteFileAtomically(path, *fixture).ok());
  // Opened for writing: the file is at schema 3, which the first writable
  // open migrates (the kernel cache's buckets); its evaluations are untouched.
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto runs = (*store)->ListRuns();
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  ASSERT_EQ(runs->size(), 1u);
  auto history = (*store)->LoadRunHistory((*runs)[0].id);
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  ASSERT_EQ(history->entries.size(), 6u);
  for (const HistoryEntry& e : history->entries) {
    EXPECT_EQ(e.evaluation.status, EvalStatus::kCompiled) << e.candidate.id;
    EXPECT_EQ(e.evaluation.device.Arch(), "sm_90");
    EXPECT_FALSE(e.evaluation.resources.empty());
    EXPECT_EQ(e.evaluation.content_hash, e.candidate.ContentHash());
    auto again = internal::EvaluationFromJson(e.evaluation.ToJson(), "again");
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->ToJson(), e.evaluation.ToJson());
  }
  ASSERT_NE(history->Best(), nullptr);
  boost::system::error_code ec;
  boost::json::value summary = boost::json::parse(history->SummaryJson(), ec);
  ASSERT_FALSE(ec) << ec.message();
  EXPECT_EQ(summary.at("by_status").at("compiled"), 6);
  EXPECT_EQ(summary.at("best").at("evaluation").at("device").at("arch"), "sm_90");
}

TEST(Store, TellsAKilledRunFromARunningOne) {
  TempDir dir;
  const std::string path = dir.path() + "/k.db";
  Problem problem = RowSoftmaxProblem(64, 256);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Store::Options options;
    options.sync_every_commit = false;
    auto store = Store::Open(path, options);
    NewRun spec;
    spec.problem = &problem;
    spec.strategy = "tune";
    ::_exit(store.ok() && (*store)->CreateRun(spec).ok() ? 0 : 1);
  }
  // Not reaped yet: the dead process is a zombie, which kill(pid, 0) still
  // finds; it is abandoned all the same.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  auto store = OpenOrDie(path);
  RunInfo killed = store->ListRuns()->front();
  EXPECT_EQ(killed.status, RunStatus::kRunning);
  EXPECT_TRUE(killed.LooksAbandoned()) << "a zombie";
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(killed.LooksAbandoned());
  RunInfo alive = NewRunOrDie(*store, problem);
  EXPECT_FALSE(alive.LooksAbandoned());
  EXPECT_NE(killed.ToJson().find("\"abandoned\":true"), std::string::npos);
}

// A search in another process commits evaluations one by one while this one
// reads: every read succeeds (no "database is locked"), and what it sees only
// grows.
TEST(Store, AReaderWorksWhileAnotherProcessWrites) {
  TempDir dir;
  const std::string path = dir.path() + "/k.db";
  Problem problem = RowSoftmaxProblem(64, 256);
  int64_t run_id = 0;
  {
    auto store = OpenOrDie(path);
    run_id = NewRunOrDie(*store, problem).id;
  }
  constexpr int kRecords = 300;
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Store::Options options;
    options.sync_every_commit = false;
    auto store = Store::Open(path, options);
    if (!store.ok()) ::_exit(10);
    for (int i = 0; i < kRecords; ++i) {
      Candidate c = MakeCandidate(problem, i);
      if (!(*store)->RecordEvaluation(run_id, c, OkEvaluation(c, 1.0 + i)).ok()) ::_exit(11);
    }
    ::_exit(0);
  }
  Store::Options read_only;
  read_only.read_only = true;
  auto reader = Store::Open(path, read_only);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  int64_t seen = 0;
  int reads = 0;
  int status = 0;
  bool exited = false;
  while (true) {
    // One more read after the writer ended: it must see everything.
    if (!exited && ::waitpid(child, &status, WNOHANG) == child) exited = true;
    auto history = (*reader)->LoadRunHistory(run_id);
    ASSERT_TRUE(history.ok()) << history.status().ToString();
    auto runs = (*reader)->ListRuns();
    ASSERT_TRUE(runs.ok()) << runs.status().ToString();
    int64_t now = static_cast<int64_t>(history->entries.size());
    ASSERT_GE(now, seen);
    // A snapshot is consistent: every entry has its candidate and its
    // evaluation, in order.
    for (size_t i = 0; i < history->entries.size(); ++i) {
      ASSERT_EQ(history->entries[i].candidate.id, "c" + std::to_string(i));
    }
    seen = now;
    ++reads;
    if (exited) break;
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "writer status " << status;
  EXPECT_EQ(seen, kRecords);
  EXPECT_GT(reads, 1);
}

}  // namespace
}  // namespace ksearch
