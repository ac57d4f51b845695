// SequentialRefineSearch: one request and one candidate at a time, each
// revision made from the last evaluation, failures repaired.
#include <gtest/gtest.h>

#include "search_test_util.h"

namespace ksearch {
namespace {

TEST(SequentialRefineSearch, RevisesOneCandidateAtATimeAndRepairsFailures) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  auto evaluator = testing::CompileOnlyEvaluator(problem);
  ASSERT_NE(evaluator, nullptr);
  auto mock = MockLlmServer::Start({});
  ASSERT_TRUE(mock.ok());
  (*mock)->Enqueue(MockReply{testing::BrokenKernelReply("step 1")});
  (*mock)->Enqueue(MockReply{testing::KernelReply("step 2 (repair)")});
  (*mock)->Enqueue(MockReply{"Nothing to add."});
  (*mock)->Enqueue(MockReply{testing::KernelReply("step 4")});
  HttpLlmClient::Options options;
  options.base_url = (*mock)->openai_base_url();
  options.default_model = "mock";
  auto client = HttpLlmClient::Create(options);
  ASSERT_TRUE(client.ok());
  auto brancher = MakeLlmBrancher(**client);
  ASSERT_TRUE(brancher.ok());
  SearchOptions search;
  search.budget.max_rounds = 5;
  testing::RoundCounter counter;
  SearchContext context;
  context.problem = &problem;
  context.evaluator = evaluator.get();
  context.brancher = brancher->get();
  context.observers = {&counter};
  auto summary = MakeSequentialRefineSearch(search)->Run(context);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->strategy, "refine");
  EXPECT_EQ(summary->termination, TerminationReason::kBudgetRounds);
  EXPECT_EQ(summary->rounds, 5);
  // start, s1 (broken), s2 (its repair), s3 gave no code, s4.
  ASSERT_EQ(summary->history.entries.size(), 4u) << summary->FullReport();
  const auto& e = summary->history.entries;
  EXPECT_EQ(e[1].candidate.id, "s1");
  EXPECT_EQ(e[1].evaluation.status, EvalStatus::kCompileError);
  EXPECT_EQ(e[2].candidate.id, "s2");
  EXPECT_EQ(e[2].candidate.provenance.parent_id, "s1");
  EXPECT_NE(e[2].candidate.provenance.generator.find("repair"), std::string::npos);
  EXPECT_TRUE(e[2].evaluation.ok());
  EXPECT_EQ(e[3].candidate.id, "s4");
  EXPECT_EQ(summary->repairs, 1);
  EXPECT_EQ(summary->ideas, 4);
  EXPECT_EQ(summary->history.ideas.size(), 4u);
  // Compile-only: nothing was run, so the outcome counts compiled branches.
  EXPECT_TRUE(summary->history.ideas[2].outcome.starts_with("0 of 1 branches compiled"))
      << summary->history.ideas[2].outcome;
  ASSERT_FALSE(summary->notes.empty());
  EXPECT_NE(summary->notes[0].find("s3: "), std::string::npos) << summary->notes[0];
  // One request at a time, and the repair prompt carried the compile log.
  EXPECT_EQ((*mock)->counters().max_concurrent_requests, 1);
  auto requests = (*mock)->requests();
  ASSERT_EQ(requests.size(), 4u);
  EXPECT_NE(requests[1].request.messages[0].content.find("this_does_not_exist"), std::string::npos);
  // Step 3 revised the best kernel so far; the earlier steps are in its prompt.
  EXPECT_NE(requests[2].request.messages[0].content.find("s2.idea"), std::string::npos);
}

TEST(SequentialRefineSearch, AsksForAnIdeaPerStepWhenToldAndStopsOnTime) {
  Problem problem = testing::RowSoftmaxProblem(64, 1024);
  testing::FakeEvaluator evaluator(problem, [](const Candidate&) { return testing::Timed(1.0); });
  auto ideas = MakeCatalogIdeaGenerator();
  auto brancher = MakeParameterMutationBrancher();
  // The row softmax has no params: the catalog has nothing, so each step
  // falls back to the generic revision idea, which the mutation brancher
  // cannot apply either; three empty steps end the run.
  SearchOptions search;
  SequentialRefineOptions refine;
  refine.use_idea_generator = true;
  SearchContext context;
  context.problem = &problem;
  context.evaluator = &evaluator;
  context.ideas = ideas.get();
  context.brancher = brancher.get();
  auto summary = MakeSequentialRefineSearch(search, refine)->Run(context);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->termination, TerminationReason::kCompleted);
  EXPECT_EQ(summary->candidates, 1);

  // With a template, the catalog's moves are applied one at a time until the
  // wall-time budget ends the run.
  Problem templated = testing::TemplatedRowSoftmax();
  templated.start = templated.templates[0].kernel;
  // Each kernel is a little faster than the one before, so each step
  // revises the newest.
  auto calls = std::make_shared<int>(0);
  testing::FakeEvaluator slow(
      templated, [calls](const Candidate&) { return testing::Timed(1.0 / ++*calls); }, 0.05);
  context.problem = &templated;
  context.evaluator = &slow;
  search.budget.max_wall_seconds = 0.3;
  summary = MakeSequentialRefineSearch(search, refine)->Run(context);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->termination, TerminationReason::kBudgetWallTime) << summary->FullReport();
  // The loop checks the budget before each step and each evaluation takes
  // at least 50 ms, so no more than six can have begun within 0.3 s.
  EXPECT_LE(slow.calls(), 6);
  EXPECT_GE(summary->candidates, 2);
  ASSERT_FALSE(summary->history.ideas.empty());
  EXPECT_EQ(summary->history.ideas[0].generator, "catalog");
  EXPECT_EQ(summary->history.entries[1].candidate.provenance.parent_id, "start");
}

}  // namespace
}  // namespace ksearch
