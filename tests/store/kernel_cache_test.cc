// The kernel cache: an entry is used only for exactly its key; the faster
// kernel wins; a damaged cubin is detected; Build compiles the judged kernel.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include "core/hash.h"
#include "ksearch/kernel_cache.h"
#include "ksearch/store.h"
#include "store_test_util.h"
#include "test_util.h"

namespace ksearch {
namespace {

using testing::BucketedSoftmax;
using testing::ExecSql;
using testing::FakeDevice;
using testing::RowSoftmaxProblem;
using testing::TempDir;

CachedKernel Entry(const Problem& problem, double median_ms, const std::string& cubin = "\x7f" "ELF fake cubin") {
  CachedKernel k;
  k.key = KernelCacheKey::For(problem, FakeDevice());
  k.problem_name = problem.name;
  k.source = problem.start.source;
  k.plan = problem.start.plan;
  k.compile_options = {"--use_fast_math"};
  k.arch = "sm_90";
  k.cubin = cubin;
  k.evaluation.status = EvalStatus::kOk;
  TimingStats t;
  t.median_ms = median_ms;
  k.evaluation.timing = t;
  k.candidate_id = "c" + std::to_string(static_cast<int>(median_ms * 100));
  return k;
}

std::unique_ptr<KernelCache> OpenCache(const std::string& path) {
  Store::Options options;
  options.sync_every_commit = false;
  auto cache = KernelCache::Open(path, options, KernelCache::Options());
  if (!cache.ok()) {
    ADD_FAILURE() << cache.status().ToString();
    std::abort();
  }
  return std::move(*cache);
}

TEST(KernelCache, ReturnsTheEntryForExactlyItsKey) {
  TempDir dir;
  auto cache = OpenCache(dir.path() + "/cache.db");
  Problem problem = RowSoftmaxProblem(64, 256);
  CachedKernel k = Entry(problem, 0.5, std::string("\x7f" "ELF\0\1\2 binary", 12));
  ASSERT_TRUE(cache->Put(k).value_or(false));
  auto found = cache->Lookup(k.key);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->cubin, k.cubin);
  EXPECT_EQ(found->plan, k.plan);
  EXPECT_EQ(found->source, k.source);
  EXPECT_EQ(found->compile_options, k.compile_options);
  EXPECT_DOUBLE_EQ(found->median_ms(), 0.5);
  EXPECT_EQ(found->candidate_id, k.candidate_id);
}

TEST(KernelCache, IgnoresAnEntryWhoseKeyDiffersInAnyPart) {
  TempDir dir;
  auto cache = OpenCache(dir.path() + "/cache.db");
  Problem problem = RowSoftmaxProblem(64, 256);
  CachedKernel k = Entry(problem, 0.5);
  ASSERT_TRUE(cache->Put(k).ok());
  struct Case {
    const char* what;
    std::function<void(KernelCacheKey&)> change;
    const char* named;  // what the message must name
  };
  const Case cases[] = {
      {"problem", [](KernelCacheKey& key) { key.problem_fingerprint = RowSoftmaxProblem(128, 256).Fingerprint(); }, ""},
      {"device name", [](KernelCacheKey& key) { key.device_name = "NVIDIA H100"; }, "device"},
      {"compute capability", [](KernelCacheKey& key) { key.cc_minor = 1; }, "device"},
      {"major capability", [](KernelCacheKey& key) { key.cc_major = 10; }, "device"},
      {"driver", [](KernelCacheKey& key) { key.driver_version = 12080; }, "driver 13000"},
      {"NVRTC", [](KernelCacheKey& key) { key.nvrtc_version = "12.8"; }, "NVRTC 13.0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    KernelCacheKey key = k.key;
    c.change(key);
    auto found = cache->Lookup(key);
    ASSERT_FALSE(found.ok());
    EXPECT_EQ(found.status().code(), StatusCode::kNotFound);
    EXPECT_NE(found.status().message().find(c.named), std::string::npos) << found.status().message();
  }
  EXPECT_TRUE(cache->Lookup(k.key).ok());
}

TEST(KernelCache, KeepsTheFasterKernelUnlessToldToReplace) {
  TempDir dir;
  auto cache = OpenCache(dir.path() + "/cache.db");
  Problem problem = RowSoftmaxProblem(64, 256);
  ASSERT_TRUE(*cache->Put(Entry(problem, 0.5)));
  EXPECT_FALSE(*cache->Put(Entry(problem, 0.7)));
  EXPECT_DOUBLE_EQ(cache->Lookup(Entry(problem, 0).key)->median_ms(), 0.5);
  EXPECT_TRUE(*cache->Put(Entry(problem, 0.4)));
  EXPECT_DOUBLE_EQ(cache->Lookup(Entry(problem, 0).key)->median_ms(), 0.4);
  EXPECT_TRUE(*cache->Put(Entry(problem, 0.9), /*replace=*/true));
  EXPECT_DOUBLE_EQ(cache->Lookup(Entry(problem, 0).key)->median_ms(), 0.9);
  auto all = cache->List();
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->size(), 1u);
  ASSERT_TRUE(cache->Remove(Entry(problem, 0).key).ok());
  EXPECT_EQ(cache->Lookup(Entry(problem, 0).key).status().code(), StatusCode::kNotFound);
}

TEST(KernelCache, DetectsADamagedCubin) {
  TempDir dir;
  const std::string path = dir.path() + "/cache.db";
  Problem problem = RowSoftmaxProblem(64, 256);
  {
    auto cache = OpenCache(path);
    ASSERT_TRUE(cache->Put(Entry(problem, 0.5)).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE kernel_cache SET cubin = X'00112233'", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto cache = OpenCache(path);
  auto found = cache->Lookup(Entry(problem, 0).key);
  EXPECT_EQ(found.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(found.status().message().find("checksum"), std::string::npos);
}

TEST(KernelCache, RefusesAnEntryWithoutCubinOrKey) {
  TempDir dir;
  auto cache = OpenCache(dir.path() + "/cache.db");
  Problem problem = RowSoftmaxProblem(64, 256);
  CachedKernel k = Entry(problem, 0.5, "");
  EXPECT_EQ(cache->Put(k).status().code(), StatusCode::kInvalidArgument);
  k = Entry(problem, 0.5);
  k.key.device_name.clear();
  EXPECT_EQ(cache->Put(k).status().code(), StatusCode::kInvalidArgument);
}

TEST(KernelCache, BuildCompilesTheJudgedKernelDeterministically) {
  TempDir dir;
  auto cache = OpenCache(dir.path() + "/cache.db");
  Problem problem = RowSoftmaxProblem(64, 256);
  HistoryEntry judged;
  judged.candidate = problem.start.ToCandidate("c7", "start");
  judged.evaluation.status = EvalStatus::kOk;
  auto a = cache->Build(problem, FakeDevice(), judged);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->cubin.substr(0, 4), std::string("\x7f" "ELF"));
  EXPECT_EQ(a->arch, "sm_90");
  EXPECT_EQ(a->key, KernelCacheKey::For(problem, FakeDevice()));
  KernelCache::Options no_disk_cache;
  no_disk_cache.compile_cache_dir = "off";
  Store::Options store_options;
  auto other = KernelCache::Open(dir.path() + "/other.db", store_options, no_disk_cache);
  ASSERT_TRUE(other.ok());
  auto b = (*other)->Build(problem, FakeDevice(), judged);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(internal::Sha256Hex(a->cubin), internal::Sha256Hex(b->cubin));

  ASSERT_TRUE(cache->PutBest(problem, FakeDevice(), judged, /*run_id=*/3).ok());
  EXPECT_EQ(cache->Lookup(a->key)->run_id, 3);

  judged.evaluation.status = EvalStatus::kWrongResult;
  EXPECT_EQ(cache->Build(problem, FakeDevice(), judged).status().code(), StatusCode::kInvalidArgument);
}

TEST(KernelCache, StoresADispatchTableOneEntryPerBucket) {
  TempDir dir;
  auto cache = OpenCache(dir.path() + "/cache.db");
  Problem problem = BucketedSoftmax();
  CachedKernel small = Entry(problem, 0.2), large = Entry(problem, 0.9), whole = Entry(problem, 0.5);
  small.key.bucket = 0;
  large.key.bucket = 1;
  ASSERT_TRUE(cache->Put(large).value_or(false));
  ASSERT_TRUE(cache->Put(small).value_or(false));
  ASSERT_TRUE(cache->Put(whole).value_or(false)) << "the whole-problem entry is a key of its own";
  auto table = cache->LookupTable(whole.key);
  ASSERT_TRUE(table.ok()) << table.status().ToString();
  ASSERT_EQ(table->size(), 2u);
  EXPECT_EQ((*table)[0].key.bucket, 0);
  EXPECT_EQ((*table)[0].candidate_id, small.candidate_id);
  EXPECT_EQ((*table)[1].key.bucket, 1);
  EXPECT_DOUBLE_EQ(cache->Lookup(whole.key)->median_ms(), 0.5);
  EXPECT_DOUBLE_EQ(cache->Lookup(large.key)->median_ms(), 0.9);
  // The faster kernel wins per bucket, not across buckets.
  CachedKernel slower_small = Entry(problem, 0.4);
  slower_small.key.bucket = 0;
  EXPECT_FALSE(cache->Put(slower_small).value_or(true));
  KernelCacheKey missing = small.key;
  missing.bucket = 2;
  auto none = cache->Lookup(missing);
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("bucket 2"), std::string::npos) << none.status().message();
  ASSERT_TRUE(cache->Remove(small.key).ok());
  EXPECT_EQ(cache->LookupTable(whole.key)->size(), 1u);
  KernelCacheKey other = whole.key;
  other.driver_version = 12080;
  auto elsewhere = cache->LookupTable(other);
  EXPECT_EQ(elsewhere.status().code(), StatusCode::kNotFound);
  EXPECT_NE(elsewhere.status().message().find("no dispatch table"), std::string::npos)
      << elsewhere.status().message();
}

TEST(KernelCache, PutTableNeedsOneEntryPerBucket) {
  TempDir dir;
  auto cache = OpenCache(dir.path() + "/cache.db");
  Problem plain = RowSoftmaxProblem(64, 256);
  auto no_buckets = cache->PutTable(plain, FakeDevice(), {std::nullopt});
  EXPECT_EQ(no_buckets.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_buckets.status().message().find("declares no dispatch buckets"), std::string::npos);
  auto wrong_size = cache->PutTable(BucketedSoftmax(), FakeDevice(), {std::nullopt});
  EXPECT_NE(wrong_size.status().message().find("1 entries for the 2 buckets"), std::string::npos)
      << wrong_size.status().message();
  EXPECT_EQ(cache->PutTable(BucketedSoftmax(), FakeDevice(), {std::nullopt, std::nullopt}).value_or(-1), 0);
}

// A database of schema version 3 (before dispatch tables) opens, and its
// entries serve the whole problem.
TEST(KernelCache, MigratesEntriesOfAnOlderDatabase) {
  TempDir dir;
  const std::string path = dir.path() + "/cache.db";
  Problem problem = RowSoftmaxProblem(64, 256);
  CachedKernel k = Entry(problem, 0.5);
  {
    auto cache = OpenCache(path);
    ASSERT_TRUE(cache->Put(k).value_or(false));
  }
  // Back to version 3's table: the same columns without the bucket.
  ExecSql(path, R"sql(
    CREATE TABLE old AS SELECT problem_fingerprint, device_name, cc_major, cc_minor, driver_version,
      nvrtc_version, problem_name, arch, source, plan_json, compile_options_json, cubin, cubin_sha256,
      median_ms, speedup, evaluation_json, run_id, candidate_id, created_unix_ms FROM kernel_cache;
    DROP TABLE kernel_cache;
    ALTER TABLE old RENAME TO kernel_cache;
    PRAGMA user_version = 3;)sql");
  auto cache = OpenCache(path);
  auto found = cache->Lookup(k.key);
  ASSERT_TRUE(found.ok()) << found.status().ToString();
  EXPECT_EQ(found->key.bucket, -1);
  EXPECT_EQ(found->cubin, k.cubin);
  CachedKernel bucketed = Entry(BucketedSoftmax(), 0.1);
  bucketed.key.bucket = 1;
  EXPECT_TRUE(cache->Put(bucketed).value_or(false));
}

}  // namespace
}  // namespace ksearch
