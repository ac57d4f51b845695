#include "llm/mock_script.h"

#include <string>

#include <simdjson.h>

namespace ksearch {

std::string_view ToString(MockFault fault) {
  switch (fault) {
    case MockFault::kNone:
      return "none";
    case MockFault::kHttpError:
      return "http_error";
    case MockFault::kReset:
      return "reset";
    case MockFault::kDisconnectMidBody:
      return "disconnect_mid_body";
    case MockFault::kMalformedJson:
      return "malformed_json";
    case MockFault::kMissingFields:
      return "missing_fields";
    case MockFault::kRefusal:
      return "refusal";
    case MockFault::kHang:
      return "hang";
  }
  return "none";
}

StatusOr<MockFault> ParseMockFault(std::string_view name) {
  for (MockFault fault : {MockFault::kNone, MockFault::kHttpError, MockFault::kReset,
                          MockFault::kDisconnectMidBody, MockFault::kMalformedJson,
                          MockFault::kMissingFields, MockFault::kRefusal, MockFault::kHang}) {
    if (ToString(fault) == name) return fault;
  }
  return InvalidArgumentError("unknown mock fault \"" + std::string(name) +
                              "\"; expected none, http_error, reset, disconnect_mid_body, "
                              "malformed_json, missing_fields, refusal or hang");
}

namespace llm {
namespace {

namespace dom = simdjson::dom;

Status Bad(const std::string& where, std::string_view what) {
  return InvalidArgumentError("mock script: " + where + ": " + std::string(what));
}

StatusOr<MockReply> ParseReply(dom::element element, const std::string& where) {
  dom::object object;
  if (element.get_object().get(object) != simdjson::SUCCESS) {
    return Bad(where, "expected an object");
  }
  MockReply reply;
  for (dom::key_value_pair field : object) {
    const std::string key(field.key);
    const std::string at = where + "." + key;
    std::string_view text;
    double number = 0;
    const bool is_text = field.value.get_string().get(text) == simdjson::SUCCESS;
    const bool is_number = field.value.get_double().get(number) == simdjson::SUCCESS;
    if (key == "content" || key == "error_message" || key == "fault" || key == "finish_reason") {
      if (!is_text) return Bad(at, "expected a string");
      if (key == "content") {
        reply.content = std::string(text);
      } else if (key == "error_message") {
        reply.error_message = std::string(text);
      } else if (key == "fault") {
        StatusOr<MockFault> fault = ParseMockFault(text);
        if (!fault.ok()) return Bad(at, fault.status().message());
        reply.fault = *fault;
      } else if (text == "stop") {
        reply.finish_reason = FinishReason::kStop;
      } else if (text == "length") {
        reply.finish_reason = FinishReason::kLength;
      } else if (text == "stop_sequence") {
        reply.finish_reason = FinishReason::kStopSequence;
      } else if (text == "other") {
        reply.finish_reason = FinishReason::kOther;
      } else {
        return Bad(at, "expected stop, length, stop_sequence or other");
      }
      continue;
    }
    if (!is_number) return Bad(at, "expected a number");
    if (key == "input_tokens") {
      reply.input_tokens = static_cast<int64_t>(number);
    } else if (key == "output_tokens") {
      reply.output_tokens = static_cast<int64_t>(number);
    } else if (key == "pad_content_to_bytes") {
      if (number < 0) return Bad(at, "expected a number >= 0");
      reply.pad_content_to_bytes = static_cast<size_t>(number);
    } else if (key == "http_status") {
      if (number < 100 || number > 599) return Bad(at, "expected an HTTP status (100-599)");
      reply.http_status = static_cast<int>(number);
      if (reply.fault == MockFault::kNone) reply.fault = MockFault::kHttpError;
    } else if (key == "retry_after_seconds") {
      reply.retry_after_seconds = number;
    } else if (key == "delay_ms") {
      if (number < 0) return Bad(at, "expected a number >= 0");
      reply.delay_ms = number;
    } else if (key == "repeat") {
      if (number < 1) return Bad(at, "expected a number >= 1");
      reply.repeat = static_cast<int>(number);
    } else {
      return Bad(at, "unknown field");
    }
  }
  return reply;
}

}  // namespace

StatusOr<MockScript> ParseMockScript(std::string_view json) {
  dom::parser parser;
  dom::element root;
  simdjson::error_code error = parser.parse(json.data(), json.size()).get(root);
  if (error != simdjson::SUCCESS) {
    return DataLossError(std::string("mock script: not JSON: ") + simdjson::error_message(error));
  }
  dom::object object;
  if (root.get_object().get(object) != simdjson::SUCCESS) {
    return Bad("top level", "expected an object");
  }
  MockScript script;
  for (dom::key_value_pair field : object) {
    const std::string key(field.key);
    if (key == "default") {
      KSEARCH_ASSIGN_OR_RETURN(script.default_reply, ParseReply(field.value, "default"));
    } else if (key == "queue") {
      dom::array queue;
      if (field.value.get_array().get(queue) != simdjson::SUCCESS) {
        return Bad("queue", "expected an array");
      }
      size_t index = 0;
      for (dom::element entry : queue) {
        KSEARCH_ASSIGN_OR_RETURN(MockReply reply,
                                 ParseReply(entry, "queue[" + std::to_string(index++) + "]"));
        script.queue.push_back(std::move(reply));
      }
    } else if (key == "rules") {
      dom::array rules;
      if (field.value.get_array().get(rules) != simdjson::SUCCESS) {
        return Bad("rules", "expected an array");
      }
      size_t index = 0;
      for (dom::element entry : rules) {
        const std::string where = "rules[" + std::to_string(index++) + "]";
        dom::object rule_object;
        if (entry.get_object().get(rule_object) != simdjson::SUCCESS) {
          return Bad(where, "expected an object");
        }
        MockRule rule;
        bool has_reply = false;
        for (dom::key_value_pair rule_field : rule_object) {
          const std::string rule_key(rule_field.key);
          std::string_view text;
          int64_t times = 0;
          if (rule_key == "contains" || rule_key == "regex") {
            if (rule_field.value.get_string().get(text) != simdjson::SUCCESS) {
              return Bad(where + "." + rule_key, "expected a string");
            }
            (rule_key == "contains" ? rule.contains : rule.regex) = std::string(text);
          } else if (rule_key == "times") {
            if (rule_field.value.get_int64().get(times) != simdjson::SUCCESS) {
              return Bad(where + ".times", "expected an integer");
            }
            rule.times = static_cast<int>(times);
          } else if (rule_key == "reply") {
            KSEARCH_ASSIGN_OR_RETURN(rule.reply, ParseReply(rule_field.value, where + ".reply"));
            has_reply = true;
          } else {
            return Bad(where + "." + rule_key, "unknown field");
          }
        }
        if (!has_reply) return Bad(where, "needs a reply");
        script.rules.push_back(std::move(rule));
      }
    } else {
      return Bad(key, "unknown field (expected default, queue, rules)");
    }
  }
  return script;
}

}  // namespace llm
}  // namespace ksearch
