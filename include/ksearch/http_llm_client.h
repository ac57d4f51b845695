// HttpLlmClient: the LlmClient for OpenAI-compatible and Anthropic servers,
// over HTTP or TLS. The interface it implements is in ksearch/llm_client.h;
// docs/llm.md explains the wire formats.
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
// Thread safety: see HttpLlmClient.
#ifndef KSEARCH_HTTP_LLM_CLIENT_H_
#define KSEARCH_HTTP_LLM_CLIENT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ksearch/llm_client.h"
#include "ksearch/price_table.h"
#include "ksearch/status.h"

namespace ksearch {

namespace internal {
class HttpLlmClientImpl;
}  // namespace internal

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
  // By Options::prices.
  std::optional<double> EstimateCostUsd(std::string_view model, int64_t input_tokens,
                                        int64_t output_tokens) const override;

  Stats stats() const;
  // The base URL in use (after environment and defaults).
  std::string base_url() const;

 private:
  explicit HttpLlmClient(std::shared_ptr<internal::HttpLlmClientImpl> impl);
  std::shared_ptr<internal::HttpLlmClientImpl> impl_;
};

}  // namespace ksearch

#endif  // KSEARCH_HTTP_LLM_CLIENT_H_
