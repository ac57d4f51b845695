// Resume: a search killed with SIGKILL at random moments and resumed loses no
// finished evaluation and pays for no LLM reply twice, and ends where an
// uninterrupted search ends. The pieces (CachingEvaluator, ResumingLlmClient,
// ResumeRun's checks) are tested on their own first.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <random>
#include <set>

#include "ksearch/caching_evaluator.h"
#include "ksearch/resuming_llm_client.h"
#include "ksearch/run_recorder.h"
#include "ksearch/run_session.h"
#include "ksearch/store.h"
#include "ksearch/strategies.h"
#include "store_test_util.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::AppendLine;
using testing::FakeDevice;
using testing::FakeEvaluator;
using testing::FakePaidLlm;
using testing::ReadLines;
using testing::RowSoftmaxProblem;
using testing::TempDir;
using testing::ToyLlmSearch;

std::unique_ptr<Store> OpenOrDie(const std::string& path) {
  Store::Options options;
  options.sync_every_commit = false;
  auto store = Store::Open(path, options);
  if (!store.ok()) {
    ADD_FAILURE() << store.status().ToString();
    std::abort();
  }
  return std::move(*store);
}

RunSettings Settings(const std::string& strategy) {
  RunSettings settings;
  settings.strategy = strategy;
  settings.options_json = R"({"rounds": 3})";
  settings.seed = 3;
  settings.device = FakeDevice();
  return settings;
}

std::vector<Candidate> Variants(const Problem& problem, int count, int first = 0) {
  std::vector<Candidate> out;
  for (int i = first; i < first + count; ++i) {
    Candidate c = problem.start.ToCandidate("c" + std::to_string(i), "llm:m");
    c.source += "// " + std::to_string(i) + "\n";
    out.push_back(c);
  }
  return out;
}

TEST(CachingEvaluator, AnswersJudgedKernelsFromTheStoreAndJudgesOnlyTheRest) {
  TempDir dir;
  auto store = OpenOrDie(dir.path() + "/k.db");
  Problem problem = RowSoftmaxProblem(64, 256);
  auto session = BeginRun(*store, problem, Settings("toy"));
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  FakeEvaluator inner(problem);
  auto wrapped = (*session)->WrapEvaluator(inner);
  ASSERT_TRUE(wrapped.ok()) << wrapped.status().ToString();
  std::vector<Candidate> first = Variants(problem, 4);
  std::vector<Evaluation> a = (*wrapped)->Evaluate(first);
  EXPECT_EQ(inner.judged(), 4);
  // Written as they were judged, before any observer ran.
  EXPECT_EQ(store->LoadRunHistory((*session)->run_id())->entries.size(), 4u);

  // The same kernels under new ids (a resumed search) and two new ones.
  std::vector<Candidate> second = Variants(problem, 6, 0);
  for (size_t i = 0; i < second.size(); ++i) second[i].id = "d" + std::to_string(i);
  std::vector<Evaluation> b = (*wrapped)->Evaluate(second);
  EXPECT_EQ(inner.judged(), 6);
  ASSERT_EQ(b.size(), 6u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(b[i].candidate_id, "d" + std::to_string(i));
    EXPECT_EQ(b[i].status, a[i].status);
    EXPECT_EQ(b[i].message, a[i].message);
  }
  EXPECT_EQ((*session)->reused_evaluations(), 4);
}

TEST(CachingEvaluator, RefusesAnotherProblemOrAnotherGpu) {
  TempDir dir;
  auto store = OpenOrDie(dir.path() + "/k.db");
  Problem problem = RowSoftmaxProblem(64, 256);
  auto session = BeginRun(*store, problem, Settings("toy"));
  ASSERT_TRUE(session.ok());
  FakeEvaluator other_problem(RowSoftmaxProblem(128, 256));
  auto wrapped = (*session)->WrapEvaluator(other_problem);
  EXPECT_EQ(wrapped.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(wrapped.status().message().find("different problem"), std::string::npos);
  DeviceInfo a100 = FakeDevice();
  a100.name = "NVIDIA A100";
  a100.cc_major = 8;
  FakeEvaluator other_gpu(problem, "", 0.0, a100);
  wrapped = (*session)->WrapEvaluator(other_gpu);
  EXPECT_EQ(wrapped.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(wrapped.status().message().find("same GPU model"), std::string::npos);
}

TEST(ResumingLlmClient, ServesStoredRepliesAndSendsOnlyNewRequestsToTheModel) {
  TempDir dir;
  auto store = OpenOrDie(dir.path() + "/k.db");
  Problem problem = RowSoftmaxProblem(64, 256);
  auto session = BeginRun(*store, problem, Settings("toy"));
  ASSERT_TRUE(session.ok());
  const int64_t run_id = (*session)->run_id();
  auto ask = [](LlmClient& client, const std::string& text) {
    ChatRequest request;
    request.model = "toy-model";
    request.messages.push_back({ChatMessage::Role::kUser, text});
    return CompleteAndWait(client, request);
  };
  {
    FakePaidLlm live;
    auto wrapped = (*session)->WrapLlmClient(live);
    ASSERT_TRUE(wrapped.ok());
    ASSERT_TRUE(ask(**wrapped, "one").ok());
    ASSERT_TRUE(ask(**wrapped, "two").ok());
    EXPECT_EQ(live.calls(), 2);
  }
  EXPECT_EQ(store->LoadExchanges(run_id)->size(), 2u);
  ASSERT_TRUE((*session)->Finish(InternalError("killed, say")).ok());

  auto resumed = ResumeRun(*store, run_id);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ((*resumed)->run().sessions, 2);
  FakePaidLlm live;
  auto wrapped = (*resumed)->WrapLlmClient(live);
  ASSERT_TRUE(wrapped.ok());
  auto one = ask(**wrapped, "one");
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->content, FakePaidLlm::ReplyFor([] {
              ChatRequest r;
              r.model = "toy-model";
              r.messages.push_back({ChatMessage::Role::kUser, "one"});
              return r;
            }()));
  ASSERT_TRUE(ask(**wrapped, "two").ok());
  ASSERT_TRUE(ask(**wrapped, "three").ok());
  // "one" again: its stored reply was used once already, so this is new work.
  ASSERT_TRUE(ask(**wrapped, "one").ok());
  EXPECT_EQ(live.calls(), 2);
  EXPECT_EQ((*resumed)->reused_replies(), 2);
  EXPECT_EQ(store->LoadExchanges(run_id)->size(), 4u);
  LlmTotals totals = (*wrapped)->totals();
  EXPECT_EQ(totals.requests, 4);
}

TEST(ResumingLlmClient, AsksAgainWhereTheStoredExchangeWasAFailure) {
  TempDir dir;
  auto store = OpenOrDie(dir.path() + "/k.db");
  Problem problem = RowSoftmaxProblem(64, 256);
  auto session = BeginRun(*store, problem, Settings("toy"));
  ASSERT_TRUE(session.ok());
  LlmExchange failed;
  failed.provider = "openai";
  failed.request.model = "toy-model";
  failed.request.messages.push_back({ChatMessage::Role::kUser, "flaky"});
  failed.request_hash = RequestHash(failed.request);
  failed.response = UnavailableError("openai: HTTP 503 after 5 attempts");
  ASSERT_TRUE(store->RecordExchange((*session)->run_id(), 1, failed).ok());
  ASSERT_TRUE((*session)->Finish(CancelledError("stopped")).ok());
  auto resumed = ResumeRun(*store, (*session)->run_id());
  ASSERT_TRUE(resumed.ok());
  FakePaidLlm live;
  auto wrapped = (*resumed)->WrapLlmClient(live);
  ASSERT_TRUE(wrapped.ok());
  auto reply = CompleteAndWait(**wrapped, failed.request);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(live.calls(), 1);
}

TEST(ResumeRun, RefusesACompletedRunAndOneStillRunning) {
  TempDir dir;
  auto store = OpenOrDie(dir.path() + "/k.db");
  Problem problem = RowSoftmaxProblem(64, 256);
  auto session = BeginRun(*store, problem, Settings("toy"));
  ASSERT_TRUE(session.ok());
  // Its process (this one) is alive.
  auto again = ResumeRun(*store, (*session)->run_id());
  EXPECT_EQ(again.status().code(), StatusCode::kAborted);
  EXPECT_NE(again.status().message().find("still running"), std::string::npos);
  SearchSummary summary;
  summary.termination = TerminationReason::kBudgetRounds;
  ASSERT_TRUE((*session)->Finish(summary).ok());
  again = ResumeRun(*store, (*session)->run_id());
  EXPECT_EQ(again.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(again.status().message().find("already completed"), std::string::npos);
  SessionOptions reopen;
  reopen.reopen_completed = true;
  EXPECT_TRUE(ResumeRun(*store, (*session)->run_id(), reopen).ok());
  EXPECT_EQ(ResumeRun(*store, 99).status().code(), StatusCode::kNotFound);
}

TEST(RunRecorder, StopsTheSearchWhenItCannotRecord) {
  TempDir dir;
  auto store = OpenOrDie(dir.path() + "/k.db");
  RunRecorder recorder(*store, /*run_id=*/12345);
  Idea idea;
  idea.id = "i";
  EXPECT_EQ(recorder.OnIdea(idea), ObserverAction::kStop);
  EXPECT_EQ(recorder.status().code(), StatusCode::kNotFound);
}

// --- Killed and resumed -----------------------------------------------------

struct Journals {
  std::string db, evaluations, replies;
};

enum class Strategy { kToyLlm, kTune };

Problem ProblemFor(Strategy strategy) {
  if (strategy == Strategy::kTune) {
    auto problem = LoadProblem("softmax");
    if (!problem.ok()) std::abort();
    return *problem;
  }
  return RowSoftmaxProblem(64, 256);
}

// One session of the search: begins the run, or resumes the run the database
// holds. Returns the process exit code the child uses.
int Session(Strategy strategy, const Journals& j, double delay_ms) {
  Store::Options options;
  options.sync_every_commit = false;
  auto store = Store::Open(j.db, options);
  if (!store.ok()) return 20;
  Problem problem = ProblemFor(strategy);
  auto runs = (*store)->ListRuns();
  if (!runs.ok()) return 21;
  // Killed after it finished: nothing left to do.
  if (!runs->empty() && runs->front().status == RunStatus::kCompleted) return 0;
  StatusOr<std::unique_ptr<RunSession>> session =
      runs->empty() ? BeginRun(**store, problem, Settings(strategy == Strategy::kTune ? "tune" : "toy"))
                    : ResumeRun(**store, runs->front().id);
  if (!session.ok()) {
    std::fprintf(stderr, "session: %s\n", session.status().ToString().c_str());
    return 22;
  }
  FakeEvaluator inner(problem, j.evaluations, delay_ms);
  auto evaluator = (*session)->WrapEvaluator(inner);
  if (!evaluator.ok()) return 23;
  FakePaidLlm live(j.replies, delay_ms);
  auto llm = (*session)->WrapLlmClient(live);
  if (!llm.ok()) return 24;
  SearchContext context;
  context.problem = &problem;
  context.evaluator = evaluator->get();
  context.observers.push_back((*session)->observer());
  StatusOr<SearchSummary> summary = InternalError("not run");
  if (strategy == Strategy::kTune) {
    SearchOptions search;
    search.seed = 3;
    search.budget.max_rounds = 4;
    ParameterTuneOptions tune;
    tune.batch_size = 3;
    summary = MakeParameterTuneSearch(search, tune)->Run(context);
  } else {
    ToyLlmSearch search(**llm, /*rounds=*/3, /*ideas=*/2, /*branches=*/3);
    summary = search.Run(context);
  }
  Status finished = (*session)->Finish(summary);
  return finished.ok() ? 0 : 25;
}

// What a finished run recorded: candidate id → (content hash, evaluation).
std::map<std::string, std::pair<std::string, std::string>> Outcome(const std::string& db) {
  auto store = OpenOrDie(db);
  auto runs = store->ListRuns();
  std::map<std::string, std::pair<std::string, std::string>> out;
  if (!runs.ok() || runs->size() != 1) {
    ADD_FAILURE() << "expected exactly one run in " << db;
    return out;
  }
  auto history = store->LoadRunHistory(runs->front().id);
  if (!history.ok()) {
    ADD_FAILURE() << history.status().ToString();
    return out;
  }
  for (const HistoryEntry& e : history->entries) {
    out[e.candidate.id] = {e.candidate.ContentHash(), e.evaluation.ToJson()};
  }
  return out;
}

void KillAndResume(Strategy strategy, int trials, double max_kill_ms, uint64_t seed) {
  TempDir reference_dir;
  Journals reference{reference_dir.path() + "/ref.db", reference_dir.path() + "/ref.evals",
                     reference_dir.path() + "/ref.replies"};
  // The uninterrupted search, in this process; every thread it starts is
  // joined before the forks below.
  ASSERT_EQ(Session(strategy, reference, 0.0), 0);
  const auto expected = Outcome(reference.db);
  ASSERT_GE(expected.size(), 8u);
  const size_t expected_requests = ReadLines(reference.replies).size();

  std::mt19937_64 rng(seed);
  int total_kills = 0;
  for (int trial = 0; trial < trials; ++trial) {
    SCOPED_TRACE("trial " + std::to_string(trial));
    TempDir dir;
    Journals j{dir.path() + "/k.db", dir.path() + "/evals", dir.path() + "/replies"};
    int kills = 0;
    bool finished = false;
    for (int attempt = 0; attempt < 12 && !finished; ++attempt) {
      // Progress is what the journals show: kernels judged and replies paid.
      auto progress = [&j] { return ReadLines(j.evaluations).size() + ReadLines(j.replies).size(); };
      const size_t before = progress();
      pid_t child = ::fork();
      ASSERT_GE(child, 0);
      if (child == 0) ::_exit(Session(strategy, j, 0.3));
      // The first few attempts are killed once the child has made a random
      // amount of new progress (1 to 3 steps) and then, except in the first
      // attempt, after a random delay of up to max_kill_ms, so that kills
      // land between and inside steps. The first attempt is always killed
      // (a whole search has at least eight steps); later ones may finish.
      if (attempt < 6) {
        std::uniform_int_distribution<size_t> steps(1, 3);
        const size_t target = before + steps(rng);
        int status = 0;
        bool exited = false;
        while (progress() < target) {
          if (::waitpid(child, &status, WNOHANG) == child) {
            exited = true;
            break;
          }
          ::usleep(200);
        }
        if (exited) {
          ASSERT_TRUE(WIFEXITED(status));
          ASSERT_EQ(WEXITSTATUS(status), 0) << "a session failed";
          finished = true;
          break;
        }
        std::uniform_real_distribution<double> when(0.0, max_kill_ms);
        if (attempt > 0) ::usleep(static_cast<useconds_t>(when(rng) * 1000));
        ::kill(child, SIGKILL);
      }
      int status = 0;
      ASSERT_EQ(::waitpid(child, &status, 0), child);
      if (WIFSIGNALED(status)) {
        ASSERT_EQ(WTERMSIG(status), SIGKILL);
        ++kills;
        // Sound after every kill.
        auto store = OpenOrDie(j.db);
        ASSERT_TRUE(store->CheckIntegrity().ok());
        continue;
      }
      ASSERT_TRUE(WIFEXITED(status));
      ASSERT_EQ(WEXITSTATUS(status), 0) << "a session failed";
      finished = true;
    }
    ASSERT_TRUE(finished);
    total_kills += kills;

    // The resumed search ends exactly where the uninterrupted one did.
    EXPECT_EQ(Outcome(j.db), expected);
    auto store = OpenOrDie(j.db);
    auto run = store->ListRuns()->front();
    EXPECT_EQ(run.status, RunStatus::kCompleted);
    EXPECT_LE(run.sessions, kills + 1);

    // No finished evaluation was lost: every kernel was judged, and at most
    // the one judged at the moment of each kill was judged again.
    std::vector<std::string> judged = ReadLines(j.evaluations);
    std::set<std::string> unique(judged.begin(), judged.end());
    EXPECT_EQ(unique.size(), expected.size());
    EXPECT_LE(judged.size(), expected.size() + static_cast<size_t>(kills));
    // No paid reply was lost or bought twice: each request's exchange is
    // stored exactly once, and a reply the model delivered after its exchange
    // was stored (the journal line) was never asked for again.
    auto exchanges = store->LoadExchanges(run.id);
    ASSERT_TRUE(exchanges.ok());
    std::set<std::string> stored;
    for (const LlmExchange& x : *exchanges) stored.insert(x.request_hash);
    EXPECT_EQ(exchanges->size(), expected_requests);
    EXPECT_EQ(stored.size(), expected_requests);
    std::vector<std::string> paid = ReadLines(j.replies);
    std::set<std::string> unique_paid(paid.begin(), paid.end());
    EXPECT_EQ(paid.size(), unique_paid.size()) << "a stored reply was bought again";
  }
  // Every trial's first attempt was killed before it could finish.
  std::printf("%d trials, %d kills\n", trials, total_kills);
  EXPECT_GE(total_kills, trials);
}

TEST(Resume, AnLlmSearchKilledAtRandomMomentsLosesNothing) {
  KillAndResume(Strategy::kToyLlm, /*trials=*/20, /*max_kill_ms=*/40.0, /*seed=*/11);
}

TEST(Resume, ATuningSearchKilledAtRandomMomentsEndsAsAnUninterruptedOne) {
  KillAndResume(Strategy::kTune, /*trials=*/12, /*max_kill_ms=*/25.0, /*seed=*/5);
}

}  // namespace
}  // namespace ksearch
