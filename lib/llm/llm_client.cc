// Small functions of the public LLM interface that need no I/O.
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>

#include <openssl/evp.h>

#include "ksearch/http_llm_client.h"
#include "ksearch/llm_client.h"

namespace ksearch {
namespace {

// Length-prefixed fields: no content can make two different requests encode
// alike.
void AppendField(std::string* out, std::string_view field) {
  *out += std::to_string(field.size());
  out->push_back(':');
  out->append(field);
}

}  // namespace

std::string_view ToString(ChatMessage::Role role) {
  switch (role) {
    case ChatMessage::Role::kUser:
      return "user";
    case ChatMessage::Role::kAssistant:
      return "assistant";
  }
  return "user";
}

std::string_view ToString(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kStopSequence:
      return "stop_sequence";
    case FinishReason::kOther:
      return "other";
  }
  return "other";
}

std::string RequestHash(const ChatRequest& request) {
  std::string canonical = "ksearch.chat_request.v1;";
  AppendField(&canonical, request.model);
  AppendField(&canonical, request.system);
  AppendField(&canonical, std::to_string(request.messages.size()));
  for (const ChatMessage& m : request.messages) {
    AppendField(&canonical, ToString(m.role));
    AppendField(&canonical, m.content);
  }
  // %.17g round-trips every double, and reads the same on every platform.
  // No temperature hashes as 1, both providers' default (and what requests
  // carried before the field became optional, so older recordings match).
  char temperature[40];
  std::snprintf(temperature, sizeof temperature, "%.17g", request.temperature.value_or(1.0));
  AppendField(&canonical, temperature);
  AppendField(&canonical, std::to_string(request.max_tokens));
  AppendField(&canonical, std::to_string(request.stop.size()));
  for (const std::string& s : request.stop) AppendField(&canonical, s);
  // Appended only when set, so that the hashes of recordings written before
  // these fields existed stay valid.
  if (!request.reasoning_effort.empty()) {
    AppendField(&canonical, "reasoning_effort");
    AppendField(&canonical, request.reasoning_effort);
  }
  if (request.thinking_budget_tokens > 0) {
    AppendField(&canonical, "thinking_budget_tokens");
    AppendField(&canonical, std::to_string(request.thinking_budget_tokens));
  }

  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  if (EVP_Digest(canonical.data(), canonical.size(), digest, &length, EVP_sha256(), nullptr) !=
      1) {
    // SHA-256 is always present in libcrypto; failing here is a broken
    // installation, not a recoverable condition of one request.
    std::fprintf(stderr, "ksearch: EVP_Digest(SHA-256) failed\n");
    std::abort();
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(length * 2);
  for (unsigned int i = 0; i < length; ++i) {
    hex.push_back(kHex[digest[i] >> 4]);
    hex.push_back(kHex[digest[i] & 15]);
  }
  return hex;
}

namespace {

// Model families whose constraints differ from the defaults, by name prefix
// (the first match wins, so longer prefixes come first where they overlap).
struct ModelFamily {
  std::string_view provider;
  std::string_view prefix;
  ModelTraits traits;
};

constexpr ModelTraits kOpenAiReasoning{/*reasoning=*/true, /*accepts_temperature=*/false,
                                       /*accepts_reasoning_effort=*/true,
                                       /*max_tokens_field=*/"max_completion_tokens"};
// gpt-5-chat is the non-reasoning variant of gpt-5.
constexpr ModelTraits kOpenAiChat{};

constexpr ModelFamily kModelFamilies[] = {
    {"openai", "gpt-5-chat", kOpenAiChat},
    {"openai", "gpt-5", kOpenAiReasoning},
    {"openai", "o1", kOpenAiReasoning},
    {"openai", "o3", kOpenAiReasoning},
    {"openai", "o4", kOpenAiReasoning},
};

}  // namespace

ModelTraits TraitsOfModel(std::string_view provider, std::string_view model) {
  if (size_t slash = model.rfind('/'); slash != std::string_view::npos) {
    model = model.substr(slash + 1);
  }
  for (const ModelFamily& family : kModelFamilies) {
    if (family.provider == provider && model.starts_with(family.prefix)) return family.traits;
  }
  return ModelTraits{};
}

LlmTotals& LlmTotals::operator+=(const LlmTotals& other) {
  requests += other.requests;
  failures += other.failures;
  input_tokens += other.input_tokens;
  output_tokens += other.output_tokens;
  cost_usd += other.cost_usd;
  return *this;
}

LlmTotals LlmTotals::Of(const LlmExchange& exchange) {
  LlmTotals totals;
  totals.requests = 1;
  if (!exchange.response.ok()) {
    totals.failures = 1;
    return totals;
  }
  totals.input_tokens = exchange.response->input_tokens;
  totals.output_tokens = exchange.response->output_tokens;
  totals.cost_usd = exchange.response->cost_usd;
  return totals;
}

LlmFailureScope FailureScope(const Status& status) {
  switch (status.code()) {
    case StatusCode::kOutOfRange:
    case StatusCode::kDataLoss:
    case StatusCode::kUnimplemented:
    case StatusCode::kResourceExhausted:
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return LlmFailureScope::kReply;
    default:
      return LlmFailureScope::kRun;
  }
}

bool IsContextLengthError(const Status& status) {
  return status.code() == StatusCode::kOutOfRange &&
         status.message().find("context length exceeded") != std::string::npos;
}

std::string_view ToString(LlmProvider provider) {
  return provider == LlmProvider::kAnthropic ? "anthropic" : "openai";
}

StatusOr<LlmProvider> ParseLlmProvider(std::string_view name) {
  if (name == "openai" || name == "openai-compatible" || name == "vllm" || name == "ollama" ||
      name == "llamacpp" || name == "llama.cpp") {
    return LlmProvider::kOpenAi;
  }
  if (name == "anthropic") return LlmProvider::kAnthropic;
  return InvalidArgumentError("unknown LLM provider \"" + std::string(name) +
                              "\"; expected openai (or openai-compatible, vllm, ollama, "
                              "llamacpp) or anthropic");
}

StatusOr<ChatResponse> CompleteAndWait(LlmClient& client, ChatRequest request) {
  std::promise<StatusOr<ChatResponse>> promise;
  std::future<StatusOr<ChatResponse>> future = promise.get_future();
  client.Complete(std::move(request), [&promise](StatusOr<ChatResponse> result) {
    promise.set_value(std::move(result));
  });
  return future.get();
}

}  // namespace ksearch
