// ParallelBranchSearch end to end on the CPU: the mock LLM on loopback with
// scripted ideas and code, the compile-only evaluator, and — where selection
// needs times — scripted generators with a fake evaluator.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "search_test_util.h"

namespace ksearch {
namespace {

using testing::Context;
using testing::FakeEvaluator;
using testing::KernelReply;
using testing::RoundCounter;

// Ideas "<parent> idea j" in the categories asked for; remembers what each
// round's requests saw of the history.
class ScriptedIdeas final : public IdeaGenerator {
 public:
  std::string name() const override { return "scripted"; }
  StatusOr<IdeaResult> Propose(const IdeaRequest& request) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      history_seen_[request.round] = request.history->ideas;
    }
    IdeaResult result;
    for (int j = 0; j < request.count; ++j) {
      Idea idea;
      idea.category = request.categories.at(static_cast<size_t>(j));
      idea.text = request.parent->candidate.id + " idea " + std::to_string(j);
      result.ideas.push_back(idea);
    }
    result.input_tokens = 10;
    result.output_tokens = 20;
    return result;
  }
  std::map<int, std::vector<Idea>> history_seen() {
    std::lock_guard<std::mutex> lock(mutex_);
    return history_seen_;
  }

 private:
  std::mutex mutex_;
  std::map<int, std::vector<Idea>> history_seen_;
};

// Branch m of idea I is the row softmax marked "I b<m>".
class ScriptedBrancher final : public Brancher {
 public:
  std::string name() const override { return "scripted"; }
  StatusOr<BranchResult> Branch(const BranchRequest& request) override {
    BranchResult result;
    for (int m = 0; m < request.count; ++m) {
      Candidate c = request.problem->start.ToCandidate("", "");
      c.source = "// " + request.idea->id + " b" + std::to_string(m) + "\n" + c.source;
      result.candidates.push_back(std::move(c));
    }
    result.output_tokens = 100;
    return result;
  }
};

// Times by candidate id; everything else 1.5 ms, the start 2 ms.
FakeEvaluator::Judge TimesById(std::map<std::string, double> times) {
  return [times](const Candidate& c) {
    if (c.id == "start") return testing::Timed(2.0);
    auto it = times.find(c.id);
    return testing::Timed(it == times.end() ? 1.5 : it->second);
  };
}

class MockLlm {
 public:
  explicit MockLlm(double latency_ms = 0.0) {
    MockLlmServer::Options options;
    options.latency_ms = latency_ms;
    auto mock = MockLlmServer::Start(options);
    EXPECT_TRUE(mock.ok()) << mock.status().ToString();
    server = std::move(*mock);
    HttpLlmClient::Options client_options;
    client_options.base_url = server->openai_base_url();
    client_options.default_model = "mock";
    client_options.retry.max_attempts = 1;
    auto made = HttpLlmClient::Create(client_options);
    EXPECT_TRUE(made.ok()) << made.status().ToString();
    client = std::move(*made);
    LlmGeneratorOptions options_gen;
    options_gen.model = "mock";
    ideas = std::move(*MakeLlmIdeaGenerator(*client, options_gen));
    brancher = std::move(*MakeLlmBrancher(*client, options_gen));
  }
  void Rule(std::string regex, MockReply reply, int times = -1) {
    EXPECT_TRUE(server->AddRule(MockRule{"", std::move(regex), std::move(reply), times}).ok());
  }

  std::unique_ptr<MockLlmServer> server;
  std::unique_ptr<HttpLlmClient> client;
  std::unique_ptr<IdeaGenerator> ideas;
  std::unique_ptr<Brancher> brancher;
};

// A regex for branch prompts implementing "Scripted idea I." as branch B,
// anchored on the idea section (the history below it names other ideas).
std::string Implementing(int idea, int branch) {
  return "implement \\([a-z_]+\\)\\nScripted idea " + std::to_string(idea) +
         "\\.[\\s\\S]*implementation " + std::to_string(branch) + " of";
}

TEST(ParallelBranchSearch, CountsPerRoundMatchSeedsIdeasAndBranches) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  auto evaluator = testing::CompileOnlyEvaluator(problem);
  ASSERT_NE(evaluator, nullptr);
  MockLlm llm(/*latency_ms=*/30);
  llm.Rule("# Round", MockReply{testing::IdeasReply(3)});
  llm.Rule("implementation 1 of", MockReply{KernelReply("v1")});
  llm.Rule("implementation 2 of", MockReply{KernelReply("v2")});
  SearchOptions options;
  options.budget.max_rounds = 3;
  options.seeds = 2;
  options.ideas = 3;
  options.branches = 2;
  RoundCounter counter;
  SearchContext context = Context(problem, *evaluator, *llm.ideas, *llm.brancher, {&counter});
  auto summary = MakeParallelBranchSearch(options)->Run(context);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->termination, TerminationReason::kBudgetRounds) << summary->FullReport();
  EXPECT_EQ(summary->rounds, 3);
  // Round 0: the start is the only seed; then k = 2 (start, v1 and v2 are
  // three distinct correct kernels).
  EXPECT_EQ(counter.seeds_[0], std::vector<std::string>{"start"});
  EXPECT_EQ(counter.seeds_[1].size(), 2u);
  EXPECT_EQ(counter.seeds_[2].size(), 2u);
  EXPECT_EQ(counter.ideas_[0], 3);
  EXPECT_EQ(counter.ideas_[1], 6);
  EXPECT_EQ(counter.ideas_[2], 6);
  EXPECT_EQ(counter.candidates_[0], 1 + 3 * 2);
  EXPECT_EQ(counter.candidates_[1], 2 * 3 * 2);
  EXPECT_EQ(counter.candidates_[2], 2 * 3 * 2);
  EXPECT_EQ(counter.ends_, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(summary->ideas, 15);
  EXPECT_EQ(summary->candidates, 31);
  // Compile-only: every kernel compiled, none was run, so none is correct.
  EXPECT_EQ(summary->correct, 0);
  EXPECT_EQ(summary->by_status.at("compiled"), 31);
  EXPECT_EQ(summary->history.ideas.size(), 15u);
  EXPECT_EQ(summary->history.entries.size(), 31u);
  EXPECT_GT(summary->output_tokens, 0);
  // Round 1 asks for ideas on two seeds at once and then for 12 branches:
  // requests overlap.
  EXPECT_GE(llm.server->counters().max_concurrent_requests, 4);
  EXPECT_EQ(llm.server->counters().requests, 1 + 6 + 2 + 12 + 2 + 12);
  // The tree: ids name the round, seed, idea and branch; parents are seeds.
  for (const HistoryEntry& e : summary->history.entries) {
    if (e.candidate.id == "start") continue;
    const Idea* idea = summary->history.FindIdea(e.candidate.provenance.idea_id);
    ASSERT_NE(idea, nullptr) << e.candidate.id;
    EXPECT_EQ(e.candidate.provenance.parent_id, idea->parent_id);
    EXPECT_EQ(e.candidate.id.rfind(idea->id + ".b", 0), 0u) << e.candidate.id;
    const auto& seeds = counter.seeds_[e.candidate.provenance.round];
    EXPECT_NE(std::find(seeds.begin(), seeds.end(), idea->parent_id), seeds.end());
  }
  for (const Idea& idea : summary->history.ideas) {
    EXPECT_FALSE(idea.outcome.empty()) << idea.id;
    EXPECT_EQ(idea.generator, "llm:mock");
  }
}

TEST(ParallelBranchSearch, FastestCorrectKernelsBecomeTheNextSeeds) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  FakeEvaluator evaluator(problem, TimesById({{"r0.s0.i1.b0", 0.5}, {"r0.s0.i2.b1", 0.6}}));
  ScriptedIdeas ideas;
  ScriptedBrancher brancher;
  SearchOptions options;
  options.budget.max_rounds = 2;
  options.seeds = 2;
  options.ideas = 3;
  options.branches = 2;
  RoundCounter counter;
  SearchContext context = Context(problem, evaluator, ideas, brancher, {&counter});
  auto summary = MakeParallelBranchSearch(options)->Run(context);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(counter.seeds_[1], (std::vector<std::string>{"r0.s0.i1.b0", "r0.s0.i2.b1"}));
  ASSERT_TRUE(summary->best.has_value());
  EXPECT_EQ(summary->best->candidate.id, "r0.s0.i1.b0");
  EXPECT_EQ(counter.bests_.front(), "start");
  EXPECT_EQ(counter.bests_.back(), "r0.s0.i1.b0");
  // Round 1's ideas apply to the seeds, and the generator saw round 0's
  // ideas with their outcomes.
  for (const Idea& idea : summary->history.ideas) {
    if (idea.round == 1) {
      EXPECT_TRUE(idea.parent_id == "r0.s0.i1.b0" || idea.parent_id == "r0.s0.i2.b1");
    }
  }
  auto seen = ideas.history_seen();
  ASSERT_EQ(seen[1].size(), 3u);
  const Idea& winner = seen[1][1];
  EXPECT_EQ(winner.id, "r0.s0.i1");
  EXPECT_DOUBLE_EQ(winner.best_speedup_over_parent, 4.0);
  EXPECT_NE(winner.outcome.find("4.00x faster than the parent"), std::string::npos)
      << winner.outcome;
  // The evaluator got batches, not one candidate at a time.
  EXPECT_GT(evaluator.max_batch(), 1);
  EXPECT_EQ(summary->input_tokens, 10 * 3);
}

TEST(ParallelBranchSearch, TiesAreBrokenTowardDifferentIdeaCategories) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  // b0 and b1 of idea 0 tie with idea 1's b0 (within 1%); the second seed is
  // idea 1's, whose category differs.
  FakeEvaluator evaluator(
      problem, TimesById({{"r0.s0.i0.b0", 0.500}, {"r0.s0.i0.b1", 0.500}, {"r0.s0.i1.b0", 0.503}}));
  ScriptedIdeas ideas;
  ScriptedBrancher brancher;
  SearchOptions options;
  options.budget.max_rounds = 2;
  options.seeds = 2;
  options.ideas = 2;
  options.branches = 2;
  RoundCounter counter;
  SearchContext context = Context(problem, evaluator, ideas, brancher, {&counter});
  ASSERT_TRUE(MakeParallelBranchSearch(options)->Run(context).ok());
  EXPECT_EQ(counter.seeds_[1], (std::vector<std::string>{"r0.s0.i0.b0", "r0.s0.i1.b0"}));
  // Without the tie tolerance, b1 (faster than 0.503) wins the second place.
  ParallelBranchOptions strict;
  strict.tie_fraction = 0.0;
  RoundCounter counter2;
  context.observers = {&counter2};
  ASSERT_TRUE(MakeParallelBranchSearch(options, strict)->Run(context).ok());
  EXPECT_EQ(counter2.seeds_[1], (std::vector<std::string>{"r0.s0.i0.b0", "r0.s0.i0.b1"}));
}

TEST(ParallelBranchSearch, BudgetsStopTheRunOnTime) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  ScriptedIdeas ideas;
  ScriptedBrancher brancher;
  SearchOptions options;
  options.seeds = 2;
  options.ideas = 2;
  options.branches = 2;
  {
    // Candidates: exactly as many are judged.
    FakeEvaluator evaluator(problem, TimesById({}));
    SearchOptions o = options;
    o.budget.max_candidates = 6;
    SearchContext context = Context(problem, evaluator, ideas, brancher);
    auto summary = MakeParallelBranchSearch(o)->Run(context);
    ASSERT_TRUE(summary.ok());
    EXPECT_EQ(summary->termination, TerminationReason::kBudgetCandidates);
    EXPECT_EQ(summary->candidates, 6);
  }
  {
    // GPU time: each Evaluate call takes at least 100 ms, so the budget is
    // spent after three calls at most; one more may already be under way
    // when the search sees it (it is cancelled). Without the budget the 20
    // rounds would make many more calls.
    FakeEvaluator evaluator(problem, TimesById({}), 0.1);
    SearchOptions o = options;
    o.budget.max_rounds = 20;
    o.budget.max_gpu_seconds = 0.25;
    SearchContext context = Context(problem, evaluator, ideas, brancher);
    auto summary = MakeParallelBranchSearch(o)->Run(context);
    ASSERT_TRUE(summary.ok());
    EXPECT_EQ(summary->termination, TerminationReason::kBudgetGpuTime);
    EXPECT_GE(summary->gpu_seconds, 0.25);
    EXPECT_LE(evaluator.calls(), 4);
  }
  {
    // Tokens: 100 output tokens per branch call, 30 per idea call.
    FakeEvaluator evaluator(problem, TimesById({}));
    SearchOptions o = options;
    o.budget.max_tokens = 500;
    SearchContext context = Context(problem, evaluator, ideas, brancher);
    auto summary = MakeParallelBranchSearch(o)->Run(context);
    ASSERT_TRUE(summary.ok());
    EXPECT_EQ(summary->termination, TerminationReason::kBudgetTokens);
    EXPECT_GE(summary->input_tokens + summary->output_tokens, 500);
    EXPECT_LE(summary->rounds, 3);
  }
  {
    // Target: a 4x kernel in round 0.
    FakeEvaluator evaluator(problem, TimesById({{"r0.s0.i1.b1", 0.25}}));
    SearchOptions o = options;
    o.budget.target_speedup = 3.0;
    SearchContext context = Context(problem, evaluator, ideas, brancher);
    auto summary = MakeParallelBranchSearch(o)->Run(context);
    ASSERT_TRUE(summary.ok());
    EXPECT_EQ(summary->termination, TerminationReason::kTargetReached);
    EXPECT_EQ(summary->rounds, 1);
    EXPECT_EQ(summary->best->candidate.id, "r0.s0.i1.b1");
  }
}

// A judge that reports itself broken stops every strategy with its reason,
// instead of charging more candidates (and replies) to it.
TEST(Strategies, StopWhenTheEvaluatorReportsItIsBroken) {
  Problem problem = testing::TemplatedRowSoftmax();
  problem.start = problem.templates[0].kernel;
  ScriptedIdeas ideas;
  ScriptedBrancher brancher;
  SearchOptions options;
  options.budget.max_rounds = 20;
  std::vector<std::unique_ptr<Searcher>> searchers;
  searchers.push_back(MakeParallelBranchSearch(options));
  searchers.push_back(MakeSequentialRefineSearch(options));
  searchers.push_back(MakeParameterTuneSearch(options));
  for (auto& searcher : searchers) {
    FakeEvaluator evaluator(problem, TimesById({}));
    evaluator.BreakAfter(2, UnavailableError("the CUDA context is gone"));
    SearchContext context = Context(problem, evaluator, ideas, brancher);
    auto summary = searcher->Run(context);
    ASSERT_TRUE(summary.ok()) << summary.status().ToString();
    EXPECT_EQ(summary->termination, TerminationReason::kFailed) << summary->FullReport();
    EXPECT_NE(summary->error.message().find("the CUDA context is gone"), std::string::npos)
        << summary->error.ToString();
    // The round in which the judge broke is the last (without the check
    // the run would go on for 20). Not a count of calls: the branch search's
    // evaluation lane may start batches already queued before the broken
    // verdicts are seen.
    EXPECT_LE(summary->rounds, 2) << summary->FullReport();
  }
}

TEST(ParallelBranchSearch, WallTimeAndInterruptCancelRequestsInFlight) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  // No compiles: the time measured is the loop's reaction alone.
  auto evaluator = std::make_unique<FakeEvaluator>(problem, TimesById({}));
  // No reply ever comes (the server holds each request for ten minutes), so
  // the run can only end by cancelling the requests in flight.
  MockLlm llm(/*latency_ms=*/600'000);
  llm.server->SetDefaultReply(MockReply{testing::IdeasReply(2)});
  SearchOptions options;
  options.budget.max_wall_seconds = 0.5;
  SearchContext context = Context(problem, *evaluator, *llm.ideas, *llm.brancher);
  auto summary = MakeParallelBranchSearch(options)->Run(context);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->termination, TerminationReason::kBudgetWallTime);
  EXPECT_EQ(summary->candidates, 1);  // the start only
  EXPECT_TRUE(summary->start.has_value());
  EXPECT_GE(llm.server->counters().requests, 1);

  // An interrupt, given once a request is waiting at the server.
  std::atomic<bool> cancel{false};
  options.budget.max_wall_seconds = 0;
  context.cancel = &cancel;
  const int64_t before = llm.server->counters().requests;
  std::thread interrupter([&] {
    while (llm.server->counters().requests == before) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    cancel.store(true);
  });
  summary = MakeParallelBranchSearch(options)->Run(context);
  interrupter.join();
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->termination, TerminationReason::kInterrupted);
  EXPECT_EQ(summary->candidates, 1);
}

TEST(ParallelBranchSearch, MalformedRepliesAndFailedBranchesAreRecordedAndTheSearchGoesOn) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  auto evaluator = testing::CompileOnlyEvaluator(problem);
  ASSERT_NE(evaluator, nullptr);
  MockLlm llm;
  // Round 1's first idea request gets prose instead of a list.
  llm.Rule("# Round 1:", MockReply{"I think you should make it faster."}, 1);
  llm.Rule("# Round", MockReply{testing::IdeasReply(2)});
  // Repairs succeed.
  llm.Rule("# Fix a kernel", MockReply{KernelReply("repaired")});
  llm.Rule("implementation 1 of", MockReply{KernelReply("good")});
  llm.Rule("implementation 2 of", MockReply{"Sorry, here is the idea in words only."});
  llm.Rule("implementation 3 of", MockReply{testing::BrokenKernelReply("broken")});
  MockReply cut;
  cut.fault = MockFault::kMalformedJson;
  llm.Rule("implementation 4 of", cut);
  SearchOptions options;
  options.budget.max_rounds = 3;
  options.seeds = 2;
  options.ideas = 2;
  options.branches = 4;
  options.repair = true;
  RoundCounter counter;
  SearchContext context = Context(problem, *evaluator, *llm.ideas, *llm.brancher, {&counter});
  auto summary = MakeParallelBranchSearch(options)->Run(context);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->termination, TerminationReason::kBudgetRounds) << summary->FullReport();
  EXPECT_EQ(summary->rounds, 3);
  EXPECT_GT(summary->by_status["compile_error"], 0);
  EXPECT_GT(summary->repairs, 0);
  EXPECT_GT(counter.candidates_[2], 0) << "the last round still produced candidates";
  auto has_note = [&](const std::string& piece) {
    return std::any_of(summary->notes.begin(), summary->notes.end(),
                       [&](const std::string& n) { return n.find(piece) != std::string::npos; });
  };
  EXPECT_TRUE(has_note("ideas: reply has no ```json block"))
      << ::testing::PrintToString(summary->notes);
  EXPECT_TRUE(has_note("branch 1: reply has no ```cuda block"));
  EXPECT_TRUE(has_note("branch 3: request failed: DATA_LOSS"));
  // Repairs are children of the failed branch, of the same idea.
  bool repaired = false;
  for (const HistoryEntry& e : summary->history.entries) {
    if (e.candidate.id.ends_with(".fix")) {
      repaired = true;
      EXPECT_EQ(e.candidate.provenance.parent_id + ".fix", e.candidate.id);
      EXPECT_EQ(e.evaluation.status, EvalStatus::kCompiled) << e.evaluation.Report();
    }
  }
  EXPECT_TRUE(repaired);
  // Outcomes say what failed, in words.
  const Idea& first = summary->history.ideas.front();
  EXPECT_NE(first.outcome.find("compile_error"), std::string::npos) << first.outcome;
  EXPECT_NE(first.outcome.find("this_does_not_exist"), std::string::npos) << first.outcome;
}

TEST(ParallelBranchSearch, ReplayReproducesTheTree) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  auto evaluator = testing::CompileOnlyEvaluator(problem);
  ASSERT_NE(evaluator, nullptr);
  std::mutex mutex;
  std::vector<LlmExchange> recorded;
  SearchSummary first;
  SearchOptions options;
  options.budget.max_rounds = 3;
  options.seeds = 2;
  options.ideas = 2;
  options.branches = 3;
  options.repair = true;
  options.seed = 42;
  {
    MockLlm llm(/*latency_ms=*/5);
    llm.Rule("# Round 0", MockReply{testing::IdeasReply(2, 0)});
    llm.Rule("# Round 1", MockReply{testing::IdeasReply(2, 2)});
    llm.Rule("# Round 2", MockReply{testing::IdeasReply(2, 4)});
    llm.Rule("# Fix a kernel", MockReply{KernelReply("fixed")});
    llm.Rule(Implementing(1, 2), MockReply{testing::BrokenKernelReply("b")});
    llm.Rule(Implementing(2, 1), MockReply{"no code"});
    for (int i = 0; i < 6; ++i) {
      for (int b = 1; b <= 3; ++b) {
        llm.Rule(Implementing(i, b),
                 MockReply{KernelReply("i" + std::to_string(i) + "b" + std::to_string(b))});
      }
    }
    llm.client->SetObserver([&](const LlmExchange& e) {
      std::lock_guard<std::mutex> lock(mutex);
      recorded.push_back(e);
    });
    SearchContext context = Context(problem, *evaluator, *llm.ideas, *llm.brancher);
    auto summary = MakeParallelBranchSearch(options)->Run(context);
    ASSERT_TRUE(summary.ok());
    first = std::move(*summary);
  }
  ASSERT_GT(first.repairs, 0);
  ASSERT_GT(first.history.entries.size(), 20u);
  // The recording goes through its file format, as `--record` then
  // `--llm replay:FILE` would.
  testing::TempDir dir;
  std::string path = dir.path() + "/run.jsonl";
  ASSERT_TRUE(SaveLlmRecording(path, recorded).ok());
  auto replay = ReplayLlmClient::Open(path);
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  LlmGeneratorOptions gen;
  gen.model = "mock";
  auto ideas = MakeLlmIdeaGenerator(**replay, gen);
  auto brancher = MakeLlmBrancher(**replay, gen);
  ASSERT_TRUE(ideas.ok() && brancher.ok());
  SearchContext context = Context(problem, *evaluator, **ideas, **brancher);
  auto second = MakeParallelBranchSearch(options)->Run(context);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*replay)->misses(), 0);
  ASSERT_EQ(second->history.ideas.size(), first.history.ideas.size());
  for (size_t i = 0; i < first.history.ideas.size(); ++i) {
    const Idea& a = first.history.ideas[i];
    const Idea& b = second->history.ideas[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.parent_id, b.parent_id);
    EXPECT_EQ(a.text, b.text);
    EXPECT_EQ(a.category, b.category);
    EXPECT_EQ(a.outcome, b.outcome);
  }
  ASSERT_EQ(second->history.entries.size(), first.history.entries.size());
  for (size_t i = 0; i < first.history.entries.size(); ++i) {
    const HistoryEntry& a = first.history.entries[i];
    const HistoryEntry& b = second->history.entries[i];
    EXPECT_EQ(a.candidate.id, b.candidate.id);
    EXPECT_EQ(a.candidate.provenance.parent_id, b.candidate.provenance.parent_id);
    EXPECT_EQ(a.candidate.ContentHash(), b.candidate.ContentHash()) << a.candidate.id;
    EXPECT_EQ(a.evaluation.status, b.evaluation.status) << a.candidate.id;
  }
  EXPECT_EQ(second->notes, first.notes);
  EXPECT_EQ(second->best->candidate.id, first.best->candidate.id);
}

TEST(ParallelBranchSearch, RunsOfflineWithTheCatalogAndParameterMutation) {
  Problem problem = testing::TemplatedRowSoftmax();
  auto evaluator = testing::CompileOnlyEvaluator(problem);
  ASSERT_NE(evaluator, nullptr);
  auto ideas = MakeCatalogIdeaGenerator();
  auto brancher = MakeParameterMutationBrancher();
  SearchOptions options;
  options.budget.max_rounds = 4;
  options.seeds = 2;
  options.ideas = 2;
  options.branches = 2;
  SearchContext context = Context(problem, *evaluator, *ideas, *brancher);
  auto summary = MakeParallelBranchSearch(options)->Run(context);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_GE(summary->rounds, 2) << summary->FullReport();
  EXPECT_GT(summary->candidates, 4);
  std::set<std::string> hashes;
  for (const HistoryEntry& e : summary->history.entries) {
    if (e.candidate.id == "start") continue;
    int64_t block = e.candidate.plan.Param("BLOCK", -1), vec = e.candidate.plan.Param("VEC", -1);
    EXPECT_TRUE(block * vec <= 1024 && block >= 64) << e.candidate.plan.ToJson();
    // Two ideas can meet at one point; the second is not judged again.
    if (!hashes.insert(e.candidate.ContentHash()).second) {
      EXPECT_EQ(e.evaluation.message.rfind("same kernel as ", 0), 0u) << e.candidate.id;
    }
    EXPECT_EQ(e.candidate.provenance.generator, "mutation");
  }
  for (const Idea& idea : summary->history.ideas) EXPECT_EQ(idea.generator, "catalog");
}

TEST(ParallelBranchSearch, RejectsAContextWithoutGenerators) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  FakeEvaluator evaluator(problem, TimesById({}));
  SearchContext context;
  context.problem = &problem;
  context.evaluator = &evaluator;
  auto summary = MakeParallelBranchSearch(SearchOptions{})->Run(context);
  EXPECT_EQ(summary.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ksearch
