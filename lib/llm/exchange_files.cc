// The exchange folder's files (ksearch/exchange_llm_client.h): request and
// reply formats, listing a folder, loading it as a recording.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>

#include <boost/json.hpp>
#include <simdjson.h>

#include "core/file_util.h"
#include "core/json_util.h"
#include "ksearch/exchange_llm_client.h"
#include "ksearch/run_report.h"
#include "llm/chat_json.h"

namespace ksearch {
namespace {

using internal::JsonDocument;
using internal::JsonNode;

constexpr int kExchangeVersion = 1;
constexpr size_t kMaxNameTagBytes = 64;
constexpr size_t kMaxReplyBytes = size_t{16} << 20;

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// An error about a reply file, with the code a provider's malformed reply
// gets (llm_client.h): kUnimplemented for a field, kDataLoss for the rest.
Status ReplyFieldError(const Status& status) { return UnimplementedError(status.message()); }

StatusOr<ChatMessage> ReadMessage(const JsonNode& node) {
  KSEARCH_RETURN_IF_ERROR(node.CheckKeys({"role", "content"}));
  ChatMessage message;
  KSEARCH_ASSIGN_OR_RETURN(JsonNode role_node, node.Required("role"));
  KSEARCH_ASSIGN_OR_RETURN(std::string role, role_node.String());
  if (role == "user") {
    message.role = ChatMessage::Role::kUser;
  } else if (role == "assistant") {
    message.role = ChatMessage::Role::kAssistant;
  } else {
    return role_node.Error("expected \"user\" or \"assistant\", got " + role_node.Describe() +
                           " (the system prompt has a field of its own)");
  }
  KSEARCH_ASSIGN_OR_RETURN(JsonNode content, node.Required("content"));
  KSEARCH_ASSIGN_OR_RETURN(message.content, content.String());
  return message;
}

// A required member read with one of JsonNode's typed getters.
template <typename T, typename Get>
Status ReadRequired(const JsonNode& object, std::string_view key, T* out, Get get) {
  KSEARCH_ASSIGN_OR_RETURN(JsonNode node, object.Required(key));
  KSEARCH_ASSIGN_OR_RETURN(*out, get(node));
  return Status::Ok();
}

StatusOr<ChatResponse> ReadResponse(const JsonNode& root) {
  ChatResponse response;
  KSEARCH_RETURN_IF_ERROR(
      ReadRequired(root, "content", &response.content, [](const JsonNode& n) { return n.String(); }));
  KSEARCH_RETURN_IF_ERROR(ReadRequired(root, "input_tokens", &response.input_tokens,
                                       [](const JsonNode& n) { return n.Int(); }));
  KSEARCH_RETURN_IF_ERROR(ReadRequired(root, "output_tokens", &response.output_tokens,
                                       [](const JsonNode& n) { return n.Int(); }));
  if (response.input_tokens < 0 || response.output_tokens < 0) {
    return root.Error("input_tokens and output_tokens must be at least 0, got " +
                      std::to_string(response.input_tokens) + " and " +
                      std::to_string(response.output_tokens));
  }
  std::string finish = "stop";
  KSEARCH_RETURN_IF_ERROR(internal::ReadMember(root, "finish_reason", &finish));
  StatusOr<FinishReason> reason = llm::FinishReasonFromString(finish);
  if (!reason.ok()) return root.Error("finish_reason: " + reason.status().message());
  response.finish_reason = *reason;
  KSEARCH_RETURN_IF_ERROR(internal::ReadMember(root, "model", &response.model));
  KSEARCH_RETURN_IF_ERROR(internal::ReadMember(root, "cost_usd", &response.cost_usd));
  KSEARCH_RETURN_IF_ERROR(internal::ReadMember(root, "latency_ms", &response.latency_ms));
  KSEARCH_RETURN_IF_ERROR(internal::ReadMember(root, "attempts", &response.attempts));
  if (!(response.cost_usd >= 0)) return root.Error("cost_usd: must be a number of at least 0");
  return response;
}

// The error an answering side recorded, {"error": {"code", "message"}},
// into `recorded`; fails when the object is malformed.
Status ReadRecordedError(const JsonNode& error, Status* recorded) {
  KSEARCH_RETURN_IF_ERROR(error.CheckKeys({"code", "message"}));
  std::string code_name, message;
  KSEARCH_RETURN_IF_ERROR(
      ReadRequired(error, "code", &code_name, [](const JsonNode& n) { return n.String(); }));
  KSEARCH_RETURN_IF_ERROR(
      ReadRequired(error, "message", &message, [](const JsonNode& n) { return n.String(); }));
  StatusOr<StatusCode> code = llm::StatusCodeFromString(code_name);
  if (!code.ok()) return error.Error("code: " + code.status().message());
  if (*code == StatusCode::kOk) return error.Error("code: OK is not an error");
  *recorded = Status(*code, std::move(message));
  return Status::Ok();
}

StatusOr<ExchangeReply> ReadJsonReply(const std::string& path, const std::string& text) {
  auto doc = JsonDocument::Parse(text, path);
  if (!doc.ok()) return DataLossError(doc.status().message());
  JsonNode root = JsonNode::Root(**doc);
  Status keys = root.CheckKeys({"version", "content", "finish_reason", "input_tokens",
                                "output_tokens", "latency_ms", "attempts", "cost_usd", "model",
                                "error"});
  if (!keys.ok()) return ReplyFieldError(keys);
  int64_t version = kExchangeVersion;
  if (Status s = internal::ReadMember(root, "version", &version); !s.ok()) {
    return ReplyFieldError(s);
  }
  if (version != kExchangeVersion) {
    return UnimplementedError(path + ": version: " + std::to_string(version) +
                              " is not supported (" + std::to_string(kExchangeVersion) + " is)");
  }
  ExchangeReply out;
  auto error = root.Find("error");
  if (!error.ok()) return ReplyFieldError(error.status());
  if (*error) {
    Status recorded;
    if (Status bad = ReadRecordedError(**error, &recorded); !bad.ok()) return ReplyFieldError(bad);
    out.reply = recorded;
    return out;
  }
  StatusOr<ChatResponse> response = ReadResponse(root);
  if (!response.ok()) return ReplyFieldError(response.status());
  out.reply = std::move(*response);
  return out;
}

Status ListDirectory(const std::string& folder, std::vector<std::string>* names) {
  DIR* dir = ::opendir(folder.c_str());
  if (dir == nullptr) {
    int error = errno;
    std::string message = folder + ": cannot list: " + std::strerror(error);
    if (error == ENOENT) return NotFoundError(message);
    if (error == EACCES) return PermissionDeniedError(message);
    return UnknownError(message);
  }
  while (const dirent* entry = ::readdir(dir)) names->emplace_back(entry->d_name);
  ::closedir(dir);
  std::sort(names->begin(), names->end());
  return Status::Ok();
}

bool IsFile(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

}  // namespace

std::string ExchangeRequestName(const ChatRequest& request) {
  std::string slug;
  for (char c : request.tag) {
    if (slug.size() >= kMaxNameTagBytes) break;
    const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    // Runs of anything else become one '-'.
    if (safe) {
      slug.push_back(c);
    } else if (!slug.empty() && slug.back() != '-') {
      slug.push_back('-');
    }
  }
  // A leading '.' would hide the file and look like a temporary one.
  slug.erase(0, slug.find_first_not_of(".-"));
  while (!slug.empty() && (slug.back() == '-' || slug.back() == '.')) slug.pop_back();
  if (slug.empty()) slug = "request";
  return slug + "-" + RequestHash(request).substr(0, 16);
}

std::string ExchangeRequestToJson(const ChatRequest& request) {
  boost::json::object o{{"version", kExchangeVersion},
                        {"name", ExchangeRequestName(request)},
                        {"tag", request.tag},
                        {"request_hash", RequestHash(request)}};
  llm::AppendChatRequestFields(request, &o);
  return IndentJson(boost::json::serialize(o)) + "\n";
}

StatusOr<ChatRequest> ExchangeRequestFromJson(std::string_view text, std::string_view origin) {
  KSEARCH_ASSIGN_OR_RETURN(auto doc, JsonDocument::Parse(text, origin));
  JsonNode root = JsonNode::Root(*doc);
  KSEARCH_RETURN_IF_ERROR(root.CheckKeys({"version", "name", "tag", "request_hash", "model",
                                          "max_tokens", "temperature", "reasoning_effort",
                                          "thinking_budget_tokens", "stop", "system",
                                          "messages"}));
  int64_t version = 0;
  KSEARCH_RETURN_IF_ERROR(
      ReadRequired(root, "version", &version, [](const JsonNode& n) { return n.Int(); }));
  if (version != kExchangeVersion) {
    return root.Error("version: " + std::to_string(version) + " is not supported (" +
                      std::to_string(kExchangeVersion) + " is)");
  }
  ChatRequest request;
  std::string name, hash;
  auto string = [](const JsonNode& n) { return n.String(); };
  KSEARCH_RETURN_IF_ERROR(ReadRequired(root, "name", &name, string));
  KSEARCH_RETURN_IF_ERROR(ReadRequired(root, "tag", &request.tag, string));
  KSEARCH_RETURN_IF_ERROR(ReadRequired(root, "request_hash", &hash, string));
  KSEARCH_RETURN_IF_ERROR(ReadRequired(root, "model", &request.model, string));
  KSEARCH_RETURN_IF_ERROR(ReadRequired(root, "system", &request.system, string));
  KSEARCH_RETURN_IF_ERROR(ReadRequired(root, "max_tokens", &request.max_tokens,
                                       [](const JsonNode& n) -> StatusOr<int> {
                                         KSEARCH_ASSIGN_OR_RETURN(int64_t v, n.Int());
                                         if (v < 1 || v > (int64_t{1} << 30)) {
                                           return n.Error("expected a positive token count, got " +
                                                          n.Describe());
                                         }
                                         return static_cast<int>(v);
                                       }));
  KSEARCH_ASSIGN_OR_RETURN(auto temperature, root.Find("temperature"));
  if (temperature && !temperature->element().is_null()) {
    KSEARCH_ASSIGN_OR_RETURN(double t, temperature->Double());
    request.temperature = t;
  }
  KSEARCH_RETURN_IF_ERROR(internal::ReadMember(root, "reasoning_effort", &request.reasoning_effort));
  KSEARCH_RETURN_IF_ERROR(
      internal::ReadMember(root, "thinking_budget_tokens", &request.thinking_budget_tokens));
  KSEARCH_ASSIGN_OR_RETURN(auto stop, root.Find("stop"));
  if (stop) {
    KSEARCH_ASSIGN_OR_RETURN(auto items, stop->Array());
    for (const JsonNode& item : items) {
      KSEARCH_ASSIGN_OR_RETURN(std::string s, item.String());
      request.stop.push_back(std::move(s));
    }
  }
  KSEARCH_ASSIGN_OR_RETURN(JsonNode messages, root.Required("messages"));
  KSEARCH_ASSIGN_OR_RETURN(auto items, messages.Array());
  for (const JsonNode& item : items) {
    KSEARCH_ASSIGN_OR_RETURN(ChatMessage message, ReadMessage(item));
    request.messages.push_back(std::move(message));
  }
  if (request.messages.empty()) return messages.Error("expected at least one message");
  const std::string actual = RequestHash(request);
  if (hash != actual) {
    return FailedPreconditionError(std::string(origin) + ": request_hash: " + hash +
                                   " does not match the request's content (" + actual +
                                   "): the file was edited after ksearch wrote it");
  }
  if (name != ExchangeRequestName(request)) {
    return FailedPreconditionError(std::string(origin) + ": name: \"" + name +
                                   "\" does not match the request (expected \"" +
                                   ExchangeRequestName(request) + "\")");
  }
  return request;
}

std::string ExchangeReplyToJson(const StatusOr<ChatResponse>& reply) {
  boost::json::object o{{"version", kExchangeVersion}};
  if (reply.ok()) {
    for (auto& field : llm::ChatResponseToJson(*reply)) o.emplace(field.key(), field.value());
  } else {
    o["error"] = llm::ErrorToJson(reply.status());
  }
  return IndentJson(boost::json::serialize(o)) + "\n";
}

StatusOr<ExchangeReply> ReadExchangeReply(const std::string& path) {
  KSEARCH_ASSIGN_OR_RETURN(std::string text, internal::ReadFile(path, kMaxReplyBytes));
  if (EndsWith(path, ".json")) return ReadJsonReply(path, text);
  if (!simdjson::validate_utf8(text.data(), text.size())) {
    return DataLossError(path + ": not UTF-8 text");
  }
  ExchangeReply out;
  ChatResponse response;
  response.content = std::move(text);
  out.reply = std::move(response);
  out.usage_known = false;
  return out;
}

StatusOr<std::vector<ExchangeFile>> ListExchangeFolder(const std::string& folder) {
  const std::string requests = internal::JoinPath(folder, "requests");
  const std::string replies = internal::JoinPath(folder, "replies");
  std::vector<std::string> names;
  KSEARCH_RETURN_IF_ERROR(ListDirectory(requests, &names));
  std::vector<ExchangeFile> out;
  for (const std::string& entry : names) {
    if (entry.starts_with(".") || !EndsWith(entry, ".json")) continue;
    ExchangeFile file;
    file.name = entry.substr(0, entry.size() - 5);
    file.request_path = internal::JoinPath(requests, entry);
    if (!IsFile(file.request_path)) continue;
    for (const char* extension : {".json", ".txt"}) {
      std::string reply = internal::JoinPath(replies, file.name + extension);
      if (IsFile(reply)) {
        file.reply_path = std::move(reply);
        break;
      }
    }
    out.push_back(std::move(file));
  }
  return out;
}

StatusOr<std::vector<LlmExchange>> LoadExchangeFolder(const std::string& folder) {
  KSEARCH_ASSIGN_OR_RETURN(std::vector<ExchangeFile> files, ListExchangeFolder(folder));
  std::vector<LlmExchange> out;
  uint64_t id = 0;
  for (const ExchangeFile& file : files) {
    if (file.reply_path.empty()) continue;
    KSEARCH_ASSIGN_OR_RETURN(std::string text, internal::ReadFile(file.request_path));
    KSEARCH_ASSIGN_OR_RETURN(ChatRequest request,
                             ExchangeRequestFromJson(text, file.request_path));
    KSEARCH_ASSIGN_OR_RETURN(ExchangeReply reply, ReadExchangeReply(file.reply_path));
    LlmExchange exchange;
    exchange.provider = "exchange";
    exchange.request_hash = RequestHash(request);
    exchange.request = std::move(request);
    exchange.response = std::move(reply.reply);
    exchange.request_id = ++id;
    out.push_back(std::move(exchange));
  }
  return out;
}

}  // namespace ksearch
