// The providers' wire formats: request bodies (Boost.JSON) and reply bodies
// (simdjson), in both directions so that the mock server shares them with the
// client. No I/O here.
#ifndef KSEARCH_LIB_LLM_WIRE_H_
#define KSEARCH_LIB_LLM_WIRE_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "ksearch/llm_client.h"
#include "ksearch/status.h"

namespace ksearch::llm {

// The body of a chat request. `model` replaces request.model (the client's
// default applies before this). `max_tokens_field` is the OpenAI name of the
// token limit ("max_tokens" or "max_completion_tokens"); the model's traits
// (TraitsOfModel) override it for reasoning models, which also never get a
// temperature. reasoning_effort is sent only to models that take it.
std::string SerializeOpenAiRequest(const ChatRequest& request, std::string_view model,
                                   std::string_view max_tokens_field);
// With thinking_budget_tokens, a "thinking" block and no temperature (the API
// rejects one with thinking).
std::string SerializeAnthropicRequest(const ChatRequest& request, std::string_view model);

// The outcome of reading a 2xx reply body. `response` is filled as far as the
// body allowed; `usage_found` tells whether its token counts are real (they
// are billed even when `status` rejects the reply).
struct ReplyParse {
  Status status;
  ChatResponse response;
  bool usage_found = false;
  // The body was not JSON: a transport fault rather than the model's answer,
  // so the client retries it like a 5xx.
  bool retryable = false;
};

// Distinct codes for the distinct ways a reply can be unusable (see
// llm_client.h): kDataLoss (not JSON), kUnimplemented (a required field is
// missing or has the wrong type), kOutOfRange (finish reason length/max_tokens
// and !accept_truncated), kDataLoss also for empty content and refusals. Messages do not name the
// provider; the caller adds it.
ReplyParse ParseOpenAiReply(std::string_view body, bool accept_truncated);
ReplyParse ParseAnthropicReply(std::string_view body, bool accept_truncated);

// The server's own words from an error body: error.message (both providers
// use it), else error as a string, else message, else the body's first 300
// bytes with control characters replaced. Never empty for a non-empty body.
std::string ExtractErrorMessage(std::string_view body);

// How the client treats an HTTP error reply: its status code, and whether a
// retry may help. Refines StatusCodeForHttp with the body: a 400 for context
// length is kOutOfRange ("context length exceeded: …" is prefixed to the
// message), an exhausted quota or credit (429 insufficient_quota, a 400 about
// the credit balance) is kFailedPrecondition and not retried.
struct HttpErrorClass {
  StatusCode code = StatusCode::kUnknown;
  bool retryable = false;
  std::string prefix;  // prepended to the message ("" or "context length exceeded: ")
};
HttpErrorClass ClassifyHttpError(int http_status, std::string_view body);

// The mock server's side: requests in, replies out.
StatusOr<ChatRequest> ParseOpenAiRequest(std::string_view body);
StatusOr<ChatRequest> ParseAnthropicRequest(std::string_view body);
std::string BuildOpenAiReply(std::string_view content, FinishReason finish, int64_t input_tokens,
                             int64_t output_tokens, std::string_view model);
std::string BuildAnthropicReply(std::string_view content, FinishReason finish,
                                int64_t input_tokens, int64_t output_tokens,
                                std::string_view model);
// An OpenAI reply whose message is a refusal (content null).
std::string BuildOpenAiRefusal(std::string_view refusal, std::string_view model);
// An error body in the provider's format, for HTTP status `http_status`;
// `code` is OpenAI's error.code (null when empty).
std::string BuildOpenAiError(int http_status, std::string_view message,
                             std::string_view code = "");
std::string BuildAnthropicError(int http_status, std::string_view message);

// The strict mock's checks of a request against the provider's documented
// constraints: the 400 message the real API gives, or "" when it conforms.
// `body` is the raw OpenAI body (which limit field was sent matters).
std::string OpenAiConstraintViolation(std::string_view body, const ChatRequest& request);
std::string AnthropicConstraintViolation(const ChatRequest& request);

}  // namespace ksearch::llm

#endif  // KSEARCH_LIB_LLM_WIRE_H_
