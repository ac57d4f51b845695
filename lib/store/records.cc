#include "store/records.h"

#include <unistd.h>

#include <boost/json.hpp>

#include <cctype>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <optional>

#include "core/json_util.h"

namespace ksearch::internal {

std::string StringListToJson(const std::vector<std::string>& items) {
  return boost::json::serialize(boost::json::array(items.begin(), items.end()));
}

StatusOr<std::vector<std::string>> StringListFromJson(std::string_view json, std::string_view origin) {
  std::vector<std::string> out;
  if (json.empty()) return out;
  KSEARCH_ASSIGN_OR_RETURN(auto doc, JsonDocument::Parse(json, origin));
  KSEARCH_ASSIGN_OR_RETURN(auto items, JsonNode::Root(*doc).Array());
  for (const JsonNode& item : items) {
    KSEARCH_ASSIGN_OR_RETURN(std::string text, item.String());
    out.push_back(std::move(text));
  }
  return out;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

}  // namespace ksearch::internal
