// Helpers shared by the CLI commands.
#ifndef KSEARCH_TOOLS_CLI_UTIL_H_
#define KSEARCH_TOOLS_CLI_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch::cli {

// Parses "rows=128,cols=256" into dim overrides.
StatusOr<std::vector<std::pair<std::string, int64_t>>> ParseDims(const std::string& text);

// Loads a problem and applies --dims overrides.
StatusOr<Problem> LoadWithDims(const std::string& name, const std::string& dims);

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_CLI_UTIL_H_
