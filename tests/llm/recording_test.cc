#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "ksearch/llm_recording.h"
#include "ksearch/price_table.h"
#include "ksearch/replay_llm_client.h"

namespace ksearch {
namespace {

ChatRequest Request(std::string text, std::string tag = "") {
  ChatRequest request;
  request.model = "m";
  request.system = "sys";
  request.messages = {{ChatMessage::Role::kUser, std::move(text)}};
  request.temperature = 0.5;
  request.max_tokens = 100;
  request.tag = std::move(tag);
  return request;
}

LlmExchange Exchange(ChatRequest request, StatusOr<ChatResponse> response, uint64_t id) {
  LlmExchange exchange;
  exchange.provider = "openai";
  exchange.request_hash = RequestHash(request);
  exchange.request = std::move(request);
  exchange.response = std::move(response);
  exchange.started_unix_ms = 1700000000000 + static_cast<int64_t>(id);
  exchange.request_id = id;
  return exchange;
}

ChatResponse Reply(std::string content) {
  ChatResponse response;
  response.content = std::move(content);
  response.input_tokens = 10;
  response.output_tokens = 20;
  response.latency_ms = 12.5;
  response.attempts = 2;
  response.cost_usd = 0.001;
  response.model = "m-2025";
  return response;
}

std::filesystem::path TempPath(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("ksearch_llm_" + std::to_string(::getpid()) + "_" + name);
}

TEST(RequestHash, IsStableAcrossVersionsOfThisFormat) {
  // Pinned: recordings made by earlier builds must keep replaying.
  EXPECT_EQ(RequestHash(Request("hello")),
            "2a30fed2f13ebfe95c7094a39c2713fdb445b73dff9f32c321fe62db1405beb4");
}

TEST(RequestHash, CoversEveryFieldThatChangesTheReplyButNotTagOrTimeout) {
  const std::string base = RequestHash(Request("hello"));
  ChatRequest r = Request("hello");
  r.tag = "other";
  r.timeout_seconds = 1;
  EXPECT_EQ(RequestHash(r), base);
  r = Request("hello");
  r.model = "n";
  EXPECT_NE(RequestHash(r), base);
  r = Request("hello");
  r.system = "";
  EXPECT_NE(RequestHash(r), base);
  r = Request("hellO");
  EXPECT_NE(RequestHash(r), base);
  r = Request("hello");
  r.messages[0].role = ChatMessage::Role::kAssistant;
  EXPECT_NE(RequestHash(r), base);
  r = Request("hello");
  r.temperature = 0.50000001;
  EXPECT_NE(RequestHash(r), base);
  r = Request("hello");
  r.max_tokens = 101;
  EXPECT_NE(RequestHash(r), base);
  r = Request("hello");
  r.stop = {"x"};
  EXPECT_NE(RequestHash(r), base);
  // Field boundaries matter: moving text between fields changes the hash.
  ChatRequest a = Request("bc");
  a.system = "a";
  ChatRequest b = Request("c");
  b.system = "ab";
  EXPECT_NE(RequestHash(a), RequestHash(b));
}

TEST(Recording, ExchangesRoundTripThroughJsonLines) {
  ChatRequest request = Request("line1\nline2 \"quoted\" \\ é");
  request.stop = {"###"};
  request.tag = "idea r1 s0";
  LlmExchange ok = Exchange(request, Reply("```cuda\nx\n```"), 7);
  StatusOr<LlmExchange> back = ExchangeFromJsonLine(ExchangeToJsonLine(ok));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->provider, "openai");
  EXPECT_EQ(back->request_id, 7u);
  EXPECT_EQ(back->request_hash, RequestHash(request));
  EXPECT_EQ(back->request.messages[0].content, request.messages[0].content);
  EXPECT_EQ(back->request.tag, "idea r1 s0");
  EXPECT_EQ(back->request.stop, request.stop);
  ASSERT_TRUE(back->response.ok());
  EXPECT_EQ(back->response->content, "```cuda\nx\n```");
  EXPECT_EQ(back->response->output_tokens, 20);
  EXPECT_EQ(back->response->attempts, 2);
  EXPECT_DOUBLE_EQ(back->response->latency_ms, 12.5);
  EXPECT_EQ(back->response->model, "m-2025");

  LlmExchange failed =
      Exchange(request, ResourceExhaustedError("openai: HTTP 429 (Too Many Requests)"), 8);
  back = ExchangeFromJsonLine(ExchangeToJsonLine(failed));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->response.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(back->response.status().message(), "openai: HTTP 429 (Too Many Requests)");
}

TEST(Recording, RejectsBrokenLinesWithTheirPosition) {
  EXPECT_EQ(ExchangeFromJsonLine("{").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(ExchangeFromJsonLine(R"({"version": 2})").status().code(),
            StatusCode::kInvalidArgument);
  std::string line = ExchangeToJsonLine(Exchange(Request("x"), Reply("y"), 1));
  std::string no_request = line;
  no_request.replace(no_request.find("\"request\":"), 10, "\"requestX\":");
  StatusOr<LlmExchange> parsed = ExchangeFromJsonLine(no_request);
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("request"), std::string::npos);

  const std::filesystem::path path = TempPath("broken.jsonl");
  {
    std::ofstream out(path);
    out << line << "\n\n" << line << "\n" << "not json\n";
  }
  StatusOr<std::vector<LlmExchange>> loaded = LoadLlmRecording(path.string());
  EXPECT_EQ(loaded.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(loaded.status().message().find(path.string() + ":4"), std::string::npos)
      << loaded.status().message();
  std::filesystem::remove(path);
  EXPECT_EQ(LoadLlmRecording(path.string()).status().code(), StatusCode::kNotFound);
}

TEST(LlmRecorder, AppendsOneFlushedLinePerExchange) {
  const std::filesystem::path path = TempPath("recorder.jsonl");
  std::filesystem::remove(path);
  {
    StatusOr<std::unique_ptr<LlmRecorder>> recorder = LlmRecorder::Open(path.string());
    ASSERT_TRUE(recorder.ok()) << recorder.status().ToString();
    LlmClient::ExchangeObserver observer = (*recorder)->observer();
    observer(Exchange(Request("a"), Reply("A"), 1));
    observer(Exchange(Request("b"), UnavailableError("down"), 2));
    EXPECT_EQ((*recorder)->recorded(), 2);
    // Flushed already: readable while the recorder is open.
    StatusOr<std::vector<LlmExchange>> loaded = LoadLlmRecording(path.string());
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ(loaded->size(), 2u);
    EXPECT_TRUE((*recorder)->status().ok());
  }
  EXPECT_EQ(LlmRecorder::Open("/nonexistent-dir/x.jsonl").status().code(),
            StatusCode::kNotFound);
  std::filesystem::remove(path);
}

// Collects callbacks of a client; waits for a count.
struct Results {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<StatusOr<ChatResponse>> results;
  std::vector<std::thread::id> threads;

  LlmClient::Callback Callback() {
    return [this](StatusOr<ChatResponse> r) {
      std::lock_guard<std::mutex> lock(mutex);
      results.push_back(std::move(r));
      threads.push_back(std::this_thread::get_id());
      changed.notify_all();
    };
  }
  void WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mutex);
    ASSERT_TRUE(changed.wait_for(lock, std::chrono::seconds(10), [&] { return results.size() >= n; }));
  }
};

TEST(ReplayLlmClient, ServesIdenticalRequestsInIssueOrder) {
  // Recorded in finishing order 3, 1, 2 — replayed in issue order 1, 2, 3.
  std::vector<LlmExchange> recording = {Exchange(Request("same"), Reply("third"), 3),
                                        Exchange(Request("same"), Reply("first"), 1),
                                        Exchange(Request("same"), Reply("second"), 2),
                                        Exchange(Request("other"), Reply("other"), 4)};
  auto created = ReplayLlmClient::Create(recording);
  ASSERT_TRUE(created.ok());
  ReplayLlmClient& client = **created;
  Results results;
  client.Complete(Request("same"), results.Callback());
  client.Complete(Request("other"), results.Callback());
  client.Complete(Request("same"), results.Callback());
  client.Complete(Request("same"), results.Callback());
  client.Complete(Request("same"), results.Callback());
  results.WaitFor(5);
  std::lock_guard<std::mutex> lock(results.mutex);
  EXPECT_EQ(results.results[0]->content, "first");
  EXPECT_EQ(results.results[1]->content, "other");
  EXPECT_EQ(results.results[2]->content, "second");
  EXPECT_EQ(results.results[3]->content, "third");
  EXPECT_EQ(results.results[4].status().code(), StatusCode::kNotFound);
  EXPECT_NE(results.results[4].status().message().find(RequestHash(Request("same"))),
            std::string::npos);
  EXPECT_NE(results.threads[0], std::this_thread::get_id());
  EXPECT_EQ(client.misses(), 1);
  EXPECT_EQ(client.totals().requests, 5);
  EXPECT_EQ(client.totals().failures, 1);
  EXPECT_EQ(client.totals().output_tokens, 80);
}

TEST(ReplayLlmClient, PrefersTheSameTagReplaysErrorsAndCanCycle) {
  std::vector<LlmExchange> recording = {
      Exchange(Request("q", "branch 0"), Reply("zero"), 1),
      Exchange(Request("q", "branch 1"), Reply("one"), 2),
      Exchange(Request("fails"), DeadlineExceededError("openai: no reply within 300 s"), 3)};
  ReplayLlmClient::Options options;
  options.cycle_when_exhausted = true;
  auto created = ReplayLlmClient::Create(recording, options);
  ASSERT_TRUE(created.ok());
  ReplayLlmClient& client = **created;
  EXPECT_EQ(CompleteAndWait(client, Request("q", "branch 1"))->content, "one");
  EXPECT_EQ(CompleteAndWait(client, Request("q", "branch 0"))->content, "zero");
  EXPECT_EQ(CompleteAndWait(client, Request("q", "branch 0"))->content, "zero");  // cycled
  StatusOr<ChatResponse> failed = CompleteAndWait(client, Request("fails"));
  EXPECT_EQ(failed.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_EQ(client.provider(), "replay");
}

// On a GPU the prompts quote measured times: the same place in the tree asks
// with different text. The tag finds the recorded reply; without the option
// it is a miss.
TEST(ReplayLlmClient, MatchesByTagWhenTheMeasuredFiguresInAPromptDiffer) {
  std::vector<LlmExchange> recording = {
      Exchange(Request("parent 1.204 ms", "ideas r0.s0"), Reply("ideas A"), 1),
      Exchange(Request("parent 0.911 ms", "branch r1.s0.i0.b0"), Reply("kernel B0"), 2),
      Exchange(Request("parent 0.911 ms", "branch r1.s0.i0.b1"), Reply("kernel B1"), 3),
      Exchange(Request("parent 0.8 ms", "ideas r1.s0"), Reply("ideas C"), 4)};
  {
    auto strict = ReplayLlmClient::Create(recording);
    ASSERT_TRUE(strict.ok());
    EXPECT_EQ(CompleteAndWait(**strict, Request("parent 1.207 ms", "ideas r0.s0")).status().code(),
              StatusCode::kNotFound);
  }
  ReplayLlmClient::Options options;
  options.match_tag_when_hash_differs = true;
  auto created = ReplayLlmClient::Create(recording, options);
  ASSERT_TRUE(created.ok());
  ReplayLlmClient& client = **created;
  EXPECT_EQ(CompleteAndWait(client, Request("parent 1.207 ms", "ideas r0.s0"))->content, "ideas A");
  EXPECT_EQ(CompleteAndWait(client, Request("parent 0.913 ms", "branch r1.s0.i0.b1"))->content,
            "kernel B1");
  // An exact hash still wins, and a served reply is not served again.
  EXPECT_EQ(CompleteAndWait(client, Request("parent 0.911 ms", "branch r1.s0.i0.b0"))->content,
            "kernel B0");
  EXPECT_EQ(CompleteAndWait(client, Request("parent 0.913 ms", "branch r1.s0.i0.b1")).status().code(),
            StatusCode::kNotFound);
  // Another model: no match.
  ChatRequest other = Request("parent 0.7 ms", "ideas r1.s0");
  other.model = "another";
  EXPECT_FALSE(CompleteAndWait(client, other).ok());
  EXPECT_EQ(client.tag_matches(), 2);
  EXPECT_EQ(client.misses(), 2);
}

TEST(ReplayLlmClient, CallbacksNeverRunInsideComplete) {
  auto created = ReplayLlmClient::Create({Exchange(Request("x"), Reply("y"), 1)});
  ASSERT_TRUE(created.ok());
  ReplayLlmClient& client = **created;
  std::promise<std::thread::id> ran_on;
  client.Complete(Request("x"),
                  [&](StatusOr<ChatResponse>) { ran_on.set_value(std::this_thread::get_id()); });
  EXPECT_NE(ran_on.get_future().get(), std::this_thread::get_id());
}

TEST(ReplayLlmClient, CanBeDestroyedFromItsOwnCallback) {
  auto created = ReplayLlmClient::Create({Exchange(Request("x"), Reply("y"), 1)});
  ASSERT_TRUE(created.ok());
  std::unique_ptr<ReplayLlmClient> client = std::move(*created);
  std::promise<void> destroyed;
  ReplayLlmClient* raw = client.get();
  raw->Complete(Request("x"), [&](StatusOr<ChatResponse>) {
    client.reset();
    destroyed.set_value();
  });
  EXPECT_EQ(destroyed.get_future().wait_for(std::chrono::seconds(10)),
            std::future_status::ready);
}

TEST(ReplayLlmClient, OpensARecordingFile) {
  const std::filesystem::path path = TempPath("replay.jsonl");
  ASSERT_TRUE(SaveLlmRecording(path.string(), {Exchange(Request("x"), Reply("y"), 1)}).ok());
  StatusOr<std::unique_ptr<ReplayLlmClient>> client = ReplayLlmClient::Open(path.string());
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_EQ(CompleteAndWait(**client, Request("x"))->content, "y");
  std::filesystem::remove(path);
}

TEST(PriceTable, ParsesExactNamesAndPatterns) {
  StatusOr<PriceTable> table = PriceTable::Parse(R"({"models": {
      "gpt-4o": {"input_usd_per_million_tokens": 2.5, "output_usd_per_million_tokens": 10},
      "gpt-4o*": {"input_usd_per_million_tokens": 5, "output_usd_per_million_tokens": 20},
      "gpt-*": {"input_usd_per_million_tokens": 1, "output_usd_per_million_tokens": 1}}})");
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  EXPECT_DOUBLE_EQ(table->CostUsd("gpt-4o", 1'000'000, 100'000), 2.5 + 1.0);
  EXPECT_DOUBLE_EQ(table->CostUsd("gpt-4o-2024-08-06", 1'000'000, 0), 5.0);
  EXPECT_DOUBLE_EQ(table->CostUsd("gpt-3.5", 0, 2'000'000), 2.0);
  EXPECT_EQ(table->CostUsd("claude", 1'000'000, 1'000'000), 0.0);
  EXPECT_EQ(table->Find("claude"), nullptr);
}

TEST(PriceTable, RejectsTyposAndNonsense) {
  StatusOr<PriceTable> typo = PriceTable::Parse(
      R"({"models": {"m": {"input_usd_per_milion_tokens": 1, "output_usd_per_million_tokens": 1}}})",
      "prices.json");
  EXPECT_EQ(typo.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(typo.status().message().find("prices.json: models.m"), std::string::npos)
      << typo.status().message();
  EXPECT_EQ(PriceTable::Parse("{").status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(PriceTable::Parse(R"({"m": {}})").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(PriceTable::Parse(R"({"models": {"m": {"input_usd_per_million_tokens": -1,
      "output_usd_per_million_tokens": 1}}})")
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PriceTable::Load("/nonexistent/prices.json").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ksearch
