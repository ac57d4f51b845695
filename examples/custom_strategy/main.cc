// A search strategy of your own, compared with the built-in
// ParallelBranchSearch at equal budget: CategoryBeamSearch (category_beam.h)
// keeps the fastest kernel of every idea category where the built-in keeps
// the k fastest. Both get the same problem, evaluator, generators and
// SearchBudget, and the two summaries are printed side by side.
//   example_custom_strategy [PROBLEM] [--compile-only] [--candidates N]
//   (default: softmax, 48 candidates each)
// Ideas come from the offline catalog, branches from parameter mutation: no
// language model needed (MakeLlmIdeaGenerator/MakeLlmBrancher plug one in,
// and then max_tokens or max_cost_usd make the budget).
#include <ksearch/ksearch.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "category_beam.h"

namespace {

int Fail(const ksearch::Status& status, int code) {
  std::fprintf(stderr, "%s\n", status.ToString().c_str());
  return code;
}

std::string BestTime(const ksearch::SearchSummary& s) {
  if (!s.best) return "-";
  const ksearch::Evaluation& e = s.best->evaluation;
  if (!e.timing) return s.best->candidate.id + " (untimed)";
  char text[96];
  std::snprintf(text, sizeof(text), "%.4f ms (%s)", e.timing->median_ms,
                s.best->candidate.id.c_str());
  return text;
}

void Row(const char* what, const std::string& a, const std::string& b) {
  std::printf("  %-16s %-30s %-30s\n", what, a.c_str(), b.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  const char* name = "softmax";
  bool compile_only = !ksearch::CudaDriverAvailable();  // without a GPU: judge up to compilation
  long candidates = 48;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--compile-only")) {
      compile_only = true;
    } else if (!std::strcmp(argv[i], "--candidates") && i + 1 < argc) {
      char* end = nullptr;
      candidates = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || candidates < 1) {
        std::fprintf(stderr, "--candidates: '%s' is not a positive whole number\n", argv[i]);
        return 2;
      }
    } else {
      name = argv[i];
    }
  }
  auto problem = ksearch::LoadProblem(name);
  if (!problem.ok()) return Fail(problem.status(), 2);
  ksearch::EvaluatorOptions eval_options;
  eval_options.compile_only = compile_only;
  if (compile_only) eval_options.arch = "sm_90";
  auto evaluator = ksearch::CreateLocalEvaluator(*problem, eval_options);
  if (!evaluator.ok()) return Fail(evaluator.status(), 3);

  // The budget both strategies get: the same number of judged candidates
  // (and a wall-time cap, so neither runs away).
  ksearch::SearchBudget budget;
  budget.max_candidates = candidates;
  budget.max_wall_seconds = 600;

  auto ideas = ksearch::MakeCatalogIdeaGenerator();
  auto brancher = ksearch::MakeParameterMutationBrancher();
  ksearch::SearchContext context;
  context.problem = &*problem;
  context.evaluator = evaluator->get();
  context.ideas = ideas.get();
  context.brancher = brancher.get();

  example::CategoryBeamSearch beam(budget, /*ideas_per_seed=*/2, /*branches=*/2);
  auto mine = beam.Run(context);
  if (!mine.ok()) return Fail(mine.status(), 4);

  ksearch::SearchOptions options;
  options.budget = budget;
  options.seeds = 2;
  options.ideas = 2;
  options.branches = 2;
  auto builtin = ksearch::MakeParallelBranchSearch(options)->Run(context);
  if (!builtin.ok()) return Fail(builtin.status(), 4);

  std::printf("%s on %s, %ld candidates each%s\n\n", problem->name.c_str(),
              (*evaluator)->device().name.c_str(), candidates,
              compile_only ? " (compile-only: ranked by registers, not time)" : "");
  Row("", mine->strategy, builtin->strategy);
  Row("termination", std::string(ksearch::ToString(mine->termination)),
      std::string(ksearch::ToString(builtin->termination)));
  Row("rounds", std::to_string(mine->rounds), std::to_string(builtin->rounds));
  Row("ideas", std::to_string(mine->ideas), std::to_string(builtin->ideas));
  Row("candidates", std::to_string(mine->candidates), std::to_string(builtin->candidates));
  Row("correct", std::to_string(mine->correct), std::to_string(builtin->correct));
  Row("best", BestTime(*mine), BestTime(*builtin));
  auto speedup = [](const ksearch::SearchSummary& s) -> std::string {
    if (!s.best || !s.best->evaluation.speedup) return "-";
    char text[64];
    std::snprintf(text, sizeof(text), "%.2fx vs %s", s.best->evaluation.speedup->ratio,
                  s.best->evaluation.speedup->baseline.c_str());
    return text;
  };
  Row("best speedup", speedup(*mine), speedup(*builtin));
  char gpu[2][32];
  std::snprintf(gpu[0], sizeof(gpu[0]), "%.2f s", mine->gpu_seconds);
  std::snprintf(gpu[1], sizeof(gpu[1]), "%.2f s", builtin->gpu_seconds);
  Row("judge time", gpu[0], gpu[1]);

  std::printf("\n%s's ideas and their outcomes:\n", mine->strategy.c_str());
  for (const auto& idea : mine->history.ideas) {
    std::printf("  %s: %s\n    -> %s\n", idea.id.c_str(), idea.text.c_str(),
                idea.outcome.c_str());
  }
  return mine->best && builtin->best ? 0 : 1;
}
