// Store: searches that last. Every run, round, idea, candidate, evaluation and
// LLM exchange is written to one SQLite file (WAL mode, default ./ksearch.db)
// as it happens, each in its own transaction, so a search killed at any moment
// — SIGKILL included — loses no finished evaluation and no paid LLM reply, and
// can be resumed. Readers (ksearch list/show/report, another process) work
// while a search writes.
//
// Recording and resuming a search (what `ksearch run --db/--resume` does):
//
//   auto store = ksearch::Store::Open("ksearch.db");
//   if (!store.ok()) return store.status();
//   ksearch::RunSettings settings;
//   settings.strategy = searcher->name();
//   settings.options_json = ksearch::ArgvToOptionsJson(argv);  // to re-run identically
//   settings.seed = options.seed;
//   settings.device = evaluator->device();
//   auto session = ksearch::BeginRun(**store, problem, settings);
//   //   or: auto session = ksearch::ResumeRun(**store, run_id);
//   auto evaluator = (*session)->WrapEvaluator(*inner_evaluator);  // serves stored results
//   auto llm = (*session)->WrapLlmClient(*http_client);              // serves stored replies
//   context.evaluator = evaluator->get();
//   context.observers.push_back((*session)->observer());
//   auto summary = searcher->Run(context);
//   Status finished = (*session)->Finish(summary);
//
// A resume re-runs the same strategy with the same seed and options: the
// wrapped evaluator answers candidates already judged in the run from the
// store (by problem fingerprint and Candidate::ContentHash), the wrapped LLM
// client answers requests already answered in the run from the stored
// exchanges (by RequestHash, in the order they were issued), and only the rest
// costs GPU time or tokens.
//
// Errors of Store::Open, for the bad inputs it must survive:
//   kNotFound          read-only open of a file that does not exist
//   kInvalidArgument   not an SQLite file; an SQLite file that is not a ksearch
//                      database; a folder
//   kDataLoss          a corrupt database (also from any later call that meets
//                      a corrupt page)
//   kFailedPrecondition  a database written by a newer ksearch (schema version
//                      above Store::SchemaVersion()); an older one opened
//                      read-only (it needs a migration)
//   kPermissionDenied  a read-only file or folder opened for writing
//   kResourceExhausted the disk is full (also from any later write; the write
//                      is rolled back whole)
//   kUnavailable       another process holds the lock past the busy timeout
//
// Thread safety: a Store may be shared by many threads (calls are serialized
// on its one connection). Several processes may open the same file: SQLite's
// locking keeps them consistent; readers never block the writer.
#ifndef KSEARCH_STORE_H_
#define KSEARCH_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/candidate.h"
#include "ksearch/evaluation.h"
#include "ksearch/evaluator.h"
#include "ksearch/generator.h"
#include "ksearch/idea.h"
#include "ksearch/llm_client.h"
#include "ksearch/problem.h"
#include "ksearch/searcher.h"
#include "ksearch/status.h"

namespace ksearch {

namespace internal {
class StoreImpl;
struct SessionCounters;
}  // namespace internal

enum class RunStatus {
  kRunning,      // started or resumed and not finished: running now, or killed
  kCompleted,    // ended on a stop condition (budget, target, no more work)
  kInterrupted,  // stopped by SIGINT / the cancel flag: resumable
  kFailed,       // the search failed (see RunInfo::message): resumable
};
// "running", "completed", "interrupted", "failed".
std::string_view ToString(RunStatus status);
bool ParseRunStatus(std::string_view text, RunStatus* out);

// One recorded search.
struct RunInfo {
  int64_t id = 0;                   // 1, 2, … within one database
  std::string problem_name;
  std::string problem_fingerprint;  // Problem::Fingerprint()
  std::string problem_json;         // Problem::ToJson(): rebuilds the problem
  std::string strategy;             // Searcher::name()
  std::string options_json = "{}";  // the caller's options, a JSON object (opaque here)
  uint64_t seed = 0;
  std::string ksearch_version;
  std::string nvrtc_version;
  int driver_version = 0;
  std::string device_name;          // "NVIDIA H200", "(compile-only)"
  std::string device_arch;          // "sm_90"
  std::string host;                 // where the last session ran
  int64_t pid = 0;                  // its process id
  int sessions = 1;                 // 1 + the number of resumes
  int64_t started_unix_ms = 0;
  int64_t ended_unix_ms = 0;        // 0 while running
  RunStatus status = RunStatus::kRunning;
  std::string termination;          // ToString(TerminationReason) when ended
  std::string message;              // the error of a failed run

  // Aggregates over the run's records (filled by FindRun and ListRuns).
  int64_t candidates = 0;           // judged
  int64_t correct = 0;              // status "ok": correct and timed
  int64_t compiled = 0;             // status "compiled": compile-only, never run
  // The run's best kernel, one definition for every reader (the search's
  // summary, show, best, export, report): the candidate the search named best
  // as it ran (SearchObserver::OnNewBest, recorded by RunRecorder) — the
  // fastest correct timed kernel; in a compile-only run, the compiled kernel
  // with the fewest registers, then fewest local bytes, then the earliest.
  // For a run recorded without it (older ksearch): the fastest correct timed
  // candidate, else the first correct one. Empty when there is none.
  std::string best_candidate_id;
  std::optional<double> best_median_ms;
  std::optional<double> best_speedup;
  int64_t input_tokens = 0;         // over the recorded LLM exchanges
  int64_t output_tokens = 0;
  double cost_usd = 0.0;
  int64_t llm_exchanges = 0;

  // True when the run says kRunning but its process is gone (same host, pid
  // not alive): it was killed and can be resumed.
  bool LooksAbandoned() const;
  // One JSON object with every field above.
  std::string ToJson() const;
};

struct RoundRecord {
  int round = 0;
  std::vector<std::string> seed_ids;
  int64_t started_unix_ms = 0;
  int64_t ended_unix_ms = 0;  // 0 when the round never ended (killed)
};

// Everything recorded for one run.
struct RunHistory {
  RunInfo run;
  std::vector<RoundRecord> rounds;    // by round number
  std::vector<Idea> ideas;            // in the order first recorded
  std::vector<HistoryEntry> entries;  // judged candidates, in the order they finished
  std::vector<LlmExchange> exchanges; // in the order recorded (when loaded)

  // The ideas and entries as a SearchHistory (what a strategy reads).
  SearchHistory ToSearchHistory() const;
  // The entry of run.best_candidate_id (see RunInfo); else null.
  const HistoryEntry* Best() const;
  // Count of evaluations per status name ("ok", "compile_error", …).
  std::map<std::string, int64_t> CountByStatus() const;
  // {"run": RunInfo, "rounds": N, "ideas": N, "by_status": {...},
  //  "best": {"candidate": {...}, "evaluation": Evaluation} | null}.
  std::string SummaryJson() const;
};

// What CreateRun records about a new run. `problem` is borrowed for the call.
struct NewRun {
  const Problem* problem = nullptr;
  std::string strategy;
  std::string options_json = "{}";
  uint64_t seed = 0;
  DeviceInfo device;
};

// How a run ended.
struct RunEnd {
  RunStatus status = RunStatus::kCompleted;
  std::string termination;
  std::string message;
  // kCompleted for every stop condition, kInterrupted for kInterrupted,
  // kFailed for kFailed or an error status.
  static RunEnd FromSummary(const StatusOr<SearchSummary>& summary);
};

struct RunFilter {
  std::string problem_name;         // exact; empty: any
  std::string problem_fingerprint;  // exact; empty: any
  int limit = 0;                    // newest first; 0: all
};

// The best kernel of one run, for `ksearch best PROBLEM`.
struct RunBest {
  RunInfo run;
  HistoryEntry best;
};

class Store {
 public:
  struct Options {
    // Open for reading only: never creates, migrates or writes. Use it for
    // reports and listings, and for a file you may not write.
    bool read_only = false;
    // Create the file when it does not exist (ignored when read_only).
    bool create_if_missing = true;
    // How long a call waits for another process's lock before failing with
    // kUnavailable.
    double busy_timeout_seconds = 10.0;
    // fsync every commit (SQLite synchronous=FULL): a committed record then
    // survives a power loss, not only a killed process. false
    // (synchronous=NORMAL) keeps every commit safe from SIGKILL and is faster
    // on slow disks.
    bool sync_every_commit = true;
  };

  // Opens or creates a ksearch database, migrating an older schema (each
  // migration in one transaction). Errors: see the top of this header.
  [[nodiscard]] static StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                             const Options& options);
  [[nodiscard]] static StatusOr<std::unique_ptr<Store>> Open(const std::string& path);
  // $KSEARCH_DB when set, else "ksearch.db" (in the working folder).
  static std::string DefaultPath();
  // The schema version this build writes.
  static int SchemaVersion();

  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const;
  bool read_only() const;

  // Records a new run with status kRunning, this host and process. Errors:
  // kInvalidArgument (no problem), the write errors above.
  [[nodiscard]] StatusOr<RunInfo> CreateRun(const NewRun& run);
  // Errors: kNotFound "run 12 is not in PATH".
  [[nodiscard]] StatusOr<RunInfo> FindRun(int64_t run_id);
  // Newest first.
  [[nodiscard]] StatusOr<std::vector<RunInfo>> ListRuns(const RunFilter& filter = {});
  // Marks a run as running again in this process (a resume): status kRunning,
  // sessions + 1, host and pid updated, ended cleared.
  [[nodiscard]] Status ReopenRun(int64_t run_id);
  // As above, after checking in the same write transaction that the run may
  // be reopened, so that of two processes resuming one run at once exactly
  // one gets it. Errors: kNotFound; kFailedPrecondition when the run is
  // kCompleted and !allow_completed; kAborted when it is kRunning in a live
  // process (or on another host) and !allow_running.
  [[nodiscard]] Status ReopenRun(int64_t run_id, bool allow_completed, bool allow_running);
  // Replaces RunInfo::options_json (a resume that extends the run's budget).
  [[nodiscard]] Status SetRunOptions(int64_t run_id, const std::string& options_json);
  // Records the run's best kernel so far (RunInfo::best_candidate_id).
  [[nodiscard]] Status RecordBest(int64_t run_id, const std::string& candidate_id);
  [[nodiscard]] Status FinishRun(int64_t run_id, const RunEnd& end);

  // Each call is one transaction; recording the same thing again (a resume
  // re-running the same search) replaces it. Errors: kNotFound for an unknown
  // run, the write errors above.
  [[nodiscard]] Status RecordRoundStart(int64_t run_id, int round,
                                        const std::vector<std::string>& seed_ids);
  [[nodiscard]] Status RecordRoundEnd(int64_t run_id, int round);
  [[nodiscard]] Status RecordIdea(int64_t run_id, const Idea& idea);
  // The candidate and its evaluation together: never one without the other.
  [[nodiscard]] Status RecordEvaluation(int64_t run_id, const Candidate& candidate,
                                        const Evaluation& evaluation);
  // One finished LLM exchange (as ExchangeToJsonLine: no keys). `session` is
  // the run's session number (RunInfo::sessions) that issued it, which orders
  // exchanges of different sessions for replay.
  [[nodiscard]] Status RecordExchange(int64_t run_id, int session, const LlmExchange& exchange);

  // Everything recorded for a run. Errors: kNotFound, kDataLoss (a corrupt
  // record: names the table and the row).
  [[nodiscard]] StatusOr<RunHistory> LoadRunHistory(int64_t run_id, bool with_exchanges = true);
  // The run's exchanges in replay order: by session, then by request id.
  [[nodiscard]] StatusOr<std::vector<LlmExchange>> LoadExchanges(int64_t run_id);
  // The best kernel of every run of a problem (by name or fingerprint), the
  // fastest first. Runs without a correct kernel are left out.
  [[nodiscard]] StatusOr<std::vector<RunBest>> BestForProblem(std::string_view name_or_fingerprint,
                                                              int limit = 0);
  // SQLite's integrity_check (reads the whole file: seconds for a large
  // database). Errors: kDataLoss with its findings.
  [[nodiscard]] Status CheckIntegrity();

  // The implementation, for the parts of ksearch that keep their own tables
  // in the same file (the kernel cache).
  internal::StoreImpl* impl() const { return impl_.get(); }

 private:
  explicit Store(std::unique_ptr<internal::StoreImpl> impl);
  std::unique_ptr<internal::StoreImpl> impl_;
};

// Writes every round, idea, candidate and evaluation of a search to the store
// as the searcher reports it, each in its own transaction. A write that fails
// (disk full) is kept in status() and, with stop_on_error, stops the search
// (kStop) rather than letting it run on unrecorded.
//
// Thread safety: the searcher serializes observer calls; status() may be read
// from any thread. Borrows the store, which must outlive it.
class RunRecorder final : public SearchObserver {
 public:
  RunRecorder(Store& store, int64_t run_id, bool stop_on_error = true);

  ObserverAction OnRoundStart(int round, const std::vector<std::string>& seed_ids) override;
  ObserverAction OnIdea(const Idea& idea) override;
  ObserverAction OnCandidateEvaluated(const Candidate& candidate, const Evaluation& evaluation) override;
  ObserverAction OnNewBest(const Candidate& candidate, const Evaluation& evaluation) override;
  // Stores the canonical text (the same upsert).
  ObserverAction OnEvaluationRevised(const Candidate& candidate, const Evaluation& evaluation) override;
  ObserverAction OnRoundEnd(int round) override;

  // OK, or the first write error.
  Status status() const;

 private:
  ObserverAction Check(Status status);
  Store& store_;
  int64_t run_id_;
  bool stop_on_error_;
  mutable std::mutex mutex_;
  Status status_;
};

// An Evaluator decorator for resumable runs. Candidates whose content hash
// already has an evaluation in the run (and that was not kCancelled) are
// answered from it, with the candidate id of the request; the rest go to the
// inner evaluator in chunks of `chunk_size`, and each chunk's evaluations are
// written to the store (with their candidates) as soon as the chunk returns,
// before the searcher sees them. A kill therefore loses at most the chunk in
// progress.
//
// Thread safety: as Evaluator (one call at a time). Borrows the inner
// evaluator and the store; both must outlive it.
class CachingEvaluator final : public Evaluator {
 public:
  struct Options {
    // Candidates handed to the inner evaluator per call. 1 loses nothing that
    // finished; the in-process evaluator then compiles one candidate at a time
    // (GPU timing is one at a time anyway). Raise it for compile-only runs or
    // for an evaluator that spreads a batch over several GPUs. 0: the whole
    // batch in one call.
    int chunk_size = 1;
  };

  // `known`: the run's evaluations so far (RunHistory::entries). Errors:
  // kFailedPrecondition when the inner evaluator's problem is not the run's
  // (fingerprints differ) or its device is not the one the run was measured on
  // (name or arch differ): stored and new figures would not be comparable.
  [[nodiscard]] static StatusOr<std::unique_ptr<CachingEvaluator>> Create(
      Evaluator& inner, Store& store, const RunInfo& run, const std::vector<HistoryEntry>& known,
      const Options& options);
  ~CachingEvaluator() override;

  std::vector<Evaluation> Evaluate(std::span<const Candidate> candidates,
                                   const std::atomic<bool>* cancel = nullptr) override;
  const Problem& problem() const override;
  const DeviceInfo& device() const override;
  std::optional<TimingStats> reference_timing() const override;
  std::optional<TimingStats> baseline_timing() const override;

  // Candidates answered from the store, and judged by the inner evaluator.
  int64_t reused() const;
  int64_t evaluated() const;
  // OK, or the first error writing an evaluation (the evaluation itself is
  // still returned to the caller).
  Status status() const;

 private:
  friend class RunSession;
  struct State;
  explicit CachingEvaluator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// An LlmClient decorator for resumable runs: a request whose RequestHash
// matches a stored, successful, not yet served exchange of the run is answered
// from it (by a ReplayLlmClient, in the order the originals were issued,
// preferring the same tag); any other request goes to the live client. Every
// exchange the live client finishes is written to the store (before the
// request's callback runs) and then passed to the observer set with
// SetObserver. Stored failures are not replayed: those requests go live again.
//
// Callbacks run on the replay client's thread or on the live client's I/O
// thread. totals() adds both. Thread safety: as LlmClient. Borrows `live` and
// the store, which must outlive it; it installs its own observer on `live`
// (and removes it when destroyed).
class ResumingLlmClient final : public LlmClient {
 public:
  // `recorded`: the run's exchanges in replay order (Store::LoadExchanges).
  // `session`: the session number to record live exchanges under. Errors:
  // kInternal (no thread could be started).
  [[nodiscard]] static StatusOr<std::unique_ptr<ResumingLlmClient>> Create(
      LlmClient& live, Store& store, int64_t run_id, int session, std::vector<LlmExchange> recorded);
  ~ResumingLlmClient() override;

  uint64_t Complete(ChatRequest request, Callback done) override;
  void Cancel(uint64_t request_id) override;
  LlmTotals totals() const override;
  void SetObserver(ExchangeObserver observer) override;
  std::string provider() const override;  // the live client's

  // Requests answered from the store, and sent to the live client.
  int64_t replayed() const;
  int64_t forwarded() const;
  // OK, or the first error writing an exchange.
  Status status() const;

 private:
  friend class RunSession;
  struct State;
  explicit ResumingLlmClient(std::shared_ptr<State> state);
  std::shared_ptr<State> state_;
};

// What BeginRun records about a new run.
struct RunSettings {
  // Searcher::name() of the strategy ("tune", "branch", …).
  std::string strategy;
  // Everything the caller needs to re-run the search identically on resume
  // (its flags: budgets, k/n/b, batch size, model, evaluator options), as a
  // JSON object. Stored verbatim; the store never reads it.
  std::string options_json = "{}";
  // SearchOptions::seed.
  uint64_t seed = 1;
  // Evaluator::device() of the evaluator the run uses.
  DeviceInfo device;
};

struct SessionOptions {
  // CachingEvaluator::Options::chunk_size.
  int evaluation_chunk_size = 1;
  // Stop the search when a record cannot be written (disk full, …).
  bool stop_on_store_error = true;
  // ResumeRun refuses a run whose status is kRunning while its process is
  // still alive on this host (two sessions would interleave). Set to resume
  // anyway (the other process is known to be gone, e.g. on another host).
  bool take_over_running = false;
  // ResumeRun refuses a kCompleted run unless this is set (to extend a
  // finished run with a larger budget).
  bool reopen_completed = false;
};

// One session of a recorded run: a new run (BeginRun) or a resumed one
// (ResumeRun). Owns the RunRecorder and hands out the decorators.
//
// Thread safety: create the wrappers before the search starts; observer() and
// the wrappers are then used by the searcher's threads as their own contracts
// say. Borrows the store, which must outlive the session and its wrappers.
class RunSession {
 public:
  ~RunSession();
  RunSession(const RunSession&) = delete;
  RunSession& operator=(const RunSession&) = delete;

  const RunInfo& run() const { return run_; }
  int64_t run_id() const { return run_.id; }
  // True for ResumeRun.
  bool resumed() const { return resumed_; }
  // The run's problem, rebuilt from the stored JSON. Errors: kDataLoss when
  // the stored problem no longer parses.
  [[nodiscard]] StatusOr<Problem> problem() const;
  // What was recorded before this session (empty for a new run).
  const RunHistory& history() const { return history_; }

  // The recorder: add it to SearchContext::observers.
  SearchObserver* observer() { return &recorder_; }
  // Wraps the evaluator the search uses (see CachingEvaluator). Errors:
  // kFailedPrecondition for a different problem or device.
  [[nodiscard]] StatusOr<std::unique_ptr<Evaluator>> WrapEvaluator(Evaluator& inner);
  // Wraps the live LLM client the generators use (see ResumingLlmClient).
  // Every live exchange is recorded in the run. Call it once per session and
  // give the wrapper to every generator: each wrapper serves the stored
  // replies once.
  [[nodiscard]] StatusOr<std::unique_ptr<LlmClient>> WrapLlmClient(LlmClient& live);

  // Evaluations and LLM replies served from the store so far.
  int64_t reused_evaluations() const;
  int64_t reused_replies() const;
  // OK, or the first error writing a record.
  Status status() const;

  // Records how the run ended (RunEnd::FromSummary). When a record could not
  // be written during the run, the run is marked kFailed with that error and
  // the error is returned.
  [[nodiscard]] Status Finish(const StatusOr<SearchSummary>& summary);

 private:
  friend StatusOr<std::unique_ptr<RunSession>> BeginRun(Store&, const Problem&, const RunSettings&,
                                                        const SessionOptions&);
  friend StatusOr<std::unique_ptr<RunSession>> ResumeRun(Store&, int64_t, const SessionOptions&);
  RunSession(Store& store, RunInfo run, RunHistory history, bool resumed, SessionOptions options);

  Store& store_;
  RunInfo run_;
  RunHistory history_;
  bool resumed_;
  SessionOptions options_;
  RunRecorder recorder_;
  // Shared with the wrappers, which the caller owns and may destroy first.
  std::shared_ptr<internal::SessionCounters> counters_;
};

// Creates a run and a session that records it.
[[nodiscard]] StatusOr<std::unique_ptr<RunSession>> BeginRun(Store& store, const Problem& problem,
                                                             const RunSettings& settings,
                                                             const SessionOptions& options = {});
// Reopens run `run_id` for a resume: loads what it recorded and marks it
// running again (check and claim in one transaction: Store::ReopenRun).
// Errors: kNotFound; kFailedPrecondition when the run is kCompleted ("run 3
// already completed"; see SessionOptions::reopen_completed); kAborted when it
// is still running in a live process (see SessionOptions::take_over_running).
[[nodiscard]] StatusOr<std::unique_ptr<RunSession>> ResumeRun(Store& store, int64_t run_id,
                                                              const SessionOptions& options = {});

// RunSettings::options_json for a search started from a command line: the
// arguments as {"argv": ["softmax", "--rounds", "6", …]}, which a resume parses
// again with the same flags. ArgvFromOptionsJson errors: kInvalidArgument
// (not that shape, named in the message).
std::string ArgvToOptionsJson(const std::vector<std::string>& argv);
[[nodiscard]] StatusOr<std::vector<std::string>> ArgvFromOptionsJson(std::string_view options_json);

// A self-contained HTML page (no network, no external file) about a run: the
// speedup of the best kernel per round as an inline SVG chart, the idea tree
// with each idea's outcome, the best kernel's source and evaluation, failure
// counts by status, tokens and cost.
std::string RunReportHtml(const RunHistory& history);

// JSON text indented for people, two spaces a level; short arrays of numbers
// or strings stay on one line. Text that does not parse is returned as is.
std::string IndentJson(std::string_view json);

}  // namespace ksearch

#endif  // KSEARCH_STORE_H_
