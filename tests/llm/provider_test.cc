// The client against the strict mock, which enforces each provider's
// documented constraints the way the real APIs do (400s for parameters a
// model rejects), and the failures a search must survive or stop on:
// refusals, context-length 400s, exhausted quotas, a hung server, a dead one.
#include <gtest/gtest.h>

#include "ksearch/http_llm_client.h"
#include "ksearch/mock_llm_server.h"
#include "llm/loopback_port.h"
#include "llm/wire.h"

namespace ksearch {
namespace {

HttpLlmClient::Options FastOptions(const std::string& base_url, LlmProvider provider) {
  HttpLlmClient::Options options;
  options.provider = provider;
  options.base_url = base_url;
  options.api_key = "sk-test";
  options.default_model = "mock";
  options.retry.initial_backoff_seconds = 0.002;
  options.retry.max_backoff_seconds = 0.01;
  options.retry.seed = 3;
  return options;
}

class StrictProviderTest : public ::testing::TestWithParam<LlmProvider> {
 protected:
  void SetUp() override { StartMock({}); }
  void StartMock(MockLlmServer::Options options) {
    auto mock = MockLlmServer::Start(std::move(options));
    ASSERT_TRUE(mock.ok()) << mock.status().ToString();
    mock_ = std::move(*mock);
  }
  std::string BaseUrl() const {
    return GetParam() == LlmProvider::kOpenAi ? mock_->openai_base_url() : mock_->base_url();
  }
  std::unique_ptr<HttpLlmClient> Client(HttpLlmClient::Options options) {
    auto client = HttpLlmClient::Create(std::move(options));
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    return client.ok() ? std::move(*client) : nullptr;
  }
  std::unique_ptr<HttpLlmClient> Client() { return Client(FastOptions(BaseUrl(), GetParam())); }
  static ChatRequest Ask(std::string text) {
    ChatRequest request;
    request.messages.push_back({ChatMessage::Role::kUser, std::move(text)});
    request.max_tokens = 4096;
    return request;
  }

  std::unique_ptr<MockLlmServer> mock_;
};

INSTANTIATE_TEST_SUITE_P(BothProviders, StrictProviderTest,
                         ::testing::Values(LlmProvider::kOpenAi, LlmProvider::kAnthropic),
                         [](const ::testing::TestParamInfo<LlmProvider>& param) {
                           return std::string(ToString(param.param));
                         });

TEST_P(StrictProviderTest, ARefusalIsDataLossForThatReplyOnly) {
  MockReply refusal;
  refusal.fault = MockFault::kRefusal;
  mock_->Enqueue(refusal);
  auto client = Client();
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("write a kernel"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss) << result.status().ToString();
  EXPECT_NE(result.status().message().find("refused"), std::string::npos);
  EXPECT_EQ(FailureScope(result.status()), LlmFailureScope::kReply);
  EXPECT_EQ(mock_->counters().requests, 1);  // the model's answer: not retried
  EXPECT_GT(client->totals().output_tokens, 0);  // but billed
}

TEST_P(StrictProviderTest, AContextLength400IsOutOfRangeAndNotRetried) {
  MockLlmServer::Options options;
  options.context_window_tokens = 1000;
  StartMock(options);
  auto client = Client();
  ASSERT_NE(client, nullptr);
  ChatRequest request = Ask(std::string(400, 'x'));
  request.max_tokens = 900;  // 100 prompt tokens + 900 > 1000
  StatusOr<ChatResponse> result = CompleteAndWait(*client, request);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kOutOfRange) << result.status().ToString();
  EXPECT_TRUE(IsContextLengthError(result.status())) << result.status().ToString();
  EXPECT_EQ(FailureScope(result.status()), LlmFailureScope::kReply);
  EXPECT_EQ(mock_->counters().requests, 1);
  request.max_tokens = 500;
  EXPECT_TRUE(CompleteAndWait(*client, request).ok());
}

TEST_P(StrictProviderTest, AnExhaustedQuotaEndsTheRunAtOnce) {
  MockReply quota;
  quota.fault = MockFault::kHttpError;
  quota.http_status = GetParam() == LlmProvider::kOpenAi ? 429 : 400;
  quota.error_message = GetParam() == LlmProvider::kOpenAi
                            ? "You exceeded your current quota, please check your plan and "
                              "billing details."
                            : "Your credit balance is too low to access the Anthropic API.";
  quota.repeat = 10;
  mock_->Enqueue(quota);
  auto client = Client();
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hi"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kFailedPrecondition)
      << result.status().ToString();
  EXPECT_EQ(FailureScope(result.status()), LlmFailureScope::kRun);
  EXPECT_EQ(mock_->counters().requests, 1);  // a quota does not come back in a second
}

TEST_P(StrictProviderTest, AuthenticationAndUnknownModelsEndTheRun) {
  MockLlmServer::Options options;
  options.required_api_key = "sk-right";
  StartMock(options);
  auto client = Client();
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hi"));
  EXPECT_EQ(result.status().code(), StatusCode::kUnauthenticated) << result.status().ToString();
  EXPECT_EQ(FailureScope(result.status()), LlmFailureScope::kRun);
  EXPECT_EQ(result.status().message().find("sk-test"), std::string::npos);  // redacted

  MockReply missing;
  missing.fault = MockFault::kHttpError;
  missing.http_status = 404;
  missing.error_message = "The model `gpt-nope` does not exist or you do not have access to it.";
  StartMock({});
  mock_->Enqueue(missing);
  client = Client();
  result = CompleteAndWait(*client, Ask("hi"));
  EXPECT_EQ(result.status().code(), StatusCode::kNotFound) << result.status().ToString();
  EXPECT_EQ(FailureScope(result.status()), LlmFailureScope::kRun);
}

TEST_P(StrictProviderTest, AHungServerCostsAtMostMaxTimeoutAttempts) {
  MockReply hang;
  hang.fault = MockFault::kHang;
  hang.repeat = 10;
  mock_->Enqueue(hang);
  HttpLlmClient::Options options = FastOptions(BaseUrl(), GetParam());
  options.retry.max_attempts = 5;
  options.retry.max_timeout_attempts = 2;
  auto client = Client(options);
  ASSERT_NE(client, nullptr);
  ChatRequest request = Ask("hi");
  request.timeout_seconds = 0.2;
  StatusOr<ChatResponse> result = CompleteAndWait(*client, request);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded) << result.status().ToString();
  EXPECT_EQ(mock_->counters().requests, 2);
  EXPECT_EQ(client->stats().attempts, 2);
}

TEST_P(StrictProviderTest, ADeadServerIsUnavailableAfterTheRetries) {
  // A port that was just free: nothing listens there (connection refused).
  testing::LoopbackPort dead(testing::LoopbackPort::Kind::kDead);
  ASSERT_NE(dead.port(), 0);
  std::string base = dead.url();
  if (GetParam() == LlmProvider::kOpenAi) base += "/v1";
  HttpLlmClient::Options options = FastOptions(base, GetParam());
  options.retry.max_attempts = 3;
  auto client = Client(options);
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hi"));
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
  EXPECT_EQ(client->stats().attempts, 3);
}

// OpenAI reasoning models: the client sends max_completion_tokens, no
// temperature and the reasoning effort; the strict mock accepts that, and
// rejects what older clients sent.
TEST(StrictOpenAi, ReasoningModelsGetTheirOwnParameters) {
  auto mock = MockLlmServer::Start({});
  ASSERT_TRUE(mock.ok());
  auto client = HttpLlmClient::Create(FastOptions((*mock)->openai_base_url(), LlmProvider::kOpenAi));
  ASSERT_TRUE(client.ok());
  for (const char* model : {"o3-mini", "o1", "o4-mini", "gpt-5", "gpt-5-mini", "openai/o3"}) {
    ChatRequest request;
    request.model = model;
    request.messages.push_back({ChatMessage::Role::kUser, "hi"});
    request.temperature = 0.7;
    request.reasoning_effort = "high";
    request.max_tokens = 32000;
    StatusOr<ChatResponse> reply = CompleteAndWait(**client, request);
    ASSERT_TRUE(reply.ok()) << model << ": " << reply.status().ToString();
    const ChatRequest seen = (*mock)->requests().back().request;
    EXPECT_FALSE(seen.temperature.has_value()) << model;
    EXPECT_EQ(seen.reasoning_effort, "high") << model;
    EXPECT_EQ(seen.max_tokens, 32000) << model;
  }
  // A chat model keeps max_tokens and its temperature, and gets no effort.
  ChatRequest request;
  request.model = "gpt-4o";
  request.messages.push_back({ChatMessage::Role::kUser, "hi"});
  request.temperature = 0.7;
  request.reasoning_effort = "high";
  ASSERT_TRUE(CompleteAndWait(**client, request).ok());
  EXPECT_EQ((*mock)->requests().back().request.temperature, 0.7);
  EXPECT_TRUE((*mock)->requests().back().request.reasoning_effort.empty());
  // Unset: no temperature at all.
  request.temperature.reset();
  ASSERT_TRUE(CompleteAndWait(**client, request).ok());
  EXPECT_FALSE((*mock)->requests().back().request.temperature.has_value());
}

TEST(StrictOpenAi, TheMockRejectsWhatReasoningModelsReject) {
  ChatRequest request;
  request.model = "o3-mini";
  request.messages.push_back({ChatMessage::Role::kUser, "hi"});
  EXPECT_NE(llm::OpenAiConstraintViolation(R"({"model":"o3-mini","max_tokens":10})", request)
                .find("max_completion_tokens"),
            std::string::npos);
  request.temperature = 0.7;
  EXPECT_NE(llm::OpenAiConstraintViolation(R"({"model":"o3-mini"})", request).find("temperature"),
            std::string::npos);
  request.temperature = 1.0;
  EXPECT_EQ(llm::OpenAiConstraintViolation(R"({"model":"o3-mini"})", request), "");
  request.model = "gpt-4o";
  request.reasoning_effort = "low";
  EXPECT_NE(llm::OpenAiConstraintViolation(R"({"model":"gpt-4o"})", request)
                .find("reasoning_effort"),
            std::string::npos);
  EXPECT_TRUE(TraitsOfModel("openai", "gpt-5-chat-latest").accepts_temperature);
  EXPECT_FALSE(TraitsOfModel("openai", "gpt-5.1").accepts_temperature);
  EXPECT_TRUE(TraitsOfModel("anthropic", "o3").accepts_temperature);  // per provider
}

TEST(StrictAnthropic, ThinkingIsSentAsABudgetWithoutTemperature) {
  auto mock = MockLlmServer::Start({});
  ASSERT_TRUE(mock.ok());
  auto client =
      HttpLlmClient::Create(FastOptions((*mock)->base_url(), LlmProvider::kAnthropic));
  ASSERT_TRUE(client.ok());
  ChatRequest request;
  request.model = "claude-sonnet-4-5";
  request.messages.push_back({ChatMessage::Role::kUser, "hi"});
  request.temperature = 0.7;
  request.thinking_budget_tokens = 4096;
  request.max_tokens = 16000;
  StatusOr<ChatResponse> reply = CompleteAndWait(**client, request);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  const ChatRequest seen = (*mock)->requests().back().request;
  EXPECT_EQ(seen.thinking_budget_tokens, 4096);
  EXPECT_FALSE(seen.temperature.has_value());
  // The client refuses a budget the API would reject, before sending it.
  request.thinking_budget_tokens = 16000;
  reply = CompleteAndWait(**client, request);
  EXPECT_EQ(reply.status().code(), StatusCode::kInvalidArgument) << reply.status().ToString();
  EXPECT_EQ((*mock)->counters().requests, 1);
  // And the mock enforces the API's rules.
  request.thinking_budget_tokens = 512;
  EXPECT_NE(llm::AnthropicConstraintViolation(request).find("1024"), std::string::npos);
  request.thinking_budget_tokens = 2048;
  request.temperature = 0.5;
  EXPECT_NE(llm::AnthropicConstraintViolation(request).find("temperature"), std::string::npos);
  EXPECT_NE(llm::ParseAnthropicRequest(R"({"model":"c","messages":[]})").status().message().find(
                "max_tokens"),
            std::string::npos);
}

TEST(HttpErrorClass, ContextLengthAndQuotaAreRecognisedFromTheBody) {
  auto context = llm::ClassifyHttpError(
      400, llm::BuildOpenAiError(400, "This model's maximum context length is 128000 tokens.",
                                 "context_length_exceeded"));
  EXPECT_EQ(context.code, StatusCode::kOutOfRange);
  EXPECT_FALSE(context.retryable);
  auto anthropic = llm::ClassifyHttpError(
      400, llm::BuildAnthropicError(400, "prompt is too long: 210000 tokens > 200000 maximum"));
  EXPECT_EQ(anthropic.code, StatusCode::kOutOfRange);
  auto quota = llm::ClassifyHttpError(
      429, llm::BuildOpenAiError(429, "You exceeded your current quota", "insufficient_quota"));
  EXPECT_EQ(quota.code, StatusCode::kFailedPrecondition);
  EXPECT_FALSE(quota.retryable);
  auto rate = llm::ClassifyHttpError(429, llm::BuildOpenAiError(429, "Rate limit reached"));
  EXPECT_EQ(rate.code, StatusCode::kResourceExhausted);
  EXPECT_TRUE(rate.retryable);
  auto other = llm::ClassifyHttpError(400, llm::BuildOpenAiError(400, "Unsupported parameter"));
  EXPECT_EQ(other.code, StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ksearch
