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

// Input files: the one bound on what a flag makes ksearch read. A kernel
// source, a plan, a price table or a mock script is at most kMaxInputBytes; an
// LLM recording (replay:FILE) at most kMaxRecordingBytes.
inline constexpr size_t kMaxInputBytes = 16u << 20;
inline constexpr size_t kMaxRecordingBytes = 1u << 30;

// Reads the file a flag names, at most kMaxInputBytes (a pipe or a device
// too: /dev/zero fails at the bound). Errors name the flag and the path:
// kNotFound, kPermissionDenied, kInvalidArgument (a folder, too large).
StatusOr<std::string> ReadInputFile(const std::string& path, const std::string& flag);
// For a file a library call opens itself: it must be a regular file of at
// most `max_bytes`.
Status CheckInputFile(const std::string& path, const std::string& flag, size_t max_bytes);

// --cache-dir (else $KSEARCH_CACHE_DIR), the compile cache folder, checked as
// it is parsed: any folder but "off" must exist or be creatable, and be
// writable; otherwise compiles would silently go uncached (exit 2 instead).
CLI::Option* AddCacheDirOption(CLI::App& cmd, std::string& cache_dir);

// --arch, a compile target checked as it is parsed: sm_XY, e.g. sm_90 or
// sm_90a (exit 2 otherwise, before a run or an export goes looking for one).
CLI::Option* AddArchOption(CLI::App& cmd, std::string& arch, const std::string& help);

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_CLI_UTIL_H_
