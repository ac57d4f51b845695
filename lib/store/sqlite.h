// A thin RAII layer over the SQLite C API: one connection, prepared
// statements, transactions, and the single place where SQLite result codes
// become ksearch Status codes.
//
// Thread safety: a Database is used by one thread at a time; the Store
// serializes access with its own mutex (the connection is opened with
// SQLITE_OPEN_NOMUTEX).
#ifndef KSEARCH_STORE_SQLITE_H_
#define KSEARCH_STORE_SQLITE_H_

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "ksearch/status.h"

namespace ksearch::internal {

class Database;

// One prepared statement. Bind parameters are 1-based, columns 0-based, as in
// SQLite. Step() returns true while a row is available.
class Statement {
 public:
  Statement(Database* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement(Statement&& other) noexcept : db_(other.db_), stmt_(other.stmt_) { other.stmt_ = nullptr; }

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, int value) { return Bind(index, static_cast<int64_t>(value)); }
  Statement& Bind(int index, double value);
  Statement& Bind(int index, std::string_view text);
  Statement& Bind(int index, const char* text) { return Bind(index, std::string_view(text)); }
  Statement& Bind(int index, const std::string& text) { return Bind(index, std::string_view(text)); }
  Statement& BindBlob(int index, std::string_view bytes);
  Statement& BindNull(int index);
  Statement& Bind(int index, const std::optional<double>& value);

  // true: a row is ready; false: done. Errors are mapped by Database::Error.
  StatusOr<bool> Step();
  // Steps once, expecting no row (INSERT, UPDATE, DDL).
  Status Run();
  void Reset();

  bool IsNull(int column) const;
  int64_t Int(int column) const;
  double Double(int column) const;
  std::optional<double> OptionalDouble(int column) const;
  std::string Text(int column) const;
  std::string Blob(int column) const;

 private:
  Database* db_;
  sqlite3_stmt* stmt_;
  Status bind_error_;
};

class Database {
 public:
  struct OpenOptions {
    bool read_only = false;
    bool create = true;
    int busy_timeout_ms = 10000;
    // Open read-only as an immutable file (SQLite's ?immutable=1): no locks,
    // no -shm. Only right when no writer can exist, e.g. a WAL database in a
    // read-only folder without its -wal file.
    bool immutable = false;
  };

  // Opens (or creates) the file. Errors as Error() maps them; kNotFound when a
  // read-only open finds no file.
  static StatusOr<std::unique_ptr<Database>> Open(const std::string& path, const OpenOptions& options);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Errors: the statement's SQL is wrong (kInternal), or the file is not a
  // database (see Error()).
  StatusOr<Statement> Prepare(std::string_view sql);
  // Runs one or more statements without results.
  Status Exec(std::string_view sql);
  // A single integer from a query such as "PRAGMA user_version".
  StatusOr<int64_t> QueryInt(std::string_view sql);

  // True when SQLite opened the file read-only (file permissions, a read-only
  // file system) although read-write was asked for.
  bool IsReadOnly() const;
  int64_t LastInsertRowId() const;
  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }

  // The Status for SQLite result `rc` from `what`, with the path and SQLite's
  // message:
  //   SQLITE_NOTADB                      kInvalidArgument ("not an SQLite database")
  //   SQLITE_CORRUPT                     kDataLoss
  //   SQLITE_FULL, ENOSPC/EDQUOT/EFBIG   kResourceExhausted ("disk full")
  //   SQLITE_READONLY, SQLITE_PERM, EACCES/EROFS  kPermissionDenied
  //   SQLITE_BUSY, SQLITE_LOCKED         kUnavailable (retryable)
  //   SQLITE_CANTOPEN                    kNotFound / kPermissionDenied by errno
  //   other I/O errors                   kUnavailable
  //   anything else                      kInternal
  Status Error(int rc, std::string_view what) const;

 private:
  Database(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  sqlite3* db_;
  std::string path_;
};

// BEGIN IMMEDIATE … COMMIT; rolled back by the destructor unless committed, so
// an early return leaves nothing half-written.
class Transaction {
 public:
  static StatusOr<std::unique_ptr<Transaction>> Begin(Database& db);
  ~Transaction();
  Status Commit();

 private:
  explicit Transaction(Database& db) : db_(db) {}
  Database& db_;
  bool done_ = false;
};

}  // namespace ksearch::internal

#endif  // KSEARCH_STORE_SQLITE_H_
