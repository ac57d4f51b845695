// Reading JSON with simdjson and reporting errors that name the file, the field
// path and the bad value ("p.json: tensors[1].dtype: expected a string, got 3").
// Writing goes through Boost.JSON (see ToJson functions), not this header.
#ifndef KSEARCH_CORE_JSON_UTIL_H_
#define KSEARCH_CORE_JSON_UTIL_H_

#include <simdjson.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/status.h"

namespace ksearch::internal {

// A parsed document plus the name it is reported under. Nodes borrow it.
class JsonDocument {
 public:
  // Errors: kInvalidArgument "ORIGIN: malformed JSON: …".
  static StatusOr<std::unique_ptr<JsonDocument>> Parse(std::string_view text,
                                                        std::string_view origin);
  const std::string& origin() const { return origin_; }
  simdjson::dom::element root() const { return root_; }

 private:
  simdjson::dom::parser parser_;
  simdjson::dom::element root_;
  std::string origin_;
};

// A value inside a document together with its path for error messages.
class JsonNode {
 public:
  JsonNode(simdjson::dom::element element, std::string path, const std::string* origin)
      : element_(element), path_(std::move(path)), origin_(origin) {}
  static JsonNode Root(const JsonDocument& doc) { return JsonNode(doc.root(), "", &doc.origin()); }

  const std::string& path() const { return path_; }
  simdjson::dom::element element() const { return element_; }
  bool IsObject() const { return element_.is_object(); }
  bool IsArray() const { return element_.is_array(); }
  bool IsString() const { return element_.is_string(); }
  bool IsNumber() const { return element_.is_number(); }
  bool IsInteger() const { return element_.is_int64() || element_.is_uint64(); }

  // An error about this node: "ORIGIN: PATH: message".
  Status Error(std::string_view message) const;
  // A short rendering of the value for messages (strings quoted, long text cut).
  std::string Describe() const;

  // Object member; nullopt when absent. Error when this is not an object.
  StatusOr<std::optional<JsonNode>> Find(std::string_view key) const;
  // Object member that must exist.
  StatusOr<JsonNode> Required(std::string_view key) const;
  // Errors when an object has members other than `known` (catches typos) or
  // names a member twice (readers disagree on which one counts).
  Status CheckKeys(const std::vector<std::string_view>& known) const;

  StatusOr<std::string> String() const;
  StatusOr<int64_t> Int() const;
  StatusOr<double> Double() const;
  StatusOr<bool> Bool() const;
  // An integer or a string, as text (expressions may be written either way).
  StatusOr<std::string> Expression() const;
  StatusOr<std::vector<JsonNode>> Array() const;
  // Members of an object in document order. Errors on a repeated key.
  StatusOr<std::vector<std::pair<std::string, JsonNode>>> Members() const;
  // An object of integers ({"M": 16, "N": 4096}), in document order.
  StatusOr<std::vector<std::pair<std::string, int64_t>>> IntMembers() const;
  // Minified JSON text of this value.
  std::string Minified() const;

 private:
  std::string Child(std::string_view key) const;
  simdjson::dom::element element_;
  std::string path_;
  const std::string* origin_;
};

// A double: a number, or the string "nan", "inf" or "-inf" (JSON has none of
// them; core/evaluation_json.h NumberToJson writes them so), or null (NaN).
StatusOr<double> NumberFromNode(const JsonNode& node);

// Optional members of an object node: absent leaves `*out` unchanged; a
// present member of the wrong type is an error naming its path. Doubles are
// read with NumberFromNode; an int that does not fit in 32 bits is an error.
Status ReadMember(const JsonNode& object, std::string_view key, std::string* out);
Status ReadMember(const JsonNode& object, std::string_view key, int64_t* out);
Status ReadMember(const JsonNode& object, std::string_view key, int* out);
Status ReadMember(const JsonNode& object, std::string_view key, double* out);
Status ReadMember(const JsonNode& object, std::string_view key, bool* out);

}  // namespace ksearch::internal

#endif  // KSEARCH_CORE_JSON_UTIL_H_
