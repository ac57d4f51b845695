// End-to-end throughput of the worker pool: a fixed set of candidates (64 by
// default) on built-in problems (softmax and matmul by default), from cold
// compiles to the last evaluation, in candidates per minute, with where the
// time went (orchestrator compile, queue wait, GPU checks, GPU timing). With
// several GPUs it runs on the first one, then on all, to show the scaling.
// Prints figures; asserts nothing; skips without a GPU.
//
//   ksearch_bench_worker [--gpus 0,1] [--problems softmax,matmul]
//                        [--candidates 64] [--max-timing-seconds 2] [--fake]
//
// --fake runs the same plumbing against `ksearch-worker --fake` without a GPU
// (real compiles, scripted verdicts): a check of the benchmark, not a figure.
//
// The candidates are the problems' template points; past the number of
// points they repeat with a distinct comment, so every candidate is a new
// source (a cold compile), as in a search.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ksearch/ksearch.h"
#include "ksearch/worker_pool.h"
#include "worker/pool_testing.h"

using namespace ksearch;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream parts(text);
  std::string part;
  while (std::getline(parts, part, ',')) {
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

// Every point of a template's space that meets its constraints.
std::vector<std::vector<std::pair<std::string, int64_t>>> Points(const Problem& problem,
                                                                 const TemplateSpec& t) {
  std::vector<std::vector<std::pair<std::string, int64_t>>> points;
  std::vector<size_t> at(t.space.size(), 0);
  while (true) {
    std::vector<std::pair<std::string, int64_t>> params, values = problem.dims;
    for (size_t i = 0; i < t.space.size(); ++i) {
      params.emplace_back(t.space[i].first, t.space[i].second[at[i]]);
      values.emplace_back(t.space[i].first, t.space[i].second[at[i]]);
    }
    bool ok = true;
    for (const std::string& c : t.constraints) {
      auto met = EvaluateCondition(c, values);
      ok = ok && met.ok() && *met;
    }
    if (ok) points.push_back(params);
    size_t i = 0;
    while (i < at.size() && ++at[i] == t.space[i].second.size()) at[i++] = 0;
    if (i == at.size()) break;
  }
  return points;
}

std::vector<Candidate> MakeCandidates(const Problem& problem, int count) {
  std::vector<std::pair<const TemplateSpec*, std::vector<std::pair<std::string, int64_t>>>> all;
  for (const TemplateSpec& t : problem.templates) {
    for (auto& point : Points(problem, t)) all.emplace_back(&t, std::move(point));
  }
  std::vector<Candidate> out;
  for (int k = 0; k < count; ++k) {
    Candidate c;
    if (all.empty()) {
      c = problem.start.ToCandidate("", "start");
    } else {
      const auto& [t, params] = all[static_cast<size_t>(k) % all.size()];
      c = t->kernel.ToCandidate("", "template");
      for (const auto& [name, value] : params) c.plan.SetParam(name, value);
    }
    c.id = "b" + std::to_string(k);
    c.source += "\n// bench candidate " + std::to_string(k) + "\n";
    out.push_back(std::move(c));
  }
  return out;
}

// `gpus` empty: every visible GPU, and nothing printed when that is just one
// (the single-GPU run already covered it).
void RunOne(const Problem& problem, const std::vector<Candidate>& candidates,
            const std::vector<int>& gpus, double max_timing_seconds, bool fake) {
  std::string cache =
      (std::filesystem::temp_directory_path() / "ksearch_bench_worker_cache").string();
  std::filesystem::remove_all(cache);
  WorkerPoolOptions options;
  options.gpus = gpus;
  options.evaluator.compile_cache_dir = cache;
  options.evaluator.max_timing_seconds = max_timing_seconds;
  std::vector<std::string> worker_arguments;  // fake workers: worker/pool_testing.h
  if (fake) worker_arguments = {"--fake", "--fake-devices=" + std::to_string(gpus.back() + 1)};
  auto start = Clock::now();
  auto pool = internal::CreateWorkerPoolEvaluator(problem, options, worker_arguments);
  double setup_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::string gpu_list;
  for (int g : gpus) gpu_list += (gpu_list.empty() ? "" : ",") + std::to_string(g);
  if (pool.ok() && gpus.empty()) {
    if ((*pool)->gpus().size() < 2) return;
    for (int g : (*pool)->gpus()) gpu_list += (gpu_list.empty() ? "" : ",") + std::to_string(g);
  }
  if (!pool.ok()) {
    std::printf("%-8s gpus %-5s  pool did not start: %s\n", problem.name.c_str(), gpu_list.c_str(),
                pool.status().ToString().c_str());
    return;
  }
  WorkerPoolStats before = (*pool)->stats();
  auto t0 = Clock::now();
  std::vector<Evaluation> results = (*pool)->Evaluate(candidates);
  double wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  WorkerPoolStats s = (*pool)->stats();
  std::map<std::string, int> statuses;
  for (const Evaluation& e : results) ++statuses[std::string(ToString(e.status))];
  std::string status_text;
  for (const auto& [name, n] : statuses) status_text += " " + name + "=" + std::to_string(n);
  double n = static_cast<double>(candidates.size());
  double judged = std::max<int64_t>(1, s.judged - before.judged);
  std::printf(
      "%-8s gpus %-5s  %3zu candidates in %6.1f s: %6.1f candidates/min (%5.1f incl. %4.1f s pool "
      "start)\n",
      problem.name.c_str(), gpu_list.c_str(), candidates.size(), wall_s, 60.0 * n / wall_s,
      60.0 * n / (wall_s + setup_s), setup_s);
  std::printf(
      "         per candidate: compile %7.1f ms (orchestrator NVRTC, %zu threads), queue wait "
      "%7.1f ms, "
      "check %7.1f ms, timing %7.1f ms\n",
      (s.compile_ms - before.compile_ms) / n,
      static_cast<size_t>(std::min<unsigned>(std::thread::hardware_concurrency(), 32)),
      (s.queue_wait_ms - before.queue_wait_ms) / judged, (s.check_ms - before.check_ms) / judged,
      (s.timing_ms - before.timing_ms) / judged);
  std::printf("         statuses:%s; worker starts %lld (%.0f ms each), exits %lld\n",
              status_text.c_str(), static_cast<long long>(s.worker_starts),
              s.worker_starts ? s.worker_start_ms / static_cast<double>(s.worker_starts) : 0.0,
              static_cast<long long>(s.worker_exits));
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> gpus;
  std::vector<std::string> problems = {"softmax", "matmul"};
  int count = 64;
  double max_timing_seconds = EvaluatorOptions().max_timing_seconds;
  bool fake = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool has_value = i + 1 < argc;
    if (arg == "--gpus" && has_value) {
      for (const std::string& g : Split(argv[++i])) gpus.push_back(std::atoi(g.c_str()));
    } else if (arg == "--problems" && has_value) {
      problems = Split(argv[++i]);
    } else if (arg == "--candidates" && has_value) {
      count = std::atoi(argv[++i]);
    } else if (arg == "--max-timing-seconds" && has_value) {
      max_timing_seconds = std::atof(argv[++i]);
    } else if (arg == "--fake") {
      fake = true;
    } else {
      std::fprintf(stderr,
                   "usage: ksearch_bench_worker [--gpus 0,1] [--problems softmax,matmul] "
                   "[--candidates 64] [--max-timing-seconds S] [--fake]\n");
      return 2;
    }
  }
  std::string why;
  if (!fake && !CudaDriverAvailable(&why)) {
    std::printf("ksearch_bench_worker: skipped: no GPU (%s)\n", why.c_str());
    return 0;
  }
  // Without --gpus: the first GPU, then every visible one (the scaling).
  const bool all_visible = gpus.empty();
  if (all_visible) gpus = {0};
  std::printf(
      "worker pool throughput: %d candidates per problem, cold compile cache, timing cap %.2f s\n",
      count, max_timing_seconds);
  for (const std::string& name : problems) {
    auto problem = LoadProblem(name);
    if (!problem.ok()) {
      std::fprintf(stderr, "ksearch_bench_worker: %s\n", problem.status().ToString().c_str());
      return 2;
    }
    std::vector<Candidate> candidates = MakeCandidates(*problem, count);
    RunOne(*problem, candidates, {gpus.front()}, max_timing_seconds, fake);
    if (gpus.size() > 1) RunOne(*problem, candidates, gpus, max_timing_seconds, fake);
    if (all_visible && !fake) RunOne(*problem, candidates, {}, max_timing_seconds, fake);
  }
  return 0;
}
