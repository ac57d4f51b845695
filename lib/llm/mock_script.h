// The mock server's script format (docs/llm.md), parsed apart from the server
// so that the Asio translation unit stays free of simdjson.
#ifndef KSEARCH_LIB_LLM_MOCK_SCRIPT_H_
#define KSEARCH_LIB_LLM_MOCK_SCRIPT_H_

#include <optional>
#include <string_view>
#include <vector>

#include "ksearch/mock_llm_server.h"
#include "ksearch/status.h"

namespace ksearch::llm {

struct MockScript {
  std::optional<MockReply> default_reply;
  std::vector<MockReply> queue;
  std::vector<MockRule> rules;
};

// Errors: kDataLoss (not JSON), kInvalidArgument (naming the field).
StatusOr<MockScript> ParseMockScript(std::string_view json);

}  // namespace ksearch::llm

#endif  // KSEARCH_LIB_LLM_MOCK_SCRIPT_H_
