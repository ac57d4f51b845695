#include "run_args.h"

#include <algorithm>
#include <sstream>

#include "cli_util.h"
#include "ksearch/store.h"
#include "ksearch/strategies.h"

namespace ksearch::cli {

StatusOr<std::vector<int>> ParseGpus(const std::string& text) {
  std::vector<int> gpus;
  if (text.empty() || text == "all") return gpus;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (std::string wrong = CheckNumber(item, NumberType::kInt32, Between(0, kMaxGpuOrdinal));
        !wrong.empty()) {
      return InvalidArgumentError("--gpus: " + (item.empty() ? "an empty entry" : wrong) +
                                  "; expected GPU ordinals, e.g. --gpus 0,1, or all");
    }
    const int gpu = std::stoi(item);
    if (std::find(gpus.begin(), gpus.end(), gpu) != gpus.end()) {
      return InvalidArgumentError("--gpus: GPU " + item + " twice");
    }
    gpus.push_back(gpu);
  }
  return gpus;
}

std::string DbPath(const RunArgs& args) { return args.db.empty() ? Store::DefaultPath() : args.db; }

namespace {
constexpr std::string_view kExchangePrefix = "exchange:";
}  // namespace

bool UsesExchange(const RunArgs& args) {
  for (const std::string* spec : {&args.llm, &args.idea_llm, &args.branch_llm}) {
    if (spec->starts_with(kExchangePrefix)) return true;
  }
  return false;
}

void SetExchangeFolder(RunArgs& args, const std::string& folder) {
  for (std::string* spec : {&args.llm, &args.idea_llm, &args.branch_llm}) {
    if (spec->starts_with(kExchangePrefix)) *spec = std::string(kExchangePrefix) + folder;
  }
}

Status ValidateArgs(const RunArgs& args) {
  if (args.strategy != "tune" && args.strategy != "branch" && args.strategy != "refine") {
    return InvalidArgumentError("--strategy " + args.strategy + ": expected branch, refine or tune");
  }
  KSEARCH_RETURN_IF_ERROR(ParseTuneMethod(args.tune_method).status());
  KSEARCH_RETURN_IF_ERROR(ParseGpus(args.gpus).status());
  if (args.in_process && !args.gpus.empty()) {
    return InvalidArgumentError("--in-process judges on one GPU: use --device N, not --gpus");
  }
  if (!args.queue.empty()) {
    if (args.arch.empty()) {
      return InvalidArgumentError("--queue needs --arch (the workers' GPUs, e.g. sm_90)");
    }
    if (args.in_process || args.compile_only || !args.gpus.empty()) {
      return InvalidArgumentError(
          "--queue judges on the workers' GPUs: drop --in-process, --compile-only and --gpus");
    }
  }
  return Status::Ok();
}

void AddBudgetOptions(CLI::App& cmd, RunArgs& args) {
  AddNumber(cmd, "--max-candidates", args.max_candidates, "stop after this many candidates",
            AtLeast(0));
  AddNumber(cmd, "--budget-minutes", args.budget_minutes, "stop after this much wall time",
            AtLeast(0));
  AddNumber(cmd, "--budget-gpu-minutes", args.budget_gpu_minutes,
            "stop after this much evaluator time", AtLeast(0));
}

void ApplyRoundsDefault(const CLI::App& cmd, RunArgs& args) {
  if (cmd.count("--rounds") > 0) return;
  bool bounded = args.budget_minutes > 0 || args.budget_gpu_minutes > 0 || args.max_candidates > 0;
  args.rounds = bounded ? 0 : 6;
}

void AddRunOptions(CLI::App& cmd, RunArgs& args) {
  cmd.add_option("PROBLEM", args.problem, "built-in name (see 'ksearch problems') or path");
  cmd.add_option("--strategy", args.strategy,
                 "branch: ideas + parallel branches (the method); refine: one candidate at a "
                 "time; tune: offline tuning of the problem's templates")
      ->capture_default_str();
  cmd.add_option("--llm", args.llm,
                 "openai:MODEL, anthropic:MODEL, exchange:DIR (requests and replies as files, "
                 "answered elsewhere: 'ksearch answer'), mock, replay:FILE (or an exchange "
                 "folder), or catalog (offline parameter moves; the default for branch and "
                 "refine)");
  cmd.add_option("--base-url", args.base_url,
                 "server URL (default: $OPENAI_BASE_URL / $ANTHROPIC_BASE_URL, else the provider's)");
  cmd.add_option("--prices", args.prices,
                 "price table JSON (docs/llm.md) for costs and --budget-usd");
  cmd.add_option("--record", args.record,
                 "also append every LLM exchange to this JSONL file (for replay:)");
  cmd.add_option("--prompts", args.prompts,
                 "folder of prompt templates overriding the built-in ones");
  cmd.add_option("--mock-script", args.mock_script, "with --llm mock: a mock script (docs/llm.md)");
  // The model's settings, together (docs/llm.md has the providers' rules).
  cmd.add_option("--idea-llm", args.idea_llm,
                 "the model that writes ideas, in --llm's forms (default: --llm)");
  cmd.add_option("--branch-llm", args.branch_llm,
                 "the model that writes implementations and repairs (default: --llm)");
  AddNumber(cmd, "--max-output-tokens", args.max_output_tokens,
            "output tokens per reply at most, reasoning included (default 16384)",
            Between(1, 1000000));
  AddNumber(cmd, "--temperature", args.temperature,
            "sampling temperature (default: none sent, the provider's default; never sent "
            "to OpenAI reasoning models or with --thinking-budget)",
            Between(0, 2));
  cmd.add_option("--reasoning-effort", args.reasoning_effort,
                 "OpenAI reasoning models (o1, o3, o4, gpt-5): minimal, low, medium or high")
      ->check(CLI::IsMember({"minimal", "low", "medium", "high"}));
  AddNumber(cmd, "--thinking-budget", args.thinking_budget,
            "Anthropic extended thinking: budget_tokens (>= 1024, below "
            "--max-output-tokens)",
            AtLeast(0));
  AddNumber(cmd, "--llm-timeout", args.llm_timeout_seconds,
            "seconds per LLM attempt until the whole reply is read", PositiveUpTo(kSecondsInADay))
      ->capture_default_str();
  AddNumber(cmd, "--llm-attempts", args.llm_attempts,
            "attempts per LLM request, the first included (time-outs: at most 2)", Between(1, 20))
      ->capture_default_str();
  AddNumber(cmd, "--rounds", args.rounds,
            "rounds to run (0: until another budget ends; default 6, unlimited when "
            "--budget-minutes, --budget-gpu-minutes or --max-candidates is given alone)",
            AtLeast(0));
  AddNumber(cmd, "--seeds", args.seeds, "branch: k, correct kernels seeding each round", AtLeast(1))
      ->capture_default_str();
  AddNumber(cmd, "--ideas", args.ideas, "branch: n, ideas per seed per round", AtLeast(1))
      ->capture_default_str();
  AddNumber(cmd, "--branches", args.branches, "branch: b, implementations per idea", AtLeast(1))
      ->capture_default_str();
  AddNumber(cmd, "--exchange-wait", args.exchange_wait_seconds,
            "with exchange:DIR: once every request has waited SECONDS for its reply and "
            "nothing else is left to do, stop (exit 9) to be resumed when replies are "
            "there (default 0: wait as long as it takes)",
            Between(0, kSecondsInADay));
  cmd.add_flag("--repair", args.repair,
               "branch: give a branch that fails to compile or is wrong one fix attempt");
  cmd.add_flag("--idea-per-step", args.idea_per_step,
               "refine: ask for an idea before each revision (two requests per candidate)");
  AddNumber(cmd, "--max-in-flight", args.max_in_flight, "LLM requests in flight at most",
            Between(1, 4096))
      ->capture_default_str();
  AddNumber(cmd, "--batch", args.batch, "tune: candidates judged per round", AtLeast(1))
      ->capture_default_str();
  cmd.add_option("--tune-method", args.tune_method, "tune: random, annealing or halving")
      ->capture_default_str();
  AddBudgetOptions(cmd, args);
  AddNumber(cmd, "--budget-tokens", args.budget_tokens, "stop after this many LLM tokens",
            AtLeast(0));
  AddNumber(cmd, "--budget-usd", args.budget_usd,
            "stop after this much LLM spending (needs --prices)", AtLeast(0));
  AddNumber(cmd, "--target-speedup", args.target_speedup,
            "stop once the best beats the baseline by this", AtLeast(0));
  cmd.add_option("--dims", args.dims, "override problem dims, e.g. rows=256,cols=1024");
  cmd.add_flag("--compile-only", args.compile_only,
               "run the loop without a GPU, judging up to compilation and plan checks (needs "
               "--arch)");
  AddArchOption(cmd, args.arch, "compile target, e.g. sm_90 (default: the GPU's)");
  AddNumber(cmd, "--seed", args.seed,
            "seed of the search's own choices (seeds, template points); the judge's inputs never "
            "depend on it",
            AtLeast(0))
      ->capture_default_str();
  AddNumber(cmd, "--replay-input-seed", args.replay_input_seed,
            "fixed input seed, for tests and replays only: every input becomes predictable to a kernel "
            "that knows it (docs/evaluation.md, Secrets); default 0: the operating system's randomness",
            AtLeast(0));
  AddCacheDirOption(cmd, args.cache_dir);
  AddNumber(cmd, "--max-timing-seconds", args.max_timing_seconds, "cap on timing per candidate",
            PositiveUpTo(kSecondsInAnHour))
      ->capture_default_str();
  cmd.add_flag("--unsandboxed-compile", args.unsandboxed_compile, kUnsandboxedCompileHelp);
  cmd.add_flag("--json", args.json,
               "print the summary and the search tree as JSON (no progress line)");
  AddProgressOption(cmd, args);
}

void AddProgressOption(CLI::App& cmd, RunArgs& args) {
  AddNumber(cmd, "--progress-every", args.progress_every_seconds,
            "when stderr is not a terminal (a log, CI), also print the progress line every "
            "SECONDS, not only at the end of each round (default 30; 0: only then)",
            Between(0, kSecondsInADay));
}

void AddSelectionOptions(CLI::App& cmd, RunArgs& args) {
  cmd.add_option("--gpus", args.gpus,
                 "GPUs to judge on, one isolated worker process each, e.g. 0,1 (default: all)");
  cmd.add_flag("--in-process", args.in_process,
               "judge in this process on --device (no isolation: a crashing kernel ends the "
               "search; for trusted templates)");
  AddNumber(cmd, "--device", args.device, "CUDA device ordinal for --in-process",
            Between(0, kMaxGpuOrdinal))
      ->capture_default_str();
  cmd.add_option("--queue", args.queue,
                 "judge on GPU hosts serving this Redis instead (redis://HOST[:PORT][/DB]; needs "
                 "--arch; see 'ksearch worker --help')");
  cmd.add_option("--queue-run", args.queue_run,
                 "with --queue: name of this search's results in Redis; the same name again "
                 "collects them (default: random)");
  cmd.add_option("--db", args.db,
                 "the ksearch database to record in (default: $KSEARCH_DB, else ./ksearch.db)");
}

}  // namespace ksearch::cli
