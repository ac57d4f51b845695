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

// Validators for numeric flags: "--batch: 0 is not allowed (expected a number
// above 0)". CLI11 names the flag; a failed check is a usage error (exit 2).
inline CLI::Validator AtLeast(double lowest, bool inclusive) {
  return CLI::Validator(
      [lowest, inclusive](std::string& value) -> std::string {
        double number = 0.0;
        if (!CLI::detail::lexical_cast(value, number)) return value + " is not a number";
        if (inclusive ? number >= lowest : number > lowest) return {};
        return value + " is not allowed (expected a number " +
               (inclusive ? std::string("of at least ") : std::string("above ")) +
               CLI::detail::to_string(static_cast<long long>(lowest)) + ")";
      },
      inclusive ? "NUMBER>=0" : "NUMBER>0");
}
inline CLI::Validator NonNegative() { return AtLeast(0, true); }
inline CLI::Validator Positive() { return AtLeast(0, false); }

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_CLI_UTIL_H_
