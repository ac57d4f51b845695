// `ksearch run` and `ksearch resume`: the order of a search's steps. The
// flags are in run_args.h, the model in run_llm.h, the progress line in
// run_progress.h and the summary in run_output.h.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "ksearch/evaluator.h"
#include "ksearch/kernel_cache.h"
#include "ksearch/queue.h"
#include "ksearch/run_session.h"
#include "ksearch/store.h"
#include "ksearch/strategies.h"
#include "ksearch/worker_pool.h"
#include "run_args.h"
#include "run_llm.h"
#include "run_output.h"
#include "run_progress.h"
#include "run_wait.h"
#include "stop_signals.h"

namespace ksearch::cli {
namespace {

EvaluatorOptions MakeEvaluatorOptions(const RunArgs& args) {
  EvaluatorOptions options;
  options.device_ordinal = args.device;
  options.arch = args.arch;
  options.compile_only = args.compile_only;
  options.compile_cache_dir = args.cache_dir;
  options.replay_input_seed = args.replay_input_seed;
  options.max_timing_seconds = args.max_timing_seconds;
  options.allow_unsandboxed_compile = args.unsandboxed_compile;
  return options;
}

// --compile-only and --in-process judge in this process; everything else goes
// to isolated ksearch-worker processes, one per GPU, so a kernel that crashes
// or hangs its GPU costs one evaluation, not the search.
StatusOr<std::unique_ptr<Evaluator>> MakeEvaluator(const RunArgs& args, const Problem& problem) {
  EvaluatorOptions options = MakeEvaluatorOptions(args);
  if (!args.queue.empty()) {
    QueueEvaluatorOptions queue;
    queue.queue.url = args.queue;
    queue.arch = args.arch;          // the workers' arch
    queue.run_id = args.queue_run;   // the same name again collects earlier results
    queue.evaluator = options;       // compile cache and limits for the local compiles
    KSEARCH_ASSIGN_OR_RETURN(auto made, CreateQueueEvaluator(problem, queue));
    std::cerr << "ksearch: judging through " << args.queue << " (queue run " << made->run_id()
              << ")\n";
    return std::unique_ptr<Evaluator>(std::move(made));
  }
  if (args.compile_only || args.in_process) {
    KSEARCH_ASSIGN_OR_RETURN(auto local, CreateLocalEvaluator(problem, options));
    return std::unique_ptr<Evaluator>(std::move(local));
  }
  WorkerPoolOptions pool;
  pool.evaluator = options;
  KSEARCH_ASSIGN_OR_RETURN(pool.gpus, ParseGpus(args.gpus));
  if (pool.gpus.empty() && args.device != 0) pool.gpus = {args.device};
  KSEARCH_ASSIGN_OR_RETURN(auto made, CreateWorkerPoolEvaluator(problem, pool));
  return std::unique_ptr<Evaluator>(std::move(made));
}

// How many candidates the store hands the evaluator at once: each chunk is
// written before the search sees it, so a kill loses at most one chunk, and a
// chunk large enough keeps every GPU (and the compile pool) busy.
SessionOptions MakeSessionOptions(const RunArgs& args) {
  SessionOptions options;
  options.take_over_running = args.take_over;
  options.reopen_completed = args.reopen;
  if (!args.queue.empty()) {
    // A fleet is idle unless many jobs are queued at once.
    options.evaluation_chunk_size = std::max(64, args.batch);
  } else if (args.compile_only) {
    options.evaluation_chunk_size = std::max(1, args.batch);
  } else if (args.in_process) {
    options.evaluation_chunk_size = 1;  // the in-process evaluator judges one at a time anyway
  } else {
    auto gpus = ParseGpus(args.gpus);
    size_t count = gpus.ok() && !gpus->empty() ? gpus->size() : 2;
    options.evaluation_chunk_size = static_cast<int>(4 * count);
  }
  return options;
}

// The driver check before any work: only searches judged on this machine's
// GPUs need one (not --compile-only, not --queue).
Status RequireLocalGpu(const RunArgs& args, const std::string& advice) {
  std::string why;
  if (args.compile_only || !args.queue.empty() || CudaDriverAvailable(&why)) return Status::Ok();
  return FailedPreconditionError(why + "; " + advice);
}

// The search's shape (--seeds, --ideas, …) and its budgets.
SearchOptions MakeSearchOptions(const RunArgs& args) {
  SearchOptions options;
  options.seed = args.seed;
  options.seeds = args.seeds;
  options.ideas = args.ideas;
  options.branches = args.branches;
  options.repair = args.repair;
  options.budget.max_rounds = args.rounds;
  options.budget.max_candidates = args.max_candidates;
  options.budget.max_tokens = args.budget_tokens;
  options.budget.max_cost_usd = args.budget_usd;
  options.budget.max_wall_seconds = args.budget_minutes * 60.0;
  options.budget.max_gpu_seconds = args.budget_gpu_minutes * 60.0;
  options.budget.target_speedup = args.target_speedup;
  return options;
}

// The searcher --strategy names.
std::unique_ptr<Searcher> MakeSearcher(const RunArgs& args, const SearchOptions& options) {
  if (args.strategy == "branch") return MakeParallelBranchSearch(options);
  if (args.strategy == "refine") {
    SequentialRefineOptions refine;
    refine.use_idea_generator = args.idea_per_step;
    return MakeSequentialRefineSearch(options, refine);
  }
  ParameterTuneOptions tune;
  tune.batch_size = args.batch;
  tune.method = *ParseTuneMethod(args.tune_method);
  return MakeParameterTuneSearch(options, tune);
}

// The search itself, with SIGINT and SIGTERM turned into a graceful stop.
// The handlers stay until the process exits: a signal while the summary is
// printed or the run recorded must not end the process half-way.
StatusOr<SearchSummary> RunSearcher(Searcher& searcher, SearchContext& context) {
  context.cancel = &StopRequested();
  InstallStopSignals(
      "\nksearch: stopping: work in flight is finished or cancelled, then the run is recorded\n");
  return searcher.Run(context);
}

// The best timed kernel goes to the kernel cache beside the run, where an
// engine's KernelRunner finds it (kept only if faster than the entry there);
// a problem with dispatch buckets: the per-bucket bests form the table
// KernelRunner::LoadTable dispatches by.
void CacheBest(const RunArgs& args, const Problem& problem, const SearchSummary& summary,
               const Evaluator& evaluator, Store& store, int64_t run_id) {
  KernelCache cache(store);
  if (summary.best && summary.best->evaluation.timing) {
    auto put = cache.PutBest(problem, evaluator.device(), *summary.best, run_id);
    if (!put.ok()) {
      std::cerr << "ksearch: note: the best kernel was not cached: " << put.status().message()
                << "\n";
    } else if (*put && !args.json) {
      std::cerr << "ksearch: the best kernel is now the cached one for " << problem.name << " on "
                << evaluator.device().name << "\n";
    }
  }
  if (!summary.best_per_bucket.empty() && !args.compile_only) {
    auto put = cache.PutTable(problem, evaluator.device(), summary.best_per_bucket, run_id);
    if (!put.ok()) {
      std::cerr << "ksearch: note: the dispatch table was not cached: " << put.status().message() << "\n";
    } else if (!args.json) {
      std::cerr << "ksearch: " << *put << " of " << summary.best_per_bucket.size()
                << " bucket entries of the dispatch table of " << problem.name << " updated\n";
    }
  }
}

// This session's live LLM exchanges (replayed ones were paid for earlier).
std::vector<LlmExchange> SessionExchanges(Store& store, int64_t run_id, int64_t session_start_ms) {
  std::vector<LlmExchange> exchanges;
  auto recorded = store.LoadExchanges(run_id);
  if (recorded.ok()) {
    for (LlmExchange& x : *recorded) {
      if (x.started_unix_ms >= session_start_ms) exchanges.push_back(std::move(x));
    }
  }
  return exchanges;
}

// What the provider billed: this session's live clients, and for a resumed
// run the replies earlier sessions recorded besides.
Billed BilledTotals(const Generators& generators, const RunSession* session) {
  Billed billed;
  for (const LlmClient* client : generators.live_clients()) billed.session += client->totals();
  if (session && session->resumed()) {
    LlmTotals run = billed.session;
    for (const LlmExchange& x : session->history().exchanges) run += LlmTotals::Of(x);
    billed.run = run;
    billed.sessions = session->run().sessions;
  }
  return billed;
}

// "run 3 recorded in ./ksearch.db …" on stderr, with how to see and continue it.
void PrintRecorded(const SearchSummary& summary, const RunSession& session, const Store& store) {
  std::cerr << "ksearch: run " << session.run_id() << " recorded in " << store.path();
  if (session.reused_evaluations() > 0 || session.reused_replies() > 0) {
    std::cerr << " (reused from earlier sessions: " << session.reused_evaluations()
              << " judged kernels, " << session.reused_replies() << " LLM replies)";
  }
  std::cerr << "; see 'ksearch show " << session.run_id() << "'";
  if (summary.termination == TerminationReason::kInterrupted ||
      summary.termination == TerminationReason::kFailed) {
    std::cerr << ", continue with 'ksearch resume " << session.run_id() << "'";
  }
  std::cerr << "\n";
}

// A search whose run could not be recorded (a full disk, a database that
// became unwritable): the recorder stopped it, so the summary says why
// instead of "stopped by an observer", nothing is cached, and the exit code
// is that of the write error (4), not the search's.
int ReportUnrecorded(const RunArgs& args, const Problem& problem, SearchSummary summary,
                     int64_t run_id, const Status& error) {
  if (summary.termination == TerminationReason::kStoppedByObserver) {
    summary.termination = TerminationReason::kFailed;
    summary.error = error;
  }
  if (args.json) {
    PrintSummaryJson(summary, problem, run_id, SplitTime(summary, {}, false));
  } else {
    std::cout << summary.FullReport();
  }
  return ReportError(error, kExitFailure);
}

// The exit code of a finished search (docs/cli.md).
int ExitCodeFor(const SearchSummary& summary, const WaitWatch& watch) {
  if (summary.termination == TerminationReason::kInterrupted) {
    if (StopSignal() == 0 && watch.reason() == WaitWatch::Reason::kReplies) {
      return kExitAwaitingReplies;
    }
    if (StopSignal() == 0 && watch.reason() == WaitWatch::Reason::kGpu) return kExitAwaitingGpu;
    return StopSignal() == SIGTERM ? kExitTerminated : kExitInterrupted;
  }
  if (summary.termination == TerminationReason::kFailed) return kExitFailure;
  if (summary.best && summary.best->evaluation.correct()) return kExitOk;
  return summary.best ? kExitCompiledOnly : kExitRejected;
}

// The evaluator of a recorded search: `inner` behind the run's store, or
// (with no `inner`: a resume without a GPU) one made only when a candidate
// must be judged, which stops the search through `watch` when it cannot be
// made here.
StatusOr<std::unique_ptr<Evaluator>> SessionEvaluator(const RunArgs& args, const Problem& problem,
                                                      Evaluator* inner, RunSession& session,
                                                      WaitWatch& watch) {
  if (inner != nullptr) return session.WrapEvaluator(*inner);
  auto make = [&args, &problem]() -> StatusOr<std::unique_ptr<Evaluator>> {
    KSEARCH_RETURN_IF_ERROR(RequireLocalGpu(args, "continue on a machine with one"));
    return MakeEvaluator(args, problem);
  };
  return session.WrapDeferredEvaluator(make, [&watch](const Status& why) { watch.NeedGpu(why); });
}

// Plain-text replies of an exchange folder carry no usage: the token counts
// above lack them, and say so.
void PrintUnknownUsage(const Generators& generators) {
  int64_t count = 0;
  for (const ExchangeLlmClient* x : generators.exchange_clients()) {
    count += x->stats().replies_without_usage;
  }
  if (count > 0) {
    std::cout << "usage unknown: " << count << " repl" << (count == 1 ? "y" : "ies")
              << " came as plain text; their tokens and cost are not counted above\n";
  }
}

// Why the search stopped by itself, and what to do next, on stderr.
void PrintWaitReason(const WaitWatch& watch, const Generators& generators,
                     const RunSession* session) {
  if (watch.reason() == WaitWatch::Reason::kNone || StopSignal() != 0) return;
  std::cerr << "ksearch: stopped: " << watch.message();
  if (watch.reason() == WaitWatch::Reason::kReplies) {
    std::cerr << "; answer them where the provider is reachable ('ksearch answer "
              << generators.exchange_clients().front()->folder()
              << " --llm openai:MODEL', or by hand: docs/llm.md)";
  } else {
    std::cerr << "; judge them on the GPU host";
  }
  if (session) std::cerr << ", then 'ksearch resume " << session->run_id() << "'";
  std::cerr << "\n";
}

// Runs the search on `problem` with `inner` (null: a resume without a GPU,
// see SessionEvaluator), recording in `session` when there is one. Prints
// the progress line and the summary.
int Search(const RunArgs& args, const Problem& problem, Evaluator* inner, Store* store,
           RunSession* session) {
  if (args.strategy == "tune" && !args.llm.empty()) {
    std::cerr << "ksearch: note: --llm is for --strategy branch or refine; tune needs no model\n";
  }
  NoteModelFlags(args);
  auto generators = MakeGenerators(args, problem, session);
  if (!generators.ok()) return ReportError(generators.status());
  WaitWatch watch(&StopRequested(), generators->exchange_clients(), generators->http_clients(),
                  args.exchange_wait_seconds);
  std::unique_ptr<Evaluator> recorded;
  if (session) {
    auto wrapped = SessionEvaluator(args, problem, inner, *session, watch);
    if (!wrapped.ok()) {
      // Another problem or another device than the run's.
      return wrapped.status().code() == StatusCode::kFailedPrecondition
                 ? ReportError(wrapped.status(), kExitDeviceMismatch)
                 : ReportError(wrapped.status());
    }
    recorded = std::move(*wrapped);
  }
  std::unique_ptr<Evaluator> watched = watch.Watch(recorded ? *recorded : *inner);
  Evaluator& evaluator = *watched;
  const SearchOptions options = MakeSearchOptions(args);
  std::unique_ptr<Searcher> searcher = MakeSearcher(args, options);
  Progress progress(args.json, args.progress_every_seconds.value_or(kDefaultProgressSeconds),
                    options.budget, generators->clients(), generators->http_clients(),
                    generators->exchange_clients());
  SearchContext context;
  context.problem = &problem;
  context.evaluator = &evaluator;
  context.ideas = generators->ideas.get();
  context.brancher = generators->brancher.get();
  if (session) context.observers.push_back(session->observer());
  context.observers.push_back(&progress);
  const int64_t session_start_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  auto summary = RunSearcher(*searcher, context);
  progress.Finish();
  Status recorded_status = session ? session->Finish(summary) : Status::Ok();
  if (!summary.ok()) return ReportError(summary.status());
  if (!recorded_status.ok()) {
    return ReportUnrecorded(args, problem, *summary, session->run_id(), recorded_status);
  }
  if (store) CacheBest(args, problem, *summary, evaluator, *store, session->run_id());
  const bool any_llm = !generators->clients().empty();
  std::vector<LlmExchange> exchanges;
  if (store && any_llm) exchanges = SessionExchanges(*store, session->run_id(), session_start_ms);
  TimeSplit time = SplitTime(*summary, exchanges, store != nullptr || !any_llm);
  if (args.json) {
    PrintSummaryJson(*summary, problem, session ? session->run_id() : 0, time);
  } else {
    PrintSummaryText(*summary, time, args.unsandboxed_compile, BilledTotals(*generators, session));
    PrintUnknownUsage(*generators);
  }
  PrintWaitReason(watch, *generators, session);
  if (session) PrintRecorded(*summary, *session, *store);
  return ExitCodeFor(*summary, watch);
}

// Through a queue, a run names its results in Redis; recorded with the run,
// the name lets a resume collect what the workers finished while it was down.
std::string NewQueueRunId() {
  std::random_device random;
  char id[32];
  std::snprintf(id, sizeof(id), "ks-%08x%08x", random(), random());
  return id;
}

// The arguments after "run" on this command line, without the ones that
// choose the database or the GPUs (a resume chooses those afresh).
// `extra` is appended (flags the run chose itself, such as its queue run id).
std::vector<std::string> RecordedArguments(const std::vector<std::string>& extra) {
  const std::vector<std::string>& all = CommandLine();
  std::vector<std::string> out;
  size_t i = 0;
  while (i < all.size() && all[i] != "run") ++i;
  for (++i; i < all.size(); ++i) {
    const std::string& a = all[i];
    if (a == "--db" || a == "--gpus" || a == "--device" || a == "--queue") {
      ++i;  // and its value
      continue;
    }
    if (a.starts_with("--db=") || a.starts_with("--gpus=") || a.starts_with("--device=") ||
        a.starts_with("--queue=") || a == "--in-process" || a == "--no-db" || a == "--json") {
      continue;
    }
    out.push_back(a);
  }
  out.insert(out.end(), extra.begin(), extra.end());
  return out;
}

int RunSearch(const RunArgs& given) {
  if (given.resume > 0) return kExitUsage;  // handled by ResumeSearch
  RunArgs args = given;
  WarnIfUnsandboxed(args.unsandboxed_compile);
  std::vector<std::string> chosen;  // flags the run chose itself, recorded with it
  if (!args.queue.empty() && args.queue_run.empty()) {
    args.queue_run = NewQueueRunId();
    chosen = {"--queue-run", args.queue_run};
  }
  if (Status valid = ValidateArgs(args); !valid.ok()) return ReportError(valid);
  // Refused flags must leave nothing in the store.
  if (Status flags = CheckModelFlags(args); !flags.ok()) return ReportError(flags);
  if (args.problem.empty()) {
    return ReportError(InvalidArgumentError("ksearch run needs a PROBLEM (or --resume RUN)"));
  }
  auto problem = LoadWithDims(args.problem, args.dims);
  if (!problem.ok()) return ReportError(problem.status());
  if (Status gpu = RequireLocalGpu(
          args, "run on a machine with an NVIDIA GPU, or add --compile-only --arch sm_90");
      !gpu.ok()) {
    return ReportError(gpu);
  }
  // The store first: a database that cannot be written should stop the run
  // before any GPU time is spent.
  std::unique_ptr<Store> store;
  if (!args.no_db) {
    auto opened = Store::Open(DbPath(args));
    if (!opened.ok()) {
      return ReportStoreError(
          Status(opened.status().code(), opened.status().message() + " (or run with --no-db)"),
          /*for_writing=*/true);
    }
    store = std::move(*opened);
  }
  auto evaluator = MakeEvaluator(args, *problem);
  if (!evaluator.ok()) return ReportError(evaluator.status());
  std::unique_ptr<RunSession> session;
  if (store) {
    RunSettings settings;
    settings.strategy = args.strategy;
    settings.options_json = ArgvToOptionsJson(RecordedArguments(chosen));
    settings.seed = args.seed;
    settings.device = (*evaluator)->device();
    auto begun = BeginRun(*store, *problem, settings, MakeSessionOptions(args));
    if (!begun.ok()) return ReportError(begun.status());
    session = std::move(*begun);
    if (!args.json) {
      std::cerr << "ksearch: recording run " << session->run_id() << " in " << store->path()
                << "\n";
    }
  }
  int code = Search(args, *problem, evaluator->get(), store.get(), session.get());
  session.reset();
  return code;
}

// Replaces (or appends) `flag VALUE` in recorded run arguments.
void SetArgument(std::vector<std::string>& argv, const std::string& flag, const std::string& value) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == flag) {
      ++i;  // and its value
      continue;
    }
    if (argv[i].starts_with(flag + "=")) continue;
    out.push_back(argv[i]);
  }
  out.push_back(flag);
  out.push_back(value);
  argv = std::move(out);
}

int ResumeSearch(const RunArgs& given) {
  // A resume never creates a database: a mistyped --db is an error.
  Store::Options open;
  open.create_if_missing = false;
  auto store = Store::Open(DbPath(given), open);
  if (!store.ok()) return ReportStoreError(store.status(), /*for_writing=*/true);
  // Everything that can be checked is checked before the run is claimed, so
  // that a resume which cannot start leaves the run as it was.
  auto found = (*store)->FindRun(given.resume);
  if (!found.ok()) return ReportError(found.status());
  auto argv = ArgvFromOptionsJson(found->options_json);
  if (!argv.ok()) return ReportError(argv.status());
  // A larger budget for the rest of the run, kept for later resumes.
  for (const auto& [flag, value] : given.overrides) SetArgument(*argv, flag, value);

  RunArgs args;
  CLI::App parser{"ksearch run (as recorded)", "ksearch run"};
  AddRunOptions(parser, args);
  AddSelectionOptions(parser, args);  // --queue-run is recorded; the others are stripped
  std::vector<std::string> reversed(argv->rbegin(), argv->rend());
  try {
    parser.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return ReportError(DataLossError("run " + std::to_string(given.resume) +
                                     ": its recorded flags no longer parse (" + e.what() + ")"));
  }
  ApplyRoundsDefault(parser, args);
  if (!args.queue_run.empty() && given.queue.empty()) {
    return ReportError(InvalidArgumentError(
        "run " + std::to_string(given.resume) +
        " was judged by GPU hosts through a Redis queue: resume it with --queue URL (the "
        "Redis the workers serve, e.g. --queue redis://HOST:6379)"));
  }
  args.db = given.db;
  args.resume = given.resume;
  args.gpus = given.gpus;
  args.device = given.device;
  args.in_process = given.in_process;
  args.queue = given.queue;
  if (!given.queue_run.empty()) args.queue_run = given.queue_run;
  args.json = given.json;  // how to print is this session's choice, not the run's
  if (!given.exchange_folder.empty()) SetExchangeFolder(args, given.exchange_folder);
  // How this session reports itself; not recorded with the run.
  if (given.progress_every_seconds) args.progress_every_seconds = given.progress_every_seconds;
  if (Status valid = ValidateArgs(args); !valid.ok()) return ReportError(valid);
  if (Status flags = CheckModelFlags(args); !flags.ok()) return ReportError(flags);
  // A run whose model is reached through files goes on without a GPU as
  // far as the model's steps take it: its evaluator is made only when a
  // candidate must be judged.
  Status gpu = RequireLocalGpu(args, "run " + std::to_string(args.resume) + " needs a GPU to go on");
  const bool without_gpu = !gpu.ok() && UsesExchange(args);
  if (!gpu.ok() && !without_gpu) return ReportError(gpu);

  // The claim: check and reopen in one transaction.
  auto session = ResumeRun(**store, given.resume, MakeSessionOptions(given));
  if (!session.ok()) {
    // "already completed": the request, not the machine, is at fault (exit
    // 2, not the no-GPU exit 3); "still running": exit 8 (kAborted).
    if (session.status().code() == StatusCode::kFailedPrecondition) {
      return ReportError(session.status(), kExitUsage);
    }
    return ReportError(session.status());
  }
  if (!given.overrides.empty()) {
    Status kept = (*store)->SetRunOptions(given.resume, ArgvToOptionsJson(*argv));
    if (!kept.ok()) return ReportError(kept);
  }
  auto problem = (*session)->problem();
  if (!problem.ok()) return ReportError(problem.status());
  std::unique_ptr<Evaluator> evaluator;
  if (!without_gpu) {
    auto made = MakeEvaluator(args, *problem);
    if (!made.ok()) return ReportError(made.status());
    evaluator = std::move(*made);
  }
  if (!args.json) {
    std::cerr << "ksearch: resuming run " << args.resume << " (" << (*session)->run().problem_name
              << ", " << args.strategy << ") from " << (*store)->path() << "\n";
    if (without_gpu) {
      std::cerr << "ksearch: no GPU here (" << gpu.message()
                << "): the run goes on with the model's steps and stops where candidates must "
                   "be judged\n";
    }
  }
  int code = Search(args, *problem, evaluator.get(), store->get(), session->get());
  session->reset();
  return code;
}

}  // namespace

void AddRunCommand(CLI::App& app, int* exit_code) {
  static RunArgs args;
  auto* cmd = app.add_subcommand("run", "Search for a faster kernel for a problem");
  AddRunOptions(*cmd, args);
  AddSelectionOptions(*cmd, args);
  auto* no_db =
      cmd->add_flag("--no-db", args.no_db, "do not record the run (it cannot be resumed)");
  AddNumber(*cmd, "--resume", args.resume,
            "continue run RUN of the database with its recorded problem and flags (as "
            "'ksearch resume RUN')",
            AtLeast(1))
      ->excludes(no_db);
  cmd->footer(
      "Every run is recorded in the database (--db): a run stopped by Ctrl-C, a crash or\n"
      "SIGKILL continues with 'ksearch resume RUN' without judging a finished kernel or\n"
      "buying an LLM reply twice. Kernels are judged in isolated worker processes, one per\n"
      "GPU (--gpus); a kernel that crashes or hangs costs one evaluation, not the search.\n"
      "Ctrl-C or SIGTERM stops gracefully: work in flight is finished or cancelled,\n"
      "everything is recorded and the summary is printed (exit 130, 143). API keys come from $OPENAI_API_KEY or\n"
      "$ANTHROPIC_API_KEY, never from the command line.\n\n"
      "Examples:\n"
      "  ksearch run softmax                           tune softmax's templates on every GPU\n"
      "  ksearch run matmul --tune-method annealing --rounds 10 --batch 32 --gpus 0,1\n"
      "  ksearch run softmax --strategy branch --llm openai:gpt-4o --rounds 4 --seeds 2\n"
      "      --ideas 4 --branches 4 --budget-usd 5 --prices prices.json\n"
      "  ksearch run softmax --strategy branch --llm replay:run.jsonl   replay a run offline\n"
      "  ksearch run softmax --strategy branch --llm exchange:xchg --exchange-wait 60\n"
      "                                                requests as files in xchg/, answered\n"
      "                                                elsewhere ('ksearch answer'); exit 9\n"
      "                                                when waiting, then 'ksearch resume'\n"
      "  ksearch run softmax --strategy branch                          offline: catalog ideas\n"
      "  ksearch run softmax --strategy branch --llm mock --compile-only --arch sm_90\n"
      "                                                exercise the loop without a GPU or model\n"
      "  ksearch resume 3                              continue run 3 after a kill\n"
      "  ksearch run matmul --queue redis://fleet:6379 --arch sm_90\n"
      "                                                judge on GPU hosts running 'ksearch worker'\n\n" +
      std::string(kExitCodesHelp));
  cmd->callback([exit_code, cmd] {
    ApplyRoundsDefault(*cmd, args);
    *exit_code = args.resume > 0 ? ResumeSearch(args) : RunSearch(args);
  });
}

void AddResumeCommand(CLI::App& app, int* exit_code) {
  static RunArgs args;
  auto* cmd = app.add_subcommand(
      "resume", "Continue a recorded run that was interrupted, killed or failed");
  AddNumber(*cmd, "RUN", args.resume, "run number, as 'ksearch list' shows it", AtLeast(1))
      ->required();
  AddSelectionOptions(*cmd, args);
  cmd->add_flag("--take-over", args.take_over,
                "resume although the run says it is running (its process is known to be gone)");
  cmd->add_flag("--reopen", args.reopen,
                "continue a completed run, to extend it with a larger budget (--rounds, …)");
  static std::string rounds, max_candidates, budget_minutes, budget_gpu_minutes, exchange_wait;
  // Kept as given (a resume records them in the run's flags), checked as the
  // run's own flags are.
  struct Override {
    const char* flag;
    std::string* value;
    NumberType type;
    const char* help;
  };
  for (const Override& o :
       {Override{"--rounds", &rounds, NumberType::kInt32, "rounds in all, replacing the recorded"},
        Override{"--max-candidates", &max_candidates, NumberType::kInt64,
                 "candidates in all, replacing the recorded budget"},
        Override{"--budget-minutes", &budget_minutes, NumberType::kReal,
                 "wall time for this session, replacing the recorded budget"},
        Override{"--budget-gpu-minutes", &budget_gpu_minutes, NumberType::kReal,
                 "evaluator time for this session, replacing the recorded"},
        Override{"--exchange-wait", &exchange_wait, NumberType::kReal,
                 "seconds to wait for replies in an exchange folder, replacing the recorded (0: as "
                 "long as it takes)"}}) {
    AddNumberText(*cmd, o.flag, *o.value, o.help, o.type, AtLeast(0));
  }
  cmd->add_option("--exchange", args.exchange_folder,
                  "the run's exchange folder, in place of the recorded exchange:DIR (a run "
                  "carried to another machine); not recorded");
  cmd->add_flag("--json", args.json, "print the summary as JSON");
  AddProgressOption(*cmd, args);
  cmd->footer(
      "The run's problem, strategy, seed and flags come from the database. Kernels judged\n"
      "and LLM replies received before the interruption are reused, so the search replays\n"
      "quickly to where it stopped and goes on from there.\n\n"
      "Examples:\n"
      "  ksearch list                       find the run\n"
      "  ksearch resume 3                   continue run 3 of ./ksearch.db\n"
      "  ksearch resume 3 --reopen --rounds 20   extend a completed run to 20 rounds\n"
      "  ksearch resume 3 --db runs.db --gpus 1\n"
      "  ksearch resume 3 --exchange-wait 60    an exchange run: stop (exit 9) once its\n"
      "                                     requests have waited a minute for replies\n\n"
      "A run whose model is reached through an exchange folder (--llm exchange:DIR) also\n"
      "resumes on a machine without a GPU: it goes on as far as the model's steps take it\n"
      "and stops (exit 10) where candidates must be judged (docs/llm.md).");
  cmd->callback([exit_code] {
    for (const auto& [flag, value] : {std::pair{"--rounds", &rounds},
                                      std::pair{"--max-candidates", &max_candidates},
                                      std::pair{"--budget-minutes", &budget_minutes},
                                      std::pair{"--budget-gpu-minutes", &budget_gpu_minutes},
                                      std::pair{"--exchange-wait", &exchange_wait}}) {
      if (!value->empty()) args.overrides.emplace_back(flag, *value);
    }
    *exit_code = ResumeSearch(args);
  });
}

}  // namespace ksearch::cli
