#include "llm/http_util.h"

#include <arpa/inet.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>

#include "core/url.h"

namespace ksearch::llm {
namespace {

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view Trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) {
    text.remove_prefix(1);
  }
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) {
    text.remove_suffix(1);
  }
  return text;
}

bool IsKeyChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

const char* KeyEnvironmentVariable(LlmProvider provider) {
  return provider == LlmProvider::kAnthropic ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY";
}

}  // namespace

std::string Url::HostHeader() const {
  std::string host_text = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (default_port) return host_text;
  return host_text + ":" + std::to_string(port);
}

std::string Url::ToString() const {
  std::string host_text = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::string(tls ? "https://" : "http://") + host_text + ":" + std::to_string(port) +
         path;
}

StatusOr<Url> ParseUrl(std::string_view text) {
  const std::string original(text);
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("base URL \"" + original + "\": " + std::string(why));
  };
  StatusOr<internal::UrlParts> parts = internal::SplitUrl(text);
  if (!parts.ok() && text.find("://") != std::string_view::npos) {
    return bad(parts.status().message());
  }
  if (!parts.ok() || !parts->has_authority ||
      (parts->scheme != "http" && parts->scheme != "https")) {
    return bad("expected http:// or https://");
  }
  if (parts->has_query || parts->has_fragment) return bad("a query or fragment is not allowed");
  if (parts->has_userinfo) {
    return bad("user information is not allowed (pass the key in the options)");
  }
  if (parts->host.empty()) return bad("no host");
  Url url;
  url.tls = parts->scheme == "https";
  url.host = parts->host;
  url.port = url.tls ? 443 : 80;
  if (!parts->port.empty()) {
    std::optional<uint16_t> port = internal::PortNumber(parts->port);
    if (!port) return bad("port " + parts->port + " out of range (1..65535)");
    url.default_port = *port == url.port;
    url.port = *port;
  }
  std::string_view path = parts->path;
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  url.path = std::string(path);
  return url;
}

bool IsIpLiteral(std::string_view host) {
  std::string text(host);
  unsigned char buffer[16];
  return inet_pton(AF_INET, text.c_str(), buffer) == 1 ||
         inet_pton(AF_INET6, text.c_str(), buffer) == 1;
}

bool IsRetryableHttpStatus(int http_status) {
  return http_status == 429 || (http_status >= 500 && http_status <= 504) || http_status == 529;
}

StatusCode StatusCodeForHttp(int http_status) {
  if (http_status == 429) return StatusCode::kResourceExhausted;
  if (http_status == 401) return StatusCode::kUnauthenticated;
  if (http_status == 403) return StatusCode::kPermissionDenied;
  if (http_status == 404) return StatusCode::kNotFound;
  if (http_status == 408) return StatusCode::kDeadlineExceeded;
  if (http_status >= 400 && http_status < 500) return StatusCode::kInvalidArgument;
  if (http_status >= 500) return StatusCode::kUnavailable;
  return StatusCode::kUnknown;
}

std::optional<double> ParseRetryAfterSeconds(std::string_view value,
                                             std::chrono::system_clock::time_point now) {
  value = Trim(value);
  if (value.empty()) return std::nullopt;
  if (std::isdigit(static_cast<unsigned char>(value.front())) || value.front() == '.') {
    std::string text(value);
    char* end = nullptr;
    double seconds = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !std::isfinite(seconds)) return std::nullopt;
    return std::max(0.0, seconds);
  }
  // An HTTP-date: "Sun, 06 Nov 1994 08:49:37 GMT" (RFC 9110 preferred form).
  std::tm tm{};
  std::string text(value);
  const char* end = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S", &tm);
  if (end == nullptr) return std::nullopt;
  std::time_t when = timegm(&tm);
  double seconds = std::difftime(when, std::chrono::system_clock::to_time_t(now));
  return std::max(0.0, seconds);
}

double BackoffSeconds(const HttpLlmClient::Options::Retry& retry, int failed_attempts,
                      double uniform01) {
  double delay = retry.initial_backoff_seconds *
                 std::pow(retry.backoff_multiplier, std::max(0, failed_attempts - 1));
  delay = std::min(delay, retry.max_backoff_seconds);
  double jitter = std::clamp(retry.jitter_fraction, 0.0, 1.0);
  return std::max(0.0, delay * (1.0 - jitter * uniform01));
}

RateLimiter::Bucket::Bucket(double per_minute, double burst_seconds) {
  if (per_minute <= 0) return;
  rate_ = per_minute / 60.0;
  capacity_ = std::max(1.0, rate_ * std::max(0.0, burst_seconds));
  level_ = capacity_;
}

void RateLimiter::Bucket::Refill(Clock::time_point now) {
  if (!enabled()) return;
  if (last_) {
    double elapsed = std::chrono::duration<double>(now - *last_).count();
    if (elapsed > 0) level_ = std::min(capacity_, level_ + elapsed * rate_);
  }
  last_ = now;
}

double RateLimiter::Bucket::SecondsUntilAbove(double target) const {
  return level_ > target ? 0.0 : (target - level_) / rate_ + 1e-3;
}

RateLimiter::RateLimiter(const HttpLlmClient::Options::RateLimit& options)
    : requests_(options.requests_per_minute, options.burst_seconds),
      tokens_(options.tokens_per_minute, options.burst_seconds) {}

double RateLimiter::TryAcquire(double tokens, Clock::time_point now) {
  requests_.Refill(now);
  tokens_.Refill(now);
  double wait = 0;
  // A request needs a whole unit of its bucket; tokens only a positive level
  // (see Bucket).
  if (requests_.enabled() && requests_.level() < 1.0 - 1e-9) {
    wait = std::max(wait, requests_.SecondsUntilAbove(1.0 - 1e-9));
  }
  if (tokens_.enabled() && tokens_.level() <= 0) {
    wait = std::max(wait, tokens_.SecondsUntilAbove(0.0));
  }
  if (wait > 0) return std::max(wait, 1e-3);
  if (requests_.enabled()) requests_.Add(-1.0);
  if (tokens_.enabled()) tokens_.Add(-tokens);
  return 0.0;
}

void RateLimiter::AdjustTokens(double tokens, Clock::time_point now) {
  if (!tokens_.enabled()) return;
  tokens_.Refill(now);
  tokens_.Add(tokens);
}

std::string Redactor::operator()(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    if (secret_.size() >= 4 && text.compare(i, secret_.size(), secret_) == 0) {
      out += "[REDACTED]";
      i += secret_.size();
      continue;
    }
    bool at_word_start = i == 0 || !IsKeyChar(text[i - 1]);
    if (at_word_start && text.compare(i, 3, "sk-") == 0) {
      size_t end = i + 3;
      while (end < text.size() && (IsKeyChar(text[end]) || text[end] == '*')) ++end;
      if (end - i >= 15) {
        out += "[REDACTED]";
        i = end;
        continue;
      }
    }
    out.push_back(text[i++]);
  }
  return out;
}

StatusOr<std::string> ResolveApiKey(const HttpLlmClient::Options& options) {
  std::string key;
  std::string source;
  if (!options.api_key.empty()) {
    key = options.api_key;
    source = "Options::api_key";
  } else if (!options.api_key_file.empty()) {
    std::ifstream in(options.api_key_file, std::ios::binary);
    if (!in) {
      return NotFoundError("API key file \"" + options.api_key_file + "\": cannot be opened");
    }
    std::stringstream contents;
    contents << in.rdbuf();
    key = std::string(Trim(contents.str()));
    source = "key file \"" + options.api_key_file + "\"";
    if (key.empty()) return InvalidArgumentError(source + " is empty");
  } else if (const char* env = std::getenv(KeyEnvironmentVariable(options.provider))) {
    key = std::string(Trim(env));
    source = std::string("$") + KeyEnvironmentVariable(options.provider);
  }
  for (char c : key) {
    if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f) {
      // The key itself must not reach the message.
      return InvalidArgumentError("API key from " + source +
                                  " contains white space or control characters");
    }
  }
  return key;
}

std::string ResolveBaseUrl(const HttpLlmClient::Options& options) {
  if (!options.base_url.empty()) return options.base_url;
  const bool anthropic = options.provider == LlmProvider::kAnthropic;
  if (const char* env = std::getenv(anthropic ? "ANTHROPIC_BASE_URL" : "OPENAI_BASE_URL")) {
    std::string_view value = Trim(env);
    if (!value.empty()) return std::string(value);
  }
  return anthropic ? "https://api.anthropic.com" : "https://api.openai.com/v1";
}

bool IsHostedApi(const Url& url) {
  std::string host = Lower(url.host);
  return host == "api.openai.com" || host == "api.anthropic.com";
}

}  // namespace ksearch::llm
