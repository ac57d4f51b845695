// KernelCache: the kernel_cache table of a ksearch database (schema.cc).
#include "ksearch/kernel_cache.h"
#include "ksearch/store.h"

#include "core/hash.h"
#include "core/plan_resolve.h"
#include "cuda/candidate_compile.h"
#include "cuda/driver.h"
#include "store/records.h"
#include "store/store_impl.h"

namespace ksearch {
namespace {

using internal::Database;
using internal::Statement;

constexpr const char kColumns[] =
    "problem_fingerprint, device_name, cc_major, cc_minor, driver_version, nvrtc_version, "
    "problem_name, arch, source, plan_json, compile_options_json, cubin, cubin_sha256, "
    "evaluation_json, run_id, candidate_id, created_unix_ms, bucket";

// The WHERE clause of one entry's full key, bound by BindKey from ?1.
constexpr const char kWhereKey[] =
    " WHERE problem_fingerprint = ?1 AND device_name = ?2 AND cc_major = ?3 AND cc_minor = ?4 "
    "AND driver_version = ?5 AND nvrtc_version = ?6 AND bucket = ?7";

void BindKey(Statement& s, const KernelCacheKey& key) {
  s.Bind(1, key.problem_fingerprint).Bind(2, key.device_name).Bind(3, key.cc_major);
  s.Bind(4, key.cc_minor).Bind(5, key.driver_version).Bind(6, key.nvrtc_version).Bind(7, key.bucket);
}

KernelCacheKey ReadKey(const Statement& s) {
  KernelCacheKey key;
  key.problem_fingerprint = s.Text(0);
  key.device_name = s.Text(1);
  key.cc_major = static_cast<int>(s.Int(2));
  key.cc_minor = static_cast<int>(s.Int(3));
  key.driver_version = static_cast<int>(s.Int(4));
  key.nvrtc_version = s.Text(5);
  key.bucket = static_cast<int>(s.Int(17));
  return key;
}

StatusOr<CachedKernel> ReadEntry(const Database& db, const Statement& s) {
  CachedKernel k;
  k.key = ReadKey(s);
  const std::string where = db.path() + ": cached kernel " + k.key.ToString();
  k.problem_name = s.Text(6);
  k.arch = s.Text(7);
  k.source = s.Text(8);
  auto plan = LaunchPlan::FromJson(s.Text(9), "plan");
  if (!plan.ok()) return DataLossError(where + ": " + plan.status().message());
  k.plan = std::move(*plan);
  auto options = internal::StringListFromJson(s.Text(10), "compile_options");
  if (!options.ok()) return DataLossError(where + ": " + options.status().message());
  k.compile_options = std::move(*options);
  k.cubin = s.Blob(11);
  if (internal::Sha256Hex(k.cubin) != s.Text(12)) {
    return DataLossError(where + ": the stored cubin does not match its checksum; remove the "
                                 "entry and tune again");
  }
  auto evaluation = internal::EvaluationFromJson(s.Text(13), "evaluation");
  if (!evaluation.ok()) return DataLossError(where + ": " + evaluation.status().message());
  k.evaluation = std::move(*evaluation);
  k.run_id = s.Int(14);
  k.candidate_id = s.Text(15);
  k.created_unix_ms = s.Int(16);
  return k;
}

// Every row `s` selects (kColumns), appended to *out.
Status ReadEntries(const Database& db, Statement& s, std::vector<CachedKernel>* out) {
  while (true) {
    KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return Status::Ok();
    KSEARCH_ASSIGN_OR_RETURN(CachedKernel k, ReadEntry(db, s));
    out->push_back(std::move(k));
  }
}

// What differs between a wanted key and a stored one, for people.
std::string Differences(const KernelCacheKey& want, const KernelCacheKey& have) {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : ", ") + part; };
  if (want.device_name != have.device_name || want.cc_major != have.cc_major ||
      want.cc_minor != have.cc_minor) {
    add("device " + have.device_name + " " + have.Arch() + " (here: " + want.device_name + " " +
        want.Arch() + ")");
  }
  if (want.driver_version != have.driver_version) {
    add("driver " + std::to_string(have.driver_version) + " (here: " +
        std::to_string(want.driver_version) + ")");
  }
  if (want.nvrtc_version != have.nvrtc_version) {
    add("NVRTC " + have.nvrtc_version + " (here: " + want.nvrtc_version + ")");
  }
  if (want.bucket != have.bucket) {
    add("bucket " + std::to_string(have.bucket) + " (here: " + std::to_string(want.bucket) + ")");
  }
  return out;
}

}  // namespace

KernelCacheKey KernelCacheKey::For(const Problem& problem, const DeviceInfo& device) {
  KernelCacheKey key;
  key.problem_fingerprint = problem.Fingerprint();
  key.device_name = device.name;
  key.cc_major = device.cc_major;
  key.cc_minor = device.cc_minor;
  key.driver_version = device.driver_version;
  key.nvrtc_version =
      device.nvrtc_version.empty() ? internal::Compiler::NvrtcVersion() : device.nvrtc_version;
  return key;
}

StatusOr<KernelCacheKey> KernelCacheKey::ForDevice(const Problem& problem, int device_ordinal) {
  KSEARCH_ASSIGN_OR_RETURN(const internal::DriverApi* api, internal::Driver());
  int count = 0;
  KSEARCH_CU(api->cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (device_ordinal < 0 || device_ordinal >= count) {
    return FailedPreconditionError("no GPU with ordinal " + std::to_string(device_ordinal) + " (" +
                                   std::to_string(count) + " visible)");
  }
  CUdevice device = 0;
  KSEARCH_CU(api->cuDeviceGet(&device, device_ordinal), "cuDeviceGet");
  DeviceInfo info;
  char name[256] = {};
  KSEARCH_CU(api->cuDeviceGetName(name, sizeof(name), device), "cuDeviceGetName");
  info.name = name;
  KSEARCH_CU(api->cuDeviceGetAttribute(&info.cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
             "cuDeviceGetAttribute");
  KSEARCH_CU(api->cuDeviceGetAttribute(&info.cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
             "cuDeviceGetAttribute");
  KSEARCH_CU(api->cuDriverGetVersion(&info.driver_version), "cuDriverGetVersion");
  info.nvrtc_version = internal::Compiler::NvrtcVersion();
  return For(problem, info);
}

std::string KernelCacheKey::Arch() const {
  return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
}

std::string KernelCacheKey::ToString() const {
  return problem_fingerprint.substr(0, 12) + " on " + device_name + " " + Arch() + ", driver " +
         std::to_string(driver_version) + ", NVRTC " + nvrtc_version +
         (bucket >= 0 ? ", bucket " + std::to_string(bucket) : "");
}

double CachedKernel::median_ms() const { return evaluation.timing ? evaluation.timing->median_ms : 0.0; }
double CachedKernel::speedup() const { return evaluation.speedup ? evaluation.speedup->ratio : 0.0; }

StatusOr<std::unique_ptr<KernelCache>> KernelCache::Open(const std::string& path) {
  return Open(path, Store::Options(), Options());
}

StatusOr<std::unique_ptr<KernelCache>> KernelCache::Open(const std::string& path,
                                                         const Store::Options& store_options,
                                                         const Options& options) {
  KSEARCH_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(path, store_options));
  auto cache = std::make_unique<KernelCache>(*store, options);
  cache->owned_ = std::move(store);
  return cache;
}

KernelCache::KernelCache(Store& store) : KernelCache(store, Options()) {}
KernelCache::KernelCache(Store& store, Options options) : store_(store), options_(std::move(options)) {}
KernelCache::~KernelCache() = default;

StatusOr<CachedKernel> KernelCache::Lookup(const KernelCacheKey& key) {
  std::optional<CachedKernel> found;
  std::vector<KernelCacheKey> near;
  Status status = internal::StoreAccess::Impl(store_).Read([&](Database& db) -> Status {
    KSEARCH_ASSIGN_OR_RETURN(Statement s,
                             db.Prepare(std::string("SELECT ") + kColumns + " FROM kernel_cache" + kWhereKey));
    BindKey(s, key);
    KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) {
      KSEARCH_ASSIGN_OR_RETURN(CachedKernel k, ReadEntry(db, s));
      found = std::move(k);
      return Status::Ok();
    }
    KSEARCH_ASSIGN_OR_RETURN(Statement others, db.Prepare(
        std::string("SELECT ") + kColumns +
        " FROM kernel_cache WHERE problem_fingerprint = ?1 ORDER BY created_unix_ms DESC LIMIT 3"));
    others.Bind(1, key.problem_fingerprint);
    while (true) {
      KSEARCH_ASSIGN_OR_RETURN(bool more, others.Step());
      if (!more) break;
      near.push_back(ReadKey(others));
    }
    return Status::Ok();
  });
  if (!status.ok()) return status;
  if (found) return std::move(*found);
  std::string message = "no cached kernel for " + key.ToString() + " in " + store_.path();
  for (const KernelCacheKey& other : near) {
    message += "; an entry for another " + Differences(key, other) + " is not used";
  }
  return NotFoundError(message);
}

StatusOr<bool> KernelCache::Put(const CachedKernel& kernel, bool replace) {
  if (kernel.cubin.empty()) return InvalidArgumentError("KernelCache::Put: the entry has no cubin");
  if (kernel.key.problem_fingerprint.empty() || kernel.key.device_name.empty()) {
    return InvalidArgumentError("KernelCache::Put: the entry's key has no problem or device");
  }
  const std::string evaluation = kernel.evaluation.ToJson();
  const std::string plan = kernel.plan.ToJson();
  const std::string options = internal::StringListToJson(kernel.compile_options);
  const std::string checksum = internal::Sha256Hex(kernel.cubin);
  bool stored = false;
  Status status = internal::StoreAccess::Impl(store_).Write([&](Database& db) -> Status {
    const KernelCacheKey& key = kernel.key;
    if (!replace) {
      KSEARCH_ASSIGN_OR_RETURN(Statement s,
                               db.Prepare(std::string("SELECT median_ms FROM kernel_cache") + kWhereKey));
      BindKey(s, key);
      KSEARCH_ASSIGN_OR_RETURN(bool row, s.Step());
      if (row) {
        std::optional<double> existing = s.OptionalDouble(0);
        double mine = kernel.median_ms();
        bool better = mine > 0 && (!existing || *existing <= 0 || mine < *existing);
        if (!better) return Status::Ok();
      }
    }
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        "INSERT OR REPLACE INTO kernel_cache (problem_fingerprint, device_name, cc_major, cc_minor, "
        "driver_version, nvrtc_version, problem_name, arch, source, plan_json, compile_options_json, "
        "cubin, cubin_sha256, median_ms, speedup, evaluation_json, run_id, candidate_id, "
        "created_unix_ms, bucket) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
        "?15, ?16, ?17, ?18, ?19, ?20, ?7)"));
    BindKey(s, key);
    s.Bind(8, kernel.problem_name).Bind(9, kernel.arch.empty() ? key.Arch() : kernel.arch);
    s.Bind(10, kernel.source).Bind(11, plan).Bind(12, options).BindBlob(13, kernel.cubin);
    s.Bind(14, checksum);
    s.Bind(15, kernel.median_ms() > 0 ? std::optional<double>(kernel.median_ms()) : std::nullopt);
    s.Bind(16, kernel.speedup() > 0 ? std::optional<double>(kernel.speedup()) : std::nullopt);
    s.Bind(17, evaluation).Bind(18, kernel.run_id).Bind(19, kernel.candidate_id);
    s.Bind(20, kernel.created_unix_ms > 0 ? kernel.created_unix_ms : internal::NowUnixMs());
    KSEARCH_RETURN_IF_ERROR(s.Run());
    stored = true;
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return stored;
}

StatusOr<std::vector<CachedKernel>> KernelCache::LookupTable(const KernelCacheKey& key) {
  std::vector<CachedKernel> out;
  Status status = internal::StoreAccess::Impl(store_).Read([&](Database& db) -> Status {
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(
        std::string("SELECT ") + kColumns +
        " FROM kernel_cache WHERE problem_fingerprint = ?1 AND device_name = ?2 AND cc_major = ?3 "
        "AND cc_minor = ?4 AND driver_version = ?5 AND nvrtc_version = ?6 AND bucket >= 0 "
        "ORDER BY bucket"));
    s.Bind(1, key.problem_fingerprint).Bind(2, key.device_name).Bind(3, key.cc_major);
    s.Bind(4, key.cc_minor).Bind(5, key.driver_version).Bind(6, key.nvrtc_version);
    return ReadEntries(db, s, &out);
  });
  if (!status.ok()) return status;
  if (out.empty()) {
    KernelCacheKey first = key;
    first.bucket = 0;
    auto missing = Lookup(first);  // its message names what the stored entries differ in
    return NotFoundError("no dispatch table for " + key.ToString() + " in " + store_.path() +
                         (missing.ok() ? std::string() : " (" + missing.status().message() + ")"));
  }
  return out;
}

StatusOr<std::vector<CachedKernel>> KernelCache::List(std::string_view problem_fingerprint) {
  std::vector<CachedKernel> out;
  Status status = internal::StoreAccess::Impl(store_).Read([&](Database& db) -> Status {
    std::string sql = std::string("SELECT ") + kColumns + " FROM kernel_cache";
    if (!problem_fingerprint.empty()) sql += " WHERE problem_fingerprint = ?1";
    sql += " ORDER BY created_unix_ms DESC";
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(sql));
    if (!problem_fingerprint.empty()) s.Bind(1, problem_fingerprint);
    return ReadEntries(db, s, &out);
  });
  if (!status.ok()) return status;
  return out;
}

Status KernelCache::Remove(const KernelCacheKey& key) {
  return internal::StoreAccess::Impl(store_).Write([&](Database& db) -> Status {
    KSEARCH_ASSIGN_OR_RETURN(Statement s, db.Prepare(std::string("DELETE FROM kernel_cache") + kWhereKey));
    BindKey(s, key);
    return s.Run();
  });
}

StatusOr<CachedKernel> KernelCache::Build(const Problem& problem, const DeviceInfo& device,
                                          const HistoryEntry& judged) const {
  const Candidate& candidate = judged.candidate;
  if (!judged.evaluation.ok()) {
    return InvalidArgumentError("candidate " + candidate.id + " was judged " +
                                std::string(ToString(judged.evaluation.status)) +
                                "; only a correct kernel goes into the cache");
  }
  if (device.cc_major <= 0) {
    return FailedPreconditionError("KernelCache::Build: the device has no compute capability");
  }
  internal::CompilerOptions compiler_options;
  compiler_options.cache_dir = internal::CubinCacheFolder(options_.compile_cache_dir);
  compiler_options.timeout_seconds = options_.compile_timeout_seconds;
  internal::Compiler compiler(compiler_options);
  KSEARCH_ASSIGN_OR_RETURN(internal::CompileResult compiled,
                           compiler.Compile(internal::RequestFor(candidate, device.CompileArch())));
  if (!compiled.ok) {
    return InvalidArgumentError("candidate " + candidate.id + " does not compile for " +
                                device.Arch() + ":\n" + compiled.log);
  }
  CachedKernel k;
  k.key = KernelCacheKey::For(problem, device);
  k.problem_name = problem.name;
  k.source = candidate.source;
  k.plan = candidate.plan;
  k.compile_options = candidate.compile_options;
  k.arch = device.Arch();
  k.cubin = std::move(compiled.cubin);
  k.evaluation = judged.evaluation;
  k.candidate_id = candidate.id;
  k.created_unix_ms = internal::NowUnixMs();
  return k;
}

StatusOr<bool> KernelCache::PutBest(const Problem& problem, const DeviceInfo& device,
                                    const HistoryEntry& best, int64_t run_id) {
  KSEARCH_ASSIGN_OR_RETURN(CachedKernel kernel, Build(problem, device, best));
  kernel.run_id = run_id;
  return Put(kernel);
}

StatusOr<int> KernelCache::PutTable(const Problem& problem, const DeviceInfo& device,
                                    const std::vector<std::optional<HistoryEntry>>& best_per_bucket,
                                    int64_t run_id) {
  if (!problem.dispatch.enabled()) {
    return InvalidArgumentError("KernelCache::PutTable: problem '" + problem.name +
                                "' declares no dispatch buckets; use PutBest");
  }
  if (best_per_bucket.size() != problem.dispatch.bucket_count()) {
    return InvalidArgumentError("KernelCache::PutTable: " + std::to_string(best_per_bucket.size()) +
                                " entries for the " + std::to_string(problem.dispatch.bucket_count()) +
                                " buckets of problem '" + problem.name + "'");
  }
  int stored = 0;
  for (size_t b = 0; b < best_per_bucket.size(); ++b) {
    if (!best_per_bucket[b]) continue;
    KSEARCH_ASSIGN_OR_RETURN(CachedKernel kernel, Build(problem, device, *best_per_bucket[b]));
    kernel.key.bucket = static_cast<int>(b);
    kernel.run_id = run_id;
    KSEARCH_ASSIGN_OR_RETURN(bool put, Put(kernel));
    stored += put;
  }
  return stored;
}

}  // namespace ksearch
