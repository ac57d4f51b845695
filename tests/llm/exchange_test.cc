// The exchange provider: request and reply files, the client that writes
// and waits for them, and the answering side against the mock server.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>

#include "collector.h"
#include "ksearch/exchange_answer.h"
#include "ksearch/exchange_llm_client.h"
#include "ksearch/http_llm_client.h"
#include "ksearch/mock_llm_server.h"
#include "test_util.h"

namespace ksearch {
namespace {

namespace fs = std::filesystem;
using testing::Collector;
using testing::TempDir;

ChatRequest Ask(std::string text, std::string tag = "branch r0.s0.i1.b0") {
  ChatRequest request;
  request.system = "You write CUDA kernels.";
  request.messages = {{ChatMessage::Role::kUser, std::move(text)}};
  request.max_tokens = 512;
  request.tag = std::move(tag);
  return request;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Written elsewhere and renamed, as writers should.
void WriteReply(const std::string& folder, const std::string& file, const std::string& text) {
  const std::string temp = folder + "/replies/." + file + ".part";
  std::ofstream(temp, std::ios::binary) << text;
  fs::rename(temp, folder + "/replies/" + file);
}

std::unique_ptr<ExchangeLlmClient> MakeClient(const std::string& folder,
                                              double poll_seconds = 0.02) {
  ExchangeLlmClient::Options options;
  options.folder = folder;
  options.poll_interval_seconds = poll_seconds;
  auto client = ExchangeLlmClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

// Waits (at most 20 s) until `predicate` holds.
template <typename P>
bool Eventually(P predicate) {
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < until) {
    if (predicate()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return predicate();
}

// ---- Names and files.

TEST(ExchangeRequestName, IsTheTagMadeFileSafeAndTheHashPrefix) {
  ChatRequest request = Ask("write a kernel", "branch r0.s0.i1.b0");
  const std::string name = ExchangeRequestName(request);
  EXPECT_EQ(name, "branch-r0.s0.i1.b0-" + RequestHash(request).substr(0, 16));
  EXPECT_EQ(ExchangeRequestName(request), name) << "a function of the request";
  request.timeout_seconds = 1;
  EXPECT_EQ(ExchangeRequestName(request), name) << "the time-out is not part of a request";

  request.tag = "../../etc/passwd \n\t*";
  EXPECT_EQ(ExchangeRequestName(request).substr(0, 16), "etc-passwd-" + RequestHash(request).substr(0, 5));
  request.tag = "";
  EXPECT_TRUE(ExchangeRequestName(request).starts_with("request-"));
  request.tag = std::string(500, 'x');
  EXPECT_EQ(ExchangeRequestName(request).size(), 64u + 1 + 16);
}

TEST(ExchangeRequestName, DiffersWhenTheConversationDiffers) {
  EXPECT_NE(ExchangeRequestName(Ask("implementation 1 of 2")),
            ExchangeRequestName(Ask("implementation 2 of 2")));
}

TEST(ExchangeRequestFile, RoundTripsEverySetting) {
  ChatRequest request = Ask("line one\nline \"two\"", "ideas r1.s0");
  request.model = "gpt-5";
  request.temperature = 0.25;
  request.reasoning_effort = "high";
  request.thinking_budget_tokens = 2048;
  request.stop = {"###"};
  request.messages.push_back({ChatMessage::Role::kAssistant, "earlier answer"});
  request.messages.push_back({ChatMessage::Role::kUser, "again"});
  const std::string text = ExchangeRequestToJson(request);
  auto back = ExchangeRequestFromJson(text, "r.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(RequestHash(*back), RequestHash(request));
  EXPECT_EQ(back->tag, "ideas r1.s0");
  EXPECT_EQ(back->temperature, 0.25);
  EXPECT_EQ(back->reasoning_effort, "high");
  EXPECT_EQ(back->thinking_budget_tokens, 2048);
  ASSERT_EQ(back->messages.size(), 3u);
  EXPECT_EQ(back->messages[1].role, ChatMessage::Role::kAssistant);
  EXPECT_EQ(ExchangeRequestToJson(*back), text) << "the text is a function of the request";
  // For people: one field a line.
  EXPECT_NE(text.find("\n  \"tag\": \"ideas r1.s0\",\n"), std::string::npos) << text;
}

TEST(ExchangeRequestFile, RefusesAnEditedRequestNamingTheField) {
  std::string text = ExchangeRequestToJson(Ask("write a kernel"));
  std::string edited = text;
  edited.replace(edited.find("write a kernel"), 5, "WRITE");
  auto parsed = ExchangeRequestFromJson(edited, "requests/x.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(parsed.status().message().find("requests/x.json: request_hash"), std::string::npos)
      << parsed.status().message();

  std::string typo = text;
  typo.replace(typo.find("\"max_tokens\""), 12, "\"max_tokenz\"");
  parsed = ExchangeRequestFromJson(typo, "requests/x.json");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("requests/x.json: max_tokenz: unknown field"),
            std::string::npos)
      << parsed.status().message();
}

TEST(ExchangeReplyFile, ReadsJsonWithUsageAndTextWithout) {
  TempDir dir;
  const std::string json = dir.Write(
      "a.json",
      R"({"content": "hello", "input_tokens": 12, "output_tokens": 34, "model": "m", "cost_usd": 0.5})");
  auto reply = ReadExchangeReply(json);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_TRUE(reply->reply.ok());
  EXPECT_TRUE(reply->usage_known);
  EXPECT_EQ(reply->reply->content, "hello");
  EXPECT_EQ(reply->reply->input_tokens, 12);
  EXPECT_EQ(reply->reply->output_tokens, 34);
  EXPECT_EQ(reply->reply->finish_reason, FinishReason::kStop);
  EXPECT_EQ(reply->reply->cost_usd, 0.5);

  const std::string text = dir.Write("b.txt", "```cuda\n// code\n```\n");
  reply = ReadExchangeReply(text);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_FALSE(reply->usage_known);
  EXPECT_EQ(reply->reply->content, "```cuda\n// code\n```\n");
  EXPECT_EQ(reply->reply->input_tokens, 0);

  // What the answering side writes reads back as it was.
  ChatResponse r;
  r.content = "text";
  r.input_tokens = 5;
  r.output_tokens = 6;
  r.finish_reason = FinishReason::kLength;
  r.model = "gpt-x";
  const std::string written = dir.Write("c.json", ExchangeReplyToJson(r));
  reply = ReadExchangeReply(written);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->reply->finish_reason, FinishReason::kLength);
  EXPECT_EQ(reply->reply->model, "gpt-x");
  const std::string error =
      dir.Write("d.json", ExchangeReplyToJson(OutOfRangeError("context length exceeded: 9000")));
  reply = ReadExchangeReply(error);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->reply.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(reply->reply.status().message(), "context length exceeded: 9000");
}

TEST(ExchangeReplyFile, NamesTheFileAndTheFieldOfEveryError) {
  TempDir dir;
  struct Case {
    const char* file;
    const char* text;
    StatusCode code;
    const char* expected;
  };
  const Case cases[] = {
      {"a.json", "{\"content\": \"x\", \"input_tokens\": 1", StatusCode::kDataLoss,
       "a.json: malformed JSON"},
      {"b.json", "{\"content\": \"x\", \"output_tokens\": 1}", StatusCode::kUnimplemented,
       "b.json: (top level): missing required field 'input_tokens'"},
      {"c.json", "{\"content\": 7, \"input_tokens\": 1, \"output_tokens\": 1}",
       StatusCode::kUnimplemented, "c.json: content: expected a string, got 7"},
      {"d.json",
       "{\"content\": \"x\", \"input_tokens\": 1, \"output_tokens\": 1, \"finish_reason\": \"done\"}",
       StatusCode::kUnimplemented, "finish_reason: unknown finish reason \"done\""},
      {"e.json", "{\"content\": \"x\", \"input_tokens\": -1, \"output_tokens\": 1}",
       StatusCode::kUnimplemented, "must be at least 0"},
      {"f.json", "{\"content\": \"x\", \"input_tokens\": 1, \"output_tokens\": 1, \"usage\": {}}",
       StatusCode::kUnimplemented, "f.json: usage: unknown field"},
      {"g.json", "{\"error\": {\"code\": \"SOMETHING\", \"message\": \"m\"}}",
       StatusCode::kUnimplemented, "g.json: error: code: unknown status code \"SOMETHING\""},
      {"h.txt", "\xff\xfe not text", StatusCode::kDataLoss, "h.txt: not UTF-8 text"},
  };
  for (const Case& c : cases) {
    auto reply = ReadExchangeReply(dir.Write(c.file, c.text));
    ASSERT_FALSE(reply.ok()) << c.file;
    EXPECT_EQ(reply.status().code(), c.code) << c.file << ": " << reply.status().ToString();
    EXPECT_NE(reply.status().message().find(c.expected), std::string::npos)
        << reply.status().message();
  }
}

TEST(ExchangeFolder, ListsRequestsWithTheirRepliesAndIgnoresTemporaryFiles) {
  TempDir dir;
  fs::create_directories(dir.path() + "/requests");
  fs::create_directories(dir.path() + "/replies");
  ChatRequest a = Ask("a", "ideas r0.s0"), b = Ask("b", "branch r0.s0.i0.b0");
  dir.Write("requests/" + ExchangeRequestName(a) + ".json", ExchangeRequestToJson(a));
  dir.Write("requests/" + ExchangeRequestName(b) + ".json", ExchangeRequestToJson(b));
  dir.Write("requests/" + ExchangeRequestName(b) + ".json.tmp.1.2", "{half");
  dir.Write("replies/" + ExchangeRequestName(b) + ".txt", "the reply");
  auto files = ListExchangeFolder(dir.path());
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_EQ(files->size(), 2u);
  EXPECT_EQ((*files)[0].name, ExchangeRequestName(b));  // "branch…" sorts before "ideas…"
  EXPECT_EQ((*files)[0].reply_path, dir.path() + "/replies/" + ExchangeRequestName(b) + ".txt");
  EXPECT_TRUE((*files)[1].reply_path.empty());

  auto exchanges = LoadExchangeFolder(dir.path());
  ASSERT_TRUE(exchanges.ok()) << exchanges.status().ToString();
  ASSERT_EQ(exchanges->size(), 1u) << "only answered requests";
  EXPECT_EQ((*exchanges)[0].provider, "exchange");
  EXPECT_EQ((*exchanges)[0].request.tag, "branch r0.s0.i0.b0");
  EXPECT_EQ((*exchanges)[0].response->content, "the reply");

  EXPECT_EQ(ListExchangeFolder(dir.path() + "/none").status().code(), StatusCode::kNotFound);
}

// ---- The client.

TEST(ExchangeLlmClient, WritesTheRequestAndDeliversTheReplyWithItsUsage) {
  TempDir dir;
  auto client = MakeClient(dir.path());
  ASSERT_TRUE(client);
  std::vector<LlmExchange> observed;
  std::mutex observed_mutex;
  client->SetObserver([&](const LlmExchange& x) {
    std::lock_guard<std::mutex> lock(observed_mutex);
    observed.push_back(x);
  });
  ChatRequest request = Ask("write a kernel");
  const std::string name = ExchangeRequestName(request);
  Collector waiter;
  client->Complete(request, waiter.Callback());
  const std::string request_path = dir.path() + "/requests/" + name + ".json";
  ASSERT_TRUE(Eventually([&] { return client->stats().requests_written == 1; }));
  EXPECT_EQ(Slurp(request_path), ExchangeRequestToJson(request));
  EXPECT_EQ(client->stats().pending, 1);
  EXPECT_EQ(waiter.size(), 0u) << "nothing arrives before the reply";

  WriteReply(dir.path(), name + ".json",
             R"({"content": "the kernel", "input_tokens": 100, "output_tokens": 200})");
  auto results = waiter.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].ok()) << results[0].status().ToString();
  EXPECT_EQ(results[0]->content, "the kernel");
  EXPECT_EQ(client->totals().requests, 1);
  EXPECT_EQ(client->totals().input_tokens, 100);
  EXPECT_EQ(client->totals().output_tokens, 200);
  EXPECT_EQ(client->stats().pending, 0);
  EXPECT_EQ(client->stats().replies_read, 1);
  EXPECT_EQ(client->requested(), std::vector<std::string>{name});
  std::lock_guard<std::mutex> lock(observed_mutex);
  ASSERT_EQ(observed.size(), 1u);
  EXPECT_EQ(observed[0].provider, "exchange");
  EXPECT_EQ(observed[0].request.tag, request.tag);
}

TEST(ExchangeLlmClient, ServesAReplyAlreadyThereAndCountsTextRepliesAsUsageUnknown) {
  TempDir dir;
  auto client = MakeClient(dir.path());
  ASSERT_TRUE(client);
  ChatRequest request = Ask("write a kernel");
  WriteReply(dir.path(), ExchangeRequestName(request) + ".txt", "plain answer");
  auto reply = CompleteAndWait(*client, request);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->content, "plain answer");
  EXPECT_EQ(reply->input_tokens + reply->output_tokens, 0);
  EXPECT_EQ(client->stats().replies_without_usage, 1);
}

TEST(ExchangeLlmClient, AsksForTheSameFileAgainAfterARestart) {
  TempDir dir;
  ChatRequest request = Ask("write a kernel");
  const std::string path = dir.path() + "/requests/" + ExchangeRequestName(request) + ".json";
  {
    Collector waiter;  // declared first: it outlives the client, whose end delivers kCancelled
    auto first = MakeClient(dir.path());
    first->Complete(request, waiter.Callback());
    ASSERT_TRUE(Eventually([&] { return first->stats().requests_written == 1; }));
  }  // destroyed while waiting: the callback got kCancelled, the file stays
  ASSERT_TRUE(fs::exists(path));
  const auto written_at = fs::last_write_time(path);
  auto second = MakeClient(dir.path());
  Collector waiter;
  second->Complete(request, waiter.Callback());
  ASSERT_TRUE(Eventually([&] { return second->stats().requests_written == 1; }));
  EXPECT_EQ(fs::last_write_time(path), written_at) << "the same text is not written again";
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path() + "/requests"),
                          fs::directory_iterator()),
            1);
  WriteReply(dir.path(), ExchangeRequestName(request) + ".txt", "late answer");
  auto results = waiter.WaitFor(1);
  ASSERT_TRUE(results[0].ok()) << results[0].status().ToString();
  EXPECT_EQ(results[0]->content, "late answer");
}

TEST(ExchangeLlmClient, FailsOneRequestForABadReplyFileAsAProviderWould) {
  TempDir dir;
  auto client = MakeClient(dir.path());
  ChatRequest bad = Ask("one"), cut = Ask("two"), empty = Ask("three"), good = Ask("four");
  WriteReply(dir.path(), ExchangeRequestName(bad) + ".json", R"({"content": "x"})");
  WriteReply(dir.path(), ExchangeRequestName(cut) + ".json",
             R"({"content": "x", "input_tokens": 10, "output_tokens": 512, "finish_reason": "length"})");
  WriteReply(dir.path(), ExchangeRequestName(empty) + ".txt", " \n");
  WriteReply(dir.path(), ExchangeRequestName(good) + ".txt", "fine");
  auto r1 = CompleteAndWait(*client, bad);
  ASSERT_FALSE(r1.ok());
  EXPECT_EQ(r1.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r1.status().message().find(ExchangeRequestName(bad) + ".json: (top level): missing "
                                       "required field 'input_tokens'"),
            std::string::npos)
      << r1.status().message();
  EXPECT_EQ(FailureScope(r1.status()), LlmFailureScope::kReply);
  auto r2 = CompleteAndWait(*client, cut);
  EXPECT_EQ(r2.status().code(), StatusCode::kOutOfRange) << r2.status().ToString();
  EXPECT_FALSE(IsContextLengthError(r2.status()));
  auto r3 = CompleteAndWait(*client, empty);
  EXPECT_EQ(r3.status().code(), StatusCode::kDataLoss) << r3.status().ToString();
  EXPECT_TRUE(CompleteAndWait(*client, good).ok()) << "one bad file fails one request";
  EXPECT_EQ(client->stats().bad_replies, 1);
  EXPECT_EQ(client->totals().output_tokens, 512) << "a cut reply was still billed";
  EXPECT_EQ(client->totals().failures, 3);
}

TEST(ExchangeLlmClient, ReadsAReplyWrittenInPlaceOnlyOnceItStopsChanging) {
  TempDir dir;
  // A long interval: the two halves below are written well within half of it.
  auto client = MakeClient(dir.path(), 1.0);
  ChatRequest request = Ask("write a kernel");
  Collector waiter;
  client->Complete(request, waiter.Callback());
  ASSERT_TRUE(Eventually([&] { return client->stats().requests_written == 1; }));
  const std::string path = dir.path() + "/replies/" + ExchangeRequestName(request) + ".json";
  {
    std::ofstream out(path, std::ios::binary);
    out << R"({"content": "half of it", )";
    out.flush();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    out << R"("input_tokens": 1, "output_tokens": 2})";
  }
  auto results = waiter.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].ok()) << results[0].status().ToString();
  EXPECT_EQ(results[0]->content, "half of it");
}

TEST(ExchangeLlmClient, CancelLeavesTheRequestFileForALaterAnswer) {
  TempDir dir;
  auto client = MakeClient(dir.path());
  ChatRequest request = Ask("write a kernel");
  Collector waiter;
  uint64_t id = client->Complete(request, waiter.Callback());
  ASSERT_TRUE(Eventually([&] { return client->stats().requests_written == 1; }));
  client->Cancel(id);
  auto results = waiter.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status().code(), StatusCode::kCancelled);
  EXPECT_EQ(client->stats().pending, 0);
  EXPECT_EQ(client->totals().requests, 0) << "neither answered nor billed";
  EXPECT_EQ(client->totals().failures, 0) << "waiting is not failing";
  EXPECT_TRUE(fs::exists(dir.path() + "/requests/" + ExchangeRequestName(request) + ".json"));
}

// A search that stops (to wait for a GPU, or on Ctrl-C) cancels what it asked:
// a reply already in the folder has arrived and is delivered, not dropped.
TEST(ExchangeLlmClient, CancelStillDeliversAReplyAlreadyInTheFolder) {
  TempDir dir;
  // A long interval: the reply cannot settle before Cancel() below.
  auto client = MakeClient(dir.path(), 1.0);
  ChatRequest request = Ask("write a kernel");
  Collector waiter;
  uint64_t id = client->Complete(request, waiter.Callback());
  ASSERT_TRUE(Eventually([&] { return client->stats().requests_written == 1; }));
  WriteReply(dir.path(), ExchangeRequestName(request) + ".txt", "arrived in time");
  client->Cancel(id);
  auto results = waiter.WaitFor(1);
  ASSERT_EQ(results.size(), 1u);
  ASSERT_TRUE(results[0].ok()) << results[0].status().ToString();
  EXPECT_EQ(results[0]->content, "arrived in time");
  EXPECT_EQ(client->stats().pending, 0);
}

TEST(ExchangeLlmClient, ReportsHowLongItsPendingRequestsHaveWaited) {
  TempDir dir;
  Collector waiter;  // outlives the client, whose end delivers kCancelled to both requests
  auto client = MakeClient(dir.path());
  client->Complete(Ask("one"), waiter.Callback());
  ASSERT_TRUE(Eventually([&] { return client->stats().requests_written == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  client->Complete(Ask("two"), waiter.Callback());
  ExchangeLlmClient::Stats s = client->stats();
  EXPECT_EQ(s.pending, 2);
  EXPECT_GE(s.oldest_pending_seconds, 0.1);
  EXPECT_LT(s.newest_pending_seconds, s.oldest_pending_seconds);
}

TEST(ExchangeLlmClient, RefusesAFolderItCannotCreate) {
  TempDir dir;
  ExchangeLlmClient::Options options;
  options.folder = dir.Write("file", "not a folder") + "/sub";
  auto client = ExchangeLlmClient::Create(options);
  ASSERT_FALSE(client.ok());
  EXPECT_NE(client.status().message().find("/file/sub"), std::string::npos)
      << client.status().ToString();
  options.folder = "";
  EXPECT_EQ(ExchangeLlmClient::Create(options).status().code(), StatusCode::kInvalidArgument);
}

// ---- The answering side, against the mock server.

std::unique_ptr<MockLlmServer> StartMock() {
  auto mock = MockLlmServer::Start({});
  EXPECT_TRUE(mock.ok()) << mock.status().ToString();
  return mock.ok() ? std::move(*mock) : nullptr;
}

MockReply Reply(std::string content, int64_t input_tokens, int64_t output_tokens) {
  MockReply reply;
  reply.content = std::move(content);
  reply.input_tokens = input_tokens;
  reply.output_tokens = output_tokens;
  return reply;
}

std::unique_ptr<HttpLlmClient> HttpClient(const MockLlmServer& mock, int attempts = 2) {
  HttpLlmClient::Options options;
  options.base_url = mock.openai_base_url();
  options.default_model = "mock-model";
  options.retry.max_attempts = attempts;
  options.retry.initial_backoff_seconds = 0.001;
  options.retry.max_backoff_seconds = 0.01;
  auto client = HttpLlmClient::Create(options);
  EXPECT_TRUE(client.ok()) << client.status().ToString();
  return client.ok() ? std::move(*client) : nullptr;
}

// Writes `requests` into DIR/requests as the search would.
void WriteRequests(const std::string& folder, const std::vector<ChatRequest>& requests) {
  fs::create_directories(folder + "/requests");
  fs::create_directories(folder + "/replies");
  for (const ChatRequest& r : requests) {
    std::ofstream(folder + "/requests/" + ExchangeRequestName(r) + ".json")
        << ExchangeRequestToJson(r);
  }
}

TEST(AnswerExchangeFolder, AnswersEveryPendingRequestAndTheSearchSideReadsTheReplies) {
  TempDir dir;
  auto mock = StartMock();
  ASSERT_TRUE(mock);
  mock->SetDefaultReply(Reply("an answer", 30, 40));
  std::vector<ChatRequest> requests = {Ask("one"), Ask("two"), Ask("three")};
  WriteRequests(dir.path(), requests);
  WriteReply(dir.path(), ExchangeRequestName(requests[2]) + ".txt", "answered by hand");
  auto http = HttpClient(*mock);
  std::vector<AnswerEvent> events;
  auto summary = AnswerExchangeFolder(dir.path(), *http, AnswerOptions(),
                                      [&](const AnswerEvent& e) { events.push_back(e); });
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->answered, 2);
  EXPECT_EQ(summary->pending, 0);
  EXPECT_EQ(summary->totals.input_tokens, 60);
  EXPECT_EQ(summary->totals.output_tokens, 80);
  EXPECT_EQ(events.size(), 2u);
  EXPECT_EQ(mock->counters().requests, 2) << "the reply written by hand is kept";
  // The model received exactly what the search asked.
  for (const MockRequest& seen : mock->requests()) {
    EXPECT_EQ(seen.request.system, requests[0].system);
    EXPECT_EQ(seen.request.model, "mock-model");
  }

  auto client = MakeClient(dir.path());
  for (const ChatRequest& r : requests) {
    auto got = CompleteAndWait(*client, r);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->content, &r == &requests[2] ? "answered by hand" : "an answer");
  }
  EXPECT_EQ(client->totals().input_tokens, 60);
}

TEST(AnswerExchangeFolder, WritesTheProvidersRefusalOfARequestAndLeavesOutagesPending) {
  TempDir dir;
  MockLlmServer::Options options;
  options.context_window_tokens = 1000;
  auto started = MockLlmServer::Start(options);
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  std::unique_ptr<MockLlmServer> mock = std::move(*started);
  ChatRequest too_long = Ask("too long " + std::string(4000, 'x'));
  ChatRequest outage = Ask("outage");
  WriteRequests(dir.path(), {too_long, outage});
  MockReply down;
  down.fault = MockFault::kHttpError;
  down.http_status = 503;
  mock->SetDefaultReply(down);
  auto http = HttpClient(*mock);
  auto summary = AnswerExchangeFolder(dir.path(), *http, AnswerOptions());
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->refused, 1);
  EXPECT_EQ(summary->failed, 1);
  EXPECT_EQ(summary->pending, 1);
  EXPECT_TRUE(summary->stopped_by.ok()) << "an outage is no reason to stop";
  EXPECT_FALSE(fs::exists(dir.path() + "/replies/" + ExchangeRequestName(outage) + ".json"));

  // The search meets the context-length error as it would from the provider.
  auto client = MakeClient(dir.path());
  auto got = CompleteAndWait(*client, too_long);
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(IsContextLengthError(got.status())) << got.status().ToString();
}

TEST(AnswerExchangeFolder, StopsOnAFailureEveryRequestWouldShare) {
  TempDir dir;
  MockLlmServer::Options options;
  options.required_api_key = "the-right-key";
  auto mock = MockLlmServer::Start(options);
  ASSERT_TRUE(mock.ok());
  WriteRequests(dir.path(), {Ask("one"), Ask("two"), Ask("three")});
  auto http = HttpClient(**mock);
  AnswerOptions answer;
  answer.max_in_flight = 1;
  auto summary = AnswerExchangeFolder(dir.path(), *http, answer);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->stopped_by.code(), StatusCode::kUnauthenticated)
      << summary->stopped_by.ToString();
  EXPECT_EQ((*mock)->counters().requests, 1) << "no request after the first 401";
  EXPECT_EQ(summary->pending, 3);
}

TEST(AnswerExchangeFolder, StartsNoRequestTheTokenBudgetCannotCover) {
  TempDir dir;
  auto mock = StartMock();
  ASSERT_TRUE(mock);
  mock->SetDefaultReply(Reply("ok", 10, 10));
  // Each request may cost its prompt (~10 tokens) plus max_tokens 512.
  WriteRequests(dir.path(), {Ask("one"), Ask("two"), Ask("three")});
  auto http = HttpClient(*mock);
  AnswerOptions answer;
  answer.max_tokens = 1100;
  auto summary = AnswerExchangeFolder(dir.path(), *http, answer);
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  // Two fit at their estimate; once they came back (20 tokens each), the
  // third fits too.
  EXPECT_EQ(summary->answered, 3);
  answer.max_tokens = 500;
  WriteRequests(dir.path(), {Ask("four")});
  summary = AnswerExchangeFolder(dir.path(), *http, answer);
  ASSERT_TRUE(summary.ok());
  EXPECT_EQ(summary->answered, 0);
  EXPECT_EQ(summary->over_budget, 1);
  EXPECT_EQ(summary->pending, 1);
  EXPECT_EQ(mock->counters().requests, 3);
}

TEST(AnswerExchangeFolder, RefusesAnEditedRequestAndAnswersTheRest) {
  TempDir dir;
  auto mock = StartMock();
  ASSERT_TRUE(mock);
  ChatRequest edited = Ask("one"), fine = Ask("two");
  WriteRequests(dir.path(), {edited, fine});
  const std::string path = dir.path() + "/requests/" + ExchangeRequestName(edited) + ".json";
  std::string text = Slurp(path);
  text.replace(text.find("\"one\""), 5, "\"ONE\"");
  std::ofstream(path) << text;
  auto http = HttpClient(*mock);
  auto summary = AnswerExchangeFolder(dir.path(), *http, AnswerOptions());
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->answered, 1);
  EXPECT_EQ(summary->bad_requests, 1);
  ASSERT_EQ(summary->notes.size(), 1u);
  EXPECT_NE(summary->notes[0].find(path + ": request_hash"), std::string::npos)
      << summary->notes[0];
}

TEST(AnswerExchangeFolder, WatchesForNewRequestsUntilStopped) {
  TempDir dir;
  auto mock = StartMock();
  ASSERT_TRUE(mock);
  auto http = HttpClient(*mock);
  auto client = MakeClient(dir.path());
  std::atomic<bool> stop{false};
  AnswerOptions answer;
  answer.watch = true;
  answer.poll_interval_seconds = 0.02;
  answer.stop = &stop;
  auto watching = std::async(std::launch::async, [&] {
    return AnswerExchangeFolder(dir.path(), *http, answer);
  });
  // The search side asks, one request after another, and gets its answers.
  for (const char* text : {"first", "second"}) {
    auto got = CompleteAndWait(*client, Ask(text));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->content, "mock reply");
  }
  stop = true;
  auto summary = watching.get();
  ASSERT_TRUE(summary.ok()) << summary.status().ToString();
  EXPECT_EQ(summary->answered, 2);
}

}  // namespace
}  // namespace ksearch
