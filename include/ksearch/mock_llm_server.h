// MockLlmServer: a loopback server that speaks the OpenAI and Anthropic wire
// formats from a script, with faults on demand, for tests, examples and
// `ksearch mock-llm` (docs/llm.md has the script format).
#ifndef KSEARCH_MOCK_LLM_SERVER_H_
#define KSEARCH_MOCK_LLM_SERVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/llm_client.h"
#include "ksearch/status.h"
#include "ksearch/tls_credentials.h"

namespace ksearch {

namespace internal {
class MockLlmServerImpl;
}  // namespace internal

// A fault the mock server injects instead of (or into) a normal reply.
enum class MockFault {
  kNone,               // a normal reply
  kHttpError,          // MockReply::http_status with an error body in the provider's format
  kReset,              // read the request, then reset the connection (TCP RST)
  kDisconnectMidBody,  // send the headers and half of the body, then close
  kMalformedJson,      // 200 with a body cut in the middle of the JSON
  kMissingFields,      // 200 with valid JSON lacking choices / content
  kRefusal,            // 200, a refusal: OpenAI content null + "refusal", Anthropic
                       // stop_reason "refusal"
  kHang,               // read the request, then never answer (the connection
                       // stays open until the client gives up or Stop())
};

// "none", "http_error", "reset", "disconnect_mid_body", "malformed_json",
// "missing_fields", "refusal", "hang".
std::string_view ToString(MockFault fault);
[[nodiscard]] StatusOr<MockFault> ParseMockFault(std::string_view name);

// One scripted reply.
struct MockReply {
  // The assistant's text.
  std::string content = "mock reply";
  // Reported finish reason (kLength makes a truncated reply).
  FinishReason finish_reason = FinishReason::kStop;
  // Reported usage; negative: estimated as bytes / 4.
  int64_t input_tokens = -1;
  int64_t output_tokens = -1;
  // When larger than content, the content is padded to this many bytes (a
  // huge reply).
  size_t pad_content_to_bytes = 0;
  // A fault instead of the normal reply.
  MockFault fault = MockFault::kNone;
  // For kHttpError.
  int http_status = 500;
  // Sent as the error's message for kHttpError (default: "mock: injected HTTP N").
  std::string error_message;
  // Adds "Retry-After: N" (seconds) to the reply when >= 0.
  double retry_after_seconds = -1.0;
  // Added to the server's latency before this reply.
  double delay_ms = 0.0;
  // How many requests this queue entry answers before it is used up.
  int repeat = 1;
};

// Scripted reply chosen by the request's text (system prompt and messages):
// `contains` is a plain substring, `regex` an ECMAScript regular expression;
// both must match when both are given.
struct MockRule {
  std::string contains;
  std::string regex;
  MockReply reply;
  // How many requests the rule answers; negative: unlimited.
  int times = -1;
};

// What the mock server saw of one request (never the key).
struct MockRequest {
  std::string provider;  // "openai" or "anthropic", from the path
  std::string target;    // "/v1/chat/completions", …
  ChatRequest request;   // as parsed from the body (model, messages, …)
  bool had_api_key = false;
};

// An HTTP(S) server on a loopback port speaking the OpenAI chat-completions
// (POST …/chat/completions) and Anthropic messages (POST …/v1/messages)
// formats. A request is answered by, in order: the next queued reply; the
// first matching rule; the default reply. With a fault rate, a random fraction
// of requests gets a transient fault (429 with Retry-After: 0, 500, 503, or a
// reset) instead. Counters let tests observe keep-alive and concurrency.
//
// Thread safety: every method may be called from any thread while the server
// runs. The destructor stops the server (Stop()).
class MockLlmServer {
 public:
  struct Options {
    // Address to listen on. Keep it on loopback: the mock has no
    // authentication worth the name.
    std::string address = "127.0.0.1";
    // 0: an ephemeral port (see port()).
    uint16_t port = 0;
    // I/O threads serving connections.
    int threads = 1;
    // Think time added to every reply, in milliseconds.
    double latency_ms = 0.0;
    // Fraction [0, 1] of requests answered with a random transient fault.
    double fault_rate = 0.0;
    // Seed of the fault choice (deterministic for a given request order).
    uint64_t seed = 1;
    // When non-empty, requests without this key get 401 (whose message
    // echoes the received key, as some providers do, so tests can check that
    // clients redact it).
    std::string required_api_key;
    // Serve HTTPS with this certificate and key (both PEM); empty: HTTP.
    TlsCredentials tls;
    // The reply when neither the queue nor a rule answers.
    MockReply default_reply;
    // How many received requests requests() keeps (the most recent).
    size_t max_recorded_requests = 1000;
    // Enforce the providers' documented constraints with their 400s, as the
    // real APIs do: OpenAI reasoning models (TraitsOfModel) reject
    // max_tokens, a temperature other than 1; reasoning_effort is rejected by
    // other models; Anthropic requires max_tokens, a thinking budget of at
    // least 1024 below max_tokens, and no temperature with thinking.
    bool strict = true;
    // When positive: a request whose prompt (bytes / 4) plus max_tokens
    // exceeds this many tokens gets the provider's context-length 400.
    int64_t context_window_tokens = 0;
  };

  struct Counters {
    int64_t requests = 0;               // requests read
    int64_t connections = 0;            // connections accepted
    int64_t faults = 0;                 // replies that were faults
    int concurrent_requests = 0;        // requests read and not yet answered
    int max_concurrent_requests = 0;    // high-water mark of the above
    // What a provider would bill: the usage of every reply the server wrote
    // (refusals, truncated and malformed bodies included), counted when the
    // reply is decided, before the latency is waited out, so that a reply
    // the client stopped waiting for is billed all the same. Errors, resets
    // and hangs bill nothing.
    int64_t billed_replies = 0;
    int64_t billed_input_tokens = 0;
    int64_t billed_output_tokens = 0;
  };

  // Binds, listens and starts the threads. Errors: kUnavailable (the address
  // or port cannot be bound), kInvalidArgument (bad address or TLS material).
  [[nodiscard]] static StatusOr<std::unique_ptr<MockLlmServer>> Start(Options options);
  ~MockLlmServer();
  MockLlmServer(const MockLlmServer&) = delete;
  MockLlmServer& operator=(const MockLlmServer&) = delete;

  uint16_t port() const;
  // "http://127.0.0.1:PORT" (https with TLS).
  std::string base_url() const;
  // base_url() + "/v1": the OPENAI_BASE_URL that reaches this server. (The
  // Anthropic base URL is base_url() itself.)
  std::string openai_base_url() const;

  // Appends a reply to the queue.
  void Enqueue(MockReply reply);
  // Appends a rule. Errors: kInvalidArgument (bad regex).
  [[nodiscard]] Status AddRule(MockRule rule);
  void SetDefaultReply(MockReply reply);
  // Empties the queue and the rules.
  void ClearScript();
  // Loads a script (format in docs/llm.md): {"default": REPLY, "queue":
  // [REPLY…], "rules": [{"contains"|"regex": …, "times": N, "reply": REPLY}]}.
  // Errors: kNotFound, kDataLoss (not JSON), kInvalidArgument (bad field).
  [[nodiscard]] Status LoadScript(const std::string& path);
  [[nodiscard]] Status LoadScriptJson(std::string_view json);

  Counters counters() const;
  // The most recent requests, oldest first.
  std::vector<MockRequest> requests() const;

  // Stops accepting, drops open connections and joins the threads. Idempotent.
  void Stop();

 private:
  explicit MockLlmServer(std::shared_ptr<internal::MockLlmServerImpl> impl);
  std::shared_ptr<internal::MockLlmServerImpl> impl_;
};

}  // namespace ksearch

#endif  // KSEARCH_MOCK_LLM_SERVER_H_
