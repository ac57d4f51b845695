// ksearch worker: serve a Redis work queue with this host's GPUs.
#include <csignal>
#include <iostream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "ksearch/queue.h"
#include "ksearch/worker_pool.h"
#include "worker/pool_testing.h"

namespace ksearch::cli {
namespace {

std::atomic<bool> g_stop_worker{false};
void OnWorkerStopSignal(int) { g_stop_worker = true; }

struct WorkerArgs {
  std::string queue;
  std::string arch;
  std::string device_model;
  std::string name;
  std::string prefix = "ksearch";
  std::vector<int> gpus;
  int batch = 0;
  double visibility_timeout = 60.0;
  int max_attempts = 3;
  int64_t max_jobs = 0;
  std::string cache_dir;
  uint64_t replay_input_seed = 0;
  double max_timing_seconds = 2.0;
  bool fake = false;
};

int RunWorker(const WorkerArgs& args) {
  QueueWorkerOptions options;
  options.queue.url = args.queue;
  options.queue.prefix = args.prefix;
  options.queue.visibility_timeout_seconds = args.visibility_timeout;
  options.queue.max_attempts = args.max_attempts;
  options.name = args.name;
  options.arch = args.arch;
  options.device_model = args.device_model;
  options.max_jobs = args.max_jobs;
  // Two jobs per GPU: one judged, one waiting beside it, as the pool's
  // prefetch would have it.
  options.batch = args.batch > 0 ? args.batch : 2 * std::max<int>(1, int(args.gpus.size()));
  if (auto url = ParseRedisUrl(args.queue); !url.ok()) return ReportError(url.status());
  if (!args.fake) {
    std::string why;
    if (!CudaDriverAvailable(&why))
      return ReportError(
          FailedPreconditionError(why + "; a queue worker needs the GPUs it serves"));
  }
  WorkerPoolOptions pool;
  pool.gpus = args.gpus;
  pool.evaluator.compile_cache_dir = args.cache_dir;
  pool.evaluator.replay_input_seed = args.replay_input_seed;
  pool.evaluator.max_timing_seconds = args.max_timing_seconds;
  // Fake workers are the pool's test hook (worker/pool_testing.h).
  std::vector<std::string> worker_arguments;
  if (args.fake) worker_arguments = {"--fake"};
  options.evaluator_factory = [pool, worker_arguments](
                                  const Problem& problem) -> StatusOr<std::unique_ptr<Evaluator>> {
    KSEARCH_ASSIGN_OR_RETURN(auto created,
                             internal::CreateWorkerPoolEvaluator(problem, pool, worker_arguments));
    std::cerr << "ksearch worker: judging " << problem.name << " on " << created->device().name
              << " (" << created->gpus().size() << " GPU(s))\n";
    return std::unique_ptr<Evaluator>(std::move(created));
  };
  std::cerr << "ksearch worker: serving " << args.queue << " for " << args.arch
            << (args.device_model.empty() ? "" : " / " + args.device_model)
            << "; Ctrl-C or SIGTERM stops it\n";
  std::signal(SIGINT, OnWorkerStopSignal);
  std::signal(SIGTERM, OnWorkerStopSignal);
  auto stats = RunQueueWorker(options, &g_stop_worker);
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  if (!stats.ok()) return ReportError(stats.status());
  std::cerr << "ksearch worker: " << stats->jobs << " jobs, " << stats->published
            << " results stored, " << stats->claimed << " taken over from stale workers, "
            << stats->duplicates << " duplicates dropped, " << stats->given_up << " given up\n";
  return kExitOk;
}

}  // namespace

void AddWorkerCommand(CLI::App& app, int* exit_code) {
  static WorkerArgs args;
  auto* cmd = app.add_subcommand(
      "worker", "Serve a Redis work queue with this host's GPUs (many hosts, one search)");
  cmd->add_option("--queue", args.queue, "redis://HOST[:PORT][/DB] (rediss:// for TLS)")
      ->required();
  AddArchOption(*cmd, args.arch,
                "arch of this host's GPUs, e.g. sm_90: only jobs compiled for it are taken")
      ->required();
  cmd->add_option("--device-model", args.device_model,
                  "also take jobs that ask for this model, e.g. \"NVIDIA H200\"");
  AddNumber(*cmd, "--gpus", args.gpus,
            "CUDA ordinals to judge on, one worker process each "
            "(default: every visible GPU)",
            Between(0, kMaxGpuOrdinal))
      ->delimiter(',');
  cmd->add_option("--name", args.name, "consumer name, unique in the fleet (default: HOST-PID)");
  AddNumber(*cmd, "--batch", args.batch, "jobs taken at once (default: 2 per --gpus entry, else 2)",
            Between(0, 4096));
  cmd->add_option("--prefix", args.prefix, "key prefix shared with the orchestrator")
      ->capture_default_str();
  AddNumber(*cmd, "--visibility-timeout", args.visibility_timeout,
            "seconds after which a silent worker's job is taken over", PositiveUpTo(kSecondsInADay))
      ->capture_default_str();
  AddNumber(*cmd, "--max-attempts", args.max_attempts,
            "deliveries after which a job is marked crashed", Between(1, 100))
      ->capture_default_str();
  AddNumber(*cmd, "--max-jobs", args.max_jobs, "exit after this many jobs (0: run until stopped)",
            AtLeast(0));
  AddCacheDirOption(*cmd, args.cache_dir);
  AddNumber(*cmd, "--replay-input-seed", args.replay_input_seed,
            "fixed input seed, for tests and replays only: every input becomes predictable to a kernel that knows it (docs/evaluation.md, Secrets); default 0: the operating system's randomness", AtLeast(0));
  AddNumber(*cmd, "--max-timing-seconds", args.max_timing_seconds, "cap on timing per kernel",
            PositiveUpTo(kSecondsInAnHour))
      ->capture_default_str();
  cmd->add_flag("--fake", args.fake,
                "judge with fake GPU workers (no CUDA; verdicts scripted by '// fake:' lines, "
                "see ksearch-worker --help): for trying a fleet out on any machine");
  cmd->footer(
      "Each GPU host runs one worker; an orchestrator (ksearch run … --queue URL) on any\n"
      "machine compiles candidates and enqueues them; workers take jobs of their arch,\n"
      "judge them in isolated processes (one per GPU) and publish the results. A worker\n"
      "that dies leaves its jobs to the others after --visibility-timeout. Run Redis with\n"
      "'appendonly yes' so that a restart loses nothing (docs/queue.md).\n\n"
      "Credentials come from the environment, never the URL: KSEARCH_REDIS_PASSWORD (or\n"
      "REDISCLI_AUTH) and, for an ACL user, KSEARCH_REDIS_USER. rediss:// verifies the\n"
      "server's certificate against the system's CAs or KSEARCH_REDIS_CA_FILE.\n\n"
      "Examples:\n"
      "  ksearch worker --queue redis://10.0.0.5:6379 --arch sm_90\n"
      "                               serve with every GPU of this host\n"
      "  ksearch worker --queue redis://head:6379/1 --arch sm_90 --gpus 0,1 \\\n"
      "      --device-model \"NVIDIA H200\" --name h200-a\n"
      "                               two GPUs; also take jobs pinned to H200s\n"
      "  KSEARCH_REDIS_PASSWORD=… ksearch worker --queue redis://head:6379 --arch sm_90\n"
      "                               a Redis with requirepass\n"
      "  ksearch worker --queue redis://127.0.0.1:6379 --arch sm_90 --fake\n"
      "                               try the queue out on a machine without a GPU");
  cmd->callback([exit_code] { *exit_code = RunWorker(args); });
}

}  // namespace ksearch::cli
