// Store: searches that last. Every run, round, idea, candidate, evaluation and
// LLM exchange is written to one SQLite file (WAL mode, default ./ksearch.db)
// as it happens, each in its own transaction, so a search killed at any moment
// — SIGKILL included — loses no finished evaluation and no paid LLM reply, and
// can be resumed. Readers (ksearch list/show/report, another process) work
// while a search writes.
//
// This header is the database and what it holds (runs and their records).
// Recording a search into it and resuming one: ksearch/run_session.h (with
// the pieces it is made of: run_recorder.h, caching_evaluator.h,
// resuming_llm_client.h); a run as a page or as JSON for people:
// ksearch/run_report.h.
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
class StoreAccess;
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
    // Create the file when it does not exist, and set up an empty one
    // (ignored when read_only). false: only a ksearch database opens; a
    // missing or empty file is kNotFound.
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

  // (The parts of ksearch that keep their own tables in the same file, the
  // kernel cache, reach the connection through internal::StoreAccess.)
 private:
  friend class internal::StoreAccess;
  explicit Store(std::unique_ptr<internal::StoreImpl> impl);
  std::unique_ptr<internal::StoreImpl> impl_;
};

}  // namespace ksearch

#endif  // KSEARCH_STORE_H_
