// `ksearch completion bash`: a bash completion script written from the
// command tree itself, so that it never lags behind a new command or flag.
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include "commands.h"
#include "ksearch/problem.h"

namespace ksearch::cli {
namespace {

// The names of an app's flags (long and short), in order.
std::vector<std::string> FlagNames(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
    for (const std::string& name : option->get_snames()) names.push_back("-" + name);
  }
  return names;
}

// The flags of an app that take a value, as a bash case pattern.
std::string ValueFlags(const CLI::App& app) {
  std::string pattern;
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_expected_max() == 0 || option->get_positional()) continue;
    for (const std::string& name : option->get_lnames()) pattern += "|--" + name;
    for (const std::string& name : option->get_snames()) pattern += "|-" + name;
  }
  return pattern.empty() ? "" : pattern.substr(1);
}

std::string Join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

// Commands that take a PROBLEM first: their first word completes to the
// built-in problem names (and files, for a path).
bool TakesProblem(const std::string& path) {
  return path == "run" || path == "eval" || path == "best" || path == "problems show";
}

// One `case` arm per command: "run) words=…; values='--db|…'; problem=1 ;;".
void WriteArms(const CLI::App& app, const std::string& path, std::string* arms) {
  std::vector<std::string> words;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    words.push_back(sub->get_name());
  }
  for (const std::string& flag : FlagNames(app)) words.push_back(flag);
  *arms += "    '" + path + "') words='" + Join(words) + "'; values='" + ValueFlags(app) +
           "'; problem=" + (TakesProblem(path) ? "1" : "0") + " ;;\n";
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    WriteArms(*sub, path.empty() ? sub->get_name() : path + " " + sub->get_name(), arms);
  }
}

// The names of every command path, for the walk over the words typed.
void CommandPaths(const CLI::App& app, const std::string& path, std::set<std::string>* paths) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    std::string child = path.empty() ? sub->get_name() : path + " " + sub->get_name();
    paths->insert(child);
    CommandPaths(*sub, child, paths);
  }
}

int PrintBash(const CLI::App& root) {
  std::string arms;
  WriteArms(root, "", &arms);
  std::set<std::string> paths;
  CommandPaths(root, "", &paths);
  std::string known;
  for (const std::string& p : paths) known += (known.empty() ? "'" : "|'") + p + "'";
  std::cout << "# bash completion for ksearch, written by 'ksearch completion bash'.\n"
               "# Load it in this shell:   source <(ksearch completion bash)\n"
               "# or for every shell:      ksearch completion bash > "
               "~/.local/share/bash-completion/completions/ksearch\n"
               "_ksearch() {\n"
               "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
               "  local path='' i word words values problem\n"
               "  # The command path typed so far: words that name a subcommand, in order.\n"
               "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
               "    word=${COMP_WORDS[i]}\n"
               "    case \"${path:+$path }$word\" in\n"
               "      "
            << (known.empty() ? "''" : known)
            << ") path=\"${path:+$path }$word\" ;;\n"
               "    esac\n"
               "  done\n"
               "  case \"$path\" in\n"
            << arms
            << "    *) words=''; values=''; problem=0 ;;\n"
               "  esac\n"
               "  # A flag's value: file names.\n"
               "  if [[ -n $values && $prev == -* && \"|$values|\" == *\"|$prev|\"* ]]; then\n"
               "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
               "    return\n"
               "  fi\n"
               "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
               "  if [[ $problem == 1 && $cur != -* ]]; then\n"
               "    COMPREPLY+=($(compgen -W \""
            << Join(BuiltinProblemNames())
            << "\" -- \"$cur\"))\n"
               "    COMPREPLY+=($(compgen -f -- \"$cur\"))\n"
               "  fi\n"
               "}\n"
               "complete -F _ksearch ksearch\n";
  return kExitOk;
}

}  // namespace

void AddCompletionCommand(CLI::App& app, int* exit_code) {
  static std::string shell;
  auto* cmd = app.add_subcommand("completion", "Print a shell completion script (bash)");
  cmd->add_option("SHELL", shell, "the shell: bash")->required()->check(CLI::IsMember({"bash"}));
  cmd->footer(
      "Completes commands, flags, built-in problem names and file names.\n\n"
      "Examples:\n"
      "  source <(ksearch completion bash)          in this shell\n"
      "  ksearch completion bash > ~/.local/share/bash-completion/completions/ksearch");
  CLI::App* root = &app;
  cmd->callback([exit_code, root] { *exit_code = PrintBash(*root); });
}

}  // namespace ksearch::cli
