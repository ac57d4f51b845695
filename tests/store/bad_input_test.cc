// Every bad input the store must survive gives a clear error and leaves the
// file as it was: not SQLite, SQLite but not ours, corrupt, from a newer
// ksearch, from an older one (migrated), read-only, and a full disk.
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/file_util.h"
#include "ksearch/kernel_cache.h"
#include "ksearch/store.h"
#include "store/sqlite.h"
#include "store/store_impl.h"
#include "store_test_util.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::FakeDevice;
using testing::FakeVerdict;
using testing::RowSoftmaxProblem;
using testing::TempDir;

std::string Contents(const std::string& path) {
  auto text = internal::ReadFile(path);
  return text.ok() ? *text : std::string("<unreadable>");
}

void Sql(const std::string& path, const std::string& sql) { testing::ExecSql(path, sql); }

// A database with one run and a few evaluations, closed (so the WAL is
// checkpointed into the main file).
int64_t MakeDatabase(const std::string& path, int evaluations = 3) {
  Store::Options options;
  options.sync_every_commit = false;
  auto store = Store::Open(path, options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  Problem problem = RowSoftmaxProblem(64, 256);
  NewRun spec;
  spec.problem = &problem;
  spec.strategy = "tune";
  spec.device = FakeDevice();
  auto run = (*store)->CreateRun(spec);
  EXPECT_TRUE(run.ok());
  for (int i = 0; i < evaluations; ++i) {
    Candidate c = problem.start.ToCandidate("c" + std::to_string(i), "start");
    c.source += "// " + std::to_string(i);
    EXPECT_TRUE((*store)->RecordEvaluation(run->id, c, FakeVerdict(c, FakeDevice())).ok());
  }
  return run->id;
}

TEST(StoreBadInput, AFileThatIsNotSqliteIsRefusedAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.Write("notes.db", std::string("# my notes\n") + std::string(5000, 'x'));
  const std::string before = Contents(path);
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(store.status().message().find("not an SQLite database"), std::string::npos)
      << store.status().message();
  EXPECT_NE(store.status().message().find(path), std::string::npos);
  EXPECT_EQ(Contents(path), before);
}

TEST(StoreBadInput, AnotherApplicationsSqliteDatabaseIsRefusedAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.path() + "/shop.db";
  Sql(path, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers VALUES (1, 'a');");
  const std::string before = Contents(path);
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(store.status().message().find("not a ksearch one"), std::string::npos) << store.status().message();
  EXPECT_NE(store.status().message().find("customers"), std::string::npos);
  EXPECT_EQ(Contents(path), before);
}

TEST(StoreBadInput, AnEmptyFileBecomesADatabase) {
  TempDir dir;
  const std::string path = dir.Write("empty.db", "");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->ListRuns()->empty());
}

TEST(StoreBadInput, AMissingFileOpenedReadOnlyIsNotFound) {
  TempDir dir;
  Store::Options options;
  options.read_only = true;
  auto store = Store::Open(dir.path() + "/none.db", options);
  EXPECT_EQ(store.status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/none.db"));
}

TEST(StoreBadInput, AFolderIsNotADatabase) {
  TempDir dir;
  auto store = Store::Open(dir.path());
  EXPECT_EQ(store.status().code(), StatusCode::kInvalidArgument);
}

TEST(StoreBadInput, ACorruptDatabaseIsDataLoss) {
  TempDir dir;
  const std::string path = dir.path() + "/k.db";
  int64_t run = MakeDatabase(path, 40);
  // Every page but the first (the header and the schema's root) overwritten.
  std::string bytes = Contents(path);
  ASSERT_GT(bytes.size(), 8192u);
  for (size_t i = 4096; i < bytes.size(); ++i) bytes[i] = static_cast<char>(0xA5 ^ (i & 0xff));
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;

  auto store = Store::Open(path);
  Status status = store.status();
  if (store.ok()) {
    status = (*store)->LoadRunHistory(run).status();
    if (status.ok()) status = (*store)->CheckIntegrity();
  }
  EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status.ToString();
  EXPECT_NE(status.message().find("corrupt"), std::string::npos) << status.message();
}

TEST(StoreBadInput, CheckIntegrityReportsADamagedIndex) {
  TempDir dir;
  const std::string path = dir.path() + "/k.db";
  MakeDatabase(path, 5);
  // Rows changed behind the index's back (writable_schema lets the test lie
  // to SQLite about the index's contents).
  Sql(path, "PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = "
            "'CREATE INDEX evaluations_by_status ON evaluations(run_id, content_hash)' "
            "WHERE name = 'evaluations_by_status';");
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  Status status = (*store)->CheckIntegrity();
  EXPECT_EQ(status.code(), StatusCode::kDataLoss) << status.ToString();
}

TEST(StoreBadInput, ADatabaseFromANewerKsearchIsRefusedAndLeftAlone) {
  TempDir dir;
  const std::string path = dir.path() + "/k.db";
  MakeDatabase(path);
  Sql(path, "PRAGMA user_version = " + std::to_string(Store::SchemaVersion() + 7));
  const std::string before = Contents(path);
  auto store = Store::Open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("newer ksearch"), std::string::npos) << store.status().message();
  EXPECT_EQ(Contents(path), before);
}

TEST(StoreBadInput, ADatabaseFromAnOlderKsearchIsMigratedKeepingItsRuns) {
  TempDir dir;
  const std::string path = dir.path() + "/k.db";
  {
    // Schema version 1, as the first release wrote it.
    internal::Database::OpenOptions open;
    auto db = internal::Database::Open(path, open);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA journal_mode = WAL").ok());
    ASSERT_TRUE(internal::Migrate(**db, 0, 1).ok());
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO runs (problem_name, problem_fingerprint, problem_json, strategy, "
                           "options_json, seed, ksearch_version, nvrtc_version, driver_version, device_name, "
                           "device_arch, host, pid, started_unix_ms, status) VALUES ('old', 'f', '{}', 'tune', "
                           "'{}', 1, '0.0.1', '12.8', 12080, 'GPU', 'sm_80', 'h', 1, 1, 'completed')")
                    .ok());
  }
  Store::Options read_only;
  read_only.read_only = true;
  auto reader = Store::Open(path, read_only);
  EXPECT_EQ(reader.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(reader.status().message().find("migration"), std::string::npos);

  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto runs = (*store)->ListRuns();
  ASSERT_TRUE(runs.ok());
  ASSERT_EQ(runs->size(), 1u);
  EXPECT_EQ(runs->front().problem_name, "old");
  KernelCache cache(**store);
  EXPECT_TRUE(cache.List().ok());  // the table version 2 added
}

// Root ignores file permissions, so the read-only cases run in a child that
// has given its privileges up.
void InChildWithoutPrivileges(const std::function<void()>& body) {
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(77);
    body();
    ::_exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "child ended with status " << status;
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot drop root privileges here";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's expectations failed (see its output above)";
}

TEST(StoreBadInput, AReadOnlyFileIsRefusedForWritingAndReadableReadOnly) {
  TempDir dir;
  const std::string path = dir.path() + "/k.db";
  int64_t run = MakeDatabase(path);
  const std::string before = Contents(path);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  InChildWithoutPrivileges([&] {
    auto store = Store::Open(path);
    EXPECT_EQ(store.status().code(), StatusCode::kPermissionDenied) << store.status().ToString();
    EXPECT_NE(store.status().message().find("read-only"), std::string::npos) << store.status().message();
  });
  EXPECT_EQ(Contents(path), before);
  // A read-only folder as well: no -wal or -shm can be made beside the file.
  ASSERT_EQ(::chmod(dir.path().c_str(), 0555), 0);
  InChildWithoutPrivileges([&] {
    Store::Options options;
    options.read_only = true;
    auto store = Store::Open(path, options);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    auto history = (*store)->LoadRunHistory(run);
    ASSERT_TRUE(history.ok()) << history.status().ToString();
    EXPECT_EQ(history->entries.size(), 3u);
    Problem problem = RowSoftmaxProblem(64, 256);
    NewRun spec;
    spec.problem = &problem;
    EXPECT_EQ((*store)->CreateRun(spec).status().code(), StatusCode::kPermissionDenied);
  });
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  EXPECT_EQ(Contents(path), before);
}

// The disk fills up in the middle of a search: the write that does not fit
// fails with kResourceExhausted and leaves no trace (no candidate without its
// evaluation); what was written before stays, and the file is sound.
TEST(StoreBadInput, AFullDiskFailsTheWriteWholeAndKeepsEverythingElse) {
  TempDir dir;
  const std::string path = dir.path() + "/k.db";
  int64_t run = MakeDatabase(path, 3);
  Problem problem = RowSoftmaxProblem(64, 256);
  Candidate big = problem.start.ToCandidate("huge", "llm:m");
  big.source += "// " + std::string(4 << 20, 'z') + "\n";
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto store = Store::Open(path);
    if (!store.ok()) ::_exit(10);
    ::signal(SIGXFSZ, SIG_IGN);
    struct stat info {};
    ::stat(path.c_str(), &info);
    // Any file this process writes may grow to the database's size plus a
    // little: the 4 MiB candidate cannot fit, as on a full disk.
    struct rlimit limit {};
    limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(info.st_size + 64 * 1024);
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) ::_exit(11);
    Status status = (*store)->RecordEvaluation(run, big, FakeVerdict(big, FakeDevice()));
    if (status.code() != StatusCode::kResourceExhausted) {
      std::fprintf(stderr, "expected RESOURCE_EXHAUSTED, got %s\n", status.ToString().c_str());
      ::_exit(12);
    }
    if (status.message().find("disk is full") == std::string::npos) ::_exit(13);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  auto store = Store::Open(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  EXPECT_TRUE((*store)->CheckIntegrity().ok());
  auto history = (*store)->LoadRunHistory(run);
  ASSERT_TRUE(history.ok()) << history.status().ToString();
  EXPECT_EQ(history->entries.size(), 3u);
  for (const HistoryEntry& e : history->entries) EXPECT_NE(e.candidate.id, "huge");
  // And the store works again once there is room.
  EXPECT_TRUE((*store)->RecordEvaluation(run, big, FakeVerdict(big, FakeDevice())).ok());
}

}  // namespace
}  // namespace ksearch
