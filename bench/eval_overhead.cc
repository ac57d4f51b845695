// Per-candidate overhead of the evaluator on a softmax-sized problem: compile
// (cold and cached), correctness checks, timing, total — with the kernel's
// own run time shown apart. Also times the same kernel twice and reports the
// spread. Prints figures; asserts nothing.
//
//   ksearch_bench_eval [PROBLEM] [--candidates N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>

#include "ksearch/ksearch.h"

using namespace ksearch;

int main(int argc, char** argv) {
  std::string name = "softmax";
  int batch = 8;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--candidates") && i + 1 < argc) {
      batch = std::atoi(argv[++i]);
    } else {
      name = argv[i];
    }
  }
  std::string why;
  if (!CudaDriverAvailable(&why)) {
    std::fprintf(stderr, "ksearch_bench_eval: %s\n", why.c_str());
    return 3;
  }
  auto problem = LoadProblem(name);
  if (!problem.ok()) {
    std::fprintf(stderr, "ksearch_bench_eval: %s\n", problem.status().ToString().c_str());
    return 2;
  }
  std::string cache = (std::filesystem::temp_directory_path() / "ksearch_bench_cache").string();
  std::filesystem::remove_all(cache);
  EvaluatorOptions options;
  options.compile_cache_dir = cache;
  auto t0 = std::chrono::steady_clock::now();
  auto evaluator = CreateLocalEvaluator(*problem, options);
  double setup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!evaluator.ok()) {
    std::fprintf(stderr, "ksearch_bench_eval: %s\n", evaluator.status().ToString().c_str());
    return 4;
  }
  const DeviceInfo& d = (*evaluator)->device();
  std::printf("device: %s (%s), driver %d, NVRTC %s; measured peaks: %.0f GB/s copy, %.1f TFLOP/s fp32 FMA\n",
              d.name.c_str(), d.Arch().c_str(), d.driver_version, d.nvrtc_version.c_str(),
              d.peak_bandwidth_gbps, d.peak_gflops / 1e3);
  std::printf("problem: %s; evaluator set-up (judge compile, tolerance measurement, reference timing): %.1f ms\n",
              name.c_str(), setup_ms);
  auto row = [](const char* label, const Evaluation& e) {
    double kernel = e.timing ? e.timing->median_ms : 0.0;
    std::printf("%-28s %-8s compile %8.1f ms%s  check %7.1f ms  timing %7.1f ms (n=%3d)  total %8.1f ms  "
                "kernel median %.4f ms  overhead excl. timing %.1f ms\n",
                label, std::string(ToString(e.status)).c_str(), e.compile_ms, e.compile_cached ? " (cached)" : "         ",
                e.check_ms, e.timing_ms, e.timing ? e.timing->repetitions : 0, e.total_ms, kernel,
                e.total_ms - e.timing_ms);
  };
  Candidate start = problem->start.ToCandidate("start", "bench");
  auto cold = (*evaluator)->Evaluate(std::span<const Candidate>(&start, 1)).front();
  row("start, cold compile", cold);
  auto warm = (*evaluator)->Evaluate(std::span<const Candidate>(&start, 1)).front();
  row("start, cached compile", warm);
  if (cold.timing && warm.timing) {
    double spread = std::abs(cold.timing->median_ms - warm.timing->median_ms) /
                    std::min(cold.timing->median_ms, warm.timing->median_ms);
    std::printf("same kernel timed twice: %.4f ms and %.4f ms, spread %.2f%%\n", cold.timing->median_ms,
                warm.timing->median_ms, 100.0 * spread);
  }
  if (!problem->templates.empty()) {
    // A batch of template points: compiles run in parallel, GPU work in order.
    const TemplateSpec& t = problem->templates.front();
    std::vector<Candidate> candidates;
    for (int i = 0; i < batch; ++i) {
      Candidate c = t.kernel.ToCandidate("t" + std::to_string(i), "bench");
      // Vary the first param over its values so compiles are distinct.
      if (!t.space.empty()) {
        const auto& values = t.space.front().second;
        c.plan.SetParam(t.space.front().first, values[static_cast<size_t>(i) % values.size()]);
        if (t.space.size() > 1) {
          const auto& v2 = t.space[1].second;
          c.plan.SetParam(t.space[1].first, v2[(static_cast<size_t>(i) / values.size()) % v2.size()]);
        }
      }
      candidates.push_back(c);
    }
    auto b0 = std::chrono::steady_clock::now();
    auto results = (*evaluator)->Evaluate(candidates);
    double batch_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b0).count();
    for (const Evaluation& e : results) row(("template " + e.candidate_id).c_str(), e);
    std::printf("batch of %d template candidates (cold compiles in parallel): %.1f ms wall, %.1f candidates/minute\n",
                batch, batch_ms, 60000.0 * batch / batch_ms);
    b0 = std::chrono::steady_clock::now();
    results = (*evaluator)->Evaluate(candidates);
    batch_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - b0).count();
    std::printf("same batch again (compiles cached): %.1f ms wall, %.1f candidates/minute\n", batch_ms,
                60000.0 * batch / batch_ms);
  }
  return 0;
}
