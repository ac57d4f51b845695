#include "llm/http_util.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

namespace ksearch::llm {
namespace {

TEST(ParseUrl, SplitsSchemeHostPortAndPath) {
  StatusOr<Url> url = ParseUrl("https://api.openai.com/v1/");
  ASSERT_TRUE(url.ok());
  EXPECT_TRUE(url->tls);
  EXPECT_EQ(url->host, "api.openai.com");
  EXPECT_EQ(url->port, 443);
  EXPECT_EQ(url->path, "/v1");
  EXPECT_EQ(url->HostHeader(), "api.openai.com");

  url = ParseUrl("http://127.0.0.1:8080");
  ASSERT_TRUE(url.ok());
  EXPECT_FALSE(url->tls);
  EXPECT_EQ(url->port, 8080);
  EXPECT_EQ(url->path, "");
  EXPECT_EQ(url->HostHeader(), "127.0.0.1:8080");

  url = ParseUrl("HTTP://[::1]:11434/v1");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->host, "::1");
  EXPECT_EQ(url->HostHeader(), "[::1]:11434");
}

TEST(ParseUrl, RejectsWhatItCannotServe) {
  for (const char* bad : {"ftp://x", "api.openai.com", "http://", "http://h:0", "http://h:99999",
                          "http://user:pw@h/", "http://h/?q=1", "http://[::1/", "http://h/#f",
                          "http://h:8x/", "https:api.openai.com/v1", "http://h o/"}) {
    EXPECT_EQ(ParseUrl(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

TEST(IpLiteral, TellsAddressesFromNames) {
  EXPECT_TRUE(IsIpLiteral("127.0.0.1"));
  EXPECT_TRUE(IsIpLiteral("::1"));
  EXPECT_FALSE(IsIpLiteral("localhost"));
  EXPECT_FALSE(IsIpLiteral("api.anthropic.com"));
}

TEST(HttpStatus, RetriesOnlyTransientOnes) {
  for (int status : {429, 500, 501, 502, 503, 504, 529}) {
    EXPECT_TRUE(IsRetryableHttpStatus(status)) << status;
  }
  for (int status : {400, 401, 403, 404, 409, 422, 505}) {
    EXPECT_FALSE(IsRetryableHttpStatus(status)) << status;
  }
  EXPECT_EQ(StatusCodeForHttp(429), StatusCode::kResourceExhausted);
  EXPECT_EQ(StatusCodeForHttp(503), StatusCode::kUnavailable);
  EXPECT_EQ(StatusCodeForHttp(401), StatusCode::kUnauthenticated);
  EXPECT_EQ(StatusCodeForHttp(403), StatusCode::kPermissionDenied);
  EXPECT_EQ(StatusCodeForHttp(404), StatusCode::kNotFound);
  EXPECT_EQ(StatusCodeForHttp(422), StatusCode::kInvalidArgument);
}

TEST(RetryAfter, ReadsSecondsFractionsAndHttpDates) {
  auto now = std::chrono::system_clock::from_time_t(784111777);  // Sun, 06 Nov 1994 08:49:37
  EXPECT_EQ(ParseRetryAfterSeconds("2", now), 2.0);
  EXPECT_EQ(ParseRetryAfterSeconds(" 0.25 ", now), 0.25);
  EXPECT_EQ(ParseRetryAfterSeconds("Sun, 06 Nov 1994 08:49:47 GMT", now), 10.0);
  EXPECT_EQ(ParseRetryAfterSeconds("Sun, 06 Nov 1994 08:49:00 GMT", now), 0.0);
  EXPECT_FALSE(ParseRetryAfterSeconds("soon", now).has_value());
  EXPECT_FALSE(ParseRetryAfterSeconds("", now).has_value());
  EXPECT_FALSE(ParseRetryAfterSeconds("3x", now).has_value());
}

TEST(Backoff, GrowsExponentiallyUpToTheCapWithBoundedJitter) {
  HttpLlmClient::Options::Retry retry;
  retry.initial_backoff_seconds = 0.5;
  retry.backoff_multiplier = 2;
  retry.max_backoff_seconds = 3;
  retry.jitter_fraction = 0.5;
  EXPECT_DOUBLE_EQ(BackoffSeconds(retry, 1, 0.0), 0.5);
  EXPECT_DOUBLE_EQ(BackoffSeconds(retry, 2, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(BackoffSeconds(retry, 3, 0.0), 2.0);
  EXPECT_DOUBLE_EQ(BackoffSeconds(retry, 4, 0.0), 3.0);
  EXPECT_DOUBLE_EQ(BackoffSeconds(retry, 10, 0.0), 3.0);
  EXPECT_DOUBLE_EQ(BackoffSeconds(retry, 2, 0.999999), 1.0 * (1 - 0.5 * 0.999999));
}

TEST(RateLimiter, SpacesRequestsOnceTheBurstIsSpent) {
  HttpLlmClient::Options::RateLimit options;
  options.requests_per_minute = 60;  // one per second
  options.burst_seconds = 2;         // two at once
  RateLimiter limiter(options);
  auto t0 = RateLimiter::Clock::now();
  EXPECT_EQ(limiter.TryAcquire(0, t0), 0.0);
  EXPECT_EQ(limiter.TryAcquire(0, t0), 0.0);
  double wait = limiter.TryAcquire(0, t0);
  EXPECT_GT(wait, 0.9);
  EXPECT_LT(wait, 1.1);
  EXPECT_EQ(limiter.TryAcquire(0, t0 + std::chrono::milliseconds(1010)), 0.0);
}

TEST(RateLimiter, ChargesTokensAndTakesRefunds) {
  HttpLlmClient::Options::RateLimit options;
  options.tokens_per_minute = 6000;  // 100 per second
  options.burst_seconds = 1;         // bucket of 100
  RateLimiter limiter(options);
  auto t0 = RateLimiter::Clock::now();
  EXPECT_EQ(limiter.TryAcquire(150, t0), 0.0);  // a large request passes a full bucket
  double wait = limiter.TryAcquire(10, t0);     // now 50 in debt
  EXPECT_NEAR(wait, 0.5, 0.01);
  limiter.AdjustTokens(100, t0);                // it used 50 of its 150
  EXPECT_EQ(limiter.TryAcquire(10, t0), 0.0);
}

TEST(Redactor, RemovesTheKeyAndKeyShapedTokens) {
  Redactor redact("sk-secret-123456789");
  std::string out = redact("Incorrect API key provided: sk-secret-123456789. Also sk-proj-abcdef"
                           "ghijklmnopqrstuvwxyz and sk-ant-api03-XYZ_XYZ_XYZ_XYZ.");
  EXPECT_EQ(out.find("secret"), std::string::npos) << out;
  EXPECT_EQ(out.find("abcdef"), std::string::npos) << out;
  EXPECT_EQ(out.find("XYZ"), std::string::npos) << out;
  EXPECT_NE(out.find("Incorrect API key provided: [REDACTED]"), std::string::npos) << out;
  EXPECT_EQ(redact("task-sk-1 risk-free"), "task-sk-1 risk-free");

  Redactor custom("local-key-xyz");
  EXPECT_EQ(custom("key=local-key-xyz;"), "key=[REDACTED];");
}

TEST(ApiKey, ComesFromOptionsThenFileThenEnvironment) {
  HttpLlmClient::Options options;
  options.provider = LlmProvider::kAnthropic;
  ::setenv("ANTHROPIC_API_KEY", " env-key \n", 1);
  StatusOr<std::string> key = ResolveApiKey(options);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, "env-key");
  options.api_key = "direct";
  EXPECT_EQ(*ResolveApiKey(options), "direct");
  options.api_key = "bad key";
  StatusOr<std::string> bad = ResolveApiKey(options);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().find("bad key"), std::string::npos);
  options.api_key.clear();
  options.api_key_file = "/nonexistent/key";
  EXPECT_EQ(ResolveApiKey(options).status().code(), StatusCode::kNotFound);
  ::unsetenv("ANTHROPIC_API_KEY");
}

TEST(BaseUrl, DefaultsPerProviderAndHonorsTheEnvironment) {
  HttpLlmClient::Options options;
  ::unsetenv("OPENAI_BASE_URL");
  EXPECT_EQ(ResolveBaseUrl(options), "https://api.openai.com/v1");
  ::setenv("OPENAI_BASE_URL", "http://127.0.0.1:8000/v1", 1);
  EXPECT_EQ(ResolveBaseUrl(options), "http://127.0.0.1:8000/v1");
  ::unsetenv("OPENAI_BASE_URL");
  options.provider = LlmProvider::kAnthropic;
  ::unsetenv("ANTHROPIC_BASE_URL");
  EXPECT_EQ(ResolveBaseUrl(options), "https://api.anthropic.com");
  EXPECT_TRUE(IsHostedApi(*ParseUrl(ResolveBaseUrl(options))));
  EXPECT_FALSE(IsHostedApi(*ParseUrl("http://127.0.0.1:1/v1")));
}

}  // namespace
}  // namespace ksearch::llm
