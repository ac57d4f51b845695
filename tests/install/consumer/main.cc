// An outside program built against the installed ksearch package: it sees
// only the public headers and the library.
#include <cstdio>

#include <ksearch/ksearch.h>

int main() {
  auto plan = ksearch::LaunchPlan::FromJson(
      R"j({"launches": [{"kernel": "k", "grid": ["ceil_div(n, 256)"], "block": [256], "args": ["x", "n:i32"]}]})j",
      "consumer");
  if (!plan.ok()) {
    std::printf("consumer: plan failed: %s\n", plan.status().ToString().c_str());
    return 1;
  }
  auto grid = ksearch::EvaluateExpression(plan->launches[0].grid[0], {{"n", 1000}});
  auto problem = ksearch::LoadProblem("softmax");
  std::printf("consumer: ksearch %s, grid %lld, built-in softmax %s\n",
              std::string(ksearch::Version()).c_str(), static_cast<long long>(grid.value_or(-1)),
              problem.ok() ? "loads" : problem.status().ToString().c_str());
  if (!grid.ok() || *grid != 4 || !problem.ok()) return 1;
  std::printf("consumer: ok\n");
  return 0;
}
