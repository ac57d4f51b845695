// LlmClient: asynchronous chat completions behind one interface, whatever the
// provider (OpenAI-compatible servers — hosted, vLLM, llama.cpp, Ollama — and
// Anthropic messages). The concrete clients are in ksearch/http_llm_client.h
// and ksearch/replay_llm_client.h; the recording format in llm_recording.h,
// the price table in price_table.h, the mock server in mock_llm_server.h,
// kernel extraction from a reply in kernel_blocks.h.
//
// Contract for implementations:
// - Complete() returns at once; `done` runs exactly once, on one of the
//   client's I/O threads, never inline inside Complete().
// - Transient failures (429, 500–504, resets, time-outs) are retried inside the
//   client with backoff and jitter, honoring Retry-After; `done` sees the final
//   result only. A final error is a Status whose message names the provider,
//   the HTTP status and the server's message ("openai: HTTP 429 (Too Many
//   Requests) after 5 attempts: Rate limit reached …"). Codes:
//     kResourceExhausted   429 after the retry budget (or a Retry-After longer
//                          than the client is willing to wait)
//     kUnavailable         500–504 / 529, connection refused or reset, a reply
//                          cut mid-body, name resolution failure
//     kDeadlineExceeded    no reply within ChatRequest::timeout_seconds
//     kUnauthenticated     401      kPermissionDenied  403
//     kNotFound            404 (unknown model or wrong base URL)
//     kInvalidArgument     other 4xx (the request itself is wrong; not retried)
//     kDataLoss            the reply is not valid JSON (after the retries: a
//                          malformed 2xx body is retried like a 5xx), exceeds
//                          the client's body limit, has empty content, or is a
//                          refusal (OpenAI "refusal", Anthropic stop reason
//                          "refusal")
//     kUnimplemented       the reply is valid JSON but lacks a field the
//                          provider's format requires (wrong provider or URL?)
//     kOutOfRange          the reply was cut at max_tokens (finish reason
//                          "length" / "max_tokens"), unless the client accepts
//                          truncated replies; or a 400 saying the prompt
//                          exceeds the model's context window (the message
//                          then contains "context length exceeded":
//                          IsContextLengthError())
//     kFailedPrecondition  TLS certificate verification failed, or the
//                          account's quota or credit is exhausted (OpenAI 429
//                          "insufficient_quota", Anthropic "credit balance");
//                          not retried
//     kCancelled           Cancel() or the client's destruction
// - API keys are never logged, recorded or included in a Status.
//
// Thread safety: Complete(), Cancel(), totals() and SetObserver() may be called
// from any thread concurrently. The client must outlive every pending
// callback; its destructor cancels pending requests and waits for their
// callbacks (so it must not run on one of the client's own I/O threads unless
// the implementation says otherwise).
#ifndef KSEARCH_LLM_CLIENT_H_
#define KSEARCH_LLM_CLIENT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/status.h"

namespace ksearch {

struct ChatMessage {
  enum class Role { kUser, kAssistant };
  Role role = Role::kUser;
  std::string content;
};

// "user", "assistant".
std::string_view ToString(ChatMessage::Role role);

struct ChatRequest {
  std::string model;                 // provider's model name; empty: the client's default
  std::string system;                // system prompt (may be empty)
  std::vector<ChatMessage> messages;
  // Sampling temperature; unset: not sent (the provider's default). Models
  // that accept none (OpenAI reasoning models, Anthropic with thinking) never
  // get one: see ModelTraits.
  std::optional<double> temperature;
  // Output tokens at most, reasoning or thinking included. Sent as
  // max_tokens, or max_completion_tokens for OpenAI reasoning models.
  int max_tokens = 8192;
  // OpenAI reasoning models: "minimal", "low", "medium" or "high", sent as
  // reasoning_effort. Empty: not sent. Ignored by the Anthropic format.
  std::string reasoning_effort;
  // Anthropic extended thinking: the thinking block's budget_tokens (at least
  // 1024, less than max_tokens). 0: no thinking. Ignored by the OpenAI format.
  int thinking_budget_tokens = 0;
  std::vector<std::string> stop;
  double timeout_seconds = 240.0;    // per attempt, until the whole reply is read
  std::string tag;                   // free text carried into recordings ("idea r2 s1")
};

// What a provider's model family accepts, from a built-in table keyed by
// model-name prefix (docs/llm.md lists it): OpenAI's reasoning models (o1,
// o3, o4, gpt-5…) reject max_tokens and any temperature but 1 and want
// max_completion_tokens; Anthropic requires max_tokens and rejects a
// temperature with extended thinking. The wire formats consult it, so a
// request written for any model is sent in the form its model accepts.
struct ModelTraits {
  bool reasoning = false;              // an OpenAI reasoning model
  bool accepts_temperature = true;     // a temperature may be sent
  bool accepts_reasoning_effort = false;
  // The OpenAI name of the output limit: "max_tokens" or
  // "max_completion_tokens".
  std::string_view max_tokens_field = "max_tokens";
};
// `provider` is "openai" or "anthropic"; the model name is matched without a
// vendor prefix ("openai/o3-mini" is o3). Unknown models get the defaults.
ModelTraits TraitsOfModel(std::string_view provider, std::string_view model);

// kStop: the model ended its turn. kLength: the reply hit max_tokens (only seen
// when the client accepts truncated replies; otherwise that is kOutOfRange).
// kStopSequence: one of ChatRequest::stop ended the reply (Anthropic reports
// this; OpenAI-compatible servers report kStop). kOther: anything else the
// server said (content filter, tool call, …).
enum class FinishReason { kStop, kLength, kStopSequence, kOther };

// "stop", "length", "stop_sequence", "other".
std::string_view ToString(FinishReason reason);

struct ChatResponse {
  std::string content;
  FinishReason finish_reason = FinishReason::kStop;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double latency_ms = 0.0;           // of the attempt that succeeded
  int attempts = 1;
  double cost_usd = 0.0;             // from the price table; 0 when unknown
  std::string model;                 // as reported by the server
};

struct LlmExchange;

// Running totals over a client's lifetime, for budgets. `requests` counts
// finished Complete() calls (success or not), `failures` those that ended in an
// error (cancellations included). Tokens and cost include replies that were
// billed but rejected (truncated or empty content).
struct LlmTotals {
  int64_t requests = 0;
  int64_t failures = 0;
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  double cost_usd = 0.0;

  // Adds `other` field by field (the totals of several clients or sessions).
  LlmTotals& operator+=(const LlmTotals& other);
  // One finished exchange as totals: a request; a failure when it ended in
  // an error, else its reply's tokens and cost.
  static LlmTotals Of(const LlmExchange& exchange);
};

// One finished exchange, for recording and replay. `request_hash` is a stable
// hash of the request's model, system, messages, temperature, max_tokens and
// stop sequences (RequestHash below); it is the replay key.
struct LlmExchange {
  std::string provider;
  std::string request_hash;
  ChatRequest request;
  StatusOr<ChatResponse> response = Status(StatusCode::kUnknown, "not set");
  int64_t started_unix_ms = 0;
  // The id Complete() returned. Ids grow in the order Complete() was called, so
  // replay can serve identical requests (branches of one idea) in the order
  // they were issued rather than the order they finished.
  uint64_t request_id = 0;
};

// Lower-case hex SHA-256 (64 characters) of a canonical encoding of the
// request's model, system, messages (role and content), temperature (unset
// counts as 1, the providers' default), max_tokens, stop sequences and, when
// set, reasoning_effort and thinking_budget_tokens. Timeout and tag are not part of it. The same
// request gives the same hash on every platform and in every version of
// ksearch that writes recordings of version 1.
std::string RequestHash(const ChatRequest& request);

// What a failed request means to a caller that issues many (a search).
// kReply: this reply is lost, later requests may well succeed — a truncated,
// empty, refused or malformed reply (kOutOfRange, kDataLoss), one of an
// unexpected shape (kUnimplemented), a context-length 400, a rate limit or an
// outage that outlasted the retries (kResourceExhausted, kUnavailable,
// kDeadlineExceeded). kRun: every later request would fail the same way —
// kUnauthenticated, kPermissionDenied, kNotFound (unknown model, wrong URL),
// kFailedPrecondition (TLS, exhausted quota), kInvalidArgument (a request the
// server rejects for its form), kCancelled, and anything else. A caller
// should also treat kUnavailable / kDeadlineExceeded as kRun while no request
// has succeeded yet: then the provider was never reachable.
enum class LlmFailureScope { kReply, kRun };
LlmFailureScope FailureScope(const Status& status);
// A kOutOfRange error for a prompt longer than the model's context window
// (as opposed to a reply cut at max_tokens).
bool IsContextLengthError(const Status& status);

class LlmClient {
 public:
  using Callback = std::function<void(StatusOr<ChatResponse>)>;
  // Called once per finished exchange, on an I/O thread, before the request's
  // own callback. Keep it short: it runs on the client's I/O thread.
  using ExchangeObserver = std::function<void(const LlmExchange&)>;

  virtual ~LlmClient() = default;

  // Starts a request; returns a request id usable with Cancel(). Never fails
  // synchronously: every problem (a bad request included) reaches `done`.
  virtual uint64_t Complete(ChatRequest request, Callback done) = 0;
  // Cancels a pending request: its callback receives kCancelled (unless it has
  // already completed). Unknown or finished ids are ignored.
  virtual void Cancel(uint64_t request_id) = 0;
  virtual LlmTotals totals() const = 0;
  // Replaces the exchange observer (nullptr: none).
  virtual void SetObserver(ExchangeObserver observer) = 0;
  // "openai", "anthropic", "replay", …
  virtual std::string provider() const = 0;
  // What `input_tokens` in and `output_tokens` out of `model` (empty: the
  // client's default model) would cost by the client's prices, for a budget
  // that is checked before a request is sent; nullopt when the client knows
  // no price for the model (the default).
  virtual std::optional<double> EstimateCostUsd(std::string_view /*model*/,
                                                int64_t /*input_tokens*/,
                                                int64_t /*output_tokens*/) const {
    return std::nullopt;
  }
};

// Runs `request` on `client` and waits for the result. Must not be called on
// one of the client's I/O threads (it would wait for itself forever).
[[nodiscard]] StatusOr<ChatResponse> CompleteAndWait(LlmClient& client, ChatRequest request);

}  // namespace ksearch

#endif  // KSEARCH_LLM_CLIENT_H_
