// The ksearch CLI's commands. Each Add*Command registers a CLI11 subcommand
// whose callback stores its exit code in *exit_code.
#ifndef KSEARCH_TOOLS_COMMANDS_H_
#define KSEARCH_TOOLS_COMMANDS_H_

#include <CLI/CLI.hpp>

#include <string>

#include "ksearch/status.h"

namespace ksearch::cli {

// Documented exit codes (ksearch --help prints them).
enum ExitCode {
  kExitOk = 0,           // success; for eval: the candidate is correct
  kExitRejected = 1,     // eval: the candidate was judged and is not ok
  kExitUsage = 2,        // bad arguments or input files
  kExitNoGpu = 3,        // no CUDA driver or GPU (and no --compile-only)
  kExitFailure = 4,      // an internal or environment failure
  kExitInterrupted = 130,
};

void AddEvalCommand(CLI::App& app, int* exit_code);
void AddProblemsCommand(CLI::App& app, int* exit_code);
void AddRunCommand(CLI::App& app, int* exit_code);
// list, show, best, export, report (cmd_store.cc).
void AddStoreCommands(CLI::App& app, int* exit_code);

// Prints "ksearch: MESSAGE" to stderr and maps the status to an exit code.
int ReportError(const Status& status);

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_COMMANDS_H_
