// HttpLlmClient against MockLlmServer on loopback: both wire formats, every
// injected fault, concurrency, keep-alive, TLS, cancellation and key hygiene.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "collector.h"
#include "ksearch/http_llm_client.h"
#include "ksearch/llm_recording.h"
#include "ksearch/mock_llm_server.h"
#include "ksearch/price_table.h"
#include "ksearch/replay_llm_client.h"
#include "ksearch/tls_credentials.h"

namespace ksearch {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Collector;

constexpr char kKey[] = "sk-test-client-key-0123456789";

double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::unique_ptr<MockLlmServer> StartMock(MockLlmServer::Options options = {}) {
  StatusOr<std::unique_ptr<MockLlmServer>> mock = MockLlmServer::Start(std::move(options));
  EXPECT_TRUE(mock.ok()) << mock.status().ToString();
  return mock.ok() ? std::move(*mock) : nullptr;
}

HttpLlmClient::Options ClientOptions(const MockLlmServer& mock, LlmProvider provider) {
  HttpLlmClient::Options options;
  options.provider = provider;
  options.base_url =
      provider == LlmProvider::kOpenAi ? mock.openai_base_url() : mock.base_url();
  options.api_key = kKey;
  options.default_model = "mock-model";
  options.retry.initial_backoff_seconds = 0.002;
  options.retry.max_backoff_seconds = 0.02;
  options.retry.seed = 7;
  return options;
}

std::unique_ptr<HttpLlmClient> MakeClient(HttpLlmClient::Options options) {
  StatusOr<std::unique_ptr<HttpLlmClient>> client = HttpLlmClient::Create(std::move(options));
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

ChatRequest Ask(std::string text) {
  ChatRequest request;
  request.system = "You write CUDA kernels.";
  request.messages = {{ChatMessage::Role::kUser, std::move(text)}};
  request.temperature = 0.25;
  request.max_tokens = 512;
  request.timeout_seconds = 5;
  return request;
}

MockReply Fault(MockFault fault, int http_status = 500) {
  MockReply reply;
  reply.fault = fault;
  reply.http_status = http_status;
  return reply;
}

class LlmClientTest : public ::testing::TestWithParam<LlmProvider> {
 protected:
  void SetUp() override {
    mock_ = StartMock();
    ASSERT_NE(mock_, nullptr);
  }
  HttpLlmClient::Options Options() { return ClientOptions(*mock_, GetParam()); }
  std::string ProviderName() { return std::string(ToString(GetParam())); }

  std::unique_ptr<MockLlmServer> mock_;
};

INSTANTIATE_TEST_SUITE_P(BothWireFormats, LlmClientTest,
                         ::testing::Values(LlmProvider::kOpenAi, LlmProvider::kAnthropic),
                         [](const ::testing::TestParamInfo<LlmProvider>& param_info) {
                           return std::string(ToString(param_info.param));
                         });

TEST_P(LlmClientTest, ReturnsContentUsageFinishReasonLatencyAndCost) {
  MockReply reply;
  reply.content = "```cuda\n__global__ void k() {}\n```";
  reply.input_tokens = 1000;
  reply.output_tokens = 500;
  mock_->Enqueue(reply);
  HttpLlmClient::Options options = Options();
  options.prices.Set("mock-model", ModelPrice{2.0, 8.0});
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->provider(), ProviderName());

  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->content, reply.content);
  EXPECT_EQ(result->finish_reason, FinishReason::kStop);
  EXPECT_EQ(result->input_tokens, 1000);
  EXPECT_EQ(result->output_tokens, 500);
  EXPECT_EQ(result->model, "mock-model");
  EXPECT_EQ(result->attempts, 1);
  EXPECT_GT(result->latency_ms, 0.0);
  EXPECT_NEAR(result->cost_usd, (1000 * 2.0 + 500 * 8.0) / 1e6, 1e-12);

  LlmTotals totals = client->totals();
  EXPECT_EQ(totals.requests, 1);
  EXPECT_EQ(totals.failures, 0);
  EXPECT_EQ(totals.input_tokens, 1000);
  EXPECT_EQ(totals.output_tokens, 500);
  EXPECT_NEAR(totals.cost_usd, 0.006, 1e-12);
}

TEST_P(LlmClientTest, SendsModelSystemPromptTemperatureLimitsAndStopSequences) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  ChatRequest request = Ask("write a softmax");
  request.model = "explicit-model";
  request.messages.push_back({ChatMessage::Role::kAssistant, "ok"});
  request.messages.push_back({ChatMessage::Role::kUser, "go on"});
  request.stop = {"###", "</kernel>"};
  ASSERT_TRUE(CompleteAndWait(*client, request).ok());
  std::vector<MockRequest> seen = mock_->requests();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].provider, ProviderName());
  EXPECT_TRUE(seen[0].had_api_key);
  EXPECT_EQ(seen[0].request.model, "explicit-model");
  EXPECT_EQ(seen[0].request.system, "You write CUDA kernels.");
  ASSERT_EQ(seen[0].request.messages.size(), 3u);
  EXPECT_EQ(seen[0].request.messages[1].role, ChatMessage::Role::kAssistant);
  EXPECT_EQ(seen[0].request.messages[2].content, "go on");
  EXPECT_EQ(seen[0].request.temperature, 0.25);
  EXPECT_EQ(seen[0].request.max_tokens, 512);
  EXPECT_EQ(seen[0].request.stop, request.stop);
}

TEST_P(LlmClientTest, RetriesA429AfterTheServersRetryAfter) {
  MockReply limited = Fault(MockFault::kHttpError, 429);
  limited.retry_after_seconds = 0.3;
  mock_->Enqueue(limited);
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  const auto start = Clock::now();
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->attempts, 2);
  // The client's own backoff is 2 ms here: only Retry-After explains the wait.
  EXPECT_GE(SecondsSince(start), 0.29);
  EXPECT_EQ(client->stats().retries, 1);
}

TEST_P(LlmClientTest, GivesUpAfterTheRetryBudgetNamingProviderStatusAndMessage) {
  MockReply limited = Fault(MockFault::kHttpError, 429);
  limited.error_message = "Rate limit reached; slow down please";
  limited.retry_after_seconds = 0;
  limited.repeat = 10;
  mock_->Enqueue(limited);
  HttpLlmClient::Options options = Options();
  options.retry.max_attempts = 3;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  ASSERT_EQ(result.status().code(), StatusCode::kResourceExhausted) << result.status().ToString();
  const std::string message = result.status().message();
  EXPECT_EQ(message.rfind(ProviderName() + ": HTTP 429", 0), 0u) << message;
  EXPECT_NE(message.find("slow down please"), std::string::npos) << message;
  EXPECT_NE(message.find("after 3 attempts"), std::string::npos) << message;
  EXPECT_NE(message.find("request id req_mock_"), std::string::npos) << message;
  EXPECT_EQ(mock_->counters().requests, 3);
  EXPECT_EQ(client->totals().failures, 1);
}

TEST_P(LlmClientTest, GivesUpAtOnceWhenRetryAfterExceedsTheLimit) {
  MockReply limited = Fault(MockFault::kHttpError, 429);
  limited.retry_after_seconds = 3600;
  mock_->Enqueue(limited);
  HttpLlmClient::Options options = Options();
  options.retry.max_retry_after_seconds = 10;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  const auto start = Clock::now();
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  EXPECT_EQ(result.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(result.status().message().find("max_retry_after_seconds"), std::string::npos);
  EXPECT_LT(SecondsSince(start), 2.0);
}

TEST_P(LlmClientTest, RetriesEveryTransientServerError) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  for (int status : {500, 501, 502, 503, 504, 529}) {
    mock_->Enqueue(Fault(MockFault::kHttpError, status));
    StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
    ASSERT_TRUE(result.ok()) << status << ": " << result.status().ToString();
    EXPECT_EQ(result->attempts, 2) << status;
  }
}

TEST_P(LlmClientTest, DoesNotRetryOtherClientErrors) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  const std::pair<int, StatusCode> cases[] = {{400, StatusCode::kInvalidArgument},
                                              {404, StatusCode::kNotFound},
                                              {403, StatusCode::kPermissionDenied},
                                              {422, StatusCode::kInvalidArgument}};
  int64_t requests = 0;
  for (const auto& [status, code] : cases) {
    mock_->Enqueue(Fault(MockFault::kHttpError, status));
    StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
    EXPECT_EQ(result.status().code(), code) << status << ": " << result.status().ToString();
    EXPECT_NE(result.status().message().find("HTTP " + std::to_string(status)),
              std::string::npos);
    EXPECT_EQ(mock_->counters().requests, ++requests) << status << " was retried";
  }
}

TEST_P(LlmClientTest, SurvivesAConnectionReset) {
  mock_->Enqueue(Fault(MockFault::kReset));
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->attempts, 2);
  EXPECT_EQ(mock_->counters().connections, 2);
}

TEST_P(LlmClientTest, SurvivesADisconnectInTheMiddleOfTheBody) {
  mock_->Enqueue(Fault(MockFault::kDisconnectMidBody));
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->attempts, 2);
}

TEST_P(LlmClientTest, ReportsTheResetWhenItNeverStops) {
  MockReply reset = Fault(MockFault::kReset);
  reset.repeat = 3;
  mock_->Enqueue(reset);
  HttpLlmClient::Options options = Options();
  options.retry.max_attempts = 3;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
  EXPECT_NE(result.status().message().find("after 3 attempts"), std::string::npos);
}

TEST_P(LlmClientTest, RetriesASlowReplyAfterTheTimeout) {
  MockReply slow;
  slow.delay_ms = 2000;
  mock_->Enqueue(slow);
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  ChatRequest request = Ask("hello");
  request.timeout_seconds = 0.15;
  const auto start = Clock::now();
  StatusOr<ChatResponse> result = CompleteAndWait(*client, request);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->attempts, 2);
  EXPECT_LT(SecondsSince(start), 1.5);
}

TEST_P(LlmClientTest, ReportsDeadlineExceededWhenEveryAttemptIsSlow) {
  MockReply slow;
  slow.delay_ms = 2000;
  slow.repeat = 2;
  mock_->Enqueue(slow);
  HttpLlmClient::Options options = Options();
  options.retry.max_attempts = 2;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  ChatRequest request = Ask("hello");
  request.timeout_seconds = 0.1;
  StatusOr<ChatResponse> result = CompleteAndWait(*client, request);
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded) << result.status().ToString();
  EXPECT_NE(result.status().message().find("no reply within"), std::string::npos);
}

TEST_P(LlmClientTest, MalformedJsonIsRetriedAsATransientFault) {
  mock_->Enqueue(Fault(MockFault::kMalformedJson));
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->attempts, 2);
  EXPECT_EQ(mock_->counters().requests, 2);
}

TEST_P(LlmClientTest, MalformedJsonEveryTimeIsDataLossAfterTheRetries) {
  MockReply bad = Fault(MockFault::kMalformedJson);
  bad.repeat = 10;
  mock_->Enqueue(bad);
  HttpLlmClient::Options options = Options();
  options.retry.max_attempts = 3;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss) << result.status().ToString();
  EXPECT_NE(result.status().message().find(ProviderName() + ": malformed JSON"),
            std::string::npos);
  EXPECT_EQ(mock_->counters().requests, 3);
  EXPECT_EQ(FailureScope(result.status()), LlmFailureScope::kReply);
}

TEST_P(LlmClientTest, MissingFieldsAreUnimplemented) {
  mock_->Enqueue(Fault(MockFault::kMissingFields));
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  EXPECT_EQ(result.status().code(), StatusCode::kUnimplemented) << result.status().ToString();
}

TEST_P(LlmClientTest, EmptyContentIsDataLoss) {
  MockReply empty;
  empty.content = "";
  mock_->Enqueue(empty);
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss) << result.status().ToString();
  EXPECT_NE(result.status().message().find("empty content"), std::string::npos);
  EXPECT_EQ(mock_->counters().requests, 1);  // the model's answer: not retried
}

TEST_P(LlmClientTest, TruncatedReplyIsOutOfRangeButItsTokensAreCounted) {
  MockReply cut;
  cut.content = "```cuda\n__global__ void k(";
  cut.finish_reason = FinishReason::kLength;
  cut.output_tokens = 512;
  cut.repeat = 2;
  mock_->Enqueue(cut);
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  EXPECT_EQ(result.status().code(), StatusCode::kOutOfRange) << result.status().ToString();
  EXPECT_NE(result.status().message().find("max_tokens"), std::string::npos);
  EXPECT_EQ(client->totals().output_tokens, 512);
  EXPECT_EQ(client->totals().failures, 1);

  HttpLlmClient::Options options = Options();
  options.accept_truncated_replies = true;
  auto accepting = MakeClient(options);
  ASSERT_NE(accepting, nullptr);
  result = CompleteAndWait(*accepting, Ask("hello"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->finish_reason, FinishReason::kLength);
  EXPECT_EQ(result->content, cut.content);
}

TEST_P(LlmClientTest, ReceivesAHugeBodyAndEnforcesTheBodyLimit) {
  MockReply huge;
  huge.pad_content_to_bytes = 8u << 20;
  huge.repeat = 2;
  mock_->Enqueue(huge);
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->content.size(), 8u << 20);

  HttpLlmClient::Options options = Options();
  options.connection.max_response_bytes = 1 << 20;
  auto limited = MakeClient(options);
  ASSERT_NE(limited, nullptr);
  result = CompleteAndWait(*limited, Ask("hello"));
  EXPECT_EQ(result.status().code(), StatusCode::kDataLoss) << result.status().ToString();
  EXPECT_NE(result.status().message().find("max_response_bytes"), std::string::npos);
}

TEST_P(LlmClientTest, HonorsTheInFlightLimit) {
  MockLlmServer::Options mock_options;
  mock_options.latency_ms = 20;
  auto slow_mock = StartMock(mock_options);
  ASSERT_NE(slow_mock, nullptr);
  HttpLlmClient::Options options = ClientOptions(*slow_mock, GetParam());
  options.max_in_flight = 8;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  Collector collector;
  for (int i = 0; i < 64; ++i) client->Complete(Ask("r" + std::to_string(i)), collector.Callback());
  for (const auto& result : collector.WaitFor(64)) {
    EXPECT_TRUE(result.ok()) << result.status().ToString();
  }
  EXPECT_EQ(slow_mock->counters().max_concurrent_requests, 8);
  EXPECT_EQ(client->stats().max_in_flight_seen, 8);
  EXPECT_LE(slow_mock->counters().connections, 8);
}

TEST_P(LlmClientTest, ReusesKeptAliveConnections) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 30; ++i) ASSERT_TRUE(CompleteAndWait(*client, Ask("hello")).ok());
  EXPECT_EQ(mock_->counters().connections, 1);
  EXPECT_EQ(client->stats().connections_opened, 1);
  EXPECT_EQ(client->stats().connections_reused, 29);

  HttpLlmClient::Options options = Options();
  options.max_in_flight = 4;
  auto concurrent = MakeClient(options);
  ASSERT_NE(concurrent, nullptr);
  Collector collector;
  for (int i = 0; i < 200; ++i) concurrent->Complete(Ask("hello"), collector.Callback());
  for (const auto& result : collector.WaitFor(200)) ASSERT_TRUE(result.ok());
  EXPECT_LE(mock_->counters().connections, 1 + 4);
}

TEST_P(LlmClientTest, ReconnectsWhenAKeptAliveConnectionTurnsOutDead) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(CompleteAndWait(*client, Ask("hello")).ok());
  // The next request goes out on the kept-alive connection and is reset
  // before any byte of reply: the client reconnects without spending an
  // attempt, as it would for a connection the server closed while idle.
  mock_->Enqueue(Fault(MockFault::kReset));
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("hello"));
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->attempts, 1);
  EXPECT_EQ(mock_->counters().connections, 2);
}

TEST_P(LlmClientTest, CancelDeliversCancelledPromptly) {
  MockReply slow;
  slow.delay_ms = 5000;
  mock_->Enqueue(slow);
  HttpLlmClient::Options options = Options();
  options.max_in_flight = 1;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  Collector running;
  Collector queued;
  uint64_t running_id = client->Complete(Ask("slow"), running.Callback());
  uint64_t queued_id = client->Complete(Ask("queued"), queued.Callback());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = Clock::now();
  client->Cancel(queued_id);
  client->Cancel(running_id);
  client->Cancel(999999);  // unknown ids are ignored
  EXPECT_EQ(running.WaitFor(1)[0].status().code(), StatusCode::kCancelled);
  EXPECT_EQ(queued.WaitFor(1)[0].status().code(), StatusCode::kCancelled);
  EXPECT_LT(SecondsSince(start), 1.0);
  // The client still works afterwards.
  EXPECT_TRUE(CompleteAndWait(*client, Ask("after")).ok());
}

TEST_P(LlmClientTest, DestroyingTheClientCancelsWhatIsPending) {
  MockReply slow;
  slow.delay_ms = 5000;
  slow.repeat = 3;
  mock_->Enqueue(slow);
  HttpLlmClient::Options options = Options();
  options.max_in_flight = 3;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  Collector collector;
  for (int i = 0; i < 5; ++i) client->Complete(Ask("x"), collector.Callback());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto start = Clock::now();
  client.reset();
  EXPECT_LT(SecondsSince(start), 1.0);
  ASSERT_EQ(collector.size(), 5u);  // all delivered before the destructor returned
  for (const auto& result : collector.WaitFor(5)) {
    EXPECT_EQ(result.status().code(), StatusCode::kCancelled);
  }
}

TEST_P(LlmClientTest, CanBeDestroyedFromItsOwnCallback) {
  std::unique_ptr<HttpLlmClient> client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  MockReply slow;
  slow.delay_ms = 5000;
  mock_->Enqueue(MockReply{});
  mock_->Enqueue(slow);
  Collector others;
  std::promise<void> destroyed;
  HttpLlmClient* raw = client.get();
  raw->Complete(Ask("first"), [&](StatusOr<ChatResponse> result) {
    EXPECT_TRUE(result.ok());
    raw->Complete(Ask("second"), others.Callback());  // pending when destroyed
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    client.reset();
    destroyed.set_value();
  });
  ASSERT_EQ(destroyed.get_future().wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
  EXPECT_EQ(others.WaitFor(1)[0].status().code(), StatusCode::kCancelled);
}

TEST_P(LlmClientTest, CallbacksNeverRunInsideComplete) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  std::promise<std::thread::id> ran_on;
  ChatRequest invalid = Ask("x");
  invalid.messages.clear();  // fails validation: the quickest possible callback
  client->Complete(invalid, [&](StatusOr<ChatResponse> result) {
    EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
    ran_on.set_value(std::this_thread::get_id());
  });
  // Inline would mean this thread, inside Complete().
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
}

TEST_P(LlmClientTest, ObserverSeesEveryExchangeWithItsHashAndId) {
  auto client = MakeClient(Options());
  ASSERT_NE(client, nullptr);
  std::mutex mutex;
  std::vector<LlmExchange> seen;
  client->SetObserver([&](const LlmExchange& exchange) {
    std::lock_guard<std::mutex> lock(mutex);
    seen.push_back(exchange);
  });
  mock_->Enqueue(MockReply{});
  mock_->Enqueue(Fault(MockFault::kHttpError, 400));
  Collector collector;
  ChatRequest first = Ask("first");
  first.tag = "idea r0 s0";
  uint64_t first_id = client->Complete(first, collector.Callback());
  collector.WaitFor(1);
  uint64_t second_id = client->Complete(Ask("second"), collector.Callback());
  collector.WaitFor(2);
  std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].provider, ProviderName());
  EXPECT_EQ(seen[0].request_id, first_id);
  EXPECT_EQ(seen[0].request.tag, "idea r0 s0");
  EXPECT_EQ(seen[0].request.model, "mock-model");  // the default, filled in
  ChatRequest hashed = first;
  hashed.model = "mock-model";
  EXPECT_EQ(seen[0].request_hash, RequestHash(hashed));
  EXPECT_TRUE(seen[0].response.ok());
  EXPECT_GT(seen[0].started_unix_ms, 0);
  EXPECT_EQ(seen[1].request_id, second_id);
  EXPECT_EQ(seen[1].response.status().code(), StatusCode::kInvalidArgument);
}

TEST_P(LlmClientTest, SurvivesARandomFaultRate) {
  MockLlmServer::Options mock_options;
  mock_options.fault_rate = 0.2;
  mock_options.seed = 11;
  auto faulty = StartMock(mock_options);
  ASSERT_NE(faulty, nullptr);
  HttpLlmClient::Options options = ClientOptions(*faulty, GetParam());
  options.retry.max_attempts = 10;
  options.max_in_flight = 16;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  Collector collector;
  for (int i = 0; i < 100; ++i) client->Complete(Ask("x"), collector.Callback());
  for (const auto& result : collector.WaitFor(100)) {
    EXPECT_TRUE(result.ok()) << result.status().ToString();
  }
  const MockLlmServer::Counters counters = faulty->counters();
  EXPECT_GT(counters.faults, 5);
  // Every fault cost exactly one more attempt, and nothing else did.
  EXPECT_EQ(counters.requests, 100 + counters.faults);
  EXPECT_EQ(client->stats().attempts, counters.requests);
}

TEST_P(LlmClientTest, NeverLeaksTheKeyIntoStatusLogsOrRecordings) {
  MockLlmServer::Options mock_options;
  const std::string correct_key = "sk-correct-key-abcdefghijklmnop";
  mock_options.required_api_key = correct_key;
  auto strict = StartMock(mock_options);
  ASSERT_NE(strict, nullptr);

  std::mutex mutex;
  std::vector<std::string> lines;
  auto capture = [&](std::string_view line) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.emplace_back(line);
  };
  auto record = [&](const LlmExchange& exchange) {
    std::lock_guard<std::mutex> lock(mutex);
    lines.push_back(ExchangeToJsonLine(exchange));
  };

  // A wrong key: the server echoes it in its 401 message.
  HttpLlmClient::Options options = ClientOptions(*strict, GetParam());
  options.log = capture;
  auto wrong = MakeClient(options);
  ASSERT_NE(wrong, nullptr);
  wrong->SetObserver(record);
  StatusOr<ChatResponse> result = CompleteAndWait(*wrong, Ask("hello"));
  ASSERT_EQ(result.status().code(), StatusCode::kUnauthenticated) << result.status().ToString();
  EXPECT_NE(result.status().message().find("[REDACTED]"), std::string::npos)
      << result.status().message();
  EXPECT_EQ(result.status().message().find(kKey), std::string::npos);

  // The right key, through a retry (a log line) and a success (a recording).
  options.api_key = correct_key;
  auto right = MakeClient(options);
  ASSERT_NE(right, nullptr);
  right->SetObserver(record);
  strict->Enqueue(Fault(MockFault::kHttpError, 503));
  ASSERT_TRUE(CompleteAndWait(*right, Ask("hello")).ok());

  std::lock_guard<std::mutex> lock(mutex);
  EXPECT_GE(lines.size(), 4u);  // a failure line, a retry line, two exchanges
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find(kKey), std::string::npos) << line;
    EXPECT_EQ(line.find(correct_key), std::string::npos) << line;
    EXPECT_EQ(line.find("0123456789"), std::string::npos) << line;
  }
}

TEST_P(LlmClientTest, RecordsASearchThatReplaysOffline) {
  const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                     ("ksearch_llm_record_" + std::to_string(::getpid()) +
                                      "_" + ProviderName() + ".jsonl");
  std::filesystem::remove(path);
  for (int i = 0; i < 3; ++i) {
    MockRule rule;
    rule.contains = "idea " + std::to_string(i);
    rule.reply.content = "reply to idea " + std::to_string(i);
    ASSERT_TRUE(mock_->AddRule(rule).ok());
  }
  std::vector<std::string> live;
  {
    StatusOr<std::unique_ptr<LlmRecorder>> recorder = LlmRecorder::Open(path.string());
    ASSERT_TRUE(recorder.ok()) << recorder.status().ToString();
    auto client = MakeClient(Options());
    ASSERT_NE(client, nullptr);
    client->SetObserver((*recorder)->observer());
    for (int i = 0; i < 3; ++i) {
      StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("idea " + std::to_string(i)));
      ASSERT_TRUE(result.ok());
      live.push_back(result->content);
    }
  }
  mock_->Stop();  // offline from here

  StatusOr<std::unique_ptr<ReplayLlmClient>> replay = ReplayLlmClient::Open(path.string());
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  for (int i = 2; i >= 0; --i) {  // any order: the prompt picks the reply
    ChatRequest request = Ask("idea " + std::to_string(i));
    request.model = "mock-model";
    StatusOr<ChatResponse> result = CompleteAndWait(**replay, request);
    ASSERT_TRUE(result.ok()) << result.status().ToString();
    EXPECT_EQ(result->content, live[static_cast<size_t>(i)]);
  }
  std::filesystem::remove(path);
}

TEST(LlmClient, SpacesRequestsToTheRateLimit) {
  auto mock = StartMock();
  ASSERT_NE(mock, nullptr);
  HttpLlmClient::Options options = ClientOptions(*mock, LlmProvider::kOpenAi);
  options.rate_limit.requests_per_minute = 600;  // one per 100 ms
  options.rate_limit.burst_seconds = 0.1;        // one at a time
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  Collector collector;
  const auto start = Clock::now();
  for (int i = 0; i < 6; ++i) client->Complete(Ask("x"), collector.Callback());
  for (const auto& result : collector.WaitFor(6)) EXPECT_TRUE(result.ok());
  EXPECT_GE(SecondsSince(start), 0.45);
}

TEST(LlmClient, RequiresAKeyForTheHostedApis) {
  ::unsetenv("OPENAI_API_KEY");
  ::unsetenv("OPENAI_BASE_URL");
  HttpLlmClient::Options options;
  StatusOr<std::unique_ptr<HttpLlmClient>> client = HttpLlmClient::Create(options);
  EXPECT_EQ(client.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(client.status().message().find("OPENAI_API_KEY"), std::string::npos);

  options.base_url = "ftp://nowhere";
  EXPECT_EQ(HttpLlmClient::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.base_url = "http://127.0.0.1:1/v1";  // a local server needs no key
  options.max_in_flight = 0;
  EXPECT_EQ(HttpLlmClient::Create(options).status().code(), StatusCode::kInvalidArgument);
  options.max_in_flight = 1;
  EXPECT_TRUE(HttpLlmClient::Create(options).ok());
}

TEST(LlmClient, ReportsARefusedConnectionAsUnavailable) {
  auto mock = StartMock();
  ASSERT_NE(mock, nullptr);
  HttpLlmClient::Options options = ClientOptions(*mock, LlmProvider::kOpenAi);
  mock->Stop();
  mock.reset();  // nothing listens on the port any more
  options.retry.max_attempts = 2;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("x"));
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable) << result.status().ToString();
  EXPECT_NE(result.status().message().find("connect"), std::string::npos);
}

class LlmClientTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StatusOr<TlsCredentials> credentials =
        GenerateSelfSignedCertificate({"127.0.0.1", "localhost"});
    ASSERT_TRUE(credentials.ok()) << credentials.status().ToString();
    credentials_ = *credentials;
    MockLlmServer::Options options;
    options.tls = credentials_;
    mock_ = StartMock(options);
    ASSERT_NE(mock_, nullptr);
    ASSERT_EQ(mock_->base_url().rfind("https://", 0), 0u);
  }

  std::string WriteCaFile() {
    const std::filesystem::path path = std::filesystem::temp_directory_path() /
                                       ("ksearch_llm_ca_" + std::to_string(::getpid()) + ".pem");
    std::ofstream(path) << credentials_.certificate_pem;
    ca_files_.push_back(path);
    return path.string();
  }

  void TearDown() override {
    for (const auto& path : ca_files_) std::filesystem::remove(path);
  }

  TlsCredentials credentials_;
  std::unique_ptr<MockLlmServer> mock_;
  std::vector<std::filesystem::path> ca_files_;
};

TEST_F(LlmClientTlsTest, RejectsASelfSignedCertificateByDefault) {
  auto client = MakeClient(ClientOptions(*mock_, LlmProvider::kOpenAi));
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("x"));
  EXPECT_EQ(result.status().code(), StatusCode::kFailedPrecondition)
      << result.status().ToString();
  EXPECT_NE(result.status().message().find("certificate"), std::string::npos)
      << result.status().message();
  EXPECT_EQ(mock_->counters().requests, 0);
}

TEST_F(LlmClientTlsTest, AcceptsItWithTheCaFileOption) {
  HttpLlmClient::Options options = ClientOptions(*mock_, LlmProvider::kAnthropic);
  options.tls.ca_file = WriteCaFile();
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  for (int i = 0; i < 5; ++i) {
    StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("x"));
    ASSERT_TRUE(result.ok()) << result.status().ToString();
  }
  EXPECT_EQ(mock_->counters().connections, 1);  // one handshake, kept alive
}

TEST_F(LlmClientTlsTest, AcceptsItAsPemTextAndByHostName) {
  HttpLlmClient::Options options = ClientOptions(*mock_, LlmProvider::kOpenAi);
  options.tls.ca_pem = credentials_.certificate_pem;
  options.base_url = "https://localhost:" + std::to_string(mock_->port()) + "/v1";
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("x"));
  EXPECT_TRUE(result.ok()) << result.status().ToString();
}

TEST_F(LlmClientTlsTest, ChecksTheHostName) {
  StatusOr<TlsCredentials> other = GenerateSelfSignedCertificate({"example.test"});
  ASSERT_TRUE(other.ok());
  MockLlmServer::Options mock_options;
  mock_options.tls = *other;
  auto mismatched = StartMock(mock_options);
  ASSERT_NE(mismatched, nullptr);
  HttpLlmClient::Options options = ClientOptions(*mismatched, LlmProvider::kOpenAi);
  options.tls.ca_pem = other->certificate_pem;  // trusted, but for another name
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> result = CompleteAndWait(*client, Ask("x"));
  EXPECT_EQ(result.status().code(), StatusCode::kFailedPrecondition)
      << result.status().ToString();
  EXPECT_NE(result.status().message().find("mismatch"), std::string::npos)
      << result.status().message();
}

TEST_F(LlmClientTlsTest, CanSkipVerificationWhenToldTo) {
  HttpLlmClient::Options options = ClientOptions(*mock_, LlmProvider::kOpenAi);
  options.tls.verify_peer = false;
  auto client = MakeClient(options);
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(CompleteAndWait(*client, Ask("x")).ok());
}

TEST(MockLlmServer, LoadsAScript) {
  auto mock = StartMock();
  ASSERT_NE(mock, nullptr);
  Status loaded = mock->LoadScriptJson(R"({
      "default": {"content": "default reply"},
      "queue": [{"http_status": 503, "retry_after_seconds": 0}, {"content": "queued"}],
      "rules": [{"regex": "soft(max)?", "times": 1, "reply": {"content": "softmax reply"}}]})");
  ASSERT_TRUE(loaded.ok()) << loaded.ToString();
  auto client = MakeClient(ClientOptions(*mock, LlmProvider::kOpenAi));
  ASSERT_NE(client, nullptr);
  StatusOr<ChatResponse> first = CompleteAndWait(*client, Ask("softmax"));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->content, "queued");
  EXPECT_EQ(first->attempts, 2);
  EXPECT_EQ(CompleteAndWait(*client, Ask("softmax"))->content, "softmax reply");
  EXPECT_EQ(CompleteAndWait(*client, Ask("softmax"))->content, "default reply");

  EXPECT_EQ(mock->LoadScriptJson("{").code(), StatusCode::kDataLoss);
  EXPECT_EQ(mock->LoadScriptJson(R"({"queue": [{"fault": "explode"}]})").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(mock->LoadScriptJson(R"({"rules": [{"regex": "(", "reply": {}}]})").code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(mock->LoadScript("/nonexistent/script.json").code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ksearch
