// Store: runs and their records in SQLite (schema in schema.cc).
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>

#include <boost/json.hpp>

#include "cuda/compiler.h"
#include "ksearch/llm_recording.h"
#include "ksearch/run_session.h"
#include "ksearch/store.h"
#include "ksearch/version.h"
#include "store/records.h"
#include "store/store_impl.h"

namespace ksearch {
namespace internal {

Status StoreImpl::Write(const std::function<Status(Database&)>& body) {
  if (options_.read_only) {
    return PermissionDeniedError(path() + ": the store was opened read-only");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  KSEARCH_ASSIGN_OR_RETURN(auto transaction, Transaction::Begin(*db_));
  KSEARCH_RETURN_IF_ERROR(body(*db_));
  return transaction->Commit();
}

Status StoreImpl::Read(const std::function<Status(Database&)>& body) {
  std::lock_guard<std::mutex> lock(mutex_);
  // One read transaction: the statements of `body` see one consistent
  // snapshot even while another process commits.
  KSEARCH_RETURN_IF_ERROR(db_->Exec("BEGIN"));
  Status status = body(*db_);
  db_->Exec("COMMIT").IgnoreError();
  return status;
}

}  // namespace internal

namespace {

using internal::Database;
using internal::Statement;

constexpr const char kRunColumns[] =
    "id, problem_name, problem_fingerprint, problem_json, strategy, options_json, seed, "
    "ksearch_version, nvrtc_version, driver_version, device_name, device_arch, host, pid, "
    "sessions, started_unix_ms, ended_unix_ms, status, termination, message, best_candidate_id";

RunInfo ReadRun(const Statement& s) {
  RunInfo run;
  run.id = s.Int(0);
  run.problem_name = s.Text(1);
  run.problem_fingerprint = s.Text(2);
  run.problem_json = s.Text(3);
  run.strategy = s.Text(4);
  run.options_json = s.Text(5);
  run.seed = static_cast<uint64_t>(s.Int(6));
  run.ksearch_version = s.Text(7);
  run.nvrtc_version = s.Text(8);
  run.driver_version = static_cast<int>(s.Int(9));
  run.device_name = s.Text(10);
  run.device_arch = s.Text(11);
  run.host = s.Text(12);
  run.pid = s.Int(13);
  run.sessions = static_cast<int>(s.Int(14));
  run.started_unix_ms = s.Int(15);
  run.ended_unix_ms = s.Int(16);
  if (!ParseRunStatus(s.Text(17), &run.status)) run.status = RunStatus::kFailed;
  run.termination = s.Text(18);
  run.message = s.Text(19);
  run.best_candidate_id = s.Text(20);
  return run;
}

Status FillAggregates(Database& db, RunInfo* run) {
  {
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "SELECT COUNT(*), COALESCE(SUM(status = 'ok'), 0), COALESCE(SUM(status = 'compiled'), 0) "
        "FROM evaluations WHERE run_id = ?1"));
    s.Bind(1, run->id);
    KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) {
      run->candidates = s.Int(0);
      run->correct = s.Int(1);
      run->compiled = s.Int(2);
    }
  }
  // The best the search named (RecordBest), when it is recorded; else, for
  // runs recorded without it, the fastest correct timed candidate, else the
  // first correct one.
  if (!run->best_candidate_id.empty()) {
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "SELECT median_ms, speedup FROM evaluations WHERE run_id = ?1 AND candidate_id = ?2"));
    s.Bind(1, run->id).Bind(2, run->best_candidate_id);
    KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) {
      run->best_median_ms = s.OptionalDouble(0);
      run->best_speedup = s.OptionalDouble(1);
    } else {
      run->best_candidate_id.clear();
    }
  }
  if (run->best_candidate_id.empty()) {
    // SQLite's bare columns: with MIN(), the other columns come from the row
    // that holds the minimum.
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "SELECT candidate_id, MIN(median_ms), speedup FROM evaluations "
        "WHERE run_id = ?1 AND status = 'ok' AND median_ms IS NOT NULL"));
    s.Bind(1, run->id);
    KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row && !s.IsNull(1)) {
      run->best_candidate_id = s.Text(0);
      run->best_median_ms = s.Double(1);
      run->best_speedup = s.OptionalDouble(2);
    }
  }
  if (run->best_candidate_id.empty() && run->correct > 0) {
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "SELECT candidate_id FROM evaluations WHERE run_id = ?1 AND status = 'ok' "
        "ORDER BY seq LIMIT 1"));
    s.Bind(1, run->id);
    KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) run->best_candidate_id = s.Text(0);
  }
  {
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "SELECT COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), "
        "COALESCE(SUM(cost_usd), 0) FROM llm_exchanges WHERE run_id = ?1"));
    s.Bind(1, run->id);
    KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) {
      run->llm_exchanges = s.Int(0);
      run->input_tokens = s.Int(1);
      run->output_tokens = s.Int(2);
      run->cost_usd = s.Double(3);
    }
  }
  return Status::Ok();
}

StatusOr<RunInfo> FindRunLocked(Database& db, int64_t run_id) {
  KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(std::string("SELECT ") + kRunColumns +
                                                   " FROM runs WHERE id = ?1"));
  s.Bind(1, run_id);
  KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) {
    return NotFoundError("run " + std::to_string(run_id) + " is not in " + db.path() +
                         " ('ksearch list' shows the runs)");
  }
  RunInfo run = ReadRun(s);
  KSEARCH_RETURN_IF_ERROR(FillAggregates(db, &run));
  return run;
}

Status RequireRun(Database& db, int64_t run_id) {
  KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare("SELECT 1 FROM runs WHERE id = ?1"));
  s.Bind(1, run_id);
  KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return NotFoundError("run " + std::to_string(run_id) + " is not in " + db.path());
  return Status::Ok();
}

Status Corrupt(const Database& db, const std::string& where, const Status& status) {
  return DataLossError(db.path() + ": " + where + ": stored record does not parse: " +
                       status.message());
}

StatusOr<std::vector<LlmExchange>> LoadExchangesLocked(Database& db, int64_t run_id) {
  KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
      "SELECT id, json FROM llm_exchanges WHERE run_id = ?1 ORDER BY session, request_id, id"));
  s.Bind(1, run_id);
  std::vector<LlmExchange> out;
  while (true) {
    KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    auto exchange = ExchangeFromJsonLine(s.Text(1));
    if (!exchange.ok()) {
      return Corrupt(db, "llm_exchanges row " + std::to_string(s.Int(0)), exchange.status());
    }
    out.push_back(std::move(*exchange));
  }
  return out;
}

StatusOr<std::vector<HistoryEntry>> LoadEntriesLocked(Database& db, int64_t run_id,
                                                      std::string_view only_candidate = {}) {
  std::string sql =
      "SELECT c.id, c.source, c.plan_json, c.compile_options_json, c.parent_id, c.idea_id, "
      "c.round, c.generator, e.json FROM evaluations e JOIN candidates c "
      "ON c.run_id = e.run_id AND c.id = e.candidate_id WHERE e.run_id = ?1";
  if (!only_candidate.empty()) sql += " AND e.candidate_id = ?2";
  sql += " ORDER BY e.seq";
  KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(sql));
  s.Bind(1, run_id);
  if (!only_candidate.empty()) s.Bind(2, only_candidate);
  std::vector<HistoryEntry> out;
  while (true) {
    KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    HistoryEntry entry;
    Candidate& c = entry.candidate;
    c.id = s.Text(0);
    std::string where = "run " + std::to_string(run_id) + ", candidate " + c.id;
    c.source = s.Text(1);
    auto plan = LaunchPlan::FromJson(s.Text(2), "plan");
    if (!plan.ok()) return Corrupt(db, where, plan.status());
    c.plan = std::move(*plan);
    auto options = internal::StringListFromJson(s.Text(3), "compile_options");
    if (!options.ok()) return Corrupt(db, where, options.status());
    c.compile_options = std::move(*options);
    c.provenance.parent_id = s.Text(4);
    c.provenance.idea_id = s.Text(5);
    c.provenance.round = static_cast<int>(s.Int(6));
    c.provenance.generator = s.Text(7);
    auto evaluation = internal::EvaluationFromJson(s.Text(8), "evaluation");
    if (!evaluation.ok()) return Corrupt(db, where, evaluation.status());
    entry.evaluation = std::move(*evaluation);
    entry.evaluation.candidate_id = c.id;
    out.push_back(std::move(entry));
  }
  return out;
}

bool IsBetter(const HistoryEntry& a, const HistoryEntry* best) {
  if (!a.evaluation.correct()) return false;
  if (!best) return true;
  if (!a.evaluation.timing) return false;
  if (!best->evaluation.timing) return true;
  return a.evaluation.timing->median_ms < best->evaluation.timing->median_ms;
}

}  // namespace

std::string_view ToString(RunStatus status) {
  switch (status) {
    case RunStatus::kRunning: return "running";
    case RunStatus::kCompleted: return "completed";
    case RunStatus::kInterrupted: return "interrupted";
    case RunStatus::kFailed: return "failed";
  }
  return "unknown";
}

bool ParseRunStatus(std::string_view text, RunStatus* out) {
  for (RunStatus s : {RunStatus::kRunning, RunStatus::kCompleted, RunStatus::kInterrupted,
                      RunStatus::kFailed}) {
    if (ToString(s) == text) {
      *out = s;
      return true;
    }
  }
  return false;
}

namespace {

// A killed process whose parent has not reaped it (a parent that does not
// wait, or a container whose first process reaps nobody) still answers
// kill(pid, 0); /proc says it is a zombie.
bool IsZombie(int64_t pid) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return false;
  char buffer[512];
  size_t n = std::fread(buffer, 1, sizeof(buffer) - 1, f);
  std::fclose(f);
  buffer[n] = '\0';
  // "PID (COMM) STATE …"; COMM may hold spaces and parentheses: the state
  // follows the last ')'.
  const char* close = std::strrchr(buffer, ')');
  return close != nullptr && close[1] == ' ' && (close[2] == 'Z' || close[2] == 'X');
}

}  // namespace

bool RunInfo::LooksAbandoned() const {
  if (status != RunStatus::kRunning || pid <= 0) return false;
  if (host != internal::HostName()) return false;
  if (pid == ::getpid()) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0) return errno == ESRCH;
  return IsZombie(pid);
}

namespace {

boost::json::value OptionalNumber(const std::optional<double>& value) {
  return value ? internal::NumberToJson(*value) : boost::json::value(nullptr);
}

}  // namespace

std::string RunInfo::ToJson() const { return boost::json::serialize(internal::RunInfoToJson(*this)); }

boost::json::object internal::RunInfoToJson(const RunInfo& r) {
  boost::json::object o;
  o["id"] = r.id;
  o["problem_name"] = r.problem_name;
  o["problem_fingerprint"] = r.problem_fingerprint;
  o["strategy"] = r.strategy;
  boost::system::error_code ec;
  boost::json::value options = boost::json::parse(r.options_json, ec);
  o["options"] = ec ? boost::json::value(r.options_json) : options;
  o["seed"] = r.seed;
  o["ksearch_version"] = r.ksearch_version;
  o["nvrtc_version"] = r.nvrtc_version;
  o["driver_version"] = r.driver_version;
  o["device_name"] = r.device_name;
  o["device_arch"] = r.device_arch;
  o["host"] = r.host;
  o["pid"] = r.pid;
  o["sessions"] = r.sessions;
  o["started_unix_ms"] = r.started_unix_ms;
  o["ended_unix_ms"] = r.ended_unix_ms;
  o["status"] = std::string(ToString(r.status));
  o["abandoned"] = r.LooksAbandoned();
  o["termination"] = r.termination;
  o["message"] = r.message;
  o["candidates"] = r.candidates;
  o["correct"] = r.correct;
  o["compiled"] = r.compiled;
  o["best_candidate_id"] = r.best_candidate_id;
  o["best_median_ms"] = OptionalNumber(r.best_median_ms);
  o["best_speedup"] = OptionalNumber(r.best_speedup);
  o["llm_exchanges"] = r.llm_exchanges;
  o["input_tokens"] = r.input_tokens;
  o["output_tokens"] = r.output_tokens;
  o["cost_usd"] = internal::NumberToJson(r.cost_usd);
  return o;
}

SearchHistory RunHistory::ToSearchHistory() const {
  SearchHistory history;
  history.ideas = ideas;
  history.entries = entries;
  return history;
}

const HistoryEntry* RunHistory::Best() const {
  if (!run.best_candidate_id.empty()) {
    for (const HistoryEntry& e : entries) {
      if (e.candidate.id == run.best_candidate_id) return &e;
    }
  }
  const HistoryEntry* best = nullptr;
  for (const HistoryEntry& e : entries) {
    if (IsBetter(e, best)) best = &e;
  }
  return best;
}

std::map<std::string, int64_t> RunHistory::CountByStatus() const {
  std::map<std::string, int64_t> counts;
  for (const HistoryEntry& e : entries) ++counts[std::string(ToString(e.evaluation.status))];
  return counts;
}

std::string RunHistory::SummaryJson() const {
  boost::json::object o;
  o["run"] = internal::RunInfoToJson(run);
  o["rounds"] = rounds.size();
  o["ideas"] = ideas.size();
  boost::json::object by_status;
  for (const auto& [status, count] : CountByStatus()) by_status[status] = count;
  o["by_status"] = std::move(by_status);
  o["best"] = nullptr;
  if (const HistoryEntry* best = Best()) {
    const Candidate& c = best->candidate;
    o["best"] = {{"candidate",
                  {{"id", c.id},
                   {"content_hash", c.ContentHash()},
                   {"parent_id", c.provenance.parent_id},
                   {"idea_id", c.provenance.idea_id},
                   {"round", c.provenance.round},
                   {"generator", c.provenance.generator},
                   {"plan", boost::json::parse(c.plan.ToJson())},
                   {"source", c.source}}},
                 {"evaluation", internal::EvaluationToJson(best->evaluation)}};
  }
  return boost::json::serialize(o);
}

std::string ArgvToOptionsJson(const std::vector<std::string>& argv) {
  return "{\"argv\":" + internal::StringListToJson(argv) + "}";
}

StatusOr<std::vector<std::string>> ArgvFromOptionsJson(std::string_view options_json) {
  boost::system::error_code ec;
  boost::json::value root = boost::json::parse(options_json, ec);
  if (ec || !root.is_object() || !root.as_object().contains("argv") || !root.at("argv").is_array()) {
    return InvalidArgumentError("run options: expected {\"argv\": [strings]}, got " +
                                std::string(options_json.substr(0, 80)));
  }
  std::vector<std::string> argv;
  for (const boost::json::value& item : root.at("argv").as_array()) {
    if (!item.is_string()) return InvalidArgumentError("run options: argv holds a non-string");
    argv.emplace_back(item.as_string().c_str(), item.as_string().size());
  }
  return argv;
}

RunEnd RunEnd::FromSummary(const StatusOr<SearchSummary>& summary) {
  RunEnd end;
  if (!summary.ok()) {
    end.status = RunStatus::kFailed;
    end.termination = std::string(ToString(TerminationReason::kFailed));
    end.message = summary.status().ToString();
    return end;
  }
  end.termination = std::string(ToString(summary->termination));
  switch (summary->termination) {
    case TerminationReason::kInterrupted:
      end.status = RunStatus::kInterrupted;
      break;
    case TerminationReason::kFailed:
      end.status = RunStatus::kFailed;
      end.message = summary->error.ToString();
      break;
    default:
      end.status = RunStatus::kCompleted;
      break;
  }
  return end;
}

Store::Store(std::unique_ptr<internal::StoreImpl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

std::string Store::DefaultPath() {
  if (const char* env = std::getenv("KSEARCH_DB"); env && *env) return env;
  return "ksearch.db";
}

int Store::SchemaVersion() { return internal::LatestSchemaVersion(); }

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path) { return Open(path, Options()); }

StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path, const Options& options) {
  Database::OpenOptions open;
  open.read_only = options.read_only;
  open.create = options.create_if_missing;
  open.busy_timeout_ms = static_cast<int>(std::max(0.0, options.busy_timeout_seconds) * 1000.0);
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<Database> db, Database::Open(path, open));
  if (!options.read_only && db->IsReadOnly()) {
    return PermissionDeniedError(path +
                                 ": the database cannot be written (file permissions or a "
                                 "read-only file system); fix the permissions or choose another "
                                 "database");
  }
  // The first read of page 1: a file that is not SQLite fails here.
  auto first_read = db->QueryInt("PRAGMA application_id");
  if (!first_read.ok() && options.read_only && first_read.status().code() != StatusCode::kInvalidArgument &&
      first_read.status().code() != StatusCode::kDataLoss && ::access((path + "-wal").c_str(), F_OK) != 0) {
    // A WAL database in a folder this process cannot write: SQLite cannot
    // create the -shm file it reads through. With no -wal file there is no
    // writer (a writer would need both files there), so the file is read as
    // immutable.
    open.immutable = true;
    auto immutable = Database::Open(path, open);
    if (immutable.ok()) {
      auto retry = (*immutable)->QueryInt("PRAGMA application_id");
      if (retry.ok()) {
        db = std::move(*immutable);
        first_read = retry;
      }
    }
  }
  // Two processes creating the same database at once: the second may meet
  // the first's lock where SQLite does not wait for it (switching the journal
  // mode, reading a WAL index being built). Those steps are retried until the
  // busy timeout, so both open.
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(open.busy_timeout_ms);
  auto retry_while_busy = [&](const std::function<Status()>& step) {
    while (true) {
      Status status = step();
      if (status.code() != StatusCode::kUnavailable || options.read_only ||
          std::chrono::steady_clock::now() >= deadline) {
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  };
  int64_t application_id = 0, version = 0, tables = 0;
  if (!first_read.ok()) {
    KSEARCH_RETURN_IF_ERROR(retry_while_busy([&] {
      first_read = db->QueryInt("PRAGMA application_id");
      return first_read.status();
    }));
  }
  KSEARCH_ASSIGN_OR_RETURN(application_id, first_read);
  KSEARCH_RETURN_IF_ERROR(retry_while_busy([&]() -> Status {
    // One snapshot: another process creating the schema commits its tables,
    // application_id and user_version together, and reads taken on either
    // side of that commit would see a database that is neither empty nor
    // ksearch's.
    if (Status begun = db->Exec("BEGIN"); !begun.ok()) return begun;
    auto read = [&]() -> Status {
      KSEARCH_ASSIGN_OR_RETURN(application_id, db->QueryInt("PRAGMA application_id"));
      KSEARCH_ASSIGN_OR_RETURN(version, db->QueryInt("PRAGMA user_version"));
      KSEARCH_ASSIGN_OR_RETURN(tables, db->QueryInt("SELECT COUNT(*) FROM sqlite_schema"));
      return Status::Ok();
    };
    Status status = read();
    Status ended = db->Exec(status.ok() ? "COMMIT" : "ROLLBACK");
    return status.ok() ? ended : status;
  }));
  const int latest = internal::LatestSchemaVersion();
  if (application_id != internal::kApplicationId) {
    if (application_id != 0 || tables != 0 || version != 0) {
      std::string names;
      auto list = db->Prepare("SELECT name FROM sqlite_schema WHERE type = 'table' LIMIT 5");
      if (list.ok()) {
        while (true) {
          auto row = list->Step();
          if (!row.ok() || !*row) break;
          names += (names.empty() ? "" : ", ") + list->Text(0);
        }
      }
      char id[32];
      std::snprintf(id, sizeof(id), "0x%08llx", static_cast<unsigned long long>(application_id));
      return InvalidArgumentError(path + ": an SQLite database, but not a ksearch one (application_id " +
                                  id + (names.empty() ? "" : ", tables: " + names) +
                                  "); choose another file with --db");
    }
    // An empty file (or a fresh SQLite file without tables): ours to set up,
    // unless the caller only opens databases that exist (a resume).
    if (options.read_only || !options.create_if_missing) {
      return NotFoundError(path + ": an empty file, not yet a ksearch database");
    }
  }
  if (version > latest) {
    return FailedPreconditionError(path + ": written by a newer ksearch (schema version " +
                                   std::to_string(version) + "; this build reads up to " +
                                   std::to_string(latest) + "); upgrade ksearch");
  }
  if (options.read_only && version < latest) {
    return FailedPreconditionError(path + ": schema version " + std::to_string(version) +
                                   " needs a migration to " + std::to_string(latest) +
                                   "; open it once for writing (any ksearch run with --db)");
  }
  if (!options.read_only) {
    // WAL: readers never block the writer and the writer never blocks them;
    // a commit is one append to the -wal file, durable once written. It is
    // set once, by whoever finds the file in another mode.
    KSEARCH_RETURN_IF_ERROR(retry_while_busy([&]() -> Status {
      {
        // Scoped: a statement not yet finalized holds a read transaction,
        // in which the mode cannot change.
        KSEARCH_ASSIGN_OR_RETURN(Statement current, db->Prepare("PRAGMA journal_mode"));
        KSEARCH_ASSIGN_OR_RETURN(bool has_mode, current.Step());
        if (has_mode && current.Text(0) == "wal") return Status::Ok();
      }
      KSEARCH_ASSIGN_OR_RETURN(Statement mode, db->Prepare("PRAGMA journal_mode = WAL"));
      KSEARCH_ASSIGN_OR_RETURN(bool row, mode.Step());
      if (!row || mode.Text(0) != "wal") {
        return FailedPreconditionError(path + ": SQLite refused WAL mode (journal mode '" +
                                       (row ? mode.Text(0) : std::string()) +
                                       "'); is the file on a network file system?");
      }
      return Status::Ok();
    }));
    KSEARCH_RETURN_IF_ERROR(db->Exec(options.sync_every_commit ? "PRAGMA synchronous = FULL"
                                                               : "PRAGMA synchronous = NORMAL"));
    KSEARCH_RETURN_IF_ERROR(retry_while_busy(
        [&] { return internal::Migrate(*db, static_cast<int>(version), latest); }));
  }
  KSEARCH_RETURN_IF_ERROR(db->Exec("PRAGMA foreign_keys = ON"));
  return std::unique_ptr<Store>(
      new Store(std::make_unique<internal::StoreImpl>(std::move(db), options, latest)));
}

const std::string& Store::path() const { return impl_->path(); }
bool Store::read_only() const { return impl_->options().read_only; }

StatusOr<RunInfo> Store::CreateRun(const NewRun& spec) {
  if (!spec.problem) return InvalidArgumentError("CreateRun: no problem");
  RunInfo run;
  run.problem_name = spec.problem->name;
  run.problem_fingerprint = spec.problem->Fingerprint();
  run.problem_json = spec.problem->ToJson();
  run.strategy = spec.strategy;
  run.options_json = spec.options_json.empty() ? "{}" : spec.options_json;
  run.seed = spec.seed;
  run.ksearch_version = std::string(Version());
  run.nvrtc_version = spec.device.nvrtc_version.empty() ? internal::Compiler::NvrtcVersion()
                                                        : spec.device.nvrtc_version;
  run.driver_version = spec.device.driver_version;
  run.device_name = spec.device.name;
  run.device_arch = spec.device.cc_major > 0 ? spec.device.Arch() : "";
  run.host = internal::HostName();
  run.pid = ::getpid();
  run.started_unix_ms = internal::NowUnixMs();
  Status status = impl_->Write([&](Database& db) -> Status {
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "INSERT INTO runs (problem_name, problem_fingerprint, problem_json, strategy, "
        "options_json, seed, ksearch_version, nvrtc_version, driver_version, device_name, "
        "device_arch, host, pid, sessions, started_unix_ms, status) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, 1, ?14, 'running')"));
    s.Bind(1, run.problem_name).Bind(2, run.problem_fingerprint).Bind(3, run.problem_json);
    s.Bind(4, run.strategy).Bind(5, run.options_json).Bind(6, static_cast<int64_t>(run.seed));
    s.Bind(7, run.ksearch_version).Bind(8, run.nvrtc_version).Bind(9, run.driver_version);
    s.Bind(10, run.device_name).Bind(11, run.device_arch).Bind(12, run.host).Bind(13, run.pid);
    s.Bind(14, run.started_unix_ms);
    KSEARCH_RETURN_IF_ERROR(s.Run());
    run.id = db.LastInsertRowId();
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return run;
}

StatusOr<RunInfo> Store::FindRun(int64_t run_id) {
  RunInfo run;
  Status status = impl_->Read([&](Database& db) -> Status {
    KSEARCH_ASSIGN_OR_RETURN(run, FindRunLocked(db, run_id));
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return run;
}

StatusOr<std::vector<RunInfo>> Store::ListRuns(const RunFilter& filter) {
  std::vector<RunInfo> runs;
  Status status = impl_->Read([&](Database& db) -> Status {
    std::string sql = std::string("SELECT ") + kRunColumns + " FROM runs WHERE 1";
    if (!filter.problem_name.empty()) sql += " AND problem_name = ?1";
    if (!filter.problem_fingerprint.empty()) sql += " AND problem_fingerprint = ?2";
    sql += " ORDER BY id DESC";
    if (filter.limit > 0) sql += " LIMIT " + std::to_string(filter.limit);
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(sql));
    if (!filter.problem_name.empty()) s.Bind(1, filter.problem_name);
    if (!filter.problem_fingerprint.empty()) s.Bind(2, filter.problem_fingerprint);
    while (true) {
      KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      runs.push_back(ReadRun(s));
    }
    for (RunInfo& run : runs) KSEARCH_RETURN_IF_ERROR(FillAggregates(db, &run));
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return runs;
}

Status Store::ReopenRun(int64_t run_id) { return ReopenRun(run_id, true, true); }

Status Store::ReopenRun(int64_t run_id, bool allow_completed, bool allow_running) {
  return impl_->Write([&](Database& db) -> Status {
    // The check and the update share one write transaction (BEGIN
    // IMMEDIATE): of two resumes at once, the second sees the first's claim.
    KSEARCH_ASSIGN_OR_RETURN(Statement find, db.Prepare(std::string("SELECT ") + kRunColumns +
                                                        " FROM runs WHERE id = ?1"));
    find.Bind(1, run_id);
    KSEARCH_ASSIGN_OR_RETURN(bool found, find.Step());
    const std::string name = "run " + std::to_string(run_id);
    if (!found) {
      return NotFoundError(name + " is not in " + db.path() + " ('ksearch list' shows the runs)");
    }
    const RunInfo run = ReadRun(find);
    if (run.status == RunStatus::kCompleted && !allow_completed) {
      return FailedPreconditionError(name + " already completed (" + run.termination +
                                     "); start a new run, or reopen it to extend its budget");
    }
    if (run.status == RunStatus::kRunning && !run.LooksAbandoned() && !allow_running) {
      if (run.host == internal::HostName()) {
        return AbortedError(name + " is still running in another process (pid " +
                            std::to_string(run.pid) + " on this host); wait for it or stop it first");
      }
      return AbortedError(name + " may still be running on host '" + run.host + "' (pid " +
                          std::to_string(run.pid) + "); if that process is gone, resume with take-over");
    }
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "UPDATE runs SET status = 'running', sessions = sessions + 1, host = ?2, pid = ?3, "
        "ended_unix_ms = 0, termination = '', message = '' WHERE id = ?1"));
    s.Bind(1, run_id).Bind(2, internal::HostName()).Bind(3, static_cast<int64_t>(::getpid()));
    return s.Run();
  });
}

Status Store::SetRunOptions(int64_t run_id, const std::string& options_json) {
  return impl_->Write([&](Database& db) -> Status {
    KSEARCH_RETURN_IF_ERROR(RequireRun(db, run_id));
    KSEARCH_ASSIGN_OR_RETURN(Statement s,
                             db.Prepare("UPDATE runs SET options_json = ?2 WHERE id = ?1"));
    s.Bind(1, run_id).Bind(2, options_json);
    return s.Run();
  });
}

Status Store::FinishRun(int64_t run_id, const RunEnd& end) {
  return impl_->Write([&](Database& db) -> Status {
    KSEARCH_RETURN_IF_ERROR(RequireRun(db, run_id));
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "UPDATE runs SET status = ?2, termination = ?3, message = ?4, ended_unix_ms = ?5 "
        "WHERE id = ?1"));
    s.Bind(1, run_id).Bind(2, ToString(end.status)).Bind(3, end.termination).Bind(4, end.message);
    s.Bind(5, internal::NowUnixMs());
    return s.Run();
  });
}

Status Store::RecordRoundStart(int64_t run_id, int round, const std::vector<std::string>& seed_ids) {
  return impl_->Write([&](Database& db) -> Status {
    KSEARCH_RETURN_IF_ERROR(RequireRun(db, run_id));
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "INSERT INTO rounds (run_id, round, seed_ids_json, started_unix_ms) VALUES (?1, ?2, ?3, ?4) "
        "ON CONFLICT (run_id, round) DO UPDATE SET seed_ids_json = excluded.seed_ids_json "
        "WHERE seed_ids_json IS NOT excluded.seed_ids_json"));
    s.Bind(1, run_id).Bind(2, round).Bind(3, internal::StringListToJson(seed_ids));
    s.Bind(4, internal::NowUnixMs());
    return s.Run();
  });
}

Status Store::RecordRoundEnd(int64_t run_id, int round) {
  return impl_->Write([&](Database& db) -> Status {
    KSEARCH_RETURN_IF_ERROR(RequireRun(db, run_id));
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "UPDATE rounds SET ended_unix_ms = ?3 WHERE run_id = ?1 AND round = ?2 AND ended_unix_ms = 0"));
    s.Bind(1, run_id).Bind(2, round).Bind(3, internal::NowUnixMs());
    return s.Run();
  });
}

Status Store::RecordBest(int64_t run_id, const std::string& candidate_id) {
  return impl_->Write([&](Database& db) -> Status {
    KSEARCH_RETURN_IF_ERROR(RequireRun(db, run_id));
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "UPDATE runs SET best_candidate_id = ?2 WHERE id = ?1 AND best_candidate_id IS NOT ?2"));
    s.Bind(1, run_id).Bind(2, candidate_id);
    return s.Run();
  });
}

Status Store::RecordIdea(int64_t run_id, const Idea& idea) {
  return impl_->Write([&](Database& db) -> Status {
    KSEARCH_RETURN_IF_ERROR(RequireRun(db, run_id));
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "INSERT INTO ideas (run_id, id, seq, parent_id, round, category, text, generator, outcome, "
        "best_speedup_over_parent) VALUES (?1, ?2, "
        "(SELECT COALESCE(MAX(seq), 0) + 1 FROM ideas WHERE run_id = ?1), ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
        "ON CONFLICT (run_id, id) DO UPDATE SET parent_id = excluded.parent_id, "
        "round = excluded.round, category = excluded.category, text = excluded.text, "
        "generator = excluded.generator, outcome = excluded.outcome, "
        "best_speedup_over_parent = excluded.best_speedup_over_parent "
        "WHERE parent_id IS NOT excluded.parent_id OR round IS NOT excluded.round "
        "OR category IS NOT excluded.category OR text IS NOT excluded.text "
        "OR generator IS NOT excluded.generator OR outcome IS NOT excluded.outcome "
        "OR best_speedup_over_parent IS NOT excluded.best_speedup_over_parent"));
    s.Bind(1, run_id).Bind(2, idea.id).Bind(3, idea.parent_id).Bind(4, idea.round);
    s.Bind(5, ToString(idea.category)).Bind(6, idea.text).Bind(7, idea.generator);
    s.Bind(8, idea.outcome).Bind(9, idea.best_speedup_over_parent);
    return s.Run();
  });
}

Status Store::RecordEvaluation(int64_t run_id, const Candidate& candidate,
                               const Evaluation& evaluation) {
  const std::string hash = candidate.ContentHash();
  Evaluation stored = evaluation;
  stored.candidate_id = candidate.id;
  stored.content_hash = hash;
  const std::string json = stored.ToJson();
  const std::string plan = candidate.plan.ToJson();
  const std::string options = internal::StringListToJson(candidate.compile_options);
  return impl_->Write([&](Database& db) -> Status {
    KSEARCH_RETURN_IF_ERROR(RequireRun(db, run_id));
    {
      // A resumed search that made a different kernel under a recorded id
      // (a non-deterministic generator): keep the old one under another id
      // rather than overwrite a finished evaluation.
      KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
          "SELECT content_hash FROM candidates WHERE run_id = ?1 AND id = ?2"));
      s.Bind(1, run_id).Bind(2, candidate.id);
      KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row && s.Text(0) != hash) {
        std::string old_hash = s.Text(0);
        KSEARCH_ASSIGN_OR_RETURN(Statement move, db.Prepare(
            "UPDATE candidates SET id = ?3 WHERE run_id = ?1 AND id = ?2"));
        move.Bind(1, run_id).Bind(2, candidate.id).Bind(3, candidate.id + "~" + old_hash.substr(0, 12));
        KSEARCH_RETURN_IF_ERROR(move.Run());
      }
    }
    {
      KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
          "INSERT INTO candidates (run_id, id, content_hash, source, plan_json, "
          "compile_options_json, parent_id, idea_id, round, generator) "
          "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) "
          "ON CONFLICT (run_id, id) DO UPDATE SET parent_id = excluded.parent_id, "
          "idea_id = excluded.idea_id, round = excluded.round, generator = excluded.generator "
          "WHERE parent_id IS NOT excluded.parent_id OR idea_id IS NOT excluded.idea_id "
          "OR round IS NOT excluded.round OR generator IS NOT excluded.generator"));
      s.Bind(1, run_id).Bind(2, candidate.id).Bind(3, hash).Bind(4, candidate.source);
      s.Bind(5, plan).Bind(6, options).Bind(7, candidate.provenance.parent_id);
      s.Bind(8, candidate.provenance.idea_id).Bind(9, candidate.provenance.round);
      s.Bind(10, candidate.provenance.generator);
      KSEARCH_RETURN_IF_ERROR(s.Run());
    }
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "INSERT INTO evaluations (run_id, candidate_id, seq, content_hash, status, median_ms, "
        "speedup, json, recorded_unix_ms) VALUES (?1, ?2, "
        "(SELECT COALESCE(MAX(seq), 0) + 1 FROM evaluations WHERE run_id = ?1), "
        "?3, ?4, ?5, ?6, ?7, ?8) "
        "ON CONFLICT (run_id, candidate_id) DO UPDATE SET content_hash = excluded.content_hash, "
        "status = excluded.status, median_ms = excluded.median_ms, speedup = excluded.speedup, "
        "json = excluded.json, recorded_unix_ms = excluded.recorded_unix_ms "
        "WHERE json IS NOT excluded.json"));
    s.Bind(1, run_id).Bind(2, candidate.id).Bind(3, hash).Bind(4, ToString(evaluation.status));
    s.Bind(5, evaluation.timing ? std::optional<double>(evaluation.timing->median_ms) : std::nullopt);
    s.Bind(6, evaluation.speedup ? std::optional<double>(evaluation.speedup->ratio) : std::nullopt);
    s.Bind(7, json).Bind(8, internal::NowUnixMs());
    return s.Run();
  });
}

Status Store::RecordExchange(int64_t run_id, int session, const LlmExchange& exchange) {
  const std::string json = ExchangeToJsonLine(exchange);
  return impl_->Write([&](Database& db) -> Status {
    KSEARCH_RETURN_IF_ERROR(RequireRun(db, run_id));
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "INSERT INTO llm_exchanges (run_id, session, request_id, request_hash, tag, provider, "
        "model, ok, input_tokens, output_tokens, cost_usd, started_unix_ms, json) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"));
    const bool ok = exchange.response.ok();
    std::string model = ok && !exchange.response->model.empty() ? exchange.response->model
                                                                : exchange.request.model;
    s.Bind(1, run_id).Bind(2, session).Bind(3, static_cast<int64_t>(exchange.request_id));
    s.Bind(4, exchange.request_hash.empty() ? RequestHash(exchange.request) : exchange.request_hash);
    s.Bind(5, exchange.request.tag).Bind(6, exchange.provider).Bind(7, model).Bind(8, ok ? 1 : 0);
    s.Bind(9, ok ? exchange.response->input_tokens : int64_t{0});
    s.Bind(10, ok ? exchange.response->output_tokens : int64_t{0});
    s.Bind(11, ok ? exchange.response->cost_usd : 0.0);
    s.Bind(12, exchange.started_unix_ms).Bind(13, json);
    return s.Run();
  });
}

StatusOr<RunHistory> Store::LoadRunHistory(int64_t run_id, bool with_exchanges) {
  RunHistory history;
  Status status = impl_->Read([&](Database& db) -> Status {
    KSEARCH_ASSIGN_OR_RETURN(history.run, FindRunLocked(db, run_id));
    {
      KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
          "SELECT round, seed_ids_json, started_unix_ms, ended_unix_ms FROM rounds "
          "WHERE run_id = ?1 ORDER BY round"));
      s.Bind(1, run_id);
      while (true) {
        KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        RoundRecord r;
        r.round = static_cast<int>(s.Int(0));
        auto seeds = internal::StringListFromJson(s.Text(1), "seed_ids");
        if (!seeds.ok()) {
          return Corrupt(db, "run " + std::to_string(run_id) + ", round " + std::to_string(r.round),
                         seeds.status());
        }
        r.seed_ids = std::move(*seeds);
        r.started_unix_ms = s.Int(2);
        r.ended_unix_ms = s.Int(3);
        history.rounds.push_back(std::move(r));
      }
    }
    {
      KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
          "SELECT id, parent_id, round, category, text, generator, outcome, "
          "best_speedup_over_parent FROM ideas WHERE run_id = ?1 ORDER BY seq"));
      s.Bind(1, run_id);
      while (true) {
        KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        Idea idea;
        idea.id = s.Text(0);
        idea.parent_id = s.Text(1);
        idea.round = static_cast<int>(s.Int(2));
        if (!ParseIdeaCategory(s.Text(3), &idea.category)) {
          return DataLossError(db.path() + ": run " + std::to_string(run_id) + ", idea " + idea.id +
                               ": unknown category '" + s.Text(3) + "'");
        }
        idea.text = s.Text(4);
        idea.generator = s.Text(5);
        idea.outcome = s.Text(6);
        idea.best_speedup_over_parent = s.Double(7);
        history.ideas.push_back(std::move(idea));
      }
    }
    KSEARCH_ASSIGN_OR_RETURN(history.entries, LoadEntriesLocked(db, run_id));
    if (with_exchanges) {
      KSEARCH_ASSIGN_OR_RETURN(history.exchanges, LoadExchangesLocked(db, run_id));
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return history;
}

StatusOr<std::vector<LlmExchange>> Store::LoadExchanges(int64_t run_id) {
  std::vector<LlmExchange> out;
  Status status = impl_->Read([&](Database& db) -> Status {
    KSEARCH_RETURN_IF_ERROR(RequireRun(db, run_id));
    KSEARCH_ASSIGN_OR_RETURN(out, LoadExchangesLocked(db, run_id));
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return out;
}

StatusOr<std::vector<RunBest>> Store::BestForProblem(std::string_view name_or_fingerprint, int limit) {
  std::vector<RunBest> out;
  Status status = impl_->Read([&](Database& db) -> Status {
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        std::string("SELECT ") + kRunColumns +
        " FROM runs WHERE problem_name = ?1 OR problem_fingerprint = ?1 ORDER BY id DESC"));
    s.Bind(1, name_or_fingerprint);
    std::vector<RunInfo> runs;
    while (true) {
      KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      runs.push_back(ReadRun(s));
    }
    for (RunInfo& run : runs) {
      KSEARCH_RETURN_IF_ERROR(FillAggregates(db, &run));
      if (run.best_candidate_id.empty()) continue;
      KSEARCH_ASSIGN_OR_RETURN(auto entries, LoadEntriesLocked(db, run.id, run.best_candidate_id));
      // A compile-only run's best compiled kernel was never run: not correct.
      if (entries.empty() || !entries.front().evaluation.correct()) continue;
      out.push_back(RunBest{run, std::move(entries.front())});
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  // Fastest first; correct but untimed (compile-only) runs last.
  auto key = [](const RunBest& r) {
    return r.best.evaluation.timing ? r.best.evaluation.timing->median_ms
                                    : std::numeric_limits<double>::infinity();
  };
  std::stable_sort(out.begin(), out.end(),
                   [&](const RunBest& a, const RunBest& b) { return key(a) < key(b); });
  if (limit > 0 && static_cast<int>(out.size()) > limit) out.resize(static_cast<size_t>(limit));
  return out;
}

Status Store::CheckIntegrity() {
  std::string findings;
  Status status = impl_->Read([&](Database& db) -> Status {
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare("PRAGMA integrity_check"));
    while (true) {
      KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      std::string line = s.Text(0);
      if (line != "ok") findings += (findings.empty() ? "" : "; ") + line;
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  if (!findings.empty()) {
    return DataLossError(path() + ": the database is corrupt: " + findings.substr(0, 2000));
  }
  return Status::Ok();
}

}  // namespace ksearch
