#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "cli_util.h"
#include "commands.h"
#include "ksearch/evaluator.h"
#include "ksearch/strategies.h"

namespace ksearch::cli {
namespace {

std::atomic<bool> g_interrupted{false};

void OnSigint(int) { g_interrupted.store(true); }

struct RunArgs {
  std::string problem;
  std::string strategy = "tune";
  std::string dims;
  std::string arch;
  std::string cache_dir;
  int rounds = 6;
  int batch = 16;
  int64_t max_candidates = 0;
  double budget_minutes = 0.0;
  double target_speedup = 0.0;
  double max_timing_seconds = 1.0;
  bool compile_only = false;
  bool json = false;
  int device = 0;
  uint64_t seed = 1;
};

// The live progress line: rewritten in place on a terminal, one line per
// round otherwise (logs, CI).
class Progress final : public SearchObserver {
 public:
  explicit Progress(bool quiet) : quiet_(quiet), tty_(::isatty(STDERR_FILENO) != 0) {}

  ObserverAction OnRoundStart(int round, const std::vector<std::string>&) override {
    round_ = round;
    Print(false);
    return ObserverAction::kContinue;
  }
  ObserverAction OnCandidateEvaluated(const Candidate&, const Evaluation& e) override {
    ++evaluated_;
    if (e.ok()) {
      ++ok_;
    } else {
      ++failed_;
    }
    if (tty_) Print(false);
    return ObserverAction::kContinue;
  }
  ObserverAction OnNewBest(const Candidate& c, const Evaluation& e) override {
    best_ = c.id;
    if (e.timing) best_ms_ = e.timing->median_ms;
    if (e.speedup) {
      speedup_ = e.speedup->ratio;
      baseline_ = e.speedup->baseline;
    }
    return ObserverAction::kContinue;
  }
  ObserverAction OnRoundEnd(int) override {
    Print(true);
    return ObserverAction::kContinue;
  }
  void Finish() {
    if (tty_ && !quiet_) std::fprintf(stderr, "\n");
  }

 private:
  void Print(bool round_done) {
    if (quiet_) return;
    if (!tty_ && !round_done) return;
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    char best[160] = "no correct kernel yet";
    if (!best_.empty() && best_ms_ > 0) {
      std::snprintf(best, sizeof(best), "best %s %.4f ms (%.2fx vs %s)", best_.c_str(), best_ms_,
                    speedup_, baseline_.c_str());
    } else if (!best_.empty()) {
      std::snprintf(best, sizeof(best), "best %s (compile-only)", best_.c_str());
    }
    std::fprintf(stderr, "%sround %d | evaluated %d (ok %d, failed %d) | %s | %.1f s%s", tty_ ? "\r\033[K" : "",
                 round_, evaluated_, ok_, failed_, best, seconds, tty_ ? "" : "\n");
    std::fflush(stderr);
  }

  bool quiet_;
  bool tty_;
  int round_ = 0, evaluated_ = 0, ok_ = 0, failed_ = 0;
  std::string best_, baseline_;
  double best_ms_ = 0.0, speedup_ = 0.0;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

int RunSearch(const RunArgs& args) {
  if (args.strategy != "tune") {
    return ReportError(UnimplementedError(
        "--strategy " + args.strategy +
        ": only 'tune' (offline parameter tuning) is available in this build; the LLM "
        "strategies 'branch' and 'refine' arrive with the search-loop work"));
  }
  auto problem = LoadWithDims(args.problem, args.dims);
  if (!problem.ok()) return ReportError(problem.status());
  if (!args.compile_only) {
    std::string why;
    if (!CudaDriverAvailable(&why)) {
      return ReportError(FailedPreconditionError(
          why + "; run on a machine with an NVIDIA GPU, or add --compile-only --arch sm_90"));
    }
  }
  EvaluatorOptions eval_options;
  eval_options.device_ordinal = args.device;
  eval_options.arch = args.arch;
  eval_options.compile_only = args.compile_only;
  eval_options.compile_cache_dir = args.cache_dir;
  eval_options.seed = args.seed;
  eval_options.max_timing_seconds = args.max_timing_seconds;
  auto evaluator = CreateLocalEvaluator(*problem, eval_options);
  if (!evaluator.ok()) return ReportError(evaluator.status());

  SearchOptions options;
  options.seed = args.seed;
  options.budget.max_rounds = args.rounds;
  options.budget.max_candidates = args.max_candidates;
  options.budget.max_wall_seconds = args.budget_minutes * 60.0;
  options.budget.target_speedup = args.target_speedup;
  ParameterTuneOptions tune;
  tune.batch_size = args.batch;
  auto searcher = MakeParameterTuneSearch(options, tune);
  Progress progress(args.json);
  SearchContext context;
  context.problem = &*problem;
  context.evaluator = evaluator->get();
  context.observers.push_back(&progress);
  context.cancel = &g_interrupted;
  std::signal(SIGINT, OnSigint);
  auto summary = searcher->Run(context);
  std::signal(SIGINT, SIG_DFL);
  progress.Finish();
  if (!summary.ok()) return ReportError(summary.status());
  if (args.json) {
    std::cout << "{\"strategy\":\"" << summary->strategy << "\",\"termination\":\""
              << ToString(summary->termination) << "\",\"rounds\":" << summary->rounds
              << ",\"candidates\":" << summary->candidates << ",\"correct\":" << summary->correct
              << ",\"wall_seconds\":" << summary->wall_seconds << ",\"best\":"
              << (summary->best ? summary->best->evaluation.ToJson() : "null") << ",\"best_plan\":"
              << (summary->best ? summary->best->candidate.plan.ToJson() : "null") << "}\n";
  } else {
    std::cout << summary->FullReport();
    if (summary->best) {
      std::cout << "best plan: " << summary->best->candidate.plan.ToJson() << "\n";
    }
  }
  if (summary->termination == TerminationReason::kInterrupted) return kExitInterrupted;
  return summary->best ? kExitOk : kExitRejected;
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  static RunArgs args;
  auto* cmd = app.add_subcommand("run", "Search for a faster kernel for a problem");
  cmd->add_option("PROBLEM", args.problem, "built-in name (see 'ksearch problems') or path")->required();
  cmd->add_option("--strategy", args.strategy, "tune: offline tuning of the problem's templates")
      ->capture_default_str();
  cmd->add_option("--rounds", args.rounds, "rounds to run (0: until another budget ends)")
      ->capture_default_str();
  cmd->add_option("--batch", args.batch, "candidates judged per round")->capture_default_str();
  cmd->add_option("--max-candidates", args.max_candidates, "stop after this many candidates");
  cmd->add_option("--budget-minutes", args.budget_minutes, "stop after this much wall time");
  cmd->add_option("--target-speedup", args.target_speedup, "stop once the best beats the baseline by this");
  cmd->add_option("--dims", args.dims, "override problem dims, e.g. rows=256,cols=1024");
  cmd->add_flag("--compile-only", args.compile_only,
                "run the loop without a GPU, judging up to compilation and plan checks (needs --arch)");
  cmd->add_option("--arch", args.arch, "compile target, e.g. sm_90 (default: the GPU's)");
  cmd->add_option("--device", args.device, "CUDA device ordinal")->capture_default_str();
  cmd->add_option("--seed", args.seed, "seed for every random choice")->capture_default_str();
  cmd->add_option("--cache-dir", args.cache_dir, "compile cache folder ('off' to disable)");
  cmd->add_option("--max-timing-seconds", args.max_timing_seconds, "cap on timing per candidate")
      ->capture_default_str();
  cmd->add_flag("--json", args.json, "print the summary as JSON (no progress line)");
  cmd->footer(
      "Ctrl-C stops gracefully: the candidates in flight finish and the summary is printed.\n\n"
      "Examples:\n"
      "  ksearch run softmax                           tune softmax's templates on GPU 0\n"
      "  ksearch run matmul --rounds 10 --batch 32     a longer tuning run\n"
      "  ksearch run softmax --compile-only --arch sm_90\n"
      "                                                exercise the loop without a GPU");
  cmd->callback([exit_code] { *exit_code = RunSearch(args); });
}

}  // namespace ksearch::cli
