// The ksearch CLI's commands. Each Add*Command registers a CLI11 subcommand
// whose callback stores its exit code in *exit_code.
#ifndef KSEARCH_TOOLS_COMMANDS_H_
#define KSEARCH_TOOLS_COMMANDS_H_

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "ksearch/mock_llm_server.h"
#include "ksearch/status.h"

namespace ksearch {
class MockLlmServer;
struct Problem;
}  // namespace ksearch

namespace ksearch::cli {

// Documented exit codes (ksearch --help and docs/cli.md list them). Each
// cause has its own.
enum ExitCode {
  kExitOk = 0,            // success; run: a correct kernel was found; eval: it is correct
  kExitRejected = 1,      // run: no kernel was judged correct; eval: judged and rejected;
                          // best: no correct kernel recorded
  kExitUsage = 2,         // bad arguments or input files, or a request that cannot be
                          // met (resume of a completed run, of a run not in the database)
  kExitNoGpu = 3,         // no CUDA driver or GPU (and no --compile-only)
  kExitFailure = 4,       // the search failed, or an internal or environment failure
  kExitCompiledOnly = 5,  // compile-only: kernels compiled, none was run, so none was
                          // judged correct (eval --compile-only: the kernel compiled)
  kExitNewerDatabase = 6, // the database was written by a newer ksearch
  kExitDeviceMismatch = 7,  // the run was measured on another device (GPU model, arch,
                            // queue workers' arch) than this resume judges on
  kExitRunBusy = 8,       // the run is being run by another process (two resumes)
  kExitAwaitingReplies = 9,  // stopped to wait for replies in an exchange folder
                             // (--exchange-wait): resumable
  kExitAwaitingGpu = 10,  // a resume without a GPU stopped where candidates must be
                          // judged: resumable on a GPU host
  kExitInterrupted = 130, // stopped by SIGINT (Ctrl-C): summary printed, resumable
  kExitTerminated = 143,  // stopped by SIGTERM: as SIGINT
};

// The --help text of the codes above.
inline constexpr const char kExitCodesHelp[] =
    "Exit codes: 0 success (run: a correct kernel found); 1 no kernel judged correct\n"
    "(eval: rejected); 2 bad arguments or input; 3 no CUDA driver or GPU; 4 the search\n"
    "failed (internal or environment failure); 5 compile-only: kernels compiled but none\n"
    "was run; 6 the database was written by a newer ksearch; 7 resume on another device\n"
    "than the run's; 8 the run is being run by another process; 9 stopped to wait for\n"
    "replies in an exchange folder, 10 stopped where candidates need a GPU, 130\n"
    "interrupted by SIGINT, 143 by SIGTERM (all four resumable). docs/cli.md has the\n"
    "details.";

void AddEvalCommand(CLI::App& app, int* exit_code);
void AddProblemsCommand(CLI::App& app, int* exit_code);
void AddRunCommand(CLI::App& app, int* exit_code);
// ksearch worker: serve a Redis work queue (cmd_worker.cc, docs/queue.md).
void AddWorkerCommand(CLI::App& app, int* exit_code);
void AddResumeCommand(CLI::App& app, int* exit_code);
void AddMockLlmCommand(CLI::App& app, int* exit_code);
// ksearch answer: answer an exchange folder's requests (cmd_answer.cc).
void AddAnswerCommand(CLI::App& app, int* exit_code);
// ksearch completion bash: a completion script written from `app`'s commands
// and flags (cmd_completion.cc).
void AddCompletionCommand(CLI::App& app, int* exit_code);

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

// Prints "ksearch: MESSAGE" to stderr and maps the status to an exit code:
// kInvalidArgument, kNotFound, kPermissionDenied: 2; kFailedPrecondition: 3;
// kAborted: 8; kCancelled: 130; others: 4.
int ReportError(const Status& status);
// Prints as above and returns `exit_code`.
int ReportError(const Status& status, int exit_code);
// The exit code of a failed Store::Open: 6 for a database of a newer
// ksearch, else as ReportError, with a kFailedPrecondition (a file this build
// cannot use) as bad input (2), not "no GPU". `for_writing` (run, resume): a
// database or folder that cannot be written is an environment failure (4).
int ReportStoreError(const Status& status, bool for_writing = false);

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_COMMANDS_H_
