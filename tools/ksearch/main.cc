// ksearch: the command-line front end of the SDK.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"
#include "ksearch/evaluator.h"
#include "ksearch/version.h"
#include "numeric_flags.h"
#include "version_text.h"

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

int ReportStoreError(const Status& status, bool for_writing) {
  if (for_writing && status.code() == StatusCode::kPermissionDenied) {
    return ReportError(status, kExitFailure);
  }
  if (status.code() != StatusCode::kFailedPrecondition) return ReportError(status);
  // Store::Open's kFailedPrecondition: a newer schema, or a file this build
  // cannot use as it is (a migration needed for a read-only open, no WAL).
  bool newer = status.message().find("written by a newer ksearch") != std::string::npos;
  return ReportError(status, newer ? kExitNewerDatabase : kExitUsage);
}

namespace {

// --version on the program and on every command, computed when asked for.
void AddVersionFlags(CLI::App& app) {
  app.set_version_flag(
      "--version", [] { return VersionText(); },
      "print the version, commit, CUDA toolkit, NVRTC and driver, and exit");
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) AddVersionFlags(*sub);
}

// Edits between two words (insertions, deletions, substitutions).
size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// `ksearch bogus`: the command is named as unknown, with the closest one and
// the list, instead of CLI11's "A subcommand is required".
Status CheckCommandName(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return Status::Ok();
  const std::string word = argv[1];
  std::string names, closest;
  size_t closest_distance = 3;  // suggest only a near miss
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (sub->check_name(word)) return Status::Ok();
    names += (names.empty() ? "" : ", ") + sub->get_name();
    if (size_t d = EditDistance(word, sub->get_name()); d < closest_distance) {
      closest_distance = d;
      closest = sub->get_name();
    }
  }
  std::string shown = word.size() > 32 ? word.substr(0, 29) + "..." : word;
  return InvalidArgumentError("unknown command '" + shown + "'" +
                              (closest.empty() ? "" : " (did you mean '" + closest + "'?)") +
                              "; the commands are " + names +
                              " ('ksearch --help' says what each does)");
}

}  // namespace

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
  app.footer(
      std::string(
          "Examples:\n"
          "  ksearch run softmax                         tune the built-in softmax on this GPU\n"
          "  ksearch problems                            list the built-in problems\n"
          "  ksearch eval softmax --source k.cu --plan p.json\n"
          "                                              judge one kernel\n"
          "  ksearch eval softmax --source k.cu --plan p.json --compile-only --arch sm_90\n"
          "                                              check a kernel on a machine without a "
          "GPU\n"
          "  ksearch best softmax --source               print the fastest kernel found so far\n"
          "  source <(ksearch completion bash)           complete commands and flags in bash\n\n") +
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
  AddCompletionCommand(app, &exit_code);
  AddVersionFlags(app);
  RequireNumberChecks(app);
  if (ksearch::Status known = CheckCommandName(app, argc, argv); !known.ok()) {
    return ReportError(known, kExitUsage);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  return exit_code;
}
