#include "llm/wire.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include <boost/json.hpp>
#include <simdjson.h>

#include "llm/http_util.h"

namespace ksearch::llm {
namespace {

namespace json = boost::json;
namespace dom = simdjson::dom;

// One parser per thread: the client parses on its I/O thread, the mock server
// on its own, and a dom::parser keeps its buffers between documents, which is
// what makes small replies cheap.
dom::parser& ThreadParser() {
  thread_local dom::parser parser;
  return parser;
}

// Parses `body` or returns kDataLoss naming simdjson's reason.
Status ParseDocument(std::string_view body, dom::element* root) {
  simdjson::error_code error = ThreadParser().parse(body.data(), body.size()).get(*root);
  if (error != simdjson::SUCCESS) {
    return DataLossError("malformed JSON in reply (" + std::to_string(body.size()) +
                         " bytes): " + simdjson::error_message(error));
  }
  return Status();
}

Status MissingField(std::string_view path, std::string_view expected) {
  return UnimplementedError("reply lacks " + std::string(path) + " (" + std::string(expected) +
                            "); is the base URL a server of this provider?");
}

// Optional integer field: absent or null leaves `out` alone and returns false.
bool ReadInt(dom::element parent, std::string_view key, int64_t* out) {
  dom::element value;
  if (parent.at_key(key).get(value) != simdjson::SUCCESS) return false;
  int64_t i = 0;
  if (value.get_int64().get(i) == simdjson::SUCCESS) {
    *out = i;
    return true;
  }
  double d = 0;
  if (value.get_double().get(d) == simdjson::SUCCESS) {
    *out = static_cast<int64_t>(d);
    return true;
  }
  return false;
}

bool ReadString(dom::element parent, std::string_view key, std::string* out) {
  std::string_view s;
  if (parent.at_key(key).get_string().get(s) != simdjson::SUCCESS) return false;
  out->assign(s);
  return true;
}

// Text of a content field that is either a string or an array of blocks
// {"type": "text", "text": …} (both providers accept both forms).
bool ReadContent(dom::element value, std::string* out) {
  std::string_view s;
  if (value.get_string().get(s) == simdjson::SUCCESS) {
    out->assign(s);
    return true;
  }
  dom::array blocks;
  if (value.get_array().get(blocks) != simdjson::SUCCESS) return false;
  out->clear();
  for (dom::element block : blocks) {
    std::string_view type;
    if (block["type"].get_string().get(type) == simdjson::SUCCESS && type != "text") continue;
    std::string_view text;
    if (block["text"].get_string().get(text) == simdjson::SUCCESS) out->append(text);
  }
  return true;
}

Status CheckContent(const ChatResponse& response, bool accept_truncated,
                    std::string_view raw_finish) {
  if (response.finish_reason == FinishReason::kLength && !accept_truncated) {
    return OutOfRangeError("reply cut at max_tokens (finish reason \"" + std::string(raw_finish) +
                           "\", " + std::to_string(response.output_tokens) +
                           " output tokens, " + std::to_string(response.content.size()) +
                           " bytes of content); raise max_tokens or ask for less");
  }
  if (response.content.empty()) {
    return DataLossError("reply has empty content (finish reason \"" + std::string(raw_finish) +
                         "\")");
  }
  return Status();
}

std::string_view OpenAiFinish(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
    case FinishReason::kStopSequence:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kOther:
      return "content_filter";
  }
  return "stop";
}

std::string_view AnthropicFinish(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "end_turn";
    case FinishReason::kStopSequence:
      return "stop_sequence";
    case FinishReason::kLength:
      return "max_tokens";
    case FinishReason::kOther:
      return "refusal";
  }
  return "end_turn";
}

json::array StopArray(const std::vector<std::string>& stop) {
  json::array array;
  for (const std::string& s : stop) array.emplace_back(s);
  return array;
}

// Replaces control characters so that a server's garbage cannot break a log
// line or a terminal.
std::string Printable(std::string_view text, size_t limit) {
  std::string out;
  out.reserve(std::min(text.size(), limit));
  for (char c : text.substr(0, limit)) {
    out.push_back(static_cast<unsigned char>(c) < 0x20 ? ' ' : c);
  }
  if (text.size() > limit) out += "…";
  return out;
}

}  // namespace

std::string SerializeOpenAiRequest(const ChatRequest& request, std::string_view model,
                                   std::string_view max_tokens_field) {
  json::array messages;
  if (!request.system.empty()) {
    messages.emplace_back(json::object{{"role", "system"}, {"content", request.system}});
  }
  for (const ChatMessage& m : request.messages) {
    messages.emplace_back(json::object{{"role", ToString(m.role)}, {"content", m.content}});
  }
  const ModelTraits traits = TraitsOfModel("openai", model);
  json::object body;
  body["model"] = model;
  body["messages"] = std::move(messages);
  if (request.temperature && traits.accepts_temperature) body["temperature"] = *request.temperature;
  body[traits.reasoning ? traits.max_tokens_field : max_tokens_field] = request.max_tokens;
  if (!request.reasoning_effort.empty() && traits.accepts_reasoning_effort) {
    body["reasoning_effort"] = request.reasoning_effort;
  }
  if (!request.stop.empty()) body["stop"] = StopArray(request.stop);
  return json::serialize(body);
}

std::string SerializeAnthropicRequest(const ChatRequest& request, std::string_view model) {
  json::array messages;
  for (const ChatMessage& m : request.messages) {
    messages.emplace_back(json::object{{"role", ToString(m.role)}, {"content", m.content}});
  }
  json::object body;
  body["model"] = model;
  body["max_tokens"] = request.max_tokens;
  if (!request.system.empty()) body["system"] = request.system;
  body["messages"] = std::move(messages);
  if (request.thinking_budget_tokens > 0) {
    body["thinking"] =
        json::object{{"type", "enabled"}, {"budget_tokens", request.thinking_budget_tokens}};
  } else if (request.temperature) {
    body["temperature"] = *request.temperature;
  }
  if (!request.stop.empty()) body["stop_sequences"] = StopArray(request.stop);
  return json::serialize(body);
}

ReplyParse ParseOpenAiReply(std::string_view body, bool accept_truncated) {
  ReplyParse out;
  dom::element root;
  out.status = ParseDocument(body, &root);
  out.retryable = !out.status.ok();
  if (!out.status.ok()) return out;
  if (!root.is_object()) {
    out.status = MissingField("a JSON object at the top level", "got another JSON value");
    return out;
  }
  dom::element usage;
  if (root["usage"].get(usage) == simdjson::SUCCESS && usage.is_object()) {
    bool in = ReadInt(usage, "prompt_tokens", &out.response.input_tokens);
    bool completion = ReadInt(usage, "completion_tokens", &out.response.output_tokens);
    out.usage_found = in && completion;
  }
  ReadString(root, "model", &out.response.model);

  dom::array choices;
  if (root["choices"].get_array().get(choices) != simdjson::SUCCESS) {
    out.status = MissingField("choices", "an array");
    return out;
  }
  dom::element choice;
  if (choices.at(0).get(choice) != simdjson::SUCCESS || !choice.is_object()) {
    out.status = MissingField("choices[0]", "an object; the array is empty");
    return out;
  }
  dom::element message;
  if (choice["message"].get(message) != simdjson::SUCCESS || !message.is_object()) {
    out.status = MissingField("choices[0].message", "an object");
    return out;
  }
  dom::element content;
  if (message["content"].get(content) != simdjson::SUCCESS) {
    out.status = MissingField("choices[0].message.content", "a string");
    return out;
  }
  if (!content.is_null() && !ReadContent(content, &out.response.content)) {
    out.status = MissingField("choices[0].message.content", "a string or an array of parts");
    return out;
  }
  std::string refusal;
  if (ReadString(message, "refusal", &refusal) && !refusal.empty()) {
    out.status = DataLossError("the model refused: " + Printable(refusal, 300));
    return out;
  }
  std::string finish;
  ReadString(choice, "finish_reason", &finish);
  if (finish.empty() || finish == "stop" || finish == "eos") {
    out.response.finish_reason = FinishReason::kStop;
  } else if (finish == "length") {
    out.response.finish_reason = FinishReason::kLength;
  } else {
    out.response.finish_reason = FinishReason::kOther;
  }
  out.status = CheckContent(out.response, accept_truncated, finish.empty() ? "none" : finish);
  return out;
}

ReplyParse ParseAnthropicReply(std::string_view body, bool accept_truncated) {
  ReplyParse out;
  dom::element root;
  out.status = ParseDocument(body, &root);
  out.retryable = !out.status.ok();
  if (!out.status.ok()) return out;
  if (!root.is_object()) {
    out.status = MissingField("a JSON object at the top level", "got another JSON value");
    return out;
  }
  dom::element usage;
  if (root["usage"].get(usage) == simdjson::SUCCESS && usage.is_object()) {
    bool in = ReadInt(usage, "input_tokens", &out.response.input_tokens);
    bool completion = ReadInt(usage, "output_tokens", &out.response.output_tokens);
    // Cached prompt tokens are reported apart from input_tokens; a budget
    // counts them all (their lower price is not modelled).
    int64_t cached = 0;
    if (ReadInt(usage, "cache_creation_input_tokens", &cached)) out.response.input_tokens += cached;
    cached = 0;
    if (ReadInt(usage, "cache_read_input_tokens", &cached)) out.response.input_tokens += cached;
    out.usage_found = in && completion;
  }
  ReadString(root, "model", &out.response.model);

  dom::element content;
  if (root["content"].get(content) != simdjson::SUCCESS || !content.is_array()) {
    out.status = MissingField("content", "an array of blocks");
    return out;
  }
  ReadContent(content, &out.response.content);
  std::string stop;
  if (!ReadString(root, "stop_reason", &stop)) {
    out.status = MissingField("stop_reason", "a string");
    return out;
  }
  if (stop == "end_turn") {
    out.response.finish_reason = FinishReason::kStop;
  } else if (stop == "max_tokens") {
    out.response.finish_reason = FinishReason::kLength;
  } else if (stop == "stop_sequence") {
    out.response.finish_reason = FinishReason::kStopSequence;
  } else if (stop == "refusal") {
    out.status = DataLossError("the model refused (stop reason \"refusal\")");
    out.response.finish_reason = FinishReason::kOther;
    return out;
  } else {
    out.response.finish_reason = FinishReason::kOther;
  }
  out.status = CheckContent(out.response, accept_truncated, stop);
  return out;
}

std::string ExtractErrorMessage(std::string_view body) {
  dom::element root;
  if (!body.empty() && ThreadParser().parse(body.data(), body.size()).get(root) ==
                           simdjson::SUCCESS && root.is_object()) {
    std::string_view text;
    if (root["error"]["message"].get_string().get(text) == simdjson::SUCCESS ||
        root["error"].get_string().get(text) == simdjson::SUCCESS ||
        root["message"].get_string().get(text) == simdjson::SUCCESS ||
        root["detail"].get_string().get(text) == simdjson::SUCCESS) {
      return Printable(text, 2000);
    }
  }
  if (body.empty()) return "(empty body)";
  return Printable(body, 300);
}

HttpErrorClass ClassifyHttpError(int http_status, std::string_view body) {
  HttpErrorClass out;
  out.code = StatusCodeForHttp(http_status);
  out.retryable = IsRetryableHttpStatus(http_status);
  std::string code_field, message;
  dom::element root;
  if (!body.empty() && ThreadParser().parse(body.data(), body.size()).get(root) ==
                           simdjson::SUCCESS && root.is_object()) {
    std::string_view text;
    if (root["error"]["code"].get_string().get(text) == simdjson::SUCCESS) code_field = text;
    if (code_field.empty() && root["error"]["type"].get_string().get(text) == simdjson::SUCCESS) {
      code_field = text;
    }
  }
  message = ExtractErrorMessage(body);
  std::string lower = message;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto says = [&](std::string_view phrase) { return lower.find(phrase) != std::string::npos; };
  if (code_field == "insufficient_quota" || says("exceeded your current quota") ||
      says("credit balance is too low")) {
    out.code = StatusCode::kFailedPrecondition;
    out.retryable = false;
    out.prefix = "quota or credit exhausted: ";
  } else if (http_status == 400 || http_status == 413) {
    if (code_field == "context_length_exceeded" || says("context length") ||
        says("context window") || says("prompt is too long") || says("maximum context")) {
      out.code = StatusCode::kOutOfRange;
      out.retryable = false;
      out.prefix = "context length exceeded: ";
    }
  }
  return out;
}

namespace {

// Shared by both request parsers: "messages": [{"role", "content"}].
Status ParseMessages(dom::element root, ChatRequest* request, bool system_in_messages) {
  dom::array messages;
  if (root["messages"].get_array().get(messages) != simdjson::SUCCESS) {
    return InvalidArgumentError("request lacks messages (an array)");
  }
  size_t index = 0;
  for (dom::element m : messages) {
    std::string_view role;
    dom::element content;
    std::string where = "messages[" + std::to_string(index++) + "]";
    if (m["role"].get_string().get(role) != simdjson::SUCCESS) {
      return InvalidArgumentError(where + ".role: expected a string");
    }
    std::string text;
    if (m["content"].get(content) != simdjson::SUCCESS || !ReadContent(content, &text)) {
      return InvalidArgumentError(where + ".content: expected a string or an array of parts");
    }
    if (role == "system" && system_in_messages) {
      if (!request->system.empty()) request->system += "\n";
      request->system += text;
    } else if (role == "user") {
      request->messages.push_back({ChatMessage::Role::kUser, std::move(text)});
    } else if (role == "assistant") {
      request->messages.push_back({ChatMessage::Role::kAssistant, std::move(text)});
    } else {
      return InvalidArgumentError(where + ".role: unsupported role \"" + std::string(role) + "\"");
    }
  }
  return Status();
}

Status ParseStop(dom::element root, std::string_view key, ChatRequest* request) {
  dom::element stop;
  if (root.at_key(key).get(stop) != simdjson::SUCCESS || stop.is_null()) return Status();
  std::string_view one;
  if (stop.get_string().get(one) == simdjson::SUCCESS) {
    request->stop.emplace_back(one);
    return Status();
  }
  dom::array many;
  if (stop.get_array().get(many) != simdjson::SUCCESS) {
    return InvalidArgumentError(std::string(key) + ": expected a string or an array of strings");
  }
  for (dom::element s : many) {
    if (s.get_string().get(one) != simdjson::SUCCESS) {
      return InvalidArgumentError(std::string(key) + ": expected strings");
    }
    request->stop.emplace_back(one);
  }
  return Status();
}

StatusOr<dom::element> ParseRequestRoot(std::string_view body) {
  dom::element root;
  simdjson::error_code error = ThreadParser().parse(body.data(), body.size()).get(root);
  if (error != simdjson::SUCCESS) {
    return InvalidArgumentError(std::string("request body is not JSON: ") +
                                simdjson::error_message(error));
  }
  if (!root.is_object()) return InvalidArgumentError("request body is not a JSON object");
  return root;
}

}  // namespace

StatusOr<ChatRequest> ParseOpenAiRequest(std::string_view body) {
  KSEARCH_ASSIGN_OR_RETURN(dom::element root, ParseRequestRoot(body));
  ChatRequest request;
  if (!ReadString(root, "model", &request.model)) {
    return InvalidArgumentError("request lacks model (a string)");
  }
  KSEARCH_RETURN_IF_ERROR(ParseMessages(root, &request, /*system_in_messages=*/true));
  double temperature = 1.0;
  if (root["temperature"].get_double().get(temperature) == simdjson::SUCCESS) {
    request.temperature = temperature;
  }
  int64_t max_tokens = 0;
  if (ReadInt(root, "max_completion_tokens", &max_tokens) ||
      ReadInt(root, "max_tokens", &max_tokens)) {
    request.max_tokens = static_cast<int>(max_tokens);
  }
  ReadString(root, "reasoning_effort", &request.reasoning_effort);
  KSEARCH_RETURN_IF_ERROR(ParseStop(root, "stop", &request));
  return request;
}

StatusOr<ChatRequest> ParseAnthropicRequest(std::string_view body) {
  KSEARCH_ASSIGN_OR_RETURN(dom::element root, ParseRequestRoot(body));
  ChatRequest request;
  if (!ReadString(root, "model", &request.model)) {
    return InvalidArgumentError("request lacks model (a string)");
  }
  int64_t max_tokens = 0;
  if (!ReadInt(root, "max_tokens", &max_tokens)) {
    return InvalidArgumentError("request lacks max_tokens (an integer)");
  }
  request.max_tokens = static_cast<int>(max_tokens);
  dom::element system;
  if (root["system"].get(system) == simdjson::SUCCESS && !system.is_null() &&
      !ReadContent(system, &request.system)) {
    return InvalidArgumentError("system: expected a string or an array of text blocks");
  }
  KSEARCH_RETURN_IF_ERROR(ParseMessages(root, &request, /*system_in_messages=*/false));
  double temperature = 1.0;
  if (root["temperature"].get_double().get(temperature) == simdjson::SUCCESS) {
    request.temperature = temperature;
  }
  dom::element thinking;
  if (root["thinking"].get(thinking) == simdjson::SUCCESS && thinking.is_object()) {
    int64_t budget = 0;
    if (!ReadInt(thinking, "budget_tokens", &budget)) {
      return InvalidArgumentError("thinking.budget_tokens: expected an integer");
    }
    request.thinking_budget_tokens = static_cast<int>(budget);
  }
  KSEARCH_RETURN_IF_ERROR(ParseStop(root, "stop_sequences", &request));
  return request;
}

std::string BuildOpenAiReply(std::string_view content, FinishReason finish, int64_t input_tokens,
                             int64_t output_tokens, std::string_view model) {
  json::object message{{"role", "assistant"}, {"content", content}};
  json::object choice{{"index", 0}, {"message", std::move(message)},
                      {"finish_reason", OpenAiFinish(finish)}};
  json::object usage{{"prompt_tokens", input_tokens},
                     {"completion_tokens", output_tokens},
                     {"total_tokens", input_tokens + output_tokens}};
  json::object body{{"id", "chatcmpl-mock"},       {"object", "chat.completion"},
                    {"created", 0},                 {"model", model},
                    {"choices", json::array{std::move(choice)}}, {"usage", std::move(usage)}};
  return json::serialize(body);
}

std::string BuildAnthropicReply(std::string_view content, FinishReason finish,
                                int64_t input_tokens, int64_t output_tokens,
                                std::string_view model) {
  json::object block{{"type", "text"}, {"text", content}};
  json::object usage{{"input_tokens", input_tokens}, {"output_tokens", output_tokens}};
  json::object body{{"id", "msg_mock"},
                    {"type", "message"},
                    {"role", "assistant"},
                    {"model", model},
                    {"content", json::array{std::move(block)}},
                    {"stop_reason", AnthropicFinish(finish)},
                    {"stop_sequence", nullptr},
                    {"usage", std::move(usage)}};
  return json::serialize(body);
}

std::string BuildOpenAiRefusal(std::string_view refusal, std::string_view model) {
  json::object message{{"role", "assistant"}, {"content", nullptr}, {"refusal", refusal}};
  json::object choice{{"index", 0}, {"message", std::move(message)}, {"finish_reason", "stop"}};
  json::object usage{{"prompt_tokens", 20}, {"completion_tokens", 10}, {"total_tokens", 30}};
  json::object body{{"id", "chatcmpl-mock"}, {"object", "chat.completion"},
                    {"model", model}, {"choices", json::array{std::move(choice)}},
                    {"usage", std::move(usage)}};
  return json::serialize(body);
}

std::string BuildOpenAiError(int http_status, std::string_view message, std::string_view code) {
  std::string_view type = http_status == 429   ? "rate_limit_exceeded"
                          : http_status == 401 ? "invalid_request_error"
                          : http_status >= 500 ? "server_error"
                                               : "invalid_request_error";
  json::object error{{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!code.empty()) error["code"] = code;
  return json::serialize(json::object{{"error", std::move(error)}});
}

std::string OpenAiConstraintViolation(std::string_view body, const ChatRequest& request) {
  const ModelTraits traits = TraitsOfModel("openai", request.model);
  dom::element root;
  if (ThreadParser().parse(body.data(), body.size()).get(root) != simdjson::SUCCESS) return "";
  dom::element ignored;
  const bool sent_max_tokens = root["max_tokens"].get(ignored) == simdjson::SUCCESS;
  if (traits.reasoning) {
    if (sent_max_tokens) {
      return "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
             "'max_completion_tokens' instead.";
    }
    if (request.temperature && *request.temperature != 1.0) {
      char value[32];
      std::snprintf(value, sizeof value, "%g", *request.temperature);
      return std::string("Unsupported value: 'temperature' does not support ") + value +
             " with this model. Only the default (1) value is supported.";
    }
  } else if (!request.reasoning_effort.empty()) {
    return "Unrecognized request argument supplied: reasoning_effort";
  }
  return "";
}

std::string AnthropicConstraintViolation(const ChatRequest& request) {
  // max_tokens is required: ParseAnthropicRequest already rejects its absence.
  if (request.thinking_budget_tokens > 0) {
    if (request.thinking_budget_tokens < 1024) {
      return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024";
    }
    if (request.thinking_budget_tokens >= request.max_tokens) {
      return "`max_tokens` must be greater than `thinking.budget_tokens`";
    }
    if (request.temperature && *request.temperature != 1.0) {
      return "`temperature` may only be set to 1 when thinking is enabled";
    }
  }
  return "";
}

std::string BuildAnthropicError(int http_status, std::string_view message) {
  std::string_view type = http_status == 429   ? "rate_limit_error"
                          : http_status == 401 ? "authentication_error"
                          : http_status == 403 ? "permission_error"
                          : http_status == 404 ? "not_found_error"
                          : http_status == 529 ? "overloaded_error"
                          : http_status >= 500 ? "api_error"
                                               : "invalid_request_error";
  json::object error{{"type", type}, {"message", message}};
  return json::serialize(json::object{{"type", "error"}, {"error", std::move(error)}});
}

}  // namespace ksearch::llm
