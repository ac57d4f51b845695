// KernelCache: the best kernel per (problem fingerprint, device name and
// compute capability, driver version, NVRTC version), with its cubin, launch
// plan and the figures it won on. What an inference engine keeps after tuning
// an op once per GPU model, and loads at start (kernel_runner.h launches it).
//
// The key is strict: an entry whose key differs in any part — another GPU
// model, another driver, another NVRTC, a problem with other dims or tolerance
// — is never used; Lookup reports kNotFound and says which part differed, so
// the engine knows to tune again.
//
//   auto cache = ksearch::KernelCache::Open("ksearch.db");
//   auto key = ksearch::KernelCacheKey::ForDevice(problem, /*ordinal=*/0);
//   auto kernel = (*cache)->Lookup(*key);
//   if (!kernel.ok()) { … tune, then (*cache)->PutBest(problem, device, best) … }
//
// A problem with dispatch buckets (Problem::dispatch) keeps a table: one entry
// per bucket (KernelCacheKey::bucket), stored by PutTable from a search's
// best_per_bucket, read back by LookupTable, launched by
// KernelRunner::LoadTable.
//
// The cache lives in a ksearch database (store.h), in the same file as the
// runs or in a file of its own.
//
// Thread safety: a KernelCache may be shared by threads (the store serializes
// calls). CachedKernel and KernelCacheKey are plain values.
#ifndef KSEARCH_KERNEL_CACHE_H_
#define KSEARCH_KERNEL_CACHE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ksearch/candidate.h"
#include "ksearch/evaluation.h"
#include "ksearch/generator.h"
#include "ksearch/problem.h"
#include "ksearch/status.h"
#include "ksearch/store.h"

namespace ksearch {

struct KernelCacheKey {
  std::string problem_fingerprint;  // Problem::Fingerprint()
  std::string device_name;          // "NVIDIA H200"
  int cc_major = 0;                 // compute capability
  int cc_minor = 0;
  int driver_version = 0;           // cuDriverGetVersion, e.g. 13000
  std::string nvrtc_version;        // "13.0"
  // The dispatch bucket the entry serves (Problem::dispatch), -1 for the
  // whole problem. A problem with buckets has a table: one entry per bucket
  // that a search found a correct kernel for.
  int bucket = -1;

  // The key for a problem on a device as an evaluator reports it
  // (Evaluator::device()).
  static KernelCacheKey For(const Problem& problem, const DeviceInfo& device);
  // The key for a problem on this machine's GPU `device_ordinal`: asks the
  // driver. Errors: kFailedPrecondition without a driver or that GPU.
  [[nodiscard]] static StatusOr<KernelCacheKey> ForDevice(const Problem& problem,
                                                          int device_ordinal = 0);
  // "softmax@1a2b3c4d5e6f on NVIDIA H200 sm_90, driver 13000, NVRTC 13.0"
  // (", bucket 1" for a bucket's entry).
  std::string ToString() const;
  // "sm_90".
  std::string Arch() const;

  friend bool operator==(const KernelCacheKey&, const KernelCacheKey&) = default;
};

struct CachedKernel {
  KernelCacheKey key;
  std::string problem_name;
  std::string source;                        // CUDA source, as judged
  LaunchPlan plan;
  std::vector<std::string> compile_options;  // extra NVRTC options, as judged
  std::string arch;                          // the cubin's target, "sm_90"
  std::string cubin;                         // the compiled module (binary)
  Evaluation evaluation;                     // the figures it was chosen on
  int64_t run_id = 0;                        // where it came from (0: not from a run)
  std::string candidate_id;
  int64_t created_unix_ms = 0;

  // Median time in ms (0 when untimed) and speedup over the baseline (0 when
  // unknown), from the evaluation.
  double median_ms() const;
  double speedup() const;
};

class KernelCache {
 public:
  struct Options {
    // Compile cache folder used when Build compiles (as EvaluatorOptions::
    // compile_cache_dir: empty for the default, "off" to disable). Pointing
    // it where the evaluator compiled makes Build a cache hit.
    std::string compile_cache_dir;
    // NVRTC time limit for Build.
    double compile_timeout_seconds = 120.0;
  };

  // Opens (or creates) a database of its own for the cache. Errors: as
  // Store::Open.
  [[nodiscard]] static StatusOr<std::unique_ptr<KernelCache>> Open(const std::string& path);
  [[nodiscard]] static StatusOr<std::unique_ptr<KernelCache>> Open(const std::string& path,
                                                                   const Store::Options& store_options,
                                                                   const Options& options);
  // A cache in an open store, borrowed: the store must outlive the cache.
  explicit KernelCache(Store& store);
  KernelCache(Store& store, Options options);
  ~KernelCache();
  KernelCache(const KernelCache&) = delete;
  KernelCache& operator=(const KernelCache&) = delete;

  // The entry for exactly `key`. Errors: kNotFound ("no cached kernel for
  // softmax@… on NVIDIA H200 …"; when entries exist for the same problem with
  // another key, the message names the parts that differ); kDataLoss when the
  // stored cubin does not match its checksum.
  [[nodiscard]] StatusOr<CachedKernel> Lookup(const KernelCacheKey& key);
  // Stores `kernel` under kernel.key unless an entry with that key is already
  // faster (lower median; an untimed entry is replaced by a timed one), or
  // `replace` is set. Returns whether it was stored. Errors: kInvalidArgument
  // (no cubin, no key), the store's write errors.
  [[nodiscard]] StatusOr<bool> Put(const CachedKernel& kernel, bool replace = false);
  // The dispatch table for `key`'s problem and device: its entries for
  // every bucket (key.bucket is ignored), in bucket order. Errors: as Lookup
  // (kNotFound when there is no entry for any bucket).
  [[nodiscard]] StatusOr<std::vector<CachedKernel>> LookupTable(const KernelCacheKey& key);
  // Every entry, or those of one problem fingerprint; newest first.
  [[nodiscard]] StatusOr<std::vector<CachedKernel>> List(std::string_view problem_fingerprint = "");
  // Removes the entry with `key` (nothing when absent).
  [[nodiscard]] Status Remove(const KernelCacheKey& key);

  // Builds an entry for a judged candidate: compiles it with NVRTC for the
  // device's arch (deterministic, so the cubin is the one that was judged;
  // a compile-cache hit when the cache folder is shared). Errors:
  // kInvalidArgument (the evaluation is not ok, or the candidate does not
  // compile), kFailedPrecondition (no arch known).
  [[nodiscard]] StatusOr<CachedKernel> Build(const Problem& problem, const DeviceInfo& device,
                                             const HistoryEntry& judged) const;
  // Build + Put: what a search's caller does with SearchSummary::best.
  [[nodiscard]] StatusOr<bool> PutBest(const Problem& problem, const DeviceInfo& device,
                                       const HistoryEntry& best, int64_t run_id = 0);
  // Build + Put of each present entry of SearchSummary::best_per_bucket,
  // as the entry of its bucket (each kept only if faster than the stored
  // one, by its bucket's weighted time). Returns how many were stored.
  // Errors: kInvalidArgument (the problem has no dispatch buckets, or the
  // list is not one per bucket), Build's and Put's.
  [[nodiscard]] StatusOr<int> PutTable(const Problem& problem, const DeviceInfo& device,
                                       const std::vector<std::optional<HistoryEntry>>& best_per_bucket,
                                       int64_t run_id = 0);

 private:
  std::unique_ptr<Store> owned_;
  Store& store_;
  Options options_;
};

// A C++ header that embeds `kernel`'s cubin and declares, in namespace
// `name_space` (default "ksearch_kernels::PROBLEM"), the problem's dims with
// their tuned values, a struct of typed device pointers, WorkspaceBytes(dims)
// and Launch(stream, tensors, dims, workspace), which loads the module into
// the current context on first use and launches the plan with the CUDA
// driver API (the program links -lcuda). Errors: kInvalidArgument (the plan
// does not resolve against the problem).
[[nodiscard]] StatusOr<std::string> GenerateKernelHeader(const Problem& problem,
                                                         const CachedKernel& kernel,
                                                         std::string_view name_space = "");

struct ExportOptions {
  // Folder to write into (created when missing).
  std::string directory = ".";
  // The candidate to export; empty: the run's best.
  std::string candidate_id;
  // Compile target; empty: the run's device arch.
  std::string arch;
  // Compile cache folder (as EvaluatorOptions::compile_cache_dir).
  std::string compile_cache_dir;
};

// The files ExportRunKernel wrote.
struct ExportedKernel {
  std::string candidate_id;
  std::string source_path;      // DIR/NAME.cu
  std::string plan_path;        // DIR/NAME.plan.json
  std::string cubin_path;       // DIR/NAME.cubin
  std::string header_path;      // DIR/NAME.h (GenerateKernelHeader)
  std::string evaluation_path;  // DIR/NAME.evaluation.json
  // A compile-only run's kernel: compiled, never run, so neither checked for
  // correctness nor timed.
  bool never_run = false;
};

// Writes a run's kernel (source, plan, cubin, header, evaluation) into a
// folder; NAME is the problem's name. Errors: kNotFound (no such run or
// candidate, or the run has no correct kernel), kFailedPrecondition (no arch
// known: give one), kInvalidArgument (options.arch is not an arch, or the
// kernel does not compile), file errors.
[[nodiscard]] StatusOr<ExportedKernel> ExportRunKernel(Store& store, int64_t run_id,
                                                       const ExportOptions& options);

}  // namespace ksearch

#endif  // KSEARCH_KERNEL_CACHE_H_
