// The orchestrator side of the Redis queue (include/ksearch/queue.h).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "cuda/compiler.h"
#include "ksearch/queue.h"
#include "queue/job.h"
#include "queue/redis.h"
#include "cuda/candidate_compile.h"
#include "core/evaluation_json.h"

namespace ksearch {
namespace {

using internal::Compiler;
using internal::CompileResult;
using internal::queue::Keys;
using internal::queue::Redis;
using internal::queue::Reply;
using Clock = std::chrono::steady_clock;

std::string RandomRunId() {
  std::random_device device;
  std::mt19937_64 rng((uint64_t(device()) << 32) ^ device() ^
                      uint64_t(Clock::now().time_since_epoch().count()));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "r";
  for (int i = 0; i < 12; ++i) id += kHex[rng() % 16];
  return id;
}

class QueueEvaluatorImpl final : public QueueEvaluator {
 public:
  QueueEvaluatorImpl(Problem problem, QueueEvaluatorOptions options, std::unique_ptr<Redis> redis)
      : problem_(std::move(problem)), options_(std::move(options)), redis_(std::move(redis)) {
    keys_.prefix = options_.queue.prefix;
    if (options_.run_id.empty()) options_.run_id = RandomRunId();
    fingerprint_ = problem_.Fingerprint();
    stream_ = keys_.Jobs(options_.arch, options_.device_model);
    device_.name = options_.device_model.empty()
                       ? "any " + options_.arch + " worker of " + redis_->url().ToString()
                       : options_.device_model;
    internal::ParseArch(options_.arch, &device_.cc_major, &device_.cc_minor);
    // Compiled here as the workers' own judges compile: for the
    // capability's arch-specific feature set (sm_90a on Hopper).
    compile_arch_ = options_.arch.ends_with("a") || device_.cc_major == 0 ? options_.arch : device_.CompileArch();
    if (options_.compile_locally) {
      compiler_ = std::make_unique<Compiler>(internal::CompilerOptionsFor(options_.evaluator));
      compile_pool_ =
          std::make_unique<internal::ThreadPool>(internal::DefaultThreads(options_.compile_threads));
    }
  }

  Status Start() {
    if (compiler_) {
      KSEARCH_RETURN_IF_ERROR(internal::CheckUntrustedCompiles(
          internal::CompilerOptionsFor(options_.evaluator)));
    }
    // Workers find the problem by fingerprint; the first orchestrator of a
    // problem stores it, later ones find it there.
    KSEARCH_ASSIGN_OR_RETURN(
        Reply set, redis_->Command({"SET", keys_.Problem(fingerprint_), problem_.ToJson(), "NX"}));
    (void)set;
    return internal::queue::EnsureGroup(*redis_, stream_);
  }

  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel) override {
    std::vector<Evaluation> out(candidates.size());
    std::vector<bool> filled(candidates.size(), false);
    std::vector<std::string> jobs(candidates.size());
    std::map<std::string, std::vector<size_t>> by_job;
    for (size_t i = 0; i < candidates.size(); ++i) {
      out[i].candidate_id = candidates[i].id;
      out[i].content_hash = candidates[i].ContentHash();
      out[i].device = device_;
      jobs[i] = internal::queue::JobId(candidates[i], out[i].content_hash);
      by_job[jobs[i]].push_back(i);
    }
    size_t remaining = candidates.size();
    QueueEvaluatorStats delta;
    auto started = Clock::now();
    Status broken;

    auto fill = [&](const std::string& job, const std::string& json, const std::string& worker) {
      auto found = by_job.find(job);
      if (found == by_job.end()) return;
      auto evaluation = internal::EvaluationFromJson(json, "queue result " + job);
      for (size_t i : found->second) {
        if (filled[i]) continue;
        if (evaluation.ok()) {
          std::string id = out[i].candidate_id;
          out[i] = *evaluation;
          out[i].candidate_id = id;
          if (out[i].ok()) device_ = out[i].device;
          if (out[i].message.starts_with(internal::queue::kGaveUpPrefix)) ++delta.failed;
        } else {
          out[i].status = EvalStatus::kCrashed;
          out[i].message =
              "the queue returned an unreadable result: " + evaluation.status().message();
        }
        std::lock_guard lock(mutex_);
        worker_of_[out[i].candidate_id] = worker;
        filled[i] = true;
        --remaining;
      }
    };
    // Looks up stored results of `wanted` jobs (HMGET in slices).
    auto fetch = [&](const std::vector<std::string>& wanted) -> Status {
      for (size_t at = 0; at < wanted.size(); at += 256) {
        std::vector<std::string> results = {"HMGET", keys_.Results(options_.run_id)};
        std::vector<std::string> workers = {"HMGET", keys_.Workers(options_.run_id)};
        size_t end = std::min(wanted.size(), at + 256);
        for (size_t k = at; k < end; ++k) {
          results.push_back(wanted[k]);
          workers.push_back(wanted[k]);
        }
        KSEARCH_ASSIGN_OR_RETURN(Reply r, redis_->Command(results));
        KSEARCH_ASSIGN_OR_RETURN(Reply w, redis_->Command(workers));
        for (size_t k = at; k < end; ++k) {
          const Reply& value = r.elements.at(k - at);
          if (value.nil()) continue;
          const Reply& name = w.elements.at(k - at);
          fill(wanted[k], value.str, name.nil() ? "" : name.str);
        }
      }
      return Status();
    };

    // Results that arrive from now on are announced on the done stream after
    // this id; those stored before it are found by the lookup that follows.
    std::string last_done = "0-0";
    if (auto tail =
            redis_->Command({"XREVRANGE", keys_.Done(options_.run_id), "+", "-", "COUNT", "1"});
        tail.ok() && !tail->elements.empty()) {
      last_done = tail->elements[0].elements.at(0).str;
    } else if (!tail.ok()) {
      broken = tail.status();
    }
    if (broken.ok()) {
      std::vector<std::string> all;
      for (auto& [job, indices] : by_job) all.push_back(job);
      size_t before = remaining;
      broken = fetch(all);
      delta.resumed += int64_t(before - remaining);
    }

    // Compiles on CPU threads; the loop below enqueues what they finish.
    std::mutex ready_mutex;
    std::deque<std::pair<size_t, std::optional<StatusOr<CompileResult>>>> ready;
    std::atomic<bool> stop_compiles{false};
    std::vector<size_t> to_send;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!filled[i] && by_job[jobs[i]].front() == i) to_send.push_back(i);
    }
    std::optional<internal::TaskGroup> compiles;
    size_t compiled_count = 0;
    if (compiler_ && broken.ok()) {
      compiles.emplace(*compile_pool_);
      internal::CompileEach(*compiler_, *compiles, candidates, to_send, compile_arch_,
                            &stop_compiles,
                            [&](size_t i, StatusOr<CompileResult> compiled, double ms) {
                              std::lock_guard lock(ready_mutex);
                              delta.compile_ms += ms;
                              ready.emplace_back(i, std::move(compiled));
                            });
    } else {
      for (size_t i : to_send) ready.emplace_back(i, std::nullopt);
    }

    auto enqueue = [&](size_t i) -> Status {
      const Candidate& c = candidates[i];
      std::vector<std::string> argv = {"EVAL",
                                       internal::queue::kEnqueueScript,
                                       "3",
                                       keys_.Results(options_.run_id),
                                       keys_.Queued(options_.run_id),
                                       stream_,
                                       jobs[i],
                                       "job",
                                       jobs[i],
                                       "run",
                                       options_.run_id,
                                       "problem",
                                       fingerprint_,
                                       "arch",
                                       options_.arch,
                                       "model",
                                       options_.device_model,
                                       "enqueued_us",
                                       std::to_string(internal::queue::UnixMicros()),
                                       "candidate",
                                       internal::queue::CandidateToJson(c)};
      KSEARCH_ASSIGN_OR_RETURN(Reply r, redis_->Command(argv));
      if (r.integer == 1) ++delta.enqueued;
      if (r.integer == 0) ++delta.already_queued;
      if (r.integer == 2) {
        // Stored since this call began (an earlier process's job finished
        // meanwhile): found, not judged again, so it counts as resumed.
        size_t before_fetch = remaining;
        Status fetched = fetch({jobs[i]});
        delta.resumed += int64_t(before_fetch - remaining);
        return fetched;
      }
      return Status();
    };

    auto last_sweep = Clock::now();
    while (remaining > 0 && broken.ok()) {
      if (cancel && cancel->load()) break;
      if (options_.result_timeout_seconds > 0 &&
          Clock::now() - started > std::chrono::duration<double>(options_.result_timeout_seconds))
        break;
      std::deque<std::pair<size_t, std::optional<StatusOr<CompileResult>>>> batch;
      {
        std::lock_guard lock(ready_mutex);
        batch.swap(ready);
      }
      for (auto& [i, compiled] : batch) {
        if (compiled) ++compiled_count;
        Evaluation failure;
        if (compiled && internal::FillCompileFailure(*compiled, &failure)) {
          // Judged here: a source that does not compile never costs a GPU.
          ++delta.compile_failures;
          for (size_t k : by_job[jobs[i]]) {
            Evaluation& e = out[k];
            e.status = failure.status;
            e.message = failure.message;
            e.details = failure.details;
            e.resources = failure.resources;
            if (compiled->ok()) e.compile_ms = (*compiled)->compile_ms;
            e.total_ms = e.compile_ms;
            if (!filled[k]) {
              filled[k] = true;
              --remaining;
            }
          }
          continue;
        }
        if (Status s = enqueue(i); !s.ok()) {
          broken = s;
          break;
        }
      }
      if (!broken.ok() || remaining == 0) break;
      bool compiling = compiler_ && compiled_count < to_send.size();
      auto read = redis_->Command({"XREAD", "COUNT", "1024", "BLOCK", compiling ? "20" : "200",
                                   "STREAMS", keys_.Done(options_.run_id), last_done},
                                  compiling ? 20 : 200);
      if (!read.ok()) {
        broken = read.status();
        break;
      }
      std::vector<std::string> announced;
      if (!read->nil()) {
        for (const Reply& stream : read->elements) {
          for (const Reply& entry : stream.elements.at(1).elements) {
            last_done = entry.elements.at(0).str;
            std::string job = internal::queue::Field(entry.elements.at(1), "job");
            if (by_job.count(job)) announced.push_back(job);
          }
        }
      }
      // Now and then every outstanding job is looked up, in case an
      // announcement was trimmed away; announcements are the fast path.
      if (Clock::now() - last_sweep > std::chrono::seconds(2)) {
        last_sweep = Clock::now();
        for (size_t i = 0; i < candidates.size(); ++i) {
          if (!filled[i]) announced.push_back(jobs[i]);
        }
      }
      if (!announced.empty()) {
        if (Status s = fetch(announced); !s.ok()) broken = s;
      }
    }
    stop_compiles = true;
    if (compiles) compiles->Wait();

    bool timed_out =
        options_.result_timeout_seconds > 0 &&
        Clock::now() - started > std::chrono::duration<double>(options_.result_timeout_seconds);
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (filled[i]) continue;
      Evaluation& e = out[i];
      if (!broken.ok()) {
        e.status = EvalStatus::kCancelled;
        e.message = "the queue failed: " + broken.message();
      } else if (cancel && cancel->load()) {
        e.status = EvalStatus::kCancelled;
        e.message = "cancelled before a worker returned it (its job stays queued in run " +
                    options_.run_id + ")";
      } else if (timed_out) {
        e.status = EvalStatus::kTimeout;
        e.message = "no worker returned it within " +
                    std::to_string(int(options_.result_timeout_seconds)) + " s (queue " + stream_ +
                    ")";
      }
    }
    delta.candidates = int64_t(candidates.size());
    std::lock_guard lock(mutex_);
    stats_.candidates += delta.candidates;
    stats_.enqueued += delta.enqueued;
    stats_.already_queued += delta.already_queued;
    stats_.resumed += delta.resumed;
    stats_.compile_failures += delta.compile_failures;
    stats_.failed += delta.failed;
    stats_.compile_ms += delta.compile_ms;
    return out;
  }

  const Problem& problem() const override { return problem_; }
  const DeviceInfo& device() const override { return device_; }
  std::optional<TimingStats> reference_timing() const override { return std::nullopt; }
  std::optional<TimingStats> baseline_timing() const override { return std::nullopt; }
  QueueEvaluatorStats stats() const override {
    std::lock_guard lock(mutex_);
    return stats_;
  }
  const std::string& run_id() const override { return options_.run_id; }
  std::string WorkerOf(const std::string& candidate_id) const override {
    std::lock_guard lock(mutex_);
    auto found = worker_of_.find(candidate_id);
    return found == worker_of_.end() ? "" : found->second;
  }

 private:
  Problem problem_;
  QueueEvaluatorOptions options_;
  std::unique_ptr<Redis> redis_;
  std::unique_ptr<Compiler> compiler_;
  std::unique_ptr<internal::ThreadPool> compile_pool_;  // with compile_locally
  Keys keys_;
  std::string fingerprint_;
  std::string stream_;
  DeviceInfo device_;
  std::string compile_arch_;  // what candidates compile for here
  mutable std::mutex mutex_;
  QueueEvaluatorStats stats_;
  std::map<std::string, std::string> worker_of_;
};

}  // namespace

StatusOr<std::unique_ptr<QueueEvaluator>> CreateQueueEvaluator(
    const Problem& problem, const QueueEvaluatorOptions& options) {
  if (options.arch.empty() || !options.arch.starts_with("sm_"))
    return InvalidArgumentError(
        "queue evaluator: arch must name the workers' GPUs, e.g. sm_90 (got '" + options.arch +
        "')");
  KSEARCH_RETURN_IF_ERROR(problem.Validate());
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<Redis> redis, Redis::Connect(options.queue));
  auto evaluator = std::make_unique<QueueEvaluatorImpl>(problem, options, std::move(redis));
  KSEARCH_RETURN_IF_ERROR(evaluator->Start());
  return std::unique_ptr<QueueEvaluator>(std::move(evaluator));
}

}  // namespace ksearch
