// SearchRun's contract on its own, with a fake evaluator: duplicates, the
// candidate budget, which stop wins and what it cancels, a broken evaluator.
#include <gtest/gtest.h>

#include "core/shape_cases.h"
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
  // A reply the provider has begun is billed anyway: the token budget
  // cancels no request (the spending gate sends nothing new).
  EXPECT_FALSE(run.generation_cancel()->load());
  EXPECT_FALSE(run.evaluation_cancel()->load());
  run.Stop(TerminationReason::kStoppedByObserver);
  EXPECT_TRUE(run.generation_cancel()->load());
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

// The token and money budgets are kept by the run's spending gate before a
// request is sent: its first refusal stops the run, with nothing in flight
// cancelled, and the generator calls of the run see the same gate.
TEST(SearchRun, TheSpendingGatesFirstRefusalStopsTheRunWithoutCancellingRequests) {
  Fixture f;
  SearchBudget budget;
  budget.max_tokens = 100;
  SearchRun run(f.context, budget, "test");
  ASSERT_TRUE(run.spending()->Admit(GeneratorUsage{30, 40, 0.0}).ok());
  EXPECT_FALSE(run.CheckLimits());
  EXPECT_FALSE(run.spending()->Admit(GeneratorUsage{30, 40, 0.0}).ok());
  EXPECT_TRUE(run.CheckLimits());
  EXPECT_EQ(run.stopped(), TerminationReason::kBudgetTokens);
  EXPECT_FALSE(run.generation_cancel()->load());
  EXPECT_FALSE(run.evaluation_cancel()->load());
  // Usage the run counts is what the gate counts at least.
  run.AddUsage(GeneratorUsage{20, 25, 0.0});
  EXPECT_EQ(run.spending()->spent().input_tokens, 20);
  EXPECT_EQ(run.Finish().termination, TerminationReason::kBudgetTokens);
}

// A judged kernel with one result per shape case of `problem`: `ms[i]` for
// timed case i, wrong where `wrong_at` names the case. Overall it is ok only
// when no case is wrong, as the shape-set judge reports.
Evaluation PerCase(const Problem& problem, const std::vector<double>& ms, const std::string& wrong_at) {
  Evaluation e;
  std::vector<size_t> all;
  for (size_t i = 0; i < problem.shapes.size(); ++i) {
    bool wrong = problem.shapes[i].name == wrong_at;
    e.cases.push_back(testing::FakeCase(problem, i, wrong ? EvalStatus::kWrongResult : EvalStatus::kOk, ms[i]));
    all.push_back(i);
  }
  if (wrong_at.empty()) {
    e.status = EvalStatus::kOk;
    e.message = "correct (fake)";
    internal::CombineTimedCases(e.cases, all, &e);
  } else {
    e.status = EvalStatus::kWrongResult;
    e.message = "at case '" + wrong_at + "': wrong (fake)";
  }
  return e;
}

// Every strategy records through SearchRun, so every strategy keeps a best
// kernel per dispatch bucket: through Evaluate (the tune, the refine loop)
// and through Record (the branch search's own evaluation lanes). A kernel
// wrong in one bucket still competes in the other.
TEST(SearchRun, KeepsTheBestKernelOfEachDispatchBucket) {
  Problem problem = testing::RowSoftmaxProblem(64, 64);
  problem.shapes = {ShapeCase{"small", {{"rows", 4}}, 1.0, true},
                    ShapeCase{"big", {{"rows", 64}}, 1.0, true}};
  problem.dispatch = DispatchSpec{"rows", {16}};
  ASSERT_TRUE(problem.Validate().ok()) << problem.Validate().ToString();
  // a: fastest at small, wrong at big. b: correct everywhere, fast at big.
  // c: correct everywhere, slower than both.
  std::map<std::string, Evaluation> verdicts = {{"a", PerCase(problem, {1.0, 1.0}, "big")},
                                                {"b", PerCase(problem, {3.0, 2.0}, "")},
                                                {"c", PerCase(problem, {4.0, 4.0}, "")}};
  testing::FakeEvaluator evaluator(problem, [&](const Candidate& c) { return verdicts.at(c.id); });
  SearchContext context;
  context.problem = &problem;
  context.evaluator = &evaluator;
  SearchRun run(context, SearchBudget(), "test");
  auto kernel = [&](const std::string& id, int variant) {
    Candidate c = problem.start.ToCandidate(id, "test");
    c.source = "// variant " + std::to_string(variant) + "\n" + c.source;
    return c;
  };
  run.Evaluate({kernel("c", 3), kernel("a", 1)});
  run.Record(HistoryEntry{kernel("b", 2), verdicts.at("b")});
  SearchSummary summary = run.Finish();
  ASSERT_EQ(summary.best_per_bucket.size(), 2u);
  ASSERT_TRUE(summary.best_per_bucket[0] && summary.best_per_bucket[1]);
  EXPECT_EQ(summary.best_per_bucket[0]->candidate.id, "a");
  EXPECT_EQ(summary.best_per_bucket[1]->candidate.id, "b");
  // Each entry is its bucket's view: its case alone and its time.
  ASSERT_EQ(summary.best_per_bucket[0]->evaluation.cases.size(), 1u);
  EXPECT_EQ(summary.best_per_bucket[0]->evaluation.status, EvalStatus::kOk);
  EXPECT_DOUBLE_EQ(summary.best_per_bucket[1]->evaluation.timing->median_ms, 2.0);
  // The overall best must be correct at every case: b, not the faster a.
  ASSERT_TRUE(summary.best);
  EXPECT_EQ(summary.best->candidate.id, "b");
}

// Without buckets there is no table; nor without a problem in the context
// (a caller's own strategy may run on an evaluator alone).
TEST(SearchRun, KeepsNoBucketTableWithoutDispatch) {
  Fixture f;
  SearchRun run(f.context, SearchBudget(), "test");
  run.Evaluate({f.Kernel("a", 1)});
  EXPECT_TRUE(run.Finish().best_per_bucket.empty());
  Fixture g;
  g.context.problem = nullptr;
  SearchRun bare(g.context, SearchBudget(), "test");
  ASSERT_EQ(bare.Evaluate({g.Kernel("a", 1)}).size(), 1u);
  EXPECT_TRUE(bare.Finish().best_per_bucket.empty());
}

}  // namespace
}  // namespace ksearch
