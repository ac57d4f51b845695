#include <fstream>
#include <iostream>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "ksearch/evaluator.h"

namespace ksearch::cli {

namespace {

struct EvalArgs {
  std::string problem;
  std::string source;
  std::string plan;
  std::string kernel = "start";
  std::string dims;
  std::string arch;
  std::string cache_dir;
  std::vector<std::string> nvrtc_options;
  bool compile_only = false;
  bool unsandboxed_compile = false;
  bool json = false;
  int device = 0;
  uint64_t replay_input_seed = 0;
  double max_timing_seconds = 2.0;
};

int RunEval(const EvalArgs& args) {
  auto problem = LoadWithDims(args.problem, args.dims);
  if (!problem.ok()) return ReportError(problem.status());
  Candidate candidate;
  if (!args.source.empty() || !args.plan.empty()) {
    if (args.source.empty() || args.plan.empty()) {
      return ReportError(InvalidArgumentError("--source and --plan go together"));
    }
    auto source = ReadInputFile(args.source, "--source");
    if (!source.ok()) return ReportError(source.status());
    auto plan_text = ReadInputFile(args.plan, "--plan");
    if (!plan_text.ok()) return ReportError(plan_text.status());
    auto plan = LaunchPlan::FromJson(*plan_text, args.plan);
    if (!plan.ok()) return ReportError(plan.status());
    candidate.id = args.source;
    candidate.source = std::move(*source);
    candidate.plan = std::move(*plan);
    candidate.provenance.generator = "user";
  } else if (args.kernel == "start" || args.kernel == "reference" || args.kernel == "reference_fp32") {
    const KernelSpec& k = args.kernel == "start" ? problem->start
                          : args.kernel == "reference" ? problem->reference
                                                       : problem->reference_fp32;
    candidate = k.ToCandidate(args.kernel, args.kernel);
  } else if (args.kernel.rfind("template:", 0) == 0) {
    std::string name = args.kernel.substr(9);
    const TemplateSpec* found = nullptr;
    for (const TemplateSpec& t : problem->templates) {
      if (t.name == name) found = &t;
    }
    if (!found) return ReportError(InvalidArgumentError("--kernel: the problem has no template '" + name + "'"));
    candidate = found->kernel.ToCandidate(args.kernel, "template");
  } else {
    return ReportError(InvalidArgumentError("--kernel: expected start, reference, reference_fp32 or template:NAME, got '" +
                                            args.kernel + "'"));
  }
  candidate.compile_options.insert(candidate.compile_options.end(), args.nvrtc_options.begin(),
                                   args.nvrtc_options.end());
  EvaluatorOptions options;
  options.device_ordinal = args.device;
  options.arch = args.arch;
  options.compile_only = args.compile_only;
  options.compile_cache_dir = args.cache_dir;
  options.replay_input_seed = args.replay_input_seed;
  options.max_timing_seconds = args.max_timing_seconds;
  options.allow_unsandboxed_compile = args.unsandboxed_compile;
  WarnIfUnsandboxed(args.unsandboxed_compile);
  if (!args.compile_only) {
    std::string why;
    if (!CudaDriverAvailable(&why)) {
      return ReportError(FailedPreconditionError(
          why + "; run on a machine with an NVIDIA GPU, or add --compile-only --arch sm_90"));
    }
  }
  auto evaluator = CreateLocalEvaluator(*problem, options);
  if (!evaluator.ok()) return ReportError(evaluator.status());
  std::vector<Evaluation> results = (*evaluator)->Evaluate(std::span<const Candidate>(&candidate, 1));
  const Evaluation& e = results.front();
  if (args.json) {
    std::cout << e.ToJson() << "\n";
  } else {
    std::cout << e.Report();
  }
  if (e.status == EvalStatus::kCompiled) return kExitCompiledOnly;
  return e.correct() ? kExitOk : kExitRejected;
}

}  // namespace

void AddEvalCommand(CLI::App& app, int* exit_code) {
  static EvalArgs args;
  auto* cmd = app.add_subcommand("eval", "Judge one kernel against a problem: compile, check, time");
  cmd->add_option("PROBLEM", args.problem, "built-in name (see 'ksearch problems') or path")->required();
  auto* source =
      cmd->add_option("--source", args.source, "CUDA source of the kernel (device code only)");
  auto* plan = cmd->add_option("--plan", args.plan, "launch plan JSON for the kernel");
  cmd->add_option("--kernel", args.kernel,
                  "without --source: judge one of the problem's own kernels: start, reference, "
                  "reference_fp32 or template:NAME")
      ->capture_default_str()
      ->excludes(source)
      ->excludes(plan);
  cmd->add_option("--dims", args.dims, "override problem dims, e.g. rows=256,cols=1024");
  cmd->add_flag("--compile-only", args.compile_only,
                "compile and check the plan without a GPU (needs --arch)");
  AddArchOption(*cmd, args.arch, "compile target, e.g. sm_90 (default: the GPU's)");
  AddNumber(*cmd, "--device", args.device, "CUDA device ordinal", Between(0, kMaxGpuOrdinal))
      ->capture_default_str();
  AddNumber(*cmd, "--replay-input-seed", args.replay_input_seed,
            "fixed input seed, for tests and replays only: every input becomes predictable to a kernel that knows it (docs/evaluation.md, Secrets); default 0: the operating system's randomness", AtLeast(0));
  cmd->add_option("--nvrtc-option", args.nvrtc_options, "extra NVRTC option (repeatable)");
  AddCacheDirOption(*cmd, args.cache_dir);
  AddNumber(*cmd, "--max-timing-seconds", args.max_timing_seconds, "cap on timing per kernel",
            PositiveUpTo(kSecondsInAnHour))
      ->capture_default_str();
  cmd->add_flag("--unsandboxed-compile", args.unsandboxed_compile, kUnsandboxedCompileHelp);
  cmd->add_flag("--json", args.json, "print the evaluation as JSON");
  cmd->footer(
      "Exit status: 0 when the kernel is correct, 1 when it was judged and rejected\n"
      "(compile_error, wrong_result, …), 2 for bad input, 3 without a GPU, 5 with\n"
      "--compile-only when it compiled and its plan checks (status \"compiled\": never run).\n\n"
      "Examples:\n"
      "  ksearch eval softmax --source my.cu --plan my.json\n"
      "  ksearch eval softmax --kernel start --dims rows=64,cols=4096\n"
      "  ksearch eval ./problems/softmax --source my.cu --plan my.json --compile-only --arch sm_90");
  cmd->callback([exit_code] { *exit_code = RunEval(args); });
}

}  // namespace ksearch::cli
