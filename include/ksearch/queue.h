// The Redis work queue: GPU workers on many hosts, one orchestrator without a
// GPU (docs/queue.md).
//
// Redis streams with consumer groups carry the work; nothing here speaks a
// network protocol of its own. The orchestrator (CreateQueueEvaluator) is an
// Evaluator: it compiles candidates on its CPUs (a source that does not
// compile is judged there and never enqueued), puts one job per candidate on
// the stream of the arch it compiled for, and collects the results. Workers
// (RunQueueWorker, `ksearch worker --queue URL`) take jobs from the streams of
// the arch they run, judge them with a local Evaluator (the isolated worker
// pool in the CLI, a fake one in tests) and publish the results.
//
// Failure semantics:
//   - a worker that dies or goes silent (no heartbeat) holding a job: after
//     visibility_timeout_seconds another worker claims it (XAUTOCLAIM) and
//     judges it again; after max_attempts deliveries it is marked kCrashed
//     with the reason, never retried forever.
//   - a slow-but-alive worker whose job was claimed by another: the first
//     result stored wins; the late one is dropped (and counted).
//   - the orchestrator restarted with the same run_id: results already
//     stored are returned without judging again, jobs still queued are not
//     enqueued twice, their results are collected when they arrive.
//   - Redis restarted (run it with appendonly yes): both sides reconnect for
//     up to reconnect_timeout_seconds and carry on.
//
//   ksearch::QueueEvaluatorOptions options;
//   options.queue.url = "redis://10.0.0.5:6379/0";
//   options.arch = "sm_90";
//   auto evaluator = ksearch::CreateQueueEvaluator(problem, options);
//   if (!evaluator.ok()) return evaluator.status();   // e.g. Redis unreachable
//   std::vector<ksearch::Evaluation> results = (*evaluator)->Evaluate(candidates);
//
// Credentials come from the environment, never from the URL (a URL shows in
// process listings): KSEARCH_REDIS_PASSWORD (else REDISCLI_AUTH, redis-cli's
// convention) and optionally KSEARCH_REDIS_USER for an ACL user.
//
// Thread safety: a QueueEvaluator as any Evaluator (one call at a time);
// stats() from any thread. RunQueueWorker may run on several threads at once
// with distinct names.
#ifndef KSEARCH_QUEUE_H_
#define KSEARCH_QUEUE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "ksearch/evaluator.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"

namespace ksearch {

// redis://HOST[:PORT][/DB] or rediss://… (TLS).
struct RedisUrl {
  std::string host;
  int port = 6379;
  int db = 0;
  bool tls = false;
  // "redis://HOST:PORT/DB": the URL as it is shown in messages.
  std::string ToString() const;
};

// Errors: kInvalidArgument naming the URL and its bad part ("redis://h:x:
// port 'x' is not a number in 1..65535"); credentials in the URL are refused
// with a pointer to the environment variables.
StatusOr<RedisUrl> ParseRedisUrl(std::string_view url);

// What both sides must agree on.
struct QueueOptions {
  std::string url = "redis://127.0.0.1:6379";
  // Every key starts with this (several fleets can share one Redis).
  std::string prefix = "ksearch";
  // A job held this long by a worker that stopped refreshing its claim is
  // taken over by another worker. Live workers refresh every third of it.
  double visibility_timeout_seconds = 60.0;
  // Deliveries after which a job is marked kCrashed instead of retried.
  int max_attempts = 3;
  // How long to keep reconnecting when Redis goes away before giving up.
  double reconnect_timeout_seconds = 60.0;
  // Time limit of one connection attempt.
  double connect_timeout_seconds = 5.0;
};

struct QueueEvaluatorOptions {
  QueueOptions queue;
  // Names this search's results in Redis. Running again with the same id
  // resumes: results already stored are returned as they are. Empty: a fresh
  // random id (see QueueEvaluator::run_id()).
  std::string run_id;
  // The arch candidates are compiled for and the workers that may take them
  // ("sm_90"). Required.
  std::string arch;
  // When set ("NVIDIA H200"), only workers started with this device model
  // take the jobs, so that candidates compared with one another are timed on
  // the same model. Empty: any worker of `arch`.
  std::string device_model;
  // Compile on this machine's CPUs (compile errors never reach the queue).
  // False: ship sources only; each worker compiles for its own GPU.
  bool compile_locally = true;
  // Compile settings (cache folder, time limit, log size) for the local
  // compiles; the rest of it does not travel (workers judge with their own).
  EvaluatorOptions evaluator;
  // NVRTC threads. 0: one per hardware thread (at most 32).
  int compile_threads = 0;
  // A candidate without a result this long after Evaluate() started is
  // kTimeout ("no worker returned it"); its job stays queued. 0: wait forever.
  double result_timeout_seconds = 0.0;
};

struct QueueEvaluatorStats {
  int64_t candidates = 0;        // evaluations returned
  int64_t enqueued = 0;          // jobs put on a stream by this process
  int64_t already_queued = 0;    // jobs found queued by an earlier process of the run
  int64_t resumed = 0;           // results found stored (before this call, or by another
                                 // process before it was enqueued)
  int64_t compile_failures = 0;  // judged here, never enqueued
  int64_t failed = 0;            // marked failed by the queue (too many deliveries)
  double compile_ms = 0.0;       // local NVRTC wall time, summed
};

class QueueEvaluator : public Evaluator {
 public:
  // See Evaluator::Evaluate. If `cancel` becomes true, candidates without a
  // result yet get kCancelled; their jobs stay queued (a later call with the
  // same run_id collects them).
  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel = nullptr) override = 0;
  virtual QueueEvaluatorStats stats() const = 0;
  virtual const std::string& run_id() const = 0;
  // The worker name that produced the last result of `candidate_id` (empty if
  // none, or judged locally).
  virtual std::string WorkerOf(const std::string& candidate_id) const = 0;
};

// Connects, stores the problem's definition under its fingerprint and makes
// sure the streams and consumer groups exist. Errors: kInvalidArgument (URL,
// missing arch; an unreadable $KSEARCH_REDIS_CA_FILE); kUnavailable when
// Redis cannot be reached or its TLS certificate does not verify;
// kUnauthenticated /
// kPermissionDenied when it refuses the credentials.
StatusOr<std::unique_ptr<QueueEvaluator>> CreateQueueEvaluator(
    const Problem& problem, const QueueEvaluatorOptions& options);

// Makes the local evaluator a worker judges with, once per problem.
using EvaluatorFactory =
    std::function<StatusOr<std::unique_ptr<Evaluator>>(const Problem& problem)>;

struct QueueWorkerOptions {
  QueueOptions queue;
  // The consumer name, unique in the fleet. Empty: HOST-PID.
  std::string name;
  // The arch of this worker's GPUs: it takes jobs compiled for it only.
  std::string arch;
  // This worker's device model ("NVIDIA H200"): it also takes jobs that ask
  // for that model. Empty: only jobs that ask for no model.
  std::string device_model;
  // Jobs taken at once and judged in one Evaluate() call (the number of GPUs
  // of the local pool, or a little more so that they never wait).
  int batch = 1;
  // How long one blocking read waits before the worker looks for stale jobs
  // and at `stop` again.
  double poll_seconds = 0.5;
  // Exit after this many jobs (0: run until `stop`; `ksearch worker
  // --max-jobs`).
  int64_t max_jobs = 0;
  EvaluatorFactory evaluator_factory;
};

struct QueueWorkerStats {
  int64_t jobs = 0;        // jobs taken (claimed ones included)
  int64_t claimed = 0;     // jobs taken over from a stale worker
  int64_t published = 0;   // results stored
  int64_t duplicates = 0;  // results dropped: another worker stored one first
  int64_t given_up = 0;    // jobs marked kCrashed after max_attempts
};

// Serves jobs until `stop` becomes true (checked at least every
// poll_seconds) or max_jobs are done. Errors: as CreateQueueEvaluator, and
// kUnavailable when Redis stays away past reconnect_timeout_seconds; an
// evaluator that cannot be created for a problem ends the worker with its
// error (the jobs it held go to other workers).
StatusOr<QueueWorkerStats> RunQueueWorker(const QueueWorkerOptions& options,
                                          const std::atomic<bool>* stop);

}  // namespace ksearch

#endif  // KSEARCH_QUEUE_H_
