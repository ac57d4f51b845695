// Fuzzes the launch-plan parser and resolver on one fixed problem. The
// properties: no crash (ASan, UBSan, stack), and a plan that parses survives
// its canonical JSON unchanged (ToJson is what the store and the content hash
// use, so a plan must not change meaning on the way).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/plan_resolve.h"
#include "ksearch/candidate.h"
#include "ksearch/problem.h"

namespace {

// Two dims, an input and an output: what plans bind to.
constexpr std::string_view kProblem = R"({
  "name": "fuzz", "dims": {"rows": 64, "cols": 1024},
  "tensors": [{"name": "x", "dtype": "f32", "shape": ["rows", "cols"], "role": "input"},
              {"name": "y", "dtype": "f32", "shape": ["rows", "cols"], "role": "output"}],
  "tolerance": {"policy": "relaxed"}, "flops": "rows * cols", "bytes": "8 * rows * cols",
  "reference": {"source_text": "extern \"C\" __global__ void k() {}",
                "plan": {"launches": [{"kernel": "k", "grid": [1], "block": [1], "args": []}]}}})";

const ksearch::Problem& TheProblem() {
  static const ksearch::Problem* problem = [] {
    auto p = ksearch::Problem::FromJson(kProblem, "", "fuzz problem");
    if (!p.ok()) std::abort();
    return new ksearch::Problem(std::move(*p));
  }();
  return *problem;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto plan = ksearch::LaunchPlan::FromJson(json, "fuzz plan");
  if (!plan.ok()) return 0;
  auto again = ksearch::LaunchPlan::FromJson(plan->ToJson(), "canonical plan");
  if (!again.ok() || *again != *plan) __builtin_trap();
  ksearch::internal::ResolvePlan(TheProblem(), *plan).status().IgnoreError();
  return 0;
}
