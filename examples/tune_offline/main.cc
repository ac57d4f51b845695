// Offline tuning, the way an inference engine tunes one of its ops: load a
// problem, make an evaluator for this GPU, run the parameter-tuning search
// with a small budget, and print the winner's launch plan.
//
//   example_tune_offline [PROBLEM]          (default: softmax)
//
// Without a GPU, pass --compile-only to run the same loop judging candidates
// up to compilation (sm_90).
#include <cstdio>
#include <cstring>

#include <ksearch/ksearch.h>

int main(int argc, char** argv) {
  const char* name = "softmax";
  bool compile_only = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--compile-only")) {
      compile_only = true;
    } else {
      name = argv[i];
    }
  }

  // 1. The problem: a built-in name or a folder with problem.json.
  auto problem = ksearch::LoadProblem(name);
  if (!problem.ok()) {
    std::fprintf(stderr, "%s\n", problem.status().ToString().c_str());
    return 2;
  }

  // 2. The judge. The in-process evaluator is fine for trusted templates.
  ksearch::EvaluatorOptions eval_options;
  eval_options.compile_only = compile_only;
  if (compile_only) eval_options.arch = "sm_90";
  eval_options.max_timing_seconds = 0.5;
  auto evaluator = ksearch::CreateLocalEvaluator(*problem, eval_options);
  if (!evaluator.ok()) {
    // Without a driver this says so in one line.
    std::fprintf(stderr, "%s\n", evaluator.status().ToString().c_str());
    return 3;
  }

  // 3. The search: four rounds of eight template points.
  ksearch::SearchOptions options;
  options.budget.max_rounds = 4;
  ksearch::ParameterTuneOptions tune;
  tune.batch_size = 8;
  auto searcher = ksearch::MakeParameterTuneSearch(options, tune);
  ksearch::SearchContext context;
  context.problem = &*problem;
  context.evaluator = evaluator->get();
  auto summary = searcher->Run(context);
  if (!summary.ok()) {
    std::fprintf(stderr, "%s\n", summary.status().ToString().c_str());
    return 4;
  }

  // 4. The result: a report, and the plan an engine would store.
  std::printf("%s", summary->FullReport().c_str());
  if (summary->best) std::printf("plan: %s\n", summary->best->candidate.plan.ToJson().c_str());
  return summary->best ? 0 : 1;
}
