// Writing the CLI's --json documents with Boost.JSON: the library's own JSON
// texts embedded as values, and numbers in the form docs/schemas/ describes.
#ifndef KSEARCH_TOOLS_JSON_OUT_H_
#define KSEARCH_TOOLS_JSON_OUT_H_

#include <boost/json.hpp>
#include <cmath>
#include <iostream>
#include <optional>
#include <string_view>

namespace ksearch::cli {

// A JSON text the library wrote (Evaluation::ToJson, LaunchPlan::ToJson,
// RunInfo::ToJson) as a value; such a text always parses.
inline boost::json::value Embedded(std::string_view json) { return boost::json::parse(json); }

// A double as every ksearch document writes it: a number, or "nan", "inf",
// "-inf" (JSON has none of them); nullopt is null.
inline boost::json::value Number(std::optional<double> value) {
  if (!value) return nullptr;
  if (std::isnan(*value)) return "nan";
  if (std::isinf(*value)) return *value > 0 ? "inf" : "-inf";
  return *value;
}

// One document and a newline on stdout.
inline void PrintJson(const boost::json::value& document) {
  std::cout << boost::json::serialize(document) << "\n";
}

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_JSON_OUT_H_
