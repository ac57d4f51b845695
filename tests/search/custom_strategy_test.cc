// The strategy of examples/custom_strategy, written on SearchRun, on a fake
// evaluator: the budgets stop it, an observer's kStop and the cancel flag are
// honoured, its ideas get outcomes, and at an equal candidate budget it judges
// as many candidates as ParallelBranchSearch.
#include <gtest/gtest.h>

#include <cmath>

#include "custom_strategy/category_beam.h"
#include "search_test_util.h"

namespace ksearch {
namespace {

// The templated row softmax, starting at the template's default point so
// that the catalog has moves for it; a kernel's time depends on its point.
struct Fixture {
  Fixture()
      : problem(Start(testing::TemplatedRowSoftmax())),
        evaluator(problem, [](const Candidate& c) {
          double block = static_cast<double>(c.plan.Param("BLOCK", 128));
          double vec = static_cast<double>(c.plan.Param("VEC", 1));
          return testing::Timed(1.0 + 0.1 * std::abs(std::log2(block / 256.0)) + 1.0 / vec);
        }),
        ideas(MakeCatalogIdeaGenerator()),
        brancher(MakeParameterMutationBrancher()) {
    context.problem = &problem;
    context.evaluator = &evaluator;
    context.ideas = ideas.get();
    context.brancher = brancher.get();
  }
  static Problem Start(Problem p) {
    p.start = p.templates[0].kernel;
    return p;
  }

  Problem problem;
  testing::FakeEvaluator evaluator;
  std::unique_ptr<IdeaGenerator> ideas;
  std::unique_ptr<Brancher> brancher;
  SearchContext context;
};

// Runs the beam under `budget`; a run that cannot start fails the test.
SearchSummary RunBeam(Fixture& f, const SearchBudget& budget) {
  auto summary = example::CategoryBeamSearch(budget).Run(f.context);
  EXPECT_TRUE(summary.ok()) << summary.status().ToString();
  return summary.ok() ? std::move(*summary) : SearchSummary{};
}

SearchBudget Rounds(int rounds) {
  SearchBudget budget;
  budget.max_rounds = rounds;
  return budget;
}

TEST(CategoryBeamSearch, StopsAtTheCandidateBudgetAndGivesEveryIdeaAnOutcome) {
  Fixture f;
  SearchBudget budget;
  budget.max_candidates = 7;
  SearchSummary summary = RunBeam(f, budget);
  EXPECT_EQ(summary.strategy, "category-beam");
  EXPECT_EQ(summary.termination, TerminationReason::kBudgetCandidates) << summary.FullReport();
  EXPECT_EQ(summary.candidates, 7);
  EXPECT_EQ(summary.history.entries.size(), 7u);
  EXPECT_LE(f.evaluator.judged().size(), 7u);  // duplicates are not judged again
  ASSERT_TRUE(summary.start.has_value());
  ASSERT_TRUE(summary.best.has_value());
  ASSERT_FALSE(summary.history.ideas.empty());
  EXPECT_EQ(summary.ideas, static_cast<int64_t>(summary.history.ideas.size()));
  for (const Idea& idea : summary.history.ideas) {
    EXPECT_FALSE(idea.outcome.empty()) << idea.id;
    EXPECT_NE(summary.history.FindCandidate(idea.parent_id), nullptr) << idea.id;
  }
  // The first idea's outcome speaks of its branches against its parent.
  EXPECT_NE(summary.history.ideas[0].outcome.find("branches correct"), std::string::npos)
      << summary.history.ideas[0].outcome;
}

// Reports the tokens a model would have used: 100 per Propose call.
class CountingIdeas final : public IdeaGenerator {
 public:
  explicit CountingIdeas(IdeaGenerator& inner) : inner_(inner) {}
  StatusOr<IdeaResult> Propose(const IdeaRequest& request) override {
    ++calls;
    auto result = inner_.Propose(request);
    if (result.ok()) result->input_tokens = 100;
    return result;
  }
  std::string name() const override { return inner_.name(); }
  int calls = 0;

 private:
  IdeaGenerator& inner_;
};

TEST(CategoryBeamSearch, StopsAtTheTokenBudgetWithoutAnotherCall) {
  Fixture f;
  CountingIdeas ideas(*f.ideas);
  f.context.ideas = &ideas;
  SearchBudget budget;
  budget.max_tokens = 250;
  SearchSummary summary = RunBeam(f, budget);
  EXPECT_EQ(summary.termination, TerminationReason::kBudgetTokens) << summary.FullReport();
  // The third call crosses 250 tokens; none is made after it.
  EXPECT_EQ(ideas.calls, 3);
  EXPECT_EQ(summary.input_tokens, 300);
}

// Says kStop at the n-th event of one kind, and records what came after.
class StopAt final : public SearchObserver {
 public:
  enum class On { kIdea, kEvaluation };
  StopAt(On on, int n) : on_(on), n_(n) {}
  ObserverAction OnIdea(const Idea&) override { return Count(On::kIdea); }
  ObserverAction OnCandidateEvaluated(const Candidate&, const Evaluation&) override {
    if (stopped_) ++evaluated_after_stop;
    return Count(On::kEvaluation);
  }
  ObserverAction OnRoundStart(int round, const std::vector<std::string>&) override {
    if (stopped_) ++rounds_after_stop;
    last_round = round;
    return ObserverAction::kContinue;
  }
  int evaluated_after_stop = 0;
  int rounds_after_stop = 0;
  int last_round = -1;

 private:
  ObserverAction Count(On on) {
    if (on != on_ || ++seen_ != n_) return ObserverAction::kContinue;
    stopped_ = true;
    return ObserverAction::kStop;
  }
  On on_;
  int n_;
  int seen_ = 0;
  bool stopped_ = false;
};

TEST(CategoryBeamSearch, AnObserversStopOnAnIdeaEndsTheRunBeforeAnythingMoreIsJudged) {
  Fixture f;
  StopAt stop(StopAt::On::kIdea, 1);
  f.context.observers = {&stop};
  SearchSummary summary = RunBeam(f, Rounds(10));
  EXPECT_EQ(summary.termination, TerminationReason::kStoppedByObserver) << summary.FullReport();
  // Only the starting kernel was judged: the stop came with the first idea,
  // and what the round had written was cancelled, not judged.
  EXPECT_EQ(f.evaluator.judged().size(), 1u);
  EXPECT_EQ(summary.candidates, 1);
  EXPECT_EQ(stop.evaluated_after_stop, 0);
  EXPECT_EQ(stop.rounds_after_stop, 0);
  EXPECT_EQ(summary.ideas, 1);
}

TEST(CategoryBeamSearch, AnObserversStopOnAnEvaluationStartsNoFurtherRound) {
  Fixture f;
  StopAt stop(StopAt::On::kEvaluation, 2);  // the first branch of round 1
  f.context.observers = {&stop};
  SearchSummary summary = RunBeam(f, Rounds(10));
  EXPECT_EQ(summary.termination, TerminationReason::kStoppedByObserver) << summary.FullReport();
  EXPECT_EQ(stop.last_round, 1);
  EXPECT_EQ(stop.rounds_after_stop, 0);
  EXPECT_EQ(summary.rounds, 2);
  // Round 1 was judged in one call, which had returned before the stop.
  EXPECT_EQ(f.evaluator.calls(), 2);
}

TEST(CategoryBeamSearch, TheCancelFlagInterruptsIt) {
  Fixture f;
  std::atomic<bool> cancel{true};
  f.context.cancel = &cancel;
  SearchSummary summary = RunBeam(f, Rounds(10));
  EXPECT_EQ(summary.termination, TerminationReason::kInterrupted);
  // At most the starting kernel, judged before the run looked at the flag.
  EXPECT_LE(summary.rounds, 1);
  EXPECT_LE(f.evaluator.judged().size(), 1u);
  EXPECT_TRUE(summary.history.ideas.empty());
}

TEST(CategoryBeamSearch, JudgesAsManyCandidatesAsParallelBranchSearchAtEqualBudget) {
  SearchBudget budget;
  budget.max_candidates = 11;
  Fixture mine;
  auto beam = example::CategoryBeamSearch(budget).Run(mine.context);
  Fixture theirs;
  SearchOptions options;
  options.budget = budget;
  options.seeds = options.ideas = options.branches = 2;
  auto branch = MakeParallelBranchSearch(options)->Run(theirs.context);
  ASSERT_TRUE(beam.ok() && branch.ok());
  for (const SearchSummary* s : {&*beam, &*branch}) {
    EXPECT_EQ(s->termination, TerminationReason::kBudgetCandidates) << s->FullReport();
    EXPECT_EQ(s->candidates, 11) << s->strategy;
    ASSERT_TRUE(s->best.has_value()) << s->strategy;
    EXPECT_TRUE(s->best->evaluation.ok());
  }
}

}  // namespace
}  // namespace ksearch
