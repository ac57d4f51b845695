#include "store/sqlite.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace ksearch::internal {

Statement::~Statement() {
  if (stmt_) sqlite3_finalize(stmt_);
}

Statement& Statement::Bind(int index, int64_t value) {
  int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_.ok()) bind_error_ = db_->Error(rc, "sqlite3_bind_int64");
  return *this;
}

Statement& Statement::Bind(int index, double value) {
  int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK && bind_error_.ok()) bind_error_ = db_->Error(rc, "sqlite3_bind_double");
  return *this;
}

Statement& Statement::Bind(int index, std::string_view text) {
  int rc = sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK && bind_error_.ok()) bind_error_ = db_->Error(rc, "sqlite3_bind_text64");
  return *this;
}

Statement& Statement::BindBlob(int index, std::string_view bytes) {
  int rc = sqlite3_bind_blob64(stmt_, index, bytes.data(), bytes.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK && bind_error_.ok()) bind_error_ = db_->Error(rc, "sqlite3_bind_blob64");
  return *this;
}

Statement& Statement::BindNull(int index) {
  int rc = sqlite3_bind_null(stmt_, index);
  if (rc != SQLITE_OK && bind_error_.ok()) bind_error_ = db_->Error(rc, "sqlite3_bind_null");
  return *this;
}

Statement& Statement::Bind(int index, const std::optional<double>& value) {
  return value ? Bind(index, *value) : BindNull(index);
}

StatusOr<bool> Statement::Step() {
  if (!bind_error_.ok()) return bind_error_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  // sqlite3_step's own code can be the generic SQLITE_ERROR; the extended
  // code of the connection says what happened.
  return db_->Error(sqlite3_extended_errcode(db_->handle()), "sqlite3_step");
}

Status Statement::Run() {
  KSEARCH_ASSIGN_OR_RETURN(bool row, Step());
  (void)row;
  Reset();
  return Status::Ok();
}

void Statement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::IsNull(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }
int64_t Statement::Int(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::Double(int column) const { return sqlite3_column_double(stmt_, column); }

std::optional<double> Statement::OptionalDouble(int column) const {
  if (IsNull(column)) return std::nullopt;
  return Double(column);
}

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  if (!text) return "";
  return std::string(reinterpret_cast<const char*>(text),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

std::string Statement::Blob(int column) const {
  const void* data = sqlite3_column_blob(stmt_, column);
  if (!data) return "";
  return std::string(static_cast<const char*>(data),
                     static_cast<size_t>(sqlite3_column_bytes(stmt_, column)));
}

namespace {

// A new database's folder must exist and be writable, or SQLite's error reads
// only "unable to open database file".
Status CheckFolderWritable(const std::string& path) {
  std::string folder = std::filesystem::path(path).parent_path().string();
  if (folder.empty()) folder = ".";
  if (::access(folder.c_str(), W_OK) == 0) return Status::Ok();
  const int error = errno;
  const std::string message = path + ": cannot create the database: the folder " + folder +
                              (error == ENOENT ? " does not exist" : " cannot be written") + " (" +
                              std::strerror(error) + ")";
  if (error == ENOENT || error == ENOTDIR) return NotFoundError(message);
  return PermissionDeniedError(message);
}

}  // namespace

StatusOr<std::unique_ptr<Database>> Database::Open(const std::string& path,
                                                   const OpenOptions& options) {
  struct stat info {};
  bool exists = ::stat(path.c_str(), &info) == 0;
  if (exists && S_ISDIR(info.st_mode)) {
    return InvalidArgumentError(path + ": is a folder; expected a ksearch database file");
  }
  if (!exists && (options.read_only || !options.create)) {
    return NotFoundError(path + ": no such database (a search run with --db creates it)");
  }
  if (!exists) KSEARCH_RETURN_IF_ERROR(CheckFolderWritable(path));
  int flags = SQLITE_OPEN_NOMUTEX | (options.read_only ? SQLITE_OPEN_READONLY
                                                       : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  std::string name = path;
  if (options.immutable) {
    // A URI, so the path's '?', '#' and '%' are escaped.
    name = "file:";
    for (char c : path) {
      if (c == '?' || c == '#' || c == '%') {
        char escaped[4];
        std::snprintf(escaped, sizeof(escaped), "%%%02X", static_cast<unsigned char>(c));
        name += escaped;
      } else {
        name += c;
      }
    }
    name += "?immutable=1";
    flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_READONLY | SQLITE_OPEN_URI;
  }
  sqlite3* handle = nullptr;
  int rc = sqlite3_open_v2(name.c_str(), &handle, flags, nullptr);
  std::unique_ptr<Database> db(new Database(handle, path));
  if (rc != SQLITE_OK) {
    if (!handle) return ResourceExhaustedError(path + ": SQLite could not allocate a connection");
    return db->Error(sqlite3_extended_errcode(handle), "open");
  }
  sqlite3_extended_result_codes(handle, 1);
  sqlite3_busy_timeout(handle, options.busy_timeout_ms);
  return db;
}

Database::~Database() {
  // sqlite3_close_v2 defers the close until every statement is finalized, so
  // the order of destruction does not matter.
  if (db_) sqlite3_close_v2(db_);
}

StatusOr<Statement> Database::Prepare(std::string_view sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
  if (rc != SQLITE_OK) {
    int code = sqlite3_extended_errcode(db_);
    if ((code & 0xff) == SQLITE_ERROR) {
      return InternalError(path_ + ": SQL rejected: " + sqlite3_errmsg(db_) + " in: " +
                           std::string(sql.substr(0, 200)));
    }
    return Error(code, "sqlite3_prepare_v2");
  }
  return Statement(this, stmt);
}

Status Database::Exec(std::string_view sql) {
  std::string text(sql);
  char* message = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &message);
  if (message) sqlite3_free(message);
  if (rc != SQLITE_OK) return Error(sqlite3_extended_errcode(db_), "sqlite3_exec");
  return Status::Ok();
}

StatusOr<int64_t> Database::QueryInt(std::string_view sql) {
  KSEARCH_ASSIGN_OR_RETURN(Statement stmt, Prepare(sql));
  KSEARCH_ASSIGN_OR_RETURN(bool row, stmt.Step());
  if (!row) return int64_t{0};
  return stmt.Int(0);
}

bool Database::IsReadOnly() const { return sqlite3_db_readonly(db_, "main") == 1; }

int64_t Database::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }

Status Database::Error(int rc, std::string_view what) const {
  int primary = rc & 0xff;
  int os_error = db_ ? sqlite3_system_errno(db_) : 0;
  std::string detail = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  std::string message = path_ + ": " + std::string(what) + ": " + detail;
  if (os_error != 0 && primary != SQLITE_BUSY && primary != SQLITE_LOCKED) {
    message += std::string(" (") + std::strerror(os_error) + ")";
  }
  switch (primary) {
    case SQLITE_NOTADB:
      return InvalidArgumentError(path_ +
                                  ": not an SQLite database (or its first page is corrupt); "
                                  "expected a ksearch database");
    case SQLITE_CORRUPT:
      return DataLossError(path_ + ": the database is corrupt (" + detail +
                           "); restore it from a copy, or start a new one with --db");
    case SQLITE_FULL:
      return ResourceExhaustedError(message + "; the disk is full: nothing of this write was kept");
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return PermissionDeniedError(message);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return UnavailableError(message + "; another process holds the database lock, try again");
    case SQLITE_CANTOPEN:
      if (os_error == EACCES || os_error == EPERM || os_error == EROFS) {
        return PermissionDeniedError(message);
      }
      if (os_error == ENOENT) return NotFoundError(message);
      return UnavailableError(message);
    case SQLITE_NOMEM:
      return ResourceExhaustedError(message);
    case SQLITE_IOERR:
      if (os_error == ENOSPC || os_error == EDQUOT || os_error == EFBIG) {
        return ResourceExhaustedError(message + "; the disk is full: nothing of this write was kept");
      }
      if (os_error == EACCES || os_error == EPERM || os_error == EROFS) {
        return PermissionDeniedError(message);
      }
      return UnavailableError(message);
    default:
      return InternalError(message);
  }
}

StatusOr<std::unique_ptr<Transaction>> Transaction::Begin(Database& db) {
  // IMMEDIATE takes the write lock now, so two writers wait for each other at
  // BEGIN (busy timeout) instead of failing at their first write.
  KSEARCH_RETURN_IF_ERROR(db.Exec("BEGIN IMMEDIATE"));
  return std::unique_ptr<Transaction>(new Transaction(db));
}

Transaction::~Transaction() {
  if (!done_) db_.Exec("ROLLBACK").IgnoreError();
}

Status Transaction::Commit() {
  Status status = db_.Exec("COMMIT");
  if (status.ok()) done_ = true;
  // On failure the destructor rolls back (SQLite may already have).
  return status;
}

}  // namespace ksearch::internal
