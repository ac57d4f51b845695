// The JSONL recording format (docs/llm.md) and LlmRecorder.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>

#include <boost/json.hpp>
#include <simdjson.h>

#include "ksearch/llm_recording.h"
#include "llm/chat_json.h"

namespace ksearch {
namespace {

namespace json = boost::json;
namespace dom = simdjson::dom;

constexpr int kRecordingVersion = 1;

Status FileError(const std::string& what, const std::string& path, int error) {
  std::string message = what + " \"" + path + "\": " + std::strerror(error);
  if (error == ENOENT) return NotFoundError(message);
  if (error == EACCES || error == EPERM || error == EROFS) return PermissionDeniedError(message);
  return UnknownError(message);
}

Status Missing(std::string_view field, std::string_view type) {
  return InvalidArgumentError(std::string(field) + ": missing or not " + std::string(type));
}

Status GetString(dom::element parent, std::string_view key, std::string_view path,
                 std::string* out) {
  std::string_view value;
  if (parent.at_key(key).get_string().get(value) != simdjson::SUCCESS) {
    return Missing(path, "a string");
  }
  out->assign(value);
  return Status();
}

template <typename Int>
Status GetInt(dom::element parent, std::string_view key, std::string_view path, Int* out) {
  int64_t value = 0;
  if (parent.at_key(key).get_int64().get(value) != simdjson::SUCCESS) {
    return Missing(path, "an integer");
  }
  *out = static_cast<Int>(value);
  return Status();
}

Status GetDouble(dom::element parent, std::string_view key, std::string_view path, double* out) {
  // get_double() also accepts integers written without a fraction.
  if (parent.at_key(key).get_double().get(*out) != simdjson::SUCCESS) {
    return Missing(path, "a number");
  }
  return Status();
}

Status ReadRequest(dom::element root, ChatRequest* request) {
  dom::element r;
  if (root["request"].get(r) != simdjson::SUCCESS || !r.is_object()) {
    return Missing("request", "an object");
  }
  KSEARCH_RETURN_IF_ERROR(GetString(r, "model", "request.model", &request->model));
  KSEARCH_RETURN_IF_ERROR(GetString(r, "system", "request.system", &request->system));
  dom::array messages;
  if (r["messages"].get_array().get(messages) != simdjson::SUCCESS) {
    return Missing("request.messages", "an array");
  }
  for (dom::element m : messages) {
    ChatMessage message;
    std::string role;
    KSEARCH_RETURN_IF_ERROR(GetString(m, "role", "request.messages[].role", &role));
    if (role == "user") {
      message.role = ChatMessage::Role::kUser;
    } else if (role == "assistant") {
      message.role = ChatMessage::Role::kAssistant;
    } else {
      return InvalidArgumentError("request.messages[].role: unknown role \"" + role + "\"");
    }
    KSEARCH_RETURN_IF_ERROR(
        GetString(m, "content", "request.messages[].content", &message.content));
    request->messages.push_back(std::move(message));
  }
  // Absent or null: no temperature was sent.
  dom::element temperature;
  if (r["temperature"].get(temperature) == simdjson::SUCCESS && !temperature.is_null()) {
    double value = 0;
    KSEARCH_RETURN_IF_ERROR(GetDouble(r, "temperature", "request.temperature", &value));
    request->temperature = value;
  }
  KSEARCH_RETURN_IF_ERROR(GetInt(r, "max_tokens", "request.max_tokens", &request->max_tokens));
  std::string_view effort;
  if (r["reasoning_effort"].get_string().get(effort) == simdjson::SUCCESS) {
    request->reasoning_effort.assign(effort);
  }
  int64_t thinking = 0;
  if (r["thinking_budget_tokens"].get_int64().get(thinking) == simdjson::SUCCESS) {
    request->thinking_budget_tokens = static_cast<int>(thinking);
  }
  dom::array stop;
  if (r["stop"].get_array().get(stop) == simdjson::SUCCESS) {
    for (dom::element s : stop) {
      std::string_view text;
      if (s.get_string().get(text) != simdjson::SUCCESS) {
        return Missing("request.stop[]", "a string");
      }
      request->stop.emplace_back(text);
    }
  }
  double timeout = 0;
  if (r["timeout_seconds"].get_double().get(timeout) == simdjson::SUCCESS) {
    request->timeout_seconds = timeout;
  }
  std::string_view tag;
  if (r["tag"].get_string().get(tag) == simdjson::SUCCESS) request->tag = std::string(tag);
  return Status();
}

// Fills `out` with the recorded result, a response or a recorded error; fails
// only when the line cannot be read.
Status ReadResult(dom::element root, StatusOr<ChatResponse>* out) {
  dom::element error;
  if (root["error"].get(error) == simdjson::SUCCESS && error.is_object()) {
    std::string code_name;
    std::string message;
    KSEARCH_RETURN_IF_ERROR(GetString(error, "code", "error.code", &code_name));
    KSEARCH_RETURN_IF_ERROR(GetString(error, "message", "error.message", &message));
    StatusOr<StatusCode> code_or = llm::StatusCodeFromString(code_name);
    if (!code_or.ok()) return code_or.status().WithContext("error.code");
    StatusCode code = *code_or;
    if (code == StatusCode::kOk) return InvalidArgumentError("error.code: OK is not an error");
    *out = Status(code, std::move(message));
    return Status();
  }
  dom::element r;
  if (root["response"].get(r) != simdjson::SUCCESS || !r.is_object()) {
    return Missing("response (or error)", "an object");
  }
  ChatResponse response;
  KSEARCH_RETURN_IF_ERROR(GetString(r, "content", "response.content", &response.content));
  std::string finish;
  KSEARCH_RETURN_IF_ERROR(GetString(r, "finish_reason", "response.finish_reason", &finish));
  StatusOr<FinishReason> reason = llm::FinishReasonFromString(finish);
  if (!reason.ok()) return reason.status().WithContext("response.finish_reason");
  response.finish_reason = *reason;
  KSEARCH_RETURN_IF_ERROR(
      GetInt(r, "input_tokens", "response.input_tokens", &response.input_tokens));
  KSEARCH_RETURN_IF_ERROR(
      GetInt(r, "output_tokens", "response.output_tokens", &response.output_tokens));
  KSEARCH_RETURN_IF_ERROR(GetDouble(r, "latency_ms", "response.latency_ms", &response.latency_ms));
  KSEARCH_RETURN_IF_ERROR(GetInt(r, "attempts", "response.attempts", &response.attempts));
  KSEARCH_RETURN_IF_ERROR(GetDouble(r, "cost_usd", "response.cost_usd", &response.cost_usd));
  KSEARCH_RETURN_IF_ERROR(GetString(r, "model", "response.model", &response.model));
  *out = std::move(response);
  return Status();
}

}  // namespace

std::string ExchangeToJsonLine(const LlmExchange& exchange) {
  const ChatRequest& q = exchange.request;
  json::object request;
  llm::AppendChatRequestFields(q, &request);
  request["timeout_seconds"] = q.timeout_seconds;
  request["tag"] = q.tag;
  json::object line{{"version", kRecordingVersion},
                    {"provider", exchange.provider},
                    {"request_id", exchange.request_id},
                    {"request_hash", RequestHash(q)},
                    {"started_unix_ms", exchange.started_unix_ms},
                    {"request", std::move(request)}};
  if (exchange.response.ok()) {
    line["response"] = llm::ChatResponseToJson(*exchange.response);
  } else {
    line["error"] = llm::ErrorToJson(exchange.response.status());
  }
  return json::serialize(line);
}

StatusOr<LlmExchange> ExchangeFromJsonLine(std::string_view text) {
  dom::parser parser;
  dom::element root;
  simdjson::error_code error = parser.parse(text.data(), text.size()).get(root);
  if (error != simdjson::SUCCESS) {
    return DataLossError(std::string("not JSON: ") + simdjson::error_message(error));
  }
  if (!root.is_object()) return InvalidArgumentError("expected a JSON object");
  int64_t version = 0;
  KSEARCH_RETURN_IF_ERROR(GetInt(root, "version", "version", &version));
  if (version != kRecordingVersion) {
    return InvalidArgumentError("version: " + std::to_string(version) + " is not supported (" +
                                std::to_string(kRecordingVersion) + " is)");
  }
  LlmExchange exchange;
  KSEARCH_RETURN_IF_ERROR(GetString(root, "provider", "provider", &exchange.provider));
  KSEARCH_RETURN_IF_ERROR(GetInt(root, "request_id", "request_id", &exchange.request_id));
  KSEARCH_RETURN_IF_ERROR(
      GetInt(root, "started_unix_ms", "started_unix_ms", &exchange.started_unix_ms));
  KSEARCH_RETURN_IF_ERROR(ReadRequest(root, &exchange.request));
  exchange.request_hash = RequestHash(exchange.request);
  KSEARCH_RETURN_IF_ERROR(ReadResult(root, &exchange.response));
  return exchange;
}

StatusOr<std::vector<LlmExchange>> LoadLlmRecording(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return FileError("LLM recording", path, errno);
  std::vector<LlmExchange> exchanges;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    StatusOr<LlmExchange> exchange = ExchangeFromJsonLine(line);
    if (!exchange.ok()) {
      return exchange.status().WithContext(path + ":" + std::to_string(number));
    }
    exchanges.push_back(std::move(*exchange));
  }
  if (in.bad()) return FileError("reading LLM recording", path, errno);
  return exchanges;
}

Status SaveLlmRecording(const std::string& path, const std::vector<LlmExchange>& exchanges) {
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (file == nullptr) return FileError("creating LLM recording", path, errno);
  for (const LlmExchange& exchange : exchanges) {
    std::string line = ExchangeToJsonLine(exchange);
    line.push_back('\n');
    if (std::fwrite(line.data(), 1, line.size(), file) != line.size()) {
      int error = errno;
      std::fclose(file);
      return FileError("writing LLM recording", path, error);
    }
  }
  if (std::fclose(file) != 0) return FileError("closing LLM recording", path, errno);
  return Status();
}

struct LlmRecorder::State {
  std::string path;
  std::mutex mutex;
  std::FILE* file = nullptr;
  int64_t recorded = 0;
  Status status;
};

StatusOr<std::unique_ptr<LlmRecorder>> LlmRecorder::Open(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "ab");
  if (file == nullptr) return FileError("opening LLM recording", path, errno);
  auto state = std::make_unique<State>();
  state->path = path;
  state->file = file;
  return std::unique_ptr<LlmRecorder>(new LlmRecorder(std::move(state)));
}

LlmRecorder::LlmRecorder(std::unique_ptr<State> state) : state_(std::move(state)) {}

LlmRecorder::~LlmRecorder() {
  if (state_->file != nullptr && std::fclose(state_->file) != 0) {
    std::fprintf(stderr, "ksearch: closing LLM recording %s: %s\n", state_->path.c_str(),
                 std::strerror(errno));
  }
}

void LlmRecorder::Record(const LlmExchange& exchange) {
  std::string line = ExchangeToJsonLine(exchange);
  line.push_back('\n');
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (!state_->status.ok()) return;
  // A flush per line: a killed search keeps every exchange it paid for.
  if (std::fwrite(line.data(), 1, line.size(), state_->file) != line.size() ||
      std::fflush(state_->file) != 0) {
    state_->status = FileError("writing LLM recording", state_->path, errno);
    return;
  }
  ++state_->recorded;
}

LlmClient::ExchangeObserver LlmRecorder::observer() {
  return [this](const LlmExchange& exchange) { Record(exchange); };
}

int64_t LlmRecorder::recorded() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->recorded;
}

Status LlmRecorder::status() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->status;
}

}  // namespace ksearch
