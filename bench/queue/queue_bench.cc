// Queue overhead with a fake evaluator that answers at once: per-job latency
// from Evaluate() to its result through Redis, one job at a time (min, median,
// p99), and jobs per second with N worker processes. Prints figures; never
// passes or fails on a time.
//
//   ksearch_bench_queue [--jobs N] [--latency-jobs N] [--workers 1,2,4]
//                       [--fsync everysec|always|no] [--url redis://…]
//   ksearch_bench_queue --compare --url redis://… [--gpus 0,1] [--arch sm_90]
//                       [--candidates 64] [--fake]
// --compare judges the same fixed softmax template points twice, through the
// local worker pool and through the queue (served by `ksearch worker`
// processes started beforehand, bench/queue/gpu_compare.sh), and prints
// candidates per minute for each.
// Without --url it starts its own redis-server on a free loopback port (the
// append-only file on, fsync as given). Workers are this binary started
// again with --worker.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>

#include "ksearch/queue.h"
#include "ksearch/worker_pool.h"
#include "queue_test_util.h"
#include "worker/pool_testing.h"

namespace {

using Clock = std::chrono::steady_clock;

class InstantEvaluator final : public ksearch::Evaluator {
 public:
  explicit InstantEvaluator(ksearch::Problem problem) : problem_(std::move(problem)) {
    device_.name = "instant fake";
    device_.cc_major = 9;
  }
  std::vector<ksearch::Evaluation> Evaluate(std::span<const ksearch::Candidate> candidates,
                                            const std::atomic<bool>*) override {
    std::vector<ksearch::Evaluation> out(candidates.size());
    for (size_t i = 0; i < candidates.size(); ++i) {
      out[i].candidate_id = candidates[i].id;
      out[i].status = ksearch::EvalStatus::kOk;
      out[i].device = device_;
      out[i].timing = ksearch::TimingStats{0.02, 0.02, 0.02, 0.02, 0.02, 0.02, 10};
    }
    return out;
  }
  const ksearch::Problem& problem() const override { return problem_; }
  const ksearch::DeviceInfo& device() const override { return device_; }
  std::optional<ksearch::TimingStats> reference_timing() const override { return std::nullopt; }
  std::optional<ksearch::TimingStats> baseline_timing() const override { return std::nullopt; }

 private:
  ksearch::Problem problem_;
  ksearch::DeviceInfo device_;
};

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

int WorkerMain(const std::string& url, const std::string& name) {
  ksearch::QueueWorkerOptions options;
  options.queue.url = url;
  options.arch = "sm_90";
  options.name = name;
  options.poll_seconds = 0.2;
  options.evaluator_factory = [](const ksearch::Problem& problem)
      -> ksearch::StatusOr<std::unique_ptr<ksearch::Evaluator>> {
    return std::unique_ptr<ksearch::Evaluator>(new InstantEvaluator(problem));
  };
  std::signal(SIGTERM, OnSignal);
  auto stats = ksearch::RunQueueWorker(options, &g_stop);
  if (!stats.ok()) {
    std::cerr << name << ": " << stats.status().ToString() << "\n";
    return 1;
  }
  return 0;
}

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t at = std::min(v.size() - 1, size_t(p * double(v.size() - 1) + 0.5));
  return v[at];
}

// The first `n` points of the problem's template spaces that satisfy their
// constraints, in declaration order: a fixed set both paths judge.
std::vector<ksearch::Candidate> TemplatePoints(const ksearch::Problem& problem, size_t n) {
  std::vector<ksearch::Candidate> out;
  for (const ksearch::TemplateSpec& t : problem.templates) {
    std::vector<size_t> index(t.space.size(), 0);
    for (bool more = !t.space.empty(); more && out.size() < n;) {
      ksearch::Candidate c = t.kernel.ToCandidate("", "template");
      std::vector<std::pair<std::string, int64_t>> values = problem.dims;
      std::string id = t.name;
      for (size_t k = 0; k < t.space.size(); ++k) {
        int64_t v = t.space[k].second[index[k]];
        c.plan.SetParam(t.space[k].first, v);
        values.emplace_back(t.space[k].first, v);
        id += "-" + t.space[k].first + std::to_string(v);
      }
      bool fits = true;
      for (const std::string& condition : t.constraints) {
        auto holds = ksearch::EvaluateCondition(condition, values);
        fits = fits && holds.ok() && *holds;
      }
      if (fits) {
        c.id = id;
        out.push_back(std::move(c));
      }
      more = false;
      for (size_t k = t.space.size(); k-- > 0;) {
        if (++index[k] < t.space[k].second.size()) {
          more = true;
          break;
        }
        index[k] = 0;
      }
    }
  }
  // Fewer points than asked for (softmax has 48 at its default dims): copies
  // that differ by a define, so that each is compiled and judged like a new
  // kernel.
  for (size_t k = 0, distinct = out.size(); distinct > 0 && out.size() < n; ++k) {
    ksearch::Candidate copy = out[k % distinct];
    copy.id += "-copy" + std::to_string(k);
    copy.compile_options.push_back("-DKSEARCH_BENCH_COPY=" + std::to_string(k));
    out.push_back(std::move(copy));
  }
  return out;
}

int Compare(const std::string& url, const std::string& arch, const std::vector<int>& gpus,
            size_t count, bool fake) {
  auto problem = ksearch::LoadProblem("softmax");
  if (!problem.ok()) {
    std::cerr << problem.status().ToString() << "\n";
    return 1;
  }
  std::vector<ksearch::Candidate> candidates = TemplatePoints(*problem, count);
  ksearch::Candidate warm = problem->start.ToCandidate("warm-up", "start");
  std::printf("compare: %zu softmax template points, GPUs %s%s\n", candidates.size(),
              gpus.empty() ? "all" : std::to_string(gpus.size()).c_str(), fake ? " (fake)" : "");
  auto report = [&](const char* how, const std::vector<ksearch::Evaluation>& results,
                    double seconds) {
    int ok = 0;
    std::string device;
    for (const auto& e : results) {
      ok += e.ok();
      if (e.ok()) device = e.device.name;
    }
    std::printf("%-28s %6.1f s  %7.1f candidates/min  (%d ok, device %s)\n", how, seconds,
                60.0 * double(results.size()) / seconds, ok, device.c_str());
  };
  {
    ksearch::WorkerPoolOptions pool;
    pool.gpus = gpus;
    std::vector<std::string> worker_arguments;  // fake workers: worker/pool_testing.h
    if (fake) worker_arguments = {"--fake"};
    auto local = ksearch::internal::CreateWorkerPoolEvaluator(*problem, pool, worker_arguments);
    if (!local.ok()) {
      std::cerr << "local pool: " << local.status().ToString() << "\n";
      return 1;
    }
    (*local)->Evaluate(std::span<const ksearch::Candidate>(&warm, 1));
    auto begin = Clock::now();
    auto results = (*local)->Evaluate(candidates);
    report("local worker pool", results,
           std::chrono::duration<double>(Clock::now() - begin).count());
  }
  {
    ksearch::QueueEvaluatorOptions options;
    options.queue.url = url;
    options.arch = arch;
    options.run_id = "compare-" + std::to_string(::getpid());
    // Sources travel and the workers' pools compile them, as the local pool
    // does: the difference is the queue alone.
    options.compile_locally = false;
    auto queue = ksearch::CreateQueueEvaluator(*problem, options);
    if (!queue.ok()) {
      std::cerr << "queue: " << queue.status().ToString() << "\n";
      return 1;
    }
    (*queue)->Evaluate(std::span<const ksearch::Candidate>(&warm, 1));
    auto begin = Clock::now();
    auto results = (*queue)->Evaluate(candidates);
    report("through Redis (ksearch worker)", results,
           std::chrono::duration<double>(Clock::now() - begin).count());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string url;
  std::string fsync = "everysec";
  int jobs = 2000;
  int latency_jobs = 300;
  std::vector<int> worker_counts = {1, 2, 4};
  std::string self = argv[0];
  bool compare = false;
  bool fake = false;
  std::string arch = "sm_90";
  std::vector<int> gpus;
  size_t compare_count = 64;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&] { return i + 1 < argc ? std::string(argv[++i]) : std::string(); };
    if (arg == "--worker") {
      std::string worker_url = next();
      return WorkerMain(worker_url, next());
    } else if (arg == "--compare") {
      compare = true;
    } else if (arg == "--fake") {
      fake = true;
    } else if (arg == "--arch") {
      arch = next();
    } else if (arg == "--candidates") {
      compare_count = size_t(std::atoi(next().c_str()));
    } else if (arg == "--gpus") {
      std::stringstream list(next());
      std::string item;
      while (std::getline(list, item, ',')) gpus.push_back(std::atoi(item.c_str()));
    } else if (arg == "--url") {
      url = next();
    } else if (arg == "--fsync") {
      fsync = next();
    } else if (arg == "--jobs") {
      jobs = std::atoi(next().c_str());
    } else if (arg == "--latency-jobs") {
      latency_jobs = std::atoi(next().c_str());
    } else if (arg == "--workers") {
      worker_counts.clear();
      std::stringstream list(next());
      std::string item;
      while (std::getline(list, item, ',')) worker_counts.push_back(std::atoi(item.c_str()));
    } else {
      std::cerr << "usage: ksearch_bench_queue [--jobs N] [--latency-jobs N] [--workers 1,2,4] "
                   "[--fsync everysec|always|no] [--url redis://…]\n"
                   "       ksearch_bench_queue --compare --url URL [--gpus 0,1] [--arch sm_90] "
                   "[--candidates 64] [--fake]\n";
      return 2;
    }
  }
  if (compare) {
    if (url.empty()) {
      std::cerr << "--compare needs --url (the Redis the workers serve)\n";
      return 2;
    }
    return Compare(url, arch, gpus, compare_count, fake);
  }
  ksearch::testing::RedisServer server;
  if (url.empty()) {
    std::string why = server.Start();
    if (!why.empty()) {
      std::cout << "skipped: " << why << "\n";
      return 0;
    }
    url = server.url();
    auto client = server.Client();
    client->Command({"CONFIG", "SET", "appendfsync", fsync}).status().IgnoreError();
  }
  auto problem = ksearch::LoadProblem("softmax");
  if (!problem.ok()) {
    std::cerr << problem.status().ToString() << "\n";
    return 1;
  }
  std::cout << "queue benchmark: " << url << ", appendonly yes, appendfsync " << fsync
            << ", fake evaluator answering at once, softmax-sized jobs ("
            << problem->start.source.size() << " B of source)\n";
  int run_number = 0;
  auto make_candidates = [&](int n) {
    std::vector<ksearch::Candidate> out;
    ++run_number;
    for (int i = 0; i < n; ++i)
      out.push_back(problem->start.ToCandidate(
          "b" + std::to_string(run_number) + "-" + std::to_string(i), "bench"));
    return out;
  };
  auto orchestrator_options = [&](const std::string& run) {
    ksearch::QueueEvaluatorOptions options;
    options.queue.url = url;
    options.arch = "sm_90";
    options.run_id = run + "-" + std::to_string(::getpid());
    options.compile_locally = false;
    return options;
  };
  auto start_workers = [&](int n) {
    std::vector<ksearch::testing::FakeWorker> workers;
    for (int w = 0; w < n; ++w) {
      workers.emplace_back(
          self, std::vector<std::string>{"--worker", url, "bench-w" + std::to_string(w)});
      workers.back().Start();
    }
    return workers;
  };

  {
    auto workers = start_workers(1);
    auto evaluator = ksearch::CreateQueueEvaluator(*problem, orchestrator_options("latency"));
    if (!evaluator.ok()) {
      std::cerr << evaluator.status().ToString() << "\n";
      return 1;
    }
    auto candidates = make_candidates(latency_jobs + 20);
    std::vector<double> ms;
    for (size_t i = 0; i < candidates.size(); ++i) {
      auto begin = Clock::now();
      auto result = (*evaluator)->Evaluate(std::span<const ksearch::Candidate>(&candidates[i], 1));
      double took = std::chrono::duration<double, std::milli>(Clock::now() - begin).count();
      if (result[0].status != ksearch::EvalStatus::kOk) {
        std::cerr << "job failed: " << result[0].message << "\n";
        return 1;
      }
      if (i >= 20) ms.push_back(took);  // the first ones warm connections up
    }
    std::printf(
        "overhead per job, one at a time, 1 worker (%zu jobs): min %.3f ms, median %.3f ms, "
        "p99 %.3f ms\n",
        ms.size(), Percentile(ms, 0), Percentile(ms, 0.5), Percentile(ms, 0.99));
  }
  for (int n : worker_counts) {
    auto workers = start_workers(n);
    auto evaluator =
        ksearch::CreateQueueEvaluator(*problem, orchestrator_options("rate" + std::to_string(n)));
    if (!evaluator.ok()) {
      std::cerr << evaluator.status().ToString() << "\n";
      return 1;
    }
    // Warm: every worker has started and served a job.
    (*evaluator)->Evaluate(make_candidates(4 * n));
    auto candidates = make_candidates(jobs);
    auto begin = Clock::now();
    auto results = (*evaluator)->Evaluate(candidates);
    double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
    int ok = 0;
    for (const auto& e : results) ok += e.ok();
    std::printf(
        "throughput, %d worker process(es), %d jobs in one Evaluate(): %.0f jobs/s "
        "(%.3f ms per job), %d ok\n",
        n, jobs, jobs / seconds, seconds * 1e3 / jobs, ok);
  }
  return 0;
}
