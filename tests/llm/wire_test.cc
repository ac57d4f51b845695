#include "llm/wire.h"

#include <gtest/gtest.h>

#include <string>

namespace ksearch::llm {
namespace {

constexpr char kOpenAiOk[] = R"({
  "id": "chatcmpl-1", "model": "gpt-test-2025",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi there"},
               "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}})";

TEST(OpenAiReply, ParsesContentUsageModelAndFinishReason) {
  ReplyParse parsed = ParseOpenAiReply(kOpenAiOk, false);
  ASSERT_TRUE(parsed.status.ok()) << parsed.status.ToString();
  EXPECT_EQ(parsed.response.content, "hi there");
  EXPECT_EQ(parsed.response.model, "gpt-test-2025");
  EXPECT_EQ(parsed.response.input_tokens, 12);
  EXPECT_EQ(parsed.response.output_tokens, 3);
  EXPECT_EQ(parsed.response.finish_reason, FinishReason::kStop);
  EXPECT_TRUE(parsed.usage_found);
}

TEST(OpenAiReply, MalformedJsonIsDataLoss) {
  std::string body = kOpenAiOk;
  body.resize(body.size() / 2);
  ReplyParse parsed = ParseOpenAiReply(body, false);
  EXPECT_EQ(parsed.status.code(), StatusCode::kDataLoss) << parsed.status.ToString();
  EXPECT_NE(parsed.status.message().find("malformed JSON"), std::string::npos);
}

TEST(OpenAiReply, MissingChoicesIsUnimplementedAndNamesTheField) {
  ReplyParse parsed = ParseOpenAiReply(R"({"id": "x", "object": "chat.completion"})", false);
  EXPECT_EQ(parsed.status.code(), StatusCode::kUnimplemented);
  EXPECT_NE(parsed.status.message().find("choices"), std::string::npos);
  parsed = ParseOpenAiReply(R"({"choices": []})", false);
  EXPECT_EQ(parsed.status.code(), StatusCode::kUnimplemented);
  parsed = ParseOpenAiReply(R"({"choices": [{"message": {"role": "assistant"}}]})", false);
  EXPECT_EQ(parsed.status.code(), StatusCode::kUnimplemented);
  EXPECT_NE(parsed.status.message().find("choices[0].message.content"), std::string::npos);
  parsed = ParseOpenAiReply("[1, 2]", false);
  EXPECT_EQ(parsed.status.code(), StatusCode::kUnimplemented);
}

TEST(OpenAiReply, EmptyNullOrRefusedContentIsDataLossForThisReplyOnly) {
  ReplyParse parsed = ParseOpenAiReply(
      R"({"choices": [{"message": {"content": ""}, "finish_reason": "stop"}]})", false);
  EXPECT_EQ(parsed.status.code(), StatusCode::kDataLoss);
  EXPECT_FALSE(parsed.retryable);
  EXPECT_EQ(FailureScope(parsed.status), LlmFailureScope::kReply);
  parsed = ParseOpenAiReply(
      R"({"choices": [{"message": {"content": null}, "finish_reason": "stop"}]})", false);
  EXPECT_EQ(parsed.status.code(), StatusCode::kDataLoss);
  parsed = ParseOpenAiReply(R"({"choices": [{"message": {"content": null,
      "refusal": "I can't help with that."}, "finish_reason": "stop"}],
      "usage": {"prompt_tokens": 7, "completion_tokens": 3}})",
                            false);
  EXPECT_EQ(parsed.status.code(), StatusCode::kDataLoss);
  EXPECT_NE(parsed.status.message().find("refused: I can't help"), std::string::npos);
  EXPECT_TRUE(parsed.usage_found);  // a refusal is billed
  parsed = ParseOpenAiReply(R"({"choices": [)", false);
  EXPECT_TRUE(parsed.retryable);  // not JSON: a transport fault
}

TEST(OpenAiReply, LengthFinishIsOutOfRangeUnlessAccepted) {
  constexpr char kCut[] = R"({"choices": [{"message": {"content": "```cuda\n__global__"},
      "finish_reason": "length"}], "usage": {"prompt_tokens": 5, "completion_tokens": 64}})";
  ReplyParse parsed = ParseOpenAiReply(kCut, false);
  EXPECT_EQ(parsed.status.code(), StatusCode::kOutOfRange);
  EXPECT_TRUE(parsed.usage_found);  // billed all the same
  EXPECT_EQ(parsed.response.output_tokens, 64);
  parsed = ParseOpenAiReply(kCut, true);
  ASSERT_TRUE(parsed.status.ok());
  EXPECT_EQ(parsed.response.finish_reason, FinishReason::kLength);
}

TEST(OpenAiReply, ContentAsArrayOfPartsIsJoined) {
  ReplyParse parsed = ParseOpenAiReply(
      R"({"choices": [{"message": {"content": [{"type": "text", "text": "a"},
          {"type": "text", "text": "b"}]}, "finish_reason": "stop"}]})",
      false);
  ASSERT_TRUE(parsed.status.ok()) << parsed.status.ToString();
  EXPECT_EQ(parsed.response.content, "ab");
  EXPECT_FALSE(parsed.usage_found);
}

TEST(AnthropicReply, ParsesTextBlocksUsageAndStopReason) {
  ReplyParse parsed = ParseAnthropicReply(R"({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
    "content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "one "},
                {"type": "text", "text": "two"}],
    "stop_reason": "stop_sequence", "stop_sequence": "###",
    "usage": {"input_tokens": 7, "output_tokens": 2, "cache_read_input_tokens": 3}})",
                                          false);
  ASSERT_TRUE(parsed.status.ok()) << parsed.status.ToString();
  EXPECT_EQ(parsed.response.content, "one two");
  EXPECT_EQ(parsed.response.finish_reason, FinishReason::kStopSequence);
  EXPECT_EQ(parsed.response.input_tokens, 10);
  EXPECT_EQ(parsed.response.output_tokens, 2);
  EXPECT_EQ(parsed.response.model, "claude-test");
}

TEST(AnthropicReply, DistinguishesEachFailure) {
  EXPECT_EQ(ParseAnthropicReply(R"({"content": [)", false).status.code(), StatusCode::kDataLoss);
  EXPECT_EQ(ParseAnthropicReply(R"({"type": "message"})", false).status.code(),
            StatusCode::kUnimplemented);
  EXPECT_EQ(ParseAnthropicReply(R"({"content": [], "stop_reason": "end_turn"})", false)
                .status.code(),
            StatusCode::kDataLoss);
  EXPECT_NE(ParseAnthropicReply(R"({"content": [], "stop_reason": "refusal"})", false)
                .status.message()
                .find("refused"),
            std::string::npos);
  EXPECT_EQ(ParseAnthropicReply(
                R"({"content": [{"type": "text", "text": "x"}], "stop_reason": "max_tokens"})",
                false)
                .status.code(),
            StatusCode::kOutOfRange);
}

TEST(ErrorMessage, TakesTheServersOwnWords) {
  EXPECT_EQ(ExtractErrorMessage(BuildOpenAiError(429, "Rate limit reached")),
            "Rate limit reached");
  EXPECT_EQ(ExtractErrorMessage(BuildAnthropicError(529, "Overloaded")), "Overloaded");
  EXPECT_EQ(ExtractErrorMessage(R"({"detail": "model not loaded"})"), "model not loaded");
  EXPECT_EQ(ExtractErrorMessage("<html>Bad\ngateway</html>"), "<html>Bad gateway</html>");
  EXPECT_EQ(ExtractErrorMessage(""), "(empty body)");
}

ChatRequest SampleRequest() {
  ChatRequest request;
  request.model = "m";
  request.system = "be terse";
  request.messages = {{ChatMessage::Role::kUser, "q1 \"quoted\"\n"},
                      {ChatMessage::Role::kAssistant, "a1"},
                      {ChatMessage::Role::kUser, "q2"}};
  request.temperature = 0.7;
  request.max_tokens = 321;
  request.stop = {"###", "END"};
  return request;
}

void ExpectSameRequest(const ChatRequest& a, const ChatRequest& b) {
  EXPECT_EQ(a.model, b.model);
  EXPECT_EQ(a.system, b.system);
  ASSERT_EQ(a.messages.size(), b.messages.size());
  for (size_t i = 0; i < a.messages.size(); ++i) {
    EXPECT_EQ(a.messages[i].role, b.messages[i].role);
    EXPECT_EQ(a.messages[i].content, b.messages[i].content);
  }
  EXPECT_EQ(a.temperature, b.temperature);
  EXPECT_EQ(a.reasoning_effort, b.reasoning_effort);
  EXPECT_EQ(a.thinking_budget_tokens, b.thinking_budget_tokens);
  EXPECT_EQ(a.max_tokens, b.max_tokens);
  EXPECT_EQ(a.stop, b.stop);
}

TEST(RequestBody, OpenAiRoundTripsThroughTheMockParser) {
  ChatRequest request = SampleRequest();
  std::string body = SerializeOpenAiRequest(request, request.model, "max_completion_tokens");
  EXPECT_NE(body.find("\"max_completion_tokens\":321"), std::string::npos) << body;
  EXPECT_NE(body.find("\"role\":\"system\""), std::string::npos);
  StatusOr<ChatRequest> parsed = ParseOpenAiRequest(body);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ExpectSameRequest(request, *parsed);
}

TEST(RequestBody, AnthropicRoundTripsThroughTheMockParser) {
  ChatRequest request = SampleRequest();
  std::string body = SerializeAnthropicRequest(request, request.model);
  EXPECT_NE(body.find("\"stop_sequences\""), std::string::npos) << body;
  EXPECT_EQ(body.find("\"role\":\"system\""), std::string::npos);
  StatusOr<ChatRequest> parsed = ParseAnthropicRequest(body);
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ExpectSameRequest(request, *parsed);
}

TEST(RequestBody, MockParserRejectsBadRequests) {
  EXPECT_EQ(ParseOpenAiRequest("{").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseOpenAiRequest(R"({"messages": []})").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseAnthropicRequest(R"({"model": "m", "messages": []})").status().code(),
            StatusCode::kInvalidArgument);  // no max_tokens
}

TEST(ReplyBody, MockRepliesParseBack) {
  ReplyParse openai =
      ParseOpenAiReply(BuildOpenAiReply("x", FinishReason::kLength, 4, 5, "m"), true);
  ASSERT_TRUE(openai.status.ok());
  EXPECT_EQ(openai.response.finish_reason, FinishReason::kLength);
  EXPECT_EQ(openai.response.output_tokens, 5);
  ReplyParse anthropic =
      ParseAnthropicReply(BuildAnthropicReply("y", FinishReason::kStop, 4, 5, "m"), false);
  ASSERT_TRUE(anthropic.status.ok());
  EXPECT_EQ(anthropic.response.content, "y");
}

}  // namespace
}  // namespace ksearch::llm
