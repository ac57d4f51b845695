// ksearch: the command-line front end of the SDK.
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "ksearch/evaluator.h"
#include "ksearch/version.h"

namespace ksearch::cli {

namespace {
std::vector<std::string> g_command_line;
}  // namespace

const std::vector<std::string>& CommandLine() { return g_command_line; }

int ReportError(const Status& status, int exit_code) {
  std::cerr << "ksearch: " << status.message() << "\n";
  return exit_code;
}

int ReportError(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kPermissionDenied: return ReportError(status, kExitUsage);
    case StatusCode::kFailedPrecondition: return ReportError(status, kExitNoGpu);
    case StatusCode::kAborted: return ReportError(status, kExitRunBusy);
    case StatusCode::kCancelled: return ReportError(status, kExitInterrupted);
    default: return ReportError(status, kExitFailure);
  }
}

int ReportStoreError(const Status& status) {
  if (status.code() != StatusCode::kFailedPrecondition) return ReportError(status);
  // Store::Open's kFailedPrecondition: a newer schema, or a file this build
  // cannot use as it is (a migration needed for a read-only open, no WAL).
  bool newer = status.message().find("written by a newer ksearch") != std::string::npos;
  return ReportError(status, newer ? kExitNewerDatabase : kExitUsage);
}

}  // namespace ksearch::cli

int main(int argc, char** argv) {
  using namespace ksearch::cli;
  g_command_line.assign(argv, argv + argc);
  CLI::App app{"ksearch — search for fast CUDA kernels.\n\n"
               "A search compiles candidate kernels with NVRTC, checks them against a trusted\n"
               "reference on several input distributions and times them on the GPU; the fastest\n"
               "correct kernels seed the next round.",
               "ksearch"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(ksearch::Version()));
  app.footer(std::string(
      "Examples:\n"
      "  ksearch run softmax                         tune the built-in softmax on this GPU\n"
      "  ksearch problems                            list the built-in problems\n"
      "  ksearch eval softmax --source k.cu --plan p.json\n"
      "                                              judge one kernel\n"
      "  ksearch eval softmax --source k.cu --plan p.json --compile-only --arch sm_90\n"
      "                                              check a kernel on a machine without a GPU\n\n") +
      kExitCodesHelp + "\nRun 'ksearch COMMAND --help' for a command's options.");
  int exit_code = kExitOk;
  AddRunCommand(app, &exit_code);
  AddWorkerCommand(app, &exit_code);
  AddResumeCommand(app, &exit_code);
  AddMockLlmCommand(app, &exit_code);
  AddAnswerCommand(app, &exit_code);
  AddEvalCommand(app, &exit_code);
  AddProblemsCommand(app, &exit_code);
  AddStoreCommands(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  return exit_code;
}
