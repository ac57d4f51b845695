// The worker side of the Redis queue (include/ksearch/queue.h): take jobs,
// judge them with a local Evaluator, publish, acknowledge.
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "ksearch/queue.h"
#include "queue/job.h"
#include "queue/queue_testing.h"
#include "queue/redis.h"
#include "core/evaluation_json.h"

namespace ksearch {
namespace {

using internal::queue::Keys;
using internal::queue::Redis;
using internal::queue::Reply;
using Clock = std::chrono::steady_clock;

struct Job {
  std::string stream;
  std::string entry;  // the stream entry id
  Reply fields;       // field/value pairs; empty when the entry was deleted
  int64_t deliveries = 1;
  bool claimed = false;
};

// Keeps the claim on held jobs fresh from a thread of its own (with its own
// connection), so that a long evaluation is not mistaken for a dead worker.
class Heartbeat {
 public:
  Heartbeat(const QueueWorkerOptions& options, bool enabled, std::string name)
      : options_(options), enabled_(enabled), name_(std::move(name)) {}
  ~Heartbeat() { Stop(); }

  void Start(const std::vector<Job>& jobs) {
    if (!enabled_ || jobs.empty()) return;
    std::lock_guard lock(mutex_);
    jobs_.clear();
    for (const Job& job : jobs) jobs_.emplace_back(job.stream, job.entry);
    stopping_ = false;
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void Loop() {
    auto period = std::chrono::duration<double>(options_.queue.visibility_timeout_seconds / 3);
    std::unique_ptr<Redis> redis;
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
      auto jobs = jobs_;
      lock.unlock();
      if (!redis) {
        auto connected = Redis::Connect(options_.queue);
        if (connected.ok()) redis = std::move(*connected);
      }
      if (redis) {
        for (const auto& [stream, entry] : jobs) {
          // A lost heartbeat is not fatal: at worst the job is judged twice
          // and the second result is dropped.
          redis
              ->Command({"EVAL", internal::queue::kHeartbeatScript, "1", stream,
                         internal::queue::kGroup, name_, entry})
              .status()
              .IgnoreError();
        }
      }
      lock.lock();
    }
  }

  const QueueWorkerOptions& options_;
  const bool enabled_;
  std::string name_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<std::pair<std::string, std::string>> jobs_;
  std::thread thread_;
};

class Worker {
 public:
  Worker(QueueWorkerOptions options, internal::QueueWorkerTestHooks hooks,
         std::unique_ptr<Redis> redis)
      : options_(std::move(options)), hooks_(hooks), redis_(std::move(redis)) {
    keys_.prefix = options_.queue.prefix;
    if (options_.name.empty()) {
      char host[256] = {};
      ::gethostname(host, sizeof(host) - 1);
      options_.name = std::string(host) + "-" + std::to_string(::getpid());
    }
    streams_.push_back(keys_.Jobs(options_.arch, ""));
    if (!options_.device_model.empty())
      streams_.push_back(keys_.Jobs(options_.arch, options_.device_model));
  }

  StatusOr<QueueWorkerStats> Run(const std::atomic<bool>* stop) {
    for (const std::string& stream : streams_)
      KSEARCH_RETURN_IF_ERROR(internal::queue::EnsureGroup(*redis_, stream));
    Heartbeat heartbeat(options_, hooks_.heartbeat, options_.name);
    bool own_pending = true;  // after a restart under the same name: its jobs first
    auto last_claim = Clock::now() - std::chrono::hours(1);
    auto claim_period =
        std::chrono::duration<double>(std::min(1.0, options_.queue.visibility_timeout_seconds / 4));
    while (!(stop && stop->load())) {
      if (options_.max_jobs > 0 && stats_.jobs >= options_.max_jobs) break;
      std::vector<Job> jobs;
      if (own_pending) {
        KSEARCH_RETURN_IF_ERROR(Read(true, &jobs));
        own_pending = false;
      } else if (Clock::now() - last_claim > claim_period) {
        last_claim = Clock::now();
        KSEARCH_RETURN_IF_ERROR(ClaimStale(&jobs));
      }
      if (jobs.empty()) KSEARCH_RETURN_IF_ERROR(Read(false, &jobs));
      if (jobs.empty()) continue;
      heartbeat.Start(jobs);
      Status s = Handle(jobs, stop);
      heartbeat.Stop();
      KSEARCH_RETURN_IF_ERROR(s);
    }
    return stats_;
  }

 private:
  int Batch() const { return std::max(1, options_.batch); }

  Status Read(bool own_pending, std::vector<Job>* jobs) {
    int block_ms = std::max(1, int(options_.poll_seconds * 1000));
    std::vector<std::string> argv = {"XREADGROUP",  "GROUP", internal::queue::kGroup,
                                     options_.name, "COUNT", std::to_string(Batch())};
    if (!own_pending) {
      argv.push_back("BLOCK");
      argv.push_back(std::to_string(block_ms));
    }
    argv.push_back("STREAMS");
    for (const std::string& s : streams_) argv.push_back(s);
    for (size_t i = 0; i < streams_.size(); ++i) argv.push_back(own_pending ? "0" : ">");
    KSEARCH_ASSIGN_OR_RETURN(Reply reply, redis_->Command(argv, own_pending ? 0 : block_ms));
    if (reply.nil()) return Status();
    for (const Reply& stream : reply.elements) {
      for (const Reply& entry : stream.elements.at(1).elements) {
        Job job;
        job.stream = stream.elements.at(0).str;
        job.entry = entry.elements.at(0).str;
        job.fields = entry.elements.size() > 1 ? entry.elements[1] : Reply();
        if (own_pending) KSEARCH_RETURN_IF_ERROR(CountDeliveries(&job));
        jobs->push_back(std::move(job));
      }
    }
    return Status();
  }

  // Takes over jobs whose holder has been silent past the visibility timeout.
  Status ClaimStale(std::vector<Job>* jobs) {
    std::string min_idle =
        std::to_string(int64_t(options_.queue.visibility_timeout_seconds * 1000));
    for (const std::string& stream : streams_) {
      KSEARCH_ASSIGN_OR_RETURN(
          Reply reply,
          redis_->Command({"XAUTOCLAIM", stream, internal::queue::kGroup, options_.name, min_idle,
                           "0-0", "COUNT", std::to_string(Batch())}));
      if (reply.elements.size() < 2) continue;
      for (const Reply& entry : reply.elements[1].elements) {
        if (entry.nil() || entry.elements.size() < 2) continue;  // deleted meanwhile
        Job job;
        job.stream = stream;
        job.entry = entry.elements[0].str;
        job.fields = entry.elements[1];
        job.claimed = true;
        KSEARCH_RETURN_IF_ERROR(CountDeliveries(&job));
        ++stats_.claimed;
        jobs->push_back(std::move(job));
      }
      if (!jobs->empty()) break;
    }
    return Status();
  }

  Status CountDeliveries(Job* job) {
    KSEARCH_ASSIGN_OR_RETURN(
        Reply p, redis_->Command({"XPENDING", job->stream, internal::queue::kGroup, job->entry,
                                  job->entry, "1"}));
    if (!p.elements.empty() && p.elements[0].elements.size() >= 4)
      job->deliveries = p.elements[0].elements[3].integer;
    return Status();
  }

  Status Publish(const Job& job, const std::string& run, const std::string& id,
                 const Evaluation& evaluation) {
    std::string json = evaluation.ToJson();
    KSEARCH_ASSIGN_OR_RETURN(
        Reply r,
        redis_->Command({"EVAL", internal::queue::kPublishScript, "5", keys_.Results(run),
                         keys_.Workers(run), keys_.Done(run), keys_.Duplicates(run), job.stream, id,
                         json, options_.name, internal::queue::kGroup, job.entry}));
    if (r.integer == 1)
      ++stats_.published;
    else
      ++stats_.duplicates;
    return Status();
  }

  Status Acknowledge(const Job& job) {
    KSEARCH_ASSIGN_OR_RETURN(
        Reply r, redis_->Command({"XACK", job.stream, internal::queue::kGroup, job.entry}));
    (void)r;
    return Status();
  }

  StatusOr<Evaluator*> EvaluatorFor(const std::string& fingerprint) {
    if (evaluator_ && fingerprint == fingerprint_) return evaluator_.get();
    KSEARCH_ASSIGN_OR_RETURN(Reply text, redis_->Command({"GET", keys_.Problem(fingerprint)}));
    if (text.nil())
      return NotFoundError("problem " + fingerprint + " is not stored in Redis (key " +
                           keys_.Problem(fingerprint) + ")");
    KSEARCH_ASSIGN_OR_RETURN(Problem problem,
                             Problem::FromJson(text.str, "", "problem " + fingerprint));
    // One problem at a time: the previous evaluator (and its GPUs) goes first.
    evaluator_.reset();
    if (!options_.evaluator_factory)
      return InvalidArgumentError("queue worker: no evaluator factory was given");
    auto created = options_.evaluator_factory(problem);
    if (!created.ok())
      return created.status().WithContext("queue worker " + options_.name + ": problem " +
                                          problem.name);
    evaluator_ = std::move(*created);
    fingerprint_ = fingerprint;
    return evaluator_.get();
  }

  Status Handle(std::vector<Job>& jobs, const std::atomic<bool>* stop) {
    // Jobs of one problem are judged in one call, in the order they came.
    std::map<std::string, std::vector<std::pair<Job*, Candidate>>> by_problem;
    for (Job& job : jobs) {
      ++stats_.jobs;
      std::string run = internal::queue::Field(job.fields, "run");
      std::string id = internal::queue::Field(job.fields, "job");
      if (job.fields.elements.empty() || run.empty() || id.empty()) {
        // Deleted or foreign entry: nothing to judge, nobody to answer.
        KSEARCH_RETURN_IF_ERROR(Acknowledge(job));
        continue;
      }
      auto candidate = internal::queue::CandidateFromJson(
          internal::queue::Field(job.fields, "candidate"), "job " + id);
      Evaluation failure;
      if (candidate.ok()) {
        failure.candidate_id = candidate->id;
        failure.content_hash = candidate->ContentHash();
      }
      failure.status = EvalStatus::kCrashed;
      if (job.deliveries > options_.queue.max_attempts) {
        ++stats_.given_up;
        failure.message = std::string(internal::queue::kGaveUpPrefix) + " after " +
                          std::to_string(job.deliveries - 1) +
                          " deliveries: the workers that took it died or stopped answering "
                          "within the visibility timeout (last taken over by " +
                          options_.name + ")";
        KSEARCH_RETURN_IF_ERROR(Publish(job, run, id, failure));
        continue;
      }
      if (!candidate.ok()) {
        failure.message = "the job's candidate could not be read: " + candidate.status().message();
        KSEARCH_RETURN_IF_ERROR(Publish(job, run, id, failure));
        continue;
      }
      std::string arch = internal::queue::Field(job.fields, "arch");
      if (!arch.empty() && arch != options_.arch) {
        // Cannot happen through the streams this worker reads; kept as a
        // guard for hand-made entries.
        failure.message = "job for " + arch + " reached a worker of " + options_.arch;
        KSEARCH_RETURN_IF_ERROR(Publish(job, run, id, failure));
        continue;
      }
      by_problem[internal::queue::Field(job.fields, "problem")].emplace_back(&job,
                                                                             std::move(*candidate));
    }
    for (auto& [fingerprint, items] : by_problem) {
      auto evaluator = EvaluatorFor(fingerprint);
      if (!evaluator.ok()) {
        if (evaluator.status().code() == StatusCode::kNotFound) {
          for (auto& [job, candidate] : items) {
            Evaluation failure;
            failure.candidate_id = candidate.id;
            failure.content_hash = candidate.ContentHash();
            failure.status = EvalStatus::kCrashed;
            failure.message = evaluator.status().message();
            KSEARCH_RETURN_IF_ERROR(Publish(*job, internal::queue::Field(job->fields, "run"),
                                            internal::queue::Field(job->fields, "job"), failure));
          }
          continue;
        }
        // The jobs stay pending: another worker takes them after the
        // visibility timeout.
        return evaluator.status();
      }
      std::vector<Candidate> candidates;
      for (auto& item : items) candidates.push_back(item.second);
      std::vector<Evaluation> results = (*evaluator)->Evaluate(candidates, stop);
      for (size_t k = 0; k < items.size() && k < results.size(); ++k) {
        const Job& job = *items[k].first;
        // Stopped before judging it: leave it pending for another worker.
        if (results[k].status == EvalStatus::kCancelled && stop && stop->load()) continue;
        KSEARCH_RETURN_IF_ERROR(Publish(job, internal::queue::Field(job.fields, "run"),
                                        internal::queue::Field(job.fields, "job"), results[k]));
      }
    }
    return Status();
  }

  QueueWorkerOptions options_;
  internal::QueueWorkerTestHooks hooks_;
  std::unique_ptr<Redis> redis_;
  Keys keys_;
  std::vector<std::string> streams_;
  std::unique_ptr<Evaluator> evaluator_;
  std::string fingerprint_;
  QueueWorkerStats stats_;
};

}  // namespace

StatusOr<QueueWorkerStats> internal::RunQueueWorker(const QueueWorkerOptions& options,
                                                    const QueueWorkerTestHooks& hooks,
                                                    const std::atomic<bool>* stop) {
  if (options.arch.empty() || !options.arch.starts_with("sm_"))
    return InvalidArgumentError("queue worker: arch must name this host's GPUs, e.g. sm_90 (got '" +
                                options.arch + "')");
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<Redis> redis, Redis::Connect(options.queue));
  Worker worker(options, hooks, std::move(redis));
  return worker.Run(stop);
}

StatusOr<QueueWorkerStats> RunQueueWorker(const QueueWorkerOptions& options,
                                          const std::atomic<bool>* stop) {
  return internal::RunQueueWorker(options, internal::QueueWorkerTestHooks(), stop);
}

}  // namespace ksearch
