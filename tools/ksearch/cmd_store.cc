// The commands that read a ksearch database: list, show, best, export, report.
// All of them open the database read-only, so they work while a search writes.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "json_out.h"
#include "ksearch/kernel_cache.h"
#include "ksearch/problem.h"
#include "ksearch/run_report.h"
#include "ksearch/store.h"

namespace ksearch::cli {
namespace {

std::string When(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t seconds = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  localtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M", &tm);
  return text;
}

// What `list` and `show` print as a run's state: a killed search still says
// "running" in the database, so it is told apart by its process.
std::string State(const RunInfo& run) {
  if (run.LooksAbandoned()) return "stopped";
  return std::string(ToString(run.status));
}

// ReportError, except that a database this build cannot use is exit 6 (a
// newer schema) or bad input (2: one needing a migration, a run without an
// arch), not "no GPU" (3).
int Fail(const Status& status) { return ReportStoreError(status); }

StatusOr<std::unique_ptr<Store>> OpenForReading(const std::string& path) {
  Store::Options options;
  options.read_only = true;
  return Store::Open(path, options);
}

StatusOr<int64_t> ParseRunId(const std::string& text) {
  std::string digits = text;
  if (!digits.empty() && (digits[0] == 'r' || digits[0] == '#')) digits.erase(0, 1);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 15) {
    return InvalidArgumentError("RUN: expected a run number as 'ksearch list' shows it, got '" + text + "'");
  }
  return std::stoll(digits);
}

struct StoreArgs {
  std::string db;
  std::string run;
  std::string problem;
  std::string candidate;
  std::string out = ".";
  std::string arch;
  std::string cache_dir;
  std::string html;
  int limit = 20;
  bool json = false;
  bool source = false;  // show, best: print only the best kernel's source
};

void AddDbOption(CLI::App* cmd, StoreArgs& args) {
  cmd->add_option("--db", args.db, "the ksearch database (default: $KSEARCH_DB, else ./ksearch.db)");
}

std::string DbPath(const StoreArgs& args) { return args.db.empty() ? Store::DefaultPath() : args.db; }

int ListCommand(const StoreArgs& args) {
  auto store = OpenForReading(DbPath(args));
  if (!store.ok()) return Fail(store.status());
  RunFilter filter;
  filter.problem_name = args.problem;
  filter.limit = args.limit;
  auto runs = (*store)->ListRuns(filter);
  if (!runs.ok()) return Fail(runs.status());
  if (args.json) {
    boost::json::array out;
    for (const RunInfo& run : *runs) out.push_back(Embedded(run.ToJson()));
    PrintJson(out);
    return kExitOk;
  }
  if (runs->empty()) {
    std::cout << "no runs in " << (*store)->path() << "\n";
    return kExitOk;
  }
  std::printf("%5s  %-18s %-8s %-11s %-16s %6s %6s %10s %8s  %s\n", "RUN", "PROBLEM", "STRATEGY", "STATUS",
              "STARTED", "JUDGED", "OK", "BEST ms", "SPEEDUP", "DEVICE");
  for (const RunInfo& run : *runs) {
    char best_ms[32] = "-";
    if (run.best_median_ms) std::snprintf(best_ms, sizeof(best_ms), "%.4f", *run.best_median_ms);
    char speedup[32] = "-";
    if (run.best_speedup) std::snprintf(speedup, sizeof(speedup), "%.3fx", *run.best_speedup);
    std::printf("%5lld  %-18s %-8s %-11s %-16s %6lld %6lld %10s %8s  %s\n", static_cast<long long>(run.id),
                run.problem_name.substr(0, 18).c_str(), run.strategy.substr(0, 8).c_str(), State(run).c_str(),
                When(run.started_unix_ms).c_str(), static_cast<long long>(run.candidates),
                static_cast<long long>(run.correct), best_ms, speedup, run.device_name.c_str());
  }
  for (const RunInfo& run : *runs) {
    if (run.LooksAbandoned()) {
      std::printf("run %lld stopped without finishing; 'ksearch resume %lld' continues it\n",
                  static_cast<long long>(run.id), static_cast<long long>(run.id));
    }
  }
  return kExitOk;
}

// RUN of the database, with everything it recorded (show, report).
StatusOr<RunHistory> LoadRun(const StoreArgs& args) {
  KSEARCH_ASSIGN_OR_RETURN(int64_t id, ParseRunId(args.run));
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, OpenForReading(DbPath(args)));
  return store->LoadRunHistory(id, true);
}

int ShowCommand(const StoreArgs& args) {
  auto history = LoadRun(args);
  if (!history.ok()) return Fail(history.status());
  if (args.source) {
    const HistoryEntry* best = history->Best();
    if (!best) {
      std::cerr << "ksearch: run " << history->run.id << " has no best kernel\n";
      return kExitRejected;
    }
    if (!best->evaluation.correct()) {
      std::cerr << "ksearch: note: " << best->candidate.id
                << " was only compiled (compile-only): never run, neither checked nor timed\n";
    }
    std::cout << best->candidate.source;
    return kExitOk;
  }
  if (args.json) {
    std::cout << history->SummaryJson() << "\n";
    return kExitOk;
  }
  const RunInfo& run = history->run;
  std::printf("run %lld: %s, %s strategy, %s", static_cast<long long>(run.id), run.problem_name.c_str(),
              run.strategy.c_str(), State(run).c_str());
  if (!run.termination.empty()) std::printf(" (%s)", run.termination.c_str());
  std::printf("\n  device %s %s, driver %d, NVRTC %s, ksearch %s\n", run.device_name.c_str(),
              run.device_arch.c_str(), run.driver_version, run.nvrtc_version.c_str(), run.ksearch_version.c_str());
  std::printf("  started %s, ended %s, %d session%s, seed %llu, host %s pid %lld\n", When(run.started_unix_ms).c_str(),
              When(run.ended_unix_ms).c_str(), run.sessions, run.sessions == 1 ? "" : "s",
              static_cast<unsigned long long>(run.seed), run.host.c_str(), static_cast<long long>(run.pid));
  std::printf("  options %s\n", run.options_json.c_str());
  if (run.compiled > 0) {
    std::printf("  compile-only: %lld kernels compiled, none was run (none is correct or timed)\n",
                static_cast<long long>(run.compiled));
  }
  if (!run.message.empty()) std::printf("  message: %s\n", run.message.c_str());
  std::printf("  %zu rounds, %zu ideas, %zu candidates judged:", history->rounds.size(), history->ideas.size(),
              history->entries.size());
  for (const auto& [status, count] : history->CountByStatus()) {
    std::printf(" %s=%lld", status.c_str(), static_cast<long long>(count));
  }
  std::printf("\n  LLM: %lld exchanges, tokens in %lld, out %lld, cost $%.4f\n",
              static_cast<long long>(run.llm_exchanges), static_cast<long long>(run.input_tokens),
              static_cast<long long>(run.output_tokens), run.cost_usd);
  if (!history->ideas.empty()) {
    std::printf("ideas:\n");
    for (const Idea& idea : history->ideas) {
      std::printf("  %s [%s] %s\n", idea.id.c_str(), std::string(ToString(idea.category)).c_str(),
                  idea.text.c_str());
      if (!idea.outcome.empty()) std::printf("    -> %s\n", idea.outcome.c_str());
    }
  }
  if (const HistoryEntry* best = history->Best()) {
    std::cout << (best->evaluation.correct()
                      ? "best kernel " + best->candidate.id + ":\n"
                      : "best compiled kernel " + best->candidate.id +
                            " (compile-only: fewest registers; never run):\n")
              << best->evaluation.Report();
    std::cout << "  plan:\n" << IndentJson(best->candidate.plan.ToJson()) << "\n";
  } else {
    std::cout << "no correct kernel\n";
  }
  if (run.LooksAbandoned()) {
    std::printf("this run stopped without finishing; 'ksearch resume %lld' continues it\n",
                static_cast<long long>(run.id));
  }
  return kExitOk;
}

int BestCommand(const StoreArgs& args) {
  auto store = OpenForReading(DbPath(args));
  if (!store.ok()) return Fail(store.status());
  // A loadable problem is matched by fingerprint (the same op and shapes);
  // anything else by the name recorded with the runs.
  std::string key = args.problem;
  std::string fingerprint;
  if (auto problem = LoadProblem(args.problem); problem.ok()) {
    fingerprint = problem->Fingerprint();
    key = fingerprint;
  }
  auto best = (*store)->BestForProblem(key, args.limit);
  if (!best.ok()) return Fail(best.status());
  if (best->empty() && !fingerprint.empty()) {
    best = (*store)->BestForProblem(args.problem, args.limit);
    if (!best.ok()) return Fail(best.status());
  }
  if (args.source) {
    if (best->empty()) {
      std::cerr << "ksearch: no correct kernel for '" << args.problem << "' in " << (*store)->path()
                << "\n";
      return kExitRejected;
    }
    std::cout << best->front().best.candidate.source;
    return kExitOk;
  }
  if (args.json) {
    boost::json::array out;
    for (const RunBest& b : *best) {
      out.push_back({{"run", Embedded(b.run.ToJson())},
                     {"candidate_id", b.best.candidate.id},
                     {"plan", Embedded(b.best.candidate.plan.ToJson())},
                     {"evaluation", Embedded(b.best.evaluation.ToJson())}});
    }
    PrintJson(out);
    return best->empty() ? kExitRejected : kExitOk;
  }
  if (best->empty()) {
    std::cout << "no correct kernel for '" << args.problem << "' in " << (*store)->path() << "\n";
    return kExitRejected;
  }
  const RunBest& top = best->front();
  std::printf("best kernel for %s: run %lld, candidate %s (%s on %s)\n", top.run.problem_name.c_str(),
              static_cast<long long>(top.run.id), top.best.candidate.id.c_str(), top.run.strategy.c_str(),
              top.run.device_name.c_str());
  std::cout << top.best.evaluation.Report() << "  plan:\n"
            << IndentJson(top.best.candidate.plan.ToJson()) << "\n";
  if (best->size() > 1) {
    std::printf("other runs:\n");
    for (size_t i = 1; i < best->size(); ++i) {
      const RunBest& b = (*best)[i];
      const Evaluation& e = b.best.evaluation;
      std::printf("  run %lld %s: %s", static_cast<long long>(b.run.id), b.best.candidate.id.c_str(),
                  e.timing ? (std::to_string(e.timing->median_ms) + " ms").c_str() : "untimed");
      if (e.speedup) std::printf(", %.3fx vs %s", e.speedup->ratio, e.speedup->baseline.c_str());
      std::printf(" (%s)\n", b.run.device_name.c_str());
    }
  }
  return kExitOk;
}

int ExportCommand(const StoreArgs& args) {
  auto id = ParseRunId(args.run);
  if (!id.ok()) return Fail(id.status());
  auto store = OpenForReading(DbPath(args));
  if (!store.ok()) return Fail(store.status());
  ExportOptions options;
  options.directory = args.out;
  options.candidate_id = args.candidate;
  options.arch = args.arch;
  options.compile_cache_dir = args.cache_dir;
  auto exported = ExportRunKernel(**store, *id, options);
  if (!exported.ok()) return Fail(exported.status());
  if (exported->never_run) {
    std::cerr << "ksearch: warning: candidate " << exported->candidate_id << " of run " << *id
              << " was only compiled (a compile-only run): it was never run, so it is neither "
                 "checked for correctness nor timed; judge it on a GPU with 'ksearch eval PROBLEM "
                 "--source "
              << exported->source_path << " --plan " << exported->plan_path << "'\n";
  }
  if (args.json) {
    PrintJson(boost::json::object{{"candidate_id", exported->candidate_id},
                                  {"source", exported->source_path},
                                  {"plan", exported->plan_path},
                                  {"cubin", exported->cubin_path},
                                  {"header", exported->header_path},
                                  {"evaluation", exported->evaluation_path},
                                  {"never_run", exported->never_run}});
    return kExitOk;
  }
  std::cout << "exported candidate " << exported->candidate_id << " of run " << *id << ":\n  "
            << exported->source_path << "\n  " << exported->plan_path << "\n  " << exported->cubin_path << "\n  "
            << exported->header_path << "  (#include it; call Launch(stream, tensors); link -lcuda)\n  "
            << exported->evaluation_path << "\n";
  return kExitOk;
}

int ReportCommand(const StoreArgs& args) {
  auto history = LoadRun(args);
  if (!history.ok()) return Fail(history.status());
  std::string html = RunReportHtml(*history);
  std::ofstream out(args.html, std::ios::binary | std::ios::trunc);
  if (!out || !(out << html) || !out.flush()) {
    return Fail(PermissionDeniedError("--html: cannot write '" + args.html + "'"));
  }
  std::cout << "wrote " << args.html << " (" << html.size() / 1024 << " KiB): run " << history->run.id << ", "
            << history->entries.size() << " candidates\n";
  return kExitOk;
}

}  // namespace

void AddStoreCommands(CLI::App& app, int* exit_code) {
  static StoreArgs list_args, show_args, best_args, export_args, report_args;

  auto* list = app.add_subcommand("list", "List the runs recorded in a ksearch database");
  AddDbOption(list, list_args);
  list->add_option("--problem", list_args.problem, "only runs of this problem (name as recorded)");
  AddNumber(*list, "--limit", list_args.limit, "newest runs to show (0: all)", AtLeast(0))
      ->capture_default_str();
  list->add_flag("--json", list_args.json, "print a JSON array of runs");
  list->footer(
      "A run that says 'stopped' was killed; 'ksearch resume RUN' continues it.\n\n"
      "Examples:\n"
      "  ksearch list\n"
      "  ksearch list --db runs/h200.db --problem softmax --json");
  list->callback([exit_code] { *exit_code = ListCommand(list_args); });

  auto* show = app.add_subcommand("show", "Show one run: status, outcomes, tokens, the best kernel");
  show->add_option("RUN", show_args.run, "run number, as 'ksearch list' shows it")->required();
  AddDbOption(show, show_args);
  auto* show_json = show->add_flag("--json", show_args.json, "print the run as JSON");
  show->add_flag("--source", show_args.source,
                 "print only the source of the run's best kernel (exit 1 when it has none)")
      ->excludes(show_json);
  show->footer(
      "Examples:\n  ksearch show 3\n  ksearch show 3 --json | jq .best.evaluation.speedup\n"
      "  ksearch show 3 --source > best.cu");
  show->callback([exit_code] { *exit_code = ShowCommand(show_args); });

  auto* best = app.add_subcommand("best", "The best kernel recorded for a problem, across runs");
  best->add_option("PROBLEM", best_args.problem,
                   "built-in name or path (matched by fingerprint), or a recorded problem name")
      ->required();
  AddDbOption(best, best_args);
  AddNumber(*best, "--limit", best_args.limit, "runs to compare (0: all)", AtLeast(0))
      ->capture_default_str();
  auto* best_json = best->add_flag("--json", best_args.json, "print a JSON array, fastest first");
  best->add_flag("--source", best_args.source,
                 "print only the source of the fastest correct kernel (its plan: --json)")
      ->excludes(best_json);
  best->footer(
      "Exit status 1 when no run has a correct kernel for the problem.\n\n"
      "Examples:\n  ksearch best softmax\n  ksearch best softmax --source > softmax.cu\n"
      "  ksearch best ./my_op/problem.json --json");
  best->callback([exit_code] { *exit_code = BestCommand(best_args); });

  auto* exp = app.add_subcommand("export", "Write a run's kernel: source, plan, cubin and a C++ header");
  exp->add_option("RUN", export_args.run, "run number, as 'ksearch list' shows it")->required();
  AddDbOption(exp, export_args);
  exp->add_option("--out", export_args.out, "folder to write into (created if missing)")->capture_default_str();
  exp->add_option("--candidate", export_args.candidate, "candidate id (default: the run's best)");
  AddArchOption(*exp, export_args.arch, "compile target, e.g. sm_90 (default: the run's GPU)");
  AddCacheDirOption(*exp, export_args.cache_dir);
  exp->add_flag("--json", export_args.json, "print the written paths as JSON");
  exp->footer("The header embeds the cubin and declares Dims, Tensors, WorkspaceBytes() and\n"
              "Launch(stream, tensors, dims, workspace) over the CUDA driver API (link -lcuda).\n\n"
              "Examples:\n  ksearch export 3 --out kernels/\n  ksearch export 3 --candidate c41 --arch sm_90");
  exp->callback([exit_code] { *exit_code = ExportCommand(export_args); });

  auto* report = app.add_subcommand("report", "Write a self-contained HTML report of a run");
  report->add_option("RUN", report_args.run, "run number, as 'ksearch list' shows it")->required();
  AddDbOption(report, report_args);
  report->add_option("--html", report_args.html, "the HTML file to write")->required();
  report->footer("One page, no network: the best speedup and the best time per round (SVG),\n"
                 "the idea tree with outcomes, the best kernel, failures by status, tokens and\n"
                 "cost.\n\n"
                 "Example:\n  ksearch report 3 --html run3.html");
  report->callback([exit_code] { *exit_code = ReportCommand(report_args); });
}

}  // namespace ksearch::cli
