// Requests and replies as JSON, shared by the two formats that store them:
// recordings (llm_recording.h) and exchange files (exchange_llm_client.h).
#ifndef KSEARCH_LIB_LLM_CHAT_JSON_H_
#define KSEARCH_LIB_LLM_CHAT_JSON_H_

#include <string_view>

#include <boost/json/object.hpp>

#include "ksearch/llm_client.h"
#include "ksearch/status.h"

namespace ksearch::llm {

// Adds model, max_tokens, temperature (only when set), reasoning_effort and
// thinking_budget_tokens (only when set), stop, system and messages to
// `out`, in that order. Timeout and tag are left to the format.
void AppendChatRequestFields(const ChatRequest& request, boost::json::object* out);
// content, finish_reason, input_tokens, output_tokens, latency_ms, attempts,
// cost_usd, model.
boost::json::object ChatResponseToJson(const ChatResponse& response);
// {"code": "out_of_range", "message": …} for a failed request.
boost::json::object ErrorToJson(const Status& status);

// The inverses of ToString(StatusCode) and ToString(FinishReason). Errors:
// kInvalidArgument naming the value (the caller adds the field).
[[nodiscard]] StatusOr<StatusCode> StatusCodeFromString(std::string_view name);
[[nodiscard]] StatusOr<FinishReason> FinishReasonFromString(std::string_view name);

}  // namespace ksearch::llm

#endif  // KSEARCH_LIB_LLM_CHAT_JSON_H_
