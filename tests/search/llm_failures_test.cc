// The LLM generators and ParallelBranchSearch against replies as providers
// really send them: failure is per reply (refusals, empty content,
// context-length 400s become notes and empty branches), and only what dooms
// every later request ends the search — with `failed`, never `completed`.
#include <gtest/gtest.h>

#include "llm/loopback_port.h"
#include "search_test_util.h"

namespace ksearch {
namespace {

HistoryEntry Judged(Candidate c, Evaluation e) {
  e.candidate_id = c.id;
  return HistoryEntry{std::move(c), std::move(e)};
}

// A loopback URL where nothing listens (connection refused).
std::string DeadUrl() {
  testing::LoopbackPort dead(testing::LoopbackPort::Kind::kDead);
  return dead.url() + "/v1";
}

class LlmFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    problem_ = testing::RowSoftmaxProblem(64, 1024);
    parent_ = Judged(problem_.start.ToCandidate("start", "start"), testing::Timed(2.0));
  }
  void StartMock(MockLlmServer::Options options = {}) {
    auto mock = MockLlmServer::Start(std::move(options));
    ASSERT_TRUE(mock.ok()) << mock.status().ToString();
    mock_ = std::move(*mock);
    client_ = testing::MockClient(mock_->openai_base_url());
  }
  BranchRequest Branches(const Idea& idea, int count) {
    BranchRequest request;
    request.problem = &problem_;
    request.parent = &parent_;
    request.idea = &idea;
    request.history = &history_;
    request.count = count;
    request.label = "r0.s0.i0";
    return request;
  }

  Problem problem_;
  HistoryEntry parent_;
  SearchHistory history_;
  std::unique_ptr<MockLlmServer> mock_;
  std::unique_ptr<HttpLlmClient> client_;
};

TEST_F(LlmFailureTest, OddRepliesCostTheirBranchOnly) {
  StartMock();
  MockReply refusal;
  refusal.fault = MockFault::kRefusal;
  ASSERT_TRUE(mock_->AddRule(MockRule{"implementation 1 of", "", refusal}).ok());
  ASSERT_TRUE(mock_->AddRule(MockRule{"implementation 2 of", "", MockReply{""}}).ok());
  MockReply shape;
  shape.fault = MockFault::kMissingFields;
  ASSERT_TRUE(mock_->AddRule(MockRule{"implementation 3 of", "", shape}).ok());
  mock_->SetDefaultReply(MockReply{testing::KernelReply("good")});
  auto brancher = MakeLlmBrancher(*client_);
  ASSERT_TRUE(brancher.ok());
  Idea idea;
  idea.text = "Vectorize the loads.";
  auto result = (*brancher)->Branch(Branches(idea, 4));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->candidates.size(), 4u);
  EXPECT_TRUE(result->candidates[0].source.empty());
  EXPECT_TRUE(result->candidates[1].source.empty());
  EXPECT_TRUE(result->candidates[2].source.empty());
  EXPECT_NE(result->candidates[3].source.find("// good"), std::string::npos);
  EXPECT_NE(result->notes.find("branch 0: request failed: DATA_LOSS"), std::string::npos)
      << result->notes;
  EXPECT_NE(result->notes.find("refused"), std::string::npos) << result->notes;
  EXPECT_NE(result->notes.find("empty content"), std::string::npos) << result->notes;
  EXPECT_NE(result->notes.find("branch 2: request failed: UNIMPLEMENTED"), std::string::npos)
      << result->notes;
}

TEST_F(LlmFailureTest, AnUnusableOrCutReplyIsAskedForAgainQuotingWhatWasWrong) {
  StartMock();
  ASSERT_TRUE(
      mock_->AddRule(MockRule{"could not be used", "", MockReply{testing::KernelReply("again")}})
          .ok());
  ASSERT_TRUE(mock_->AddRule(MockRule{"implementation 1 of", "", MockReply{"Just use shuffles."}})
                  .ok());
  MockReply cut{"```cuda\nextern \"C\" __global__ void row_softmax("};
  cut.finish_reason = FinishReason::kLength;
  ASSERT_TRUE(mock_->AddRule(MockRule{"implementation 2 of", "", cut}).ok());
  LlmGeneratorOptions gen;
  gen.reformat_attempts = 1;
  auto brancher = MakeLlmBrancher(*client_, gen);
  ASSERT_TRUE(brancher.ok());
  Idea idea;
  idea.text = "Use warp shuffles.";
  auto result = (*brancher)->Branch(Branches(idea, 2));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->candidates.size(), 2u);
  for (const Candidate& c : result->candidates) {
    EXPECT_NE(c.source.find("// again"), std::string::npos) << result->notes;
  }
  std::vector<MockRequest> seen = mock_->requests();
  ASSERT_EQ(seen.size(), 4u);
  std::string asks;
  for (const MockRequest& r : seen) {
    if (r.request.messages.size() > 1) asks += r.request.messages.back().content + "\n";
  }
  EXPECT_NE(asks.find("no ```cuda block"), std::string::npos) << asks;
  EXPECT_NE(asks.find("cut at max_tokens"), std::string::npos) << asks;
  EXPECT_NE(result->notes.find("asked again after"), std::string::npos) << result->notes;
  // The unusable reply is quoted back as the assistant's turn.
  bool quoted = false;
  for (const MockRequest& r : seen) {
    for (const ChatMessage& m : r.request.messages) {
      quoted |= m.role == ChatMessage::Role::kAssistant && m.content == "Just use shuffles.";
    }
  }
  EXPECT_TRUE(quoted);
}

TEST_F(LlmFailureTest, AContextLength400IsRetriedOnceWithAShorterHistory) {
  // 40 earlier ideas of ~2000 bytes each: ~20000 prompt tokens in full, a
  // quarter of that with 10.
  for (int i = 0; i < 40; ++i) {
    Idea old;
    old.id = "r0.s0.i" + std::to_string(i);
    old.parent_id = "start";
    old.text = "Idea " + std::to_string(i) + ": " + std::string(2000, 'x');
    old.outcome = "no correct branch";
    history_.ideas.push_back(old);
  }
  MockLlmServer::Options options;
  options.context_window_tokens = 16000;
  StartMock(options);
  mock_->SetDefaultReply(MockReply{testing::KernelReply("short")});
  LlmGeneratorOptions gen;
  gen.max_tokens = 2000;
  auto brancher = MakeLlmBrancher(*client_, gen);
  ASSERT_TRUE(brancher.ok());
  Idea idea;
  idea.text = "Tile the rows.";
  auto result = (*brancher)->Branch(Branches(idea, 1));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->candidates.size(), 1u);
  EXPECT_NE(result->candidates[0].source.find("// short"), std::string::npos) << result->notes;
  std::vector<MockRequest> seen = mock_->requests();
  ASSERT_EQ(seen.size(), 2u);
  const std::string& full = seen[0].request.messages.at(0).content;
  const std::string& shorter = seen[1].request.messages.at(0).content;
  EXPECT_NE(full.find("Idea 39:"), std::string::npos);
  EXPECT_LT(shorter.size() * 2, full.size());

  // Still too long with the shorter history: a note, not an error.
  MockLlmServer::Options tiny;
  tiny.context_window_tokens = 2500;
  StartMock(tiny);
  brancher = MakeLlmBrancher(*client_, gen);
  ASSERT_TRUE(brancher.ok());
  result = (*brancher)->Branch(Branches(idea, 1));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->candidates.at(0).source.empty());
  EXPECT_NE(result->notes.find("shorter history"), std::string::npos) << result->notes;
  EXPECT_EQ(mock_->counters().requests, 2);
}

TEST_F(LlmFailureTest, AnUnreachableProviderEndsTheCallOnlyBeforeAnySuccess) {
  auto dead = testing::MockClient(DeadUrl(), /*attempts=*/2);
  ASSERT_NE(dead, nullptr);
  auto ideas = MakeLlmIdeaGenerator(*dead);
  ASSERT_TRUE(ideas.ok());
  IdeaRequest request;
  request.problem = &problem_;
  request.parent = &parent_;
  request.count = 2;
  auto result = (*ideas)->Propose(request);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();

  // Once a request has succeeded, an outage costs the reply only.
  StartMock();
  mock_->Enqueue(MockReply{testing::IdeasReply(2)});
  MockReply down;
  down.fault = MockFault::kHttpError;
  down.http_status = 503;
  mock_->Enqueue(down);
  ideas = MakeLlmIdeaGenerator(*client_);
  ASSERT_TRUE(ideas.ok());
  ASSERT_TRUE((*ideas)->Propose(request).ok());
  result = (*ideas)->Propose(request);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->ideas.empty());
  EXPECT_NE(result->notes.find("UNAVAILABLE"), std::string::npos) << result->notes;
}

SearchOptions SmallSearch() {
  SearchOptions options;
  options.budget.max_rounds = 4;
  options.seeds = 1;
  options.ideas = 2;
  options.branches = 2;
  return options;
}

TEST_F(LlmFailureTest, ASearchAgainstADeadServerFailsWithTheReason) {
  auto dead = testing::MockClient(DeadUrl(), /*attempts=*/2);
  ASSERT_NE(dead, nullptr);
  auto ideas = MakeLlmIdeaGenerator(*dead);
  auto brancher = MakeLlmBrancher(*dead);
  ASSERT_TRUE(ideas.ok() && brancher.ok());
  testing::FakeEvaluator evaluator(problem_, [](const Candidate&) { return testing::Timed(1); });
  SearchContext context = testing::Context(problem_, evaluator, ideas->get(), brancher->get());
  auto summary = MakeParallelBranchSearch(SmallSearch())->Run(context);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->termination, TerminationReason::kFailed);
  EXPECT_EQ(summary->error.code(), StatusCode::kUnavailable) << summary->error.ToString();
  EXPECT_NE(summary->error.message().find("ideas r0.s0"), std::string::npos)
      << summary->error.ToString();
}

TEST_F(LlmFailureTest, ASearchWhoseEveryReplyIsUnusableFailsInsteadOfCompleting) {
  StartMock();
  mock_->SetDefaultReply(MockReply{""});  // every reply empty: billed, useless
  auto ideas = MakeLlmIdeaGenerator(*client_);
  auto brancher = MakeLlmBrancher(*client_);
  ASSERT_TRUE(ideas.ok() && brancher.ok());
  testing::FakeEvaluator evaluator(problem_, [](const Candidate&) { return testing::Timed(1); });
  SearchContext context = testing::Context(problem_, evaluator, ideas->get(), brancher->get());
  auto summary = MakeParallelBranchSearch(SmallSearch())->Run(context);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->termination, TerminationReason::kFailed);
  EXPECT_NE(summary->error.message().find("no generator call produced an idea"),
            std::string::npos)
      << summary->error.ToString();
  EXPECT_NE(summary->error.message().find("empty content"), std::string::npos)
      << summary->error.ToString();
  EXPECT_EQ(mock_->counters().requests, 2);  // round 0 and round 1: one idea request each
}

// An outage after round 0, as a user with a key meets it: round 0 is
// answered, then every request fails (HTTP 500 after the retries, or no
// reply within the time-out). The run ends `failed` with the reason — it
// can be resumed — not `completed` for lack of work.
class OutageTest : public LlmFailureTest, public ::testing::WithParamInterface<MockFault> {};

TEST_P(OutageTest, AnOutageAfterRoundZeroFailsTheRun) {
  StartMock();
  MockReply down;
  down.fault = GetParam();
  down.http_status = 500;
  ASSERT_TRUE(mock_->AddRule(MockRule{"# Round 0:", "", MockReply{testing::IdeasReply(2)}}).ok());
  ASSERT_TRUE(mock_->AddRule(MockRule{"", "# Round [1-9]", down}).ok());
  mock_->SetDefaultReply(MockReply{testing::KernelReply("k")});
  client_ = testing::MockClient(mock_->openai_base_url(), /*attempts=*/2);
  LlmGeneratorOptions gen;
  gen.timeout_seconds = 0.3;  // a hung request ends after two of these
  auto ideas = MakeLlmIdeaGenerator(*client_, gen);
  auto brancher = MakeLlmBrancher(*client_, gen);
  ASSERT_TRUE(ideas.ok() && brancher.ok());
  testing::FakeEvaluator evaluator(problem_, [](const Candidate&) { return testing::Timed(1); });
  SearchContext context = testing::Context(problem_, evaluator, ideas->get(), brancher->get());
  auto summary = MakeParallelBranchSearch(SmallSearch())->Run(context);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->termination, TerminationReason::kFailed) << summary->FullReport();
  EXPECT_EQ(summary->error.code(), GetParam() == MockFault::kHang ? StatusCode::kDeadlineExceeded
                                                                  : StatusCode::kUnavailable)
      << summary->error.ToString();
  EXPECT_NE(summary->error.message().find("round 1: no request reached the model: ideas r1.s0"),
            std::string::npos)
      << summary->error.ToString();
  EXPECT_EQ(summary->rounds, 2);  // round 0's kernels are kept
  EXPECT_EQ(summary->candidates, 1 + 2 * 2);
}

INSTANTIATE_TEST_SUITE_P(ErrorsAndHangs, OutageTest,
                         ::testing::Values(MockFault::kHttpError, MockFault::kHang),
                         [](const ::testing::TestParamInfo<MockFault>& fault) {
                           return fault.param == MockFault::kHang ? std::string("Hang")
                                                                  : std::string("Http500");
                         });

// The sequential refine loop fails alike when a step's request never
// reaches the model.
TEST_F(LlmFailureTest, AnOutageAfterTheFirstStepFailsARefineRun) {
  StartMock();
  MockReply down;
  down.fault = MockFault::kHttpError;
  down.http_status = 503;
  MockReply first{testing::KernelReply("first")};
  mock_->Enqueue(first);
  mock_->SetDefaultReply(down);
  client_ = testing::MockClient(mock_->openai_base_url(), /*attempts=*/2);
  auto brancher = MakeLlmBrancher(*client_);
  ASSERT_TRUE(brancher.ok());
  testing::FakeEvaluator evaluator(problem_, [](const Candidate&) { return testing::Timed(1); });
  SearchContext context = testing::Context(problem_, evaluator, nullptr, brancher->get());
  auto summary = MakeSequentialRefineSearch(SmallSearch())->Run(context);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->termination, TerminationReason::kFailed) << summary->FullReport();
  EXPECT_NE(summary->error.message().find("step s2: no request reached the model"), std::string::npos)
      << summary->error.ToString();
}

// Usage is counted per reply as it arrives, the summary bills exactly what
// the client was billed, and every branch reply that was paid for is judged.
TEST_F(LlmFailureTest, TokenBudgetCountsEveryReplyAndJudgesEveryPaidOne) {
  StartMock();
  MockReply idea_reply{testing::IdeasReply(2)};
  idea_reply.input_tokens = 100;
  idea_reply.output_tokens = 100;
  ASSERT_TRUE(mock_->AddRule(MockRule{"# Round", "", idea_reply}).ok());
  MockReply kernel{testing::KernelReply("kernel")};
  kernel.input_tokens = 150;
  kernel.output_tokens = 150;
  mock_->SetDefaultReply(kernel);
  // Billed but unusable: counted all the same.
  MockReply empty{""};
  empty.input_tokens = 150;
  empty.output_tokens = 150;
  ASSERT_TRUE(mock_->AddRule(MockRule{"implementation 2 of", "", empty}).ok());
  std::mutex mutex;
  int paid_branch_replies = 0;
  client_->SetObserver([&](const LlmExchange& e) {
    // On the client's I/O thread.
    std::lock_guard<std::mutex> lock(mutex);
    if (e.response.ok() && e.request.tag.starts_with("branch")) ++paid_branch_replies;
  });
  // Small replies: many requests fit in the budget.
  LlmGeneratorOptions gen;
  gen.max_tokens = 300;
  auto ideas = MakeLlmIdeaGenerator(*client_, gen);
  auto brancher = MakeLlmBrancher(*client_, gen);
  ASSERT_TRUE(ideas.ok() && brancher.ok());
  testing::FakeEvaluator evaluator(problem_, [](const Candidate&) { return testing::Timed(1); });
  SearchContext context = testing::Context(problem_, evaluator, ideas->get(), brancher->get());
  SearchOptions options = SmallSearch();
  options.budget.max_rounds = 0;
  options.budget.max_tokens = 30000;
  ParallelBranchOptions branch;
  branch.skip_duplicates = false;
  auto summary = MakeParallelBranchSearch(options, branch)->Run(context);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->termination, TerminationReason::kBudgetTokens);
  LlmTotals billed = client_->totals();
  EXPECT_EQ(summary->input_tokens, billed.input_tokens);
  EXPECT_EQ(summary->output_tokens, billed.output_tokens);
  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_EQ(summary->candidates - 1, paid_branch_replies);  // every usable paid branch judged
  EXPECT_GT(billed.failures, 0);  // the empty replies, billed and counted
  EXPECT_LE(summary->input_tokens + summary->output_tokens, 30000);
}

}  // namespace
}  // namespace ksearch
