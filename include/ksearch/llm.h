// The LLM layer's concrete pieces: the HTTP client for OpenAI-compatible and
// Anthropic servers, the price table, recording and offline replay, extraction
// of the kernel blocks from a reply, and a mock server that speaks both wire
// formats. The interface they implement is in ksearch/llm_client.h.
//
// A minimal use:
//
//   ksearch::HttpLlmClient::Options options;
//   options.provider = ksearch::LlmProvider::kOpenAi;   // key from $OPENAI_API_KEY
//   auto client = ksearch::HttpLlmClient::Create(options);
//   if (!client.ok()) return client.status();
//   ksearch::ChatRequest request;
//   request.model = "gpt-4o";
//   request.messages.push_back({ksearch::ChatMessage::Role::kUser, "Say hi"});
//   (*client)->Complete(request, [](ksearch::StatusOr<ksearch::ChatResponse> r) {
//     // runs on the client's I/O thread
//   });
//
// docs/llm.md explains the wire formats, the recording file and the mock
// server's script.
#ifndef KSEARCH_LLM_H_
#define KSEARCH_LLM_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ksearch/llm_client.h"
#include "ksearch/status.h"

namespace ksearch {

namespace internal {
class HttpLlmClientImpl;
class ReplayLlmClientImpl;
class MockLlmServerImpl;
}  // namespace internal

// What a model costs, in US dollars per million tokens.
struct ModelPrice {
  double input_usd_per_million_tokens = 0.0;   // prompt tokens
  double output_usd_per_million_tokens = 0.0;  // completion tokens
};

// Prices per model, usually loaded from a JSON file:
//
//   {"models": {
//      "gpt-4o":   {"input_usd_per_million_tokens": 2.5, "output_usd_per_million_tokens": 10},
//      "claude-*": {"input_usd_per_million_tokens": 3,   "output_usd_per_million_tokens": 15}}}
//
// A name ending in '*' matches every model that starts with what precedes it;
// an exact name wins over a pattern, a longer pattern over a shorter one.
// Thread safety: a const PriceTable may be read from many threads.
class PriceTable {
 public:
  // Errors: kNotFound (no such file), kInvalidArgument (not the format above:
  // the message names the file and the field), kDataLoss (not JSON).
  [[nodiscard]] static StatusOr<PriceTable> Load(const std::string& path);
  // Same, from text; `source_name` prefixes error messages.
  [[nodiscard]] static StatusOr<PriceTable> Parse(std::string_view json,
                                                  std::string_view source_name = "price table");

  // Adds or replaces the price of a model name or pattern.
  void Set(std::string model_or_pattern, ModelPrice price);
  // The price that applies to `model`, or nullptr.
  const ModelPrice* Find(std::string_view model) const;
  // Dollars for the given usage; 0 when the model has no price.
  double CostUsd(std::string_view model, int64_t input_tokens, int64_t output_tokens) const;
  bool empty() const { return prices_.empty(); }

 private:
  std::map<std::string, ModelPrice, std::less<>> prices_;
};

enum class LlmProvider {
  kOpenAi,     // POST {base}/chat/completions, "Authorization: Bearer KEY"
  kAnthropic,  // POST {base}/v1/messages, "x-api-key: KEY", "anthropic-version"
};

// "openai", "anthropic".
std::string_view ToString(LlmProvider provider);
// Accepts "openai" (also "openai-compatible", "vllm", "ollama", "llamacpp") and
// "anthropic". Errors: kInvalidArgument naming the accepted values.
[[nodiscard]] StatusOr<LlmProvider> ParseLlmProvider(std::string_view name);

// LlmClient over HTTP/1.1 (plain or TLS) with Boost.Beast, on one I/O thread
// that the client owns. Requests beyond `max_in_flight` (or beyond the rate
// limits) wait in a FIFO queue; connections are kept alive and reused; each
// request in flight uses one connection (no pipelining).
//
// Callbacks and the observer run on the client's I/O thread: hand long work to
// another thread, or every other request waits.
// Thread safety: distinct objects: safe. Shared objects: all public methods
// are safe to call concurrently. The destructor cancels what is pending,
// delivers every callback (kCancelled) and joins the I/O thread; if it runs on
// that thread (a callback destroying its client), it cancels the same way but
// lets the thread finish by itself.
class HttpLlmClient final : public LlmClient {
 public:
  struct Options {
    // Which wire format to speak.
    LlmProvider provider = LlmProvider::kOpenAi;
    // "http[s]://host[:port][/path]". Empty: $OPENAI_BASE_URL or
    // $ANTHROPIC_BASE_URL, else https://api.openai.com/v1 or
    // https://api.anthropic.com. The OpenAI path is {base}/chat/completions,
    // the Anthropic one {base}/v1/messages (as in the providers' own SDKs).
    std::string base_url;
    // The key itself. Empty: read from `api_key_file`, else from
    // $OPENAI_API_KEY or $ANTHROPIC_API_KEY. Required when the base URL is a
    // provider's hosted API; optional for local servers (vLLM, Ollama, …),
    // where no Authorization header is sent without one.
    std::string api_key;
    // A file holding the key (surrounding white space is ignored).
    std::string api_key_file;
    // Model used when ChatRequest::model is empty.
    std::string default_model;
    // The "anthropic-version" header.
    std::string anthropic_version = "2023-06-01";
    // Name of the OpenAI request field for ChatRequest::max_tokens. OpenAI's
    // reasoning models want "max_completion_tokens"; most servers accept
    // "max_tokens".
    std::string openai_max_tokens_field = "max_tokens";
    // When true a reply cut at max_tokens is delivered with finish reason
    // kLength; when false it is a kOutOfRange error (tokens are still counted
    // in the totals).
    bool accept_truncated_replies = false;
    // At most this many HTTP exchanges at once (each holds one connection).
    // A request waiting for a retry does not hold a slot.
    int max_in_flight = 64;

    struct Connection {
      // Idle keep-alive connections kept for reuse.
      int max_idle = 256;
      // An idle connection older than this is closed instead of reused.
      double idle_timeout_seconds = 30.0;
      // A reply body larger than this fails with kDataLoss.
      int64_t max_response_bytes = int64_t{64} << 20;
      // The User-Agent header. Empty: "ksearch/VERSION".
      std::string user_agent;
    };
    // Connection reuse and limits.
    Connection connection;

    struct Tls {
      // Verify the server's certificate chain and host name. Turning this off
      // makes HTTPS as trustworthy as plain HTTP.
      bool verify_peer = true;
      // Trust the operating system's certificate store.
      bool use_system_store = true;
      // A PEM file of additional trusted certificates (a private CA, or a
      // server's self-signed certificate).
      std::string ca_file;
      // The same as `ca_file`, as PEM text.
      std::string ca_pem;
    };
    // HTTPS settings (ignored for http:// URLs). SNI is always sent for host
    // names.
    Tls tls;

    struct Retry {
      // Attempts per request, the first included (1: never retry).
      int max_attempts = 5;
      // Of those, at most this many may end in a time-out (ChatRequest::
      // timeout_seconds): a server that hung once seldom answers the next
      // attempt, and waiting max_attempts × timeout helps nobody.
      int max_timeout_attempts = 2;
      // Delay before the second attempt.
      double initial_backoff_seconds = 0.5;
      // Each further delay is the previous one times this.
      double backoff_multiplier = 2.0;
      // Upper bound of a computed delay.
      double max_backoff_seconds = 30.0;
      // A delay is scaled by a uniform factor in [1 - jitter_fraction, 1], so
      // that requests that failed together do not return together.
      double jitter_fraction = 0.5;
      // A Retry-After (or retry-after-ms) longer than this ends the request
      // with kResourceExhausted at once rather than waiting. Shorter ones are
      // honored: the delay is max(backoff, Retry-After).
      double max_retry_after_seconds = 120.0;
      // Seed of the jitter; 0 seeds from the random device.
      uint64_t seed = 0;
    };
    // Retries on 429, 500–504, 529, connection failures and time-outs.
    Retry retry;

    struct RateLimit {
      // Attempts started per minute; 0: no limit.
      double requests_per_minute = 0.0;
      // Tokens per minute; 0: no limit. An attempt is charged its estimated
      // prompt tokens (bytes / 4) plus max_tokens when it starts, and the
      // difference to the reported usage is given back when it ends.
      double tokens_per_minute = 0.0;
      // How many seconds' worth of allowance may be spent at once: 60 allows a
      // whole minute's quota in one burst, 1 spreads requests evenly.
      double burst_seconds = 60.0;
    };
    // Client-side rate limits, for providers with known quotas.
    RateLimit rate_limit;

    // Prices for ChatResponse::cost_usd and the totals (looked up by the
    // requested model, then by the model the server reports).
    PriceTable prices;

    // Receives one line per notable event (a retry and why, a reconnection, a
    // final failure), on the I/O thread. Keys are redacted. Empty: silent.
    std::function<void(std::string_view line)> log;
  };

  // Counters for diagnostics and tests; a snapshot.
  struct Stats {
    int64_t connections_opened = 0;  // TCP (+TLS) connections established
    int64_t connections_reused = 0;  // attempts that used a kept-alive connection
    int64_t attempts = 0;            // HTTP attempts started (retries included)
    int64_t retries = 0;             // attempts that followed a retryable failure
    int in_flight = 0;               // attempts running now
    int queued = 0;                  // requests waiting for a slot or a retry
    int max_in_flight_seen = 0;      // high-water mark of in_flight
    int waiting_to_retry = 0;        // of `queued`: those waiting out a retry delay
    int64_t timeouts = 0;            // attempts that ended in a time-out
    double last_retry_delay_seconds = 0.0;  // the latest wait chosen (Retry-After included)
  };

  // Validates the options, reads the key, builds the TLS context and starts
  // the I/O thread. Errors: kInvalidArgument (bad URL or option),
  // kFailedPrecondition (a hosted API without a key), kNotFound (key or CA
  // file missing), kInternal (OpenSSL refused the TLS setup).
  [[nodiscard]] static StatusOr<std::unique_ptr<HttpLlmClient>> Create(Options options);

  ~HttpLlmClient() override;
  HttpLlmClient(const HttpLlmClient&) = delete;
  HttpLlmClient& operator=(const HttpLlmClient&) = delete;

  uint64_t Complete(ChatRequest request, Callback done) override;
  void Cancel(uint64_t request_id) override;
  LlmTotals totals() const override;
  void SetObserver(ExchangeObserver observer) override;
  std::string provider() const override;

  Stats stats() const;
  // The base URL in use (after environment and defaults).
  std::string base_url() const;

 private:
  explicit HttpLlmClient(std::shared_ptr<internal::HttpLlmClientImpl> impl);
  std::shared_ptr<internal::HttpLlmClientImpl> impl_;
};

// Runs `request` on `client` and waits for the result. Must not be called on
// one of the client's I/O threads (it would wait for itself forever).
[[nodiscard]] StatusOr<ChatResponse> CompleteAndWait(LlmClient& client, ChatRequest request);

// One exchange as one line of JSON (no newline): see docs/llm.md for the
// fields. Never contains a key: exchanges carry none.
std::string ExchangeToJsonLine(const LlmExchange& exchange);
// The inverse. `request_hash` is recomputed from the request, so a hand-edited
// recording stays consistent. Errors: kDataLoss (not JSON), kInvalidArgument
// (a field missing or of the wrong type, named in the message).
[[nodiscard]] StatusOr<LlmExchange> ExchangeFromJsonLine(std::string_view line);
// A whole JSONL recording; blank lines are skipped. Errors as above, prefixed
// with "PATH:LINE", or kNotFound.
[[nodiscard]] StatusOr<std::vector<LlmExchange>> LoadLlmRecording(const std::string& path);
// Writes (replaces) a JSONL recording. Errors: kPermissionDenied / kUnknown
// from the file system.
[[nodiscard]] Status SaveLlmRecording(const std::string& path,
                                      const std::vector<LlmExchange>& exchanges);

// Appends every exchange it sees to a JSONL file, one flushed line each.
// Use: client->SetObserver(recorder->observer()).
// Thread safety: Record() and observer() may be used from many threads. The
// recorder must outlive every client that has its observer.
class LlmRecorder {
 public:
  // Opens (creating or appending to) `path`. Errors: kPermissionDenied,
  // kNotFound (missing folder).
  [[nodiscard]] static StatusOr<std::unique_ptr<LlmRecorder>> Open(const std::string& path);
  ~LlmRecorder();
  LlmRecorder(const LlmRecorder&) = delete;
  LlmRecorder& operator=(const LlmRecorder&) = delete;

  void Record(const LlmExchange& exchange);
  // An observer that calls Record(); borrows this recorder.
  LlmClient::ExchangeObserver observer();
  // Exchanges written so far.
  int64_t recorded() const;
  // OK, or the first write error (later exchanges are dropped after one).
  Status status() const;

 private:
  struct State;
  explicit LlmRecorder(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Serves recorded replies, offline and deterministically. A request is
// answered by an unserved exchange with the same RequestHash — preferring one
// recorded with the same tag — in the order the exchanges were issued
// (LlmExchange::request_id). Recorded errors are replayed as errors. A request
// with no recorded reply left gets kNotFound naming its hash (or, with
// `cycle_when_exhausted`, the recorded replies again from the first).
//
// Callbacks run on one thread owned by the client, in Complete() order.
// Thread safety: as LlmClient. The destructor delivers what is pending and
// joins its thread (from one of its own callbacks it lets the thread finish
// by itself).
class ReplayLlmClient final : public LlmClient {
 public:
  struct Options {
    // When every reply for a hash has been served, start again from the first
    // instead of failing with kNotFound.
    bool cycle_when_exhausted = false;
    // Prefer an exchange recorded with the same ChatRequest::tag.
    bool prefer_same_tag = true;
    // When no unserved exchange has the request's hash, serve the first
    // unserved one recorded with the same tag and model. Prompts that quote
    // measured figures (a parent's time, the history's speedups) differ from
    // run to run on a GPU; the tags ("idea r2 s1", "branch r1.s0.i2 b3") name
    // the request's place in the search tree, which a replay repeats.
    bool match_tag_when_hash_differs = false;
  };

  // Serves `exchanges`. Errors: kInternal (no thread could be started).
  [[nodiscard]] static StatusOr<std::unique_ptr<ReplayLlmClient>> Create(
      std::vector<LlmExchange> exchanges);
  [[nodiscard]] static StatusOr<std::unique_ptr<ReplayLlmClient>> Create(
      std::vector<LlmExchange> exchanges, Options options);
  // Loads a recording and serves it (LoadLlmRecording's errors).
  [[nodiscard]] static StatusOr<std::unique_ptr<ReplayLlmClient>> Open(const std::string& path);
  [[nodiscard]] static StatusOr<std::unique_ptr<ReplayLlmClient>> Open(const std::string& path,
                                                                       Options options);
  ~ReplayLlmClient() override;
  ReplayLlmClient(const ReplayLlmClient&) = delete;
  ReplayLlmClient& operator=(const ReplayLlmClient&) = delete;

  uint64_t Complete(ChatRequest request, Callback done) override;
  void Cancel(uint64_t request_id) override;
  LlmTotals totals() const override;
  void SetObserver(ExchangeObserver observer) override;
  std::string provider() const override;  // "replay"

  // Requests that found no recorded reply.
  int64_t misses() const;
  // Requests answered by tag because no recorded exchange had their hash.
  int64_t tag_matches() const;

 private:
  explicit ReplayLlmClient(std::shared_ptr<internal::ReplayLlmClientImpl> impl);
  std::shared_ptr<internal::ReplayLlmClientImpl> impl_;
};

// One fenced code block (``` or ~~~, CommonMark rules: the closing fence is at
// least as long as the opening one).
struct FencedBlock {
  std::string language;  // the info string's first word, lower-case ("cuda", "json", "")
  std::string text;      // the lines between the fences, each ending in '\n'
  int first_line = 0;    // 1-based line of the opening fence
  bool closed = true;    // false when the reply ended inside the block
};

// Every fenced block of `markdown`, in order.
std::vector<FencedBlock> ExtractFencedBlocks(std::string_view markdown);

// What a language model returns for a candidate: a ```cuda block (also
// accepted: ```cu, ```cuh, ```cpp, ```c++, ```cc, ```c, ```h, ```hpp, and an
// untagged block that defines a __global__ function) and a ```json launch
// plan (also ```jsonc, or an untagged block with "launches").
struct KernelBlocks {
  std::string cuda_source;
  std::string launch_plan_json;
  // What was salvaged, one line each ("added extern \"C\" to kernel k()",
  // "dropped host function main()", "joined 2 source blocks, at lines 3 and 20").
  std::vector<std::string> repairs;
};

// Takes the source and the plan from `reply` as models really write them.
// Several source blocks: those defining kernels are kept; kernels split
// across blocks are joined; a kernel defined twice takes the last block.
// Several plan blocks: the last one with "launches". The source goes through
// SanitizeKernelSource, the plan through StripJsonComments. Errors:
// kNotFound ("no ```cuda block", mentioning an untagged block if there is
// one), kInvalidArgument ("2 ```cuda blocks, at lines 3 and 40; expected
// exactly one", when no block defines a kernel), kOutOfRange (a block opened
// but never closed: the reply was cut). Each message says which block.
[[nodiscard]] StatusOr<KernelBlocks> ExtractKernelBlocks(std::string_view reply);

// Makes a model's source one NVRTC translation unit: drops host-only
// includes (torch/, ATen/, pybind11, <iostream>, <vector>…), top-level
// functions that are neither __global__ nor __device__ (main(), launchers
// with <<<>>>, PyTorch bindings) and declarations naming host types; adds
// extern "C" to non-template kernels without it (the evaluator looks kernels
// up by their unmangled names). Appends one line per change to `changes`.
std::string SanitizeKernelSource(std::string_view source, std::vector<std::string>* changes);

// JSON as models write it, made strict: // and /* */ comments outside strings
// and trailing commas before a closing bracket are removed.
std::string StripJsonComments(std::string_view json);

struct TlsCredentials {
  std::string certificate_pem;
  std::string private_key_pem;
};

// A fresh self-signed certificate (EC P-256 key) valid for `hosts` (DNS names
// or IP addresses, as subjectAltName entries; the first is also the CN), from
// an hour ago for `valid_days`. For tests and local mock servers only.
// Errors: kInvalidArgument (no hosts), kInternal (OpenSSL failed).
[[nodiscard]] StatusOr<TlsCredentials> GenerateSelfSignedCertificate(
    const std::vector<std::string>& hosts, int valid_days = 2);

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

#endif  // KSEARCH_LLM_H_
