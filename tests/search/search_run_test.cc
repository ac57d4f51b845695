// SearchRun's contract on its own, with a fake evaluator: duplicates, the
// candidate budget, which stop wins and what it cancels, a broken evaluator.
#include <gtest/gtest.h>

#include "search_test_util.h"

namespace ksearch {
namespace {

struct Fixture {
  Fixture()
      : problem(testing::RowSoftmaxProblem(8, 64)),
        evaluator(problem, [](const Candidate&) { return testing::Timed(1.0); }) {
    context.problem = &problem;
    context.evaluator = &evaluator;
  }
  // The starting kernel under `id`; `variant` changes its content.
  Candidate Kernel(const std::string& id, int variant) const {
    Candidate c = problem.start.ToCandidate(id, "test");
    c.source = "// variant " + std::to_string(variant) + "\n" + c.source;
    return c;
  }
  Problem problem;
  testing::FakeEvaluator evaluator;
  SearchContext context;
};

TEST(SearchRun, AnswersDuplicatesWithTheFirstVerdictWithinABatchAndAcrossCalls) {
  Fixture f;
  SearchRun run(f.context, SearchBudget(), "test");
  auto first = run.Evaluate({f.Kernel("a", 1), f.Kernel("a2", 1), f.Kernel("b", 2)});
  ASSERT_EQ(first.size(), 3u);
  EXPECT_EQ(f.evaluator.judged().size(), 2u);
  EXPECT_EQ(first[1]->candidate.id, "a2");
  EXPECT_EQ(first[1]->evaluation.candidate_id, "a2");
  EXPECT_EQ(first[1]->evaluation.message, "same kernel as a, not judged again: correct (fake)");
  auto again = run.Evaluate({f.Kernel("a3", 1)});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(f.evaluator.judged().size(), 2u);
  EXPECT_EQ(again[0]->evaluation.message, "same kernel as a, not judged again: correct (fake)");
  SearchSummary summary = run.Finish();
  EXPECT_EQ(summary.candidates, 4);  // duplicates count as judged candidates
  EXPECT_EQ(summary.history.entries.size(), 4u);
  EXPECT_EQ(summary.termination, TerminationReason::kCompleted);
}

TEST(SearchRun, WithoutDuplicateSkippingEveryCandidateIsJudged) {
  Fixture f;
  SearchRun::Options options;
  options.skip_duplicates = false;
  SearchRun run(f.context, SearchBudget(), "test", options);
  run.Evaluate({f.Kernel("a", 1), f.Kernel("a2", 1)});
  EXPECT_EQ(f.evaluator.judged().size(), 2u);
}

TEST(SearchRun, DropsWhatTheCandidateBudgetDoesNotAllow) {
  Fixture f;
  SearchBudget budget;
  budget.max_candidates = 2;
  SearchRun run(f.context, budget, "test");
  EXPECT_EQ(run.CandidatesLeft(), 2);
  auto judged = run.Evaluate({f.Kernel("a", 1), f.Kernel("b", 2), f.Kernel("c", 3)});
  EXPECT_EQ(judged.size(), 2u);
  EXPECT_EQ(f.evaluator.judged().size(), 2u);
  EXPECT_EQ(run.CandidatesLeft(), 0);
  EXPECT_EQ(run.stopped(), TerminationReason::kBudgetCandidates);
  // What was written is still judged after a candidate budget: no cancel.
  EXPECT_TRUE(run.generation_cancel()->load());
  EXPECT_FALSE(run.evaluation_cancel()->load());
  EXPECT_TRUE(run.Evaluate({f.Kernel("d", 4)}).empty());
  EXPECT_EQ(run.Finish().termination, TerminationReason::kBudgetCandidates);
}

TEST(SearchRun, TheFirstStopReasonWinsAndEachStopCancelsWhatItShould) {
  Fixture f;
  SearchRun run(f.context, SearchBudget(), "test");
  EXPECT_FALSE(run.stopped().has_value());
  run.Stop(TerminationReason::kBudgetTokens);
  EXPECT_TRUE(run.generation_cancel()->load());
  EXPECT_FALSE(run.evaluation_cancel()->load());
  run.Stop(TerminationReason::kStoppedByObserver);
  EXPECT_TRUE(run.evaluation_cancel()->load());  // an observer's stop cancels at once
  EXPECT_EQ(run.stopped(), TerminationReason::kBudgetTokens);
  // A cancelled generator call after a stop is no failure.
  run.GeneratorFailed(CancelledError("cancelled"), "ideas r1.s0");
  run.Fail(InternalError("late"));  // replaces kCompleted only
  SearchSummary summary = run.Finish();
  EXPECT_EQ(summary.termination, TerminationReason::kBudgetTokens);
  EXPECT_TRUE(summary.error.ok());
}

TEST(SearchRun, AFailureReplacesCompletionAndAGeneratorErrorFailsTheRun) {
  Fixture f;
  {
    SearchRun run(f.context, SearchBudget(), "test");
    run.Stop(TerminationReason::kCompleted);
    EXPECT_FALSE(run.generation_cancel()->load());  // completion cancels nothing
    run.Fail(UnavailableError("no idea in 2 rounds"));
    SearchSummary summary = run.Finish();
    EXPECT_EQ(summary.termination, TerminationReason::kFailed);
    EXPECT_EQ(summary.error.code(), StatusCode::kUnavailable);
  }
  SearchRun run(f.context, SearchBudget(), "test");
  run.GeneratorFailed(UnauthenticatedError("bad key"), "ideas r1.s0");
  SearchSummary summary = run.Finish();
  EXPECT_EQ(summary.termination, TerminationReason::kFailed);
  EXPECT_NE(summary.error.message().find("ideas r1.s0"), std::string::npos)
      << summary.error.ToString();
}

TEST(SearchRun, ABrokenEvaluatorFailsTheRunWithItsReason) {
  Fixture f;
  f.evaluator.BreakAfter(1, InternalError("the judge's reference failed"));
  SearchRun run(f.context, SearchBudget(), "test");
  run.Evaluate({f.Kernel("a", 1)});
  EXPECT_EQ(run.stopped(), TerminationReason::kFailed);
  EXPECT_TRUE(run.evaluation_cancel()->load());
  SearchSummary summary = run.Finish();
  EXPECT_NE(summary.error.message().find("the judge's reference failed"), std::string::npos)
      << summary.error.ToString();
}

TEST(SearchRun, TokensAndCostCountTowardTheirBudgets) {
  Fixture f;
  SearchBudget budget;
  budget.max_cost_usd = 1.0;
  SearchRun run(f.context, budget, "test");
  run.AddUsage(GeneratorUsage{10, 20, 0.6});
  EXPECT_FALSE(run.stopped().has_value());
  IdeaResult ideas;
  ideas.input_tokens = 5;
  ideas.cost_usd = 0.5;
  run.AddUsage(ideas);
  EXPECT_EQ(run.stopped(), TerminationReason::kBudgetCost);
  SearchSummary summary = run.Finish();
  EXPECT_EQ(summary.input_tokens, 15);
  EXPECT_EQ(summary.output_tokens, 20);
  EXPECT_DOUBLE_EQ(summary.cost_usd, 1.1);
}

}  // namespace
}  // namespace ksearch
