// Small functions of the public LLM interface that need no I/O.
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>

#include <openssl/evp.h>

#include "ksearch/llm.h"
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
  char temperature[40];
  std::snprintf(temperature, sizeof temperature, "%.17g", request.temperature);
  AppendField(&canonical, temperature);
  AppendField(&canonical, std::to_string(request.max_tokens));
  AppendField(&canonical, std::to_string(request.stop.size()));
  for (const std::string& s : request.stop) AppendField(&canonical, s);

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
