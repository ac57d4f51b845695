// Helpers shared by the CLI commands.
#ifndef KSEARCH_TOOLS_CLI_UTIL_H_
#define KSEARCH_TOOLS_CLI_UTIL_H_

#include <CLI/CLI.hpp>

#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "ksearch/evaluator.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"
#include "numeric_flags.h"

namespace ksearch::cli {

inline constexpr char kUnsandboxedCompileHelp[] =
    "where this machine cannot confine compiles (no Landlock), compile candidate sources "
    "anyway, unconfined: they can then read any file this user can (reports say so)";

// With --unsandboxed-compile on a machine without confinement: says so on
// stderr, once, before anything is compiled.
inline void WarnIfUnsandboxed(bool unsandboxed_compile) {
  std::string why;
  if (!unsandboxed_compile || CompileConfinementAvailable(&why)) return;
  std::cerr << "ksearch: warning: candidate sources compile UNCONFINED (--unsandboxed-compile; "
            << why << ")\n";
}

// Parses "rows=128,cols=256" into dim overrides.
StatusOr<std::vector<std::pair<std::string, int64_t>>> ParseDims(const std::string& text);

// Loads a problem and applies --dims overrides.
StatusOr<Problem> LoadWithDims(const std::string& name, const std::string& dims);

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_CLI_UTIL_H_
