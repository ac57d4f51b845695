#include "llm/chat_json.h"

#include <boost/json.hpp>

namespace ksearch::llm {

void AppendChatRequestFields(const ChatRequest& request, boost::json::object* out) {
  boost::json::object& o = *out;
  o["model"] = request.model;
  o["max_tokens"] = request.max_tokens;
  if (request.temperature) o["temperature"] = *request.temperature;
  if (!request.reasoning_effort.empty()) o["reasoning_effort"] = request.reasoning_effort;
  if (request.thinking_budget_tokens > 0) {
    o["thinking_budget_tokens"] = request.thinking_budget_tokens;
  }
  boost::json::array stop;
  for (const std::string& s : request.stop) stop.emplace_back(s);
  o["stop"] = std::move(stop);
  o["system"] = request.system;
  boost::json::array messages;
  for (const ChatMessage& m : request.messages) {
    messages.emplace_back(boost::json::object{{"role", ToString(m.role)}, {"content", m.content}});
  }
  o["messages"] = std::move(messages);
}

boost::json::object ChatResponseToJson(const ChatResponse& r) {
  return boost::json::object{{"content", r.content},
                             {"finish_reason", ToString(r.finish_reason)},
                             {"input_tokens", r.input_tokens},
                             {"output_tokens", r.output_tokens},
                             {"latency_ms", r.latency_ms},
                             {"attempts", r.attempts},
                             {"cost_usd", r.cost_usd},
                             {"model", r.model}};
}

boost::json::object ErrorToJson(const Status& status) {
  return boost::json::object{{"code", ToString(status.code())}, {"message", status.message()}};
}

StatusOr<StatusCode> StatusCodeFromString(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(StatusCode::kUnauthenticated); ++i) {
    if (ToString(static_cast<StatusCode>(i)) == name) return static_cast<StatusCode>(i);
  }
  return InvalidArgumentError("unknown status code \"" + std::string(name) + "\"");
}

StatusOr<FinishReason> FinishReasonFromString(std::string_view name) {
  for (FinishReason r : {FinishReason::kStop, FinishReason::kLength, FinishReason::kStopSequence,
                         FinishReason::kOther}) {
    if (ToString(r) == name) return r;
  }
  return InvalidArgumentError("unknown finish reason \"" + std::string(name) +
                              "\" (expected stop, length, stop_sequence or other)");
}

}  // namespace ksearch::llm
