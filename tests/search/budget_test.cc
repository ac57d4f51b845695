// Token and money budgets against a server that bills what it writes, as
// providers do: a request is sent only when its worst case (prompt,
// estimated, plus its output limit) fits in what is left (SpendingGate), and
// no request is cancelled for the budget, so the run never spends more than
// its budget, the summary counts exactly what the server billed, and every
// reply that was paid for is judged.
#include <gtest/gtest.h>

#include <mutex>

#include "search_test_util.h"

namespace ksearch {
namespace {

TEST(SpendingGate, AdmitsWhatFitsBesideTheRequestsInFlightAndThenRefusesForGood) {
  SpendingGate gate(/*max_tokens=*/1000, /*max_cost_usd=*/0.0);
  const GeneratorUsage worst{100, 400, 0.0};
  ASSERT_TRUE(gate.Admit(worst).ok());
  ASSERT_TRUE(gate.Admit(worst).ok());  // 1000 held: exactly the budget
  EXPECT_EQ(gate.refused(), SpendingGate::Limit::kNone);
  Status refused = gate.Admit(GeneratorUsage{1, 0, 0.0});
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(refused.message().starts_with("not sent: ")) << refused.message();
  EXPECT_NE(refused.message().find("token budget of 1000 has 0 left"), std::string::npos)
      << refused.message();
  EXPECT_EQ(gate.refused(), SpendingGate::Limit::kTokens);
  // A reply that used less than its worst case frees room, but the first
  // refusal ends the run: nothing more is sent.
  gate.Settle(worst, GeneratorUsage{90, 60, 0.0});
  EXPECT_EQ(gate.spent().input_tokens, 90);
  EXPECT_EQ(gate.spent().output_tokens, 60);
  EXPECT_FALSE(gate.Admit(GeneratorUsage{10, 10, 0.0}).ok());
}

TEST(SpendingGate, KeepsAMoneyBudgetAndCountsSpendingReportedElsewhere) {
  SpendingGate gate(/*max_tokens=*/0, /*max_cost_usd=*/1.0);
  ASSERT_TRUE(gate.Admit(GeneratorUsage{10, 10, 0.5}).ok());
  gate.Settle(GeneratorUsage{10, 10, 0.5}, GeneratorUsage{5, 5, 0.25});
  // The searcher's totals include replies that never asked the gate.
  gate.AtLeastSpent(GeneratorUsage{50, 50, 0.75});
  Status refused = gate.Admit(GeneratorUsage{10, 10, 0.3});
  EXPECT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("money budget of $1.0000 has $0.2500 left"), std::string::npos)
      << refused.message();
  EXPECT_EQ(gate.refused(), SpendingGate::Limit::kCost);
}

TEST(SpendingGate, EstimatesAPromptAboveFourBytesPerToken) {
  const std::string system(3000, 's');
  const std::string user(9000, 'u');
  const int64_t estimate = EstimatePromptTokens(system, {user});
  EXPECT_GE(estimate, (3000 + 9000) / 3);
  EXPECT_GT(estimate, (3000 + 9000) / 4 + 1);  // what the mock server bills
}

class BudgetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    problem_ = testing::RowSoftmaxProblem(64, 1024);
    MockLlmServer::Options options;
    // Replies take a while, so that several are in flight when the budget
    // is reached.
    options.latency_ms = 30;
    auto mock = MockLlmServer::Start(options);
    ASSERT_TRUE(mock.ok()) << mock.status().ToString();
    mock_ = std::move(*mock);
    ASSERT_TRUE(mock_->AddRule(MockRule{"# Round", "", MockReply{testing::IdeasReply(3)}}).ok());
    for (int b = 1; b <= 3; ++b) {
      ASSERT_TRUE(mock_->AddRule(MockRule{"implementation " + std::to_string(b) + " of", "",
                                          MockReply{testing::KernelReply("b" + std::to_string(b))}})
                      .ok());
    }
  }

  std::unique_ptr<HttpLlmClient> Client(PriceTable prices = {}) {
    return testing::MockClient(mock_->openai_base_url(), 1, std::move(prices));
  }

  // Runs the branch search until `budget` stops it; returns the summary
  // and counts in `paid_branch_replies` the branch replies the client
  // received in full.
  SearchSummary Run(LlmClient& client, const SearchBudget& budget, int* paid_branch_replies) {
    std::mutex mutex;
    client.SetObserver([&](const LlmExchange& e) {
      std::lock_guard<std::mutex> lock(mutex);
      if (e.response.ok() && e.request.tag.starts_with("branch")) ++*paid_branch_replies;
    });
    LlmGeneratorOptions gen;
    gen.max_tokens = 1500;
    auto ideas = MakeLlmIdeaGenerator(client, gen);
    auto brancher = MakeLlmBrancher(client, gen);
    EXPECT_TRUE(ideas.ok() && brancher.ok());
    testing::FakeEvaluator evaluator(problem_, [](const Candidate&) { return testing::Timed(1); });
    SearchContext context = testing::Context(problem_, evaluator, ideas->get(), brancher->get());
    SearchOptions options;
    options.seeds = 2;
    options.ideas = 3;
    options.branches = 3;
    options.budget = budget;
    ParallelBranchOptions branch;
    branch.skip_duplicates = false;
    auto summary = MakeParallelBranchSearch(options, branch)->Run(context);
    client.SetObserver(nullptr);
    EXPECT_TRUE(summary.ok()) << summary.status().ToString();
    return summary.ok() ? std::move(*summary) : SearchSummary{};
  }

  Problem problem_;
  std::unique_ptr<MockLlmServer> mock_;
};

TEST_F(BudgetTest, ATokenBudgetIsNeverOverspentAndEveryPaidReplyIsCountedAndJudged) {
  auto client = Client();
  ASSERT_NE(client, nullptr);
  SearchBudget budget;
  budget.max_tokens = 40000;
  int paid = 0;
  SearchSummary summary = Run(*client, budget, &paid);
  EXPECT_EQ(summary.termination, TerminationReason::kBudgetTokens) << summary.FullReport();
  const MockLlmServer::Counters billed = mock_->counters();
  ASSERT_GT(billed.billed_replies, 3);
  // What the server billed is what the run counted, and within the budget.
  EXPECT_EQ(summary.input_tokens, billed.billed_input_tokens);
  EXPECT_EQ(summary.output_tokens, billed.billed_output_tokens);
  EXPECT_LE(billed.billed_input_tokens + billed.billed_output_tokens, budget.max_tokens);
  // No request was cancelled: every reply the server wrote arrived, and
  // every kernel in one was judged.
  EXPECT_EQ(client->totals().failures, 0);
  EXPECT_EQ(summary.by_status.count("cancelled"), 0u) << summary.FullReport();
  EXPECT_EQ(summary.candidates - 1, paid);
  // The run says why it stopped.
  bool said = false;
  for (const std::string& note : summary.notes) said |= note.find("not sent: ") != std::string::npos;
  EXPECT_TRUE(said) << summary.FullReport();
}

TEST_F(BudgetTest, AMoneyBudgetIsNeverOverspent) {
  PriceTable prices;
  prices.Set("mock", ModelPrice{1000.0, 2000.0});  // $ per million tokens
  auto client = Client(prices);
  ASSERT_NE(client, nullptr);
  SearchBudget budget;
  budget.max_cost_usd = 50.0;
  int paid = 0;
  SearchSummary summary = Run(*client, budget, &paid);
  EXPECT_EQ(summary.termination, TerminationReason::kBudgetCost) << summary.FullReport();
  const MockLlmServer::Counters billed = mock_->counters();
  const double server_usd = prices.CostUsd("mock", billed.billed_input_tokens, billed.billed_output_tokens);
  EXPECT_NEAR(summary.cost_usd, server_usd, 1e-9);
  EXPECT_LE(server_usd, budget.max_cost_usd);
  EXPECT_EQ(summary.by_status.count("cancelled"), 0u) << summary.FullReport();
  EXPECT_EQ(summary.candidates - 1, paid);
}

}  // namespace
}  // namespace ksearch
