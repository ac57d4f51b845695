// NVRTC compilation of candidate sources to cubins, with a compile cache in
// memory and on disk.
//
// NVRTC runs without a GPU, so everything here works on a CPU-only machine
// when an explicit arch ("sm_90") is given. Compile *failures* of a candidate
// are results (ok == false with the log), not errors; a Status error means
// NVRTC itself could not be used.
//
// Thread safety: Compile() may be called concurrently from many threads.
#ifndef KSEARCH_CUDA_COMPILER_H_
#define KSEARCH_CUDA_COMPILER_H_

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ksearch/evaluation.h"
#include "ksearch/status.h"

namespace ksearch::internal {

struct CompileRequest {
  std::string source;
  std::vector<std::string> options;  // candidate options and -D defines
  std::string arch;                  // "sm_90"
  std::string name = "candidate.cu"; // file name shown in the log
};

struct CompileResult {
  bool ok = false;
  bool timed_out = false;
  std::string cubin;                 // empty unless ok
  std::string log;                   // truncated with a note when too long
  std::vector<KernelResources> resources;  // from ptxas -v, per entry function
  double compile_ms = 0.0;           // of the original compile, even when cached
  bool cached = false;
};

struct CompilerOptions {
  // On-disk cache folder; empty disables the disk cache.
  std::string cache_dir;
  int64_t max_log_bytes = 64 * 1024;
  double timeout_seconds = 60.0;
  // Entries kept in memory (least recently used dropped first).
  size_t memory_entries = 512;
};

class Compiler {
 public:
  explicit Compiler(CompilerOptions options);
  Compiler(const Compiler&) = delete;
  Compiler& operator=(const Compiler&) = delete;

  // Errors: kInternal when NVRTC cannot create a program; kInvalidArgument for
  // an arch NVRTC does not support.
  StatusOr<CompileResult> Compile(const CompileRequest& request);

  // The cache key: hash of source, options, arch, NVRTC version and the
  // in-memory stand-in headers.
  static std::string CacheKey(const CompileRequest& request);
  // "13.0".
  static std::string NvrtcVersion();
  // Archs NVRTC can target, e.g. {"sm_75", …, "sm_90", …}.
  static std::vector<std::string> SupportedArchs();
  // Folder holding the toolkit's device headers (cuda_fp16.h, cccl/ …).
  static std::string CudaIncludeDirectory();

  int64_t hits() const;
  int64_t misses() const;

 private:
  CompileResult CompileUncached(const CompileRequest& request);
  bool LoadFromDisk(const std::string& key, CompileResult* result);
  void StoreToDisk(const std::string& key, const CompileResult& result);
  void Remember(const std::string& key, const CompileResult& result);

  CompilerOptions options_;
  mutable std::mutex mutex_;
  std::list<std::string> lru_;
  std::map<std::string, std::pair<CompileResult, std::list<std::string>::iterator>> memory_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

// Parses `ptxas -v` output into per-kernel resources.
std::vector<KernelResources> ParsePtxasLog(const std::string& log);

// Rejects include directives that reach outside the toolkit and the stand-in
// headers (absolute paths, "..").
Status CheckIncludes(const std::string& source);

}  // namespace ksearch::internal

#endif  // KSEARCH_CUDA_COMPILER_H_
