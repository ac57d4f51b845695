// Pieces of the HTTP client that need no sockets, kept apart so that tests can
// reach them without Asio: URLs, retry policy, Retry-After, rate limiting, key
// handling and redaction.
#ifndef KSEARCH_LIB_LLM_HTTP_UTIL_H_
#define KSEARCH_LIB_LLM_HTTP_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ksearch/http_llm_client.h"
#include "ksearch/status.h"

namespace ksearch::llm {

struct Url {
  bool tls = false;        // https
  std::string host;        // without brackets for IPv6
  uint16_t port = 0;       // explicit or the scheme's default
  std::string path;        // without a trailing '/', may be empty
  bool default_port = true;

  // "host" or "host:port", brackets around IPv6, for the Host header.
  std::string HostHeader() const;
  // "scheme://host:port/path".
  std::string ToString() const;
};

// Accepts http:// and https:// URLs without user info, query or fragment.
// Errors: kInvalidArgument naming what is wrong.
StatusOr<Url> ParseUrl(std::string_view text);

// True when `host` is an IPv4 or IPv6 literal (no SNI is sent for those, and
// the certificate is checked for an IP address).
bool IsIpLiteral(std::string_view host);

// 429, 500–504 and 529 (Anthropic's "overloaded").
bool IsRetryableHttpStatus(int http_status);
// The final code for a non-2xx reply (see llm_client.h).
StatusCode StatusCodeForHttp(int http_status);

// Seconds to wait from a Retry-After value (delta-seconds, possibly with a
// fraction, or an HTTP-date relative to `now`), or nullopt when unparsable.
// Negative results are clamped to 0.
std::optional<double> ParseRetryAfterSeconds(std::string_view value,
                                             std::chrono::system_clock::time_point now);

// The delay before attempt `failed_attempts + 1`, given a uniform sample in
// [0, 1) for the jitter.
double BackoffSeconds(const HttpLlmClient::Options::Retry& retry, int failed_attempts,
                      double uniform01);

// Token buckets for requests and tokens per minute. Not thread-safe: the
// client uses it from its I/O thread only.
class RateLimiter {
 public:
  using Clock = std::chrono::steady_clock;
  explicit RateLimiter(const HttpLlmClient::Options::RateLimit& options);

  bool enabled() const { return requests_.enabled() || tokens_.enabled(); }
  // Charges one request and `tokens` and returns 0 when both buckets have
  // allowance left; otherwise charges nothing and returns the seconds until
  // they will (at least 1 ms).
  double TryAcquire(double tokens, Clock::time_point now);
  // Gives back `tokens` (negative: charges more) after the real usage is known.
  void AdjustTokens(double tokens, Clock::time_point now);

 private:
  // A bucket with `capacity` that refills at `rate` per second, allowed to go
  // into debt: a request is admitted while the level is positive, so a single
  // request larger than the whole capacity still passes once the bucket is full.
  class Bucket {
   public:
    Bucket(double per_minute, double burst_seconds);
    bool enabled() const { return rate_ > 0; }
    void Refill(Clock::time_point now);
    double level() const { return level_; }
    // Seconds until the level exceeds `target`, plus a millisecond.
    double SecondsUntilAbove(double target) const;
    void Add(double amount) { level_ = std::min(capacity_, level_ + amount); }

   private:
    double rate_ = 0;
    double capacity_ = 0;
    double level_ = 0;
    std::optional<Clock::time_point> last_;
  };
  Bucket requests_;
  Bucket tokens_;
};

// Replaces every occurrence of a secret (and anything shaped like a provider
// key: "sk-…" of 12+ key characters) with "[REDACTED]".
class Redactor {
 public:
  explicit Redactor(std::string secret) : secret_(std::move(secret)) {}
  std::string operator()(std::string_view text) const;

 private:
  std::string secret_;
};

// The key per the options: api_key, else the file, else the environment
// variable. Returns an empty string when none is configured. Errors:
// kNotFound / kPermissionDenied (key file), kInvalidArgument (empty file or a
// key with characters that cannot go in a header).
StatusOr<std::string> ResolveApiKey(const HttpLlmClient::Options& options);

// The base URL per the options, the environment and the provider's default.
std::string ResolveBaseUrl(const HttpLlmClient::Options& options);
// True for the providers' own hosted endpoints, where a key is mandatory.
bool IsHostedApi(const Url& url);

}  // namespace ksearch::llm

#endif  // KSEARCH_LIB_LLM_HTTP_UTIL_H_
