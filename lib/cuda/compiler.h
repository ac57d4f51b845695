// NVRTC compilation of candidate sources to cubins, with a compile cache in
// memory and on disk.
//
// NVRTC runs without a GPU, so everything here works on a CPU-only machine
// when an explicit arch ("sm_90") is given. Compile *failures* of a candidate
// are results (ok == false with the log), not errors; a Status error means
// NVRTC itself could not be used.
//
// Untrusted sources (a candidate's, CompileRequest::trusted false) compile in
// a confined helper process (cuda/compile_helper.h): NVRTC there can read only
// the toolkit's include folder, whatever the preprocessor is asked to do.
// Trusted sources (the problem's own kernels, ksearch's) compile in-process.
// Cache look-ups happen here, in the caller; only misses reach the helper.
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
#include <string_view>
#include <vector>

#include <boost/json/fwd.hpp>

#include "core/json_util.h"
#include "ksearch/evaluation.h"
#include "ksearch/status.h"

namespace ksearch::internal {

struct CompileRequest {
  std::string source;
  std::vector<std::string> options;  // candidate options and -D defines
  std::string arch;                  // "sm_90"
  std::string name = "candidate.cu"; // file name shown in the log
  // The problem's own kernels and ksearch's: compiled in-process, unconfined.
  bool trusted = false;
};

struct CompileResult {
  bool ok = false;
  bool timed_out = false;
  std::string cubin;                 // empty unless ok
  std::string log;                   // truncated with a note when too long
  std::vector<KernelResources> resources;  // from ptxas -v, per entry function
  double compile_ms = 0.0;           // of the original compile, even when cached
  bool cached = false;
  // The compile helper ended without a result (the memory limit, a crash);
  // the log says how. Not cached.
  bool helper_died = false;
  // An untrusted source compiled in-process because no confinement is
  // available here and CompilerOptions::allow_unsandboxed was set.
  bool unsandboxed = false;
};

struct CompilerOptions {
  // On-disk cache folder; empty disables the disk cache.
  std::string cache_dir;
  int64_t max_log_bytes = 64 * 1024;
  double timeout_seconds = 60.0;
  // Entries kept in memory (least recently used dropped first).
  size_t memory_entries = 512;
  // Address-space limit (RLIMIT_AS) of the compile helper.
  int64_t memory_limit_bytes = int64_t{4} << 30;
  // Where no confinement is available (no Landlock): false refuses untrusted
  // compiles (kFailedPrecondition, one line saying why); true compiles
  // them in-process, unconfined, and marks the results `unsandboxed`.
  bool allow_unsandboxed = false;
  // ksearch-compile; empty: found like ksearch-worker (worker/process.h).
  std::string helper_binary;
};

class Compiler {
 public:
  explicit Compiler(CompilerOptions options);
  Compiler(const Compiler&) = delete;
  Compiler& operator=(const Compiler&) = delete;

  // Errors: kInternal when NVRTC cannot create a program; kInvalidArgument for
  // an arch NVRTC does not support; for untrusted sources kFailedPrecondition
  // where no confinement is available (unless allow_unsandboxed) or the
  // helper could not confine itself, kNotFound when the helper is missing.
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

// Ok where untrusted sources can be compiled with these options: confinement
// is available and the helper is found, or allow_unsandboxed is set.
// Otherwise the one-line refusal (kFailedPrecondition) or kNotFound.
Status CheckUntrustedCompiles(const CompilerOptions& options);

// Runs NVRTC on `request` in this process and thread, without a time limit:
// the compile of the helper and of trusted sources. The log is escaped
// (EscapeLog) and truncated to `max_log_bytes` with a note.
CompileResult CompileWithNvrtc(const CompileRequest& request, int64_t max_log_bytes);

// The JSON of a result without the cubin (ok, timed_out, cached, log,
// compile_ms, resources as in core/evaluation_json.h), as the disk cache, the
// helper's answer and the worker protocol carry it, and back. "ok" must be
// there; the rest is optional. Errors: kInvalidArgument naming `origin` (or
// the node's) and the field.
boost::json::object CompileResultToJson(const CompileResult& result);
StatusOr<CompileResult> CompileResultFromNode(const JsonNode& node);
StatusOr<CompileResult> CompileResultFromJson(std::string_view json, std::string_view origin);

// `log` with control characters made visible, so that bytes of a source
// quoted in a log cannot drive a terminal: C0 controls other than \n and \t,
// DEL and C1 controls become \xNN (\u00NN for C1), and bytes that are not
// valid UTF-8 become \xNN. Idempotent.
std::string EscapeLog(std::string_view log);

// Parses `ptxas -v` output into per-kernel resources.
std::vector<KernelResources> ParsePtxasLog(const std::string& log);

}  // namespace ksearch::internal

#endif  // KSEARCH_CUDA_COMPILER_H_
