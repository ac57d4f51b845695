// The flags of `ksearch run` and `ksearch resume`: RunArgs, the CLI11 options
// that fill it, and the checks made on it before any work starts.
#ifndef KSEARCH_TOOLS_RUN_ARGS_H_
#define KSEARCH_TOOLS_RUN_ARGS_H_

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ksearch/status.h"

namespace ksearch::cli {

// Everything `ksearch run` and `ksearch resume` were told on the command line.
struct RunArgs {
  std::string problem;
  std::string strategy = "tune";
  std::string llm;
  std::string base_url;
  std::string prices;
  std::string record;
  std::string prompts;
  std::string mock_script;
  std::string tune_method = "random";
  std::string dims;
  std::string arch;
  std::string cache_dir;
  int rounds = 6;
  int batch = 16;
  int seeds = 4;
  int ideas = 4;
  int branches = 4;
  bool repair = false;
  bool idea_per_step = false;
  int max_in_flight = 64;
  int64_t max_candidates = 0;
  int64_t budget_tokens = 0;
  double budget_usd = 0.0;
  double budget_minutes = 0.0;
  double budget_gpu_minutes = 0.0;
  double target_speedup = 0.0;
  double max_timing_seconds = 1.0;
  bool compile_only = false;
  bool unsandboxed_compile = false;
  bool json = false;
  double progress_every = 0.0;  // seconds; 0: a line per round only (off a terminal)
  int device = 0;
  uint64_t seed = 1;  // the search's own choices, never the judge's inputs
  uint64_t replay_input_seed = 0;
  // Which evaluator: the isolated worker pool (default) or in-process.
  std::string gpus;
  bool in_process = false;
  // GPU hosts serving a Redis work queue instead of local GPUs.
  std::string queue;
  std::string queue_run;
  // The store.
  std::string db;
  bool no_db = false;
  int64_t resume = 0;
  bool take_over = false;
  bool reopen = false;
  // Set on `resume`: budget flags and values that replace the recorded ones.
  std::vector<std::pair<std::string, std::string>> overrides;
  // The model's settings (docs/llm.md). --idea-llm / --branch-llm take the
  // same forms as --llm and default to it.
  std::string idea_llm;
  std::string branch_llm;
  int max_output_tokens = 0;  // 0: LlmGeneratorOptions' default
  std::optional<double> temperature;
  std::string reasoning_effort;
  int thinking_budget = 0;
  double llm_timeout = 240.0;
  int llm_attempts = 5;
  // With an exchange folder (--llm exchange:DIR): stop, resumable, once
  // every request has waited this many seconds for its reply with nothing
  // else to do; 0: wait as long as it takes.
  double exchange_wait_seconds = 0.0;
  // Set on `resume`: the exchange folder, in place of the recorded one (a
  // run carried to another machine). Not recorded.
  std::string exchange_folder;
};

// Whether --llm, --idea-llm or --branch-llm names an exchange folder.
bool UsesExchange(const RunArgs& args);
// Points every exchange:DIR of --llm, --idea-llm and --branch-llm at `folder`.
void SetExchangeFolder(RunArgs& args, const std::string& folder);

// The options of `ksearch run` that a recorded run parses again on resume:
// the problem, the strategy, the model and the budgets.
void AddRunOptions(CLI::App& cmd, RunArgs& args);
// The budgets that bound a run by themselves; `resume` takes them too, to
// extend a run.
void AddBudgetOptions(CLI::App& cmd, RunArgs& args);
// Where a run is judged and recorded: --gpus, --in-process, --device,
// --queue, --queue-run, --db. `ksearch resume RUN` and `ksearch run --resume
// RUN` take the run's problem and flags from the store; these may be chosen
// again (another host, other GPUs).
void AddSelectionOptions(CLI::App& cmd, RunArgs& args);
// After parsing: --rounds keeps its default of 6 only when no budget that
// bounds the run by itself was given.
void ApplyRoundsDefault(const CLI::App& cmd, RunArgs& args);

// The checks across flags that CLI11's per-flag validators cannot make.
Status ValidateArgs(const RunArgs& args);
// "0,1" -> {0, 1}; "" or "all" -> {} (every GPU).
StatusOr<std::vector<int>> ParseGpus(const std::string& text);
// --db, else $KSEARCH_DB, else ./ksearch.db.
std::string DbPath(const RunArgs& args);

}  // namespace ksearch::cli

#endif  // KSEARCH_TOOLS_RUN_ARGS_H_
