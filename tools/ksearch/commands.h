// The ksearch CLI's commands. Each Add*Command registers a CLI11 subcommand
// whose callback stores its exit code in *exit_code.
#ifndef KSEARCH_TOOLS_COMMANDS_H_
#define KSEARCH_TOOLS_COMMANDS_H_

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "ksearch/status.h"

namespace ksearch {
class MockLlmServer;
struct Problem;
}  // namespace ksearch

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
// ksearch worker: serve a Redis work queue (cmd_worker.cc, docs/queue.md).
void AddWorkerCommand(CLI::App& app, int* exit_code);
void AddResumeCommand(CLI::App& app, int* exit_code);
void AddMockLlmCommand(CLI::App& app, int* exit_code);

// Scripts a mock model from the problem itself (`--llm mock`, `ksearch
// mock-llm --problem`): idea replies name "mock variants" (the starting kernel
// and points of the problem's templates), branch replies return the variant
// the idea names, shifted by the branch number so that branches differ.
Status ScriptMockFromProblem(MockLlmServer& mock, const Problem& problem, int rounds, int branches);
// list, show, best, export, report (cmd_store.cc).
void AddStoreCommands(CLI::App& app, int* exit_code);

// The process's arguments, argv[0] included (recorded with a run so that a
// resume can parse them again).
const std::vector<std::string>& CommandLine();

// Prints "ksearch: MESSAGE" to stderr and maps the status to an exit code.
int ReportError(const Status& status);

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_COMMANDS_H_
