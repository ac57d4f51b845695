// The schema of a ksearch database and its migrations. A migration is never
// edited once released: a change is a new entry at the end.
#include <string>

#include "store/store_impl.h"

namespace ksearch::internal {
namespace {

// Version 1: runs and everything a search records.
constexpr const char kSchemaV1[] = R"sql(
CREATE TABLE runs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  problem_name TEXT NOT NULL,
  problem_fingerprint TEXT NOT NULL,
  problem_json TEXT NOT NULL,
  strategy TEXT NOT NULL,
  options_json TEXT NOT NULL,
  seed INTEGER NOT NULL,
  ksearch_version TEXT NOT NULL,
  nvrtc_version TEXT NOT NULL,
  driver_version INTEGER NOT NULL,
  device_name TEXT NOT NULL,
  device_arch TEXT NOT NULL,
  host TEXT NOT NULL,
  pid INTEGER NOT NULL,
  sessions INTEGER NOT NULL DEFAULT 1,
  started_unix_ms INTEGER NOT NULL,
  ended_unix_ms INTEGER NOT NULL DEFAULT 0,
  status TEXT NOT NULL,
  termination TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL DEFAULT ''
);
CREATE INDEX runs_by_fingerprint ON runs(problem_fingerprint);
CREATE INDEX runs_by_name ON runs(problem_name);

CREATE TABLE rounds (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  round INTEGER NOT NULL,
  seed_ids_json TEXT NOT NULL,
  started_unix_ms INTEGER NOT NULL,
  ended_unix_ms INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (run_id, round)
) WITHOUT ROWID;

CREATE TABLE ideas (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  parent_id TEXT NOT NULL,
  round INTEGER NOT NULL,
  category TEXT NOT NULL,
  text TEXT NOT NULL,
  generator TEXT NOT NULL,
  outcome TEXT NOT NULL,
  best_speedup_over_parent REAL NOT NULL,
  PRIMARY KEY (run_id, id)
);

CREATE TABLE candidates (
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  id TEXT NOT NULL,
  content_hash TEXT NOT NULL,
  source TEXT NOT NULL,
  plan_json TEXT NOT NULL,
  compile_options_json TEXT NOT NULL,
  parent_id TEXT NOT NULL,
  idea_id TEXT NOT NULL,
  round INTEGER NOT NULL,
  generator TEXT NOT NULL,
  PRIMARY KEY (run_id, id)
);
CREATE INDEX candidates_by_hash ON candidates(run_id, content_hash);

CREATE TABLE evaluations (
  run_id INTEGER NOT NULL,
  candidate_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  content_hash TEXT NOT NULL,
  status TEXT NOT NULL,
  median_ms REAL,
  speedup REAL,
  json TEXT NOT NULL,
  recorded_unix_ms INTEGER NOT NULL,
  PRIMARY KEY (run_id, candidate_id),
  FOREIGN KEY (run_id, candidate_id) REFERENCES candidates(run_id, id)
    ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX evaluations_by_status ON evaluations(run_id, status);

CREATE TABLE llm_exchanges (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  session INTEGER NOT NULL,
  request_id INTEGER NOT NULL,
  request_hash TEXT NOT NULL,
  tag TEXT NOT NULL,
  provider TEXT NOT NULL,
  model TEXT NOT NULL,
  ok INTEGER NOT NULL,
  input_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  cost_usd REAL NOT NULL,
  started_unix_ms INTEGER NOT NULL,
  json TEXT NOT NULL
);
CREATE INDEX llm_exchanges_by_run ON llm_exchanges(run_id, session, request_id);
)sql";

// Version 2: the kernel cache. No foreign key to runs: an engine keeps its
// cached kernels when old runs are deleted.
constexpr const char kSchemaV2[] = R"sql(
CREATE TABLE kernel_cache (
  problem_fingerprint TEXT NOT NULL,
  device_name TEXT NOT NULL,
  cc_major INTEGER NOT NULL,
  cc_minor INTEGER NOT NULL,
  driver_version INTEGER NOT NULL,
  nvrtc_version TEXT NOT NULL,
  problem_name TEXT NOT NULL,
  arch TEXT NOT NULL,
  source TEXT NOT NULL,
  plan_json TEXT NOT NULL,
  compile_options_json TEXT NOT NULL,
  cubin BLOB NOT NULL,
  cubin_sha256 TEXT NOT NULL,
  median_ms REAL,
  speedup REAL,
  evaluation_json TEXT NOT NULL,
  run_id INTEGER NOT NULL,
  candidate_id TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL,
  PRIMARY KEY (problem_fingerprint, device_name, cc_major, cc_minor, driver_version, nvrtc_version)
);
)sql";

// Version 3: the run's best kernel as its search named it (one definition of
// "best" for every reader: see RunInfo::best_candidate_id).
constexpr const char kSchemaV3[] = R"sql(
ALTER TABLE runs ADD COLUMN best_candidate_id TEXT NOT NULL DEFAULT '';
)sql";

// Version 4: dispatch tables. A problem with dispatch buckets keeps one
// entry per bucket; `bucket` is -1 for an entry that serves the whole
// problem (every entry before this version). SQLite cannot change a primary
// key in place: the table is rebuilt with its rows.
constexpr const char kSchemaV4[] = R"sql(
CREATE TABLE kernel_cache_v4 (
  problem_fingerprint TEXT NOT NULL,
  device_name TEXT NOT NULL,
  cc_major INTEGER NOT NULL,
  cc_minor INTEGER NOT NULL,
  driver_version INTEGER NOT NULL,
  nvrtc_version TEXT NOT NULL,
  problem_name TEXT NOT NULL,
  arch TEXT NOT NULL,
  source TEXT NOT NULL,
  plan_json TEXT NOT NULL,
  compile_options_json TEXT NOT NULL,
  cubin BLOB NOT NULL,
  cubin_sha256 TEXT NOT NULL,
  median_ms REAL,
  speedup REAL,
  evaluation_json TEXT NOT NULL,
  run_id INTEGER NOT NULL,
  candidate_id TEXT NOT NULL,
  created_unix_ms INTEGER NOT NULL,
  bucket INTEGER NOT NULL DEFAULT -1,
  PRIMARY KEY (problem_fingerprint, device_name, cc_major, cc_minor, driver_version, nvrtc_version,
               bucket)
);
INSERT INTO kernel_cache_v4 SELECT *, -1 FROM kernel_cache;
DROP TABLE kernel_cache;
ALTER TABLE kernel_cache_v4 RENAME TO kernel_cache;
)sql";

constexpr const char* kMigrations[] = {kSchemaV1, kSchemaV2, kSchemaV3, kSchemaV4};

}  // namespace

int LatestSchemaVersion() { return static_cast<int>(std::size(kMigrations)); }

Status Migrate(Database& db, int from, int to) {
  for (int version = from; version < to; ++version) {
    KSEARCH_ASSIGN_OR_RETURN(auto transaction, Transaction::Begin(db));
    // Re-read inside the lock: another process may have migrated meanwhile.
    KSEARCH_ASSIGN_OR_RETURN(int64_t current, db.QueryInt("PRAGMA user_version"));
    if (current > version) continue;
    KSEARCH_RETURN_IF_ERROR(db.Exec(kMigrations[version]).WithContext(
        "migration to schema version " + std::to_string(version + 1)));
    KSEARCH_RETURN_IF_ERROR(db.Exec("PRAGMA application_id = " + std::to_string(kApplicationId)));
    KSEARCH_RETURN_IF_ERROR(db.Exec("PRAGMA user_version = " + std::to_string(version + 1)));
    KSEARCH_RETURN_IF_ERROR(transaction->Commit());
  }
  return Status::Ok();
}

}  // namespace ksearch::internal
