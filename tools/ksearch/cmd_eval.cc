#include <fstream>
#include <iostream>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "ksearch/evaluator.h"

namespace ksearch::cli {

StatusOr<std::vector<std::pair<std::string, int64_t>>> ParseDims(const std::string& text) {
  std::vector<std::pair<std::string, int64_t>> out;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    auto eq = part.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgumentError("--dims: expected NAME=VALUE[,NAME=VALUE…], got '" + part + "'");
    }
    try {
      size_t used = 0;
      long long v = std::stoll(part.substr(eq + 1), &used);
      if (used != part.size() - eq - 1) throw std::invalid_argument("trailing text");
      out.emplace_back(part.substr(0, eq), v);
    } catch (const std::exception&) {
      return InvalidArgumentError("--dims: '" + part.substr(eq + 1) + "' is not an integer (in '" + part + "')");
    }
  }
  return out;
}

StatusOr<Problem> LoadWithDims(const std::string& name, const std::string& dims) {
  KSEARCH_ASSIGN_OR_RETURN(Problem problem, LoadProblem(name));
  if (dims.empty()) return problem;
  KSEARCH_ASSIGN_OR_RETURN(auto overrides, ParseDims(dims));
  auto resized = problem.WithDims(overrides);
  if (!resized.ok()) return resized.status().WithContext("--dims");
  return resized;
}

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

StatusOr<std::string> ReadText(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(std::string(flag) + ": cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

int RunEval(const EvalArgs& args) {
  auto problem = LoadWithDims(args.problem, args.dims);
  if (!problem.ok()) return ReportError(problem.status());
  Candidate candidate;
  if (!args.source.empty() || !args.plan.empty()) {
    if (args.source.empty() || args.plan.empty()) {
      return ReportError(InvalidArgumentError("--source and --plan go together"));
    }
    auto source = ReadText(args.source, "--source");
    if (!source.ok()) return ReportError(source.status());
    auto plan_text = ReadText(args.plan, "--plan");
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
  cmd->add_option("--source", args.source, "CUDA source of the kernel (device code only)");
  cmd->add_option("--plan", args.plan, "launch plan JSON for the kernel");
  cmd->add_option("--kernel", args.kernel,
                  "without --source: judge one of the problem's own kernels: start, reference, "
                  "reference_fp32 or template:NAME")
      ->capture_default_str();
  cmd->add_option("--dims", args.dims, "override problem dims, e.g. rows=256,cols=1024");
  cmd->add_flag("--compile-only", args.compile_only,
                "compile and check the plan without a GPU (needs --arch)");
  cmd->add_option("--arch", args.arch, "compile target, e.g. sm_90 (default: the GPU's)");
  cmd->add_option("--device", args.device, "CUDA device ordinal")
      ->capture_default_str()
      ->check(NonNegative());
  cmd->add_option("--replay-input-seed", args.replay_input_seed,
                  "fixed input seed, for tests and replays only: every input becomes predictable to a kernel that knows it (docs/evaluation.md, Secrets); default 0: the operating system's randomness")
      ->check(NonNegative());
  cmd->add_option("--nvrtc-option", args.nvrtc_options, "extra NVRTC option (repeatable)");
  cmd->add_option("--cache-dir", args.cache_dir, "compile cache folder ('off' to disable)");
  cmd->add_option("--max-timing-seconds", args.max_timing_seconds, "cap on timing per kernel")
      ->capture_default_str()
      ->check(Positive());
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
