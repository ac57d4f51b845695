// Idea replies as models write them: the ```json list the prompt asks for,
// and what can be salvaged when the reply is not quite that (comments and
// trailing commas, a list cut short, a numbered Markdown list), each salvage
// named; an unusable reply is asked for again once, with the reason.
#include <gtest/gtest.h>

#include "search/idea_reply.h"
#include "search_test_util.h"

namespace ksearch {
namespace {

using internal::IdeaReply;
using internal::ParseIdeaReply;

IdeaReply Parsed(std::string_view reply) {
  auto parsed = ParseIdeaReply(reply);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString() << "\n" << reply;
  return parsed.ok() ? *parsed : IdeaReply{};
}

TEST(IdeaReply, AStrictListNeedsNoSalvage) {
  IdeaReply r = Parsed(testing::IdeasReply(3));
  ASSERT_EQ(r.ideas.size(), 3u);
  EXPECT_EQ(r.ideas[1].text, "Scripted idea 1.");
  EXPECT_EQ(r.ideas[1].category, IdeaCategory::kAsynchrony);
  EXPECT_TRUE(r.repairs.empty());
}

TEST(IdeaReply, CommentsAndATrailingCommaAreRemovedAndSaid) {
  IdeaReply r = Parsed(
      "```json\n[\n  // the memory idea first\n  {\"category\": \"memory_access\", \"idea\": \"Load float4.\"},\n"
      "  {\"category\": \"compute\", \"idea\": \"One exp per element.\"},\n]\n```\n");
  ASSERT_EQ(r.ideas.size(), 2u);
  EXPECT_EQ(r.ideas[1].text, "One exp per element.");
  ASSERT_EQ(r.repairs.size(), 1u);
  EXPECT_EQ(r.repairs[0], "removed comments and trailing commas from the idea list");
}

TEST(IdeaReply, AListCutShortKeepsItsCompleteIdeas) {
  // The reply ended inside the third idea (and inside the block).
  IdeaReply r = Parsed(
      "```json\n[{\"category\": \"memory_access\", \"idea\": \"Load float4.\"},\n"
      " {\"category\": \"asynchrony\", \"idea\": \"Prefetch the next row.\"},\n"
      " {\"category\": \"compute\", \"idea\": \"One exp per el");
  ASSERT_EQ(r.ideas.size(), 2u);
  EXPECT_EQ(r.ideas[1].text, "Prefetch the next row.");
  ASSERT_EQ(r.repairs.size(), 1u);
  EXPECT_EQ(r.repairs[0], "the idea list was cut: kept its 2 complete ideas");
  // Cut inside {"ideas": [...]} too.
  r = Parsed("{\"ideas\": [\"Load float4.\", \"Prefetch the ne");
  ASSERT_EQ(r.ideas.size(), 1u);
  EXPECT_EQ(r.ideas[0].text, "Load float4.");
}

TEST(IdeaReply, ANumberedMarkdownListGivesItsItemsAndTheirCategories) {
  IdeaReply r = Parsed(
      "Here are my ideas for the kernel:\n\n"
      "1. **Memory access**: Load each row with float4 so that every warp\n"
      "   reads 512 contiguous bytes.\n"
      "2. **asynchrony** — Prefetch the next row with cp.async while the\n"
      "current one is reduced.\n"
      "3) Keep the row in registers and fuse the two passes.\n\n"
      "These should help.\n");
  ASSERT_EQ(r.ideas.size(), 3u);
  EXPECT_EQ(r.ideas[0].category, IdeaCategory::kMemoryAccess);
  EXPECT_EQ(r.ideas[0].text,
            "Load each row with float4 so that every warp reads 512 contiguous bytes.");
  EXPECT_EQ(r.ideas[1].category, IdeaCategory::kAsynchrony);
  EXPECT_EQ(r.ideas[1].text,
            "Prefetch the next row with cp.async while the current one is reduced.");
  EXPECT_FALSE(r.ideas[2].category.has_value());
  EXPECT_EQ(r.ideas[2].text, "Keep the row in registers and fuse the two passes.");
  ASSERT_EQ(r.repairs.size(), 1u);
  EXPECT_EQ(r.repairs[0], "read 3 ideas from a numbered list (no ```json block)");
}

TEST(IdeaReply, NothingToSalvageSaysWhy) {
  for (const char* reply : {"I would rather not.", "```json\n{\"ideas\": 3}\n```", "```json\n[1, 2\n```"}) {
    auto parsed = ParseIdeaReply(reply);
    ASSERT_FALSE(parsed.ok()) << reply;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(parsed.status().message().empty());
  }
}

class IdeaGeneratorSalvage : public ::testing::Test {
 protected:
  void SetUp() override {
    problem_ = testing::RowSoftmaxProblem(64, 1024);
    Evaluation e = testing::Timed(2.0);
    e.candidate_id = "start";
    parent_ = HistoryEntry{problem_.start.ToCandidate("start", "start"), e};
    auto mock = MockLlmServer::Start({});
    ASSERT_TRUE(mock.ok()) << mock.status().ToString();
    mock_ = std::move(*mock);
    client_ = testing::MockClient(mock_->openai_base_url());
    ASSERT_NE(client_, nullptr);
    request_.problem = &problem_;
    request_.parent = &parent_;
    request_.count = 2;
    request_.categories = {IdeaCategory::kCompute, IdeaCategory::kParallelism};
    request_.label = "r1.s0";
  }

  Problem problem_;
  HistoryEntry parent_;
  std::unique_ptr<MockLlmServer> mock_;
  std::unique_ptr<HttpLlmClient> client_;
  IdeaRequest request_;
};

TEST_F(IdeaGeneratorSalvage, ASalvagedReplyGivesItsIdeasAndANote) {
  auto generator = MakeLlmIdeaGenerator(*client_);
  ASSERT_TRUE(generator.ok());
  mock_->Enqueue(MockReply{"1. Use float4 loads.\n2. Fuse the two passes.\n"});
  auto result = (*generator)->Propose(request_);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->ideas.size(), 2u);
  EXPECT_EQ(result->ideas[1].text, "Fuse the two passes.");
  EXPECT_EQ(result->ideas[1].category, IdeaCategory::kParallelism);  // as asked
  EXPECT_EQ(result->notes, "salvaged: read 2 ideas from a numbered list (no ```json block)");
}

TEST_F(IdeaGeneratorSalvage, AnUnusableReplyIsAskedForAgainOnceWithTheReason) {
  LlmGeneratorOptions options;
  options.reformat_attempts = 1;
  auto generator = MakeLlmIdeaGenerator(*client_, options);
  ASSERT_TRUE(generator.ok());
  ASSERT_TRUE(mock_->AddRule(MockRule{"Your reply could not be used", "", MockReply{testing::IdeasReply(2)}}).ok());
  mock_->SetDefaultReply(MockReply{"I would rather not."});
  auto result = (*generator)->Propose(request_);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  ASSERT_EQ(result->ideas.size(), 2u);
  EXPECT_EQ(result->ideas[0].text, "Scripted idea 0.");
  EXPECT_NE(result->notes.find("asked again after: reply has no ```json block with the idea list"),
            std::string::npos)
      << result->notes;
  auto seen = mock_->requests();
  ASSERT_EQ(seen.size(), 2u);
  // The second request carries the first reply and what was wrong with it.
  const std::vector<ChatMessage>& messages = seen[1].request.messages;
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[1].content, "I would rather not.");
  EXPECT_NE(messages[2].content.find("reply has no ```json block"), std::string::npos) << messages[2].content;
  EXPECT_NE(messages[2].content.find("only the 2 ideas"), std::string::npos) << messages[2].content;

  // Asked once only: a second unusable reply is a note.
  mock_->ClearScript();
  result = (*generator)->Propose(request_);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_TRUE(result->ideas.empty());
  EXPECT_NE(result->notes.find("; asked again: reply has no ```json block"), std::string::npos) << result->notes;
  EXPECT_EQ(mock_->requests().size(), 4u);
}

}  // namespace
}  // namespace ksearch
