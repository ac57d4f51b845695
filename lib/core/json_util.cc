#include "core/json_util.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include <boost/json/stream_parser.hpp>

namespace ksearch::internal {
namespace {

// "line 3, column 14": where a JSON parser stops reading `text` (simdjson's
// DOM parser does not say). Empty when that parser reads it whole.
std::string ErrorLocation(std::string_view text) {
  boost::json::stream_parser parser;
  boost::system::error_code ec;
  size_t consumed = parser.write_some(text.data(), text.size(), ec);
  if (!ec) parser.finish(ec);
  if (!ec) return "";
  consumed = std::min(consumed, text.size());
  size_t line = 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + consumed, '\n'));
  size_t line_start = text.rfind('\n', consumed == 0 ? 0 : consumed - 1);
  size_t column = line_start == std::string_view::npos || consumed == 0 ? consumed + 1
                                                                         : consumed - line_start;
  return "line " + std::to_string(line) + ", column " + std::to_string(column);
}

}  // namespace

namespace {

// JSON leaves repeated keys to the reader: simdjson finds the first, Python and
// Boost.JSON's serializer keep the last. A document that means one thing here
// and another in a review tool or after a round trip through ToJson is refused.
Status CheckUniqueKeys(const JsonNode& node, const simdjson::dom::object& object) {
  std::unordered_set<std::string_view> seen;
  for (auto field : object) {
    if (!seen.insert(field.key).second) {
      std::string key(field.key.substr(0, 60));
      return node.Error("duplicate key '" + key + (field.key.size() > 60 ? "...'" : "'"));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::unique_ptr<JsonDocument>> JsonDocument::Parse(std::string_view text,
                                                            std::string_view origin) {
  auto doc = std::make_unique<JsonDocument>();
  doc->origin_ = std::string(origin);
  simdjson::padded_string padded(text);
  // The parser owns the parsed tape; `padded` only needs to live for parse().
  auto result = doc->parser_.parse(padded);
  if (result.error()) {
    std::string where = ErrorLocation(text);
    return InvalidArgumentError(doc->origin_ + ": malformed JSON" +
                                (where.empty() ? "" : " at " + where) + ": " +
                                simdjson::error_message(result.error()));
  }
  doc->root_ = result.value_unsafe();
  return doc;
}

Status JsonNode::Error(std::string_view message) const {
  std::string text = *origin_;
  text += ": ";
  text += path_.empty() ? std::string("(top level)") : path_;
  text += ": ";
  text += message;
  return InvalidArgumentError(std::move(text));
}

std::string JsonNode::Describe() const {
  std::string text = Minified();
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

std::string JsonNode::Minified() const { return simdjson::minify(element_); }

std::string JsonNode::Child(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

StatusOr<std::optional<JsonNode>> JsonNode::Find(std::string_view key) const {
  if (!element_.is_object()) return Error("expected an object, got " + Describe());
  simdjson::dom::object object;
  if (element_.get_object().get(object)) return Error("expected an object, got " + Describe());
  auto member = object[key];
  if (member.error() == simdjson::NO_SUCH_FIELD) return std::optional<JsonNode>();
  if (member.error()) return Error(simdjson::error_message(member.error()));
  return std::optional<JsonNode>(JsonNode(member.value_unsafe(), Child(key), origin_));
}

StatusOr<JsonNode> JsonNode::Required(std::string_view key) const {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> node, Find(key));
  if (!node) return Error("missing required field '" + std::string(key) + "'");
  return *node;
}

Status JsonNode::CheckKeys(const std::vector<std::string_view>& known) const {
  if (!element_.is_object()) return Error("expected an object, got " + Describe());
  simdjson::dom::object object;
  if (element_.get_object().get(object)) return Error("expected an object, got " + Describe());
  KSEARCH_RETURN_IF_ERROR(CheckUniqueKeys(*this, object));
  for (auto field : object) {
    if (std::find(known.begin(), known.end(), field.key) == known.end()) {
      std::string list;
      for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      return JsonNode(field.value, Child(field.key), origin_)
          .Error("unknown field (known fields here: " + list + ")");
    }
  }
  return Status::Ok();
}

StatusOr<std::string> JsonNode::String() const {
  if (!element_.is_string()) return Error("expected a string, got " + Describe());
  return std::string(element_.get_string().value_unsafe());
}

StatusOr<int64_t> JsonNode::Int() const {
  if (element_.is_int64()) return element_.get_int64().value_unsafe();
  if (element_.is_uint64()) return Error("integer out of 64-bit range: " + Describe());
  if (element_.is_double()) {
    double value = element_.get_double().value_unsafe();
    // The range first: converting a double beyond int64 (1e300) is undefined
    // behaviour (caught by the plan fuzz target under UBSan).
    if (value < 9.0e18 && value > -9.0e18 && value == std::trunc(value)) {
      return static_cast<int64_t>(value);
    }
  }
  return Error("expected an integer, got " + Describe());
}

StatusOr<double> JsonNode::Double() const {
  if (element_.is_number()) return element_.get_double().value_unsafe();
  return Error("expected a number, got " + Describe());
}

StatusOr<bool> JsonNode::Bool() const {
  if (element_.is_bool()) return element_.get_bool().value_unsafe();
  return Error("expected true or false, got " + Describe());
}

StatusOr<std::string> JsonNode::Expression() const {
  if (element_.is_string()) return std::string(element_.get_string().value_unsafe());
  if (IsInteger()) {
    KSEARCH_ASSIGN_OR_RETURN(int64_t value, Int());
    return std::to_string(value);
  }
  return Error("expected an integer or an expression string, got " + Describe());
}

StatusOr<std::vector<JsonNode>> JsonNode::Array() const {
  if (!element_.is_array()) return Error("expected an array, got " + Describe());
  std::vector<JsonNode> out;
  size_t index = 0;
  // Iterate a named local: the simdjson_result temporary would not outlive
  // the loop's range expression.
  simdjson::dom::array array;
  if (element_.get_array().get(array)) return Error("expected an array, got " + Describe());
  for (auto item : array) {
    out.emplace_back(item, path_ + "[" + std::to_string(index++) + "]", origin_);
  }
  return out;
}

StatusOr<std::vector<std::pair<std::string, JsonNode>>> JsonNode::Members() const {
  if (!element_.is_object()) return Error("expected an object, got " + Describe());
  std::vector<std::pair<std::string, JsonNode>> out;
  simdjson::dom::object object;
  if (element_.get_object().get(object)) return Error("expected an object, got " + Describe());
  KSEARCH_RETURN_IF_ERROR(CheckUniqueKeys(*this, object));
  for (auto field : object) {
    out.emplace_back(std::string(field.key), JsonNode(field.value, Child(field.key), origin_));
  }
  return out;
}

StatusOr<std::vector<std::pair<std::string, int64_t>>> JsonNode::IntMembers() const {
  KSEARCH_ASSIGN_OR_RETURN(auto members, Members());
  std::vector<std::pair<std::string, int64_t>> out;
  for (auto& [key, value] : members) {
    KSEARCH_ASSIGN_OR_RETURN(int64_t v, value.Int());
    out.emplace_back(key, v);
  }
  return out;
}

StatusOr<double> NumberFromNode(const JsonNode& node) {
  if (node.IsNumber()) return node.Double();
  if (node.element().is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (node.IsString()) {
    KSEARCH_ASSIGN_OR_RETURN(std::string text, node.String());
    if (text == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (text == "inf") return std::numeric_limits<double>::infinity();
    if (text == "-inf") return -std::numeric_limits<double>::infinity();
  }
  return node.Error("expected a number (or \"nan\", \"inf\", \"-inf\"), got " + node.Describe());
}

namespace {

template <typename T, typename Get>
Status ReadWith(const JsonNode& object, std::string_view key, T* out, Get get) {
  KSEARCH_ASSIGN_OR_RETURN(std::optional<JsonNode> node, object.Find(key));
  if (!node) return Status::Ok();
  KSEARCH_ASSIGN_OR_RETURN(*out, get(*node));
  return Status::Ok();
}

}  // namespace

Status ReadMember(const JsonNode& object, std::string_view key, std::string* out) {
  return ReadWith(object, key, out, [](const JsonNode& n) { return n.String(); });
}

Status ReadMember(const JsonNode& object, std::string_view key, int64_t* out) {
  return ReadWith(object, key, out, [](const JsonNode& n) { return n.Int(); });
}

Status ReadMember(const JsonNode& object, std::string_view key, int* out) {
  int64_t value = *out;
  KSEARCH_RETURN_IF_ERROR(ReadMember(object, key, &value));
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max()) {
    return object.Error(std::string(key) + ": " + std::to_string(value) +
                        " does not fit in 32 bits");
  }
  *out = static_cast<int>(value);
  return Status::Ok();
}

Status ReadMember(const JsonNode& object, std::string_view key, double* out) {
  return ReadWith(object, key, out, NumberFromNode);
}

Status ReadMember(const JsonNode& object, std::string_view key, bool* out) {
  return ReadWith(object, key, out, [](const JsonNode& n) { return n.Bool(); });
}

}  // namespace ksearch::internal
