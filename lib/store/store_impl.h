// The Store's implementation: one SQLite connection behind a mutex, the
// schema and its migrations.
#ifndef KSEARCH_STORE_STORE_IMPL_H_
#define KSEARCH_STORE_STORE_IMPL_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "ksearch/store.h"
#include "store/sqlite.h"

namespace ksearch::internal {

// 'ksdb': PRAGMA application_id of every ksearch database, so that another
// SQLite file is recognized as "not ours" rather than written into.
inline constexpr int32_t kApplicationId = 0x6B736462;

// The schema version this build writes, and the migrations that lead to it:
// migration i (0-based) upgrades version i to i + 1.
int LatestSchemaVersion();
// Applies migrations from `from` up to `to`, each in its own transaction that
// also sets user_version, so a failure leaves the file at the last complete
// version. Exposed for tests that build an old database.
Status Migrate(Database& db, int from, int to);

class StoreImpl {
 public:
  StoreImpl(std::unique_ptr<Database> db, Store::Options options, int schema_version)
      : db_(std::move(db)), options_(options), schema_version_(schema_version) {}

  const std::string& path() const { return db_->path(); }
  const Store::Options& options() const { return options_; }
  int schema_version() const { return schema_version_; }

  // Runs `body` under the lock in one write transaction; rolled back on any
  // error. Errors: kPermissionDenied for a read-only store, the body's.
  Status Write(const std::function<Status(Database&)>& body);
  // Runs `body` under the lock (reads see one snapshot per statement; wrap in
  // a read transaction when several statements must agree).
  Status Read(const std::function<Status(Database&)>& body);

 private:
  std::mutex mutex_;
  std::unique_ptr<Database> db_;
  Store::Options options_;
  int schema_version_;
};

// The Store's implementation, for the parts of ksearch that keep their own
// tables in the same file (the kernel cache). Store befriends this class so
// that the accessor stays out of the public API.
class StoreAccess {
 public:
  static StoreImpl& Impl(const Store& store) { return *store.impl_; }
};

}  // namespace ksearch::internal

#endif  // KSEARCH_STORE_STORE_IMPL_H_
